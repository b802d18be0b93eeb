"""NKI 0.7's tile-grid views (nl.tiles, nl.blocks, nl.alloc_tiles, nl.alloc_blocks, nl.empty_like of a grid,
NkiGrid's attributes and .data) against what their reference pages say; each test names its page."""
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

import nkisim
from nkisim import NkiValidationError
from nkisim.emulator.errors import NkiRemovedApiError

from helpers import inside_a_kernel

PAGES = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated"
pytestmark = pytest.mark.usefixtures("nki_0_7")


# --- tile by tile through SBUF: an nl.ndarray shaped by each tile's element_shape, and NkiTensor.data (the
# tensor itself), the pattern of the NkiTileGrid page; the page's own example runs outside this repository -------
@nki.jit
def negate_tile_by_tile(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    grid_in, grid_out = nl.tiles(x, tile_shape=(128, 256)), nl.tiles(out, tile_shape=(128, 256))
    for r in range(grid_in.shape[0]):
        for c in range(grid_in.shape[1]):
            staged = nl.ndarray(grid_in[r, c].element_shape, dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=staged.data, src=grid_in[r, c].data)
            nisa.tensor_scalar(dst=staged, data=staged, op0=nl.multiply, operand0=-1.0)
            nisa.dma_copy(dst=grid_out[r, c].data, src=staged.data)
    return out


@pytest.mark.parametrize("shape", [(512, 1024), (300, 200)])
def test_every_tile_goes_through_sbuf_remainders_included(shape):
    # f"{PAGES}/nki.language.NkiTileGrid.html": "boundary selections expose their exact clamped extents"
    x = np.random.default_rng(0).random(shape, dtype=np.float32)
    assert np.array_equal(np.asarray(negate_tile_by_tile(x)), -x)


# --- nl.tiles: geometry, selection, .data ---------------------------------------------------------
def test_tiles_counts_tiles_and_clamps_the_last_one():
    # f"{PAGES}/nki.language.tiles.html": tile_shape=(128, 256) over (512, 1024) is a 4 x 4 grid
    def body(x, y):
        g, r = nl.tiles(x, tile_shape=(128, 256)), nl.tiles(y, tile_shape=(128, 256))
        return (g.shape, g.tile_shape, g[1, 2].element_shape, g[1, 2].is_remainder,
                r.shape, r[2, 1].element_shape, r[2, 1].is_remainder, r[0, 0].is_remainder, r.element_shape)
    got = inside_a_kernel(body, np.zeros((512, 1024), np.float32), np.zeros((300, 400), np.float32))
    assert got == ((4, 4), (128, 256), (128, 256), False, (3, 2), (44, 144), True, False, (300, 400))


def test_integer_indexing_keeps_a_grid_and_data_is_the_selected_region():
    # f"{PAGES}/nki.language.tiles.html" (Note): src_tiles[i, j] is a one-tile NkiTileGrid, not an NkiTensor;
    # rows src_tiles[i, :] and columns src_tiles[:, j] are selections too
    def body(x):
        g = nl.tiles(x, tile_shape=(128, 256))
        one, row, col = g[1, 2], g[3, :], g[:, 0]
        return (type(one) is nl.NkiTileGrid, isinstance(one, nl.NkiGrid), one.shape, row.shape, col.shape,
                one.data.offset, row.data.shape, col.data.shape, col.data.strides)
    got = inside_a_kernel(body, np.zeros((512, 1024), np.float32))
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
        inside_a_kernel(body, np.zeros((256, 64), np.float32))


def test_leading_untiled_hbm_dims_are_indexed_one_slab_at_a_time():
    # f"{PAGES}/nki.language.NkiTileGrid.html": "Untiled HBM dimensions form a leading prefix and are indexed one
    # slab at a time"; an integer index takes the slab out of element_shape and .data
    def body(x):
        g = nl.tiles(x, tile_shape=(128, 64))
        t = g[2, 1, 0]
        return g.shape, g.index_step_elements, t.element_shape, t.data.shape, t.data.offset
    got = inside_a_kernel(body, np.zeros((3, 256, 64), np.float32))
    assert got == ((3, 2, 1), (1, 128, 64), (128, 64), (128, 64), 2 * 256 * 64 + 128 * 64)


def test_an_on_chip_tensor_tiles_every_dim():
    def body(x):
        t = nl.ndarray((128, 4, 64), dtype=nl.float32, buffer=nl.sbuf)
        nl.tiles(t, tile_shape=(4, 64))
    with pytest.raises(ValueError, match="untiled leading dims are an HBM tensor's"):
        inside_a_kernel(body, np.zeros((4, 4), np.float32))


def test_a_gapped_hbm_selection_has_data_that_keeps_the_gaps():
    # f"{PAGES}/nki.language.interleaved_indices.html": applied to a grid it "creates a gapped tile or block view.
    # NkiGrid.shape reports the number of owned cells, while NkiGrid.index_step_elements includes the round-robin
    # stride. Access through NkiGrid.data preserves those gaps in the native access pattern."
    def body(x):
        g = nl.tiles(x, tile_shape=(128, 128))
        every_other = g[:, ::2]
        row = g[1, 1::2].data
        clamped = nl.tiles(x[:, 0:448], tile_shape=(128, 128))[:, 1::2]     # tiles 1 and 3, the last 64 wide
        with pytest.raises(NkiValidationError, match=r"skips cells along dim 1 and its last cell is a clamped"):
            clamped.data
        return (every_other.shape, every_other.index_step_elements, every_other.is_data_representable,
                every_other.data.shape, row.shape, row.get_pattern(), row.offset, clamped.is_data_representable)
    got = inside_a_kernel(body, np.zeros((256, 512), np.float32))
    assert got == ((2, 2), (128, 256), True, (256, 2, 128), (128, 2, 128), [[512, 128], [256, 2], [1, 128]],
                   128 * 512 + 128, False)


def test_a_gapped_selection_moves_exactly_its_tiles():
    @nki.jit
    def odd_tiles(x):
        out = nl.ndarray((x.shape[0], x.shape[1] // 2), dtype=x.dtype, buffer=nl.shared_hbm)
        picked = nl.tiles(x, tile_shape=(128, 64))[0, 1::2]
        staged = nl.empty_like(picked, buffer=nl.sbuf)
        nisa.dma_copy(dst=staged.data, src=picked.data)
        nisa.dma_copy(dst=out, src=staged.data)
        return out
    x = np.random.default_rng(8).random((128, 512), dtype=np.float32)
    want = x.reshape(128, 4, 2, 64)[:, :, 1].reshape(128, 256)
    assert np.array_equal(np.asarray(odd_tiles(x)), want)


def test_an_on_chip_gapped_selection_has_no_data_and_says_so():
    def body(x):
        g = nl.alloc_tiles(tile_shape=(128, 128), element_shape=(128, 512), buffer=nl.sbuf, dtype=nl.float32)
        with pytest.raises(NkiValidationError, match=r"skips cells along dim 1 .* is_data_representable is False"):
            g[0, ::2].data
        return g[0, ::2].is_data_representable
    assert inside_a_kernel(body, np.zeros((4, 4), np.float32)) is False


# --- nl.contiguous_indices / nl.interleaved_indices ---------------------------------------------------
def test_shard_slices_are_the_pages_examples():
    # f"{PAGES}/nki.language.contiguous_indices.html" and ...interleaved_indices.html, extent=10, num_shards=3
    got = [(nl.contiguous_indices(10, shard_id=i, num_shards=3), nl.interleaved_indices(10, shard_id=i, num_shards=3))
           for i in range(3)]
    assert got == [(slice(0, 4), slice(0, 10, 3)), (slice(4, 7), slice(1, 10, 3)), (slice(7, 10), slice(2, 10, 3))]


@pytest.mark.parametrize("args, error, match", [
    ((10.0, 0, 2), TypeError, "extent must be an exact Python int"),
    ((10, True, 2), TypeError, "shard_id must be an exact Python int"),
    ((10, 0, np.int64(2)), TypeError, "num_shards must be an exact Python int"),
    ((3, 0, 4), ValueError, r"1 <= num_shards <= extent \(no shard is empty\)"),
    ((10, 3, 3), ValueError, "0 <= shard_id < num_shards"),
])
@pytest.mark.parametrize("helper", ["contiguous_indices", "interleaved_indices"])
def test_shard_slices_take_exact_compile_time_ints(helper, args, error, match):
    extent, shard_id, num_shards = args
    with pytest.raises(error, match=match):
        getattr(nl, helper)(extent, shard_id=shard_id, num_shards=num_shards)


@nki.jit
def scale_my_columns(x):
    """Each NeuronCore of an LNC=2 launch scales the tile columns its shard owns; the body is the unsharded one."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    src, dst = nl.tiles(x, tile_shape=(128, 128)), nl.tiles(out, tile_shape=(128, 128))
    mine = nl.interleaved_indices(src.shape[1], shard_id=nl.program_id(0), num_shards=nl.num_programs(0))
    src, dst = src[:, mine], dst[:, mine]
    for i in range(src.shape[0]):
        for j in range(src.shape[1]):
            t = nl.empty_like(src[i, j], buffer=nl.sbuf)
            nisa.dma_copy(dst=t.data, src=src[i, j].data)
            nisa.tensor_scalar(dst=t.data, data=t.data, op0=nl.multiply, operand0=3.0)
            nisa.dma_copy(dst=dst[i, j].data, src=t.data)
    return out


@pytest.mark.parametrize("lnc", [1, 2])
def test_a_shard_slice_divides_tile_columns_between_neuroncores(lnc):
    # the tiled-grid-selection tutorial: "divide tile columns between NeuronCores with standard or custom slices
    # while keeping the downstream kernel body unchanged"
    x = np.random.default_rng(9).random((256, 640), dtype=np.float32)      # 5 tile columns: 3 + 2 under LNC=2
    r = nkisim.run(scale_my_columns, x, lnc=lnc)
    assert np.allclose(np.asarray(r.outputs), 3 * x)
    tiles_per_core = [len(r.trace.program(k)) // 3 for k in range(lnc)]      # load, scale, store per tile
    assert tiles_per_core == ([10] if lnc == 1 else [6, 4])


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
    assert inside_a_kernel(body, np.zeros((256, 384), np.float32)) == ([(3,), (3,)], (128, 384))


# --- nl.blocks ---------------------------------------------------------------------------------------
def test_blocks_group_tiles_and_tiles_of_a_block_exposes_them():
    # f"{PAGES}/nki.language.blocks.html": block_shape (2, 2) over a 4 x 4 tile grid is a 2 x 2 block grid;
    # "Call nki.language.tiles() on a selected block to expose its interior tile coordinates"
    def body(x):
        b = nl.blocks(x, tile_shape=(128, 256), block_shape=(2, 2))
        inner = nl.tiles(b[1, 0])
        return (type(b) is nl.NkiBlockGrid, b.shape, b.block_shape, b.index_step_elements, b[1, 0].element_shape,
                b[1, 0].data.offset, type(inner) is nl.NkiTileGrid, inner.shape, inner[1, 1].data.offset)
    got = inside_a_kernel(body, np.zeros((512, 1024), np.float32))
    assert got == (True, (2, 2), (2, 2), (256, 512), (256, 512), 256 * 1024, True, (2, 2), 384 * 1024 + 256)


def test_block_shape_has_one_tile_count_per_tile_dim():
    # f"{PAGES}/nki.language.alloc_blocks.html": block_shape "Its rank must equal tile_shape"
    def body(x):
        nl.alloc_blocks(tile_shape=(128, 128), block_shape=(2,), element_shape=(256, 256), buffer=nl.sbuf,
                        dtype=nl.float32)
    with pytest.raises(ValueError, match=r"block_shape \(2,\) must have the rank of tile_shape \(128, 128\)"):
        inside_a_kernel(body, np.zeros((4, 4), np.float32))


def test_a_tile_grid_regrouped_into_blocks_and_retiled():
    def body(x):
        g = nl.tiles(x, tile_shape=(128, 128))
        b = nl.blocks(g, block_shape=(1, 3))          # the grid's own tile_shape
        finer = nl.tiles(g[1, :], tile_shape=(64, 128))   # a new tiling of the selected region
        return b.shape, b[0, 1].element_shape, finer.shape, finer[1, 2].data.offset
    got = inside_a_kernel(body, np.zeros((256, 512), np.float32))
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
    got = inside_a_kernel(body, np.zeros((4, 4), np.float32))
    # slots in row-major tile order, 256 bf16 (512 B) each: tile (1, 0) is slot 3, tile (2, 2) slot 8
    assert got == ((3, 3), (44, 88), 3 * 512, 8 * 512, (128, 600), False, True)


def test_an_hbm_grid_is_the_compact_element_extent():
    def body(x):
        g = nl.alloc_blocks(tile_shape=(128, 128), block_shape=(1, 2), element_shape=(2, 256, 320),
                            buffer=nl.shared_hbm, dtype=nl.float32, name="staging")
        return g.shape, g.block_shape, g.data.shape, g[1, 1, 1].element_shape, g[1, 1, 1].data.offset
    got = inside_a_kernel(body, np.zeros((4, 4), np.float32))
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
        inside_a_kernel(lambda x: nl.alloc_tiles(**args), np.zeros((4, 4), np.float32))


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
    got = inside_a_kernel(body, np.zeros((200, 400), np.float32))
    assert got == (True, (2,), (72, 256), (72, 256), True, (2,), (1, 2), (72, 400), (72, 144), True, True)


@nki.jit
def transpose_by_tiles(x):
    """out = x.T, one dma_transpose per tile into an SBUF tile allocated transposed."""
    out = nl.ndarray(x.shape[::-1], dtype=x.dtype, buffer=nl.shared_hbm)
    src, dst = nl.tiles(x, tile_shape=(128, 64)), nl.tiles(out, tile_shape=(64, 128))
    for i in range(src.shape[0]):
        for j in range(src.shape[1]):
            t = nl.empty_like(src[i, j], buffer=nl.sbuf, transpose_axes=(1, 0))
            nisa.dma_transpose(dst=t.data, src=src[i, j].data)
            nisa.dma_copy(dst=dst[j, i].data, src=t.data)
    return out


def test_empty_like_of_one_tile_with_transpose_axes_is_its_transposed_destination():
    # v2.33.0 nki.language.empty_like page: "transpose_axes prepares an SBUF destination for a later
    # nki.isa.dma_transpose()"; remainder tiles keep their exact (transposed) extents
    x = np.random.default_rng(10).random((200, 100), dtype=np.float32).astype(nl.bfloat16)
    assert np.array_equal(np.asarray(transpose_by_tiles(x)), x.T)

    def body(x):
        t = nl.empty_like(nl.tiles(x, tile_shape=(128, 64))[1, 1], buffer=nl.sbuf, transpose_axes=(1, 0))
        return type(t) is nl.NkiTileGrid, t.shape, t.tile_shape, t.element_shape, t.data.shape, t.buffer is nl.sbuf
    assert inside_a_kernel(body, x) == (True, (), (64, 128), (36, 72), (36, 72), True)


@pytest.mark.parametrize("select, kwargs, match", [
    (lambda g: g[0, :], {}, r"transpose_axes with a selection of several tiles \(grid shape \(2,\)"),
    (lambda g: g[0, 0], {"buffer": nl.shared_hbm}, "transpose_axes prepares an SBUF destination"),
    (lambda g: g[0, 0], {"transpose_axes": (0, 1)}, r"transpose_axes=\(0, 1\) for a rank-2 tensor"),
])
def test_empty_like_of_a_grid_with_transpose_axes_is_checked(select, kwargs, match):
    def body(x):
        args = {"buffer": nl.sbuf, "transpose_axes": (1, 0), **kwargs}
        with pytest.raises(NkiValidationError, match=match):
            nl.empty_like(select(nl.tiles(x, tile_shape=(128, 128))), **args)
    inside_a_kernel(body, np.zeros((128, 256), np.float32))


# --- versions -----------------------------------------------------------------------------------------
def test_nkitensor_data_is_nki_0_7s(nki_0_6):
    # the tile grids and NkiTensor.data arrive with NKI 0.7 (its release notes)
    def body(x):
        with pytest.raises(NkiRemovedApiError, match="NkiTensor.data is not in NKI 0.6"):
            x.data
        return hasattr(x, "data"), hasattr(nl, "tiles")
    assert inside_a_kernel(body, np.zeros((4, 4), np.float32)) == (False, False)


# --- runtime indices: the tiled-grid-selection tutorial ------------------------------------------------
# https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/guides/tutorials/tiled-grid-selection.html: "NKI
# represents a runtime value as a NkiScalar, or as an SBUF NkiTensor shaped (1, 1) for one coordinate or (K, 1) for
# a vector of row indices. Tile grids accept these as indices"; the docs' gather example gathers index tiles of
# 128 rows "including a partial final index tile".
def _to_sbuf(hbm_view):
    t = nl.ndarray(hbm_view.shape, dtype=hbm_view.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=hbm_view)
    return t


@nki.jit
def gather_rows(table, rows, oob=nisa.oob_mode.error):
    """out[r] = table[rows[r]], 128 rows per index tile; skipped rows keep out's zeros."""
    out = nl.ndarray((rows.shape[0], table.shape[1]), dtype=table.dtype, buffer=nl.shared_hbm)
    table_g, out_g = nl.tiles(table, tile_shape=(128, 128)), nl.tiles(out, tile_shape=(128, 128))
    rows_g = nl.tiles(rows, tile_shape=(128, 1))
    for i in range(out_g.shape[0]):
        idx = _to_sbuf(rows_g[i, 0].data)
        for j in range(out_g.shape[1]):
            picked = nl.empty_like(table_g[idx, j], buffer=nl.sbuf)
            nisa.memset(dst=picked.data, value=0.0)
            nisa.dma_copy(dst=picked.data, src=table_g[idx, j].data, oob_mode=oob)
            nisa.dma_copy(dst=out_g[i, j].data, src=picked.data)
    return out


@nki.jit
def scatter_rows(src, rows, n_out):
    """out[rows[r]] = src[r] (out zero elsewhere): the row indices on the destination grid."""
    out = nl.ndarray((n_out, src.shape[1]), dtype=src.dtype, buffer=nl.shared_hbm)
    out_g, src_g = nl.tiles(out, tile_shape=(128, 128)), nl.tiles(src, tile_shape=(128, 128))
    zeros = nl.ndarray((128, 128), dtype=src.dtype, buffer=nl.sbuf)
    nisa.memset(dst=zeros, value=0.0)
    for i in range(out_g.shape[0]):
        for j in range(out_g.shape[1]):
            nisa.dma_copy(dst=out_g[i, j].data, src=zeros[0:out_g[i, j].element_shape[0], :])
    rows_g = nl.tiles(rows, tile_shape=(128, 1))
    for i in range(src_g.shape[0]):
        idx = _to_sbuf(rows_g[i, 0].data)
        for j in range(src_g.shape[1]):
            tile = _to_sbuf(src_g[i, j].data)
            nisa.dma_copy(dst=out_g[idx, j].data, src=tile)
    return out


def test_row_indices_gather_rows_partial_final_index_tile_included():
    rng = np.random.default_rng(3)
    table = rng.random((384, 256), dtype=np.float32)
    rows = rng.integers(0, 384, size=(200, 1)).astype(np.int32)      # index tiles of 128 and 72 rows
    assert np.array_equal(np.asarray(gather_rows(table, rows)), table[rows[:, 0]])


def test_row_indices_on_the_destination_scatter_rows():
    rng = np.random.default_rng(4)
    src = rng.random((200, 256), dtype=np.float32)
    rows = rng.permutation(300)[:200].reshape(200, 1).astype(np.int32)
    want = np.zeros((300, 256), np.float32)
    want[rows[:, 0]] = src
    assert np.array_equal(np.asarray(scatter_rows(src, rows, 300)), want)


def test_a_row_index_outside_the_tensor_is_an_error_or_skipped_as_oob_mode_says():
    # dma_copy's oob_mode: error "Raises an error when encountering out-of-bounds indices", skip "Silently skip"
    table = np.arange(384 * 128, dtype=np.float32).reshape(384, 128)
    rows = np.array([[5], [384], [7]], np.int32)
    with pytest.raises(NkiValidationError, match=r"runtime grid index value\(s\) \[384\] select outside the grid "
                                                 r"selection \(valid values: 0..383"):
        gather_rows(table, rows)
    got = np.asarray(gather_rows(table, rows, nisa.oob_mode.skip))
    assert np.array_equal(got[[0, 2]], table[[5, 7]]) and not got[1].any()


@nki.jit
def tile_at(x, where, scalar=False, oob=nisa.oob_mode.error):
    """Tile (1, where) of x, the column coordinate read on device: a (1, 1) SBUF tensor, or an NkiScalar."""
    g = nl.tiles(x, tile_shape=(128, 128))
    col = _to_sbuf(where)
    if scalar:
        col = nisa.scalar_load(col)
    tile = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=tile, value=-1.0)
    nisa.dma_copy(dst=tile, src=g[1, col].data, oob_mode=oob)
    out = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=tile)
    return out


@pytest.mark.parametrize("scalar", [False, True], ids=["1x1_sbuf_tensor", "nkiscalar"])
def test_a_runtime_coordinate_selects_a_whole_tile(scalar):
    x = np.random.default_rng(5).random((384, 400), dtype=np.float32)     # 3 x 4 tiles, the last 16 columns wide
    got = np.asarray(tile_at(x, np.array([[2]], np.int32), scalar))
    assert np.array_equal(got, x[128:256, 256:384])


def test_a_runtime_coordinate_whose_whole_tile_leaves_the_tensor_is_out_of_bounds():
    # the selection's extent cannot depend on a device value: a runtime coordinate moves a whole tile, so the
    # 16-column remainder tile (coordinate 3) is out of bounds; oob_mode.skip leaves the destination as it was
    x = np.random.default_rng(6).random((384, 400), dtype=np.float32)
    with pytest.raises(NkiValidationError, match=r"runtime grid index value\(s\) \[3\] select outside the grid "
                                                 r"selection \(valid values: 0..2"):
        tile_at(x, np.array([[3]], np.int32))
    assert (np.asarray(tile_at(x, np.array([[3]], np.int32), oob=nisa.oob_mode.skip)) == -1.0).all()


def test_a_runtime_coordinate_on_an_untiled_dim_selects_a_slab():
    # the tutorial's example of a runtime value: "an expert ID"
    @nki.jit
    def expert_tile(w, expert):
        g = nl.tiles(w, tile_shape=(128, 128))          # (experts, 256, 256): dim 0 untiled
        tile = nl.ndarray((128, 128), dtype=w.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=g[_to_sbuf(expert), 1, 0].data)
        out = nl.ndarray((128, 128), dtype=w.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=tile)
        return out
    w = np.random.default_rng(7).random((4, 256, 256), dtype=np.float32)
    assert np.array_equal(np.asarray(expert_tile(w, np.array([[2]], np.int32))), w[2, 128:256, 0:128])


def test_the_geometry_of_a_runtime_selection():
    def body(x, rows, one):
        g = nl.tiles(x, tile_shape=(128, 128))
        idx, at = _to_sbuf(rows), _to_sbuf(one)
        by_rows, by_coordinate = g[idx, 1], g[at, :]
        staged = nl.empty_like(by_rows, buffer=nl.sbuf)
        return (by_rows.shape, by_rows.element_shape, by_rows.is_remainder, by_rows.data.is_indirect(),
                by_coordinate.shape, by_coordinate.element_shape, by_coordinate.index_step_elements,
                staged.element_shape, staged.data.shape, staged.data.is_indirect())
    got = inside_a_kernel(body, np.zeros((384, 256), np.float32), np.zeros((72, 1), np.int32),
                           np.zeros((1, 1), np.int32))
    assert got == ((), (72, 128), True, True, (2,), (128, 256), (128,), (72, 128), (72, 128), False)


@pytest.mark.parametrize("select, match", [
    (lambda g, t: g[t["wide"], 0], r"an index tensor is an SBUF int32 or uint32 tensor of shape \(1, 1\) .* got "
                                   r"shape \(4, 4\)"),
    (lambda g, t: g[t["float"], 0], r"got shape \(1, 1\) float32 in sbuf"),
    (lambda g, t: g[t["hbm"], 0], r"got shape \(1, 1\) int32 in \w*hbm"),
    (lambda g, t: g[0, t["rows"]], r"\(K, 1\) row indices select rows of the first tiled dim .* not dim 1"),
    (lambda g, t: g[t["many"], 0], r"200 row indices > 128, the rows of one tile"),
    (lambda g, t: g[t["one"], t["one"]], "a selection takes one runtime index"),
    (lambda g, t: g[::2, 0][t["one"]], "sliced with a step > 1"),
    (lambda g, t: nl.tiles(g[t["one"], :], tile_shape=(64, 64)), "moves with a runtime index"),
    (lambda g, t: nl.alloc_tiles(tile_shape=(128, 128), element_shape=(256, 256), buffer=nl.sbuf,
                                 dtype=nl.float32)[t["one"], 0], "runtime indices select regions of an HBM grid"),
])
def test_runtime_indices_the_tutorial_does_not_describe_are_refused(select, match):
    def body(x, hbm_index):
        t = {"one": _to_sbuf(hbm_index), "hbm": hbm_index,
             "wide": nl.ndarray((4, 4), dtype=nl.int32, buffer=nl.sbuf),
             "float": nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf),
             "rows": nl.ndarray((8, 1), dtype=nl.int32, buffer=nl.sbuf),
             "many": nl.ndarray((200, 1), dtype=nl.int32, buffer=nl.sbuf)}
        with pytest.raises(NkiValidationError, match=match):
            select(nl.tiles(x, tile_shape=(128, 128)), t)
    inside_a_kernel(body, np.zeros((384, 256), np.float32), np.zeros((1, 1), np.int32))


