"""The layout is the architecture: dg/ has no import cycles; the core never reaches up into the engine, the
UI, the views, the benchmarks, the app's examples or the tiny model, nor into gradio or plotly; the engine
(dg/engine/) runs models for clients and imports neither gradio nor plotly, nor the UI, the views, the
examples or the tiny model; the views never import gradio, the UI or the engine; dg/ui/ is the Gradio app:
its tabs import gradio, and its plain modules (slow motion, the files it hands out, the runs a session keeps)
serve the app alone; the app reaches the tiny model only through dg.examples.

Read from the source with `ast` (imports inside functions count too), so a lazy import cannot hide an
edge; then the core is imported for real with gradio and plotly made unimportable.
"""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DG = ROOT / "dg"
UPPER = ("dg.engine", "dg.ui", "dg.view", "dg.bench", "dg.tiny", "dg.examples")  # above the core, and the tiny model
FRONT_END = ("cli.py", "__main__.py")  # the command line: a client of every layer, as the app is
APP_ONLY = ("dg.ui.pace", "dg.ui.files", "dg.ui.kept")  # dg/ui's plain modules: what only the Gradio app needs
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
    """The core: dg/*.py (but the command line and the app's examples) and its fast paths in dg/kernels/."""
    top = [p for p in DG.glob("*.py") if p.name not in FRONT_END and p.name != "examples.py"]
    return sorted([*top, *(DG / "kernels").glob("*.py")])


def test_the_import_graph_of_dg_has_no_cycles():
    graph = import_graph()
    assert len(graph) > 30 and "dg.sampler" in graph["dg.modes"] and "dg.modes" in graph["dg.engine.runner"]  # read
    assert cycles(graph) == []


def test_a_cycle_is_found_when_there_is_one():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_core_never_imports_the_engine_the_ui_the_views_the_benchmarks_the_tiny_model_gradio_or_plotly():
    offences = {}
    for path in core_modules():
        bad = {n for n in imported_names(path) if n.startswith(UPPER) or n.split(".")[0] in FRONT_ENDS}
        if bad:
            offences[module_name(path)] = sorted(bad)
    assert offences == {}


def offences(folder: str, forbidden: tuple[str, ...]) -> dict[str, list[str]]:
    """Module of dg/`folder` → the names it imports that are one of `forbidden` (a top-level package such as
    "gradio", or a dg layer such as "dg.ui") or lie inside one."""
    found = {}
    for path in sorted((DG / folder).glob("*.py")):
        bad = {n for n in imported_names(path) if any(n == f or n.startswith(f"{f}.") for f in forbidden)}
        if bad:
            found[module_name(path)] = sorted(bad)
    return found


def test_the_engine_imports_neither_gradio_nor_plotly_nor_the_ui_the_views_the_examples_the_tiny_model_or_benches():
    assert len(list((DG / "engine").glob("*.py"))) > 5  # the folder is read, not empty
    assert offences("engine", (*FRONT_ENDS, "dg.ui", "dg.view", "dg.examples", "dg.tiny", "dg.bench")) == {}


def test_the_app_s_examples_reach_only_the_core_and_the_tiny_model_s_skills():
    names = {n for n in imported_names(DG / "examples.py") if n.startswith("dg.") and n != "dg.tiny"}  # the package
    assert names and all(n.startswith(("dg.prompts", "dg.tiny.skills", "dg.tiny.scope")) for n in names), names


def test_the_ui_reaches_the_tiny_model_only_through_the_examples():
    assert offences("ui", ("dg.tiny",)) == {}
    assert any("dg.examples" in imported_names(p) for p in (DG / "ui").glob("*.py"))  # the one way in is used


def test_the_views_import_neither_gradio_nor_the_ui_nor_the_engine():
    assert offences("view", ("gradio", "dg.ui", "dg.engine", "dg.bench")) == {}


def test_the_ui_holds_gradio_modules_and_the_plain_ones_only_the_app_reads():
    plain = [module_name(p) for p in sorted((DG / "ui").glob("*.py"))
             if p.name != "__init__.py" and not any(n.split(".")[0] == "gradio" for n in imported_names(p))]
    assert sorted(plain) == sorted(APP_ONLY)
    readers = {module_name(p): sorted(n for n in imported_names(p) if n.startswith(APP_ONLY))
               for p in DG.rglob("*.py") if not module_name(p).startswith("dg.ui")}
    assert {m: names for m, names in readers.items() if names} == {}


def test_a_forbidden_import_is_found_and_a_longer_name_that_shares_its_start_is_not(tmp_path, monkeypatch):
    (tmp_path / "dg" / "layer").mkdir(parents=True)
    (tmp_path / "dg" / "layer" / "a.py").write_text("import gradio_client\nfrom dg.uix import y\nfrom dg.ui import z\n")
    monkeypatch.setattr(sys.modules[__name__], "DG", tmp_path / "dg")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert offences("layer", ("gradio", "dg.ui")) == {"dg.layer.a": ["dg.ui", "dg.ui.z"]}


def test_the_core_and_the_engine_import_with_gradio_and_plotly_unavailable():
    engine = sorted((DG / "engine").glob("*.py"))
    names = [module_name(p) for p in [*core_modules(), *engine]
             if p.name not in ("__init__.py", "__main__.py", "fused_sampling.py", "fused_norms.py", "launch.py")]
    blocked = "; ".join(f"sys.modules[{m!r}] = None" for m in FRONT_ENDS)
    code = f"import importlib, sys; {blocked}; [importlib.import_module(m) for m in {names!r}]"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
