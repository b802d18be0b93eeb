"""The trn2 cost model's constants: one table, every row with its value, source and confidence.

Sources are abbreviated as in the project reference (nki-semantics-and-trn2.md §3, §4, §6):
"SDK:<path>" is a page of the Neuron SDK docs, "SDK-2.26" the 2.26 API docstrings ("Estimated
instruction cost"), "published" a hardware measurement quoted in kernel-designs.md.
Confidence: High (documented value), Medium, Low (assumption or a reading of a figure),
Derived (computed from other rows or published figures; the note says how), Fitted (calibrated by
benchmarks/calibration.py on the development set: the published GELU figures, the docs' matmul
walkthrough and nki-library's rmsnorm_quant, within the row's range).
Rows with `low`/`high` are uncertain: `varied` sets them to one end of their range, which is how
estimates that no published figure calibrates (fold, LNC=2) get their low/high range.

Everything computed from these numbers is an estimate; `TABLE` is what the calibration page prints.
"""
from __future__ import annotations

import math
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

from nkisim import limits
from nkisim.vocabulary import DGE_MODES, GPSIMD, SCALAR, SYNC, TENSOR, VECTOR


@dataclass(frozen=True)
class Constant:
    name: str
    value: float
    unit: str
    source: str
    confidence: str
    note: str = ""
    attr: str | None = None          # module attribute holding the value, for rows that can be varied
    low: float | None = None         # the end of the uncertain range giving the shortest time
    high: float | None = None        # ... and the longest time

    @property
    def uncertain(self) -> bool:
        return self.low is not None


TABLE: list[Constant] = []


def _row(name: str, value, unit: str, source: str, confidence: str, note: str = "", *,
         attr: str | None = None, low: float | None = None, high: float | None = None):
    if (low is None) != (high is None) or (low is not None and attr is None):
        raise ValueError(f"constant {name}: a range needs low, high and the attribute that holds the value")
    TABLE.append(Constant(name, value, unit, source, confidence, note, attr, low, high))
    return value


ARCH = "SDK:nki/guides/architecture/trainium2_arch.rst"
INF2_ARCH = "SDK:nki/guides/architecture/trainium_inferentia2_arch.rst"
DMA_DOC = "SDK:nki/get-started/about/nki-dma-overview.rst"
DMA_BW_DOC = "SDK:nki/deep-dives/nki-dma-bandwidth-guide.rst"
WALKTHROUGH = "SDK:nki/guides/tutorials/kernel-optimization.rst (Neuron Explorer summaries, fp32 matmul)"

# --- engine clocks ------------------------------------------------------------------------------
TENSOR_CLOCK_HZ = _row("tensor_clock", 2.4e9, "Hz", ARCH, "High")
VECTOR_CLOCK_HZ = _row("vector_clock", 0.96e9, "Hz", ARCH, "High")
SCALAR_CLOCK_HZ = _row("scalar_clock", 1.2e9, "Hz", ARCH, "High")
GPSIMD_CLOCK_HZ = _row("gpsimd_clock", 1.2e9, "Hz", ARCH, "High")
SYNC_CLOCK_HZ = _row("sync_clock", 1.2e9, "Hz", "SDK:tools/neuron-explorer/profile-schema-reference.rst",
                     "Low", "Sync clock unpublished; the profiler's 1.2 GHz base clock is used")
ENGINE_CLOCK_HZ = {TENSOR: TENSOR_CLOCK_HZ, VECTOR: VECTOR_CLOCK_HZ, SCALAR: SCALAR_CLOCK_HZ,
                   GPSIMD: GPSIMD_CLOCK_HZ, SYNC: SYNC_CLOCK_HZ}

# --- per-instruction cost rules (engine cycles, N = elements per partition) --------------------
MIN_II_CYCLES = _row("min_ii", 64, "cycles", "SDK-2.26 API docs", "Medium",
                     "minimum initiation interval: cost = max(MIN_II, formula)")
