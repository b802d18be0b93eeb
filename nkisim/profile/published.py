"""Published trn2 hardware figures for the workshop's kernels (kernel-designs.md), with their source.

These are measurements by the kernels' authors on real hardware. Quote them with `SOURCE`; never
mix them up with the cost model's estimates.
"""
from __future__ import annotations

from nkisim.profile.summary import ProfileSummary

SOURCE = "published measurement, trn2.3xlarge, Neuron SDK 2.31 / NKI 0.5.0"

GELU_SHAPE = (3216, 4096)   # bf16; 25 full 128-row tiles + one 16-row tile
GELU_DTYPE = "bfloat16"

# Standalone profiles, [3216, 4096] bf16, one core. A profile's total_time spans the whole launch, from the runtime's
# start to its stop (SDK:tools/neuron-explorer/profile-schema-reference.rst, Summary): compare an estimate's
# `with_launch_setup()`, not its span. The effective DMA throughput is bytes / total_time.
GELU_LNC = 1
GELU_FWD = {"total_time_us": 166.8, "dma_active_time_percent": 90.9, "mbu_estimated_percent": 44.1,
            "activate_time_us": 93.9, "effective_dma_gbps": 316.0}
GELU_BWD = {"total_time_us": 218.5, "dma_active_time_percent": 95.0, "mbu_estimated_percent": 50.5,
            "activate_time_us": 93.9, "vector_tensor_tensor_time_us": 59.6, "effective_dma_gbps": 362.0}
GELU_BOUND_BY = "DMA"   # "compute is fully overlapped with data movement ... a single DMA queue of one core"

# Variants tried on hardware with no measurable change: bit-identical results, end-to-end change
# within noise (percent, per run configuration).
GELU_VARIANTS_WITHOUT_CHANGE = ("double buffering", "static unrolling", "wider free dimension",
                                "dge_mode=hwdge")
GELU_VARIANTS_END_TO_END_CHANGE_PERCENT = {"single core": -0.08, "data-parallel 4": 0.3}

# Instruction counts of the compiled op, [3216, 4096] bf16: the compiler's native GELU lowering
# (polynomial/rational erf over three engines) vs gelu_fwd (one ACTIVATE per tile).
NATIVE_LOWERING_COUNTS = {("Tensor", "MATMUL"): 1664, ("Vector", "RECIPROCAL"): 256,
                          ("Vector", "TENSOR_TENSOR"): 2816, ("Scalar", "ACTIVATE"): 3584}
NATIVE_LOWERING_VECTOR_TIME_NS = 2_501_177
GELU_FWD_COUNTS = {("Scalar", "ACTIVATE"): 26}
GELU_FWD_VECTOR_TIME_NS = 1_047

# End to end, DINOv3 ViT-L/16 with GELUErf in all 24 MLP blocks (bf16, torch.compile(backend="neuron")).
LOSS_CURVE_MAX_DIFF = 2.3e-3   # 20-step training loss vs the native nn.GELU baseline
# (configuration, native nn.GELU img/s, GELUErf img/s, delta %), SDK 2.31, same-session A/B.
TRAINING_THROUGHPUT = (
    ("single core, batch 16", 28.58, 30.30, 6.0),
    ("FSDP2 data-parallel 4, per-rank batch 32", 112.6, 121.9, 8.3),
)
TRAINING_DELTA_SDK_2_32_SINGLE_CORE_PERCENT = 4.4

# LayerNorm fold, default (software) DGE: ~40 DMAs issued one after another on GpSimd at ~0.75 us
# each; the first add waited ~8 us. dge_mode.none removes that.
FOLD_SWDGE_US_PER_DMA = 0.75
FOLD_SWDGE_DMA_COUNT = 40
FOLD_FIRST_ADD_WAIT_US = 8.0


def published_summary(kernel: str) -> ProfileSummary:
    """A ProfileSummary holding the published figures of `gelu_fwd` or `gelu_bwd` (source-labelled)."""
    figures = {"gelu_fwd": GELU_FWD, "gelu_bwd": GELU_BWD}
    if kernel not in figures:
        raise ValueError(f"no published profile for {kernel!r}; published: {sorted(figures)}")
    f = figures[kernel]
    total = f["total_time_us"] * 1e-6
    moved = round(f["effective_dma_gbps"] * 1e9 * total)
    times = {("Scalar", "ACTIVATE"): f["activate_time_us"] * 1e-6}
    if "vector_tensor_tensor_time_us" in f:
        times[("Vector", "TENSOR_TENSOR")] = f["vector_tensor_tensor_time_us"] * 1e-6
    # Work as the kernel design states it: one ACTIVATE per element (and one Vector multiply per element
    # in the backward kernel); used by the roofline.
    elements = float(GELU_SHAPE[0] * GELU_SHAPE[1])
    work = {"Scalar": elements} if kernel == "gelu_fwd" else {"Scalar": elements, "Vector": elements}
    return ProfileSummary(kernel=kernel, source=SOURCE, total_time=total, engine_operations=work,
                          dma_active_time=f["dma_active_time_percent"] / 100 * total,
                          dma_transfer_total_bytes=moved, mbu_estimated_percent=f["mbu_estimated_percent"],
                          instruction_time=times, bound_by=GELU_BOUND_BY,
                          notes=("DMA bytes = effective DMA throughput x total_time",))
