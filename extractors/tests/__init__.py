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
from dataclasses import dataclass
from pathlib import Path

from extractors.base import ExtractContext, RowLists, Sink, emit, paused_gc
from extractors.python import load_model, prefetch_tops
from extractors.python.corpus import python_files
from extractors.python.model import MODULE_ROOTS, Model
from extractors.python.names import rename
from extractors.python.native import NATIVE_YAML, NativeOps
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


def prefetch(ctx: ExtractContext) -> None:
    """The summaries of the layer's files (Note [Parsed ahead] in torchtalk/index.py)."""
    prefetch_tops(ctx, TOPS)


def extract(ctx: ExtractContext, sink: Sink) -> None:
    """Write the tests layer's rows for `ctx.root`."""
    with paused_gc():  # as the python layer's (Note [No GC in an update])
        _extract(ctx, sink)


def _extract(ctx: ExtractContext, sink: Sink) -> None:
    model, _ = load_model(ctx, sink, TOPS)
    dbs = Databases(model)
    classes = model.subclasses_of(MODULE_ROOTS)
    finder = CoverFinder(model, dbs, frozenset(rename(c) for c in classes))
    files = [s for s in model.summaries if s.file.startswith("test/")]
    last = ctx.memo.get(KEPT) if ctx.memo is not None else None
    rows = RowLists()
    keep = last is not None and _files_kept(model) and dbs.entries == last.entries
    if keep:  # Note [Test files kept across a body edit], Note [Test files kept across a YAML edit]
        moved = {callee for callee, was in last.subjects.items() if finder.subject(callee) != was}
        moved |= _native_moved(last.native, model.native)
        records = {s.file: rec if (rec := last.files.get(s.file)) is not None and rec.read.isdisjoint(moved)
                   else _test_file(model, finder, s) for s in files}
        for relation in DECLARED:
            rows[relation] = last.rows.get(relation, [])
    else:
        records = {s.file: _test_file(model, finder, s) for s in files}
        for e in dbs.entries.values():
            rows.add("opinfo", e.name, e.subject, e.db, e.file, e.line)
            for alias in e.aliases:
                rows.add("opinfo", e.name, alias, e.db, e.file, e.line)
        _module_runs(model, classes, rows)
    for rec in records.values():
        for relation, rs in rec.rows.items():
            rows.setdefault(relation, []).extend(rs)
    uses = _uses(records.values())
    rows["test_util"] = last.rows.get("test_util", []) if keep and uses == last.uses else _test_utils(model, dbs, *uses)
    now = rows.distinct()
    generation = emit(ctx, sink, now, (last.generation, last.rows) if last is not None else None)
    if ctx.memo is not None:
        ctx.memo[KEPT] = _Kept(generation, now, records, finder.subjects(), uses, dbs.entries, model.native)


# Note [Test files kept across a body edit]: the rows of a test file are a
# function of its summary, of the summaries under test/ and
# torch/testing/_internal (its helpers, the OpInfo lists), of what every
# summary declares (the model's names, classes and bases: its `_interface`,
# Note [A model kept across a body edit] in extractors/python/__init__.py)
# and, through the model's call edges, of one thing more: whether each
# callee its tests and their helpers call is a subject (`CoverFinder.subject`:
# an API that reaches an op). So when the model of a layer run with a memo
# took the last one's work (a body edit outside test/ and torch/testing/),
# the run asks again the subject of every callee the last run asked, and
# computes again only the files whose tests read one that changed (a
# file's `read`); the rows of the others, and of the relations that read
# only declarations (opinfo, module_runs; test_util unless the decorator and
# base counts moved), are the last run's. Anything else computes every file
# again. Either way the rows are written by `emit`: as deltas from the last
# run's when the DB has those (Note [Layer deltas]).
#
# Note [Test files kept across a YAML edit]: an edit of native_functions.yaml
# (an op added, a variant more) left the model's work kept (Note [A model
# kept across a YAML edit] in extractors/python) but computed every test
# file again: 1.5 s of the layer's 2.2 s, profiled, though a file's rows
# read the YAML in three ways only. (1) Through the subject of a callee,
# asked again as after a body edit. (2) By the names a test's name could
# start with, looked up among the ops (`CoverFinder.name_op`), and the
# methods of its untyped receivers, looked up among the Tensor methods
# (`_from_calls`): the finder records each as ("op", name) or ("method",
# name) beside the callees, so a file is computed again when one of its
# names is an op or method the edit added or removed (`_native_moved`).
# (3) Through the OpInfo entries, whose subjects are op names: the run
# keeps nothing unless the entries are those of the last run (they also
# give opinfo and test_util's rows). module_runs and a helper's lookup take
# only a def (`Model.method`), which no YAML answers.
KEPT = "tests-kept"
# the summaries a test file's rows read whole, not only their declarations
READ_WHOLE = ("test/", "torch/testing/")
# the relations that read only what the summaries declare
DECLARED = ("opinfo", "module_runs")