STATIC_OVERHEAD_CYCLES = _row(
    "static_overhead", 100, "cycles", f"{INF2_ARCH} 'Cost Model' (Vector Engine; Scalar: 'Performance Consideration')",
    "Medium-Low",
    "the static instruction overhead (NC-v2 figure), paid by every Vector or Scalar instruction. The page adds "
    "it for back-to-back instructions 'either with N << 128 or with every instruction depending on the output "
    "tile of the previous instruction'; dropping it for the others would put nki-library's rmsnorm_quant "
    "(back-to-back independent scalar_tensor_tensor) 5% further below its published times")
ACCESS_OVERHEAD_CYCLES = _row(
    "access_overhead", 60, "cycles", f"{INF2_ARCH} 'Performance Consideration' (tensor access overhead)",
    "Medium-Low",
    "starting an SBUF/PSUM access request (NC-v2 figure), which 'compute engines can typically hide ... "
    "through instruction level parallelism': paid by a Vector or Scalar instruction that starts on an idle "
    "engine or reads the output of a short instruction before it, one streaming fewer cycles than this (it "
    "'cannot start data read until the previous instruction has all of its output committed', "
    "SDK:nki/deep-dives/nki_perf_guide.rst Opt #5a, one-element ACTIVATEs every ~264 cycles); hidden behind "
    "the previous instruction when it follows it back to back, a dependent one too if that one is long: the "
    "page's 'Cost Model' gives dependent back-to-back Vector instructions N + 100 cycles, the static overhead "
    "alone (the scheduler; costs.hides_next_access)")
# An instruction on an idle engine pays both; the published GELU ACTIVATE (93.9 us / 26) and TENSOR_TENSOR
# (59.6 us / 26) times, each instruction waiting for a DMA, check the sum (not fitted to them).
INSTRUCTION_OVERHEAD_CYCLES = STATIC_OVERHEAD_CYCLES + ACCESS_OVERHEAD_CYCLES
GPSIMD_START_CYCLES = _row("gpsimd_start", 150, "cycles", "SDK-2.26 (iota/affine_select)", "Medium",
                           "replaces the static and access overheads on GpSimd")
ACT_READ_ACCUMULATOR_CYCLES = _row("act_read_accumulator", 64, "cycles", f"SDK-2.26; {INF2_ARCH}",
                                   "Medium", "activation_reduce extra (= MIN_II)")
SCALAR_ELEMENTS_PER_CYCLE = _row("scalar_elements_per_cycle", 1, "elem/partition/cycle",
                                 f"SDK-2.26 API doc; {INF2_ARCH}", "Medium-High",
                                 "ACTIVATE costs N cycles; scale and bias are free")
VECTOR_PERF_MODE_FULL = _row("vector_perf_mode_full", 4, "x", ARCH, "Medium",
                             "tensor_copy/tensor_scalar, SBUF in+out, bf16/fp16, contiguous: N/4")
VECTOR_PERF_MODE_HALF = _row("vector_perf_mode_half", 2, "x", ARCH, "Medium",
                             "the same non-contiguous in SBUF, or contiguous with a PSUM side (neither: N); "
                             "tensor_tensor with both inputs in SBUF and all bf16/fp16")
PUBLISHED_LNC1_PROFILE = ("a workshop's single-tile attention kernel, V1 at n x d 128 x 64, Neuron Explorer "
                          "summary published with its source (public file index; nkisim/README.md, validation table)")
NKILIB_RMSNORM_SPEC = ("SDK:nki/library/specs/design-rmsnorm-quant.rst (profile screenshots of nki-library's "
                       "rmsnorm_quant, S=160, H=16384, LNC=2)")
VECTOR_OTHER_DTYPE_ELEMENTS_PER_CYCLE = _row(
    "vector_other_dtype_path", 256, "elements/cycle", f"{ARCH} (Compute Engine Specifications)", "Medium",
    "the Vector data path for dtypes other than bf16/fp16 (512 for those): a tensor_copy / tensor_scalar with any "
    "such operand, all in SBUF and contiguous (the conditions of the full bf16 path), streams 2 elements per "
    "partition per cycle, N/2; otherwise N. Published checks: the rmsnorm_quant spec's quantising bf16 -> fp8 "
    "tensor_scalar of a [128, 16384] tile takes 8.7 us (N/2 at 0.96 GHz); a fp32 PSUM evacuation runs at N "
    "(nkisim/README.md, outside checks)")
