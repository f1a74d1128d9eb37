"""`torchtalk index`: run the extractor layers and (re)build the tree's fact DB.

Note [Index steps]: for each chosen layer of extractors.layers.LAYERS, its input
fingerprint (extractor code + schema + sizes and mtimes of `inputs(root)`) is
compared with the one recorded in `<facts>/layers/<layer>/layer.json`.
Unchanged layers are carried over (their fact files hard-linked), changed ones
re-run through a `LayerSink` that checks every row against facts/schema.dl.
The union fact files and a fresh DuckDB file are built under temporary names
and swapped in at the end (DB first, with os.replace), so a failed or
interrupted index leaves the previous DB intact (one killed between the two
renames leaves the new DB and its facts dir under its temporary name, which
the next index puts in place). Workers die with the index (Note [Workers die
with their parent]). Nothing changed: nothing is
written at all (a no-op). Per-layer files keep every row's `file` column, so a
later per-file eviction (issue 9) can filter a layer's files instead of
re-running it.

Example:
    >>> report = index("~/pytorch", layers=["ops"])
    >>> report.layers[0].rows
    14089
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import json
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from torchtalk import freshness, store, update
from torchtalk.atomic import link_tree, replace_dir
from torchtalk.errors import InputError, did_you_mean
from torchtalk.nodes import number_nodes
from torchtalk.sink import LayerSink  # noqa: F401 - the index's Sink (tests reach it here)

Log = Callable[[str], None]


@dataclass(frozen=True)
class LayerReport:
    """What happened to one layer: "ran" or "carried" (unchanged)."""

    name: str
    action: str
    seconds: float
    rows: int
    warnings: int
    relations: dict[str, int] = field(default_factory=dict, compare=False)
    sink: LayerSink | None = field(default=None, compare=False, repr=False)  # of a run: its deltas


@dataclass(frozen=True)
class IndexReport:
    db: Path
    source: Path
    kind: str
    up_to_date: bool
    seconds: float
    layers: tuple[LayerReport, ...]
    notes: tuple[str, ...] = ()
    mode: str = "built"  # "built" (a new DB), "updated" (in place, Note [Update in place]), "current"

    def to_json(self) -> dict:
        return {
            "db": str(self.db), "source": str(self.source), "kind": self.kind,
            "up_to_date": self.up_to_date, "mode": self.mode, "seconds": round(self.seconds, 3),
            "layers": [
                {"layer": lr.name, "action": lr.action, "seconds": round(lr.seconds, 3),
                 "rows": lr.rows, "warnings": lr.warnings}
                for lr in self.layers
            ],
            "notes": list(self.notes),
        }


# ------------------------------------------------------------------ schema


@dataclass(frozen=True)
class Schema:
    """facts/schema.dl: relation -> ((column, type), ...), and the text's hash."""

    columns: dict[str, tuple[tuple[str, str], ...]]
    decls: dict
    digest: str


def load_schema(path: Path | None = None) -> Schema:
    """facts/schema.dl parsed; the parse is kept in the cache dir by the
    text's hash (textX costs more than the rest of a small update)."""
    import pickle

    from torchtalk.atomic import atomic_open

    path = path or store.SCHEMA_PATH
    data = path.read_bytes()
    digest = hashlib.sha1(data).hexdigest()
    cached = _schema_cache(digest)
    if cached is not None:
        try:
            with open(cached, "rb") as fh:
                return pickle.load(fh)
        except Exception:  # missing, or written by another version: parse again
            pass
    from torchtalk.datalog import parse_file

    program = parse_file(path)
    cols = {n: tuple((c.name, str(c.type)) for c in d.columns) for n, d in program.decls.items()}
    schema = Schema(cols, program.decls, digest)
    if cached is not None:
        with contextlib.suppress(OSError), atomic_open(cached) as fh:
            pickle.dump(schema, fh, protocol=pickle.HIGHEST_PROTOCOL)
    return schema


def _schema_cache(digest: str) -> Path | None:
    """Where the parse of a schema text with this digest is kept: keyed also
    by the AST and parser code it was made with."""
    from torchtalk.paths import cache_dir

    h = hashlib.sha1(digest.encode())
    for mod in ("ast.py", "parser.py", "grammar.tx"):
        h.update((Path(__file__).parent / "datalog" / mod).read_bytes())
    try:
        d = cache_dir() / "rules"
        d.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return d / f"schema-{h.hexdigest()[:20]}.pickle"


# ------------------------------------------------------------------ layers


def select_layers(src: store.Source, names: Iterable[str] | None, precise: bool):
    """The layers to run, in LAYERS order, and notes about skipped ones."""
    from extractors.layers import LAYERS

    known = {lr.name: lr for lr in LAYERS}
    wanted = None
    if names is not None:
        wanted = [n.strip() for n in names if n.strip()]
        if not wanted:
            raise InputError(f"no layer named (layers: {', '.join(known)})")
        for n in wanted:
            if n not in known:
                raise InputError(f"unknown layer {n!r} (layers: {', '.join(known)})", hint=did_you_mean(n, known))
        if precise and "precise" not in wanted:  # `--layers ops,cpp --precise` runs the three
            wanted.append("precise")
    chosen, notes = [], []
    for layer in LAYERS:
        if wanted is not None and layer.name not in wanted:
            continue
        if wanted is None and layer.optional and not (precise and layer.name == "precise"):
            continue
        if src.kind == "wheel" and layer.name != "ops" and wanted is None:
            # Note [Wheel sources]: a wheel has the ops YAML and torch/'s Python, no C++;
            # other layers run on it only when named (--layers ops,python)
            notes.append(f"{layer.name}: skipped (an installed wheel: name it in --layers to run it)")
            continue
        if importlib.util.find_spec(layer.module) is None:
            if wanted is not None:
                raise InputError(f"layer {layer.name!r}: module {layer.module} is not available")
            notes.append(f"{layer.name}: skipped (module {layer.module} not built yet)")
            continue
        chosen.append(layer)
    return chosen, notes


