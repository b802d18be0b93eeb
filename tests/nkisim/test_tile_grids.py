"""NKI 0.7's tile-grid views (nl.tiles, nl.blocks, nl.alloc_tiles, nl.alloc_blocks, nl.empty_like of a grid,
NkiGrid's attributes and .data) against what their reference pages say; each test names its page."""
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from nkisim import NkiValidationError
from nkisim.emulator.errors import NkiRemovedApiError

PAGES = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated"
pytestmark = pytest.mark.usefixtures("nki_0_7")


def _inside_a_kernel(body, *arrays):
    """What body(*tensors) returns when it runs inside a one-program launch."""
    got = []

    def kernel(*xs):
        got.append(body(*xs))
    nki.jit(kernel)(*arrays)
    return got[0]


# --- the NkiTileGrid page's example, as printed there (nl.ndarray(...).data included) -----------------
@nki.jit
def copy_tile_grid(src):
    tile_shape = (128, 256)
    src_tiles = nl.tiles(src, tile_shape=tile_shape)
    dst = nl.ndarray(src.shape, dtype=src.dtype, buffer=nl.shared_hbm)
    dst_tiles = nl.tiles(dst, tile_shape=tile_shape)
    for i in range(src_tiles.shape[0]):
        for j in range(src_tiles.shape[1]):
            src_tile = src_tiles[i, j]
            tile = nl.ndarray(src_tile.element_shape, dtype=src.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=tile.data, src=src_tile.data)
            nisa.dma_copy(dst=dst_tiles[i, j].data, src=tile.data)
    return dst


@pytest.mark.parametrize("shape", [(512, 1024), (300, 200)])
def test_the_nkitilegrid_page_example_copies_every_tile_remainders_included(shape):
    # f"{PAGES}/nki.language.NkiTileGrid.html": "boundary selections expose their exact clamped extents"
    x = np.random.default_rng(0).random(shape, dtype=np.float32)
    assert np.array_equal(np.asarray(copy_tile_grid(x)), x)


# --- nl.tiles: geometry, selection, .data ---------------------------------------------------------
def test_tiles_counts_tiles_and_clamps_the_last_one():
    # f"{PAGES}/nki.language.tiles.html": tile_shape=(128, 256) over (512, 1024) is a 4 x 4 grid
    def body(x, y):
        g, r = nl.tiles(x, tile_shape=(128, 256)), nl.tiles(y, tile_shape=(128, 256))
        return (g.shape, g.tile_shape, g[1, 2].element_shape, g[1, 2].is_remainder,
                r.shape, r[2, 1].element_shape, r[2, 1].is_remainder, r[0, 0].is_remainder, r.element_shape)
    got = _inside_a_kernel(body, np.zeros((512, 1024), np.float32), np.zeros((300, 400), np.float32))
    assert got == ((4, 4), (128, 256), (128, 256), False, (3, 2), (44, 144), True, False, (300, 400))


def test_integer_indexing_keeps_a_grid_and_data_is_the_selected_region():
    # f"{PAGES}/nki.language.tiles.html" (Note): src_tiles[i, j] is a one-tile NkiTileGrid, not an NkiTensor;
    # rows src_tiles[i, :] and columns src_tiles[:, j] are selections too
    def body(x):
        g = nl.tiles(x, tile_shape=(128, 256))
        one, row, col = g[1, 2], g[3, :], g[:, 0]
        return (type(one) is nl.NkiTileGrid, isinstance(one, nl.NkiGrid), one.shape, row.shape, col.shape,
                one.data.offset, row.data.shape, col.data.shape, col.data.strides)
    got = _inside_a_kernel(body, np.zeros((512, 1024), np.float32))
    assert got == (True, True, (), (4,), (4,), 128 * 1024 + 512, (128, 1024), (512, 256), (1024, 1))