TENSOR_TENSOR_SLOW_FACTOR = _row(
    "tensor_tensor_slow", 1, "x N", f"{ARCH} (Vector data path 256 elements/cycle for 32-bit dtypes)", "Medium",
    "cycles per element of a Vector tensor_tensor outside bf16 perf mode. trn2's documented data path "
    "gives ~N; the NC-v2-era 2.26 docstring says 2N, kept as the slow end of the range",
    attr="TENSOR_TENSOR_SLOW_FACTOR", low=1, high=2)
RECIPROCAL_CYCLES_PER_ELEMENT = _row("reciprocal", 8, "cycles/elem", "SDK-2.26; nki.api.shared.rst",
                                     "Medium")
WIDE_STRIDE_BYTES = _row(
    "wide_stride", 16, "B", f"{INF2_ARCH} 'Performance Consideration' (access pattern)", "Medium",
    "an SBUF/PSUM access whose innermost free-dim stride exceeds this many bytes gets half the interface's peak "
    "bandwidth ('roughly 50% performance hit on the instructions'). An NC-v2 figure, kept for trn2: its "
    "architecture guide (trainium2_arch.rst) lists only what changed from NC-v2, and its access changes are the "
    "two lifted restrictions on parallel SBUF/PSUM access, not this rule (the model's reading)")
WIDE_STRIDE_SLOWDOWN = _row("wide_stride_slowdown", 2, "x", f"{INF2_ARCH} 'Performance Consideration' (access pattern)",
                            "Medium", "a Vector, Scalar or GpSimd instruction with such an operand: its per-element "
                            "cycles (before MIN_II and the fixed overheads) times this")

# --- Tensor engine (costmodel/tensor_engine.py; checked against the docs' matmul walkthrough, benchmarks/dev_set) ----
MATMUL_INIT_CYCLES = _row("matmul_init_latency", 64, "cycles", f"{INF2_ARCH} 'Cost Model'; SDK-2.26 nc_matmul doc",
                          "Medium", "MM_INIT_LATENCY: matmul II = max(min(64, N_stationary), N_moving) "
                          "(NeuronCore-v2 figure); Tensor-engine nc_transpose II = max(P, min(64, F))")
MATMUL_FP32_FACTOR = _row("matmul_fp32_factor", 4, "x", "SDK-2.26 nc_matmul doc", "Medium",
                          f"fp32 inputs cost 4x fp8/bf16/fp16/tf32 (trn2: 20 vs 79 dense TFLOPS, {ARCH})")
MATMUL_FP32_FAST_SPEEDUP = _row("matmul_fp32_fast_speedup", 2, "x",
                                f"{ARCH} 'Built-in Transpose Support'; SDK:nki/api/nki/isa/__init__.py nc_matmul",
                                "Medium", "fp32 in transpose mode (nc_matmul(is_transpose=True), or nc_transpose on "
                                "the Tensor engine, which the page names as the same mode), or with an is_*_onezero "
                                "hint: 2x faster than the fp32 factor")
THROTTLE_DOC = "SDK:tools/neuron-explorer/overview-summary-page.rst 'Understanding throttling'"
TENSOR_THROTTLE_FLOOR = _row(
    "tensor_throttle_floor", 0.5, "fraction of peak", THROTTLE_DOC, "Medium",
    "trn2's dI/dt limit: a Tensor-engine burst starts capped at roughly 50% of the bf16-adjusted peak, and the "
    "cap re-engages when utilization over a window falls below it (costmodel/tensor_throttle.py). Work below "
    "it is never slowed: the walkthrough's fp32 matmuls run at 1/4 of the peak",
    attr="TENSOR_THROTTLE_FLOOR", low=0.6, high=0.4)
TENSOR_THROTTLE_RAMP_S = _row("tensor_throttle_ramp", 3e-6, "s", THROTTLE_DOC, "Medium",
                              "the cap ramps from the floor to the full peak over about the first 3 us of a burst",
                              attr="TENSOR_THROTTLE_RAMP_S", low=2e-6, high=4e-6)
