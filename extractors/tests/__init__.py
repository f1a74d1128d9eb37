"""The "tests" layer: tests, OpInfo/ModuleInfo entries, what each test covers,
test utilities, per-file details; over `test/` and `torch/testing/_internal`.

Rows (facts/schema.dl, tests section): test, opinfo, tests_cover, test_util,
test_file, test_file_uses, module_runs. Names are resolved with the python layer's model
over torch/ + test/ (the file summaries are shared through one cache, Note
[Per-file summaries]). See Note [Test cover subjects] and Note [OpInfo subjects].

Test ids: "test/test_linalg.py::TestLinalg::test_matmul_small_brute_force_1d_Nd"
for a method of a test class (a class deriving from a TestCase, or holding
test_* methods), "test/test_x.py::test_y" for a module-level test function,
"test/test_linalg.py::TestLinalg" for the class. Device-generic classes are
recorded as written (TestLinalg), not as the generated TestLinalgCPU.

Example:
    >>> extract(ExtractContext(root, cache_dir, jobs=2), sink)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from extractors.base import ExtractContext, Sink, paused_gc
from extractors.python import load_model
from extractors.python.corpus import python_files
from extractors.python.model import MODULE_ROOTS, Model
from extractors.python.names import rename
from extractors.python.native import NATIVE_YAML
from extractors.python.summary import Def, FileSummary
from extractors.tests.cover import CoverFinder
from extractors.tests.opinfo import Databases

TOPS = ("torch", "test")
UTIL_PREFIX = "torch.testing._internal."


def inputs(root: Path) -> Iterable[Path]:
    """Every `.py` under torch/ and test/, plus native_functions.yaml."""
    from extractors.ops import find_inputs

    layout = find_inputs(root)
    yield root / (layout.native if layout else NATIVE_YAML)
    for rel in python_files(root, TOPS):
        yield root / rel


def extract(ctx: ExtractContext, sink: Sink) -> None:
    """Write the tests layer's rows for `ctx.root`."""
    with paused_gc():  # as the python layer's (Note [No GC in an update])
        _extract(ctx, sink)


def _extract(ctx: ExtractContext, sink: Sink) -> None:
    model, _ = load_model(ctx, sink, TOPS)
    dbs = Databases(model)
    for e in dbs.entries.values():
        sink.add("opinfo", e.name, e.subject, e.db, e.file, e.line)
        for alias in e.aliases:
            sink.add("opinfo", e.name, alias, e.db, e.file, e.line)
    classes = model.idx.subclasses_of(MODULE_ROOTS)
    module_classes = frozenset(rename(c) for c in classes)
    _module_runs(model, classes, sink)
    finder = CoverFinder(model, dbs, module_classes)
    decorator_uses: Counter[str] = Counter()
    base_uses: Counter[str] = Counter()
    for s in model.summaries:
        if s.file.startswith("test/"):
            _test_file(model, finder, s, sink, decorator_uses, base_uses)
    _test_utils(model, dbs, sink, decorator_uses, base_uses)


RUN_METHODS = ("__init__", "forward", "step")


def _module_runs(model: Model, classes: Iterable[str], sink: Sink) -> None:
    """module_runs rows: the methods each module/optimizer class runs (own or
    inherited, not a MODULE_ROOTS class's placeholder)."""
    for cls in sorted(classes):
        if cls in MODULE_ROOTS:
            continue
        for m in RUN_METHODS:
            hit = model.method(cls, m, False)
            if hit is None or hit[1] != "def" or hit[0].rpartition(".")[0] in MODULE_ROOTS:
                continue
            found = model.idx.def_of(hit[0])
            if found is not None:
                sink.add("module_runs", rename(cls), m, rename(hit[0]), found[0].file, found[1].line)


def _test_file(model: Model, finder: CoverFinder, s: FileSummary, sink: Sink,
               decorator_uses: Counter, base_uses: Counter) -> None:
    defs = {d.qual: d for d in s.defs}
    classes = tests = 0
    for d in s.defs:
        for deco in d.decorators:
            decorator_uses[model.idx.canon(deco.target)] += 1
        if d.kind == "class" and "." not in d.qual and _is_test_class(model, s, d, defs):
            classes += 1
            cid = f"{s.file}::{d.qual}"
            sink.add("test", cid, "class", s.file, d.line)
            for b in model.idx.bases(f"{s.module}.{d.qual}"):
                base_uses[rename(b)] += 1
        elif _is_test_function(s, d, defs):
            tests += 1
            tid = f"{s.file}::{d.qual.replace('.', '::')}"
            sink.add("test", tid, "function", s.file, d.line)
            for subject, how, file, line in finder.covers(s, d, tid):
                sink.add("tests_cover", tid, subject, how, file, line)
    sink.add("test_file", s.file, classes, tests, s.lines)
    seen: set[str] = set()
    for _local, target, line in s.imports:
        util = rename(model.idx.resolve(target)[0]) if target.startswith(UTIL_PREFIX) else ""
        if util and util not in seen:
            seen.add(util)
            sink.add("test_file_uses", s.file, util, line)


def _is_test_class(model: Model, s: FileSummary, d: Def, defs: dict[str, Def]) -> bool:
    prefix = d.qual + "."
    if any(q.startswith(prefix + "test") and q.count(".") == 1 for q in defs):
        return True
    return "TestCase" in _ancestor_names(model, f"{s.module}.{d.qual}")


def _is_test_function(s: FileSummary, d: Def, defs: dict[str, Def]) -> bool:
    cls, _, name = d.qual.rpartition(".")
    if not name.startswith("test") or d.kind == "class":
        return False
    if not cls:
        return Path(s.file).name.startswith("test") and d.kind == "function"
    return "." not in cls and cls in defs and defs[cls].kind == "class"


def _ancestor_names(model: Model, cls: str) -> set[str]:
    out, todo, seen = set(), [cls], set()
    while todo:
        c = todo.pop()
        if c in seen or len(seen) > 50:
            continue
        seen.add(c)
        for b in model.idx.bases(c):
            out.add(b.rpartition(".")[2])
            todo.append(b)
    return out


def _test_utils(model: Model, dbs: Databases, sink: Sink, decorator_uses: Counter, base_uses: Counter) -> None:
    """Top-level names of torch/testing/_internal with a category (see schema)."""
    db_names = {f"{e.file}:{e.db}" for e in dbs.entries.values()}
    for s in model.summaries:
        if not s.module.startswith(UTIL_PREFIX):
            continue
        for d in s.defs:
            if "." in d.qual or d.qual.startswith("_"):
                continue
            name = rename(f"{s.module}.{d.qual}")
            sink.add("test_util", name, _category(model, name, d, decorator_uses, base_uses), s.file, d.line)
        seen: set[str] = set()
        for var, line, _ir in s.assigns:
            if var in seen or var.startswith("_"):
                continue
            seen.add(var)
            if f"{s.file}:{var}" in db_names:
                sink.add("test_util", f"{s.module}.{var}", "opinfo_db", s.file, line)
            elif var.isupper() and var.startswith(("TEST_", "IS_", "HAS_")):
                sink.add("test_util", f"{s.module}.{var}", "flag", s.file, line)


def _category(model: Model, name: str, d: Def, decorator_uses: Counter, base_uses: Counter) -> str:
    """decorator (used as one in test/), base_class (test classes derive from it),
    info_class (an OpInfo/ModuleInfo class), class, helper."""
    if decorator_uses.get(name):
        return "decorator"
    if d.kind == "class":
        if base_uses.get(name):
            return "base_class"
        if d.qual.endswith("Info"):
            return "info_class"
        return "class"
    return "helper"
