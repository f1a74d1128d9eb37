"""The queries a server answered on a DB, kept for the next server's warm-up.

Note [Warm from history]: the first call of a query shape in a process pays
for planning its rules (Note [Plans by rule] in
torchtalk/datalog/engines/memrule.py) and for the hash indexes its joins
build on the tables (Note [Frozen tables] in memory.py): impact(gemm,
depth=4) 135 ms the first time against 40 after, called_by(mm) 150 against
5 (58 ms planning and 71 ms of indexes). Warming the few query kinds of
Note [Warm queries] covers those kinds on one op; an agent's own questions
have other shapes. So each server writes the DSL texts evaluated on its
pooled connections (`Session.history`: the MCP tools', and a `torchtalk
query` it serves, Note [Query server] in torchtalk/qserver.py; the last
KEPT distinct ones, most recent last) next to the DB, and the next server
on that DB runs them in its warm thread, after the fixed ones:
a question asked in an earlier session finds its plans and indexes ready.
Nothing of the answers is kept (the answer cache is per process, Note
[Answer cache]); a text that fails is only dropped.

The file is a cache: written whole (atomic), a line per text; one that
cannot be read is taken as empty. TORCHTALK_MCP_HISTORY=0 turns both the
writing and the replay off.
"""

from __future__ import annotations

import threading
from pathlib import Path

from torchtalk.paths import switched_on

KEPT = 48  # distinct texts kept per DB
MAX_TEXT = 2000  # a longer text is not kept (a generated one: not a question)
SUFFIX = ".queries"

_LOCK = threading.Lock()
_SEEN: dict[Path, dict[str, None]] = {}  # per history file: the texts, most recent last


def history_path(db: Path) -> Path:
    """Where the history of DB file `db` is kept: beside it."""
    return db.with_name(db.stem + SUFFIX)


def enabled() -> bool:
    return switched_on("TORCHTALK_MCP_HISTORY")


def recent(db: Path) -> list[str]:
    """The texts kept for `db`, most recent first ([] when none can be read)."""
    if not enabled():
        return []
    try:
        lines = history_path(db).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    texts = [t for t in lines if t.strip() and len(t) <= MAX_TEXT]
    return list(dict.fromkeys(reversed(texts[-KEPT:])))


def record(db: Path | None, text: str) -> None:
    """Keep `text`, a DSL text a server evaluated on `db`: the file is written
    again only when the text is new here or not the most recent already."""
    if db is None or not enabled() or "\n" in text or len(text) > MAX_TEXT:
        return
    path = history_path(db)
    with _LOCK:
        seen = _SEEN.get(path)
        if seen is None:
            seen = _SEEN[path] = dict.fromkeys(reversed(recent(db)))
        if seen and next(reversed(seen)) == text:
            return
        seen.pop(text, None)
        seen[text] = None
        while len(seen) > KEPT:
            del seen[next(iter(seen))]
        lines = "".join(t + "\n" for t in seen)
    try:
        from torchtalk.atomic import atomic_open

        with atomic_open(path, "w") as f:
            f.write(lines)
    except OSError:  # a read-only DB dir: nothing kept, nothing lost
        pass
