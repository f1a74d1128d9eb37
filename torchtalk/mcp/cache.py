"""Answers kept per DB generation, and the lanes the tools' calls run in.

Note [Answer cache]: a tool's answer is a function of its arguments, the
fact DB and the rule library, nothing else (the connection is read-only and
`torchtalk index` replaces the file, Note [DB info cache] in
torchtalk/connmemo.py). Agents ask the same few questions again and again,
and the clients of a shared server each ask them: `run_tool` keeps the last
CACHE_SIZE answers (tool errors such as an unknown name with its
did-you-mean too; never a timeout or an internal error), keyed by the tool,
its arguments, the DB file's identity (inode, mtime) the answer was read
from and the rule library's key (torchtalk/query/library.py). A hit needs the
file's identity now to be the one stored and the library's key unchanged:
an index that replaces the file, or an edited rule file, makes every older
answer unreachable (dropped as newer ones come). `get_status` (it reports
the background index) is never kept. $TORCHTALK_MCP_CACHE=0 turns it off.

Note [Lanes]: a call runs in a worker thread on a pooled connection (Note
[Connection pool] in db.py). Tools that walk the call graph transitively
(`affected`, `impact`, any `query`, a whole `coverage` report) take seconds
on a large diff; run with the quick lookups they would take every
connection and both cores, and a `called_by` would wait behind them. They
run in the slow lane, at most SLOW_LANE calls at once (a call waiting for
the lane waits within its time limit); the other tools in the fast lane,
which always has connections and a core left. DuckDB releases the GIL while
a statement runs, so the lanes run in parallel; the in-memory engine does
not, so the HTTP server runs its slow lane in a process of its own (Note
[Slow lane process] in slowlane.py).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Any

from torchtalk.paths import switched_on

CACHE_SIZE = 256  # answers kept (each within its token budget: a few kB)
SLOW_TOOLS = frozenset({"affected", "impact", "query", "coverage"})
UNCACHED_TOOLS = frozenset({"get_status"})


def slow_lane_size() -> int:
    """Calls the slow lane runs at once: half the cores, at least one."""
    return max(1, (os.cpu_count() or 2) // 2)


def enabled() -> bool:
    """Whether answers are kept ($TORCHTALK_MCP_CACHE=0 turns it off)."""
    return switched_on("TORCHTALK_MCP_CACHE")


class AnswerCache:
    """The last `size` answers by key (Note [Answer cache]); thread-safe."""

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self.size = size
        self._items: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, key: Any) -> Any | None:
        """The answer kept under `key`, or None."""
        with self._lock:
            value = self._items.get(key)
            if value is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return value

    def put(self, key: Any, value: Any) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)


class LibraryKey:
    """The rule library's key (torchtalk/query/library.py) for the answers
    of a server given `rules`: the key of the library its queries load,
    looked at as they look (Note [Library files looked at once a second])."""

    def __init__(self, rules: tuple = ()) -> None:
        self.rules = tuple(rules)

    def get(self) -> str:
        from torchtalk.query.library import current_key

        return current_key(self.rules)


def freeze(value: Any) -> Any:
    """`value` (a tool's arguments) as a hashable key: lists and dicts as tuples."""
    if isinstance(value, dict):
        return tuple(sorted((k, freeze(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    return value