TENSOR_THROTTLE_WINDOW_S = _row("tensor_throttle_window", 3e-6, "s", THROTTLE_DOC, "Medium",
                                "utilization below the floor over any ~3 us window re-engages the cap")
TENSOR_RESULT_LATENCY_CYCLES = _row(
    "tensor_result_latency", 502, "cycles", f"{INF2_ARCH} 'Cost Model'; {WALKTHROUGH}", "Derived",
    "TensorE is deeply pipelined: the next instruction issues one initiation interval after this one, its "
    "result is ready this much later (the instruction's end in a profile; a consumer on another engine "
    "waits for it, the next Tensor instruction does not). Derived from the walkthrough's tiled kernel, whose "
    "32,768 fp32 matmuls each waited for data (Tensor active 34.82 ms = 1.0626 us apiece, against a "
    "0.8533 us interval: 0.209 us more, 502 cycles). Back to back (the hoisted kernel, 28.16 ms) it adds "
    "once per burst",
    attr="TENSOR_RESULT_LATENCY_CYCLES", low=250, high=750)
TENSOR_OVERHEAD_CYCLES = _row("tensor_overhead", 0, "cycles", f"{INF2_ARCH} 'Cost Model'", "Low",
                              "replaces the static and access overheads on the Tensor engine: its cost formulas are "
                              "initiation intervals of a deeply pipelined engine, fixed costs included")
SEMAPHORE_LATENCY_S = _row("semaphore_latency", 64e-9, "s", "reference §6 suggested model", "Low",
                           "producer done -> consumer on another queue may start (assumption, 50-100 ns)",
                           attr="SEMAPHORE_LATENCY_S", low=50e-9, high=100e-9)

# --- DMA (the DMA model is described in nkisim/costmodel/dma.py) -------------------------------------
DMA_ENGINES_PER_CORE = _row("dma_engines_per_core", 16, "engines", DMA_DOC, "High",
                            "a transfer is spread over up to 16 engines (rings); each moves its share")
PARTITIONS_PER_DMA_ENGINE = _row("partitions_per_dma_engine", 8, "partitions", DMA_DOC, "High",
                                 "engine k moves partitions 8k .. 8k+7: a transfer uses the engines of the "
                                 "partitions it spans (the overview's A[4, 4096] example moves on one engine)")
DMA_ENGINE_BYTES_PER_S = _row(
    "dma_engine_bandwidth", 25.165625e9, "B/s", f"{DMA_DOC}; {DMA_BW_DOC}", "Fitted",
    "per engine, for rows much longer than the packet overhead. Fitted on the development set (the GELU "
    "figures, the docs' matmul walkthrough, nki-library's rmsnorm_quant: benchmarks/calibration.py) within "
    "the documented 23 B/ns achievable .. 27.2 GB/s theoretical",
    attr="DMA_ENGINE_BYTES_PER_S", low=27.2e9, high=23e9)
DMA_TRANSFER_FIXED_S = _row(
    "dma_transfer_fixed", 0.021875e-6, "s", f"{DMA_DOC} (each transfer ends with a semaphore write on "
    "every engine)", "Fitted",
    "per transfer, on its queue: descriptor processing and the completion semaphore writes, no data "
    "moving. A queue runs its transfers in order on each engine, so it is serial within a queue (after the "
    "previous transfer's start, and on each engine they share after its data there), while same-queue "
    "transfers on other engines, and other queues, move data meanwhile. Fitted on the development set "
    "(benchmarks/calibration.py) within 0 .. 0.4 us, an assumed bound: at most about a sixth of a 128 x 8 KiB "
    "transfer's data time",
    attr="DMA_TRANSFER_FIXED_S", low=0.0, high=0.4e-6)
