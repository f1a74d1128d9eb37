"""The fact database: one DuckDB file per indexed tree, and the fact files beside it.

Note [DB layout]: the contract the Datalog engine and the query layer rely on.
  - one table per relation of facts/schema.dl, named as the relation, columns
    named as in its `.decl`, `symbol` -> VARCHAR, `number` -> BIGINT (every
    relation has a table, empty if no layer wrote it);
  - `torchtalk_meta(key, value)`: source, kind ("tree", "wheel" or
    "extension"), version, git_commit, fingerprint, schema_hash, indexed_at,
    torchtalk_version; an extension's DB also with_torch, torch_db, torch_facts_id and
    extension_dirs (torchtalk/extension.py);
  - `torchtalk_layers(layer, indexed_at, seconds, rows, warnings, input_fingerprint)`;
  - `torchtalk_warnings(layer, file, line, message)`;
  - `torchtalk_relations(relation, rows)`: row count of every relation table.
The fact files (Soufflé format, one `<relation>.facts` TSV per relation, the
union over layers) live in `<db stem>.facts/` beside the DB, with each layer's
own files in `<db stem>.facts/layers/<layer>/` (see torchtalk.index).

Example:
    >>> con = open_db(resolve_db(source="~/pytorch"))
    >>> con.execute("select count(*) from op").fetchone()
    (2633,)
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path

from torchtalk.datalog.duck import duckdb as lean_duckdb
from torchtalk.errors import EngineError, InputError, StoreError, TorchTalkError
from torchtalk.paths import (  # noqa: F401 (re-exported)
    NATIVE_TREE,
    NATIVE_WHEEL,
    db_dir,
    default_db,
    facts_dir,
    resolve_db,
)

META_TABLES = ("torchtalk_meta", "torchtalk_layers", "torchtalk_warnings", "torchtalk_relations")
SCHEMA_PATH = Path(__file__).resolve().parents[1] / "facts" / "schema.dl"
_SQL_TYPES = {"symbol": "VARCHAR", "number": "BIGINT"}
# bumped when the DB layout changes; an older DB is rebuilt by the next index
FORMAT = "3"  # 3: node numbers by bucket (Note [Numbers that stay] in torchtalk/nodes.py)
# DuckDB memory of a query connection (Note [Query memory])
QUERY_MEMORY = "2GB"


# ------------------------------------------------------------------ sources


@dataclass(frozen=True)
class Source:
    """A tree to index. `kind` is "tree" (a checkout), "wheel" (site-packages of
    an installed torch) or "extension" (an extension's checkout indexed beside
    its torch, torchtalk/extension.py); `root` is what file paths are relative to."""

    root: Path
    kind: str

    @property
    def version(self) -> str:
        """The version: version.txt of a tree or extension, torch/version.py of a wheel."""
        if self.kind in ("tree", "extension"):
            try:
                return (self.root / "version.txt").read_text().strip()
            except OSError:
                return ""
        try:
            text = (self.root / "torch" / "version.py").read_text()
        except OSError:
            return ""
        for line in text.splitlines():
            if line.startswith("__version__"):
                return line.split("=", 1)[1].strip().strip("'\"")
        return ""

    def git_commit(self) -> str:
        """HEAD's commit when the tree is a git checkout, else ""."""
        if not (self.root / ".git").exists():
            return ""
        import subprocess

        try:
            out = subprocess.run(
                ["git", "-C", str(self.root), "rev-parse", "HEAD"],
                capture_output=True, text=True, timeout=10,
            )
        except (OSError, subprocess.SubprocessError):
            return ""
        return out.stdout.strip() if out.returncode == 0 else ""


def resolve_source(path: str | Path) -> Source:
    """The Source at `path`: a PyTorch checkout, an installed `torch` package dir,
    or the site-packages holding it.

    Example:
        >>> resolve_source("/usr/lib/python3/site-packages/torch").kind
        'wheel'
    """
    p = Path(path).expanduser()
    if not p.exists():
        raise InputError(f"no such directory: {p}", hint="pass the root of a PyTorch checkout")
    if not p.is_dir():
        raise InputError(f"not a directory: {p}")
    p = p.resolve()
    if (p / NATIVE_TREE).is_file():
        return Source(p, "tree")
    for root in (p, p.parent):
        if (root / NATIVE_WHEEL).is_file() and (root / "torch").is_dir():
            return Source(root, "wheel")
    raise InputError(
        f"not a PyTorch tree: {p} has no {NATIVE_TREE}",
        hint="pass the root of a PyTorch checkout or an installed torch package",
    )


# ------------------------------------------------------------------ db paths


