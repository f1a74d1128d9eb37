"""The "python" layer: Python definitions, calls, Python API → ATen op,
nn modules and optimizers, decompositions, over `torch/` of the tree.

Rows (facts/schema.dl, Python section): py_def, py_calls, py_api, binds
(kinds "alias" and "wrapper"), module_class, class_base, decomp, py_op_impl,
py_alias.
Per-file summaries are cached by content hash (Note [Per-file summaries]);
the global pass is `extractors.python.model`.

Example:
    >>> extract(ExtractContext(root, cache_dir, jobs=2), sink)
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable
from pathlib import Path

from extractors.base import ExtractContext, RowLists, Sink, emit, paused_gc
from extractors.ops_yaml import KEPT_PARSES
from extractors.python.corpus import input_files, python_files, shared_cache_dir, summarize_tree
from extractors.python.model import DECOMP_REGISTRARS, MODULE_ROOTS, REF_MAKERS, Model
from extractors.python.names import rename
from extractors.python.native import NATIVE_YAML, NativeOps, load_native
from extractors.python.summary import FileSummary
from torchtalk.connmemo import remember

TOPS = ("torch",)
_PUBLIC_LEAF_SKIP = ("torch._C._VariableFunctions.", "torch._C.TensorBase.")


def inputs(root: Path, dirs: Iterable[str] = TOPS, torch_root: Path | None = None) -> Iterable[Path]:
    """Every `.py` under torch/ (or `dirs`) plus native_functions.yaml (of
    `torch_root` for an extension, Note [Extensions] in torchtalk/extension.py)."""
    from extractors.ops import find_inputs

    yaml_root = torch_root or root
    layout = find_inputs(yaml_root)
    yield yaml_root / (layout.native if layout else NATIVE_YAML)
    for rel in python_files(root, dirs):
        yield root / rel


def prefetch(ctx: ExtractContext) -> None:
    """The summaries of the layer's files, into the cache its run reads
    (Note [Parsed ahead] in torchtalk/index.py)."""
    prefetch_tops(ctx, ctx.dirs or TOPS)


def prefetch_tops(ctx: ExtractContext, tops: Iterable[str]) -> None:
    """The summaries of the `.py` files under `tops`, into the summary cache shared by the python and tests layers."""
    from extractors.python.corpus import prefetch_summaries

    prefetch_summaries(ctx.root, python_files(ctx.root, tops), shared_cache_dir(ctx.cache_dir))


def load_model(ctx: ExtractContext, sink: Sink, tops: Iterable[str] = TOPS) -> tuple[Model, list[FileSummary]]:
    """Summaries of `tops` (cached) and the global model; parse failures
    warned. For an extension (`ctx.torch_root`), `tops` are its packages,
    its APIs those of their files, and its `torch.ops.NS.X` calls op calls."""
    tops = tuple(tops)
    files = input_files(ctx.root, tops, ctx.stats)
    sink.progress(0, total=len(files), what="python files")
    summaries = summarize_tree(
        ctx.root, files, shared_cache_dir(ctx.cache_dir), ctx.jobs,
        progress=lambda n: sink.progress(n),
    )
    for s in summaries:
        if s.error is not None:
            sink.warn(s.file, s.error[0], f"Python file does not parse: {s.error[1]}")
    last = ctx.memo.get("model") if ctx.memo is not None else None
    kept = last[1].idx if last is not None else None  # its modules of the summaries kept (Note [Modules kept])
    if ctx.torch_root is None:
        model = Model(summaries, _native(ctx.root), kept=kept)
    else:
        model = Model(summaries, _native(ctx.torch_root), tuple(f"{t}/" for t in tops), extension=True, kept=kept)
    if ctx.memo is not None:
        _adopt_last(ctx.memo, model, summaries)
    return model, summaries


# Note [A model kept across a body edit]: most of a layer's time over
# torch/ is its model's call edges (64,000 of them: resolving every call of
# every function, 0.6 of the python layer's 0.9 s), which a watcher's update
# computed again for every function after an edit of one. A caller's edges
# are a function of its own Def (its calls and their lines, its receivers)
# and of what every summary declares: modules, imports, assignments, defs
# and their kinds, bases, decorators, attributes and return types, OpInfo
# entries (its `_interface`), with no line; so are the model's caches of
# names classified, receiver types and roots. So a layer run with a memo
# (Note [Layer memo]) keeps its last model and the summaries it was built
# over, and when the summaries that changed (those not kept as the same
# object, Note [Summaries kept in the process]) declare what they did (a
# body edit, a line added or removed), the new model takes the last one's
# caches, less the edges of the callers of those files and the API -> op
# answers whose walk read one of those edges, and computes only those
# (the python layer's API rows after a .py edit: 0.09 -> 0.07 s); anything
# else (a def, an import, an assignment added or changed) computes
# everything again. Only the changed files' interfaces are
# compared, and a run with no last model (a `torchtalk index` process)
# compares none.
def _adopt_last(memo: dict, model: Model, summaries: list[FileSummary]) -> None:
    now = {s.file: s for s in summaries}
    last = memo.get("model")
    memo["model"] = (now, model)
    if last is None:
        return
    before, was = last
    if before.keys() != now.keys() or was.native.file != model.native.file or \
            (was.edge_prefix, was.extension) != (model.edge_prefix, model.extension):
        return
    changed = {f for f, s in now.items() if before[f] is not s}  # a summary kept is the same object
    if all(_interface(before[f]) == _interface(now[f]) for f in changed):
        model.adopt(was, lambda f: f not in changed)
        model.adopted = frozenset(changed)


# Note [A model kept across a YAML edit]: an edit of native_functions.yaml
# (a new op, a variant more) gives the python layer a new NativeOps, and
# its model computed every call edge again (1.5 s of a 2.6 s layer run,
# profiled) though the edges read the YAML only by a leaf's name: whether
# `torch.X` is a binding (classify), whether a method `m` is a Tensor
# method (a receiver's guess, a Tensor subclass's method) and whether a
# call's result is one Tensor (a receiver type). So the model adopts the
# last one's caches as after a body edit, and `Model._native_moved`
# computes again the classifications and receiver types the YAML could
# answer otherwise (those that found no def), and the edges of every
# caller with a call whose name or method one of them moved, or a method
# the YAML's methods or Tensor leaves gained or lost. The API -> op
# answers are not adopted: they read the leaves' ops, which the edit may
# have changed under an edge that stayed.


def _interface(s: FileSummary) -> tuple:
    """What of summary `s` other files' call edges may read (Note [A model
    kept across a body edit]): all of it but its defs' calls and receivers,
    and its lines."""
    return (s.module, s.error, tuple((local, target) for local, target, _line in s.imports), s.star_imports,
            tuple((name, ir) for name, _line, ir in s.assigns),
            tuple((d.qual, d.kind, d.bases, tuple(map(_deco, d.decorators)), d.attrs, d.returns) for d in s.defs),
            tuple(dataclasses.replace(e, line=0) for e in s.entries),
            tuple(callee for callee, _line in s.module_calls),
            tuple((_deco(deco), ir) for deco, ir in s.decorated_calls), tuple(map(_deco, s.module_registrations)))


def _deco(d) -> tuple:
    return d.target, d.args, d.kwargs, d.called


# the last NativeOps of each native_functions.yaml, by its path and content:
# the python and tests layers of one process, and a watcher's updates, share
# it (Note [One parse of a YAML per process] in extractors/ops_yaml.py); read only
_NATIVE: dict[str, tuple[str, NativeOps]] = {}


def _native(root: Path):
    """`load_native(root)`, kept by the YAML's path and content: a watcher's
    update after a .py edit, or the tests layer after the python layer,
    builds it no more."""
    from extractors.ops import find_inputs

    layout = find_inputs(root)
    if layout is None:
        return load_native(root)
    path = root / layout.native
    digest = hashlib.blake2b(path.read_bytes(), digest_size=20).hexdigest()
    hit = _NATIVE.get(str(path))
    if hit is None or hit[0] != digest:
        hit = remember(_NATIVE, str(path), (digest, load_native(root)), KEPT_PARSES)
    return hit[1]


def extract(ctx: ExtractContext, sink: Sink) -> None:
    """Write the python layer's rows for `ctx.root`: as deltas from the
    last run's (Note [Layer deltas]) when a watcher kept them (Note [Layer
    memo]; a body edit changes a few hundred of 120,000), else in full."""
    with paused_gc():
        model, _ = load_model(ctx, sink, ctx.dirs or TOPS)
        rows = RowLists()
        _defs(model, rows, ctx.memo)
        _calls_and_binds(model, rows, ctx.memo)
        _apis(model, rows, ctx.memo)
        _classes(model, rows, ctx.memo)
        _registrations(model, rows)
        _module_aliases(model, rows)
        now = rows.distinct()
        kept = ctx.memo.get(ROWS) if ctx.memo is not None else None
        generation = emit(ctx, sink, now, kept)
        if ctx.memo is not None:
            ctx.memo[ROWS] = (generation, now)


# the layer memo's key of the last run's rows, with their generation
ROWS = "rows"
# Note [Rows kept by what they are made of]: a watcher's update after a
# .py body edit made every row again, from a model that kept all but the
# edited callers' edges (Note [A model kept across a body edit]): a third
# of its 0.5 s layer run renamed and built rows the last run had built
# from the same objects. So the memo keeps, by what made them, the rows
# of a summary's definitions (the summary: kept as the same object while
# its file is, Note [Summaries kept in the process]), of a caller's edges
# (the list of them: the same object when the model adopted it), of a
# summary's classes (read through the model's index of bases and roots:
# theirs while the interface is the last one's, `adopted`), of the
# YAML's leaves (the NativeOps), of a summary's public names, and of an
# API's ops (the answer `api_ops` gave: the same dict when adopted), and
# takes them where that is the same object. The rows are the same either
# way; only their building is skipped (the layer's rows after a .py body
# edit: 0.53 -> 0.35 s).
DEF_ROWS, CALL_ROWS, CLASS_ROWS = "def rows", "call rows", "class rows"
LEAF_ROWS, API_NAMES, API_ROWS = "leaf rows", "api names", "api rows"


def _kept_rows(memo: dict | None, key: str, fresh: bool = False) -> tuple[dict, dict]:
    """(the rows the last run kept under `key`, where this run keeps its
    own); none kept when `fresh` or without a memo (Note [Rows kept by what
    they are made of])."""
    if memo is None:
        return {}, {}
    last = {} if fresh else memo.get(key, {})
    memo[key] = {}
    return last, memo[key]


def _defs(model: Model, sink: Sink, memo: dict | None = None) -> None:
    last, now = _kept_rows(memo, DEF_ROWS)
    for s in model.summaries:
        hit = last.get(id(s))
        if hit is None or hit[0] is not s:
            hit = (s, [(rename(f"{s.module}.{d.qual}"), d.kind, s.file, d.line) for d in s.defs])
        now[id(s)] = hit
        for row in hit[1]:
            sink.add("py_def", *row)
    for name, (_targets, file, line) in model.aliases.items():
        if model.edges(name):  # gelu = _add_docstr(torch._C._nn.gelu, ...): a name users call
            sink.add("py_def", rename(name), "alias", file, line)


def _calls_and_binds(model: Model, sink: Sink, memo: dict | None = None) -> None:
    last, now = _kept_rows(memo, CALL_ROWS)
    add_call, add_bind = _adder(sink, "py_calls"), _adder(sink, "binds")
    seen: set[tuple[str, str]] = set()
    for caller in model.callers():
        edges = model.edges(caller)
        hit = last.get(caller)
        if hit is None or hit[0] is not edges:
            hit = (edges, _edge_rows(caller, edges, caller in model.aliases))
        now[caller] = hit
        for key, call, bind in hit[1]:
            if key in seen:
                continue
            seen.add(key)
            if call is not None:
                add_call(call)
            if bind is not None:
                add_bind(bind)


def _adder(sink: Sink, relation: str):
    """A function taking one row of `relation` for `sink`: a RowLists's
    list's append, without a call of `add` a row."""
    if isinstance(sink, RowLists):
        return sink.setdefault(relation, []).append
    return lambda row: sink.add(relation, *row)


