"""`get_status`: what the server can answer from, and what is still missing.

Rows are one per extractor layer: its state ("indexed", "empty", "building"),
its rows, and the relations it wrote; notes carry the tree, the DB and the
background index (see Note [Serving while indexing]).
"""

from __future__ import annotations

from typing import Any

from torchtalk.lookup import Table, tables


def _row_counts(con) -> dict[str, int]:
    if con is None:
        return {}
    present = tables(con)
    from extractors.layers import LAYERS

    names = sorted({r for layer in LAYERS for r in layer.relations} & present)
    if not names:
        return {}
    sql = " UNION ALL ".join(f"SELECT '{n}', count(*) FROM \"{n}\"" for n in names)
    return dict(con.execute(sql).fetchall())


def _meta_notes(app: Any, con) -> list[str]:
    """Tree, version, DB path from the facade's status, when it can tell."""
    from torchtalk import api

    path = app.db.path()
    if con is None:
        return [f"no fact database yet for {app.db.source or app.db.explicit}"]
    notes = [f"database: {path}"]
    status = getattr(api, "status", None)
    if status is None:
        return notes
    try:
        info = status(db=path, con=con)
    except TypeError:
        info = status(db=path)
    for key in ("source", "version", "commit"):
        value = info.get(key) if isinstance(info, dict) else getattr(info, key, None)
        if value:
            notes.append(f"{key}: {value}")
    return notes


def status_table(app: Any, con) -> Table:
    """One row per layer with its state and rows; notes: tree, DB, background index."""
    from extractors.layers import LAYERS

    counts = _row_counts(con)
    state = app.indexer.state if app.indexer is not None else None
    rows = []
    for layer in LAYERS:
        n = sum(counts.get(r, 0) for r in layer.relations)
        filled = [f"{r}={counts[r]}" for r in layer.relations if counts.get(r)]
        what = "indexed" if n else ("optional, not indexed" if layer.optional else "not indexed")
        if not n and state is not None and state.stage:
            what = "building"
        rows.append((layer.name, what, n, ", ".join(filled)))
    notes = _meta_notes(app, con)
    if state is not None and state.stage:
        notes.append(f"indexing in the background: {state.stage} (pid {state.pid}, log {state.log})")
    if state is not None and state.failed:
        notes.append(f"background index failed: {state.failed}")
    missing = [r[0] for r in rows if r[2] == 0 and r[1] != "optional, not indexed"]
    if missing:
        notes.append("answers use what is indexed; missing layers: " + ", ".join(missing))
    cols = ("layer", "state", "rows", "relations")
    return Table("TorchTalk index", cols, tuple(rows), len(rows), tuple(notes))
