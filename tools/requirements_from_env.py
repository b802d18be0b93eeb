"""Print the `pip:` list of environment.yml, one requirement per line.

The Makefile installs the virtual environment from this output, so environment.yml stays the one
list of dependencies. Plain-text parsing on purpose: it runs before PyYAML is installed.
"""
from __future__ import annotations

import sys
from pathlib import Path


def pip_requirements(env_file: Path) -> list[str]:
    """The entries of the `pip:` section of a conda environment file, in order."""
    requirements: list[str] = []
    in_pip = False
    pip_indent = -1
    for raw in env_file.read_text().splitlines():
        line = raw.split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        item = line.strip()
        if item == "- pip:":
            in_pip, pip_indent = True, indent
            continue
        if in_pip:
            if indent <= pip_indent:
                in_pip = False
                continue
            if item.startswith("- "):
                requirements.append(item[2:].strip())
    if not requirements:
        raise SystemExit(f"{env_file}: no `pip:` section found")
    return requirements


if __name__ == "__main__":
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "environment.yml"
    print("\n".join(pip_requirements(path)))
