"""Cost rules of the Tensor-engine instructions (engine cycles of one traced instruction).

TensorE is deeply pipelined, so the docs cost an instruction by how soon the next one can issue
(SDK:nki/guides/architecture/trainium_inferentia2_arch.rst "Tensor Engine", "Cost Model");
`compute_seconds` adds MIN_II, `TENSOR_OVERHEAD_CYCLES` (0: the intervals include fixed costs) and
the 2.4 GHz clock:
  * nc_matmul: max(min(64, N_stationary), N_moving) cycles for fp8/bf16/fp16/tf32 inputs, x4 for
    fp32 (SDK-2.26 nc_matmul "Estimated instruction cost"). N counts elements per partition, so a
    double-row FP8 matmul (contraction 256) costs what a bf16 one with contraction 128 does
    (SDK:nki/guides/architecture/trainium2_arch.rst "Double FP8 Matmul Performance"). Transpose mode
    halves the fp32 factor ("2x speedup in FP32 transpose", trainium2_arch.rst "Built-in Transpose
    Support"); the is_*_onezero hints halve it too ("could lead to 2x better performance" for fp32,
    SDK:nki/api/nki/isa/__init__.py nc_matmul).
  * nc_transpose: max(P, min(64, F)) Tensor-engine cycles, or N Vector-engine cycles (SDK-2.26
    nc_transpose cost table); an fp32 one on the Tensor engine runs in transpose mode, which the
    architecture guide names for both `nc_transpose(engine=tensor)` and `nc_matmul(is_transpose=True)`,
    so it costs what the fp32 transpose-mode matmul does (x4, halved).
  * Result latency: the next instruction issues after the interval above, the result is ready
    `TENSOR_RESULT_LATENCY_CYCLES` later (the arch guide's deep pipeline; the value derived from the
    docs' matmul walkthrough); the scheduler applies it (`result_latency_seconds`).
  * TensorE throttling: trn2 caps the Tensor engine at ~50% of its peak when a burst begins and
    ramps to full over ~3 us (SDK:tools/neuron-explorer/overview-summary-page.rst); the scheduler
    applies it (`tensor_throttle`) to an instruction by its `utilization` of the peak.
The PSUM -> SBUF evacuation is the Vector/Scalar instruction that reads PSUM, costed by its own rule
(`costs.streaming_cycles`: no Vector perf mode 4x with a PSUM side; Scalar one element per cycle).
"""
from __future__ import annotations

from nkisim.costmodel import constants as K
from nkisim.costmodel.costs import operations
from nkisim.emulator.trace import Instruction
from nkisim.limits import PARTITIONS
from nkisim.vocabulary import TENSOR

# only fp32 runs at a quarter rate: a NeuronCore-v3 Tensor engine "delivers ... 79 BF16/FP16/TF32 TFLOPS"
# (SDK:about-neuron/arch/neuron-hardware/neuron-core-v3.rst); nkisim does not emulate tfloat32 tiles yet
FP32_INPUTS = ("float32",)


def matmul_cycles(ins: Instruction) -> float:
    """Average TensorE cycles of one nc_matmul (back to back with others of its shape)."""
    a = ins.attrs
    cycles = max(min(K.MATMUL_INIT_CYCLES, a["stationary_free"]), a["moving_free"])
    if a["dtype"] in FP32_INPUTS:
        fast = a["is_transpose"] or a["onezero"]
        cycles *= K.MATMUL_FP32_FACTOR / (K.MATMUL_FP32_FAST_SPEEDUP if fast else 1)
    return cycles


def transpose_cycles(ins: Instruction) -> float:
    """nc_transpose: max(P, min(64, F)) on the Tensor engine, N = F elements per partition on Vector."""
    p, f = ins.attrs["partitions_in"], ins.attrs["free_in"]
    if ins.engine != TENSOR:
        return f
    cycles = max(p, min(K.MATMUL_INIT_CYCLES, f))
    if ins.attrs.get("dtype") in FP32_INPUTS:
        cycles *= K.MATMUL_FP32_FACTOR / K.MATMUL_FP32_FAST_SPEEDUP
    return cycles


def result_latency_seconds() -> float:
    """How long after the Tensor engine accepts its next instruction this one's result is ready."""
    return K.TENSOR_RESULT_LATENCY_CYCLES / K.TENSOR_CLOCK_HZ


PE_FLOPS_PER_CYCLE = 2 * PARTITIONS * PARTITIONS   # the 128 x 128 PE array, one bf16 multiply-add per PE per cycle


def pe_flops(ins: Instruction) -> float:
    """FLOPs the PE array does for a Tensor-engine instruction, as the profiler counts hardware FLOPs
    (2 x active rows x active columns x elements, SDK:tools/neuron-explorer/profile-schema-reference.rst
    "hardware_flops"): a matmul's 2 x K x M x N; a transpose [P, F] is a matmul of the data against a
    [P, P] identity, 2 x P x F x P."""
    if ins.opcode == "TRANSPOSE":
        p, f = ins.attrs["partitions_in"], ins.attrs["free_in"]
        return 2.0 * p * f * p
    return operations(ins)


def utilization(ins: Instruction, seconds: float) -> float:
    """The instruction's share of the Tensor engine's bf16 peak over `seconds`: its PE-array FLOPs
    over what the array does at the peak in that time, at most 1 (the BF16-adjusted maximum the
    throttle caps)."""
    if seconds <= 0:
        return 0.0
    return min(1.0, pe_flops(ins) / (seconds * K.TENSOR_CLOCK_HZ * PE_FLOPS_PER_CYCLE))
