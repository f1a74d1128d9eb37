"""Updating a fact DB in place: the rows a re-run layer changed, not a rebuild.

Note [Update in place]: when the DB is current but for the inputs of a few
layers (same schema, source and format, and its facts dir is the one it was
built with: `facts_id` in both), `torchtalk index` re-runs those layers as
before, then, instead of loading every fact file into a new DB:
  1. takes each re-run layer's changes per relation: its deltas (Note [Layer
     deltas]) or, for a layer that wrote all its rows, the lines its new
     files gained and lost against its previous ones;
  2. copies the DB file (a plain copy: ~60 MB in 0.05 s) and, in one
     transaction on the copy, deletes the lost rows (as many copies as were
     lost: a relation several layers write is their multiset union), inserts
     the gained ones, updates the row counts, the re-run layers' rows and
     warnings and the meta, and recomputes the stored relations that read a
     changed relation (Note [Derived in place]); the lookup indexes follow
     the rows (DuckDB maintains them);
  3. rebuilds the union fact file of each changed relation only (the others
     are hard-linked), and swaps DB and facts dir in as a full index does
     (Note [Index steps]).
Readers never see a half-updated DB: the copy is renamed over the file (the
MCP server reopens on a new file identity, Note [Serving while indexing]),
and a killed update leaves the previous DB and facts dir as they were. The
result equals a cold index, table by table (tests/test_incremental.py).
"""

from __future__ import annotations

import hashlib
import shutil
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from torchtalk import store
from torchtalk.atomic import link_tree
from torchtalk.nodes import NODE_TYPES, node_columns, number_nodes
from torchtalk.nodes import RELATION as NODES
from torchtalk.sink import fact_lines

FACTS_ID = "facts_id"  # the file in the facts dir, and the meta key, that tie them together

Deltas = dict[str, tuple[list[str], list[str]]]  # relation -> (lines lost, lines gained)


def facts_id(facts: Path) -> str | None:
    """The id of the facts dir `facts` (None for one written before ids)."""
    try:
        return (facts / FACTS_ID).read_text().strip() or None
    except OSError:
        return None


def updatable(con, facts: Path, schema_digest: str, source: str) -> bool:
    """Whether the DB of `con` can be updated in place (Note [Update in place])."""
    meta = store.read_meta(con)
    return (meta.get("schema_hash") == schema_digest and meta.get("source") == source
            and meta.get("format") == store.FORMAT and meta.get(FACTS_ID) is not None
            and meta.get(FACTS_ID) == facts_id(facts))


def layer_deltas(sink, old_dir: Path, new_dir: Path, into: Deltas) -> None:
    """Add what a re-run layer changed to `into`: its sink's deltas, and for
    the relations it wrote in full, the lines its files lost and gained."""
    full = set(sink.allowed) if sink.deltas is None else set(sink._files)
    for rel, (gone, new) in (sink.deltas or {}).items():
        _add(into, rel, gone, new)
    for rel in sorted(full):
        old, new = old_dir / f"{rel}.facts", new_dir / f"{rel}.facts"
        if _same_file(old, new):
            continue
        before, after = Counter(fact_lines(old)), Counter(fact_lines(new))
        _add(into, rel, list((before - after).elements()), list((after - before).elements()))


def _add(into: Deltas, rel: str, gone: list[str], new: list[str]) -> None:
    if gone or new:
        g, n = into.setdefault(rel, ([], []))
        g.extend(gone)
        n.extend(new)


def changed_relations(deltas: Deltas) -> frozenset[str]:
    """The relations whose rows changed (a line lost by one layer and gained
    by another changes nothing)."""
    return frozenset(rel for rel, (gone, new) in deltas.items() if Counter(gone) != Counter(new))


def _same_file(a: Path, b: Path) -> bool:
    ea, eb = a.is_file(), b.is_file()
    if not (ea and eb):
        return not ea and not eb or (ea and a.stat().st_size == 0) or (eb and b.stat().st_size == 0)
    if a.stat().st_size != b.stat().st_size:
        return False
    return a.read_bytes() == b.read_bytes()



