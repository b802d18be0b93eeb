"""NKI 0.7's stream buffers (nl.alloc_stream_buffers, nl.NkiStreamBuffers) against their reference pages and the
tile-grid streaming tutorial; each test names what it checks. The pages' own examples run outside this repository
(nkisim/README.md, acceptance runs)."""
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

import nkisim
from nkisim import NkiValidationError
from nkisim.emulator.errors import NkiRemovedApiError
from nkisim.emulator.nki_versions import emulating
from nkisim.profile.summary import estimate

from helpers import inside_a_kernel

PAGES = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated"
pytestmark = pytest.mark.usefixtures("nki_0_7")


@nki.jit
def add_one_per_slab(x, num_slots=2):
    """x [P, S, F]: every slab x[:, s, :] through a rotating pool of SBUF slots, plus one."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    pool = nl.alloc_stream_buffers(x, buffer=nl.sbuf, dim=1, num_slots=num_slots)
    for s in range(x.shape[1]):
        slot = pool[s]
        nisa.dma_copy(dst=slot, src=x[:, s, :])
        nisa.tensor_scalar(dst=slot, data=slot, op0=nl.add, operand0=1.0)
        nisa.dma_copy(dst=out[:, s, :], src=slot)
    return out


def test_a_tensor_stream_gives_one_slab_per_step_and_rotates_its_slots():
    # f"{PAGES}/nki.language.alloc_stream_buffers.html": a step is the view integer-indexed at dim;
    # f"{PAGES}/nki.language.NkiStreamBuffers.html": "buffers[k] maps logical iteration k to physical slot k % num_slots"
    def body(x):
        pool = nl.alloc_stream_buffers(x, buffer=nl.sbuf, dim=1, num_slots=3)
        slots = [pool[k] for k in range(x.shape[1])]
        return (pool.num_slots, slots[0].shape, slots[0].buffer.name, slots[0].dtype.name,
                [slots[k].storage is slots[k % 3].storage for k in range(7)],
                len({id(s.storage) for s in slots}))
    got = inside_a_kernel(body, np.zeros((128, 7, 64), np.float32))
    assert got == (3, (128, 64), "sbuf", "float32", [True] * 7, 3)


def test_a_tensor_stream_computes_through_its_slots():
    x = np.random.default_rng(0).random((128, 5, 96), dtype=np.float32)
    assert np.array_equal(np.asarray(nkisim.run(add_one_per_slab, x).outputs), x + 1)


def test_slots_take_their_own_dtype_and_psum():
    # the page: "num_slots independent SBUF or PSUM work areas"; dtype defaults to the view's
    def body(x):
        pool = nl.alloc_stream_buffers(x, buffer=nl.psum, dim=1, dtype=nl.float32)
        return pool[1].shape, pool[1].buffer.name, pool[1].dtype.name
    assert inside_a_kernel(body, np.zeros((128, 4, 512), np.float16)) == ((128, 512), "psum", "float32")


@nki.jit
def double_columns(x):
    """x [R, C]: one column of (128, 128) tiles per step through two slots (a tile grid stream), times two."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    cols, out_cols = nl.tiles(x, tile_shape=(128, 128)), nl.tiles(out, tile_shape=(128, 128))
    pool = nl.alloc_stream_buffers(cols, buffer=nl.sbuf, dim=1)
    for j in range(cols.shape[1]):
        column = pool[j]
        for i in range(cols.shape[0]):
            tile = column[i].data
            nisa.dma_copy(dst=tile, src=cols[i, j].data)
            nisa.tensor_scalar(dst=tile, data=tile, op0=nl.multiply, operand0=2.0)
            nisa.dma_copy(dst=out_cols[i, j].data, src=tile)
    return out


def test_a_tile_grid_stream_clamps_its_partial_last_column():
    # the NkiStreamBuffers page: "When the source ends with a partial ... tile region ..., the final iteration
    # returns a clamped zero-copy view over its full-capacity physical slot"
    def body(x):
        pool = nl.alloc_stream_buffers(nl.tiles(x, tile_shape=(128, 128)), buffer=nl.sbuf, dim=1)
        first, last = pool[0], pool[2]
        return (type(first).__name__, first.shape, first.element_shape, last.element_shape, last.is_remainder,
                last[1].data.shape, last[1].data.storage is first[1].data.storage)
    got = inside_a_kernel(body, np.zeros((256, 300), np.float32))
    assert got == ("NkiTileGrid", (2,), (256, 128), (256, 44), True, (128, 44), True)


