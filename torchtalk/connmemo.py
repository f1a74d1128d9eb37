"""One value per open fact-DB connection, computed once.

Note [DB info cache]: the server's connection is read-only and `torchtalk
index` replaces the file instead of writing into it, so what a connection
sees never changes; what is read off it (table names, row counts, stored
relations) is computed once per connection. Each memo entry keeps its
connection object alive, so the id it is keyed by cannot be reused by
another connection meanwhile; a memo keeps the last KEEP connections.

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


def per_connection(memo: dict[int, tuple[Any, Any]], con: Any, compute: Callable[[Any], T]) -> T:
    """`compute(con)`, once per connection object, kept in `memo`."""
    hit = memo.get(id(con))
    if hit is not None and hit[0] is con:
        return hit[1]
    value = compute(con)
    if len(memo) >= KEEP:
        memo.pop(next(iter(memo)))
    memo[id(con)] = (con, value)
    return value


def read_only_memo(memo: dict[int, tuple[Any, Any]], con: Any) -> dict | None:
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
