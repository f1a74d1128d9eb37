"""The code graph's node numbers: a fact the index writes, not an extractor.

Note [Node numbers]: the walks of rules/graph.dl join and deduplicate node
numbers, not names (3x faster). A number must mean the same node on every
engine and in every run: Soufflé's `ord(s)` is the index of s in the symbol
table of its own run, and DuckDB has no symbol table, so neither can number
nodes that a stored relation and a query both use. The index therefore
writes relation `node(name, id)` itself (facts/schema.dl): every symbol of a
fact column typed `FnId` or `StubName` (the only values a step of the code
graph can start or end at), numbered 0, 1, 2, … in the byte order of the
names. Dense numbers fit Soufflé's 32-bit `number` (a hash of 53K names
would not fit without collisions), and the same facts give the same numbers.
A name that comes or goes renumbers the names after it: an update in place
then recomputes the stored relations that read `node`. The rules read it as
any other fact, on DuckDB and on Soufflé (`node.facts` in the facts dir);
tests/test_nodes_real.py checks that every end of a `step` has a number.
"""

from __future__ import annotations

from pathlib import Path

RELATION = "node"
NODE_TYPES = ("FnId", "StubName")


def node_columns(decls) -> list[tuple[str, str]]:
    """(relation, column) of every fact column whose values are nodes
    (`decls`: the schema's declarations by relation)."""
    return [(rel, c.name) for rel, decl in decls.items() if rel != RELATION
            for c in decl.columns if c.type_name in NODE_TYPES]


def number_nodes(con, decls, facts: Path | None) -> tuple[str, str] | None:
    """Bring table `node` (and `facts/node.facts`, unless `facts` is None) to
    the node names of the fact tables of `con` (writable, in the caller's
    transaction; `decls`: the schema's declarations by relation). -> the temp
    tables of the rows it lost and gained (what update's `_moved` reads), or
    None when it is unchanged."""
    from torchtalk.datalog.io import copy_rows
    from torchtalk.errors import StoreError
    from torchtalk.store import quote

    if not node_columns(decls):
        raise StoreError(f"no fact column is of a node type ({', '.join(NODE_TYPES)})",
                         hint="facts/schema.dl declares them (Note [Node numbers])")
    names = " UNION ".join(f"SELECT {quote(c)} AS name FROM {quote(r)}" for r, c in node_columns(decls))
    con.execute("CREATE OR REPLACE TEMP TABLE _tt_node_now AS SELECT name, "
                f"CAST(row_number() OVER (ORDER BY name) - 1 AS BIGINT) AS id "
                f"FROM ({names}) WHERE name IS NOT NULL")
    gone, new = "_tt_gone_node", "_tt_new_node"
    con.execute(f"CREATE OR REPLACE TEMP TABLE {gone} AS SELECT * FROM {RELATION} EXCEPT SELECT * FROM _tt_node_now")
    con.execute(f"CREATE OR REPLACE TEMP TABLE {new} AS SELECT * FROM _tt_node_now EXCEPT SELECT * FROM {RELATION}")
    con.execute("DROP TABLE _tt_node_now")
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