def code_files(module: str) -> list[Path]:
    """The source files of a layer module: the package's .py files, or the
    module plus its `<module>_*.py` siblings."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return []
    if spec.submodule_search_locations:
        return sorted(p for d in spec.submodule_search_locations for p in Path(d).rglob("*.py"))
    origin = Path(spec.origin)
    return [origin, *sorted(origin.parent.glob(f"{origin.stem}_*.py"))]


def input_stats(mod, root: Path, *args) -> list[tuple[str, int, int]]:
    """(path, size, mtime_ns) of each input file of a layer module, sorted
    (`args`: what else the module's `inputs` takes, an extension's dirs)."""
    out = []
    for p in sorted({os.fspath(p) for p in mod.inputs(root, *args)}):
        try:
            st = os.stat(p)
        except OSError:
            continue
        out.append((p, st.st_size, st.st_mtime_ns))
    return out


def layer_fingerprint(layer, mod, root: Path, schema: Schema,
                      stats: list[tuple[str, int, int]] | None = None) -> str:
    """sha1 over extractor code, schema text and sizes+mtimes of the layer's
    inputs (`stats`: input_stats, when already taken)."""
    return _fingerprint(code_digest(layer, schema), input_stats(mod, root) if stats is None else stats)


def _fingerprint(code: str, stats: list[tuple[str, int, int]]) -> str:
    h = hashlib.sha1(code.encode())
    for p, size, mtime in stats:
        h.update(f"{p}\0{size}\0{mtime}\n".encode())
    return h.hexdigest()


def code_digest(layer, schema: Schema) -> str:
    """sha1 over the layer's extractor code and its relations' declarations."""
    h = hashlib.sha1(layer_schema_digest(layer, schema).encode())
    for p in code_files(layer.module):
        h.update(p.read_bytes())
    return h.hexdigest()


def layer_schema_digest(layer, schema: Schema) -> str:
    """A hash of the `.decl`s of the relations `layer` writes: a schema change
    elsewhere does not make the layer re-run."""
    text = "\n".join(str(schema.decls[r]) if r in schema.decls else f"?{r}" for r in layer.relations)
    return hashlib.sha1(text.encode()).hexdigest()


def _kept_schema_digest(name: str, schema: Schema) -> str | None:
    from extractors.layers import LAYERS

    layer = next((lr for lr in LAYERS if lr.name == name), None)
    return layer_schema_digest(layer, schema) if layer else None


def read_layer_json(path: Path) -> dict | None:
    try:
        return json.loads((path / "layer.json").read_text())
    except (OSError, ValueError):
        return None


# ------------------------------------------------------------------ index


def index(
    source: str | Path,
    db: str | Path | None = None,
    layers: Iterable[str] | None = None,
    *,
    precise: bool = False,
    jobs: int | None = None,
    force: bool = False,
    log: Log | None = None,
    progress: bool = False,
    memo: dict | None = None,
    resume_gc: bool = True,
    later: list | None = None,
) -> IndexReport:
    """Index the tree at `source` into its fact DB (see Note [Index steps]).
    `resume_gc`: False leaves the cyclic GC paused after an update (Note
    [No GC in an update] in extractors/base.py). The layers' writes of their
    own caches run once the DB is in place (Note [Cache written after the
    update] in extractors/base.py): before this returns, or, given a list
    `later`, by the one call appended to it, for the caller to make.

    Example:
        >>> index("/work/src/pytorch-v2.6.0", layers=["ops"]).up_to_date
        False
    """
    t0 = time.perf_counter()
    log = log or (lambda _msg: None)
    src = store.resolve_source(source)
    db_path = Path(db).expanduser().absolute() if db is not None else store.default_db(src.root)
    if db_path.is_dir():
        raise InputError(f"--db names a directory: {db_path}", hint="give a file path, e.g. tree.duckdb")
    store.ensure_writable_dir(db_path.parent)
    schema = load_schema()
    chosen, notes = select_layers(src, layers, precise)
    for note in notes:
        log(note)
    pending: list = []
    with _locked(db_path):
        try:
            report = _index_locked(src, db_path, schema, chosen, notes, jobs, force, log, progress, t0,
                                   memo if memo is not None else {}, resume_gc, pending.append)
        except BaseException:
            pending.clear()  # the DB is as it was: so are the layers' caches
            raise
        if later is not None and memo is not None:  # Note [A copy made ahead]
            pending.append(lambda: _copy_ahead(db_path, memo))
        if later is None:
            _write_caches(pending, log)
    if later is not None and pending:
        later.append(lambda: _write_caches_locked(db_path, pending, log))
    return report


def _write_caches(pending: list, log: Log) -> None:
    """Run the layers' cache writes (Note [Cache written after the update]);
    one that fails is said, and leaves the layer's last cache."""
    for write in pending:
        try:
            write()
        except OSError as exc:
            log(f"a layer's cache was not written ({exc.strerror or exc}): its next run starts further back")
    pending.clear()


