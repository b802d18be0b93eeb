"""Importing `kernels` picks an NKI backend silently and says which only when asked."""
from __future__ import annotations

import subprocess
import sys


def test_import_is_silent_and_backend_info_is_one_line(tmp_path) -> None:
    code = "import kernels; import nki, torch_neuronx; print(kernels.backend_info())"
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    lines = result.stdout.splitlines()
    assert len(lines) == 1, result.stdout  # nothing printed by the import itself
    assert lines[0].startswith("kernels: NKI backend = nkisim (")
    assert result.stderr == ""
