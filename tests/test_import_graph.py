"""The package's import graph: no cycles, and the engine and the trainer never import each other,
directly or through any chain of other modules (the trainer reaching ``evaluation`` which imports
the engine counts).

Every ``import`` in ``spade_engine`` counts, the ones inside functions too (a lazy import is still
a dependency); only imports under ``if TYPE_CHECKING:`` are left out, since they never run. The
graph is built from the source with :mod:`ast`, so the test needs no optional dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import spade_engine

ROOT = Path(spade_engine.__file__).parent
PKG = "spade_engine"


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in ROOT.rglob("*.py") if "migrations" not in p.parts}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, module: str, is_package: bool, known: set[str]) -> set[str]:
    """Absolute spade_engine modules imported anywhere in ``tree`` (TYPE_CHECKING blocks excluded)."""
    out: set[str] = set()
    base_parts = module.split(".") if is_package else module.split(".")[:-1]

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PKG):
                    out.add(_nearest(alias.name, known))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = base_parts[: len(base_parts) - (node.level - 1)]
                target = ".".join(parts + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith(PKG):
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    out.add(sub if sub in known else _nearest(target, known))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    out.discard(module)
    return out


def _nearest(name: str, known: set[str]) -> str:
    while name not in known and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def import_graph() -> dict[str, set[str]]:
    mods = _modules()
    known = set(mods)
    return {
        name: _imports(ast.parse(path.read_text(), str(path)), name, path.name == "__init__.py", known)
        for name, path in mods.items()
    }


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def test_the_graph_is_built_from_real_imports() -> None:
    graph = import_graph()
    # a few edges that must be seen, so an empty or broken graph cannot pass the checks below
    assert "spade_engine.engine.pipeline" in graph["spade_engine.engine.loop"]
    assert "spade_engine.policy.registry" in graph["spade_engine.runs.context"]
    assert "spade_engine.trainer.loop" in graph["spade_engine.runs.training"]  # a lazy import counts
    assert "spade_engine.sandbox.session" not in graph["spade_engine.sandbox.gym_env"]  # TYPE_CHECKING-only


def test_no_import_cycles() -> None:
    cycles = _cycles(import_graph())
    assert cycles == [], "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def _reach(graph: dict[str, set[str]], start: str) -> dict[str, str | None]:
    """Every module ``start`` reaches through a chain of imports, each with the module it was
    reached from (``None`` for ``start``), so a path can be shown."""
    came_from: dict[str, str | None] = {start: None}
    todo = [start]
    while todo:
        v = todo.pop()
        for w in sorted(graph.get(v, ())):
            if w not in came_from:
                came_from[w] = v
                todo.append(w)
    return came_from


def _path(came_from: dict[str, str | None], end: str) -> str:
    chain = [end]
    while came_from[chain[-1]] is not None:
        chain.append(came_from[chain[-1]])  # type: ignore[arg-type]
    return " -> ".join(reversed(chain))


def _with_parents(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """``graph`` plus the imports Python makes implicitly: importing ``a.b.c`` first runs the
    ``__init__`` of ``a`` and ``a.b``."""
    out = {mod: set(deps) for mod, deps in graph.items()}
    for mod in graph:
        parts = mod.split(".")
        out[mod].update(p for p in (".".join(parts[:i]) for i in range(1, len(parts))) if p in graph)
    return out


def _reaching(graph: dict[str, set[str]], src: str, dst: str) -> list[str]:
    """Import chains from a module of package ``src`` to one of package ``dst`` (one per module),
    counting the parent packages every import runs."""
    graph = _with_parents(graph)
    out = []
    for mod in sorted(graph):
        if mod == f"{PKG}.{src}" or mod.startswith(f"{PKG}.{src}."):
            came_from = _reach(graph, mod)
            hit = sorted(m for m in came_from if m == f"{PKG}.{dst}" or m.startswith(f"{PKG}.{dst}."))
            if hit:
                out.append(_path(came_from, hit[0]))
    return out


def test_engine_and_trainer_never_import_each_other() -> None:
    bad = []
    for mod, deps in import_graph().items():
        for dep in deps:
            for a, b in (("engine", "trainer"), ("trainer", "engine")):
                if mod.startswith(f"{PKG}.{a}") and dep.startswith(f"{PKG}.{b}"):
                    bad.append(f"{mod} -> {dep}")
    assert bad == []


def test_engine_and_trainer_never_reach_each_other_through_other_modules() -> None:
    """Not even through a chain (``trainer -> evaluation -> engine``): every module the engine
    reaches is free of the trainer, and every module the trainer reaches is free of the engine."""
    graph = import_graph()
    chains = _reaching(graph, "engine", "trainer") + _reaching(graph, "trainer", "engine")
    assert chains == [], "import chains between engine and trainer:\n" + "\n".join(chains)


def test_the_reach_check_sees_chains() -> None:
    # a made-up graph: the check must find a chain two modules long, lazy or not
    graph = {f"{PKG}.trainer.a": {f"{PKG}.x"}, f"{PKG}.x": {f"{PKG}.engine.b"}, f"{PKG}.engine.b": set()}
    assert _reaching(graph, "trainer", "engine") == [f"{PKG}.trainer.a -> {PKG}.x -> {PKG}.engine.b"]
    assert _reaching(graph, "engine", "trainer") == []


def test_sandbox_and_policy_depend_on_neither_engine_nor_trainer() -> None:
    bad = [
        f"{mod} -> {dep}"
        for mod, deps in import_graph().items()
        if mod.startswith((f"{PKG}.sandbox", f"{PKG}.policy"))
        for dep in deps
        if dep.startswith((f"{PKG}.engine", f"{PKG}.trainer", f"{PKG}.runs"))
    ]
    assert bad == []