def _edge_rows(caller: str, edges: list, is_alias: bool) -> list[tuple[tuple[str, str], tuple | None, tuple | None]]:
    """((public caller, callee), its py_calls row, its binds row) of each of
    a caller's edges (None: none)."""
    src, out = rename(caller), []
    for e in edges:
        dst = rename(e.callee)
        if is_alias:
            out.append(((src, dst), None, (src, dst, "alias", e.file, e.line)))
        elif e.kind == "leaf" and dst.startswith(("torch._C.", "torch.ops.")):
            out.append(((src, dst), (src, dst, e.file, e.line), (src, dst, "wrapper", e.file, e.line)))
        else:
            out.append(((src, dst), (src, dst, e.file, e.line), None))
    return out


def _apis(model: Model, sink: Sink, memo: dict | None = None) -> None:
    native, add = model.native, _adder(sink, "py_api")
    leaves = memo.get(LEAF_ROWS) if memo is not None else None
    if leaves is None or leaves[0] is not native or leaves[1] != model.extension:
        leaves = (native, model.extension, [
            (leaf, op, native.leaf_how(leaf), native.file, native.ops[op].line) for leaf, ops in native.leaves.items()
            if not (leaf.startswith(_PUBLIC_LEAF_SKIP) or model.extension)  # an extension's torch has them
            for op in ops])
        if memo is not None:
            memo[LEAF_ROWS] = leaves
    for row in leaves[2]:
        add(row)
    last, now = _kept_rows(memo, API_NAMES)
    apis = []
    for s in model.summaries:
        hit = last.get(id(s))
        if hit is None or hit[0] is not s:
            hit = (s, [(rename(api), api) for api in model.public_defs(s)])
        now[id(s)] = hit
        apis.extend(hit[1])
    apis.extend((rename(api), api) for api in model.public_aliases())
    last, now = _kept_rows(memo, API_ROWS)
    done: set[tuple[str, str]] = set()  # a def written several times (@overload stubs) is one API
    for public, internal in apis + list(model.public_reexports()):
        if (public, internal) in done:
            continue
        done.add((public, internal))
        ops = model.api_ops(internal)
        hit = last.get((public, internal))
        if hit is None or hit[0] is not ops:
            hit = (ops, [(public, op, how, file, line) for op, (how, file, line) in sorted(ops.items())])
        now[public, internal] = hit
        for row in hit[1]:
            add(row)