DMA_QUEUE_LATENCY_S = _row(
    "dma_queue_latency", 1.3e-6, "s", DMA_BW_DOC, "Medium",
    "trigger -> first byte (~1300 ns cross-engine). Counted from the trigger, which waits for the "
    "producers of the data it moves (SDK:nki/get-started/about/nki-dma-overview.rst 'DMA Triggers'): hidden behind "
    "work already queued when there is nothing to wait for, paid after the producer's semaphore (and the "
    "descriptor generation) when there is",
    attr="DMA_QUEUE_LATENCY_S", low=0.7e-6, high=1.3e-6)
DMA_PACKET_OVERHEAD_BYTES = _row(
    "dma_packet_overhead", 199.0, "B", f"{DMA_BW_DOC} ('per-packet overhead'); {WALKTHROUGH}", "Derived",
    "per descriptor row (packet), the engine time it costs beyond its data, in bytes at the plateau rate: "
    "a row of s bytes moves at s / (s + this) of the plateau. Derived from the walkthrough's published "
    "'Dma Packet Time': the tiled kernel (a quarter of its bytes in 512 B rows) spent 519.58 ms on 10.87 GB, "
    "the hoisted one (almost all 2 KiB rows) 402.07 ms on 8.86 GB, so 512 B rows moved at 0.79 of the 2 KiB "
    "rate. The DMA overview's throughput plot (isolated transfers, unlabelled axis) falls faster below "
    "2 KiB: it also carries each transfer's fixed costs, which queued transfers overlap",
    attr="DMA_PACKET_OVERHEAD_BYTES", low=100.0, high=400.0)
DMA_TRANSPOSE_EFFICIENCY = _row(
    "dma_transpose_efficiency", 0.9, "fraction", f"{ARCH} 'DMA Transpose'", "Medium",
    "dma_transpose HBM->SBUF reaches up to 90% of a copy's DMA throughput (best case, hardware-friendly "
    "access patterns: whole [128, 16] output blocks; a partly filled block costs a full one, dma_transpose.py)")
DMA_TRANSPOSE_SBUF_EFFICIENCY = _row(
    "dma_transpose_sbuf_efficiency", 0.5, "fraction", f"{ARCH} 'SBUF2SBUF DMA transpose'", "Medium",
    "dma_transpose SBUF->SBUF reaches up to 50% of DMA throughput")
HBM_STACK_BYTES_PER_S = _row(
    "hbm_stack_bandwidth", 725e9, "B/s", "SDK:about-neuron/arch/neuron-hardware/trainium2.rst", "Derived",
    "2.9 TB/s per chip / 4 stacks (the NKI guide's 3 TB/s gives 750). MBU denominator (one stack, as "
    "the profiler computes it) and the traffic limit shared by the stack's two cores")
HBM_EFFICIENCY = _row(
    "hbm_efficiency", 0.9, "fraction", "assumption (no published figure)", "Low",
    "share of the stack bandwidth a DMA stream can reach (refresh, bank conflicts); binds only when "
    "both cores of a stack stream at once (LNC=2)",
    attr="HBM_EFFICIENCY", low=0.95, high=0.8)
HBM_WRITE_EFFICIENCY = _row(
    "hbm_write_efficiency", 0.9921875, "fraction", f"assumption; {DMA_DOC} example 1 (profile image)", "Fitted",
    "rate of a transfer that writes HBM, relative to one that reads it (an HBM bus turning from reads to "
    "writes, write acknowledgements: the model's only direction-dependent cost). Fitted on the development "
    "set (benchmarks/calibration.py) within an assumed 0.5 .. 1. The published backward GELU (2 loads per "
    "store) moved more bytes per second than the forward one (1 load per store); read as whole launches, "
    "both totals holding the same launch setup (launch_preamble_lnc1), they leave the fit no write penalty "
    "to charge: it settles within 1% of the top of the range, as the one published single-transfer pair has it (the "
    "DMA overview's example 1 profile, nki/img/overviews/nki-dma-intro-3.png, moves 32 KiB on one engine "
    "in 1416 ns in and about 1.23 us out: the image's bars, 602 px for the load, 526 px for the store). "
    "The forward GELU alone still fits 0.91 (the Calibration page)",
    attr="HBM_WRITE_EFFICIENCY", low=1.0, high=0.5)