def test_an_instruction_takes_a_grids_data_not_the_grid():
    def kernel(x):
        t = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=nl.tiles(x, tile_shape=(128, 128))[0, 0])
    with pytest.raises(NkiValidationError, match=r"must be an NKI tensor, got NkiTileGrid; a tile grid's operand is "
                                                 r"its \.data"):
        nki.jit(kernel)(np.zeros((128, 256), np.float32))


@pytest.mark.parametrize("call, api", [(lambda g: nl.load(g), "nl.load"), (lambda g: nl.exp(g), "nl.exp"),
                                       (lambda g: nl.sum(g, axis=1), "nl.sum"), (lambda g: nl.transpose(g), "nl.transpose")])
def test_an_nl_callable_given_a_grid_names_its_data(call, api):
    def body(x):
        call(nl.tiles(x, tile_shape=(128, 64))[0, 0])
    with pytest.raises(NkiValidationError, match=rf"{api}: got the NkiTileGrid \(\); an NKI instruction takes a grid's "
                                                 r"tensor operand, its \.data"):
        _inside_a_kernel(body, np.zeros((256, 64), np.float32))


def test_leading_untiled_hbm_dims_are_indexed_one_slab_at_a_time():
    # f"{PAGES}/nki.language.NkiTileGrid.html": "Untiled HBM dimensions form a leading prefix and are indexed one
    # slab at a time"; an integer index takes the slab out of element_shape and .data
    def body(x):
        g = nl.tiles(x, tile_shape=(128, 64))
        t = g[2, 1, 0]
        return g.shape, g.index_step_elements, t.element_shape, t.data.shape, t.data.offset
    got = _inside_a_kernel(body, np.zeros((3, 256, 64), np.float32))
    assert got == ((3, 2, 1), (1, 128, 64), (128, 64), (128, 64), 2 * 256 * 64 + 128 * 64)


def test_an_on_chip_tensor_tiles_every_dim():
    def body(x):
        t = nl.ndarray((128, 4, 64), dtype=nl.float32, buffer=nl.sbuf)
        nl.tiles(t, tile_shape=(4, 64))
    with pytest.raises(ValueError, match="untiled leading dims are an HBM tensor's"):
        _inside_a_kernel(body, np.zeros((4, 4), np.float32))


def test_a_gapped_selection_has_no_data_and_says_so():
    # f"{PAGES}/nki.language.NkiGrid.html": is_data_representable "Return whether data can represent this
    # selection exactly"; a positive-step slice "can select cells separated by physical gaps" (empty_like page)
    def body(x):
        g = nl.tiles(x, tile_shape=(128, 128))
        every_other = g[:, ::2]
        with pytest.raises(NkiValidationError, match=r"skips cells along dim 1 .* is_data_representable is False"):
            every_other.data
        return every_other.shape, every_other.is_data_representable, every_other.index_step_elements, g[0, :].is_data_representable
    got = _inside_a_kernel(body, np.zeros((256, 512), np.float32))
    assert got == ((2, 2), False, (128, 256), True)


def test_grid_indices_are_checked():
    def body(x):
        g = nl.tiles(x, tile_shape=(128, 128))
        with pytest.raises(IndexError, match=r"grid index: 2 out of range for grid dim 0 of 2 coordinates"):
            g[2, 0]
        with pytest.raises(NkiValidationError, match="grid slices take positive steps"):
            g[::-1]
        with pytest.raises(NkiValidationError, match="3 indices for a grid of shape"):
            g[0, 0, 0]
        return [t.shape for t in g], g[-1].element_shape
    assert _inside_a_kernel(body, np.zeros((256, 384), np.float32)) == ([(3,), (3,)], (128, 384))


