"""`torchtalk index --source EXT --with-torch TORCH`: a PyTorch extension
indexed beside the torch tree it is built against, into one fact DB.

Note [Extensions]: an extension (torchvision, torchaudio, ...) defines its own
ops with TORCH_LIBRARY, kernels per key with TORCH_LIBRARY_IMPL, and Python
wrappers calling `torch.ops.NS.X`. Its DB holds the torch tree's layers as
that tree's own DB has them (its facts dir's layer files hard-linked: torch
is indexed, or found current, first), and the extension's own layers, run by
the same extractors (`ext-cpp`: extractors.cpp, `ext-python`:
extractors.python) over the extension's packages (`dirs`: the top-level
directories holding a Python package, say `torchvision/`; in a src layout,
the directories of `src/`, whose paths are then relative to it) with
`ExtractContext.torch_root` set: names of ATen ops come from torch's
native_functions.yaml, the `m.def`s of the extension's libraries are its
`op` rows, and its `torch.ops.NS.X` calls are op calls (Note [Library ops]
in extractors/cpp/library.py). Data flows one way: torch's facts are read,
never changed.

Files of both trees are told apart by path: an extension's rows carry paths
relative to its root, under its package dirs (`torchvision/csrc/ops/nms.cpp`),
and a package dir the torch tree also has at its top is refused. The DB is
`torchtalk index`'s for the extension's root (`--source EXT` finds it again);
it is built under a temporary name and swapped in (never half-written), and
re-indexing is a no-op while neither tree changed.

Example:
    >>> index_extension("~/.cache/torchtalk/src/vision-0.21.0", "~/pytorch").layers[-1].name
    'ext-python'
"""

from __future__ import annotations

import importlib
import os
import time
import uuid
from pathlib import Path

from torchtalk import store, update
from torchtalk.atomic import link_tree
from torchtalk.errors import InputError
from torchtalk.index import (
    IndexReport,
    _carried,
    _db_current,
    _discard,
    _fingerprint,
    _locked,
    _previous_layers,
    _Progress,
    _refresh_derived,
    _remove_stale,
    _run_layer,
    _swap,
    _union,
    _write_db,
    code_digest,
    index,
    input_stats,
    load_schema,
    read_layer_json,
)

_TEST_DIRS = frozenset({"test", "tests", "testing", "docs", "examples", "benchmarks"})


def ext_layers():
    """The extension's layers: the C++ and Python layers' extractors, the
    C++ one also writing the library's `op` rows."""
    from extractors.layers import LAYERS, Layer

    by_name = {lr.name: lr for lr in LAYERS}
    cpp, py = by_name["cpp"], by_name["python"]
    return (Layer("ext-cpp", cpp.module, (*cpp.relations, "op")), Layer("ext-python", py.module, py.relations))


def packages(root: Path) -> tuple[str, ...]:
    """The extension's package dirs: the top-level directories of `root`
    holding an `__init__.py` (not its tests or docs), sorted."""
    try:
        entries = sorted(p for p in root.iterdir() if p.is_dir())
    except OSError as exc:
        raise InputError(f"cannot read {root}: {exc.strerror}") from None
    return tuple(p.name for p in entries
                 if (p / "__init__.py").is_file() and p.name not in _TEST_DIRS and not p.name.startswith("."))


def layout(root: Path) -> tuple[Path, tuple[str, ...]]:
    """(source root, dirs): in a src layout (`src/` holding a package)
    `root/src` and every directory in it, its packages and the C++ libraries
    beside them (torchaudio's src/libtorchaudio); else `root` and its packages."""
    src = root / "src"
    if not src.is_dir() or not packages(src):
        return root, packages(root)
    return src, tuple(sorted(p.name for p in src.iterdir() if p.is_dir() and p.name not in _TEST_DIRS
                             and not p.name.startswith((".", "__"))))


def index_extension(ext: str | Path, torch: str | Path, db: str | Path | None = None, *, jobs: int | None = None,
                    force: bool = False, log=None, progress: bool = False,
                    torch_db: str | Path | None = None) -> IndexReport:
    """Index the extension at `ext` beside the torch tree `torch` (Note
    [Extensions]); `torch_db`: the torch tree's DB (default: its default DB),
    indexed first if not current."""
    t0 = time.perf_counter()
    log = log or (lambda _msg: None)
    root = Path(ext).expanduser()
    if not root.is_dir():
        raise InputError(f"no such directory: {root}", hint="pass the root of the extension's checkout")
    root = root.resolve()
    torch_src = store.resolve_source(torch)
    if torch_src.root == root:
        raise InputError(f"--with-torch names the extension itself: {root}")
    base, dirs = layout(root)
    if not dirs:
        raise InputError(f"no Python package at the top of {root} (a directory with __init__.py)",
                         hint="pass the root of the extension's checkout")
    for d in dirs:
        if (torch_src.root / d).exists():
            raise InputError(f"the extension's package {d}/ is also a directory of the torch tree {torch_src.root}",
                             hint="their files would share paths")
    torch_report = index(torch_src.root, db=torch_db, jobs=jobs, log=log, progress=progress)
    db_path = Path(db).expanduser().absolute() if db is not None else store.default_db(root)
    store.ensure_writable_dir(db_path.parent)
    with _locked(db_path):
        return _index_locked(base, dirs, torch_src.root, torch_report.db, db_path, jobs, force, log, progress, t0)


