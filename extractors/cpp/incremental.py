"""Resolving a tree again after an edit: only the files the edit touches.

Note [Incremental resolution]: a file's rows depend on its own facts and on
the tree's interface: what resolution reads from other files (definitions,
return types, classes, stubs, inline namespaces, aliases, includes, the
overloads' signatures; not the calls), and the op names of
native_functions.yaml (Note [ATen API calls]). The last run keeps, per file,
its content digest, its rows and `Parts`: digests of its share of the
interface, of the Index's input and of what Note [Who can call ops] reads.
A new run compares digests file by file, so an edit reads (and scans) the
changed files' FileFacts only, and their last version (still in the cache,
by the last run's digest) to see which definitions changed:
  - the interface unchanged (an edit inside function bodies): a file whose
    content digest is unchanged keeps its rows; only changed files are
    resolved again, against the last run's Index (pickled, by the digest of
    its input) and Overloads;
  - only definitions changed (a function added, removed or retyped;
    classes, stubs, inline namespaces as they were): an
    unchanged file keeps its rows unless it mentions the short name of a
    definition that changed (the changed files' definitions before and after;
    every lookup goes through short names, so the others resolve as before),
    or defines or mentions a name whose overloads changed (its defs are
    renamed, Note [Overload ids]); the last Index and Overloads are patched
    (Note [Index patched] in resolve.py), or built again from every file;
  - anything else: every file is resolved again.
An edit of native_functions.yaml changes the ATen names of a few ops
(`changed_ops`: an op added, its variants or returns changed). Resolution
looks an op up by a name the call spells (`at::X_out`, `t.X()`,
`at::_ops::X_overload::call`): the name itself or a part of it before a
`_`. So a file keeps its rows (with the interface as above) unless it
mentions a changed op's name, alone or followed by `_`. A change to the ops
C++ operators call (`a + b`: add) or to a structured kernel's class reads
no name a file spells: every file is resolved again.
Helper launches, which follow call edges across files, are always redone.
The result equals resolving the tree from scratch (tests/test_incremental.py).

Example:
    >>> rows, stats, state = resolve_tree(TreeFacts.of([scan_file("a.cpp", b"void f(){}")]))
    >>> rows["func"][0][:2]
    ('f', 'f')
"""

from __future__ import annotations

import hashlib
import pickle
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from pathlib import Path

from extractors.cpp.aten import EMPTY, AtenNames, changed_ops
from extractors.cpp.overloads import Overloads
from extractors.cpp.scan import FileFacts

FILES_FORMAT = 10  # the per-file tuple: (digest, rows, stats, helper sites, mentions, own); Parts; the ATen names; `distinct`


@dataclass(frozen=True)
class Parts:
    """Digests of what one file contributes to the tree-wide inputs of
    resolution (Note [Incremental resolution]), from its unrenamed FileFacts."""

    digest: str | None  # the file's content digest (its cache key; None: unknown, never reused)
    iface: bytes  # everything resolution reads from it
    shape: bytes  # the interface without definitions and return types
    index: bytes  # what the Index reads (lines aside)
    visible: bytes  # what Note [Who can call ops] reads


def _sha(obj) -> bytes:
    return hashlib.sha1(pickle.dumps(obj, 4)).digest()


def parts_of(f: FileFacts, digest: str | None) -> Parts:
    """The Parts of `f` (unrenamed: the overloads are a function of every
    file's signatures, which the digests hold)."""
    from extractors.cpp.resolve import TENSOR_CLASSES

    stubs = sorted({s for s, _line in (*f.stub_decls, *f.stub_defines)})
    return Parts(
        digest,
        _sha((f.file, f.defs, f.returns, f.classes, f.stub_decls, f.stub_defines, f.inline_ns, f.aliases,
              f.tparam_uses, f.includes, f.sigs)),
        _sha((f.file, f.classes, stubs, f.inline_ns, f.aliases, f.includes)),
        _sha((f.file, [(q, n, fl) for q, n, _line, fl in f.defs], f.returns, f.classes, stubs, f.inline_ns,
              f.aliases, f.tparam_uses, f.includes, f.sigs)),
        _sha((f.file, f.includes, [c for c, _i in f.classes if c in TENSOR_CLASSES])))


def defs_of(f: FileFacts | None) -> frozenset:
    """What resolution reads of each definition of `f`: name, flags, return
    type, whether it is a template (Note [Typed overloads]), and what a
    template's body calls on its parameters (Note [Functor arguments])."""
    if f is None:
        return frozenset()
    sigs = f.sigs or ((),) * len(f.defs)
    return frozenset([(d[0], d[1], d[3], r, s[3:]) for d, r, s in zip(f.defs, f.returns, sigs, strict=True)]
                     + [(f.defs[i][0], f.defs[i][1], -1, (p, n)) for i, p, n in f.tparam_uses])


