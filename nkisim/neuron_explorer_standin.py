"""The trn2 rehearsal's `neuron-explorer` (nkisim/trn2_rehearsal.py installs it where the rehearsed
instance has aws-neuronx-tools). It answers `neuron-explorer view -d <capture output dir>
--output-format summary-json` (Neuron Explorer troubleshooting FAQ, "Is summary-json still supported?",
https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/tools/neuron-explorer/troubleshooting.html)
and `view -n <neff> -s <ntff> --output-format summary-json`, from the NTFFs the rehearsed runtime
captured (nkisim/rehearsal_runtime.py). As the real tool, it needs each NTFF's own NEFF: "An NTFF can't
be processed without the NEFF it was captured from" (profile files page,
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/tools/neuron-explorer/profile-artifacts.html).
Every command line is recorded in $NKISIM_REHEARSAL_LOG. Standard library only, run as a file.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

LOG_ENV = "NKISIM_REHEARSAL_LOG"


def _option(argv: list[str], *names: str) -> str | None:
    for i, arg in enumerate(argv):
        for name in names:
            if arg == name and i + 1 < len(argv):
                return argv[i + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


def _pairs(argv: list[str]) -> list[tuple[Path | None, Path]]:
    """(NEFF or None, NTFF) of the command: one pair (-n/-s) or every NTFF under -d."""
    directory, neff, ntff = _option(argv, "-d", "--directory"), _option(argv, "-n", "--neff"), _option(argv, "-s")
    if directory is not None:
        found = []
        for trace in sorted(Path(directory).rglob("*.ntff")):
            key = json.loads(trace.read_text())["neff"]
            match = trace.with_name(f"neff_{key}.neff")
            found.append((match if match.exists() else None, trace))
        return found
    if neff is None or ntff is None:
        raise SystemExit(f"neuron-explorer stand-in: view needs -d <dir>, or -n <neff> -s <ntff>; got {argv}")
    return [(Path(neff), Path(ntff))]


def explorer(argv: list[str]) -> int:
    """`neuron-explorer view ... --output-format summary-json`, as the stand-in answers it."""
    with open(os.environ.get(LOG_ENV, os.devnull), "a") as log:
        log.write(json.dumps(["neuron-explorer", *argv]) + "\n")
    if not argv or argv[0] != "view" or _option(argv, "--output-format") != "summary-json":
        print(f"neuron-explorer stand-in: only `view --output-format summary-json` is rehearsed, got {argv}",
              file=sys.stderr)
        return 2
    pairs = _pairs(argv)
    if not pairs:
        print("neuron-explorer stand-in: no .ntff profile found", file=sys.stderr)
        return 1
    summaries = {}
    for neff, ntff in pairs:
        trace = json.loads(ntff.read_text())
        if neff is None or json.loads(neff.read_text())["neff"] != trace["neff"]:
            print(f"neuron-explorer stand-in: {ntff.name}: no matching NEFF (NEFF/NTFF UUID mismatch, or the NEFF "
                  "is not beside its NTFF)", file=sys.stderr)
            return 1
        summaries[ntff.stem] = trace["summary_json"]
    print(json.dumps(summaries))
    return 0


if __name__ == "__main__":
    sys.exit(explorer(sys.argv[1:]))
