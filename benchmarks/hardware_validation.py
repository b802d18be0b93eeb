"""Hardware validation, for users with a trn2 instance and the Neuron SDK (not runnable in CI).

    python benchmarks/hardware_validation.py --out validation.md

For each workshop kernel launch: run it on the device (nkisim.run_on_device), check it against the
PyTorch reference, capture a profile (nkisim.profile: the documented NEURON_RT_INSPECT_* capture and
neuron-explorer's summary-json), model the same launch with the trn2 cost model, and write the
modeled-vs-measured diff table, followed by the list of the cost model's constants with the trn2
measurement that would recalibrate each (`RECALIBRATION`), so the constants can be refitted from real
runs. Each device launch and each profile runs in a short-lived process of its own, started with the
launch's LNC (nkisim/device_process.py): this script never starts the Neuron runtime, which would
reserve the NeuronCores for itself until it exits, so one run covers LNC=1 and LNC=2. The profile of
a launch that just ran is served from the NEFF cache (no second compilation). `write_report` (the part
that needs no hardware) is tested with recorded summaries.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nkisim.profile.calibration import compare, format_table
from nkisim.profile.summary import SOURCE_MEASURED, ProfileSummary
from nkisim.trn2_rehearsal import REHEARSAL_SOURCE

# total_time is checked as total_exec_time where the profile has it (profile/calibration.compare): the span
# the model estimates, without the runtime's setup and teardown
BANDED = ("total_time_us", "bound_by")

# Per cost-model constant (nkisim/costmodel/constants.py row name): the trn2 measurement that would
# recalibrate it. Profiles are Neuron Explorer captures (SDK:nki/guides/use-neuron-profile.rst);
# tables and fields are those of SDK:tools/neuron-explorer/profile-schema-reference.rst.
RECALIBRATION = {
    "dma_engine_bandwidth": "one 128 x 32 KiB load alone on one queue: DmaPacket bytes / (last packet end - "
                            "first packet start), divided by the 16 engines it used",
    "dma_transfer_fixed": "gelu_fwd at [3216, 4096] bf16: the gap between consecutive transfers on its queue "
                          "(DmaPacket start of transfer k+1 - end of transfer k), median",
    "dma_queue_latency": "one load with nothing queued before it: Instruction start of its DMA trigger -> its "
                         "first DmaPacket start; and a store right after an ACTIVATE, whose trigger waits for "
                         "it: ACTIVATE end -> the store's first DmaPacket start, less its trigger's duration",
    "dma_packet_overhead": "loads of 128 partitions x 64 B .. 32 KiB, many queued on two queues (so the fixed "
                           "costs overlap): DmaPacket duration against its bytes, intercept / slope",
    "launch_preamble": "any LNC=2 kernel's profile: its start -> the first Instruction row's start",
    "launch_preamble_lnc1": "any LNC=1 kernel's Explorer summary: total_time - total_exec_time",
    "launch_setup_dma": "any LNC=1 kernel whose own DMAs are all dge_mode.swdge or hwdge: its Explorer summary's "
                        "static_dma_active_time (the setup's packets); at LNC=2 the same on each core's summary",
    "vector_other_dtype_path": "fp32 -> fp32 and bf16 -> fp8 tensor_scalar of [128, 4096] in SBUF: 128 x 4096 "
                               "over the Instruction duration in Vector cycles",
    "hbm_efficiency": "gelu_fwd[2] (LNC=2) at [16384, 4096] bf16: hbm_read_bytes + hbm_write_bytes over "
                      "dma_active_time of both cores, divided by the stack bandwidth",
    "hbm_write_efficiency": "two kernels on one queue moving the same bytes, one loading 128 x 8 KiB tiles "
                            "HBM -> SBUF and one storing them SBUF -> HBM: the store kernel's dma_active_time "
                            "over the load kernel's, inverted",
    "hbm_stack_bandwidth": "the profiler's own MBU denominator: (hbm_read_bytes + hbm_write_bytes) / total_time / "
                           "(mbu_estimated_percent / 100) of any profile",
    "semaphore_latency": "a Vector instruction that reads an ACTIVATE's output: Instruction end of the "
                         "ACTIVATE -> start of the Vector instruction, with both engines otherwise idle",
    "swdge_per_dma": "the LayerNorm fold with dge_mode.swdge: duration of each GpSimd DMA instruction "
                     "(Instruction rows on GpSimd), median",
    "hwdge_per_dma": "the LayerNorm fold with dge_mode.hwdge: duration of each DMA trigger on the Sync "
                     "engine (Instruction rows on Sync), median",
    "static_overhead": "ACTIVATE of N = 1 .. 4096 elements per partition, each waiting for a DMA (an idle engine): "
                       "Instruction duration, intercept of the fit against N, less access_overhead",
    "access_overhead": "the same ACTIVATE series issued back to back from SBUF (independent tiles): the intercept "
                       "of the idle-engine series minus that of the back-to-back one",
    "min_ii": "the same ACTIVATE series: the flat part below N ~ 64",
    "tensor_tensor_slow": "fp32 tensor_tensor multiply of [128, 4096] tiles in SBUF: its Instruction duration "
                          "in Vector cycles (0.96 GHz) / 4096",
    "vector_perf_mode_full": "bf16 tensor_scalar of [128, 4096] in SBUF: Instruction duration in Vector cycles / 4096",
    "vector_perf_mode_half": "bf16 tensor_tensor of [128, 4096] in SBUF: Instruction duration in Vector cycles / 4096",
    "act_read_accumulator": "activation_reduce vs activation on the same tile: difference of their durations",
    "gpsimd_start": "iota of N = 1 .. 512 on GpSimd: intercept of duration against N",
    "reciprocal": "reciprocal of [128, 4096] fp32 on Vector: duration in Vector cycles / 4096",
    "tensor_throttle_floor": "a chain of 64 bf16 nc_matmul of [128, 128] x [128, 512] after an idle gap: the first "
                             "one's Instruction duration over its max(64, 512)-cycle formula, inverted (or the "
                             "Throttle table's utilization limit at the burst's start)",
    "tensor_throttle_ramp": "the same chain: time from its first Instruction start until durations reach the formula",
    "tensor_throttle_window": "two such chains separated by idle gaps of 0.5 .. 5 us: the shortest gap after which the "
                              "second chain starts throttled again",
    "tensor_result_latency": "fp32 nc_matmul of [128, 128] x [128, 512], each waiting for its own loads (the "
                             "walkthrough's tiled kernel): Instruction duration minus 4 x 512 cycles, median",
    "tensor_overhead": "nc_matmul with moving free size 1 .. 512: intercept of duration against the size",
    "matmul_init_latency": "nc_matmul with moving free size 1 .. 64: the flat part of its duration",
}


def recalibration_table() -> str:
    """Markdown: each constant, its current value and source, and the measurement that would recalibrate it."""
    from nkisim.costmodel import constants as K

    rows = {c.name: c for c in K.TABLE}
    unknown = sorted(set(RECALIBRATION) - set(rows))
    if unknown:
        raise ValueError(f"RECALIBRATION names constants that constants.py does not define: {unknown}")
    lines = ["| constant | value | confidence | trn2 measurement that would recalibrate it |", "|---|---|---|---|"]
    for name, how in RECALIBRATION.items():
        c = rows[name]
        value = "table" if isinstance(c.value, tuple) else f"{c.value:g} {c.unit}"
        lines.append(f"| {name} | {value} | {c.confidence} | {how} |")
    return "\n".join(lines)


def write_report(pairs: list[tuple[str, ProfileSummary, ProfileSummary]], path: Path | None = None) -> str:
    """Markdown report from (case, modeled, measured) triples; written to `path` when given."""
    rows = []
    for case, modeled, measured in pairs:
        # The trn2 rehearsal (NKISIM_REHEARSE_TRN2=1) runs this script with the cost model standing in.
        if measured.source not in (SOURCE_MEASURED, REHEARSAL_SOURCE):
            raise ValueError(f"{case}: the reference must be a hardware measurement, got source {measured.source!r}")
        rows += compare(case, modeled, measured.to_dict(), banded=BANDED)
    reference = pairs[0][2].source if pairs else SOURCE_MEASURED
    text = ("# trn2 cost model vs trn2 hardware\n\n"
            f"Reference column: {reference}; model column: trn2 cost model (estimate).\n\n"
            + format_table(rows, "measured", markdown=True) + "\n\n"
            "## Constants and the measurement that would recalibrate each\n\n" + recalibration_table() + "\n")
    if path is not None:
        Path(path).write_text(text)
    return text


def _cases():
    """(case, kernel, args, lnc, reference fn) for the workshop kernels at the published shapes. The
    tensors stay on the CPU here: each launch's own process moves them to the device."""
    import torch

    import kernels
    from kernels import reference

    x = torch.randn(3216, 4096, dtype=torch.bfloat16)
    g = torch.randn_like(x)
    a = torch.randn(1024, 768)
    b = torch.randn(1, 1024, 768, dtype=torch.bfloat16)
    return [("gelu_fwd [3216, 4096] bf16", kernels.gelu_fwd, (x,), 1, lambda: reference.gelu_exact(x)),
            ("gelu_bwd [3216, 4096] bf16", kernels.gelu_bwd, (x, g), 1, lambda: reference.gelu_exact_grad(x, g)),
            # The lesson-7 prediction to verify: the same kernel sharded over both physical cores.
            ("gelu_fwd [3216, 4096] bf16, LNC=2", kernels.gelu_fwd, (x,), 2, lambda: reference.gelu_exact(x)),
            ("res_layernorm_fold R=1024 H=768 B=1", kernels.res_layernorm_fold_kernel,
             (a, b, 1e-6, kernels.FOLD_SBUF_BUDGET), 2, lambda: reference.res_layernorm_fold_reference(a, b, 1e-6))]


