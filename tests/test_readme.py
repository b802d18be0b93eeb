"""The README's performance table is a copy of the calibration report: keep it current."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_calibration_table_matches_the_cost_model() -> None:
    report = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "calibration.py"), "--markdown"],
                            capture_output=True, text=True, check=True, cwd=ROOT).stdout
    gelu_table = report.split("\n\n", 2)[1].strip()
    readme = (ROOT / "README.md").read_text()
    block = readme.split("<!-- calibration-start -->")[1].split("<!-- calibration-end -->")[0].strip()
    assert block == gelu_table, (
        "README.md's calibration table differs from `benchmarks/calibration.py --markdown`; "
        "paste the script's first table between the calibration markers")
