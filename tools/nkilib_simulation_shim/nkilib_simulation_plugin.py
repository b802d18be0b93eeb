"""pytest plugin for tools/nkilib_simulation.py: what nki-library's published test harness lacks for a run.

Loaded with `-p nkilib_simulation_plugin`. It changes no file of the checkout:
- the harness imports two modules its published tree omits, both for runs on Neuron hardware (host core locks,
  `test/utils/scripts/remote_lock_scripts.py`; trace analysis, `test/utils/perf_analysis_private.py`); where
  the tree lacks them, stand-ins whose names refuse any use are registered before the harness's conftest loads;
- `Orchestrator` reads `self._compiled_kernel`, which only its compile step assigns, and simulation mode skips
  that step ("Skipping compilation in simulator mode"), so the attribute gets a class default of None, the
  value the harness tests for when a kernel was not compiled.
With NKILIB_SIMULATION_COLLECTION set to a file name, a run writes there the tests it kept after collection,
each with the reason of the skip the harness marked it with (its large-shape skips in simulation mode) or null.
"""
from __future__ import annotations

import json
import os
import sys
import types
from pathlib import Path
from typing import Any

HARNESS = "test.utils"
COLLECTION = "NKILIB_SIMULATION_COLLECTION"
OMITTED = {
    "scripts/remote_lock_scripts.py": ("LockResult", "LockStatus"),
    "perf_analysis_private.py": ("analyze_trace",),
}


class HardwareOnly:
    """Stands for a name of the harness's hardware path: any use says why it is missing."""

    def __init__(self, name: str):
        self._name = name

    def _refuse(self) -> RuntimeError:
        return RuntimeError(f"{self._name} belongs to nki-library's hardware-run harness, which its published "
                            f"tree omits; simulation mode does not use it")

    def __getattr__(self, attr: str) -> Any:
        raise self._refuse()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise self._refuse()


def register_stand_ins(harness_dir: Path) -> list[str]:
    """Register a stand-in module for each omitted harness file absent from `harness_dir`; their names."""
    registered = []
    for relative, names in OMITTED.items():
        if (harness_dir / relative).exists():
            continue
        parts = relative.removesuffix(".py").split("/")
        for depth in range(1, len(parts) + 1):
            name = ".".join([HARNESS, *parts[:depth]])
            package = depth < len(parts)
            if name in sys.modules or package and (harness_dir / "/".join(parts[:depth])).is_dir():
                continue
            module = types.ModuleType(name, "stand-in (tools/nkilib_simulation_shim)")
            if package:
                module.__path__ = []
            sys.modules[name] = module
            registered.append(name)
        leaf = sys.modules[".".join([HARNESS, *parts])]
        for n in names:
            setattr(leaf, n, HardwareOnly(n))
    return registered


def pytest_load_initial_conftests(early_config: Any, parser: Any, args: list[str]) -> None:
    # rootdir is the folder of nki-library's pytest.ini: test/
    register_stand_ins(Path(early_config.rootpath) / "utils")


def pytest_configure(config: Any) -> None:
    orchestrator = sys.modules.get(f"{HARNESS}.test_orchestrator")
    if orchestrator is not None and not hasattr(orchestrator.Orchestrator, "_compiled_kernel"):
        orchestrator.Orchestrator._compiled_kernel = None


def skip_reason(item: Any) -> str | None:
    marker = item.get_closest_marker("skip")
    if marker is None:
        return None
    return marker.kwargs.get("reason") or (marker.args[0] if marker.args else "skipped")


def pytest_collection_finish(session: Any) -> None:
    path = os.environ.get(COLLECTION)
    if path:
        Path(path).write_text(json.dumps({item.nodeid: skip_reason(item) for item in session.items}, indent=0))
