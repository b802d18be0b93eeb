"""How long one instruction occupies its engine or its DMA engines (seconds), by the rules of
`constants` (nki-semantics-and-trn2.md §3 "Per-instruction cost rules" and §6).

The `*_cycles` functions are cost rules: engine cycles of one traced instruction. An instruction
names its rule where it is registered (`nkisim.vocabulary.instruction`); `compute_seconds` adds the
minimum initiation interval, the fixed overhead and the engine clock."""
from __future__ import annotations

from nkisim import vocabulary
from nkisim.costmodel import constants as K
from nkisim.emulator.trace import Instruction
from nkisim.vocabulary import GPSIMD, SCALAR, TENSOR, VECTOR

HALF_WIDTH = ("bfloat16", "float16")
VECTOR_PARTITIONS = 128     # the Vector data path's elements per cycle are spread over the 128 partitions
FAST_TENSOR_TENSOR_OPS = ("add", "multiply", "subtract")


def _data_reads(ins: Instruction):
    """Tensor inputs streamed over the free axis (per-lane [P, 1] operands and biases are not)."""
    return [o for o in ins.reads if o.elements_per_partition > 1 or o.role in ("data", "data1", "data2", "src")]


def _streamed(ins: Instruction):
    return (*_data_reads(ins), *ins.writes)


def _op_name(ins: Instruction) -> str:
    return ins.attrs.get("op", "")


def per_element_cycles(ins: Instruction) -> float:
    """One element per partition per cycle: ACTIVATE (scale and bias are free) and any
    instruction on the Scalar, GpSimd or Sync engine."""
    return ins.elements_per_partition / K.SCALAR_ELEMENTS_PER_CYCLE


def _vector_modes(ins: Instruction) -> tuple[bool, bool, bool]:
    """(all streamed operands in SBUF, all half width, all contiguous): the perf-mode conditions."""
    streamed = _streamed(ins)
    return (all(o.buffer == "sbuf" for o in streamed), all(o.dtype in HALF_WIDTH for o in streamed),
            all(o.contiguous for o in streamed))


def tensor_tensor_cycles(ins: Instruction) -> float:
    """TENSOR_TENSOR on Vector: 2N unless one input is in PSUM or (all SBUF, half width, contiguous,
    add/multiply/subtract); halved again in perf mode with both inputs in SBUF at half width."""
    if ins.engine != VECTOR:
        return per_element_cycles(ins)
    n = ins.elements_per_partition
    reads = _data_reads(ins)
    in_psum = any(o.buffer == "psum" for o in reads)
    all_sbuf, half, contiguous = _vector_modes(ins)
    fast = in_psum or (all_sbuf and half and contiguous and _op_name(ins) in FAST_TENSOR_TENSOR_OPS)
    cycles = n if fast else K.TENSOR_TENSOR_SLOW_FACTOR * n
    return cycles / perf_mode_lift(ins)


def streaming_cycles(ins: Instruction) -> float:
    """TENSOR_SCALAR and TENSOR_COPY on Vector (one streamed input), by trn2's Vector data path
    (SDK:nki/guides/architecture/trainium2_arch.rst, "Compute Engine Specifications": 512 bf16/fp16 elements per
    cycle, 256 for other data types). Every operand bf16/fp16: the perf-mode conditions decide how much of the
    512 it gets (same page, "Vector Engine Performance Mode"): all in SBUF and contiguous N/4; all in SBUF, or
    contiguous with a PSUM side, N/2; otherwise N. Any other dtype among them (fp32, fp8, integers): the full
    256-element path, two elements per partition per cycle (N/2), all in SBUF and contiguous; otherwise
    NeuronCore-v2's one element per cycle, N. That the 256 path needs the full 512's conditions is the model's
    reading (no page states it): published trn2 figures support it (nkisim/README.md, "The Vector data path")."""
    if ins.engine != VECTOR:
        return per_element_cycles(ins)
    n = ins.elements_per_partition
    all_sbuf, half, contiguous = _vector_modes(ins)
    if half:
        return n / perf_mode_lift(ins)
    return n * VECTOR_PARTITIONS / K.VECTOR_OTHER_DTYPE_ELEMENTS_PER_CYCLE if all_sbuf and contiguous else n


def perf_mode_lift(ins: Instruction) -> float:
    """The throughput lift trn2's Vector performance mode gives the instruction (SDK:nki/guides/architecture/
    trainium2_arch.rst, "Vector Engine Performance Mode"; 1: none). Its cost rule says which conditions apply:
    a bf16/fp16 tensor_copy / tensor_scalar (`streaming_cycles`) gets 4x with every operand in SBUF and
    contiguous, 2x with either; a tensor_tensor (`tensor_tensor_cycles`) 2x with its inputs in SBUF, every
    operand half width. Performance mode uses a memory bus Vector shares with GpSimd (same page, "Data Movement
    Updates"), so an instruction with a lift takes turns with GpSimd's (the scheduler)."""
    if ins.engine != VECTOR:
        return 1
    all_sbuf, half, contiguous = _vector_modes(ins)
    if not half:
        return 1
    rule = vocabulary.spec(ins.isa).cost
    if rule is streaming_cycles:
        if all_sbuf and contiguous:
            return K.VECTOR_PERF_MODE_FULL
        return K.VECTOR_PERF_MODE_HALF if all_sbuf or contiguous else 1
    if rule is tensor_tensor_cycles and all(o.buffer == "sbuf" for o in _data_reads(ins)):
        return K.VECTOR_PERF_MODE_HALF
    return 1


def reduce_cycles(ins: Instruction) -> float:
    """TENSOR_REDUCE on Vector: N/2 for a half-width add or max, else N."""
    _, half, _ = _vector_modes(ins)
    n = ins.elements_per_partition
    return n / 2 if half and _op_name(ins) in ("add", "max", "maximum") else n