def main() -> int:
    import torch

    import nkisim
    from nkisim.profile.summary import estimate

    parser = argparse.ArgumentParser(description="run lesson kernels on trn2, profile, compare with the model")
    parser.add_argument("--out", type=Path, default=Path("hardware_validation.md"))
    parser.add_argument("--lnc", type=int, choices=(1, 2), action="append",
                        help="only the launches at this LNC (repeatable; default: both)")
    args = parser.parse_args()
    if nkisim.backend().name != "trn2":
        print(f"needs a trn2 instance with the Neuron SDK; the active backend is {nkisim.backend().name!r}")
        return 2
    pairs, bad = [], []
    for case, kernel, kargs, lnc, ref in (c for c in _cases() if not args.lnc or c[3] in args.lnc):
        got = nkisim.run_on_device(kernel, *kargs, lnc=lnc)
        want = ref()
        for o, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            if not torch.allclose(torch.as_tensor(o).float(), w.float(), rtol=2e-2, atol=5e-2):
                bad.append(case)
        measured = nkisim.profile(kernel, *kargs, lnc=lnc)
        run = nkisim.run(kernel, *kargs, lnc=lnc, dry_run=True)   # the emulator's trace, for the model
        pairs.append((case, estimate(run.trace), measured))
    print(write_report(pairs, args.out))
    if bad:
        print("MISMATCH vs reference: " + ", ".join(bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
