"""The code graph's node numbers: a fact the index writes, not an extractor.

Note [Node numbers]: the walks of rules/graph.dl join and deduplicate node
numbers, not names (3x faster). A number must mean the same node on every
engine and in every run: Soufflé's `ord(s)` is the index of s in the symbol
table of its own run, and DuckDB has no symbol table, so neither can number
nodes that a stored relation and a query both use. The index therefore
writes relation `node(name, id)` itself (facts/schema.dl): every symbol of a
fact column typed `FnId` or `StubName` (the only values a step of the code
graph can start or end at) gets a number that the set of names alone gives,
so the same facts give the same numbers. The rules read it as any other
fact, on DuckDB and on Soufflé (`node.facts` in the facts dir);
tests/test_nodes_real.py checks that every end of a `step` has a number.

Note [Numbers that stay]: a name's number is its bucket, the first 28 bits
of the MD5 of its name, times 8, plus its rank in byte order among the
names of its bucket (BUCKET_BITS, PER_BUCKET). Numbers fit Soufflé's 32-bit
`number` (below 2^31), and a name that comes or goes moves no other name's
number but for the names after it in its own bucket: on the 2.6.0 tree,
4 of the 2^28 buckets hold two of its 53,607 names, none more (5 expected).
(Numbering 0, 1, 2, … in name order, as before, renumbered every name after
a new one: for the bench's at::native::cpublas::tt_probe, 35,681 of 53,607,
all deleted from `node` and inserted again, and every stored relation that
reads `node` saw it changed.) So an update that brings names or loses them
changes `node` by those names' rows only, and a stored relation that reads
a name's number only where another fact relation holds the name sees that
change through that relation (Note [Names that come and go] in
torchtalk/query/derived.py). A bucket of more than 8 names is an error, not
a wrong number: 53K names make one about 10^-30 likely.
"""

from __future__ import annotations

from pathlib import Path

RELATION = "node"
NODE_TYPES = ("FnId", "StubName")
BUCKET_BITS = 28  # Note [Numbers that stay]: 2^28 buckets of 8 numbers, all below 2^31
PER_BUCKET = 8


def node_columns(decls) -> list[tuple[str, str]]:
    """(relation, column) of every fact column whose values are nodes
    (`decls`: the schema's declarations by relation)."""
    return [(rel, c.name) for rel, decl in decls.items() if rel != RELATION
            for c in decl.columns if c.type_name in NODE_TYPES]


def number_nodes(con, decls, facts: Path | None, deltas: dict[str, tuple[str, str]] | None = None,
                 ) -> tuple[str, str] | None:
    """Bring table `node` (and `facts/node.facts`, unless `facts` is None) to
    the node names of the fact tables of `con` (writable, in the caller's
    transaction; `decls`: the schema's declarations by relation). `deltas`:
    when the tables are those of an update, relation -> the temp tables of
    the rows it deleted and inserted, every change it made (Note [Names
    that stay]). -> the temp tables of the rows `node` lost and gained
    (what update's `_moved` reads), or None when it is unchanged."""
    from torchtalk.datalog.io import copy_rows
    from torchtalk.errors import StoreError
    from torchtalk.store import quote

    if not node_columns(decls):
        raise StoreError(f"no fact column is of a node type ({', '.join(NODE_TYPES)})",
                         hint="facts/schema.dl declares them (Note [Node numbers])")
    if deltas is not None and _names_stay(con, decls, deltas):
        return None
    # the first 7 hex digits of the MD5: the bucket (Note [Numbers that stay])
    bucket = f"CAST(('0x' || left(md5(name), {BUCKET_BITS // 4})) AS BIGINT)"
    if deltas is None:
        names = " UNION ".join(f"SELECT {quote(c)} AS name FROM {quote(r)}" for r, c in node_columns(decls))
        old = RELATION
    else:  # Note [Buckets numbered again]
        names, old = _names_of_moved_buckets(con, decls, deltas, bucket)
    ranked = (f"SELECT name, bucket, row_number() OVER (PARTITION BY bucket ORDER BY name) AS _rank "
              f"FROM (SELECT name, {bucket} AS bucket FROM ({names}) WHERE name IS NOT NULL)")
    con.execute(f"CREATE OR REPLACE TEMP TABLE _tt_node_now AS "
                f"SELECT name, bucket * {PER_BUCKET} + _rank - 1 AS id, _rank FROM ({ranked})")
    full = con.execute(f"SELECT min(name), max(name), count(*) FROM _tt_node_now WHERE _rank > {PER_BUCKET} "
                       f"OR id >= {2**31}").fetchone()
    if full[2]:
        con.execute("DROP TABLE _tt_node_now")
        raise StoreError(f"more than {PER_BUCKET} node names share a number bucket ({full[0]!r} … {full[1]!r})",
                         hint="report it (Note [Numbers that stay] in torchtalk/nodes.py)")
    con.execute("ALTER TABLE _tt_node_now DROP COLUMN _rank")
    gone, new = "_tt_gone_node", "_tt_new_node"
    con.execute(f"CREATE OR REPLACE TEMP TABLE {gone} AS SELECT * FROM {old} EXCEPT SELECT * FROM _tt_node_now")
    con.execute(f"CREATE OR REPLACE TEMP TABLE {new} AS SELECT * FROM _tt_node_now EXCEPT SELECT * FROM {old}")
    con.execute("DROP TABLE _tt_node_now")
    if old != RELATION:
        for t in (old, "_tt_node_came", "_tt_node_went"):
            con.execute(f"DROP TABLE {t}")
    if not any(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in (gone, new)):
        return None
    con.execute(f"DELETE FROM {RELATION} WHERE name IN (SELECT name FROM {gone})")
    con.execute(f"INSERT INTO {RELATION} SELECT * FROM {new}")
    (rows,) = con.execute(f"SELECT count(*) FROM {RELATION}").fetchone()
    con.execute("UPDATE torchtalk_relations SET rows = ? WHERE relation = ?", [rows, RELATION])
    if facts is None:
        return gone, new
    # a new file (copy_rows renames it in): the old one may be hard-linked
    copy_rows(con, f"SELECT * FROM {RELATION} ORDER BY name", facts / f"{RELATION}.facts")
    return gone, new


