"""The layout is the architecture: dg/ has no import cycles, and the core never reaches up into the UI,
the views or the benchmarks, nor into gradio or plotly.

Read from the source with `ast` (imports inside functions count too), so a lazy import cannot hide an
edge; then the core is imported for real with gradio and plotly made unimportable.
"""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DG = ROOT / "dg"
UPPER = ("dg.ui", "dg.view", "dg.bench")  # the layers above the core
FRONT_ENDS = ("gradio", "plotly")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(path: Path) -> set[str]:
    """Every name `path` imports, at any depth: `a.b` for `import a.b`, `a.b` and `a.b.c` for `from a.b import c`."""
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against this module's package
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names |= {base, *(f"{base}.{alias.name}" for alias in node.names)}
    return names


def import_graph() -> dict[str, set[str]]:
    """dg module → the dg modules it imports."""
    modules = {module_name(p): p for p in DG.rglob("*.py")}
    return {m: {n for n in imported_names(p) if n in modules and n != m} for m, p in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan), each a cycle of imports."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while not component or component[-1] != v:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def core_modules() -> list[Path]:
    """The core: dg/*.py and its fast paths in dg/kernels/."""
    return sorted([*DG.glob("*.py"), *(DG / "kernels").glob("*.py")])


def test_the_import_graph_of_dg_has_no_cycles():
    graph = import_graph()
    assert len(graph) > 30 and "dg.sampler" in graph["dg.ui.host"]  # the graph is read, not empty
    assert cycles(graph) == []


def test_a_cycle_is_found_when_there_is_one():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_core_never_imports_the_ui_the_views_the_benchmarks_gradio_or_plotly():
    offences = {}
    for path in core_modules():
        bad = {n for n in imported_names(path) if n.startswith(UPPER) or n.split(".")[0] in FRONT_ENDS}
        if bad:
            offences[module_name(path)] = sorted(bad)
    assert offences == {}


def test_the_views_and_the_run_machinery_never_import_gradio():
    quiet = [*(DG / "view").glob("*.py"), *(DG / "ui" / name for name in ("runs.py", "race.py", "session.py"))]
    offences = {module_name(p): sorted(n for n in imported_names(p) if n.split(".")[0] == "gradio") for p in quiet}
    assert {m: bad for m, bad in offences.items() if bad} == {}
    assert not any(n.startswith("dg.ui") for p in (DG / "view").glob("*.py") for n in imported_names(p))


def test_the_core_imports_with_gradio_and_plotly_unavailable():
    names = [module_name(p) for p in core_modules() if p.name not in ("__init__.py", "__main__.py", "fused_sampling.py")]
    blocked = "; ".join(f"sys.modules[{m!r}] = None" for m in FRONT_ENDS)
    code = f"import importlib, sys; {blocked}; [importlib.import_module(m) for m in {names!r}]"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
