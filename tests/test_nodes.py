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
    else:  # the new name's row alone: no other name is numbered again (Note [Numbers that stay])
        gone, came = (con.execute(f"SELECT name FROM {t}").fetchall() for t in got)
        assert gone == [] and came == [(new[1],)]
        assert set(before) < set(_numbered(con))


def test_numbers_are_buckets_of_the_md5_and_ranks_in_them():
    """Note [Numbers that stay]: a name's number is the first 28 bits of its
    name's MD5, times 8, plus its rank in its bucket; names sharing a bucket
    take 8k, 8k + 1, … in byte order, and a new one moves only those after it."""
    import hashlib

    from torchtalk.datalog import parse_file
    from torchtalk.store import SCHEMA_PATH

    decls = parse_file(SCHEMA_PATH).decls
    con = build_db()
    for name, number in _numbered(con):
        assert number == int(hashlib.md5(name.encode()).hexdigest()[:7], 16) * 8
    # two names of one bucket (found by search: the first 7 hex digits of their MD5 agree)
    low, high = _same_bucket()
    number_nodes(con, decls, None, _apply(con, "calls", [], [(CALL[0], high, *CALL[2:])]))
    first = dict(_numbered(con))
    assert first[high] % 8 == 0
    deltas = _apply(con, "calls", [], [(CALL[0], low, *CALL[2:])])
    gone, came = (dict(con.execute(f"SELECT name, id FROM {t}").fetchall())
                  for t in number_nodes(con, decls, None, deltas))
    after = dict(_numbered(con))
    assert (after[low], after[high]) == (first[high], first[high] + 1)
    assert gone == {high: first[high]} and came == {low: first[high], high: first[high] + 1}
    assert {n: i for n, i in after.items() if n not in (low, high)} == {
        n: i for n, i in first.items() if n != high}
    # the lower one goes (no table holds it): the higher one takes its number back, and no other name
    # moves (Note [Buckets numbered again]); every number is the one a numbering from scratch gives
    deltas = _apply(con, "calls", [(CALL[0], low, *CALL[2:])], [])
    gone, came = (dict(con.execute(f"SELECT name, id FROM {t}").fetchall())
                  for t in number_nodes(con, decls, None, deltas))
    assert gone == {low: first[high], high: first[high] + 1} and came == {high: first[high]}
    assert dict(_numbered(con)) == first
    again = build_db()
    again.execute("INSERT INTO calls VALUES (?, ?, ?, ?, ?)", [CALL[0], high, *CALL[2:]])
    number_nodes(again, decls, None)
    assert _numbered(con) == _numbered(again)


def _same_bucket() -> tuple[str, str]:
    """Two names whose MD5s agree in their first 7 hex digits, in byte order."""
    import hashlib

    seen: dict[str, str] = {}
    for i in range(1 << 20):
        name = f"at::native::tt_bucket_{i}"
        other = seen.setdefault(hashlib.md5(name.encode()).hexdigest()[:7], name)
        if other != name:
            return tuple(sorted((other, name), key=str.encode))
    raise AssertionError("no two names share a bucket")
