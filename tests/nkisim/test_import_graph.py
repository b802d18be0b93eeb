"""No import cycle anywhere in nkisim and kernels: every `import` and `from ... import` (at module
level or inside a function) between modules of the two packages, read from the source, forms a graph
without cycles; kernels uses nkisim, nkisim never imports kernels."""
import ast
from pathlib import Path

import kernels
import nkisim

PACKAGES = (Path(nkisim.__file__).parent, Path(kernels.__file__).parent)


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGES[0].parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for package in PACKAGES for p in package.rglob("*.py")}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, set(modules)) for name, path in modules.items()}


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules of `known` that `name` imports; `from pkg import sub` counts as importing pkg.sub."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in known else base)
    return {m for m in found if m in known and m != name}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of modules, or None (depth-first search with colours)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def test_nkisim_and_kernels_have_no_import_cycle():
    graph = _graph()
    assert len(graph) > 20 and graph["nkisim.emulator.isa"] and graph["kernels"], "the import graph was not read"
    assert any(m.startswith("nkisim") for m in graph["kernels._backend"]), "imports across the packages were not read"
    cycle = _cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_nkisim_never_imports_kernels():
    """The emulator runs any NKI kernel; the workshop's kernels (and their setup check) sit above it."""
    upward = {name: sorted(m for m in found if m.startswith("kernels"))
              for name, found in _graph().items() if name.startswith("nkisim")}
    assert not {k: v for k, v in upward.items() if v}


def test_the_cycle_finder_finds_cycles():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_layers_only_import_downwards():
    """The emulator and the cost model never import the profile layer (summaries, views)."""
    modules = _modules()
    for name, path in modules.items():
        if name.startswith(("nkisim.emulator", "nkisim.costmodel", "nkisim.vocabulary", "nkisim.limits")):
            upward = {m for m in _imports(name, path, set(modules)) if m.startswith("nkisim.profile")}
            assert not upward, f"{name} imports {upward}"
