"""Every number in the README is printed by a command it names, or held by a source file: keep them current."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_calibration_tables_match_the_cost_model() -> None:
    report = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "calibration.py"), "--markdown"],
                            capture_output=True, text=True, check=True, cwd=ROOT).stdout
    sections = {part.split("\n", 1)[0]: part.split("\n\n", 1)[1].strip() for part in report.split("## ")[1:]}
    gelu_table = next(v for k, v in sections.items() if k.startswith("GELU"))
    family_table = next(v for k, v in sections.items() if k.startswith("Development set"))
    readme = (ROOT / "README.md").read_text()
    for marker, table in (("calibration", gelu_table), ("calibration-families", family_table)):
        block = readme.split(f"<!-- {marker}-start -->")[1].split(f"<!-- {marker}-end -->")[0].strip()
        assert block == table, (
            f"README.md's {marker} table differs from `benchmarks/calibration.py --markdown`; "
            f"paste the script's table between the {marker} markers")


# ---- every other number in the README: a named command prints it, or a source file holds it -------

def _block(name: str) -> str:
    readme = (ROOT / "README.md").read_text()
    return readme.split(f"<!-- {name}-start -->")[1].split(f"<!-- {name}-end -->")[0].strip()


def _masked(text: str) -> list[str]:
    """The lines of a command's output with every number and verdict replaced, so labels can be compared."""
    return [re.sub(r" +", " ", re.sub(r"\d[\d,.]*|\bmet\b|\bMISSED\b", "#", line)).rstrip()
            for line in text.strip().splitlines()]


def test_the_times_table_is_the_output_of_tools_time_commands() -> None:
    sys.path.insert(0, str(ROOT / "tools"))
    import time_commands

    block = _block("times").splitlines()
    assert re.fullmatch(r"Measured \d{4}-\d\d-\d\d at commit [0-9a-f]+: \d+ CPUs \(\d+ usable\), Python [\d.]+, \S+\.",
                        block[0]), block[0]
    assert "\n".join(block[2:4]) == time_commands.HEADER
    rows = [line.split(" | ") for line in block[4:]]
    commands = [r[0].strip("| `") for r in rows]
    steps = time_commands.steps(fresh_book=commands.count("make book") == 2, fresh_clone=".ci/run" in commands)
    # the commands and what they did, as the script words them for this repository today (e.g. the
    # number of notebooks in the book): a new notebook or a reworded step makes the table stale
    assert list(zip(commands, (r[1] for r in rows))) == [(c, what) for c, what, _ in steps]
    duration = r"(\d+ min \d\d s|\d+ s)"
    for r in rows:
        assert all(re.fullmatch(duration, cell) for cell in r[2:5]), r   # no FAILED run is quoted
        assert re.fullmatch(r"\d+\.\d, \d+\.\d \|", r[5]), r   # the load average before and after


def test_tools_time_commands_prints_its_fields() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "time_commands.py"), "--only", "true"],
                         capture_output=True, text=True, check=True, cwd=ROOT).stdout.splitlines()
    assert out[0].startswith("Measured ") and "CPUs" in out[0]
    assert re.fullmatch(r"\| `true` \| as given \| \d+ s \| \d+ s \| \d+ s \| \d+\.\d, \d+\.\d \|", out[4]), out[4]


def test_the_emulator_speed_block_is_the_output_of_its_benchmark() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "emulator_speed.py")],
                         capture_output=True, text=True, check=True, cwd=ROOT).stdout
    block = _block("emulator-speed").removeprefix("```text").removesuffix("```")
    assert _masked(block) == _masked(out)
    assert "load average" in block


def test_every_command_the_readme_names_exists() -> None:
    readme = (ROOT / "README.md").read_text()
    targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), flags=re.M))
    named = set(re.findall(r"`make ([\w-]+)", readme))
    assert named and named <= targets, named - targets
    scripts = set(re.findall(r"python (\S+\.py)", readme)) | {".ci/run"}
    assert all((ROOT / s).is_file() for s in scripts), [s for s in scripts if not (ROOT / s).is_file()]
    # `make wheelhouse` prints the wheel count and size the Offline install section quotes
    assert "du -sh $(WHEELHOUSE)" in (ROOT / "Makefile").read_text()


def test_the_published_figures_quoted_in_the_readme_are_those_of_published_py() -> None:
    from nkisim.profile import published

    readme = " ".join((ROOT / "README.md").read_text().split())
    (single, *_, single_gain), (dp4, *_, dp4_gain) = published.TRAINING_THROUGHPUT
    assert f"+{single_gain}% images/s on a single core and +{dp4_gain}% with FSDP2 data-parallel 4" in readme
    assert (f"~{published.FOLD_SWDGE_US_PER_DMA} µs of GpSimd time per DMA (~{published.FOLD_SWDGE_DMA_COUNT} DMAs, "
            f"the first add waiting ~{published.FOLD_FIRST_ADD_WAIT_US:.0f} µs)") in readme
    assert f"trn2.3xlarge ({published.SOURCE.split(', ')[-1]})" in readme


def test_the_dma_engines_busy_at_once_quoted_are_the_calibration_reports() -> None:
    """The final walkthrough kernel's DMA-share miss, split in the READMEs into packet time, engines busy at once
    (summed Dma Packet Time / DMA-active time) and span: each factor from `benchmarks/calibration.py --json`."""
    import json

    report = json.loads(subprocess.run([sys.executable, str(ROOT / "benchmarks" / "calibration.py"), "--json"],
                                       capture_output=True, text=True, check=True, cwd=ROOT).stdout)
    rows = {(r["kernel"], r["metric"]): r for r in report["holdout"]}

    def busy(kernel: str, side: str) -> float:
        def value(metric: str) -> float:
            return rows[(kernel, metric)][side]
        return value("dma_packet_time_us") / (value("dma_active_time_percent") / 100 * value("total_time_us"))

    readme = " ".join((ROOT / "README.md").read_text().split())
    nkisim_readme = " ".join((ROOT / "nkisim" / "README.md").read_text().split())
    trn2, model = busy("matmul_final", "published"), busy("matmul_final", "model")
    assert f"trn2 kept {trn2:.1f} of the 16 engines busy" in readme and f"the model keeps {model:.1f}" in readme
    ratio = {m: rows[("matmul_final", m)]["ratio"] for m in ("dma_packet_time_us", "total_time_us",
                                                              "dma_active_time_percent")}
    assert (f"({ratio['dma_packet_time_us']:.3f} × {trn2 / model:.3f} ÷ {ratio['total_time_us']:.3f} = "
            f"{ratio['dma_active_time_percent']:.3f})") in nkisim_readme
    assert f"trn2 kept {trn2:.1f} of its 16 engines busy" in nkisim_readme and f"the model {model:.1f}." in nkisim_readme
    hoisted, blocked, tiled = (tuple(busy(k, s) for s in ("published", "model"))
                               for k in ("matmul_hoisted", "matmul_blocked", "matmul_tiled"))
    assert (f"(trn2 {hoisted[0]:.1f} and {blocked[0]:.1f}, the model {hoisted[1]:.1f} and {blocked[1]:.1f})"
            in nkisim_readme)
    assert f"none ({tiled[0]:.1f} and {tiled[1]:.1f})" in nkisim_readme