def _write_caches_locked(db_path: Path, pending: list, log: Log) -> None:
    with _locked(db_path):  # no index of the DB reads the caches meanwhile
        _write_caches(pending, log)


def _index_locked(src, db_path, schema, chosen, notes, jobs, force, log, progress, t0, memo,
                  resume_gc: bool = True, later=None) -> IndexReport:
    facts = store.facts_dir(db_path)
    _remove_stale(db_path, facts)
    prev = _previous_layers(db_path, facts, src.root)
    plans = []
    seen: dict[str, tuple[int, int]] = {}  # the files stat'ed for one layer's stamp, for the next's
    for layer in chosen:
        mod = importlib.import_module(layer.module)
        fp, stats = _stamp(layer, mod, schema, src, facts, prev, seen)
        old = prev.get(layer.name)
        rerun = force or old is None or old.get("input_fingerprint") != fp or _pending(old) > 0
        plans.append((layer, mod, (fp, stats), rerun))
    keep, dropped = [], False
    for name in prev:
        if name in {lr.name for lr in chosen}:
            continue
        if prev[name].get("schema_hash") != _kept_schema_digest(name, schema):
            notes.append(f"{name}: dropped (indexed with another facts/schema.dl; re-run with --layers {name})")
            log(notes[-1])
            dropped = True
            continue
        catch_up = _catching_up(name, schema, src, facts, prev)
        if catch_up is not None:
            plans.append(catch_up)
            continue
        keep.append(name)
    current, rules_current = (False, False) if any(p[3] for p in plans) or dropped else _db_current(
        db_path, schema, src)
    if current:
        reports = tuple(_carried(prev[p[0].name]) for p in plans)
        for lr in reports:
            log(f"{lr.name}: unchanged ({lr.rows:,} rows)")
        if not rules_current:
            log("rules changed since the last index: recomputing the stored relations")
            _refresh_derived(db_path, schema)
        return IndexReport(db_path, src.root, src.kind, True, time.perf_counter() - t0, reports, tuple(notes),
                           "current")
    from extractors.base import paused_gc

    # Note [No GC in an update] in extractors/base.py; in a build too: once the layers (which pause it
    # themselves) have run, storing the rule relations walked their rows in each collection (1.9 s of 7)
    with paused_gc(resume=resume_gc):
        if not force and not dropped and _can_update(db_path, facts, schema, src, plans, prev, keep, memo):
            reports, mode = _update(src, db_path, schema, plans, prev, keep, jobs, log, progress, memo,
                                    later), "updated"
        else:
            reports, mode = _build(src, db_path, schema, plans, prev, keep, jobs, log, progress, memo,
                                   later), "built"
    return IndexReport(db_path, src.root, src.kind, False, time.perf_counter() - t0, reports, tuple(notes), mode)


def _stamp(layer, mod, schema, src, facts: Path, prev: dict, seen: dict | None = None) -> tuple[str, dict]:
    """(input fingerprint, input stats) of `layer` now (`seen`: quick_stats')."""
    code = code_digest(layer, schema)
    # the inputs as recorded at the layer's last run, while no dir of them moved (Note [Stale index])
    stats = freshness.quick_stats(facts / "layers" / layer.name, code, seen) if layer.name in prev else None
    stats = input_stats(mod, src.root) if stats is None else stats
    return _fingerprint(code, stats), stats


def _pending(meta: dict | None) -> int:
    """How many TUs a compiler-tier run left to parse (precise_pending rows)."""
    return int(((meta or {}).get("rows") or {}).get("precise_pending", 0))


# Note [Compiler tier catching up]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# The compiler tier (layer "precise", libclang) takes minutes where the fast
# tier takes seconds, so an index run without --precise keeps it. But a kept
# layer whose inputs changed would keep the compiler's edges of an edited TU,
# and `precise_file` would hide the fast tier's new ones there: answers from
# code that no longer exists. So when the kept compiler tier's inputs
# changed, it re-runs with `cached_only` (ExtractContext): every TU whose
# per-TU cache entry is still current (same content, flags and includes)
# keeps the compiler's rows; the others are written as `precise_pending`,
# not as `precise_file`, so their calls are the fast tier's at once. A later
# `index --precise` (the MCP server runs it in the background) parses the
# pending TUs and clears them. `status` and the answers name pending TUs.
_CATCHING_UP = frozenset({"precise"})


def _catching_up(name: str, schema, src, facts: Path, prev: dict):
    """The plan that re-runs kept layer `name` from its cache alone, when
    its inputs changed (Note [Compiler tier catching up]); None to keep it."""
    from extractors.layers import LAYERS

    layer = next((lr for lr in LAYERS if lr.name == name), None)
    if name not in _CATCHING_UP or layer is None or importlib.util.find_spec(layer.module) is None:
        return None
    mod = importlib.import_module(layer.module)
    fp, stats = _stamp(layer, mod, schema, src, facts, prev)
    if prev[name].get("input_fingerprint") == fp:
        return None
    return (layer, mod, (fp, stats), CACHED_ONLY)