CORES_PER_HBM_STACK = _row("cores_per_hbm_stack", 2, "cores",
                           "SDK:about-neuron/arch/neuron-features/logical-neuroncore-config.rst", "High",
                           "LNC=2 cores share one stack: each gets an equal static share")

# --- launch ----------------------------------------------------------------------------------------
LAUNCH_PREAMBLE_S = _row(
    "launch_preamble", 25.7e-6, "s", NKILIB_RMSNORM_SPEC, "Derived",
    "an LNC=2 launch, from the start of a kernel's profile to its first instruction (runtime and queue "
    "setup): the spec's LNC=2 profile shows the first engine activity at 25.7 us; nki-library's mlp_tkg "
    "test vectors at LNC=2 (tpbSgCyclesSum against bytes moved) leave 40.4 us at no bytes where the model's "
    "span has 15.1, i.e. 25.3. Not part of an estimate's total_time, the span of the kernel's instructions; "
    "added only where a published figure spans the whole launch (benchmarks/dev_set/figures.json, "
    "includes_preamble), by the launch's LNC (`launch_preamble_s`)",
    attr="LAUNCH_PREAMBLE_S", low=15e-6, high=30e-6)
LAUNCH_PREAMBLE_LNC1_S = _row(
    "launch_preamble_lnc1", 11.92e-6, "s", PUBLISHED_LNC1_PROFILE, "Derived",
    "an LNC=1 launch's setup: a published Neuron Explorer summary of a single-core kernel has total_time "
    "21.99 us (the runtime's start to stop) and total_exec_time 10.07 us (the earliest non-setup instruction "
    "or DMA packet to the latest, SDK:tools/neuron-explorer/profile-schema-reference.rst, Summary): 11.92 us "
    "of setup. nki-library's mlp_tkg test vectors at LNC=1 agree: 13.6 us at no bytes where the model's span "
    "has 2.5, i.e. 11.1. An LNC=2 launch sets up two cores (`launch_preamble`)",
    attr="LAUNCH_PREAMBLE_LNC1_S", low=8e-6, high=16e-6)
LAUNCH_SETUP_DMA_S = _row(
    "launch_setup_dma", 4.89e-6, "s", PUBLISHED_LNC1_PROFILE, "Derived",
    "DMA the launch setup runs outside the kernel's span, which a whole-launch summary counts in its "
    "dma_active_time (\"at least one DMA packet\"; total_exec_time starts at the earliest non-setup packet, "
    "SDK:tools/neuron-explorer/profile-schema-reference.rst, Summary). The launch_preamble_lnc1 summary has "
    "static_dma_active_time 4.893 us (14 packets, 135 KB) beside its kernel's own 128 software-DGE packets "
    "(131 KB, 1.409 us), and its dma_active_time, 6.302 us, is their sum: the two never overlap. The same "
    "file's 11 other summaries (4 kernel versions x 3 shapes) give 3.87 .. 5.53 us. No summary splits it at "
    "LNC=2; the same value is assumed there",
    attr="LAUNCH_SETUP_DMA_S", low=3.87e-6, high=5.53e-6)


# --- descriptor generation (dge_mode) ------------------------------------------------------------
SWDGE_S_PER_DMA = _row(
    "swdge_per_dma", 0.6e-6, "s", f"{WALKTHROUGH}; published (LayerNorm fold, ~40 DMAs)", "Derived",
    "software DGE: GpSimd busy per dma_copy, serialised in GpSimd's queue. The walkthrough's tiled kernel "
    "(Dynamic DMA 100%, no hardware-DGE packets) ran 65,536 such transfers in 39.9 ms, so at most 0.61 us "
    "each; the fold's author read ~0.75 us apiece off a timeline (the slow end)",
    attr="SWDGE_S_PER_DMA", low=0.5e-6, high=0.75e-6)
HWDGE_S_PER_DMA = _row("hwdge_per_dma", 0.6e-6, "s", f"{ARCH}; SDK:nki/deep-dives/nki-dge.rst",
                       "High", "hardware DGE: \"about 600 ns\" per DMA instruction on the DGE instance the issuing "
                       "queue's sequencer (Sync or Scalar) commands, apart from Scalar's compute pipeline")