def memset_cycles(ins: Instruction) -> float:
    """MEMSET on Vector: N/2 for a half-width zero fill, else N."""
    if ins.engine != VECTOR:
        return per_element_cycles(ins)
    _, half, _ = _vector_modes(ins)
    n = ins.elements_per_partition
    return n / 2 if half and ins.attrs.get("value", None) == 0 else n


def topk_cycles(ins: Instruction) -> float:
    """TOPK on GpSimd: "4*n + K GpSIMD Engine cycles per partition", n the snake's elements and K the results
    (the nki.isa.topk page's estimated instruction cost, NKI 0.6 and 0.7)."""
    return 4 * ins.attrs["n"] + ins.attrs["k"]


def reciprocal_cycles(ins: Instruction) -> float:
    """RECIPROCAL on Vector: a fixed number of cycles per element."""
    return K.RECIPROCAL_CYCLES_PER_ELEMENT * ins.elements_per_partition


WIDE_STRIDE_ENGINES = (VECTOR, SCALAR, GPSIMD)   # the compute engines the access-pattern rule is written for


def wide_stride(ins: Instruction) -> bool:
    """Does an SBUF/PSUM operand stream with more than `WIDE_STRIDE_BYTES` between neighbours along its innermost
    free dim? Its interface then supplies half its peak bandwidth: "roughly 50% performance hit on the
    instructions" (SDK:nki/guides/architecture/trainium_inferentia2_arch.rst, "Performance Consideration",
    access pattern)."""
    return any(o.buffer in ("sbuf", "psum") and o.inner_stride_bytes > K.WIDE_STRIDE_BYTES for o in _streamed(ins))


def rule_cycles(ins: Instruction) -> float:
    """Engine cycles of the instruction's own cost rule, doubled by a wide stride: before the minimum
    initiation interval and the fixed overheads."""
    cycles = vocabulary.spec(ins.isa).cost(ins)
    if ins.engine in WIDE_STRIDE_ENGINES and wide_stride(ins):
        cycles *= K.WIDE_STRIDE_SLOWDOWN
    return cycles


def compute_seconds(ins: Instruction) -> float:
    """Engine time of a compute instruction: max(MIN_II, cycles, doubled by a wide stride) + fixed overhead, at
    the engine clock."""
    engine = ins.engine
    if engine not in K.ENGINE_CLOCK_HZ:
        raise ValueError(f"instruction {ins.index} ({ins.isa}) has engine {engine!r}; "
                         f"the cost model knows {sorted(K.ENGINE_CLOCK_HZ)} and DMA")
    cycles = max(K.MIN_II_CYCLES, rule_cycles(ins))
    if ins.attrs.get("reads_accumulator"):
        cycles += K.ACT_READ_ACCUMULATOR_CYCLES
    cycles += {GPSIMD: K.GPSIMD_START_CYCLES, TENSOR: K.TENSOR_OVERHEAD_CYCLES}.get(engine, K.INSTRUCTION_OVERHEAD_CYCLES)
    return cycles / K.ENGINE_CLOCK_HZ[engine]


STREAMING_ENGINES = (VECTOR, SCALAR)   # the engines the arch guide's overhead rules are written for


def streamed_saving(ins: Instruction) -> float:
    """Seconds of `compute_seconds` a Vector or Scalar instruction saves when it follows another compute
    instruction on its engine back to back: the access overhead, which "compute engines can typically hide
    ... through instruction level parallelism" (SDK:nki/guides/architecture/trainium_inferentia2_arch.rst,
    "Performance Consideration"; the scheduler decides when it applies: to one that reads the previous
    instruction's output only behind a long one, `hides_next_access`). The static overhead stays (its row in
    `constants` says why). 0 on the other engines."""
    if ins.engine not in STREAMING_ENGINES:
        return 0.0
    return K.ACCESS_OVERHEAD_CYCLES / K.ENGINE_CLOCK_HZ[ins.engine]


def hides_next_access(ins: Instruction) -> bool:
    """Does this Vector or Scalar instruction stream long enough (its rule's cycles at least the access
    overhead) for the next instruction on its engine to set up its SBUF access behind it, even one that reads
    its output? The architecture guide's Vector cost model adds 100 cycles, the static overhead, to
    "back-to-back instructions ... with every instruction depending on the output tile of the previous
    instruction" (SDK:nki/guides/architecture/trainium_inferentia2_arch.rst, "Cost Model"): no access overhead
    on top, so after a long instruction a dependent one pays the static overhead only. After a short one it
    pays both: the performance guide's one-element ACTIVATEs, each reading the one before, issue every ~264
    cycles (SDK:nki/deep-dives/nki_perf_guide.rst, Opt #5a)."""
    return ins.engine in STREAMING_ENGINES and rule_cycles(ins) >= K.ACCESS_OVERHEAD_CYCLES


def operations(ins: Instruction) -> float:
    """Work of one compute instruction for the roofline: one operation per element it produces
    (partitions x elements per partition); a matmul counts 2 per multiply-accumulate (2 x contraction
    partitions x moving free size x stationary free size), as FLOPs are counted, and a double-row FP8 one
    contracts over its partitions and the 2 rows ("the double FP8 instruction performs double the FLOPs",
    SDK:nki/guides/architecture/trainium2_arch.rst "Double FP8 Matmul Performance")."""
    a = ins.attrs
    if "moving_free" in a and "stationary_free" in a:
        rows = 2 if a.get("perf_mode") == "double_row" else 1
        return 2.0 * ins.partitions * rows * a["moving_free"] * a["stationary_free"]
    return float(ins.partitions * ins.elements_per_partition)
