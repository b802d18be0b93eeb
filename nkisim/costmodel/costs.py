"""How long one instruction occupies its engine or its DMA engines (seconds), by the rules of
`constants` (nki-semantics-and-trn2.md §3 "Per-instruction cost rules" and §6)."""
from __future__ import annotations

import math

from nkisim.costmodel import constants as K
from nkisim.emulator.trace import HBM, Instruction

HALF_WIDTH = ("bfloat16", "float16")
FAST_TENSOR_TENSOR_OPS = ("add", "multiply", "subtract")


def _data_reads(ins: Instruction):
    """Tensor inputs streamed over the free axis (per-lane [P, 1] operands and biases are not)."""
    return [o for o in ins.reads if o.elements_per_partition > 1 or o.role in ("data", "data1", "data2", "src")]


def _streamed(ins: Instruction):
    return (*_data_reads(ins), *ins.writes)


def _op_name(ins: Instruction) -> str:
    op = ins.attrs.get("op", "")
    return str(getattr(op, "__name__", op)).rsplit(".", 1)[-1].lower()


def vector_cycles(ins: Instruction) -> float:
    """Vector-engine cycles of one instruction (trn2 perf-mode rules)."""
    n = ins.elements_per_partition
    reads = _data_reads(ins)
    in_psum = [o.buffer == "psum" for o in reads]
    all_sbuf = all(o.buffer == "sbuf" for o in _streamed(ins))
    half = all(o.dtype in HALF_WIDTH for o in _streamed(ins))
    contiguous = all(o.contiguous for o in _streamed(ins))
    op = ins.opcode
    if op == "TENSOR_TENSOR":
        fast = any(in_psum) or (all_sbuf and half and contiguous and _op_name(ins) in FAST_TENSOR_TENSOR_OPS)
        cycles = n if fast else K.TENSOR_TENSOR_SLOW_FACTOR * n
        if half and not any(in_psum) and all(o.buffer == "sbuf" for o in reads):
            cycles /= K.VECTOR_PERF_MODE_HALF
        return cycles
    if op in ("TENSOR_SCALAR", "TENSOR_COPY"):
        if not half:
            return n
        if all_sbuf and contiguous:
            return n / K.VECTOR_PERF_MODE_FULL
        return n / K.VECTOR_PERF_MODE_HALF
    if op == "TENSOR_REDUCE":
        return n / 2 if half and _op_name(ins) in ("add", "max", "maximum") else n
    if op == "MEMSET":
        value = ins.attrs.get("value", None)
        return n / 2 if half and value == 0 else n
    if op == "RECIPROCAL":
        return K.RECIPROCAL_CYCLES_PER_ELEMENT * n
    return n


def matmul_cycles(ins: Instruction) -> float:
    n_moving = ins.elements_per_partition
    n_stationary = int(ins.attrs.get("stationary_free", 128))
    cycles = max(min(64, n_stationary), n_moving)
    if any(o.dtype == "float32" for o in ins.reads):
        cycles *= K.MATMUL_FP32_FACTOR
    return cycles


def compute_seconds(ins: Instruction) -> float:
    """Engine time of a compute instruction: max(MIN_II, cycles) + fixed overhead, at the engine clock."""
    engine = ins.engine
    if engine not in K.ENGINE_CLOCK_HZ:
        raise ValueError(f"instruction {ins.index} ({ins.isa}) has engine {engine!r}; "
                         f"the cost model knows {sorted(K.ENGINE_CLOCK_HZ)} and DMA")
    n = ins.elements_per_partition
    if engine == "Tensor":
        cycles = matmul_cycles(ins)
    elif engine == "Vector":
        cycles = vector_cycles(ins)
    else:
        # Scalar (ACTIVATE and the Scalar variants of tensor_scalar/tensor_copy), GpSimd and
        # Sync: one element per partition per cycle.
        cycles = n / K.SCALAR_ELEMENTS_PER_CYCLE
    cycles = max(K.MIN_II_CYCLES, cycles)
    if ins.attrs.get("reads_accumulator"):
        cycles += K.ACT_READ_ACCUMULATOR_CYCLES
    cycles += K.GPSIMD_START_CYCLES if engine == "GpSimd" else K.INSTRUCTION_OVERHEAD_CYCLES
    return cycles / K.ENGINE_CLOCK_HZ[engine]


def dma_engines(ins: Instruction) -> tuple[int, ...]:
    """Which of the core's 16 DMA engines a dma_copy uses: ~8 SBUF partitions per engine."""
    dma = ins.dma
    count = max(1, min(K.DMA_ENGINES_PER_CORE, math.ceil(dma.partitions / K.PARTITIONS_PER_DMA_ENGINE)))
    on_chip = [o for o in (*ins.writes, *ins.reads) if o.buffer not in HBM]
    first = on_chip[0].region.p_lo // K.PARTITIONS_PER_DMA_ENGINE if on_chip else 0
    return tuple((first + k) % K.DMA_ENGINES_PER_CORE for k in range(count))


def dma_seconds(ins: Instruction, cores_sharing_stack: int) -> float:
    """Data-movement time of a dma_copy on its engines (fixed latency is added by the scheduler)."""
    dma = ins.dma
    if dma.nbytes <= 0:
        return 0.0
    engines = len(dma_engines(ins))
    per_engine = K.DMA_ENGINE_BYTES_PER_S * K.dma_efficiency(dma.bytes_per_partition)
    rate = min(engines * per_engine, K.DMA_CORE_BYTES_PER_S)
    if "hbm" in dma.direction:
        rate = min(rate, K.HBM_STACK_BYTES_PER_S / cores_sharing_stack)
    return dma.nbytes / rate