def carry_layers(facts: Path, tmp_facts: Path, names: list[str]) -> None:
    for name in names:
        link_tree(facts / "layers" / name, tmp_facts / "layers" / name)


def layer_rows(layers: list[dict]) -> list[tuple]:
    """The torchtalk_layers rows of the layers' layer.json."""
    return [(m["layer"], m["indexed_at"], m["seconds"], sum(m["rows"].values()), len(m["warnings"]),
             m["input_fingerprint"]) for m in layers]


def apply(tmp_db: Path, src: store.Source, schema, deltas: Deltas, tmp_facts: Path, new_id: str,
          layers: list[dict], log) -> str:
    """Apply `deltas` to the copy `tmp_db` in one transaction (Note [Update
    in place]); `layers`: the layer.json of every layer of the new facts
    dir. -> the note on its stored relations."""
    import duckdb

    from torchtalk.query.derived import FactMoves

    changed = changed_relations(deltas)
    con = duckdb.connect(str(tmp_db))
    try:
        con.execute("BEGIN TRANSACTION")
        temps = {rel: _apply_relation(con, schema.decls[rel], *deltas[rel], tmp_facts / ".delta", f"_{i}")
                 for i, rel in enumerate(sorted(changed))}
        # each relation's rows now: as many as before, less those deleted (each found), plus those inserted
        if temps:  # DuckDB's executemany takes no empty list (a layer ran again, and no row changed)
            held = dict(con.execute("SELECT relation, rows FROM torchtalk_relations").fetchall())
            con.executemany("UPDATE torchtalk_relations SET rows = ? WHERE relation = ?",
                            [(held[rel] - len(deltas[rel][0]) + len(deltas[rel][1]), rel) for rel in sorted(temps)])
        nodes = None  # Note [Node numbers]: the names that came or went
        if changed & {rel for rel, _ in node_columns(schema.decls)}:
            nodes = number_nodes(con, schema.decls, tmp_facts, temps)
        keyed = {}  # Note [Names that come and go]
        if nodes is not None:
            temps[NODES] = nodes
            changed |= {NODES}
            if not con.execute(f"SELECT EXISTS (SELECT name FROM {nodes[0]} INTERSECT SELECT name FROM {nodes[1]})"
                               ).fetchone()[0]:  # no name renumbered: names came or went
                keyed[NODES] = (0, frozenset(NODE_TYPES))
        con.execute("DELETE FROM torchtalk_layers")
        con.executemany("insert into torchtalk_layers values (?, ?, ?, ?, ?, ?)", layer_rows(layers))
        con.execute("DELETE FROM torchtalk_warnings")
        warns = [(m["layer"], f, ln, msg) for m in layers for f, ln, msg in m["warnings"]]
        if warns:
            con.executemany("insert into torchtalk_warnings values (?, ?, ?, ?)", warns)
        meta = {"fingerprint": hashlib.sha1("".join(m["input_fingerprint"] for m in layers).encode()).hexdigest(),
                "git_commit": src.git_commit(), "indexed_at": datetime.now(UTC).isoformat(timespec="seconds"),
                FACTS_ID: new_id}
        con.executemany("UPDATE torchtalk_meta SET value = ? WHERE key = ?", [(v, k) for k, v in meta.items()])
        con.execute("COMMIT")
        # the copy is private until renamed: the stored relations may commit apart
        moves = FactMoves(con, schema.decls, temps, {rel: deltas[rel] for rel in temps if rel in deltas})
        note = _refresh_derived(con, changed, moves.moved, log, moves.values, keyed, temps.__getitem__)
        con.execute("checkpoint")
    finally:
        con.close()
    return note


