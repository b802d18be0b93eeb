"""Matmuls on disjoint tiles of the PE array run in parallel.

The nc_matmul page, "Tiling mode": "Tensor Engine supports both row and column tiling modes, which allow multiple
nc_matmul instructions with a stationary tile size smaller than [128, 128] to run in parallel to improve hardware
utilization. Row tiling mode slices the 128 PE rows into 2x 64 row tiles (NeuronCore-v2 or newer), or 4x 32 row
tiles (NeuronCore-v3 or newer). Column tiling mode slices the 128 PE columns in the same fashion"
(https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.nc_matmul.html).
The trace keeps each matmul's tile (`pe_tile`); the scheduler gives a tile its own lane and makes Tensor work on
shared cells take turns (`scheduler._pe_tile_lane`)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import nkisim
from nkisim.costmodel.scheduler import schedule
from nkisim.profile.summary import estimate

import nki
import nki.isa as nisa
import nki.language as nl

K, N, REPEATS = 32, 512, 8      # a 32-row contraction, 512 moving columns, 8 accumulating matmuls per tile


def row_tiles(tiles: list[tuple[tuple[int, int], tuple[int, int]] | None]):
    """For each entry, REPEATS matmuls of rows [32 j, 32 j + 32) of a and b (j: its place in the list),
    accumulated into a PSUM tile of their own; an entry is (tile_position, tile_size), or None for the whole
    array. The matmuls read tiles loaded before any of them, so only the PE array orders them."""
    @nki.jit
    def kernel(a, b):
        out = nl.ndarray((len(tiles), K, N), dtype=nl.float32, buffer=nl.shared_hbm)
        sa = nl.ndarray((128, K), dtype=a.dtype, buffer=nl.sbuf)
        sb = nl.ndarray((128, N), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=sa, src=a)
        nisa.dma_copy(dst=sb, src=b)
        for j, tile in enumerate(tiles):
            rows = slice(K * (j % 4), K * (j % 4) + K)
            ps = nl.ndarray((K, N), dtype=nl.float32, buffer=nl.psum)
            placed = {} if tile is None else dict(tile_position=tile[0], tile_size=tile[1])
            for _ in range(REPEATS):
                nisa.nc_matmul(dst=ps, stationary=sa[rows, :], moving=sb[rows, :], name=f"mm{j}", **placed)
            o = nl.ndarray((K, N), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=o, src=ps)
            nisa.dma_copy(dst=out[j], src=o)
        return out
    return kernel


def _matmuls(tiles):
    a = np.random.default_rng(0).random((128, K)).astype(ml_dtypes.bfloat16)
    b = np.random.default_rng(1).random((128, N)).astype(ml_dtypes.bfloat16)
    run = nkisim.run(row_tiles(tiles), a, b)
    timeline = schedule(run.trace)
    by_tile = {}
    for s in timeline.slots:
        if s.opcode == "MATMUL":
            by_tile.setdefault(s.name, []).append(s)
    return run, timeline, by_tile


def _span(slots):
    return min(s.start for s in slots), max(s.end for s in slots)


def _matmul_time(timeline):
    """From the first matmul's start to the last one's end."""
    lo, hi = _span([s for s in timeline.slots if s.opcode == "MATMUL"])
    return hi - lo


FOUR_ROW_TILES = [((32 * j, 0), (32, 128)) for j in range(4)]


def test_the_trace_keeps_a_tiled_matmuls_pe_tile():
    run, _, _ = _matmuls(FOUR_ROW_TILES[:1] + [None])
    tiled, whole = [i for i in run.trace if i.opcode == "MATMUL"][::REPEATS]
    assert tiled.attrs["pe_tile"] == (0, 0, 32, 128) and "pe_tile" not in whole.attrs


def test_matmuls_on_four_row_tiles_run_in_parallel():
    _, tiled, by_tile = _matmuls(FOUR_ROW_TILES)
    _, whole, _ = _matmuls([None] * 4)
    spans = [_span(by_tile[f"mm{j}"]) for j in range(4)]
    assert max(start for start, _ in spans) < min(end for _, end in spans)     # all four at once
    assert {s.lane for s in tiled.slots if s.opcode == "MATMUL"} == {f"Tensor[{32 * j}:{32 * j + 32},0:128]"
                                                                     for j in range(4)}
    assert _matmul_time(tiled) < 0.35 * _matmul_time(whole)     # about a quarter: four tiles at a time
    assert tiled.total_time < whole.total_time


def test_the_engines_active_time_counts_parallel_tiles_once():
    run, timeline, _ = _matmuls(FOUR_ROW_TILES)
    busy = estimate(run.trace, with_range=False).engine_active_time["Tensor"]
    lo, hi = _span([s for s in timeline.slots if s.opcode == "MATMUL"])
    assert busy <= hi - lo + 1e-12


def test_matmuls_on_one_tile_run_one_after_another():
    _, _, by_tile = _matmuls([((0, 0), (32, 128)), ((0, 0), (32, 128))])     # the same tile, rows of a and b differ
    first, second = by_tile["mm0"], by_tile["mm1"]
    assert first[0].lane == second[0].lane
    assert min(s.start for s in second) >= max(s.start for s in first)


def test_the_whole_array_waits_for_every_tile_and_a_tile_for_the_whole_array():
    _, _, by_tile = _matmuls([((0, 0), (32, 128)), ((32, 0), (32, 128)), None, ((64, 0), (32, 128))])
    whole, after = by_tile["mm2"], by_tile["mm3"]
    assert whole[0].lane == "Tensor"
    # its own lane is free from the start: it took its turn after both tiles' matmuls
    assert min(s.start for s in whole) > max(s.start for s in (*by_tile["mm0"], *by_tile["mm1"]))
    assert min(s.start for s in after) >= max(s.start for s in whole)    # and the next tile after it


@pytest.mark.parametrize("second", [((32, 0), (32, 128)), ((0, 0), (32, 64))])
def test_overlapping_tiles_of_different_shapes_take_turns(second):
    _, _, by_tile = _matmuls([((0, 0), (64, 128)), second])      # rows 0-63 share cells with the second tile
    assert min(s.start for s in by_tile["mm1"]) >= max(s.start for s in by_tile["mm0"])