@dataclass(frozen=True)
class _FileRows:
    """What one test file gives: its rows by relation, its decorator and
    base class uses, and the callees whose subject they read."""

    rows: dict[str, list[tuple]]
    decorator_uses: Counter
    base_uses: Counter
    read: frozenset[str | tuple[str, str]]  # CoverFinder.looked: the callees and YAML names its rows read


@dataclass(frozen=True)
class _Kept:
    """A run's rows, for the next to keep (Note [Test files kept across a body edit])."""

    generation: str | None  # of `rows`, as `emit` gives it
    rows: dict[str, list[tuple]]  # the layer's rows, as written
    files: dict[str, _FileRows]
    subjects: dict[str, str | None]  # callee -> its subject, every one asked
    uses: tuple[Counter, Counter]  # decorator and base class uses of every file
    entries: dict  # the OpInfo/ModuleInfo entries (Databases.entries) the rows read
    native: NativeOps  # the YAML's ops the rows read


def _files_kept(model: Model) -> bool:
    """Whether the last run's test files may be kept: the model took the
    last one's work, after an edit that changed no summary read whole."""
    return model.adopted is not None and not any(f.startswith(READ_WHOLE) for f in model.adopted)


def _native_moved(was: NativeOps, now: NativeOps) -> set[tuple[str, str]]:
    """The YAML names whose lookup a test file's rows may answer otherwise
    under `now` than under `was`: ("op", name) for an op name added or
    removed, ("method", name) for a Tensor method (Note [Test files kept
    across a YAML edit])."""
    if was is now:
        return set()
    return {("op", n) for n in was.by_name.keys() ^ now.by_name.keys()} | \
        {("method", m) for m in was.methods ^ now.methods}


def _uses(records) -> tuple[Counter, Counter]:
    """The decorator and base class uses of all `records`."""
    decorators: Counter[str] = Counter()
    bases: Counter[str] = Counter()
    for rec in records:
        decorators.update(rec.decorator_uses)
        bases.update(rec.base_uses)
    return decorators, bases


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


def _test_file(model: Model, finder: CoverFinder, s: FileSummary) -> _FileRows:
    rows: dict[str, list[tuple]] = {"test": [], "tests_cover": [], "test_file": [], "test_file_uses": []}
    decorator_uses: Counter[str] = Counter()
    base_uses: Counter[str] = Counter()
    finder.looked = set()
    defs = {d.qual: d for d in s.defs}
    classes = tests = 0
    for d in s.defs:
        for deco in d.decorators:
            decorator_uses[model.idx.canon(deco.target)] += 1
        if d.kind == "class" and "." not in d.qual and _is_test_class(model, s, d, defs):
            classes += 1
            cid = f"{s.file}::{d.qual}"
            rows["test"].append((cid, "class", s.file, d.line))
            for b in model.idx.bases(f"{s.module}.{d.qual}"):
                base_uses[rename(b)] += 1
        elif _is_test_function(s, d, defs):
            tests += 1
            tid = f"{s.file}::{d.qual.replace('.', '::')}"
            rows["test"].append((tid, "function", s.file, d.line))
            rows["tests_cover"] += [(tid, *row) for row in finder.covers(s, d, tid)]
    rows["test_file"].append((s.file, classes, tests, s.lines))
    seen: set[str] = set()
    for _local, target, line in s.imports:
        util = rename(model.idx.resolve(target)[0]) if target.startswith(UTIL_PREFIX) else ""
        if util and util not in seen:
            seen.add(util)
            rows["test_file_uses"].append((s.file, util, line))
    return _FileRows({k: v for k, v in rows.items() if v}, decorator_uses, base_uses, frozenset(finder.looked))


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


def _test_utils(model: Model, dbs: Databases, decorator_uses: Counter, base_uses: Counter) -> list[tuple]:
    """Top-level names of torch/testing/_internal with a category (see schema): test_util's rows."""
    out = []
    db_names = {f"{e.file}:{e.db}" for e in dbs.entries.values()}
    for s in model.summaries:
        if not s.module.startswith(UTIL_PREFIX):
            continue
        for d in s.defs:
            if "." in d.qual or d.qual.startswith("_"):
                continue
            name = rename(f"{s.module}.{d.qual}")
            out.append((name, _category(model, name, d, decorator_uses, base_uses), s.file, d.line))
        seen: set[str] = set()
        for var, line, _ir in s.assigns:
            if var in seen or var.startswith("_"):
                continue
            seen.add(var)
            if f"{s.file}:{var}" in db_names:
                out.append((f"{s.module}.{var}", "opinfo_db", s.file, line))
            elif var.isupper() and var.startswith(("TEST_", "IS_", "HAS_")):
                out.append((f"{s.module}.{var}", "flag", s.file, line))
    return out


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
