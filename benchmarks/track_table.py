"""The track table: every lesson step of both tracks, the metric it moves, before and after.

    python benchmarks/track_table.py [--json] [--track gelu|fold]

For each step: its lesson, the change, the kernel it produces, its kind (a change, a baseline, an
enabling or correctness step and what it enables, or a variant with no change by design), the metric,
its value before and after, the effect in percent and the bound engine before and after. Times are
trn2 cost model estimates of dry-run traces; the SBUF step's rows are what the emulator lets compile.
The steps are defined in notebooks/lesson_kernels/tracks.py, which the lessons render from; the test
tests/lessons/test_track_table.py fails on a change that moves its metric by less than 3%.

--json prints {"min_effect_percent": 3.0, "tracks": [{"name", "title", "setup", "steps": [
    {"lesson", "change", "kernel", "kind", "enables", "metric", "unit", "lower_is_better", "setup_before",
     "setup_after", "before", "after", "effect_percent", "bound_before", "bound_after", "source"}, ...]}, ...]}
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "notebooks"))  # lesson_kernels

import nkisim  # noqa: E402

nkisim.install()

from lesson_kernels import tracks  # noqa: E402
from nkisim.profile.steps import MIN_EFFECT_PERCENT, track_text  # noqa: E402


def report(names: list[str]) -> dict:
    """Every step of the named tracks, measured."""
    out = []
    for name in names:
        track, rows = tracks.results(name)
        out.append({"name": track.name, "title": track.title, "setup": track.setup,
                    "steps": [r.to_dict() for r in rows], "text": track_text(track, rows)})
    return {"min_effect_percent": MIN_EFFECT_PERCENT, "tracks": out}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the table as one JSON document")
    parser.add_argument("--track", choices=sorted(tracks.TRACKS), action="append",
                        help="only this track (repeatable); default: both")
    args = parser.parse_args(argv)
    doc = report(args.track or list(tracks.TRACKS))
    if args.json:
        for track in doc["tracks"]:
            del track["text"]
        print(json.dumps(doc, indent=1, ensure_ascii=False))
    else:
        print("\n\n".join(track["text"] for track in doc["tracks"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