CACHED_ONLY = "cached-only"  # a plan's `rerun`: run the layer from its cache alone


def _extra(rerun, later=None) -> dict:
    """The ExtractContext fields a plan's `rerun` asks for, and where the
    layer hands its cache writes (Note [Cache written after the update])."""
    return {"cached_only": rerun == CACHED_ONLY, "later": later}


def _can_update(db_path, facts, schema, src, plans, prev, keep, memo: dict | None = None) -> bool:
    """Whether the DB can be updated in place (Note [Update in place]): it is
    current but for some layers' inputs, and holds the same layers. `memo`:
    a long-running caller's, where the DB this process wrote last is known
    to be (Note [The DB written last])."""
    from torchtalk.errors import StoreError

    if {p[0].name for p in plans} | set(keep) != set(prev):
        return False
    if memo is not None and memo.get(_WRITTEN) == _written_key(db_path, facts, schema, src):
        return True
    try:
        con = store.open_db(db_path)
    except StoreError:
        return False
    try:
        return update.updatable(con, facts, schema.digest, str(src.root))
    finally:
        con.close()


# the memo's key of the DB this process wrote last (Note [The DB written last])
_WRITTEN = "db-written"


def _written_key(db_path: Path, facts: Path, schema, src) -> tuple:
    """The DB file's identity, with what `update.updatable` reads of it and its facts dir."""
    from extractors.base import file_identity

    return file_identity(db_path), update.facts_id(facts), schema.digest, str(src.root), store.FORMAT


# Note [The DB written last]: `_can_update` opens the DB to read its meta
# (20-40 ms of a watcher's every update). The watcher's last update wrote
# that DB itself, and its meta is what `update.updatable` asks for; so an
# index run with a memo keeps, after its swap, the DB file's identity
# (inode, size, mtime: a file replaced or written since is another) and its
# facts dir's id, and the next run takes the DB as updatable while both are
# still those.


def _update(src, db_path, schema, plans, prev, keep, jobs, log, progress, memo, later=None) -> tuple[LayerReport, ...]:
    """Re-run the changed layers and apply what they changed to a copy of
    the DB, then swap it in (Note [Update in place])."""
    facts = store.facts_dir(db_path)
    tag = f"tmp-{os.getpid()}"
    tmp_facts = facts.with_name(f".{facts.name}.{tag}")
    tmp_db = db_path.with_name(f".{db_path.name}.{tag}")
    try:
        reports, deltas = [], {}
        with _Progress(progress) as bar:
            for layer, mod, fp, rerun in plans:
                out, old = tmp_facts / "layers" / layer.name, facts / "layers" / layer.name
                if rerun:
                    lr = _run_layer(src, db_path, schema, layer, mod, fp, out, jobs, bar, previous=old,
                                    memo=memo.setdefault(layer.name, {}), ctx_extra=_extra(rerun, later))
                    update.layer_deltas(lr.sink, old, out, deltas)
                    log(f"{lr.name}: {lr.rows:,} rows in {lr.seconds:.2f} s, {lr.warnings} warnings")
                else:
                    link_tree(old, out)
                    lr = _carried(prev[layer.name])
                reports.append(lr)
        update.carry_layers(facts, tmp_facts, keep)
        changed = update.changed_relations(deltas)
        for rel in schema.columns:  # the union files: rebuilt where changed, else linked
            if rel not in changed and (facts / f"{rel}.facts").is_file():
                os.link(facts / f"{rel}.facts", tmp_facts / f"{rel}.facts")
        _union(schema, tmp_facts, only=changed)
        new_id = uuid.uuid4().hex
        (tmp_facts / update.FACTS_ID).write_text(new_id)
        if not _take_copy(db_path, tmp_db, memo):  # Note [A copy made ahead]
            update.copy_db(db_path, tmp_db)
        layers = [m for d in sorted((tmp_facts / "layers").glob("*")) if (m := read_layer_json(d))]
        update.apply(tmp_db, src, schema, deltas, tmp_facts, new_id, layers, log)
        shutil.rmtree(tmp_facts / ".delta", ignore_errors=True)
        log(f"updated in place: {len(changed)} relations changed"
            + (f" ({', '.join(sorted(changed))})" if changed else ""))
        aside: list[Path] = []
        _swap(tmp_db, db_path, tmp_facts, facts, aside)
        memo[_WRITTEN] = _written_key(db_path, facts, schema, src)  # Note [The DB written last]
        if later is not None:  # Note [Old files removed later]
            later(lambda: _remove_paths(aside))
        else:
            _remove_paths(aside)
        return tuple(reports)
    except BaseException:
        _discard(tmp_db, tmp_facts)
        raise