def _classes(model: Model, sink: Sink, memo: dict | None = None) -> None:
    last, now = _kept_rows(memo, CLASS_ROWS, fresh=model.adopted is None)
    roots = model.roots()
    for s in model.summaries:
        hit = last.get(id(s))
        if hit is None or hit[0] is not s:
            hit = (s, _class_rows(model, s, roots))
        now[id(s)] = hit
        for rel, row in hit[1]:
            sink.add(rel, *row)


def _class_rows(model: Model, s: FileSummary, roots: dict[str, str]) -> list[tuple[str, tuple]]:
    out = []
    for d in s.defs:
        if d.kind != "class":
            continue
        name = f"{s.module}.{d.qual}"
        for base in model.idx.bases(name):
            out.append(("class_base", (rename(name), rename(base), s.file, d.line)))
        root = roots.get(name)
        if root in MODULE_ROOTS:
            out.append(("module_class", (rename(name), _category(name, root), s.file, d.line)))
    return out


def _category(name: str, root: str) -> str:
    """nn (torch.nn.*), nn_other (Module subclasses elsewhere), optim, lr_scheduler."""
    cat = MODULE_ROOTS[root]
    if cat == "nn" and not name.startswith("torch.nn."):
        return "nn_other"
    return cat


def _registrations(model: Model, sink: Sink) -> None:
    seen: set[tuple] = set()
    for registry, op, py, file, line in model.registrations():
        rel = "decomp" if registry in DECOMP_REGISTRARS or registry in REF_MAKERS else "py_op_impl"
        key = (rel, op, py, registry)
        if key in seen:
            continue
        seen.add(key)
        if rel == "decomp":
            sink.add("decomp", op, py, file, line)
        else:
            sink.add("py_op_impl", py, op, registry, file, line)


