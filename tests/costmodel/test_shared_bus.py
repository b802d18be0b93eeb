"""Vector's performance mode and GpSimd take turns on the memory bus they share.

SDK:nki/guides/architecture/trainium2_arch.rst, "Data Movement Updates": on NeuronCore-v3 "VectorE and GpSimdE
can access SBUF in parallel", and "VectorE's performance mode leverages a shared memory bus between the VectorE
and GpsimdE engines ... The hardware automatically coordinates access between engines ..., including arbitrating
between GpsimdE and relevant VectorE instructions". The model runs a Vector instruction with a performance-mode
lift ("Vector Engine Performance Mode", same page) and a GpSimd instruction on SBUF one after the other, in
program order; a Vector instruction without a lift runs beside GpSimd."""
from __future__ import annotations

import pytest
import torch

import nkisim
from nkisim.costmodel import costs
from nkisim.profile.summary import estimate

import nki
import nki.isa as nisa
import nki.language as nl

P, N = 128, 2048


def two_copies(vector_dtype, vector_step: int, gpsimd_first: bool):
    """A GpSimd copy and a Vector copy of one loaded tile into two others: both wait for the load only."""
    def on_gpsimd(src, g):
        nisa.tensor_copy(dst=g, src=src[:, 0:N], engine=nisa.engine.gpsimd)

    @nki.jit
    def kernel(x):
        src = nl.ndarray((P, N * vector_step), dtype=vector_dtype, buffer=nl.sbuf)
        dst = nl.ndarray((P, N), dtype=vector_dtype, buffer=nl.sbuf)
        g = nl.ndarray((P, N), dtype=vector_dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=src, src=x)
        if gpsimd_first:
            on_gpsimd(src, g)
        nisa.tensor_copy(dst=dst, src=src[:, 0:N * vector_step:vector_step], engine=nisa.engine.vector)
        if not gpsimd_first:
            on_gpsimd(src, g)
        out = nl.ndarray((P, N), dtype=vector_dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=dst)
        side = nl.ndarray((P, N), dtype=vector_dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=side, src=g)
        return out, side
    return kernel


def _scheduled_copies(vector_dtype, vector_step: int = 1, gpsimd_first: bool = True):
    torch_dtype = torch.bfloat16 if vector_dtype == nl.bfloat16 else torch.float32
    trace = nkisim.run(two_copies(vector_dtype, vector_step, gpsimd_first),
                       torch.empty(P, N * vector_step, dtype=torch_dtype), dry_run=True).trace
    (copy,) = [i for i in trace.instructions if i.opcode == "TENSOR_COPY" and i.engine == "Vector"]
    slots = estimate(trace, with_range=False).timeline.slots
    (vector,) = [s for s in slots if s.opcode == "TENSOR_COPY" and s.engine == "Vector"]
    (gpsimd,) = [s for s in slots if s.opcode == "TENSOR_COPY" and s.engine == "GpSimd"]
    return costs.perf_mode_lift(copy), vector, gpsimd


@pytest.mark.parametrize("dtype, step, lift", [(nl.bfloat16, 1, 4), (nl.bfloat16, 2, 2)],
                         ids=["4x lift", "2x lift (strided source)"])
def test_a_perf_mode_vector_instruction_waits_for_gpsimd_before_it(dtype, step, lift):
    got, vector, gpsimd = _scheduled_copies(dtype, step, gpsimd_first=True)
    assert got == lift
    assert gpsimd.start < vector.start
    assert vector.start == pytest.approx(gpsimd.end, abs=1e-12)   # right after GpSimd's: no semaphore


def test_gpsimd_waits_for_a_perf_mode_vector_instruction_before_it():
    _, vector, gpsimd = _scheduled_copies(nl.bfloat16, gpsimd_first=False)
    assert gpsimd.start == pytest.approx(vector.end, abs=1e-12)


def test_a_vector_instruction_without_a_lift_runs_beside_gpsimd():
    lift, vector, gpsimd = _scheduled_copies(nl.float32, gpsimd_first=True)
    assert lift == 1
    assert vector.start < gpsimd.end and gpsimd.start < vector.end   # side by side


@pytest.mark.parametrize("dtype, lift", [(nl.bfloat16, 2), (nl.float32, 1)])
def test_tensor_tensor_lift_is_its_cost_rule_s(dtype, lift):
    """The lift the scheduler asks about is the one the cost rule divides by: bf16 inputs in SBUF, 2x."""
    @nki.jit
    def kernel(x):
        a = nl.ndarray((P, N), dtype=dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=x)
        nisa.tensor_tensor(dst=a, data1=a, data2=a, op=nl.add)
        out = nl.ndarray((P, N), dtype=dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=a)
        return out
    torch_dtype = torch.bfloat16 if dtype == nl.bfloat16 else torch.float32
    trace = nkisim.run(kernel, torch.empty(P, N, dtype=torch_dtype), dry_run=True).trace
    (tt,) = [i for i in trace.instructions if i.opcode == "TENSOR_TENSOR"]
    assert costs.perf_mode_lift(tt) == lift
    assert costs.tensor_tensor_cycles(tt) == N / lift