def _ovsigs(f: FileFacts | None) -> tuple:
    """What Overloads.of reads of `f`: (qual, signature) of its defs with one."""
    if f is None or not f.sigs:
        return ()
    return tuple((d[0], sig) for d, sig in zip(f.defs, f.sigs, strict=True) if sig)


class TreeFacts:
    """The FileFacts of a tree's files, read (or scanned) on first use: an
    edit inside a body reads the changed files' only. `files`: in order;
    `load(rels)` -> {rel: FileFacts} of those it could read or scan;
    `cached(digest)`: the FileFacts a content digest had (the last run's
    version of a changed file), or None."""

    def __init__(self, files: list[str], load: Callable[[list[str]], dict[str, FileFacts]] | None = None,
                 facts: Iterable[FileFacts] = (), cached: Callable[[str], FileFacts | None] | None = None) -> None:
        self.files = files
        self._load = load
        self.cached = cached or (lambda _digest: None)
        self._have: dict[str, FileFacts] = {f.file: f for f in facts}
        self._tried: set[str] = set(self._have)

    @classmethod
    def of(cls, facts: list[FileFacts]) -> TreeFacts:
        return cls([f.file for f in facts], facts=facts)

    def load(self, rels: Iterable[str]) -> None:
        todo = [r for r in rels if r not in self._tried]
        if todo and self._load is not None:
            self._have.update(self._load(todo))
        self._tried.update(todo)

    def get(self, rel: str) -> FileFacts | None:
        self.load([rel])
        return self._have.get(rel)

    def all(self) -> list[FileFacts]:
        self.load(self.files)
        return [self._have[r] for r in self.files if r in self._have]


class _Changes:
    """The files whose content changed since the last run: their FileFacts
    then (from the cache, by the last run's digest) and now."""

    def __init__(self, tree: TreeFacts, old: dict[str, Parts], parts: dict[str, Parts]) -> None:
        self.rels = [r for r in old.keys() | parts.keys() if old.get(r) is not parts.get(r)]
        self.before = {r: tree.cached(old[r].digest) if r in old and old[r].digest else None for r in self.rels}
        self.after = {r: tree.get(r) if r in parts else None for r in self.rels}
        self.known = all(self.before[r] is not None for r in self.rels if r in old)  # else: resolve all

    def same_overloads(self) -> bool:
        return self.known and all(_ovsigs(self.before[r]) == _ovsigs(self.after[r]) for r in self.rels)

    def names(self) -> set[str]:
        """The short names of the definitions that changed (a superset: the
        changed files' definitions before and after, set apart)."""
        out: set[str] = set()
        for r in self.rels:
            diff = defs_of(self.before[r]) ^ defs_of(self.after[r])
            out |= {d[1] for d in diff} | {d[0].rpartition("::")[2] for d in diff}
        return out


def rows_of(files: dict[str, tuple], state: dict) -> dict[str, list[tuple]]:
    """The tree's rows as `resolve_tree` returned them with `state`, from
    its per-file results `files` (state["files"]) and the walks, tables and
    relations made distinct (`distinct`) kept in it: what a run that reads
    the state back gets (Note [State by file] in cache.py)."""
    from extractors.cpp import resolve as R

    rows, _stats = _merged(files)
    R._helper_launches([s for v in files.values() for s in v[3]], rows, state["helpers"])
    for rel, rs in state["overload_rows"].items():
        rows[rel].extend(rs)
    if rows.get("calls_op"):
        rows["calls_op"] = [r for r in rows["calls_op"] if r[2] in state["visible"][1]]
    for rel in state["distinct"]:
        rows[rel] = list(dict.fromkeys(rows[rel]))
    return dict(rows)


def state_to_plain(state: dict) -> dict:
    """`resolve_tree`'s state in plain values (for marshal: cache.write_parts)."""
    if state.get("format") != FILES_FORMAT:
        return {}
    return {**state, "parts": {r: (p.digest, p.iface, p.shape, p.index, p.visible) for r, p in state["parts"].items()},
            "overloads": state["overloads"].table, "aten": tuple(getattr(state["aten"], f.name) for f in fields(AtenNames))}


