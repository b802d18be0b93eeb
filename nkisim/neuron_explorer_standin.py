"""The trn2 rehearsal's `neuron-explorer` (nkisim/trn2_rehearsal.py puts it on PATH): it answers the
two commands of the NKI profiling guide, `capture` and `view --output-format summary-json`
(https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/guides/use-neuron-profile.html), from
the stand-in NEFF, and records every command line in $NKISIM_REHEARSAL_LOG. Standard library only,
run as a file, so each call stays cheap.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

LOG_ENV = "NKISIM_REHEARSAL_LOG"


def _option(argv: list[str], *names: str) -> str:
    for i, arg in enumerate(argv):
        for name in names:
            if arg == name and i + 1 < len(argv):
                return argv[i + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    raise SystemExit(f"neuron-explorer stand-in: missing {' / '.join(names)} in {argv}")


def explorer(argv: list[str]) -> int:
    """`neuron-explorer capture|view ...`, as the stand-in answers them."""
    with open(os.environ.get(LOG_ENV, os.devnull), "a") as log:
        log.write(json.dumps(["neuron-explorer", *argv]) + "\n")
    command = argv[0] if argv else ""
    if command == "capture":
        neff, ntff = Path(_option(argv, "-n")), Path(_option(argv, "-s"))
        nth = int(_option(argv, "--profile-nth-exec"))
        ntff.with_name(f"{ntff.stem}_exec_{nth}{ntff.suffix}").write_text(neff.read_text())
        return 0
    if command == "view" and _option(argv, "--output-format") == "summary-json":
        print(json.dumps(json.loads(Path(_option(argv, "-s")).read_text())["summary_json"]))
        return 0
    print(f"neuron-explorer stand-in: only `capture` and `view --output-format summary-json` are rehearsed, "
          f"got {argv}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(explorer(sys.argv[1:]))
