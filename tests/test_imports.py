"""The layering the design states, as tests (STYLE practice 18): imports go
one way, with no cycle among torchtalk's modules, and the Datalog core
(torchtalk/datalog/) imports nothing of the application above it."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# What the Datalog core may import besides itself: the error hierarchy, the
# atomic file writer, the per-connection session and the cache dir's
# location, which import nothing of torchtalk themselves.
FOUNDATION = ("torchtalk.errors", "torchtalk.atomic", "torchtalk.connmemo", "torchtalk.paths")


def _modules() -> dict[str, Path]:
    out = {}
    for path in (ROOT / "torchtalk").rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = path
    return out


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """Every torchtalk module `path` imports, at module level or in a function."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                out.add(full if full in modules else node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return {m for m in out if m in modules}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(path, modules) - {name} for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module."""
    from torchtalk.datalog.analysis.strata import strongly_connected

    comps = strongly_connected(sorted(graph), {k: sorted(v) for k, v in graph.items()})
    return sorted(sorted(c) for c in comps if len(c) > 1)


def test_the_walk_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycles():
    assert _cycles(_graph()) == []


def test_the_datalog_core_imports_nothing_of_the_application():
    graph = _graph()
    outside = {
        (name, dep)
        for name, deps in graph.items() if name.startswith("torchtalk.datalog")
        for dep in deps
        if not dep.startswith("torchtalk.datalog") and dep not in FOUNDATION
    }
    assert outside == set()
    for base in FOUNDATION:
        assert graph[base] <= set(FOUNDATION), base