def state_from_plain(plain: dict) -> dict:
    """The state `state_to_plain` gave."""
    if plain.get("format") != FILES_FORMAT:
        return {}
    return {**plain, "parts": {r: Parts(*p) for r, p in plain["parts"].items()},
            "overloads": Overloads(plain["overloads"]), "aten": AtenNames(*plain["aten"])}


def _combined(salt: str, parts: Iterable[bytes]) -> str:
    h = hashlib.sha1(salt.encode())
    for p in parts:
        h.update(p)
    return h.hexdigest()


def _file_parts(tree: TreeFacts, digests: dict[str, str] | None, old: dict[str, Parts]) -> dict[str, Parts]:
    """rel -> Parts of every file with facts, in the tree's order: the last
    run's where the content digest is the same, else from its FileFacts."""
    def reusable(rel: str) -> bool:
        p = old.get(rel)
        return p is not None and p.digest is not None and digests is not None and digests.get(rel) == p.digest

    tree.load([rel for rel in tree.files if not reusable(rel)])
    parts: dict[str, Parts] = {}
    for rel in tree.files:
        if reusable(rel):
            parts[rel] = old[rel]
        elif (f := tree.get(rel)) is not None:
            parts[rel] = parts_of(f, (digests or {}).get(rel))
    return parts


def _kept_files(prev: dict, tree: TreeFacts, changes: _Changes, iface: str, shape: str, ov: Overloads,
                aten: AtenNames) -> dict:
    """The last run's per-file results an unchanged file may keep (Note
    [Incremental resolution])."""
    ops = changed_ops(prev["aten"], aten)
    if ops is None:
        return {}
    if prev.get("iface") == iface:
        return _not_mentioning(prev["files"], ops)
    if prev.get("shape") != shape or not changes.known:
        return {}
    names = changes.names()
    old_ov: Overloads = prev["overloads"]
    moved = {q for q in old_ov.table.keys() | ov.table.keys() if old_ov.table.get(q) != ov.table.get(q)}
    names |= {q.rpartition("::")[2] for q in moved}
    defines = set()  # the files that define a name whose overloads changed: their defs are renamed
    if moved:
        defines = {f.file for f in tree.all() if any(d[0] in moved for d in f.defs)}
    kept = {k: v for k, v in prev["files"].items() if not (v[4] & names) and k not in defines}
    return _not_mentioning(kept, ops)


def _not_mentioning(files: dict, ops: frozenset[str]) -> dict:
    """The per-file results of `files` that mention none of `ops`, alone or
    followed by `_` (Note [Incremental resolution])."""
    if not ops:
        return files
    heads = tuple(f"{op}_" for op in ops)
    return {k: v for k, v in files.items()
            if v[4].isdisjoint(ops) and not any(m.startswith(heads) for m in v[4])}


