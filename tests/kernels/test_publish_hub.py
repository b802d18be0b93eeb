"""tools/publish_hub.py: the Hugging Face kernels-hub layout, loaded the way a user would.

The HF loader's import name is also `kernels`, so it cannot live in the main environment next to
this repository's package: it is installed once into .venv/hf-kernels/ and used in a subprocess
whose PYTHONPATH starts there and whose working directory is outside the repository.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import publish_hub  # noqa: E402

HF_KERNELS_VERSION = "0.17.2"
HF_KERNELS_DIR = ROOT / ".venv" / "hf-kernels"

LOAD_SCRIPT = r"""
import importlib.util, json, sys
from pathlib import Path

import nkisim
nkisim.install()
import torch
import torch.nn.functional as F
import kernels as hf_kernels
from kernels import get_local_kernel

repo, variant = Path(sys.argv[1]), Path(sys.argv[2])
report = {"hf_kernels_file": hf_kernels.__file__}
for label, path in (("repo", repo), ("variant", variant)):
    try:
        get_local_kernel(path)
        report[label] = "loaded"
    except Exception as err:
        report[label] = f"{type(err).__name__}: {err}"

# The loader refuses the neuron variant on a CPU machine: import the package path directly.
spec = importlib.util.spec_from_file_location("gelu_erf_hub", variant / "__init__.py")
module = importlib.util.module_from_spec(spec)
sys.modules["gelu_erf_hub"] = module
spec.loader.exec_module(module)
x = torch.randn(300, 64, generator=torch.Generator().manual_seed(0))
y = module.gelu_fwd(x)
y_layer = module.layers.GELUErf()(x.reshape(3, 100, 64))
report["api"] = sorted(module.__all__)
report["max_abs_fwd"] = (y - F.gelu(x)).abs().max().item()
report["max_abs_layer"] = (y_layer.reshape(300, 64) - F.gelu(x)).abs().max().item()
report["repo_modules"] = sorted(
    name for name, mod in sys.modules.items()
    if (getattr(mod, "__file__", None) or "").startswith(sys.argv[3])
)
print(json.dumps(report))
"""


def _hf_kernels_dir() -> Path:
    """The HF `kernels` library, installed without deps (they are in the main env) once."""
    if not (HF_KERNELS_DIR / "kernels" / "__init__.py").exists():
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(HF_KERNELS_DIR),
             f"kernels=={HF_KERNELS_VERSION}"],
            check=True,
        )
    return HF_KERNELS_DIR


def test_layout_and_metadata(tmp_path: Path) -> None:
    assert publish_hub.main([str(tmp_path)]) == 0
    for name, kernel in publish_hub.HUB_KERNELS.items():
        variant = tmp_path / name / "build" / "torch-neuron"
        metadata = json.loads((variant / "metadata.json").read_text())
        assert metadata["name"] == name and metadata["version"] == 1
        assert metadata["license"] == "Apache-2.0"
        assert metadata["python-depends"] == ["nki"] and metadata["backend"] == {"type": "neuron"}
        assert metadata["id"].startswith(f"_{name.replace('-', '_')}_neuron_")
        assert {"__init__.py", "layers.py", *kernel.sources} <= {p.name for p in variant.iterdir()}
        for source in kernel.sources:  # copies of the repository files, namespace line aside
            copied = (variant / source).read_text()
            original = (ROOT / "kernels" / source).read_text()
            if source == kernel.namespace_file:
                assert f'OP_NAMESPACE = "{metadata["id"]}"' in copied
                copied = publish_hub.NAMESPACE_LINE.sub("", copied)
                original = publish_hub.NAMESPACE_LINE.sub("", original)
            assert copied == original
            assert "import kernels" not in copied and "from kernels" not in copied
        assert (tmp_path / name / "README.md").exists()


def test_hf_loader_refuses_neuron_variant_on_cpu_and_the_package_runs_on_the_emulator(tmp_path: Path) -> None:
    out = tmp_path / "hub"
    variant = publish_hub.write_kernel(publish_hub.HUB_KERNELS["gelu-erf"], out)
    env = {**os.environ, "PYTHONPATH": str(_hf_kernels_dir()), "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(
        [sys.executable, "-c", LOAD_SCRIPT, str(out / "gelu-erf"), str(variant), str(ROOT / "kernels")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["hf_kernels_file"].startswith(str(HF_KERNELS_DIR))
    # Documented CPU behaviour of kernels 0.17.2: the repo path finds no variant for a CPU system,
    # the variant path passes metadata parsing but `nki` is only an allowed dependency on neuron.
    assert "torch-neuron: backend (neuron) does not match system backend (cpu)" in report["repo"]
    assert "ValueError: Kernel module `gelu_erf` uses unsupported kernel dependency: nki" == report["variant"]
    assert report["api"] == ["GELUErf", "gelu_bwd", "gelu_erf", "gelu_fwd", "swap_gelu"]
    assert report["max_abs_fwd"] <= 1e-5 and report["max_abs_layer"] <= 1e-5
    assert report["repo_modules"] == [], "the hub package imported this repository's kernels package"


@pytest.mark.parametrize("name", ["res-layernorm-fold"])
def test_fold_package_imports_standalone(tmp_path: Path, name: str) -> None:
    variant = publish_hub.write_kernel(publish_hub.HUB_KERNELS[name], tmp_path)
    code = (
        "import importlib.util, sys, nkisim; nkisim.install(); import torch\n"
        f"spec = importlib.util.spec_from_file_location('fold_hub', {str(variant / '__init__.py')!r})\n"
        "m = importlib.util.module_from_spec(spec); sys.modules['fold_hub'] = m; spec.loader.exec_module(m)\n"
        "a = torch.randn(256, 384); b = torch.randn(1, 256, 384).bfloat16()\n"
        "x, z = m.layers.ResLayerNormFold()(a, b)\n"
        "assert torch.equal(x, a + b[0].float()), 'x_new'\n"
        "w = torch.randn(64, 384).bfloat16(); c = torch.randn(64)\n"
        "with torch.no_grad(): y = m.folded_linear(z, w, c)\n"
        "ref = z.float() @ w.float().T + c\n"
        "assert y.dtype == torch.bfloat16 and (y.float() - ref).abs().max() <= 0.02 * ref.abs().max(), 'folded_linear'\n"
        "assert not [k for k in sys.modules if k == 'kernels' or k.startswith('kernels.')]\n"
        "print(sorted(m.__all__))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "FoldedPreNorm" in result.stdout and "res_layernorm_fold" in result.stdout
    assert "folded_linear" in result.stdout