def ensure_writable_dir(path: Path) -> Path:
    """Create `path` (and parents) or raise a one-line StoreError."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create directory {path}: {exc.strerror}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise StoreError(f"directory is not writable: {path}", hint="set TORCHTALK_CACHE_DIR or pass --db")
    return path


# ------------------------------------------------------------------ opening


def open_db(path: str | Path, read_only: bool = True):
    """Open a TorchTalk DB (a duckdb connection). Missing, corrupt or foreign
    files raise StoreError in one line.

    Example:
        >>> open_db(resolve_db()).execute("select value from torchtalk_meta where key='version'").fetchone()
        ('2.6.0a0',)
    """
    duckdb = lean_duckdb()  # Note [Lean DuckDB import]

    path = Path(path)
    if not path.is_file():
        raise StoreError(f"no such database: {path}", hint="run `torchtalk index --source PATH`")
    try:
        con = duckdb.connect(str(path), read_only=read_only)
    except duckdb.Error as exc:
        raise StoreError(f"cannot read the database {path}: {_first_line(exc)}",
                         hint="it may be truncated or corrupt; re-run `torchtalk index --force`") from None
    if read_only:
        tune_for_queries(con)
    try:
        con.execute("select count(*) from torchtalk_meta").fetchone()
    except duckdb.CatalogException:
        con.close()
        raise StoreError(f"not a TorchTalk database: {path}") from None
    except duckdb.Error as exc:
        con.close()
        raise database_error(exc, path) from None
    if read_only:  # what is read off it once is kept with it (Note [DB info cache])
        from torchtalk.connmemo import Session

        return Session(con)
    return con


def open_db_imports() -> None:
    """Import what `open_db` reads, so that a thread calling it imports
    nothing (torchtalk/meanwhile.py; Note [DB opened meanwhile] in
    torchtalk/api.py)."""
    lean_duckdb()
    import torchtalk.connmemo  # noqa: F401


def tune_for_queries(con) -> None:
    """Settings for answering queries (Note [One thread per query]).

    Note [One thread per query]: a query's statements are small joins over
    seeded walks; DuckDB's parallel operators cost more to start than they
    save there, and each thread adds its own buffers. One thread answered
    impact/trace 2x faster on a loaded 2-core machine and kept peak memory
    within 2x of the fact DB (bench/engine.py). Indexing keeps all threads.

    Note [Query memory]: a query's DuckDB memory is capped at
    `$TORCHTALK_QUERY_MEMORY` (default QUERY_MEMORY; DuckDB's own default is
    80% of the machine), so a runaway query fails with one line instead of
    taking the machine (Note [Depth bound] in torchtalk/query/run.py keeps
    every walk well below it: 0.5 GB at the deepest).
    """
    con.execute("SET threads = 1")
    limit = os.environ.get("TORCHTALK_QUERY_MEMORY") or QUERY_MEMORY
    try:
        con.execute(f"SET memory_limit = '{limit}'")
    except Exception as exc:  # duckdb.Error: an unreadable size
        raise InputError(f"TORCHTALK_QUERY_MEMORY={limit!r} is not a memory size: {_first_line(exc)}",
                         hint="e.g. 2GB, 500MB") from None


def database_error(exc: BaseException, path: str | Path | None = None) -> TorchTalkError | None:
    """A DuckDB error met while reading a fact DB, as one line: a truncated or
    corrupt file (an I/O error, a bad checksum) is a StoreError saying to
    re-index; any other DuckDB error is an EngineError; None for anything
    that is not a DuckDB error. Called by the CLI
    and the MCP server for what reaches them unconverted (a corrupt block is
    only found when a query reads it, not at open).

    Example:
        >>> database_error(duckdb.IOException("IO Error: Could not read enough bytes ..."), "f.duckdb")
        StoreError('cannot read the database f.duckdb: IO Error: Could not read enough bytes ...')
    """
    kind = type(exc)
    if not kind.__module__.lstrip("_").startswith("duckdb"):
        return None
    where = f" {path}" if path else ""
    text = _first_line(exc)
    if kind.__name__ == "OutOfMemoryException":
        return StoreError(f"the query needs more memory than allowed: {text}",
                          hint="lower depth, or raise TORCHTALK_QUERY_MEMORY")
    if _unreadable(exc):
        return StoreError(f"cannot read the database{where}: {text}",
                          hint="it may be truncated or corrupt; re-run `torchtalk index --force`")
    return EngineError(f"DuckDB failed: {text}")


# What the OS says when a write does not fit (ENOSPC, EDQUOT, EFBIG: a file-size limit).
_FULL = {errno.ENOSPC: "no space left on device", errno.EDQUOT: "disk quota exceeded",
         errno.EFBIG: "file too large"}


def disk_full(exc: BaseException, db_path: Path) -> StoreError | None:
    """A write of the index of `db_path` that did not fit (an OSError from
    Python, or a DuckDB error carrying the OS's text) as a one-line
    StoreError naming where; None for any other error. The index's temporary
    files are removed and the previous DB kept by then (torchtalk/index.py).

    Example:
        >>> disk_full(OSError(errno.ENOSPC, "No space left on device"), Path("/d/t.duckdb")).message
        'no space left on device in /d: the index of t.duckdb was not written, the previous one is kept'
    """
    if isinstance(exc, OSError) and exc.errno in _FULL:
        what = _FULL[exc.errno]
        where = Path(exc.filename).parent if exc.filename else db_path.parent
    elif type(exc).__module__.lstrip("_").startswith("duckdb") and any(
            os.strerror(code) in str(exc) for code in _FULL):
        what = next(_FULL[code] for code in _FULL if os.strerror(code) in str(exc))
        where = db_path.parent
    else:
        return None
    return StoreError(f"{what} in {where}: the index of {db_path.name} was not written, the previous one is kept",
                      hint="free some space, or index into another filesystem with --db")


def _unreadable(exc: BaseException) -> bool:
    """A DuckDB error saying the file cannot be read (short read, bad checksum)."""
    text = str(exc)
    return (type(exc).__name__ in ("IOException", "SerializationException")
            or "Corrupt database" in text or "checksum" in text)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def read_meta(con) -> dict[str, str]:
    """torchtalk_meta as a dict."""
    return dict(con.execute("select key, value from torchtalk_meta").fetchall())


# ------------------------------------------------------------------ building


def create_tables(con, decls) -> None:
    """One table per schema relation (Note [DB layout]) plus the metadata tables."""
    for decl in decls.values():
        cols = ", ".join(f'"{c.name}" {_SQL_TYPES[str(c.type)]}' for c in decl.columns)
        con.execute(f'create table "{decl.name}" ({cols})')
    con.execute("create table torchtalk_meta (key VARCHAR primary key, value VARCHAR)")
    con.execute(
        "create table torchtalk_layers (layer VARCHAR primary key, indexed_at VARCHAR, "
        "seconds DOUBLE, rows BIGINT, warnings BIGINT, input_fingerprint VARCHAR)"
    )
    con.execute("create table torchtalk_warnings (layer VARCHAR, file VARCHAR, line BIGINT, message VARCHAR)")
    con.execute("create table torchtalk_relations (relation VARCHAR primary key, rows BIGINT)")


def load_facts(con, decl, path: Path) -> int:
    """Append the TSV fact file `path` to `decl`'s table; the table's row count."""
    if not path.is_file() or path.stat().st_size == 0:
        return 0
    con.execute(f'insert into "{decl.name}" select * from {read_csv_sql(decl)}', [str(path), "\t"])
    return con.execute(f'select count(*) from "{decl.name}"').fetchone()[0]


def read_csv_sql(decl) -> str:
    """DuckDB's reader of a fact file of `decl`, typed as its table; takes
    two parameters: the path and the delimiter (a tab)."""
    columns = ", ".join(f"'{c.name}': '{_SQL_TYPES[str(c.type)]}'" for c in decl.columns)
    return (f"read_csv(?, delim=?, header=false, quote='', escape='', nullstr='\\N', auto_detect=false, "
            f"columns={{{columns}}})")


def quote(name: str) -> str:
    """`name` as a SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def tier_note(relations: dict[str, int]) -> str | None:
    """What the compiler tier covers, from a DB's relation counts: None
    without it (Note [Compiler tier catching up] in torchtalk/index.py)."""
    parsed, pending = relations.get("precise_file", 0), relations.get("precise_pending", 0)
    if not parsed and not pending:
        return None
    note = f"compiler tier: {parsed:,} files parsed (TUs and native headers)"
    if pending:
        note += (f", {pending:,} changed since and pending (the fast tier answers for them until "
                 "`torchtalk index --precise` parses them)")
    return note


def db_status(path: Path) -> dict:
    """Everything `torchtalk status` shows, read from the DB (read-only).

    Example:
        >>> db_status(resolve_db())["relations"]["op"]
        2633
    """
    duckdb = lean_duckdb()  # Note [Lean DuckDB import]

    con = open_db(path)
    try:
        meta = read_meta(con)
        cols = ("layer", "indexed_at", "seconds", "rows", "warnings", "input_fingerprint")
        layers = [dict(zip(cols, r, strict=True)) for r in
                  con.execute(f"select {', '.join(cols)} from torchtalk_layers order by indexed_at, layer").fetchall()]
        counts = dict(con.execute("select relation, rows from torchtalk_relations order by relation").fetchall())
    except duckdb.Error as exc:
        if _unreadable(exc):
            raise database_error(exc, path) from None
        raise StoreError(f"database {path} has an older layout ({_first_line(exc)})",
                         hint="re-run `torchtalk index --force`") from None
    else:
        return {"db": str(path), "meta": meta, "layers": layers, "relations": counts}
    finally:
        con.close()