# Note [A copy made ahead]: an update applies its rows to a copy of the DB
# (Note [Update in place]), and the checkpoint that ends it flushes that
# copy's 110 MB to the disk: of a .cpp body edit's update, the copy took
# 35 ms and the checkpoint 57-75 ms, 6-8 ms of it once the copy's pages
# were on the disk already (measured on the 2.6.0 DB). A watcher (a caller
# with a memo and `later`) makes the next update's copy after the line,
# with the layers' cache writes: it copies the DB it has just put in place
# to `.{db}.next-PID` and flushes it, under the index lock, and keeps the
# DB file's identity in the memo. The next update takes that copy by a
# rename while the DB is still that file; a DB another run replaced since
# is copied as before, and its stale copy removed. The copy costs the
# DB's size on the disk while the watcher runs; `release` (the watcher's
# end) removes it, and `_remove_stale` that of a process no longer there.
_COPY = "db-copy-ahead"


def _copy_ahead(db_path: Path, memo: dict) -> None:
    """Copy the DB for the next update, flushed (Note [A copy made ahead])."""
    from extractors.base import file_identity

    ident = file_identity(db_path)
    held = memo.get(_COPY)
    if held is not None and held[1] == ident and held[0].exists():
        return
    release(memo)
    if ident is None:
        return
    spare = db_path.with_name(f".{db_path.name}.next-{os.getpid()}")
    try:
        update.copy_db(db_path, spare)
        fd = os.open(spare, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        spare.unlink(missing_ok=True)
        return
    memo[_COPY] = (spare, ident)


def _take_copy(db_path: Path, tmp_db: Path, memo: dict) -> bool:
    """Whether the copy made ahead of the DB at `db_path`, still that file,
    is now `tmp_db` (Note [A copy made ahead]); a stale one is removed."""
    from extractors.base import file_identity

    held = memo.pop(_COPY, None)
    if held is None:
        return False
    if held[1] == file_identity(db_path):
        try:
            os.replace(held[0], tmp_db)
            return True
        except FileNotFoundError:  # removed meanwhile (a killed process's, to another index)
            return False
    held[0].unlink(missing_ok=True)
    return False


def release(memo: dict) -> None:
    """Remove the copy a watcher made ahead (Note [A copy made ahead]), at its end."""
    held = memo.pop(_COPY, None)
    if held is not None:
        held[0].unlink(missing_ok=True)


def _discard(tmp_db: Path, tmp_facts: Path) -> None:
    """Remove an unfinished build's temp DB (and its WAL) and facts dir."""
    shutil.rmtree(tmp_facts, ignore_errors=True)
    tmp_db.unlink(missing_ok=True)
    Path(str(tmp_db) + ".wal").unlink(missing_ok=True)


def _remove_stale(db_path: Path, facts: Path) -> None:
    """Temporary files of an index that was killed (we hold the lock, so no
    other index is writing them); one killed between the swap of its DB and
    that of its facts dir left the DB's facts dir under its temporary name:
    it is put in place first."""
    stale = sorted(db_path.parent.glob(f".{facts.name}.tmp-*"))
    if stale:
        want = _db_facts_id(db_path)
        match = next((d for d in stale if want is not None and update.facts_id(d) == want), None)
        if match is not None and update.facts_id(facts) != want:
            replace_dir(match, facts)
    for pattern in (f".{db_path.name}.tmp-*", f".{facts.name}.tmp-*", f".{facts.name}.old-*",
                    f".{db_path.name}.old-*",  # Note [Old files removed later]
                    f".{facts.name}.warm-*"):  # Note [Warmed memo] in torchtalk/warm.py
        _remove_paths(db_path.parent.glob(pattern))
    # Note [A copy made ahead]: a process's own is its next update's; another's, of one gone, is stale
    _remove_paths(p for p in db_path.parent.glob(f".{db_path.name}.next-*") if not _alive(p.name.rpartition("-")[2]))


def _alive(pid: str) -> bool:
    """Whether process `pid` (a file name's suffix) runs."""
    if not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True


def _db_facts_id(db_path: Path) -> str | None:
    """The id of the facts dir the DB at `db_path` was built with (None if it does not open)."""
    from torchtalk.errors import StoreError

    try:
        con = store.open_db(db_path)
    except StoreError:
        return None
    try:
        return store.read_meta(con).get(update.FACTS_ID)
    finally:
        con.close()


@contextlib.contextmanager
def _locked(db_path: Path):
    """One index at a time per DB (`<db>.lock`, flock): a second waits, and
    says on stderr for whom (the holder writes its pid in the lock file). A
    write that does not fit (a full disk) raises a one-line StoreError."""
    import fcntl
    import sys

    with open(db_path.with_name(db_path.name + ".lock"), "a+") as fh:  # "a+": the holder's pid is kept
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "?"
            print(f"torchtalk: waiting for the index of {db_path} held by pid {holder}", file=sys.stderr, flush=True)
            fcntl.flock(fh, fcntl.LOCK_EX)
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        try:
            yield
        except Exception as exc:
            full = store.disk_full(exc, db_path)
            if full is None:
                raise
            raise full from None
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)



def _previous_layers(db_path: Path, facts: Path, root: Path | None = None) -> dict[str, dict]:
    """layer.json of every layer of the current DB's facts dir (none without a
    DB, nor when its layers read another tree than `root`: their recorded
    inputs would stand for this tree's, Note [Stale index])."""
    if not db_path.is_file() or not (facts / "layers").is_dir():
        return {}
    if root is not None and freshness.recorded_root(facts) not in (None, str(root)):
        return {}
    out = {}
    for d in sorted((facts / "layers").iterdir()):
        meta = read_layer_json(d)
        if meta is not None:
            out[d.name] = meta
    return out