def _index_locked(root, dirs, torch_root, torch_db, db_path, jobs, force, log, progress, t0) -> IndexReport:
    schema = load_schema()
    facts = store.facts_dir(db_path)
    _remove_stale(db_path, facts)
    prev = _previous_layers(db_path, facts)
    torch_facts = store.facts_dir(torch_db)
    torch_id = update.facts_id(torch_facts) or ""
    plans = []
    for layer in ext_layers():
        mod = importlib.import_module(layer.module)
        stats = input_stats(mod, root, dirs, torch_root)
        fp = _fingerprint(code_digest(layer, schema), stats)
        rerun = force or prev.get(layer.name, {}).get("input_fingerprint") != fp
        plans.append((layer, mod, (fp, stats), rerun))
    src = store.Source(root, "extension")
    if not any(p[3] for p in plans) and _torch_same(db_path, torch_root, torch_id):
        current, rules_current = _db_current(db_path, schema, src)
        if current:
            if not rules_current:
                log("rules changed since the last index: recomputing the stored relations")
                _refresh_derived(db_path, schema)
            reports = _torch_reports(torch_facts) + tuple(_carried(prev[p[0].name]) for p in plans)
            return IndexReport(db_path, root, src.kind, True, time.perf_counter() - t0, reports, (), "current")
    reports = _build(src, dirs, torch_root, torch_facts, torch_id, db_path, schema, plans, prev, jobs, log, progress)
    return IndexReport(db_path, root, src.kind, False, time.perf_counter() - t0, reports, (), "built")


def _torch_same(db_path: Path, torch_root: Path, torch_id: str) -> bool:
    """The DB exists and holds these torch facts (index's _db_current checks the rest)."""
    meta = _meta_of(db_path)
    return meta is not None and meta.get("with_torch") == str(torch_root) and meta.get("torch_facts_id") == torch_id


def _meta_of(path: Path) -> dict[str, str] | None:
    """The torchtalk_meta of the DB at `path`, or None when it cannot be read."""
    from torchtalk.errors import StoreError

    try:
        con = store.open_db(path)
    except StoreError:
        return None
    try:
        return store.read_meta(con)
    finally:
        con.close()


def _build(src, dirs, torch_root, torch_facts, torch_id, db_path, schema, plans, prev, jobs, log,
           progress) -> tuple:
    """Torch's layers linked, the extension's run (or carried), a new DB swapped in."""
    facts = store.facts_dir(db_path)
    tag = f"tmp-{os.getpid()}"
    tmp_facts = facts.with_name(f".{facts.name}.{tag}")
    tmp_db = db_path.with_name(f".{db_path.name}.{tag}")
    try:
        reports = list(_torch_reports(torch_facts))
        for lr in reports:
            link_tree(torch_facts / "layers" / lr.name, tmp_facts / "layers" / lr.name)
        extra = {"dirs": dirs, "torch_root": torch_root}
        with _Progress(progress) as bar:
            for layer, mod, stamp, rerun in plans:
                out = tmp_facts / "layers" / layer.name
                if rerun or layer.name not in prev:
                    lr = _run_layer(src, db_path, schema, layer, mod, stamp, out, jobs, bar, ctx_extra=extra)
                    log(f"{lr.name}: {lr.rows:,} rows in {lr.seconds:.2f} s, {lr.warnings} warnings")
                else:
                    link_tree(facts / "layers" / layer.name, out)
                    lr = _carried(prev[layer.name])
                reports.append(lr)
        _union(schema, tmp_facts)
        (tmp_facts / update.FACTS_ID).write_text(uuid.uuid4().hex)
        _write_db(tmp_db, src, schema, tmp_facts, facts)
        _write_meta(tmp_db, {"with_torch": str(torch_root), "torch_db": str(torch_facts.with_suffix(".duckdb")),
                             "torch_facts_id": torch_id, "extension_dirs": ",".join(dirs)})
        _swap(tmp_db, db_path, tmp_facts, facts)
        return tuple(reports)
    except BaseException:
        _discard(tmp_db, tmp_facts)
        raise


def recorded_torch(ext: str | Path, db: str | Path | None = None) -> tuple[str, str] | None:
    """(torch tree, torch DB) the extension's DB at `db` (default: `ext`'s)
    was indexed beside, so that `index --source EXT` alone re-indexes it; None
    when there is no such DB."""
    path = Path(db).expanduser() if db is not None else store.default_db(Path(ext).expanduser())
    meta = _meta_of(path) if path.is_file() else None
    if meta is None or meta.get("kind") != "extension" or "with_torch" not in meta:
        return None
    return meta["with_torch"], meta.get("torch_db", "")


def _torch_reports(torch_facts: Path) -> tuple:
    """A carried LayerReport of each layer of the torch tree's facts dir."""
    metas = (read_layer_json(d) for d in sorted((torch_facts / "layers").iterdir()))
    return tuple(_carried(m) for m in metas if m is not None)


def _write_meta(db: Path, meta: dict[str, str]) -> None:
    import duckdb

    con = duckdb.connect(str(db))
    try:
        con.executemany("insert into torchtalk_meta values (?, ?)", list(meta.items()))
        con.execute("checkpoint")
    finally:
        con.close()
