"""benchmarks/profile_speed.py runs on a tiny ladder and prints its conditions and every row's fields."""
import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "profile_speed.py"
ROW_FIELDS = {"kernel", "size", "instructions", "trace_s", "trace_instructions_per_s", "schedule_s",
              "schedule_instructions_per_s", "estimate_s"}


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)


def test_a_tiny_ladder_reports_conditions_and_rates():
    out = _run("--max-instructions", "200", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    c = doc["conditions"]
    assert c["cpu_count"] >= 1 and 1 <= c["cpus_usable"] <= c["cpu_count"]
    assert len(c["load_average_before"]) == len(c["load_average_after"]) == 3
    assert c["python"] == f"{sys.version_info.major}.{sys.version_info.minor}.{sys.version_info.micro}"
    assert "process_time" in c["timer"]
    rows = doc["rows"]
    assert {r["kernel"] for r in rows} == {"gelu_fwd", "res_layernorm_fold_kernel", "tiled_matmul"}
    for r in rows:
        assert set(r) == ROW_FIELDS
        assert r["instructions"] > 0 and r["trace_s"] >= 0 and r["schedule_s"] >= 0
        assert r["trace_instructions_per_s"] > 0 and r["schedule_instructions_per_s"] > 0
    # each kernel's sizes double, and its ladder stops past half of the limit
    for kernel in ("gelu_fwd", "tiled_matmul"):
        sizes = [r for r in rows if r["kernel"] == kernel]
        assert [b["size"] for b in sizes[1:]] == [2 * a["size"] for a in sizes[:-1]]
        assert sizes[-1]["instructions"] * 2 > 200 >= sizes[-2]["instructions"] * 2
        assert sizes[-1]["instructions"] > sizes[0]["instructions"]


def test_the_text_report_names_the_timer_and_the_load():
    out = _run("--max-instructions", "40")
    assert out.returncode == 0, out.stderr
    assert "time.process_time" in out.stdout and "load average" in out.stdout and "Python" in out.stdout
    assert "tiled_matmul" in out.stdout


def test_a_ladder_without_instructions_is_refused():
    out = _run("--max-instructions", "0")
    assert out.returncode == 2 and "--max-instructions must be at least 1, got 0" in out.stderr