def _db_current(db_path: Path, schema: Schema, src: store.Source) -> tuple[bool, bool]:
    """(the DB exists, opens, and was built from this schema and source;
    and its stored relations are those of the rules/ library as it is now,
    Note [Derived at index time])."""
    from torchtalk.errors import StoreError
    from torchtalk.query.derived import current
    from torchtalk.query.library import load_library

    try:
        con = store.open_db(db_path)
    except StoreError:
        return False, False
    try:
        meta = store.read_meta(con)
        if not (meta.get("schema_hash") == schema.digest and meta.get("source") == str(src.root)
                and meta.get("format") == store.FORMAT):
            return False, False
        return True, current(con, load_library(user=False))
    finally:
        con.close()


def _refresh_derived(db_path: Path, schema: Schema) -> None:
    """Recompute the stored relations of an otherwise current DB, on a copy
    renamed over it (never a half-written DB)."""
    import duckdb

    tmp = db_path.with_name(f".{db_path.name}.tmp-{os.getpid()}")
    shutil.copyfile(db_path, tmp)
    try:
        con = duckdb.connect(str(tmp))
        try:
            from torchtalk.query.derived import SCHEMA

            con.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
            con.execute("DELETE FROM torchtalk_meta WHERE key = 'derived'")
            counts = con.execute("SELECT relation, rows FROM torchtalk_relations").fetchall()
            _query_aids(con, schema, counts)
            con.execute("checkpoint")
        finally:
            con.close()
        os.replace(tmp, db_path)
    finally:
        tmp.unlink(missing_ok=True)


def _carried(meta: dict) -> LayerReport:
    rels = meta.get("rows", {})
    return LayerReport(meta["layer"], "carried", meta.get("seconds", 0.0), sum(rels.values()),
                       len(meta.get("warnings", [])), dict(rels))


def _build(src, db_path, schema, plans, prev, keep, jobs, log, progress, memo, later=None) -> tuple[LayerReport, ...]:
    """Build facts dir and DB under temporary names, then swap them in."""
    facts = store.facts_dir(db_path)
    tag = f"tmp-{os.getpid()}"
    tmp_facts = facts.with_name(f".{facts.name}.{tag}")
    tmp_db = db_path.with_name(f".{db_path.name}.{tag}")
    ahead = _parse_ahead(src, db_path, plans, jobs)
    try:
        reports = []
        with _Progress(progress) as bar:
            for layer, mod, fp, rerun in plans:
                out = tmp_facts / "layers" / layer.name
                if hasattr(mod, "prefetch"):
                    ahead.stop()
                if rerun:
                    lr = _run_layer(src, db_path, schema, layer, mod, fp, out, jobs, bar,
                                    memo=memo.setdefault(layer.name, {}), ctx_extra=_extra(rerun, later))
                    log(f"{lr.name}: {lr.rows:,} rows in {lr.seconds:.2f} s, {lr.warnings} warnings")
                else:
                    link_tree(facts / "layers" / layer.name, out)
                    lr = _carried(prev[layer.name])
                    log(f"{lr.name}: unchanged ({lr.rows:,} rows)")
                reports.append(lr)
        for name in keep:
            link_tree(facts / "layers" / name, tmp_facts / "layers" / name)
        _union(schema, tmp_facts)
        (tmp_facts / update.FACTS_ID).write_text(uuid.uuid4().hex)
        _write_db(tmp_db, src, schema, tmp_facts, facts)
        _swap(tmp_db, db_path, tmp_facts, facts)
        memo[_WRITTEN] = _written_key(db_path, facts, schema, src)  # Note [The DB written last]
        return tuple(reports)
    except BaseException:
        _discard(tmp_db, tmp_facts)
        raise
    finally:
        ahead.stop()


# Note [Parsed ahead]: a build runs its layers one after the other, and
# while the cpp layer resolves (8 s of one core) or a layer builds its
# model, the second core is idle. A layer may offer `prefetch(ctx)`: work
# whose only product is its per-file cache (the python and tests layers'
# file summaries), which its run then reads instead of parsing. A build
# that runs such a layer after another, with jobs >= 2, starts a process
# (dying with the index, Note [Workers die with their parent]) that runs
# them, at the lowest CPU priority (nice 19: the scans' workers keep the
# cores they use), and stops it when the first of them starts its own run
# (SIGTERM: the file it was writing is not left, torchtalk/atomic.py), so
# no file is parsed twice at once.
class _Ahead:
    """The process parsing ahead for a build's later layers, or none."""

    def __init__(self, proc=None) -> None:
        self.proc = proc

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        self.proc.join(30)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()
        self.proc = None


