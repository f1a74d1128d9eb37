"""`get_status`: what the server can answer from, and what is still missing.

Rows are one per extractor layer: its state ("indexed", "not indexed",
"building", "optional, not indexed"),
its rows, and the relations it wrote; notes carry the tree, the DB and the
background index (see Note [Serving while indexing]).
"""

from __future__ import annotations

from typing import Any

from torchtalk.lookup import Table, db_info, meta
from torchtalk.store import tier_note


def _meta_notes(app: Any, con) -> list[str]:
    """Tree, version, commit, DB path."""
    if con is None:
        return [f"no fact database yet for {app.db.source or app.db.explicit}"]
    info = meta(con)
    notes = [f"{key}: {info[key]}" for key in ("source", "version", "git_commit", "indexed_at") if info.get(key)]
    return notes + [f"database: {app.db.path()}"]


def _watch_note(app: Any, state) -> str:
    """What the watcher (Note [Watching]) has pending."""
    import time

    from torchtalk.watch import describe

    where = f"watching {app.indexer.source} for changes"
    if not state.pending:
        return where + ": nothing pending"
    age = f", first {time.time() - state.pending_since:.1f} s ago" if state.pending_since else ""
    return f"{where}: {len(state.pending)} changed files pending ({describe(state.pending)}{age})"


def status_table(app: Any, con) -> Table:
    """One row per layer with its state and rows; notes: tree, DB, background index."""
    from extractors.layers import LAYERS

    counts = db_info(con).rows if con is not None else {}
    done = db_info(con).layers if con is not None else None
    state = app.indexer.state if app.indexer is not None else None
    rows = []
    for layer in LAYERS:
        n = sum(counts.get(r, 0) for r in layer.relations)
        filled = [f"{r}={counts[r]}" for r in layer.relations if counts.get(r)]
        indexed = layer.name in done if done is not None else n > 0
        what = "indexed" if indexed else ("optional, not indexed" if layer.optional else "not indexed")
        if not indexed and state is not None and state.stage:
            what = "building"
        rows.append((layer.name, what, n, ", ".join(filled)))
    notes = _meta_notes(app, con)
    tiers = tier_note(counts)
    if tiers:
        notes.append(tiers)
    if state is not None and state.stage:
        pid = f"pid {state.pid}, " if state.pid is not None else ""
        notes.append(f"indexing in the background: {state.stage} ({pid}log {state.log})")
    if state is not None and state.watching:
        notes.append(_watch_note(app, state))
    if state is not None and state.compiler:
        notes.append(f"in the background: {state.compiler}")
    if state is not None and state.failed:
        notes.append(f"background index failed: {state.failed}")
    missing = [r[0] for r in rows if r[1] in ("not indexed", "building")]
    if missing:
        notes.append("answers use what is indexed; missing layers: " + ", ".join(missing))
    if con is not None and hasattr(app.db, "in_use"):  # a leak would show here (Note [Stopped calls])
        from torchtalk.mcp.db import POOL_SIZE

        leased, open_ = app.db.in_use()
        notes.append(f"connections: {leased} in use (this call's included), {open_} open, at most {POOL_SIZE}")
    if hasattr(app.db, "warm_note"):
        notes.append(app.db.warm_note())
    if getattr(app, "slow", None) is not None:
        notes.append(app.slow.note())
    cols = ("layer", "state", "rows", "relations")
    return Table("TorchTalk index", cols, tuple(rows), len(rows), tuple(notes))
