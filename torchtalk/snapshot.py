"""Snapshots: named, frozen copies of a tree's fact DB, and their differences.

Note [Snapshot layout]: a snapshot is a directory `<cache>/snapshots/<name>/`
holding `db.duckdb` (a copy of the fact DB), `facts/` (its Soufflé fact
files, hard-linked where possible) and `snapshot.json` (name, created, source,
version, git commit, fingerprint, rows per relation). It is built under a
temporary name and renamed into place, so a snapshot is whole or absent.
`export` packs the directory into one `.tar.gz`; `import` unpacks and checks it.

Example:
    >>> save(db=resolve_db(source="~/pytorch"), name="before")
    >>> diff("before", "after")["ops"]["added"][:2]
    ['_foo', '_foo.out']
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tarfile
import tempfile
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from torchtalk.atomic import link_tree, replace_dir
from torchtalk.errors import InputError, StoreError, did_you_mean

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")


@dataclass(frozen=True)
class SnapshotInfo:
    """What `snapshot.json` records."""

    name: str
    created: str
    source: str
    version: str
    git_commit: str
    fingerprint: str
    relations: dict[str, int]

    def to_json(self) -> dict:
        return asdict(self)


def snapshots_dir() -> Path:
    """Where snapshots live (in the user cache dir)."""
    from torchtalk.paths import cache_dir

    return cache_dir() / "snapshots"


def list_snapshots() -> list[SnapshotInfo]:
    """Every snapshot, oldest first. Example: `[s.name for s in list_snapshots()]`."""
    root = snapshots_dir()
    if not root.is_dir():
        return []
    found = [info for d in root.iterdir() if not d.name.startswith(".") and (info := _read_info(d))]
    return sorted(found, key=lambda s: (s.created, s.name))


def save(db: Path, name: str | None = None) -> SnapshotInfo:
    """Freeze the fact DB `db` (and its fact files) as snapshot `name`.

    Example:
        >>> save(resolve_db(source="~/pytorch"), "v2.6.0").version
        '2.6.0a0'
    """
    from torchtalk.store import facts_dir, open_db, read_meta

    con = open_db(db)
    try:
        meta = read_meta(con)
        rels = dict(con.execute("select relation, rows from torchtalk_relations").fetchall())
    finally:
        con.close()
    created = datetime.now(UTC).isoformat(timespec="seconds")
    name = name or _default_name(meta, created)
    _check_name(name)
    target = snapshots_dir() / name
    if target.exists():
        raise InputError(f"snapshot {name!r} exists already", hint="choose another name")
    info = SnapshotInfo(name, created, meta.get("source", ""), meta.get("version", ""),
                        meta.get("git_commit", ""), meta.get("fingerprint", ""), rels)
    with _staging(target) as tmp:
        shutil.copy2(db, tmp / "db.duckdb")
        link_tree(facts_dir(db), tmp / "facts")
        (tmp / "snapshot.json").write_text(json.dumps(info.to_json(), indent=1))
    return info


def load(name: str | None, db: Path, source: Path | None = None, nearest: bool = False) -> SnapshotInfo:
    """Make snapshot `name` (or, with `nearest`, the closest one to `source`)
    the fact DB at `db`, atomically: the old DB stays until the new one is in place."""
    from torchtalk.store import ensure_writable_dir, facts_dir

    info = pick_nearest(source) if nearest else get(name or "")
    snap = snapshots_dir() / info.name
    ensure_writable_dir(db.parent)
    tmp_db = db.with_name(f".{db.name}.load-{os.getpid()}")
    tmp_facts = db.with_name(f".{facts_dir(db).name}.load-{os.getpid()}")
    try:
        shutil.copy2(snap / "db.duckdb", tmp_db)
        link_tree(snap / "facts", tmp_facts)
        os.replace(tmp_db, db)
        replace_dir(tmp_facts, facts_dir(db))
    finally:
        tmp_db.unlink(missing_ok=True)
        shutil.rmtree(tmp_facts, ignore_errors=True)
    return info


def get(name: str) -> SnapshotInfo:
    """The snapshot called `name`, or a QueryError-like InputError with candidates."""
    _check_name(name)
    info = _read_info(snapshots_dir() / name)
    if info is None:
        names = [s.name for s in list_snapshots()]
        raise InputError(f"no snapshot named {name!r}",
                         hint=did_you_mean(name, names) or ("snapshots: " + ", ".join(names) if names
                                                            else "save one with `torchtalk snapshot save`"))
    return info


def pick_nearest(source: Path | None) -> SnapshotInfo:
    """The snapshot closest to the tree at `source`: same git commit, else the
    nearest ancestor commit, else the same PyTorch version, else the same
    source path; ties go to the newest, then the first by name."""
    from torchtalk.store import resolve_source

    snaps = list_snapshots()
    if not snaps:
        raise InputError("no snapshots saved yet", hint="save one with `torchtalk snapshot save`")
    if source is None:
        from torchtalk.paths import default_source

        source = default_source()
    src = resolve_source(source)
    head, version = src.git_commit(), src.version

    def score(s: SnapshotInfo) -> tuple:
        dist = _commit_distance(src.root, s.git_commit, head) if head and s.git_commit else None
        return (dist is None, dist or 0, s.version != version, s.source != str(src.root))

    # among equals, `min` keeps the first: newest, then by name
    newest_first = sorted(sorted(snaps, key=lambda s: s.name), key=lambda s: s.created, reverse=True)
    return min(newest_first, key=score)


def export(name: str, out: Path) -> Path:
    """Pack snapshot `name` into the `.tar.gz` file `out` (written atomically)."""
    get(name)
    out = out.expanduser()
    if out.is_dir():
        out = out / f"{name}.tar.gz"
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    try:
        with tarfile.open(tmp, "w:gz") as tf:
            tf.add(snapshots_dir() / name, arcname=name)
        os.replace(tmp, out)
    except OSError as exc:
        raise StoreError(f"cannot write {out}: {exc.strerror or exc}") from None
    finally:
        tmp.unlink(missing_ok=True)
    return out


def import_(archive: Path, name: str | None = None) -> SnapshotInfo:
    """Unpack an exported snapshot; `name` renames it. A file that is not a
    snapshot archive is a one-line StoreError."""
    archive = archive.expanduser()
    if not archive.is_file():
        raise InputError(f"no such file: {archive}")
    with tempfile.TemporaryDirectory(dir=_ensure_root(), prefix=".import-") as tmp:
        try:
            with tarfile.open(archive, "r:*") as tf:
                tf.extractall(tmp, filter="data")
        except (tarfile.TarError, OSError, EOFError) as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0].rstrip(":")
            raise StoreError(f"not a snapshot archive: {archive} ({first})") from None
        dirs = [d for d in Path(tmp).iterdir() if d.is_dir()]
        info = _read_info(dirs[0]) if len(dirs) == 1 else None
        if info is None or not (dirs[0] / "db.duckdb").is_file():
            raise StoreError(f"not a snapshot archive: {archive} (no snapshot.json and db.duckdb)")
        new = name or info.name
        _check_name(new)
        if (snapshots_dir() / new).exists():
            raise InputError(f"snapshot {new!r} exists already", hint="pass --name to import it under another name")
        info = SnapshotInfo(**{**info.to_json(), "name": new})
        (dirs[0] / "snapshot.json").write_text(json.dumps(info.to_json(), indent=1))
        os.replace(dirs[0], snapshots_dir() / new)
    return info


def resolve_ref(ref: str) -> Path:
    """A diff operand: a snapshot name, or a path to a fact DB file."""
    p = Path(ref).expanduser()
    if p.suffix == ".duckdb" or p.is_file():
        if not p.is_file():
            raise InputError(f"no such database: {p}")
        return p
    return snapshots_dir() / get(ref).name / "db.duckdb"


# ------------------------------------------------------------------ helpers


def _default_name(meta: dict, created: str) -> str:
    ident = (meta.get("git_commit") or meta.get("fingerprint") or "x")[:10]
    stamp = created.replace(":", "").replace("-", "")[:15]
    version = re.sub(r"[^A-Za-z0-9.+-]", "_", meta.get("version") or "tree")
    return f"{version}-{ident}-{stamp}"


def _check_name(name: str) -> None:
    if not _NAME_RE.match(name):
        raise InputError(f"bad snapshot name {name!r}", hint="use letters, digits, '.', '_', '+', '-'")


def _read_info(d: Path) -> SnapshotInfo | None:
    try:
        data = json.loads((d / "snapshot.json").read_text())
        return SnapshotInfo(**data)
    except (OSError, ValueError, TypeError):
        return None


def _ensure_root() -> Path:
    from torchtalk.store import ensure_writable_dir

    return ensure_writable_dir(snapshots_dir())


class _staging:
    """A temp dir beside `target`, renamed to `target` on success, removed on failure."""

    def __init__(self, target: Path) -> None:
        self.target = target

    def __enter__(self) -> Path:
        self.tmp = Path(tempfile.mkdtemp(dir=_ensure_root(), prefix=f".{self.target.name}."))
        return self.tmp

    def __exit__(self, exc_type, *_rest) -> None:
        if exc_type is None:
            os.replace(self.tmp, self.target)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)


def _commit_distance(root: Path, ancestor: str, head: str) -> int | None:
    """How many commits `head` is ahead of `ancestor` (None: not an ancestor)."""
    import subprocess

    if ancestor == head:
        return 0
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-list", "--count", f"{ancestor}..{head}"],
                             capture_output=True, text=True, timeout=20)
        ok = subprocess.run(["git", "-C", str(root), "merge-base", "--is-ancestor", ancestor, head],
                            capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return None
    return int(out.stdout.strip()) if ok and out.returncode == 0 else None
