"""The trn2 path's instructions say what the Neuron SDK 2.33 pages say (issue 26): a venv, not conda;
both extra indexes; Ubuntu only; the documented capture variables, each beside its page."""
from __future__ import annotations

import re
from pathlib import Path

import yaml

from nkisim.profile.profiling import CAPTURE_ENV

ROOT = Path(__file__).resolve().parents[1]
V233 = re.compile(r"https://awsdocs-neuron\.readthedocs-hosted\.com/en/v2\.33\.[01]/")


def _hardware_section() -> str:
    readme = (ROOT / "README.md").read_text()
    return readme[readme.index("## On a Trainium2 instance"):readme.index("## Using the kernels")]


def test_the_trn2_requirements_use_the_documented_indexes_in_a_venv() -> None:
    text = (ROOT / "requirements-trn2.txt").read_text()
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    assert lines[:2] == ["--extra-index-url https://pip.repos.neuron.amazonaws.com",
                         "--extra-index-url https://download.pytorch.org/whl/cpu"]
    assert "source /opt/aws_neuronx_venv_torch_neuronx_2_14_0/bin/activate" in text
    assert not (ROOT / "environment-trn2.yml").exists()


def test_no_page_tells_a_trn2_user_to_use_conda_or_amazon_linux() -> None:
    for path in ("README.md", "book/setup.md", "book/day_one_trn2.md", "book/instructor/checklist.md"):
        text = (ROOT / path).read_text()
        assert "environment-trn2.yml" not in text and "conda activate nki-workshop-trn2" not in text, path
        assert "Amazon Linux 2023" not in text, path


def test_every_capture_variable_and_runtime_rule_is_in_the_readme_with_a_233_page() -> None:
    section = _hardware_section()
    for name in [*CAPTURE_ENV, "NEURON_RT_INSPECT_OUTPUT_DIR", "TORCH_NEURONX_NEFF_CACHE_DIR", "TORCH_NEURONX_DEBUG_DIR",
                 "TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS", "NEURON_RT_VISIBLE_CORES", "NEURON_LOGICAL_NC_CONFIG"]:
        assert f"`{name}" in section, name
    assert len(V233.findall(section)) >= 8
    assert "**Unverified on hardware.**" in section and "NEURON_FRAMEWORK_DEBUG" in section


def test_the_day_one_page_follows_the_setup_page_in_the_book() -> None:
    toc = yaml.safe_load((ROOT / "book" / "_toc.yml").read_text())
    files = [chapter["file"] for chapter in toc["parts"][0]["chapters"]]
    assert files.index("book/day_one_trn2") == files.index("book/setup") + 1
    page = (ROOT / "book" / "day_one_trn2.md").read_text()
    assert page.count("**Fix:**") == 3 and len(V233.findall(page)) >= 5
