"""The NaN sentinel is filled lazily: these kernels read memory that was written in parts, in
several orders, and check that every never-written element still reads as the sentinel."""
import gc
import weakref

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

import nkisim

ROWS, COLS = 128, 8


def _ones() -> np.ndarray:
    return np.ones((ROWS, COLS), np.float32)


@nki.jit
def write_row_blocks(x, blocks):
    """Write the given [r0, r1) row blocks of a fresh tile from x, then copy the whole tile out."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    for r0, r1 in blocks:
        nisa.dma_copy(dst=t[r0:r1], src=x[r0:r1])
    nisa.dma_copy(dst=out, src=t)
    return out


def _written(blocks) -> np.ndarray:
    mask = np.zeros((ROWS, COLS), bool)
    for r0, r1 in blocks:
        mask[r0:r1] = True
    return mask


@pytest.mark.parametrize("blocks", [
    ((0, 128),),                          # whole tile: no sentinel left
    ((0, 16),),                           # a partial last tile
    ((32, 48), (0, 16)),                  # two ranges, out of order
    ((0, 64), (32, 96)),                  # overlapping ranges
    ((0, 1), (127, 128)),                 # first and last partition only
])
def test_never_written_rows_read_as_nan(blocks):
    y = write_row_blocks(_ones(), blocks)
    written = _written(blocks)
    assert np.all(y[written] == 1) and np.all(np.isnan(y[~written]))


@nki.jit
def write_read_write(x):
    """Rows 0:16 written, the tile read (the sentinel materialises), rows 16:32 written, read again."""
    first = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    second = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t[0:16], src=x[0:16])
    nisa.dma_copy(dst=first, src=t)
    nisa.dma_copy(dst=t[16:32], src=x[16:32])
    nisa.dma_copy(dst=second, src=t)
    return first, second


def test_reads_between_partial_writes_see_the_sentinel_then_the_data():
    first, second = write_read_write(_ones())
    assert np.all(first[:16] == 1) and np.all(np.isnan(first[16:]))
    assert np.all(second[:32] == 1) and np.all(np.isnan(second[32:]))


@nki.jit
def write_columns_then_rows(x):
    """A strided write (two columns of every partition) and then a contiguous one."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t[:, 0:2], src=x[:, 0:2])
    nisa.dma_copy(dst=t[64:128], src=x[64:128])
    nisa.dma_copy(dst=out, src=t)
    return out


def test_strided_and_contiguous_writes_combine():
    y = write_columns_then_rows(_ones())
    expected = np.full((ROWS, COLS), np.nan, np.float32)
    expected[:, 0:2] = 1
    expected[64:] = 1
    np.testing.assert_array_equal(y, expected)


@nki.jit
def write_through_a_bf16_view(x):
    """An fp32 tile written through a bf16 view of its bytes (odd element counts included)."""
    out = nl.ndarray((ROWS, COLS), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((ROWS, COLS), dtype=nl.float32, buffer=nl.sbuf)
    halves = t.view(nl.bfloat16)                          # [128, 16] bf16 over the same bytes
    nisa.dma_copy(dst=halves[0:4, 0:3], src=x[0:4, 0:3])   # 1.5 fp32 elements per partition
    nisa.dma_copy(dst=out, src=t)
    return out


def test_writes_through_another_dtype_keep_the_rest_unwritten():
    x = np.zeros((ROWS, 2 * COLS), np.float32).astype(nl.bfloat16)
    y = write_through_a_bf16_view(x)
    assert np.all(np.isnan(y[4:])) and np.all(np.isnan(y[:4, 2:]))
    assert np.all(y[:4, 0] == 0)                           # both bf16 halves written: an fp32 zero


@nki.jit
def write_output_bytes_unaligned(x):
    """Three bf16 values into an fp32 output: the write ends inside an fp32 element."""
    out = nl.ndarray((2, 4), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out.view(nl.bfloat16)[0, 0:3], src=x[0, 0:3])
    return out


def test_unaligned_writes_keep_the_unwritten_bytes():
    y = write_output_bytes_unaligned(np.zeros((2, 8), np.float32).astype(nl.bfloat16))
    assert y[0, 0] == 0 and np.all(np.isnan(y[0, 1:])) and np.all(np.isnan(y[1]))


@nki.jit
def fill_own_half(x, skip_program):
    """LNC=2: each program writes its half of the rows unless it is `skip_program`."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    half = x.shape[0] // 2
    p = nl.program_id(0)
    if p != skip_program:
        t = nl.ndarray((half, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[p * half:(p + 1) * half])
        nisa.dma_copy(dst=out[p * half:(p + 1) * half], src=t)
    return out


@pytest.mark.parametrize("skip_program", [-1, 0, 1])
def test_lnc2_output_is_nan_where_no_program_wrote(skip_program):
    y = nkisim.run(fill_own_half, _ones(), skip_program, lnc=2).outputs
    for p, rows in enumerate((slice(0, 64), slice(64, 128))):
        assert np.all(np.isnan(y[rows])) if p == skip_program else np.all(y[rows] == 1)


def test_dry_run_outputs_are_all_nan():
    y = nkisim.run(write_row_blocks, _ones(), ((0, 128),), dry_run=True).outputs
    assert np.all(np.isnan(y))


def test_dead_tiles_are_freed_while_the_kernel_runs():
    """The launch keeps live ranges of SBUF allocations, not the allocations: a tile is freed
    when the kernel drops it, so a long loop does not hold every tile it ever made."""
    seen = []
    record = seen.append

    @nki.jit
    def loop(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        for r0 in range(0, ROWS, 32):
            t = nl.ndarray((32, COLS), dtype=x.dtype, buffer=nl.sbuf)
            record(weakref.ref(t.storage))
            nisa.dma_copy(dst=t, src=x[r0:r0 + 32])
            nisa.dma_copy(dst=out[r0:r0 + 32], src=t)
        return out

    run = nkisim.run(loop, _ones())
    gc.collect()
    assert np.all(run.outputs == 1) and len(seen) == 4
    assert all(ref() is None for ref in seen)
    assert run.sbuf_peak_bytes == COLS * 4                   # one [32, COLS] fp32 tile live at a time
