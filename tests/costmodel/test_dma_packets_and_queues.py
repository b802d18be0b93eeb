"""Two DMA rules of the docs, on kernels run through the emulator.

- Packets are runs of consecutive addresses. SDK:nki/deep-dives/nki-dma-bandwidth-guide.rst: the per-packet
  overhead is "the fundamental problem", the guide asks for "contiguous data per partition" and says "small
  fragmented transfers underperform badly": a transfer whose addresses jump within a partition row (a strided
  or transposing view, on either side) pays the per-packet overhead once per run.
- A DMA queue runs in order per engine. SDK:nki/get-started/about/nki-dma-overview.rst, "DMA Queues": "There are
  16 DMA queues per DMA engine", and "DMA transfers within a queue on the same DMA engine are executed in
  order": transfers of one queue on different engines (different partitions) move at the same time.
"""
from __future__ import annotations

import numpy as np
import pytest

import nkisim
from nkisim.costmodel import constants as K
from nkisim.costmodel.dma import data_seconds, packets

import nki
import nki.isa as nisa
import nki.language as nl


def _load(view):
    """One [128, 512] fp32 load from the HBM view `view(a)` of a (128, 1024) input."""
    @nki.jit
    def kernel(a):
        t = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=view(a), dge_mode=nisa.dge_mode.none)
        out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        return out
    trace = nkisim.run(kernel, np.zeros((128, 1024), np.float32), dry_run=True).trace
    (load,) = [i for i in trace.instructions if i.isa == "dma_copy"]
    return load


def test_a_transfer_is_one_packet_per_run_of_consecutive_addresses():
    rows = _load(lambda a: a[:, 0:512])                       # 2 KiB contiguous per partition row
    halves = _load(lambda a: a.reshape((128, 4, 256))[:, 0:4:2, :])   # two 1 KiB runs per row: same bytes
    strided = _load(lambda a: a[:, 0:1024:2])                # every other element: 4-byte runs
    assert [packets(i) for i in (rows, halves, strided)] == [128, 256, 128 * 512]
    assert rows.dma.nbytes == halves.dma.nbytes == strided.dma.nbytes == 128 * 2048
    # each packet costs its bytes plus the per-packet overhead, at the same engine rate
    for ins, run in ((halves, 1024), (strided, 4)):
        want = (run + K.DMA_PACKET_OVERHEAD_BYTES) / run * 2048 / (2048 + K.DMA_PACKET_OVERHEAD_BYTES)
        assert data_seconds(ins, 1) / data_seconds(rows, 1) == pytest.approx(want, rel=1e-9)


def test_runs_end_where_either_side_jumps():
    """A store of a [128, 512] tile into every second row-half of HBM: the SBUF side is one 2 KiB run per
    partition, the HBM side jumps every 256 elements, so each row is two packets."""
    @nki.jit
    def kernel(a):
        t = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[:, 0:512])
        out = nl.ndarray((128, 4, 256), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out[:, 0:4:2, :], src=t)
        return out
    trace = nkisim.run(kernel, np.zeros((128, 1024), np.float32), dry_run=True).trace
    load, store = [i for i in trace.instructions if i.isa == "dma_copy"]
    assert (load.dma.pieces, store.dma.pieces) == (128, 256)


def _four_loads(rows_of):
    """Four [8, 1024] fp32 loads on one queue (prebuilt descriptors) into partitions rows_of(i)."""
    @nki.jit
    def kernel(a):
        t = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.sbuf)
        for i in range(4):
            nisa.dma_copy(dst=t[rows_of(i)], src=a[8 * i:8 * i + 8, :], dge_mode=nisa.dge_mode.none, name=f"l{i}")
        out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        return out
    summary = nkisim.profile_model(kernel, np.zeros((128, 1024), np.float32))
    return {s.name: s for s in summary.timeline.slots if s.opcode == "DMA"}


def test_a_queue_runs_in_order_per_engine_and_its_transfers_on_other_engines_at_once():
    same = _four_loads(lambda i: slice(0, 8))                  # one engine (partitions 0-7) four times
    apart = _four_loads(lambda i: slice(8 * i, 8 * i + 8))     # engines 0, 1, 2 and 3
    assert {s.engines for s in (*same.values(), *apart.values())} == {1}
    one = same["l0"].duration
    for i in range(1, 4):
        # one engine: each after the previous one's data and the queue's fixed cost there
        assert same[f"l{i}"].start == pytest.approx(same[f"l{i - 1}"].end + K.DMA_TRANSFER_FIXED_S)
        # four engines: each a fixed cost after the previous one starts, moving while it moves
        assert apart[f"l{i}"].start == pytest.approx(apart[f"l{i - 1}"].start + K.DMA_TRANSFER_FIXED_S)
        assert apart[f"l{i}"].start < apart[f"l{i - 1}"].end
    span = lambda slots: max(s.end for s in slots.values()) - min(s.start for s in slots.values())  # noqa: E731
    assert span(same) > 3.9 * one and span(apart) < 1.1 * one
