"""The TorchTalk facade (STYLE 13): the CLI, the MCP server and the reports call
these functions and nothing deeper. Each area adds its functions here; keep
module-level imports cheap (import inside the function).

Example:
    >>> from torchtalk import api
    >>> api.index("/work/src/pytorch-v2.6.0", layers=["ops"])
    >>> api.status()["relations"]["op"]
    2633
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path


def index(
    source: str | Path,
    db: str | Path | None = None,
    layers: Iterable[str] | None = None,
    *,
    precise: bool = False,
    jobs: int | None = None,
    force: bool = False,
    log: Callable[[str], None] | None = None,
    progress: bool = False,
):
    """Index the tree (or installed torch) at `source`; an `IndexReport`.

    Example:
        >>> index("~/pytorch", layers=["ops"]).db
        PosixPath('/root/.cache/torchtalk/db/pytorch-1a2b3c4d5e6f.duckdb')
    """
    from torchtalk.index import index as _index

    return _index(source, db, layers, precise=precise, jobs=jobs, force=force, log=log, progress=progress)


def status(source: str | Path | None = None, db: str | Path | None = None) -> dict:
    """What is indexed: meta (source, version, git commit), layers, rows per relation.

    Example:
        >>> status(source="~/pytorch")["meta"]["version"]
        '2.6.0a0'
    """
    from torchtalk.store import db_status, resolve_db

    return db_status(resolve_db(source=source, db=db))


def open_db(source: str | Path | None = None, db: str | Path | None = None, read_only: bool = True):
    """A duckdb connection to the fact DB of `source` (or the file `db`).

    Example:
        >>> open_db(source="~/pytorch").execute("select count(*) from dispatch").fetchone()
        (4609,)
    """
    from torchtalk.store import open_db as _open_db
    from torchtalk.store import resolve_db

    return _open_db(resolve_db(source=source, db=db), read_only=read_only)