DGE_NONE_S_PER_DMA = _row("dge_none_per_dma", 0.0, "s", "SDK:nki/deep-dives/nki-dge.rst", "High",
                          "descriptors pre-built before the kernel runs")

# --- memory sizes ----------------------------------------------------------------------------------
# (defined in nkisim.limits, listed here with their sources)
SBUF_BYTES_PER_PARTITION = _row("sbuf_per_partition", limits.SBUF_BYTES_PER_PARTITION, "B", ARCH, "High")
SBUF_USABLE_BYTES_PER_PARTITION = _row("sbuf_usable_per_partition", limits.SBUF_USABLE_BYTES_PER_PARTITION, "B",
                                       "nki-library mlp_cte_constants.py", "Low-Medium")

# per nkisim.vocabulary.DGE_MODES name, the attribute holding its cost (unknown is the compiler's
# default, software DGE); read at call time so `overridden` values apply
DGE_SECONDS_ATTRIBUTE = {"unknown": "SWDGE_S_PER_DMA", "swdge": "SWDGE_S_PER_DMA", "hwdge": "HWDGE_S_PER_DMA",
                         "none": "DGE_NONE_S_PER_DMA"}


def dma_efficiency(bytes_per_partition: float) -> float:
    """Fraction of the plateau rate a DMA engine moves rows of this many contiguous bytes at: each row
    (packet) costs its bytes plus `DMA_PACKET_OVERHEAD_BYTES` of engine time."""
    if bytes_per_partition <= 0:
        raise ValueError(f"bytes per partition must be > 0, got {bytes_per_partition}")
    return bytes_per_partition / (bytes_per_partition + DMA_PACKET_OVERHEAD_BYTES)


def launch_preamble_s(lnc: int) -> float:
    """The launch setup a published figure spanning the whole launch holds beyond the kernel's instructions."""
    return LAUNCH_PREAMBLE_LNC1_S if lnc == 1 else LAUNCH_PREAMBLE_S


def dge_seconds(dge_mode: str) -> float:
    """Descriptor-generation time one dma_copy costs its issuing queue."""
    if dge_mode not in DGE_MODES:
        raise ValueError(f"unknown dge_mode {dge_mode!r}; expected one of {sorted(DGE_MODES)}")
    return getattr(sys.modules[__name__], DGE_SECONDS_ATTRIBUTE[dge_mode])


def table_markdown() -> str:
    """The constants table as Markdown (for the book and the calibration report)."""
    lines = ["| constant | value | range (fast .. slow) | unit | source | confidence | note |",
             "|---|---|---|---|---|---|---|"]
    for c in TABLE:
        value = f"{c.value:g}"
        span = f"{c.low:g} .. {c.high:g}" if c.uncertain else ""
        lines.append(f"| {c.name} | {value} | {span} | {c.unit} | {c.source} | {c.confidence} | {c.note} |")
    return "\n".join(lines)


def uncertain() -> list[Constant]:
    """The rows with a low/high range."""
    return [c for c in TABLE if c.uncertain]


@contextmanager
def overridden(values: dict[str, float]) -> Iterator[None]:
    """Within the block, the named rows (by row name) take the given values; restored afterwards."""
    module = sys.modules[__name__]
    rows = {c.name: c for c in TABLE}
    unknown = [n for n in values if n not in rows or rows[n].attr is None]
    if unknown:
        raise ValueError(f"cannot vary {unknown}: rows that can be varied are "
                         f"{sorted(c.name for c in TABLE if c.attr)}")
    saved = {rows[n].attr: getattr(module, rows[n].attr) for n in values}
    try:
        for n, v in values.items():
            setattr(module, rows[n].attr, v)
        yield
    finally:
        for attr, v in saved.items():
            setattr(module, attr, v)


def varied(end: str) -> dict[str, float]:
    """Every uncertain row at one end of its range: end="low" (shortest times) or "high"."""
    if end not in ("low", "high"):
        raise ValueError(f"end must be 'low' or 'high', got {end!r}")
    return {c.name: getattr(c, end) for c in uncertain()}
