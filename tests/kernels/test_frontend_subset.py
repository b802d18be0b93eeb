"""The project's own kernel code stays in the NKI 0.6 front-end subset, so it runs on both NKI 0.7
(Neuron SDK 2.33, which the workshop teaches) and NKI 0.6 (SDK 2.32, `NKI_COMPILER_FRONTEND=custom`).

The last test runs the finished kernels under both emulated versions: nkisim's 0.6 front-end rules
accept them and both versions compute the same bits.

Every `@nki.jit` function in kernels/, notebooks/lesson_kernels/, notebooks/capstone/ and the
exercise sources (their solutions), and every project function it calls (transitively), is read as
an AST and must not use what the NKI 0.6 front end does not document:
- generator expressions, `yield` and comprehensions: generators arrive only with NKI 0.7's tracing
  front end ("including constructs the previous specialization did not support, such as
  generators": https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.1/release-notes/components/nki.html);
- `raise`, `try`, `lambda`, `enumerate` and string methods: not in the NKI Language Guide, which
  validates with `assert` and supports lists, string-keyed dicts and compile-time print
  (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/get-started/nki-language-guide.html).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("kernels", "notebooks/lesson_kernels", "notebooks/capstone", "exercises/src")

FORBIDDEN_NODES = {
    ast.GeneratorExp: "a generator expression",
    ast.Yield: "yield",
    ast.YieldFrom: "yield from",
    ast.ListComp: "a list comprehension",
    ast.SetComp: "a set comprehension",
    ast.DictComp: "a dict comprehension",
    ast.Raise: "raise (validate with assert)",
    ast.Try: "try",
    ast.Lambda: "lambda",
}
FORBIDDEN_BUILTINS = {"enumerate"}
STRING_METHODS = {"format", "join", "split", "rsplit", "strip", "replace", "startswith", "endswith", "lower",
                  "upper"}


@dataclass(frozen=True)
class Function:
    module: str        # dotted module name, e.g. "kernels.gelu_erf"
    path: Path
    node: ast.FunctionDef


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    for prefix in (["notebooks"], ["exercises", "src"]):   # lesson_kernels / capstone import as top level
        if parts[:len(prefix)] == prefix:
            parts = parts[len(prefix):]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _index() -> tuple[dict[str, dict[str, Function]], dict[str, ast.Module]]:
    functions: dict[str, dict[str, Function]] = {}
    trees: dict[str, ast.Module] = {}
    for source in SOURCES:
        for path in sorted((ROOT / source).rglob("*.py")):
            module = _module_name(path)
            tree = ast.parse(path.read_text(), filename=str(path))
            trees[module] = tree
            functions[module] = {n.name: Function(module, path, n) for n in tree.body
                                 if isinstance(n, ast.FunctionDef)}
    return functions, trees


FUNCTIONS, TREES = _index()


def _imports(module: str) -> tuple[dict[str, tuple[str, str]], dict[str, str]]:
    """Names bound by `from M import f` -> (M, f), and module aliases -> M, resolved to scanned modules."""
    names: dict[str, tuple[str, str]] = {}
    modules: dict[str, str] = {}
    package = module.rsplit(".", 1)[0] if "." in module else ""
    for node in TREES[module].body:
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(p for p in (package, base) if p)
            for alias in node.names:
                bound = alias.asname or alias.name
                if f"{base}.{alias.name}" in FUNCTIONS:
                    modules[bound] = f"{base}.{alias.name}"
                elif base in FUNCTIONS:
                    names[bound] = (base, alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in FUNCTIONS:
                    modules[alias.asname or alias.name] = alias.name
    return names, modules


def _callees(fn: Function) -> list[Function]:
    names, modules = _imports(fn.module)
    found = []
    for node in ast.walk(fn.node):
        if not isinstance(node, ast.Call):
            continue
        target = None
        if isinstance(node.func, ast.Name):
            name = node.func.id
            if name in FUNCTIONS[fn.module]:
                target = FUNCTIONS[fn.module][name]
            elif name in names:
                module, attr = names[name]
                target = FUNCTIONS[module].get(attr)
        elif isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
            module = modules.get(node.func.value.id)
            if module is not None:
                target = FUNCTIONS[module].get(node.func.attr)
        if target is not None:
            found.append(target)
    return found


def _is_kernel(node: ast.FunctionDef) -> bool:
    for deco in node.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        if isinstance(target, ast.Attribute) and target.attr == "jit":
            return True
        if isinstance(target, ast.Name) and target.id == "jit":
            return True
    return False


def kernel_code() -> list[Function]:
    """Every kernel and every project function a kernel calls, transitively."""
    todo = [f for per_module in FUNCTIONS.values() for f in per_module.values() if _is_kernel(f.node)]
    seen: dict[tuple[str, str], Function] = {}
    while todo:
        fn = todo.pop()
        key = (fn.module, fn.node.name)
        if key not in seen:
            seen[key] = fn
            todo.extend(_callees(fn))
    return sorted(seen.values(), key=lambda f: (f.module, f.node.lineno))


def violations(fn: Function) -> list[str]:
    found = []
    for node in ast.walk(fn.node):
        what = FORBIDDEN_NODES.get(type(node))
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_BUILTINS:
                what = f"{node.func.id}()"
            elif isinstance(node.func, ast.Attribute) and node.func.attr in STRING_METHODS:
                what = f"the string method .{node.func.attr}()"
        if what:
            found.append(f"{fn.path.relative_to(ROOT)}:{node.lineno} in {fn.node.name}: {what}")
    return found


def test_the_scan_finds_the_kernels_and_their_helpers() -> None:
    names = {(f.module, f.node.name) for f in kernel_code()}
    assert ("kernels.gelu", "gelu_fwd") in names
    assert ("kernels.gelu", "_program_rows") in names          # a helper called by a kernel
    assert ("kernels.res_layernorm", "fold_group_size") in names
    assert ("kernels.limits", "fold_sbuf_bytes_per_tile") in names  # imported from a sibling module
    assert ("lesson_kernels.layernorm_stats", "shifted_normalize") in names
    assert not any(name == "res_layernorm_fold_op" for _, name in names)   # host code is not scanned


@pytest.mark.parametrize("snippet", [
    "tiles = [t for t in range(4)]",
    "a, b = (k for k in range(2))",
    "raise ValueError('bad')",
    "for i, t in enumerate(range(3)):\n        pass",
    "name = '-'.join(['a', 'b'])",
])
def test_the_scan_reports_each_construct(tmp_path: Path, snippet: str) -> None:
    code = f"import nki\n\n@nki.jit\ndef k(x):\n    {snippet}\n    return x\n"
    node = next(n for n in ast.parse(code).body if isinstance(n, ast.FunctionDef))
    assert violations(Function("probe", ROOT / "probe.py", node))


def test_kernel_code_uses_only_the_nki_0_6_front_end_subset() -> None:
    found = [v for fn in kernel_code() for v in violations(fn)]
    assert not found, "kernel code outside the NKI 0.6 front-end subset:\n" + "\n".join(found)


# --- the finished kernels run, bit-identically, under both emulated NKI versions -------------------
def _finished_kernel_runs():
    import torch

    from kernels import folded_linear_kernel, gelu_bwd, gelu_fwd, res_layernorm_fold_kernel
    from kernels.limits import FOLDED_LINEAR_WEIGHT_BUDGET
    from kernels.res_layernorm import FOLD_SBUF_BUDGET

    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 64, generator=g).bfloat16()
    a = torch.randn(256, 384, generator=g)
    b = torch.randn(2, 256, 384, generator=g).bfloat16()
    z = torch.randn(256, 256, generator=g).bfloat16()
    w = torch.randn(128, 256, generator=g).bfloat16()
    bias = torch.randn(128, 1, generator=g)
    return {
        "gelu_fwd": (gelu_fwd, (x,)),
        "gelu_bwd": (gelu_bwd, (x, x)),
        "res_layernorm_fold_kernel": (res_layernorm_fold_kernel, (a, b, 1e-6, FOLD_SBUF_BUDGET)),
        "folded_linear_kernel": (folded_linear_kernel, (z, w, bias, FOLDED_LINEAR_WEIGHT_BUDGET)),
    }


@pytest.mark.parametrize("lnc", [1, 2])
@pytest.mark.parametrize("name", ["gelu_fwd", "gelu_bwd", "res_layernorm_fold_kernel", "folded_linear_kernel"])
def test_finished_kernels_run_alike_under_nki_0_6_and_0_7(name: str, lnc: int, monkeypatch) -> None:
    import torch

    import nkisim
    from nkisim.emulator import nki_versions

    monkeypatch.delenv("NEURON_LOGICAL_NC_CONFIG", raising=False)
    kernel, args = _finished_kernel_runs()[name]
    outputs = {}
    for version in nki_versions.VERSIONS:
        with nki_versions.emulating(version):
            result = nkisim.run(kernel, *args, lnc=lnc).outputs
        outputs[version] = result if isinstance(result, tuple) else (result,)
    for old, new in zip(*outputs.values()):
        assert torch.isfinite(new.float()).all() and torch.equal(old, new), name