def _parse_ahead(src, db_path: Path, plans, jobs) -> _Ahead:
    """Start the process of Note [Parsed ahead] for `plans`: for the layers
    that parse ahead and run, from the first that can on, when a layer before
    it runs and `jobs` leaves a core for it."""
    first = next((i for i, plan in enumerate(plans) if hasattr(plan[1], "prefetch")), len(plans))
    ahead = [(layer, mod) for layer, mod, _fp, rerun in plans[first:] if rerun and hasattr(mod, "prefetch")]
    if _jobs(jobs) < 2 or not ahead or not any(plan[3] for plan in plans[:first]):
        return _Ahead()
    import multiprocessing as mp

    from extractors.base import ExtractContext
    from extractors.workers import watched

    ctxs = [(mod.__name__, ExtractContext(root=src.root, cache_dir=_layer_cache(db_path, layer.name)))
            for layer, mod in ahead]
    proc = mp.get_context("fork").Process(target=watched, args=(os.getpid(), _ahead_child, ctxs), daemon=True)
    proc.start()
    return _Ahead(proc)


def _jobs(jobs: int | None) -> int:
    """The worker processes a layer may use: `jobs`, by default up to 4 cores."""
    return jobs or min(4, os.cpu_count() or 1)


def _layer_cache(db_path: Path, name: str) -> Path:
    """Layer `name`'s cache dir beside `db_path` (made, or a one-line StoreError)."""
    return store.ensure_writable_dir(db_path.with_name(db_path.stem + ".cache") / name)


def _ahead_child(ctxs) -> None:
    """In the process of Note [Parsed ahead]: each layer's `prefetch`."""
    import signal
    import sys

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # unwinds: a cache file half written is removed
    os.nice(19)
    for name, ctx in ctxs:
        try:
            importlib.import_module(name).prefetch(ctx)
        except Exception:  # noqa: BLE001 - a prefetch only saves the layer work: its run says what failed
            pass


def _run_layer(src, db_path, schema, layer, mod, stamp, out: Path, jobs, bar,
               previous: Path | None = None, memo: dict | None = None, ctx_extra: dict | None = None,
               generation: str | None = None) -> LayerReport:
    """Run `layer` into `out`; `stamp` = (input fingerprint, input_stats);
    with `previous` (its files in the current facts dir) the layer may write
    deltas from them (Note [Layer deltas]); `ctx_extra`: more fields of its
    ExtractContext (an extension's dirs and torch_root, torchtalk/extension.py);
    `generation`: that of the rows it writes, if they change (default: a new
    one; Note [Warmed memo] in torchtalk/warm.py names the DB's)."""
    from extractors.base import ExtractContext

    out.mkdir(parents=True)
    cache = _layer_cache(db_path, layer.name)
    prev_meta = (read_layer_json(previous) or {}) if previous is not None else {}
    prev_gen = prev_meta.get("generation")
    fp, stats = stamp
    ctx = ExtractContext(root=src.root, cache_dir=cache, jobs=_jobs(jobs),
                         previous=prev_gen, generation=generation or uuid.uuid4().hex, memo=memo, stats=tuple(stats),
                         **(ctx_extra or {}))
    sink = LayerSink(layer, schema, out, bar.task(layer.name), previous=previous if prev_gen else None,
                     memo=memo, previous_counts=prev_meta.get("rows"))
    freshness.write_inputs(out, src.root, code_digest(layer, schema), stats)
    t = time.perf_counter()
    try:
        mod.extract(ctx, sink)
    except Exception as exc:
        exc.add_note(f"while indexing layer {layer.name!r}")
        raise
    finally:
        sink.close()
    seconds = time.perf_counter() - t
    meta = {
        "layer": layer.name, "indexed_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "seconds": seconds, "rows": sink.counts, "warnings": sink.warnings, "input_fingerprint": fp,
        "schema_hash": layer_schema_digest(layer, schema),
        "generation": ctx.generation if sink.changed() else ctx.previous,
    }
    (out / "layer.json").write_text(json.dumps(meta))
    return LayerReport(layer.name, "ran", seconds, sum(sink.counts.values()), len(sink.warnings), dict(sink.counts),
                       sink=sink)


def _union(schema: Schema, facts: Path, only: Iterable[str] | None = None) -> None:
    """`<relation>.facts` = the concatenation of the layers' files (empty if
    none), for every relation or those in `only`."""
    layer_dirs = sorted((facts / "layers").iterdir()) if (facts / "layers").is_dir() else []
    for rel in schema.columns if only is None else sorted(only):
        parts = [d / f"{rel}.facts" for d in layer_dirs if (d / f"{rel}.facts").is_file()]
        target = facts / f"{rel}.facts"
        if len(parts) == 1:
            os.link(parts[0], target)
            continue
        with open(target, "wb") as out:
            for part in parts:
                with open(part, "rb") as fh:
                    shutil.copyfileobj(fh, out)