# Note [Buckets numbered again]: when an update brings names or loses
# some, a name's number moves only if it shares a bucket with one of them
# (Note [Numbers that stay]). So `node` is numbered again in those buckets
# only, from the names it had there, less those no table holds now, and
# the names that came: the names that came are those of the inserted rows
# that `node` lacks; those that went, the names of the deleted rows, not of
# the inserted ones, that no fact table holds (a semi-join of each node
# column with those few names, not the union of every name: the numbering
# of a new C++ function's update took 0.14 s, its MD5s and ranks of 53,000
# names). The rows equal a numbering of every name (tests/test_nodes_real.py).
def _names_of_moved_buckets(con, decls, deltas: dict[str, tuple[str, str]], bucket: str) -> tuple[str, str]:
    """(the SELECT of the names of the buckets an update moved, the temp
    table of `node`'s rows of those buckets before it)."""
    from torchtalk.store import quote

    came, left = _moved_names(decls, deltas)
    con.execute(f"CREATE OR REPLACE TEMP TABLE _tt_node_came AS {came}")
    held = " AND ".join(f"NOT EXISTS (SELECT 1 FROM {quote(r)} t WHERE t.{quote(c)} = g.name)"
                        for r, c in node_columns(decls))
    con.execute(f"CREATE OR REPLACE TEMP TABLE _tt_node_went AS SELECT name FROM ({left}) g WHERE {held}")
    con.execute(f"CREATE OR REPLACE TEMP TABLE _tt_node_was AS SELECT * FROM {RELATION} WHERE id // {PER_BUCKET} IN "
                f"(SELECT {bucket} FROM (SELECT name FROM _tt_node_came UNION SELECT name FROM _tt_node_went))")
    return ("SELECT name FROM _tt_node_was WHERE name NOT IN (SELECT name FROM _tt_node_went) "
            "UNION SELECT name FROM _tt_node_came"), "_tt_node_was"


# Note [Names that stay]: numbering the nodes reads every node column of
# every fact table (40-50 ms on the 2.6.0 tree), after each
# update that changed a relation with one. Most updates bring no name and
# lose none: a body edit moves its calls' lines. The names are the union
# of the tables' node columns, so when every name of the inserted rows is
# numbered already, and every name of the deleted rows is among the
# inserted rows' names, the union is as it was, whatever the other tables
# hold; the check reads the changed rows only. Otherwise the names are
# found again from every table.
def _names_stay(con, decls, deltas: dict[str, tuple[str, str]]) -> bool:
    """Whether the update whose changed rows are `deltas` (relation ->
    (deleted, inserted) temp tables) leaves the node names as they were."""
    if not any(r in deltas for r, _c in node_columns(decls)):
        return True
    came, left = _moved_names(decls, deltas)
    return not con.execute(f"SELECT EXISTS ({came}) OR EXISTS ({left})").fetchone()[0]


def _moved_names(decls, deltas: dict[str, tuple[str, str]]) -> tuple[str, str]:
    """The SELECTs of the names of the rows an update inserted that `node`
    lacks, and of the names of the rows it deleted, not of those it
    inserted (which other rows may hold still)."""
    from torchtalk.store import quote

    cols = [(r, c) for r, c in node_columns(decls) if r in deltas]

    def names(side: int) -> str:
        return " UNION ".join(f"SELECT {quote(c)} AS name FROM {deltas[r][side]}" for r, c in cols)

    came = (f"SELECT name FROM ({names(1)}) n WHERE name IS NOT NULL AND NOT EXISTS "
            f"(SELECT 1 FROM {RELATION} k WHERE k.name = n.name)")
    return came, f"SELECT name FROM ({names(0)}) WHERE name IS NOT NULL EXCEPT SELECT name FROM ({names(1)})"
