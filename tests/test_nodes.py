"""Node numbers after an update (Note [Node numbers], Note [Names that
stay] in torchtalk/nodes.py): the changed rows alone say when the names
stay; whatever they say, `node` equals a numbering from scratch."""

from __future__ import annotations

import pytest
from test_query import build_db

from torchtalk.nodes import RELATION, number_nodes


def _apply(con, rel: str, gone: list[tuple], new: list[tuple]) -> dict[str, tuple[str, str]]:
    """Delete `gone` from and insert `new` into `rel`, as an update does: -> its temp tables."""
    for side, rows in (("gone", gone), ("new", new)):
        con.execute(f"CREATE OR REPLACE TEMP TABLE _t_{side} AS SELECT * FROM {rel} LIMIT 0")
        if rows:
            con.executemany(f"INSERT INTO _t_{side} VALUES ({', '.join('?' * len(rows[0]))})", rows)
    for row in gone:
        con.execute(f"DELETE FROM {rel} WHERE caller = ? AND callee = ? AND line = ?", [row[0], row[1], row[3]])
    if new:
        con.execute(f"INSERT INTO {rel} SELECT * FROM _t_new")
    return {rel: ("_t_gone", "_t_new")}


def _numbered(con) -> list[tuple]:
    return con.execute(f"SELECT name, id FROM {RELATION} ORDER BY id").fetchall()


CALL = ("at::native::matmul", "at::native::_matmul_impl", "aten/src/ATen/native/LinearAlgebra.cpp", 2183, "qualified")


@pytest.mark.parametrize("case, new, stays, seen", [
    ("a line moved", (*CALL[:3], 2184, CALL[4]), True, True),
    ("a new callee", (CALL[0], "at::native::tt_new_callee", *CALL[2:]), False, False),
    # _matmul_impl leaves calls but stays in func: only all the tables can say
    ("a callee gone from calls, defined still", (CALL[0], "at::native::cpublas::gemm", *CALL[2:]), True, False),
])
def test_an_update_renumbers_only_when_names_come_or_go(case, new, stays, seen):
    """`seen`: the changed rows alone show the names stay."""
    from torchtalk.datalog import parse_file
    from torchtalk.nodes import _names_stay
    from torchtalk.store import SCHEMA_PATH

    decls = parse_file(SCHEMA_PATH).decls
    con = build_db()
    before = _numbered(con)
    deltas = _apply(con, "calls", [CALL], [new])
    assert _names_stay(con, decls, deltas) is seen
    got = number_nodes(con, decls, None, deltas)
    again = build_db()  # the same rows, numbered from scratch
    again.execute("DELETE FROM calls WHERE caller = ? AND callee = ? AND line = ?", [CALL[0], CALL[1], CALL[3]])
    again.execute("INSERT INTO calls VALUES (?, ?, ?, ?, ?)", list(new))
    number_nodes(again, decls, None)
    assert _numbered(con) == _numbered(again)
    if stays:
        assert got is None and _numbered(con) == before
    else:
        assert got is not None and new[1] in {n for n, _ in _numbered(con)}
