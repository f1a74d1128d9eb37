"""What is computed once per fact-DB connection lives in its `Session`.

Note [DB info cache]: the server's connection is read-only and `torchtalk
index` replaces the file instead of writing into it, so what a read-only
connection sees never changes; what is read off it (table names, row counts,
stored relations, table columns, resolved names) is computed once and kept
in the connection's `Session` (STYLE practice 16: state you can see).
`store.open_db` gives a read-only connection as a `Session`; a writable one
(an index being built, whose tables change) stays a plain connection, and
`per_connection` then computes every time. What the query layer derives
from a parsed program (pruned, presolved programs, compiled plans) lives in
the program itself (`Program.cached`, torchtalk/datalog/ast.py).

Example:
    >>> s = Session(duckdb.connect("facts.duckdb", read_only=True))  # doctest: +SKIP
    >>> per_connection(s, "tables", lambda c: c.execute("SHOW TABLES").fetchall())  # doctest: +SKIP
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class Session:
    """A read-only fact-DB connection and what has been computed from it.
    Everything else is the connection's own: `execute`, `close`, ...

    Example:
        >>> with Session(con) as s:  # doctest: +SKIP
        ...     s.execute("SELECT 1").fetchone()
    """

    __slots__ = ("con", "memo", "engine", "stopped", "read_ahead", "history")

    def __init__(self, con: Any, engine: str = "duckdb") -> None:
        self.con = con
        self.memo: dict = {}
        self.engine = engine  # the engine its queries run on unless told (Note [Engine per session])
        self.stopped = False  # interrupted: the in-memory engine's run stops at its next rule
        # in memory only once the tables a run reads are here (Note [Read ahead] in datalog/engines/memory.py)
        self.read_ahead = False
        # a server's connection: the DB whose history its query texts go to (Note [Warm from history])
        self.history = None

    def interrupt(self) -> None:
        """Stop the query running on this connection, whichever engine runs it
        (DuckDB's statement; the in-memory engine's run, at its next rule)."""
        self.stopped = True
        self.con.interrupt()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.con, name)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc) -> None:
        self.con.close()


# Note [Engine per session]: the embedded engine (DuckDB) answers one query
# in a fresh process without reading anything first; the in-memory engine
# (Note [In-memory evaluation] in torchtalk/datalog/engines/memory.py) reads
# the tables a query needs into the Session once, then answers most queries
# 10x faster. So a Session says which its queries use: DuckDB by default
# (the CLI, a script's one query), the in-memory engine where one Session
# answers many (the MCP server's pool). A query given an engine uses it.


def engine_of(con: Any) -> str:
    """The engine `con`'s queries run on unless told (Note [Engine per session])."""
    return con.engine if isinstance(con, Session) else "duckdb"


def raw(con: Any) -> Any:
    """The DuckDB connection itself (for an API that type-checks it)."""
    return con.con if isinstance(con, Session) else con


def per_connection(con: Any, key: Any, compute: Callable[[Any], T]) -> T:
    """`compute(con)`, once per `Session` and `key`; every time for a plain
    (writable) connection."""
    if not isinstance(con, Session):
        return compute(con)
    memo = con.memo
    if key in memo:
        return memo[key]
    return remember(memo, key, compute(con), size=1 << 30)


def session_memo(con: Any, key: Any) -> dict | None:
    """A dict kept in `con`'s Session under `key`, or None for a plain
    connection, whose answers may change."""
    if not isinstance(con, Session):
        return None
    return per_connection(con, key, lambda _c: {})


_BOUNDED = threading.Lock()


def remember(cache: dict, key: Any, value: T, size: int = 256) -> T:
    """`cache[key] = value`, dropping the oldest entry once `cache` holds
    `size` (the MCP server's warm thread and its calls share these caches)."""
    with _BOUNDED:
        if key not in cache and len(cache) >= size:
            del cache[next(iter(cache))]
        cache[key] = value
    return value