def resolve_tree(tree: TreeFacts, digests: dict[str, str] | None = None, previous: dict | None = None,
                 aten: AtenNames = EMPTY, memo: dict | None = None, index_cache: Path | None = None,
                 later: Callable[[Callable[[], None]], None] | None = None,
                 file_columns: dict[str, int] | None = None,
                 ) -> tuple[dict[str, list[tuple]], dict[str, int], dict]:
    """All rows of the cpp layer (relation -> distinct rows, in the files'
    order and sorted within a file), counts for the report, and the state to
    pass as `previous` next time (Note [Incremental resolution]). `later`
    takes the write of a new Index to `index_cache` (Note [Cache written
    after the update] in extractors/base.py); default: written now.
    `file_columns`: relation -> its column `file` (Note [Rows of their own
    file]); without them, every relation's rows are made distinct."""
    from extractors.cpp import resolve as R

    prev = previous if previous and previous.get("format") == FILES_FORMAT else None
    parts = _file_parts(tree, digests, prev["parts"] if prev else {})
    order = list(parts)
    changes = _Changes(tree, prev["parts"], parts) if prev else None
    iface = _combined(R.RESOLVE_VERSION, (parts[r].iface for r in order))
    shape = _combined(R.RESOLVE_VERSION, (parts[r].shape for r in order))
    key = _index_key(parts[r] for r in order)
    last = None  # Note [Index patched]: the last run's Index, when only definitions changed
    if changes is not None and changes.known and prev.get("shape") == shape and key != _index_key(prev["parts"].values()):
        last = _last_index(prev, memo, index_cache)
    if changes and changes.same_overloads():
        ov = prev["overloads"]
    elif last is not None:
        ov = prev["overloads"].patched(
            [f for f in changes.before.values() if f is not None], [f for f in changes.after.values() if f is not None],
            lambda q: _defined_in(last, changes, q), lambda rels: _loaded(tree, rels))
    else:
        ov = Overloads.of(tree.all())
    kept = _kept_files(prev, tree, changes, iface, shape, ov, aten) if prev else {}
    todo = [r for r in order if not ((hit := kept.get(r)) is not None and hit[0] is not None
                                     and hit[0] == (digests or {}).get(r))]
    tree.load(todo)
    patch = None
    if last is not None:
        def patch(ix: R.Index) -> None:
            ix.patch([prev["overloads"].rename(f) for f in changes.before.values() if f is not None],
                     [ov.rename(f) for f in changes.after.values() if f is not None],
                     lambda rels: [ov.rename(f) for f in _loaded(tree, rels)])
    ix = _index(tree, ov, key, memo, index_cache, later, (last, patch) if patch is not None else None)
    rv = R.Resolver(ix)
    rv.aten, rv.ov = aten, ov
    files: dict[str, tuple] = {}
    for rel in order:
        if rel in todo:
            f = ov.rename(tree.get(rel))
            frows, fstats, fsites = R._file_rows(f, rv)
            # distinct and sorted per file (a macro expanded twice on one line repeats its rows)
            frows = {r: sorted(set(rs)) for r, rs in frows.items()}
            files[rel] = ((digests or {}).get(rel), frows, fstats, fsites, f.mentions, _own(rel, frows, file_columns))
        else:
            files[rel] = kept[rel]
    rows, stats = _merged(files)
    before = {rel: len(rs) for rel, rs in rows.items()}
    rv.use_file(None)
    helpers = R._helper_launches([s for v in files.values() for s in v[3]], rows,
                                 _helpers_kept(prev, files, todo) if prev else None)
    if prev and ov is prev["overloads"] and "overload_rows" in prev:
        overload_rows = prev["overload_rows"]
    else:
        overload_rows = defaultdict(list)
        R._overload_rows(ov, overload_rows)
    for rel, rs in overload_rows.items():
        rows[rel].extend(rs)
    extra = {rel for rel, rs in rows.items() if len(rs) != before.get(rel, 0)}  # rows not of one file
    visible = prev.get("visible") if prev else None
    if rows.get("calls_op"):
        key = _combined("", (parts[r].visible for r in order))
        if not visible or visible[0] != key:
            visible = (key, R.aten_visible(tree.all()))
        rows["calls_op"] = [r for r in rows["calls_op"] if r[2] in visible[1]]
    own = file_columns is not None and all(v[5] for v in files.values())
    distinct = [rel for rel in rows if not own or rel in extra]
    for rel in distinct:  # distinct, in the files' order (a row of two files once): no sort of the tree's rows
        rows[rel] = list(dict.fromkeys(rows[rel]))
    for rel, rs in rows.items():
        stats[rel] = len(rs)
    return dict(rows), dict(stats), {"format": FILES_FORMAT, "iface": iface, "shape": shape, "parts": parts,
                                     "overloads": ov, "overload_rows": dict(overload_rows), "files": files,
                                     "visible": visible, "aten": aten, "helpers": helpers, "distinct": distinct}


# Note [Helper launches kept]: the kernels a launch helper reaches (Note
# [Helper launches] in resolve.py) are read from the CUDA functions
# (`func` rows of lang cuda), the calls of those functions and of the
# helpers, and the `launches` rows; walking them costs 40 ms over the
# tree's 230,000 calls. An update whose changed files, before and after,
# hold none of those rows (no CUDA function, no launch, no call by a
# function the last walks read) leaves every walk as it was, so the last
# run's helper -> kernels is used as it is: an edit of a .cpp file that
# defines no CUDA function walks nothing. A helper the last run did not
# walk from is walked, with the rest, anew.


def _helpers_kept(prev: dict, files: dict[str, tuple], todo: list[str]) -> tuple | None:
    """The last run's (walked functions, helper -> kernels) when the files
    of `todo` and those gone since, before and after, hold no row the walks
    read (Note [Helper launches kept]); else None."""
    helpers = prev.get("helpers")
    if helpers is None:
        return None
    walked = helpers[0]
    old = prev["files"]
    entries = [old.get(r) for r in todo] + [files[r] for r in todo] + [v for r, v in old.items() if r not in files]
    for entry in entries:
        if entry is None:
            continue
        frows = entry[1]
        if (frows.get("launches") or any(r[4] == "cuda" for r in frows.get("func", ()))
                or any(r[0] in walked for r in frows.get("calls", ()))):
            return None
    return helpers