# --- nl.blocks ---------------------------------------------------------------------------------------
def test_blocks_group_tiles_and_tiles_of_a_block_exposes_them():
    # f"{PAGES}/nki.language.blocks.html": block_shape (2, 2) over a 4 x 4 tile grid is a 2 x 2 block grid;
    # "Call nki.language.tiles() on a selected block to expose its interior tile coordinates"
    def body(x):
        b = nl.blocks(x, tile_shape=(128, 256), block_shape=(2, 2))
        inner = nl.tiles(b[1, 0])
        return (type(b) is nl.NkiBlockGrid, b.shape, b.block_shape, b.index_step_elements, b[1, 0].element_shape,
                b[1, 0].data.offset, type(inner) is nl.NkiTileGrid, inner.shape, inner[1, 1].data.offset)
    got = _inside_a_kernel(body, np.zeros((512, 1024), np.float32))
    assert got == (True, (2, 2), (2, 2), (256, 512), (256, 512), 256 * 1024, True, (2, 2), 384 * 1024 + 256)


def test_block_shape_has_one_tile_count_per_tile_dim():
    # f"{PAGES}/nki.language.alloc_blocks.html": block_shape "Its rank must equal tile_shape"
    def body(x):
        nl.alloc_blocks(tile_shape=(128, 128), block_shape=(2,), element_shape=(256, 256), buffer=nl.sbuf,
                        dtype=nl.float32)
    with pytest.raises(ValueError, match=r"block_shape \(2,\) must have the rank of tile_shape \(128, 128\)"):
        _inside_a_kernel(body, np.zeros((4, 4), np.float32))


def test_a_tile_grid_regrouped_into_blocks_and_retiled():
    def body(x):
        g = nl.tiles(x, tile_shape=(128, 128))
        b = nl.blocks(g, block_shape=(1, 3))          # the grid's own tile_shape
        finer = nl.tiles(g[1, :], tile_shape=(64, 128))   # a new tiling of the selected region
        return b.shape, b[0, 1].element_shape, finer.shape, finer[1, 2].data.offset
    got = _inside_a_kernel(body, np.zeros((256, 512), np.float32))
    assert got == ((2, 2), (128, 128), (2, 4), 192 * 512 + 256)


