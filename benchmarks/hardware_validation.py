"""Hardware validation, for users with a trn2 instance and the Neuron SDK (not runnable in CI).

    python benchmarks/hardware_validation.py --out validation.md

For each workshop kernel launch: run it on the device, check it against the PyTorch reference,
capture a profile (nkisim.profile -> Neuron Explorer), model the same launch with the trn2 cost model,
and write the modeled-vs-measured report so the model's constants can be recalibrated from real runs.
The runtime fixes the launch degree per process (NEURON_LOGICAL_NC_CONFIG), so run it twice:
    NEURON_LOGICAL_NC_CONFIG=1 python benchmarks/hardware_validation.py --out validation-lnc1.md
    NEURON_LOGICAL_NC_CONFIG=2 python benchmarks/hardware_validation.py --out validation-lnc2.md
Each run covers the launches of its LNC. `write_report` (the part that needs no hardware) is tested
with recorded summaries.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from nkisim.profile.calibration import compare, format_table
from nkisim.profile.summary import SOURCE_MEASURED, ProfileSummary
from nkisim.trn2_rehearsal import REHEARSAL_SOURCE

BANDED = ("total_time_us", "bound_by")


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
            + format_table(rows, "measured", markdown=True) + "\n")
    if path is not None:
        Path(path).write_text(text)
    return text


def _cases(device: str):
    """(case, kernel, args, lnc, reference fn) for the workshop kernels at the published shapes."""
    import torch

    import kernels
    from kernels import reference

    x = torch.randn(3216, 4096, dtype=torch.bfloat16)
    g = torch.randn_like(x)
    a = torch.randn(1024, 768)
    b = torch.randn(1, 1024, 768, dtype=torch.bfloat16)
    xd, gd, ad, bd = (t.to(device) for t in (x, g, a, b))
    return [("gelu_fwd [3216, 4096] bf16", kernels.gelu_fwd, (xd,), 1, lambda: reference.gelu_exact(x)),
            ("gelu_bwd [3216, 4096] bf16", kernels.gelu_bwd, (xd, gd), 1, lambda: reference.gelu_exact_grad(x, g)),
            # The lesson-7 prediction to verify: the same kernel sharded over both physical cores.
            ("gelu_fwd [3216, 4096] bf16, LNC=2", kernels.gelu_fwd, (xd,), 2, lambda: reference.gelu_exact(x)),
            ("res_layernorm_fold R=1024 H=768 B=1", kernels.res_layernorm_fold_kernel,
             (ad, bd, 1e-6, kernels.FOLD_SBUF_BUDGET), 2, lambda: reference.res_layernorm_fold_reference(a, b, 1e-6))]


def main() -> int:
    import torch

    import nkisim
    from nkisim.profile.summary import estimate

    parser = argparse.ArgumentParser(description="run lesson kernels on trn2, profile, compare with the model")
    parser.add_argument("--out", type=Path, default=Path("hardware_validation.md"))
    parser.add_argument("--device", default="neuron", help="torch device of the NeuronCores")
    args = parser.parse_args()
    lnc = int(os.environ.get("NEURON_LOGICAL_NC_CONFIG", "2"))
    if nkisim.backend().name != "trn2":
        print(f"needs a trn2 instance with the Neuron SDK; the active backend is {nkisim.backend().name!r}")
        return 2
    pairs, bad = [], []
    cases = _cases(args.device)
    other = [c[0] for c in cases if c[3] != lnc]
    if other:
        print(f"NEURON_LOGICAL_NC_CONFIG={lnc}: skipping {', '.join(other)} (rerun with the other LNC)")
    for case, kernel, kargs, lnc, ref in (c for c in cases if c[3] == lnc):
        got = kernel[lnc](*kargs) if lnc > 1 else kernel(*kargs)
        want = ref()
        for o, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            if not torch.allclose(o.float().cpu(), w.float(), rtol=2e-2, atol=5e-2):
                bad.append(case)
        measured = nkisim.profile(kernel, *kargs, lnc=lnc)
        cpu_args = tuple(a.cpu() if isinstance(a, torch.Tensor) else a for a in kargs)   # nkisim runs CPU tensors
        run = nkisim.run(kernel, *cpu_args, lnc=lnc, dry_run=True)   # the emulator's trace, for the model
        pairs.append((case, estimate(run.trace), measured))
    print(write_report(pairs, args.out))
    if bad:
        print("MISMATCH vs reference: " + ", ".join(bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