def test_a_tile_grid_stream_computes_every_column_remainder_included():
    x = np.random.default_rng(1).random((256, 300), dtype=np.float32)
    assert np.array_equal(np.asarray(nkisim.run(double_columns, x).outputs), 2 * x)


def test_a_block_grid_stream_clamps_a_partial_last_block():
    # five (128, 128) tiles in blocks of two: the last block holds one tile; .data of a block is one operand
    def body(x):
        blocks = nl.blocks(x, tile_shape=(128, 128), block_shape=(1, 2))
        pool = nl.alloc_stream_buffers(blocks, buffer=nl.sbuf, dim=1)
        out = []
        for k in range(blocks.shape[1]):
            slot = pool[k][0]
            nisa.dma_copy(dst=slot.data, src=blocks[0, k].data)
            out.append((type(slot).__name__, slot.element_shape, slot.data.shape))
        return out
    got = inside_a_kernel(body, np.zeros((128, 640), np.float32))
    assert got == [("NkiBlockGrid", (128, 256), (128, 256))] * 2 + [("NkiBlockGrid", (128, 128), (128, 128))]


def test_each_slot_is_its_own_allocation():
    # num_slots "bounds the SBUF footprint" (the streaming tutorial): the peak (bytes per partition) is the
    # pool's, one 512-float slab per slot, however long the stream
    peaks = [nkisim.run(add_one_per_slab, np.zeros((128, steps, 512), np.float32), n, dry_run=True).sbuf_peak_bytes
             for steps, n in ((8, 1), (8, 2), (8, 4), (32, 2))]
    assert peaks == [512 * 4 * n for n in (1, 2, 4, 2)]


def test_two_slots_let_the_next_load_overlap_the_compute_in_the_cost_model():
    # the tutorial: with one slot each load and compute pair executes in sequence; two slots overlap them
    x = np.zeros((128, 16, 2048), np.float32)
    one, two = (estimate(nkisim.run(add_one_per_slab, x, n, dry_run=True).trace).total_time_us for n in (1, 2))
    assert two < 0.9 * one


@pytest.mark.parametrize("index, message", [
    ("fori", "compiled variable"), ("negative", "negative indexing is not supported"),
    ("past", "outside the stream"), ("float", "compile-time Python int"), ("iterate", "iterating"),
    ("len", "no sequence length"),
])
def test_indices_the_page_does_not_support_are_refused(index, message):
    # the NkiStreamBuffers page: "Indices from nl.fori_loop are compiled variables and are unsupported ...
    # Runtime indexing, negative indexing, implicit iteration, and sequence length are not supported."
    def body(x):
        pool = nl.alloc_stream_buffers(x, buffer=nl.sbuf, dim=1)
        if index == "fori":
            nl.fori_loop(0, 2, lambda i: pool[i])
        use = {"negative": lambda: pool[-1], "past": lambda: pool[4], "float": lambda: pool[1.0],
               "iterate": lambda: [s for s in pool], "len": lambda: len(pool)}.get(index)
        if use:
            use()
    with pytest.raises(NkiValidationError, match=message):
        inside_a_kernel(body, np.zeros((128, 4, 64), np.float32))


@pytest.mark.parametrize("kwargs, message", [
    ({"buffer": nl.shared_hbm, "dim": 1}, "nl.sbuf or nl.psum"),
    ({"buffer": nl.sbuf, "dim": 3}, r"dim=3 is not a coordinate of view.shape \(128, 4, 64\)"),
    ({"buffer": nl.sbuf, "dim": 1, "num_slots": 0}, "num_slots must be a positive"),
    ({"buffer": nl.sbuf, "dim": 1, "address": (0, 0)}, "address= is not emulated"),
])
def test_bad_allocations_name_the_problem(kwargs, message):
    with pytest.raises(NkiValidationError, match=message):
        inside_a_kernel(lambda x: nl.alloc_stream_buffers(x, **kwargs), np.zeros((128, 4, 64), np.float32))


def test_the_pool_type_is_not_constructed_directly():
    # the NkiStreamBuffers page: "Instances are created by nki.language.alloc_stream_buffers()"
    with pytest.raises(NkiValidationError, match=r"created by nl.alloc_stream_buffers"):
        nl.NkiStreamBuffers()


def test_stream_buffers_are_not_in_nki_0_6():
    with emulating("0.6"), pytest.raises(NkiRemovedApiError, match="not in NKI 0.6.0"):
        inside_a_kernel(lambda x: nl.alloc_stream_buffers(x, buffer=nl.sbuf, dim=1), np.zeros((128, 4, 64), np.float32))