# --- allocation ---------------------------------------------------------------------------------------
@nki.jit
def exp_by_rows(x):
    """One DMA per tile row into an SBUF grid (rows of tiles are consecutive slots), exp, back out."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    src, dst = nl.tiles(x, tile_shape=(128, 128)), nl.tiles(out, tile_shape=(128, 128))
    buf = nl.alloc_tiles(tile_shape=(128, 128), element_shape=x.shape, buffer=nl.sbuf, dtype=x.dtype)
    for i in range(src.shape[0]):
        nisa.dma_copy(dst=buf[i, :].data, src=src[i, :].data)
        nisa.activation(dst=buf[i, :].data, op=nl.exp, data=buf[i, :].data)
        nisa.dma_copy(dst=dst[i, :].data, src=buf[i, :].data)
    return out


def test_an_sbuf_tile_grid_holds_every_tile_remainders_included():
    # f"{PAGES}/nki.language.alloc_tiles.html"; alloc_blocks page: "SBUF and PSUM use the same dense rank-two
    # capacity layout as nki.language.alloc_tiles()"
    x = np.random.default_rng(1).random((300, 200), dtype=np.float32)
    assert np.allclose(np.asarray(exp_by_rows(x)), np.exp(x), rtol=1e-3)


def test_an_sbuf_grid_gives_each_tile_a_whole_slot_along_the_free_dim():
    def body(x):
        g = nl.alloc_tiles(tile_shape=(128, 256), element_shape=(300, 600), buffer=nl.sbuf, dtype=nl.bfloat16)
        with pytest.raises(NkiValidationError, match=r"spans \[3, 1\] tiles"):
            g[:, 0].data        # three tiles down the partition dim: no one SBUF tensor holds them
        return (g.shape, g[2, 2].data.shape, g[1, 0].data.byte_offset,
                g[2, 2].data.byte_offset, g[0, :].data.shape, g.is_data_representable, g.buffer is nl.sbuf)
    got = _inside_a_kernel(body, np.zeros((4, 4), np.float32))
    # slots in row-major tile order, 256 bf16 (512 B) each: tile (1, 0) is slot 3, tile (2, 2) slot 8
    assert got == ((3, 3), (44, 88), 3 * 512, 8 * 512, (128, 600), False, True)


def test_an_hbm_grid_is_the_compact_element_extent():
    def body(x):
        g = nl.alloc_blocks(tile_shape=(128, 128), block_shape=(1, 2), element_shape=(2, 256, 320),
                            buffer=nl.shared_hbm, dtype=nl.float32, name="staging")
        return g.shape, g.block_shape, g.data.shape, g[1, 1, 1].element_shape, g[1, 1, 1].data.offset
    got = _inside_a_kernel(body, np.zeros((4, 4), np.float32))
    assert got == ((2, 2, 2), (1, 2), (2, 256, 320), (128, 64), 256 * 320 + 128 * 320 + 256)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(tile_shape=[128, 128]), TypeError, "tile_shape must be a tuple of exact Python ints"),
    (dict(tile_shape=(128,)), ValueError, r"tile_shape \(128,\) needs at least two dims"),
    (dict(tile_shape=(0, 128)), ValueError, r"tile_shape \(0, 128\) must have positive entries"),
    (dict(tile_shape=(1, 128, 128)), ValueError, "at most the tensor's 2"),
    (dict(buffer="sbuf"), TypeError, "buffer must be an NKI MemoryRegion"),
    (dict(element_shape=(256, 128.0)), TypeError, "element_shape must be a tuple of exact Python ints"),
])
def test_alloc_tiles_rejects_what_its_page_raises_on(kwargs, error, match):
    # f"{PAGES}/nki.language.alloc_tiles.html", "Raises": TypeError / ValueError
    args = {**dict(tile_shape=(128, 128), element_shape=(256, 128), buffer=nl.sbuf, dtype=nl.float32), **kwargs}
    with pytest.raises(error, match=match):
        _inside_a_kernel(lambda x: nl.alloc_tiles(**args), np.zeros((4, 4), np.float32))


# --- nl.empty_like of a grid ----------------------------------------------------------------------------
def test_empty_like_keeps_the_grid_geometry_and_packs_gapped_cells():
    # v2.33.0 nki.language.empty_like page: "Grid inputs preserve the concrete grid type, navigation shape, tile
    # shape, block grouping, and exact remainder extents"; gapped cells are packed densely
    def body(x):
        g = nl.tiles(x, tile_shape=(128, 128))
        gapped = nl.empty_like(g[1, ::2], buffer=nl.shared_hbm)
        b = nl.empty_like(nl.blocks(x, tile_shape=(128, 128), block_shape=(1, 2))[1, :], dtype=nl.bfloat16,
                          buffer=nl.sbuf)
        return (type(gapped) is nl.NkiTileGrid, gapped.shape, gapped.element_shape, gapped.data.shape,
                type(b) is nl.NkiBlockGrid, b.shape, b.block_shape, b.element_shape, b[1].element_shape,
                b.dtype == nl.bfloat16, b.buffer is nl.sbuf)
    got = _inside_a_kernel(body, np.zeros((200, 400), np.float32))
    assert got == (True, (2,), (72, 256), (72, 256), True, (2,), (1, 2), (72, 400), (72, 144), True, True)


def test_empty_like_of_a_grid_with_transpose_axes_is_refused():
    def body(x):
        nl.empty_like(nl.tiles(x, tile_shape=(128, 128))[0, 0], buffer=nl.sbuf, transpose_axes=(1, 0))
    with pytest.raises(NkiValidationError, match="transpose_axes with a tile-grid input is not emulated"):
        _inside_a_kernel(body, np.zeros((128, 128), np.float32))


# --- versions -----------------------------------------------------------------------------------------
def test_nkitensor_data_is_nki_0_7s(nki_0_6):
    # the tile grids and NkiTensor.data arrive with NKI 0.7 (its release notes)
    def body(x):
        with pytest.raises(NkiRemovedApiError, match="NkiTensor.data is not in NKI 0.6"):
            x.data
        return hasattr(x, "data"), hasattr(nl, "tiles")
    assert _inside_a_kernel(body, np.zeros((4, 4), np.float32)) == (False, False)