def _write_db(tmp_db: Path, src: store.Source, schema: Schema, facts: Path, final_facts: Path) -> None:
    import duckdb

    from torchtalk import __version__

    con = duckdb.connect(str(tmp_db))
    try:
        store.create_tables(con, schema.decls)
        counts = [(name, store.load_facts(con, decl, facts / f"{name}.facts")) for name, decl in schema.decls.items()]
        con.executemany("insert into torchtalk_relations values (?, ?)", counts)
        number_nodes(con, schema.decls, facts)
        layers = [m for d in sorted((facts / "layers").glob("*")) if (m := read_layer_json(d))]
        fingerprint = hashlib.sha1("".join(m["input_fingerprint"] for m in layers).encode()).hexdigest()
        meta = {
            "source": str(src.root), "kind": src.kind, "version": src.version,
            "git_commit": src.git_commit(), "fingerprint": fingerprint, "schema_hash": schema.digest,
            "indexed_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "torchtalk_version": __version__, "format": store.FORMAT, "facts_dir": str(final_facts),
        }
        meta[update.FACTS_ID] = update.facts_id(facts)
        con.executemany("insert into torchtalk_meta values (?, ?)", list(meta.items()))
        con.executemany("insert into torchtalk_layers values (?, ?, ?, ?, ?, ?)", update.layer_rows(layers))
        warns = [(m["layer"], f, ln, msg) for m in layers for f, ln, msg in m["warnings"]]
        if warns:
            con.executemany("insert into torchtalk_warnings values (?, ?, ?, ?)", warns)
        _query_aids(con, schema, counts)
        con.execute("checkpoint")
    finally:
        con.close()


def _query_aids(con, schema: Schema, counts: list[tuple[str, int]]) -> None:
    """What makes queries on the fact tables fast: lookup indexes, stored relations."""
    _lookup_indexes(con, schema)
    _store_derived(con, counts)


# Columns the query layer looks names up in (torchtalk/query/resolve.py): an
# ART index makes each lookup ~1 ms instead of a ~3 ms scan of `func`, and a
# query resolves each argument through a few of them.
LOOKUP_COLUMNS = (("func", "name"), ("kernel", "name"), ("kernel", "kernel"), ("dispatch", "kernel"),
                  ("op", "op"), ("op", "name"), ("py_api", "api"), ("py_def", "py"), ("test", "test"))


def _lookup_indexes(con, schema: Schema) -> None:
    for table, col in LOOKUP_COLUMNS:
        decl = schema.decls.get(table)
        if decl is not None and col in {c.name for c in decl.columns}:
            con.execute(f'CREATE INDEX IF NOT EXISTS "lookup_{table}_{col}" ON "{table}" ("{col}")')


def _store_derived(con, counts: list[tuple[str, int]]) -> None:
    """The library's argument-free relations, computed once for every query
    (Note [Derived at index time] in torchtalk/query/derived.py). They only
    make queries faster: if the rules cannot be evaluated, the index is still
    written, without them (queries then compute them), and status says why."""
    import duckdb

    from torchtalk.errors import TorchTalkError
    from torchtalk.query.derived import materialize
    from torchtalk.query.library import load_library

    t = time.perf_counter()
    con.execute("BEGIN TRANSACTION")
    try:
        rows = materialize(con, load_library(user=False), frozenset(name for name, _ in counts))
    except (TorchTalkError, duckdb.Error) as exc:
        con.execute("ROLLBACK")
        what = exc.headline() if isinstance(exc, TorchTalkError) else str(exc).splitlines()[0]
        note = f"not stored ({what})"
    else:
        con.execute("COMMIT")
        note = f"{len(rows)} relations, {sum(rows.values())} rows, {time.perf_counter() - t:.2f} s"
    con.execute("insert into torchtalk_meta values (?, ?)", ["derived", note])


def _swap(tmp_db: Path, db_path: Path, tmp_facts: Path, facts: Path, aside: list[Path] | None = None) -> None:
    """DB first (atomic os.replace), then the facts dir (see Note [Index
    steps]). `aside`: a list that takes the old DB file and facts dir, kept
    under other names for the caller to remove (Note [Old files removed
    later]); else they are removed here."""
    if aside is not None and db_path.exists():
        old = db_path.with_name(f".{db_path.name}.old-{os.getpid()}")
        old.unlink(missing_ok=True)
        try:
            os.link(db_path, old)  # the replace then frees no data: `old` still holds it
            aside.append(old)
        except OSError:  # no hard links here: the replace frees it
            pass
    os.replace(tmp_db, db_path)
    replace_dir(tmp_facts, facts, aside)


def _remove_paths(paths: Iterable[Path]) -> None:
    """Remove each of `paths`, a file or a dir (the old DB file and facts
    dir `_swap` kept aside, a killed index's leftovers)."""
    for p in paths:
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)


# Note [Old files removed later]: an update's swap replaces a 110 MB DB
# file and a facts dir whose changed files (calls.facts, 38 MB) have no
# other link, and the file system frees their blocks there and then, on
# the way to the watcher's line. So an update keeps them under other names
# (a hard link to the old DB file; the old facts dir renamed aside, as
# replace_dir does anyway) and removes them with the layers' cache writes,
# after the update is out (Note [Cache written after the update] in
# extractors/base.py). An index killed before that leaves them, and the
# next one removes them first (`_remove_stale`).


class _Progress:
    """A rich progress bar on stderr (only when asked and stderr is a TTY)."""

    def __init__(self, enabled: bool) -> None:
        import sys

        self.bar = None
        if enabled and sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import Progress

            self.bar = Progress(console=Console(stderr=True), transient=True)

    def __enter__(self) -> _Progress:
        if self.bar is not None:
            self.bar.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.stop()

    def task(self, name: str):
        if self.bar is None:
            return None
        task_id = self.bar.add_task(name, total=None)

        def update(advance: int, total: int | None, what: str) -> None:
            if what:
                self.bar.update(task_id, description=f"{name}: {what}")
            self.bar.update(task_id, advance=advance, total=total)

        return update
