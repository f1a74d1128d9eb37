"""Values computed once per object: per open fact-DB connection, per program.

Note [DB info cache]: the server's connection is read-only and `torchtalk
index` replaces the file instead of writing into it, so what a connection
sees never changes; what is read off it (table names, row counts, stored
relations) is computed once per connection. Each memo entry keeps its
object alive, so the id it is keyed by cannot be reused by another object
meanwhile; a memo keeps a bounded number of entries (the last KEEP
connections). The query layer caches what it derives from a parsed program
(pruned, presolved programs, compiled plans) the same way, with
`per_object`.

Example:
    >>> _NAMES: dict = {}
    >>> per_connection(_NAMES, con, lambda c: c.execute("SELECT 1").fetchone())  # doctest: +SKIP
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
KEEP = 8


def per_connection(memo: dict, con: Any, compute: Callable[[Any], T]) -> T:
    """`compute(con)`, once per connection object, kept in `memo`."""
    return per_object(memo, con, None, lambda: compute(con), KEEP)


def per_object(memo: dict, obj: Any, key: Any, compute: Callable[[], T], size: int = 256) -> T:
    """`compute()`, once per (`obj`, `key`), kept in `memo` (at most `size` entries)."""
    k = (id(obj), key)
    hit = memo.get(k)
    if hit is not None and hit[0] is obj:
        return hit[1]
    return remember(memo, k, (obj, compute()), size)[1]


def read_only_memo(memo: dict, con: Any) -> dict | None:
    """A dict kept per read-only connection (its answers cannot change), or
    None for a writable one, whose tables may change under a memo."""
    return per_connection(memo, con, lambda c: {} if c.execute(
        "SELECT current_setting('access_mode')").fetchone()[0] == "read_only" else None)


_BOUNDED = threading.Lock()


def remember(cache: dict, key: Any, value: T, size: int = 256) -> T:
    """`cache[key] = value`, dropping the oldest entry once `cache` holds
    `size` (the MCP server's warm thread and its calls share these caches)."""
    with _BOUNDED:
        if key not in cache and len(cache) >= size:
            del cache[next(iter(cache))]
        cache[key] = value
    return value