def _apply_relation(con, decl, gone: list[str], new: list[str], work: Path, tag: str = "") -> tuple[str, str]:
    """Delete the lines `gone` (one row per line) from `decl`'s table and
    insert `new` (its count in torchtalk_relations is the caller's); -> the
    temp tables holding them (for `FactMoves`)."""
    from torchtalk.errors import StoreError

    name = decl.name
    cols = [store.quote(c.name) for c in decl.columns]
    gone_t, new_t = f"_tt_gone{tag}", f"_tt_new{tag}"
    _rows_table(con, decl, gone_t, gone, work / f"{name}.gone")
    _rows_table(con, decl, new_t, new, work / f"{name}.new")
    if gone:
        on = " AND ".join(f"t.{c} = g.{c}" for c in cols)
        part = ", ".join(f"t.{c}" for c in cols)
        n = con.execute(
            f'DELETE FROM "{name}" WHERE rowid IN (SELECT _rid FROM (SELECT t.rowid AS _rid, g._tt_n, '
            f'row_number() OVER (PARTITION BY {part}) AS _k FROM "{name}" t JOIN '
            f"(SELECT *, count(*) AS _tt_n FROM {gone_t} GROUP BY ALL) g ON {on}) WHERE _k <= _tt_n)").fetchone()[0]
        if n != len(gone):  # the DB is not what the layer files say: a full index rebuilds it
            raise StoreError(f"relation {name}: {len(gone)} rows to delete, {n} found",
                             hint="re-run `torchtalk index --force`")
    if new:
        con.execute(f'INSERT INTO "{name}" SELECT * FROM {new_t}')
    return gone_t, new_t


def _rows_table(con, decl, table: str, lines: list[str], path: Path) -> None:
    """Temp table `table` of the fact-file `lines` of `decl` (typed as its table)."""
    if not lines:
        con.execute(f'CREATE OR REPLACE TEMP TABLE {table} AS SELECT * FROM "{decl.name}" LIMIT 0')
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(lines), encoding="utf-8")
    con.execute(f"CREATE OR REPLACE TEMP TABLE {table} AS SELECT * FROM {store.read_csv_sql(decl)}",
                [str(path), "\t"])


def _refresh_derived(con, changed: frozenset[str], moved, log, values=None, keyed=None, deltas=None) -> str:
    """Recompute the stored relations that read a changed relation (Note
    [Derived in place]), those whose rows changed in some files (or at some
    ops) only there (Note [Rows changed by file]); a failure leaves them
    out, as at a full index."""
    import duckdb

    from torchtalk.errors import TorchTalkError
    from torchtalk.query.derived import SCHEMA, refresh
    from torchtalk.query.library import load_library

    t = time.perf_counter()
    rows = dict(con.execute("SELECT relation, rows FROM torchtalk_relations").fetchall())
    tables = frozenset(rows)
    empty = frozenset(r for r, n in rows.items() if n == 0 and r not in changed)  # before and after
    con.execute("BEGIN TRANSACTION")
    try:
        by_part: dict[str, tuple[str, int]] = {}
        counts = refresh(con, load_library(user=False), tables, changed, moved, empty, values, by_part, keyed,
                         deltas)
    except (TorchTalkError, duckdb.Error) as exc:
        con.execute("ROLLBACK")
        what = exc.headline() if isinstance(exc, TorchTalkError) else str(exc).splitlines()[0]
        con.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
        note = f"not stored ({what})"
    else:
        con.execute("COMMIT")
        total = con.execute(f"SELECT count(*), sum(rows) FROM {SCHEMA}.catalog").fetchone()
        note = f"{total[0]} relations, {total[1]} rows, {time.perf_counter() - t:.2f} s"
        if counts:
            log(f"stored relations recomputed in {time.perf_counter() - t:.2f} s: {', '.join(sorted(counts))}")
        if by_part:
            log("… at the changed files, ops or other values only: " + ", ".join(
                f"{rel} ({n} {name}{'s' if n != 1 else ''})" for rel, (name, n) in sorted(by_part.items())))
    con.execute("UPDATE torchtalk_meta SET value = ? WHERE key = 'derived'", [note])
    return note


def copy_db(db_path: Path, tmp_db: Path) -> None:
    """The DB file copied to `tmp_db` (its WAL is empty: every writer checkpoints)."""
    shutil.copyfile(db_path, tmp_db)
