"""Hardware descriptor generation runs on its own DGE instance, beside the issuing engine's compute.

SDK:nki/guides/architecture/trainium2_arch.rst, "Descriptor Generation Engine (DGE)": a NeuronCore-v3 has two
DGE instances, commanded by the Scalar engine's sequencer and by the Sync engine (the section's figure), and
"When triggered from ScalarE, execution of the DGE-based DMA instruction could be hidden behind earlier compute
instructions (such as nisa.activate()) in program order, since DGE and the compute pipeline of ScalarE are
independent hardware resources. Each DGE-based DMA instruction takes about 600 ns". Software DGE is GpSimd's
own work ("occupies GpsimdE"), so it stays on GpSimd's lane."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import nkisim
from nkisim.costmodel import constants as K
from nkisim.profile.summary import estimate

import nki
import nki.isa as nisa
import nki.language as nl

P, WIDE, NARROW = 128, 8192, 512


def activation_then_store(dge_mode, engine):
    """A long ACTIVATE on Scalar, then a store of a tile Vector produced meanwhile, its descriptors generated
    by `dge_mode` from `engine`: in program order the store comes after the ACTIVATE and reads nothing of it."""
    @nki.jit
    def kernel(x, y):
        a = nl.ndarray((P, WIDE), dtype=nl.float32, buffer=nl.sbuf)
        b = nl.ndarray((P, NARROW), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=x, dge_mode=nisa.dge_mode.none)
        nisa.dma_copy(dst=b, src=y, dge_mode=nisa.dge_mode.none)
        nisa.activation(dst=a, op=nl.exp, data=a)
        nisa.tensor_scalar(dst=b, data=b, op0=nl.multiply, operand0=2.0)
        small = nl.ndarray((P, NARROW), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=small, src=b, dge_mode=dge_mode, engine=engine, name="store_b")
        big = nl.ndarray((P, WIDE), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=big, src=a, dge_mode=nisa.dge_mode.none)
        return big, small
    return kernel


def _slots(dge_mode, engine):
    trace = nkisim.run(activation_then_store(dge_mode, engine), torch.empty(P, WIDE), torch.empty(P, NARROW),
                       dry_run=True).trace
    slots = estimate(trace, with_range=False).timeline.slots
    (act,) = [s for s in slots if s.opcode == "ACTIVATE"]
    (dge,) = [s for s in slots if s.opcode == "DGE"]
    (store,) = [s for s in slots if s.opcode == "DMA" and s.name == "store_b"]
    return act, dge, store


@pytest.mark.parametrize("engine, lane", [(nisa.engine.scalar, "DGE/Scalar"), (nisa.engine.sync, "DGE/Sync")])
def test_hardware_dge_runs_beside_an_earlier_activation(engine, lane):
    act, dge, store = _slots(nisa.dge_mode.hwdge, engine)
    assert dge.lane == lane and dge.engine == engine.name.capitalize()   # counted as its engine's work
    assert dge.duration == pytest.approx(K.HWDGE_S_PER_DMA)
    assert act.start < dge.start < act.end            # hidden behind the ACTIVATE before it in program order
    assert store.end < act.end                        # so the store need not wait for the ACTIVATE


def test_software_dge_is_gpsimd_work():
    _, dge, _ = _slots(nisa.dge_mode.swdge, nisa.engine.unknown)
    assert dge.lane == "GpSimd"


def test_a_barrier_on_scalar_still_orders_the_dge_its_sequencer_commands():
    """core_barrier "will block execution on this engine": a DGE commanded after it waits for its completion."""
    @nki.jit
    def kernel(x):
        shared = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        pid = nl.program_id(0)
        half = x.shape[0] // 2
        t = nl.ndarray((half, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[pid * half:(pid + 1) * half], dge_mode=nisa.dge_mode.none)
        nisa.dma_copy(dst=shared[pid * half:(pid + 1) * half], src=t, dge_mode=nisa.dge_mode.none)
        nisa.core_barrier(data=shared, cores=(0, 1), engine=nisa.engine.scalar)
        nisa.dma_copy(dst=out[pid * half:(pid + 1) * half], src=t, dge_mode=nisa.dge_mode.hwdge,
                      engine=nisa.engine.scalar, name="after")
        return out
    trace = nkisim.run(kernel, np.ones((256, 512), np.float32), lnc=2).trace
    slots = estimate(trace, with_range=False).timeline.slots
    for core in (0, 1):
        (barrier,) = [s for s in slots if s.core == core and s.opcode == "CORE_BARRIER"]
        (dge,) = [s for s in slots if s.core == core and s.opcode == "DGE"]
        assert dge.start >= barrier.end