def test_a_runtime_gather_profiles_without_index_values():
    table = np.zeros((384, 256), np.float32)
    rows = np.zeros((200, 1), np.int32)
    assert nkisim.profile_model(gather_rows, table, rows).total_time_us > 0


@pytest.mark.parametrize("alloc", ["tiles", "blocks", "empty_like"])
def test_an_on_chip_grid_of_tiles_taller_than_the_partitions_is_refused_when_allocated(alloc):
    # an SBUF / PSUM grid keeps one tile per slot, its rows on the partitions (alloc_tiles page: "the same
    # dense rank-two capacity layout"); a 256-row tile cannot be placed, so the allocation itself fails
    def body(x):
        if alloc == "tiles":
            nl.alloc_tiles(tile_shape=(256, 128), element_shape=(512, 256), buffer=nl.sbuf, dtype=nl.float32)
        elif alloc == "blocks":
            nl.alloc_blocks(tile_shape=(256, 64), block_shape=(1, 2), element_shape=(256, 256), buffer=nl.psum,
                            dtype=nl.float32)
        else:
            nl.empty_like(nl.tiles(x, tile_shape=(256, 128)), buffer=nl.sbuf)
    with pytest.raises(NkiValidationError, match=r"partition dim 256 > 128"):
        inside_a_kernel(body, np.zeros((512, 256), np.float32))