# Note [Rows of their own file]: the tree's rows of a relation are its
# files' rows, each file's distinct, then the rows of the helper launches
# and the overload table; made distinct as a whole, a row two files give
# is written once. Hashing every row for that was 55 ms of each update
# (calls: 230,420 rows, 39 ms). But a row that holds, in its column
# `file`, the file it came from is of that file only: two files' rows are
# never equal then. So a file whose every row does (`_own`, checked as its
# rows are resolved, kept with them) needs no such check, and when every
# file's do (every file of the 2.6.0 tree), only the relations that got
# other rows are made distinct.
def _own(rel: str, frows: dict[str, list[tuple]], file_columns: dict[str, int] | None) -> bool:
    """Whether every row of file `rel` (`frows`) holds `rel` in its column `file`."""
    if file_columns is None:
        return False
    for r, rs in frows.items():
        col = file_columns.get(r)
        if col is None or any(row[col] != rel for row in rs):
            return False
    return True


def _index_key(parts: Iterable[Parts]) -> str:
    """The key of the Index of the files of `parts`, in the tree's order (as `_index` takes it)."""
    from extractors.cpp import resolve as R

    return _combined(R.RESOLVE_VERSION, (p.index for p in parts))[:24]


def _last_index(prev: dict, memo: dict | None, cache: Path | None):
    """The last run's Index (`prev`: its state): the one in `memo`, or
    pickled in `cache`, or None."""
    from extractors.cpp import resolve as R

    key = _index_key(prev["parts"].values())
    hit = memo.get("index") if memo is not None else None
    ix = hit[1] if hit is not None and hit[0] == key else R._cached_index(cache, key) if cache is not None else None
    return ix if hasattr(ix, "_def_files") else None  # one an older version pickled is built again


def keep_last_index(prev: dict, memo: dict, cache: Path) -> None:
    """Keep the last run's Index (`prev`: its state) in `memo`, where a run
    after an edit looks for it first (Note [Warmed memo] in torchtalk/warm.py)."""
    ix = _last_index(prev, memo, cache)
    if ix is not None:
        memo["index"] = (_index_key(prev["parts"].values()), ix)


def _defined_in(ix, changes: _Changes, q: str) -> list[str]:
    """The files that define `q` now: those of the last run's Index `ix`
    but the changed files, and the changed files that define it now."""
    from extractors.cpp.resolve import _files

    out = [x for x in _files(ix._def_files.get(q)) if x not in changes.after]
    return out + [r for r, f in changes.after.items() if f is not None and any(d[0] == q for d in f.defs)]


def _loaded(tree: TreeFacts, rels: list[str]) -> list[FileFacts]:
    """The FileFacts of the tree files `rels` (those it has)."""
    tree.load(rels)
    return [f for f in map(tree.get, rels) if f is not None]


def _merged(files: dict[str, tuple]) -> tuple[dict[str, list[tuple]], dict[str, int]]:
    rows: dict[str, list[tuple]] = defaultdict(list)
    stats: dict[str, int] = defaultdict(int)
    for _digest, frows, fstats, _sites, _names, _own_rows in files.values():
        for rel, rs in frows.items():
            rows[rel].extend(rs)
        for k, v in fstats.items():
            stats[k] += v
    return rows, stats


def _index(tree: TreeFacts, ov: Overloads, key: str, memo: dict | None, cache: Path | None, later=None,
           patch: tuple | None = None):
    """The Index of the tree's renamed facts: the one in `memo` (a
    long-running caller's, Note [Layer memo]) or pickled in `cache`
    (`index-<key>.pkl`, the last one only) when built from the same input
    (`key`: the files' Parts.index, lines aside), else the last run's
    patched when `patch` = (that Index, what patches it) is given (Note
    [Index patched]), else a new one from every file. Resolving reads an
    Index, never changes it."""
    from extractors.cpp import resolve as R

    if memo is None and cache is None:
        return R.Index([ov.rename(f) for f in tree.all()])
    hit = memo.get("index") if memo is not None else None
    if hit is not None and hit[0] == key:
        return hit[1]
    ix = R._cached_index(cache, key) if cache is not None else None
    if ix is None:
        if patch is not None:
            if memo is not None:  # patched in place: never the last key's once it is
                memo.pop("index", None)
            ix = patch[0]
            patch[1](ix)
        else:  # Note [Lookup keys kept]
            ix = R.Index([ov.rename(f) for f in tree.all()], key=hit[1].key if hit is not None else None)
        if cache is not None:
            (later or (lambda write: write()))(lambda: R._keep_index(cache, key, ix))
    if memo is not None:
        memo["index"] = (key, ix)
    return ix