# Note [Module aliases]: people write PyTorch names the way PyTorch's own code
# does: `F.gelu`, `nn.Linear`, `aten.add.Tensor`. Which module a short name
# means is read off torch/ itself: every import or module-level assignment
# that binds a name to a module of the tree (or an op namespace torch.ops.X)
# under another name is a py_alias row, counted per file. The query resolver
# (torchtalk/query/resolve.py) expands a name's first component to the module
# most files bind it to (`F`: torch.nn.functional in 85 files, not
# torch.optim._functional in 8).


def _module_aliases(model: Model, sink: Sink) -> None:
    """One py_alias row per (alias, module): how many files of torch/ bind it."""
    modules = {s.module for s in model.summaries}
    found: dict[tuple[str, str], list] = {}  # (alias, module) -> [files, file, line]
    for s in sorted(model.summaries, key=lambda s: s.file):
        if not s.file.startswith(model.edge_prefix):
            continue
        binds = list(s.imports) + [(n, ir[1], ln) for n, ln, ir in s.assigns if ir and ir[0] == "ref"]
        mine: dict[tuple[str, str], int] = {}
        for local, target, line in binds:
            if local != target and _module_like(target, modules):
                mine.setdefault((local, target), line)
        for key, line in mine.items():
            entry = found.setdefault(key, [0, s.file, line])
            entry[0] += 1
    for (alias, module), (files, file, line) in sorted(found.items()):
        sink.add("py_alias", alias, module, files, file, line)


def _module_like(target: str, modules: set[str]) -> bool:
    """A module of the tree, or an op namespace object `torch.ops.<ns>`."""
    parts = target.split(".")
    return target in modules or (len(parts) == 3 and parts[:2] == ["torch", "ops"])
