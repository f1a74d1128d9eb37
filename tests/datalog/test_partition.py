"""Stored relations updated in the changed files only (Note [Rows changed by
file] in torchtalk/datalog/analysis/partition.py): which relations may be,
the program that computes their rows of some files, and an update in place
that gives what computing them whole gives."""

from __future__ import annotations

import duckdb
import pytest

from torchtalk.datalog.analysis.partition import partition_sources
from torchtalk.datalog.parser import parse_text
from torchtalk.datalog.transform.restrict import restrict
from torchtalk.query.derived import materialize, moved_rows, moved_values, refresh, table_of

LIB = """
.decl calls(a: symbol, b: symbol, file: symbol, line: number)
.input calls
.decl kind(a: symbol, k: symbol)
.input kind
.decl hidden(file: symbol)
.input hidden
.decl step0(a: symbol, b: symbol, file: symbol, line: number)
step0(a, b, f, l) :- calls(a, b, f, l), !hidden(f).
.decl step(a: symbol, b: symbol, k: symbol, file: symbol, line: number)
step(a, b, k, f, l) :- step0(a, b, f, l), kind(b, k).
step(a, a, "self", "none.cpp", 0) :- kind(a, "root").
.decl callee_count(b: symbol, n: number)
callee_count(b, n) :- kind(b, _), n = count : { calls(_, b, _, _) }.
.decl reach(a: symbol, b: symbol, file: symbol)
reach(a, b, f) :- calls(a, b, f, _).
reach(a, c, f) :- reach(a, b, f), calls(b, c, _, _).
"""


def _moved_in(*rels):
    return lambda rel, cols: rel in rels


def test_a_relation_made_from_what_changed_through_its_file_column_is_by_file():
    p = parse_text(LIB)
    assert partition_sources(p, "step", 3, _moved_in("calls")) == frozenset({("calls", 2)})
    assert partition_sources(p, "step0", 2, _moved_in("calls")) == frozenset({("calls", 2)})


def test_nothing_it_reads_changed_is_no_source_at_all():
    assert partition_sources(parse_text(LIB), "step", 3, _moved_in("hidden_other")) == frozenset()


def test_a_negation_or_an_aggregate_with_the_head_s_variable_is_by_that_column():
    p = parse_text(LIB)
    assert partition_sources(p, "step", 3, _moved_in("hidden")) == frozenset({("hidden", 0)})
    assert partition_sources(p, "callee_count", 0, _moved_in("calls")) == frozenset({("calls", 1)})


@pytest.mark.parametrize("rel, col, moved, why", [
    ("step", 3, ("kind",), "kind's rows hold no file"),
    ("step", 2, ("hidden",), "a negation of what changed, without the head's variable"),
    ("callee_count", 1, ("calls",), "an aggregate of what changed, without the head's variable"),
    ("reach", 2, ("calls",), "recursive"),
])
def test_no_partition_when_a_change_can_reach_any_file(rel, col, moved, why):
    assert partition_sources(parse_text(LIB), rel, col, _moved_in(*moved)) is None, why


def test_a_moved_column_the_rule_does_not_read_changes_nothing():
    p = parse_text(".decl c(a: symbol, f: symbol, l: number)\n.input c\n.decl k(a: symbol)\n.input k\n"
                   ".decl s(a: symbol)\ns(a) :- c(a, _, l), k(a).")
    # c's moved columns are asked about by what the rule reads: a and, once only, l
    asked = []
    assert partition_sources(p, "s", 0, lambda rel, cols: asked.append((rel, cols)) or 2 in cols) == frozenset()
    assert ("c", frozenset({0})) in asked


def test_restricted_program_reads_the_values_where_the_file_flows():
    r = restrict(parse_text(LIB), "step", 3, "part")
    assert sorted(str(x) for x in r.rules if x.head.name in ("step", "step0__2__part")) == [
        'step(a, a, "self", "none.cpp", 0) :- kind(a, "root"), part("none.cpp").',
        "step(a, b, k, f, l) :- step0__2__part(a, b, f, l), kind(b, k), part(f).",
        "step0__2__part(a, b, f, l) :- calls(a, b, f, l), !hidden(f), part(f).",
    ]
    assert "part" in r.inputs and [c.name for c in r.decls["part"].columns] == ["v"]
    # a recursive relation is not restricted in place: its rows of a file come from others'
    assert [str(x) for x in restrict(parse_text(LIB), "reach", 2, "part").rules if x.head.name == "reach"][1] == (
        "reach(a, c, f) :- reach(a, b, f), calls(b, c, _, _), part(f).")


CALLS = [("f", "g", "a.cpp", 1), ("g", "h", "a.cpp", 2), ("h", "g", "b.cpp", 7), ("x", "h", "b.cpp", 9)]
KIND = [("g", "cpu"), ("h", "cuda"), ("f", "root")]


def facts_db(program, rows: dict[str, list[tuple]]):
    """A DB with a table per input of `program` (the `rows` given), and its
    stored relations."""
    con = duckdb.connect()
    for rel in program.inputs:
        decl = program.decls[rel]
        con.execute(f"CREATE TABLE {rel} ({_columns(decl)})")
        if rows.get(rel):
            con.executemany(f"INSERT INTO {rel} VALUES ({', '.join('?' * decl.arity)})", rows[rel])
    materialize(con, program, frozenset(program.inputs))
    return con


def _columns(decl) -> str:
    return ", ".join(f"{c.name} {'VARCHAR' if c.type.value == 'symbol' else 'BIGINT'}" for c in decl.columns)


def _db(calls, kind, program):
    return facts_db(program, {"calls": calls, "kind": kind})


def stored_rows(con):
    return {rel: sorted(con.execute(f"SELECT * FROM {table_of(rel)}").fetchall())
            for (rel,) in con.execute("SELECT relation FROM derived.catalog").fetchall()}


def _stored(con, program):
    return stored_rows(con)


def apply_deltas(con, program, deltas: dict[str, tuple[list, list]]) -> dict[str, tuple[str, str]]:
    """Apply (relation -> (rows gone, rows new)) to the fact tables as
    torchtalk/update.py does; -> each relation's temp tables of them."""
    temps = {}
    for i, (rel, (gone, new)) in enumerate(sorted(deltas.items())):
        decl = program.decls[rel]
        temps[rel] = (f"_g{i}", f"_n{i}")
        for t, rows in zip(temps[rel], (gone, new), strict=True):
            con.execute(f"CREATE OR REPLACE TEMP TABLE {t} ({_columns(decl)})")
            if rows:
                con.executemany(f"INSERT INTO {t} VALUES ({', '.join('?' * decl.arity)})", rows)
        for row in gone:
            con.execute(f"DELETE FROM {rel} WHERE " + " AND ".join(f"{c.name} = ?" for c in decl.columns), list(row))
        con.execute(f"INSERT INTO {rel} SELECT * FROM {temps[rel][1]}")
    return temps


def refresh_after(con, program, facts, deltas, keyed=None):
    """`apply_deltas`, then the stored relations refreshed: -> (rows per
    relation computed again, those updated by part)."""
    temps = apply_deltas(con, program, deltas)
    by_part: dict[str, tuple[str, int]] = {}
    counts = refresh(con, program, facts, frozenset(deltas),
                     lambda r, c: moved_rows(con, program.decls[r], *temps[r], c),
                     values=lambda r, c, cols=None: moved_values(con, program.decls[r], *temps[r], c, cols),
                     by_part=by_part, keyed=keyed, deltas=temps.__getitem__)
    return counts, by_part


def _update(con, program, rel, gone, new):
    """Apply a delta to fact table `rel` as torchtalk/update.py does, then refresh."""
    return refresh_after(con, program, frozenset(program.inputs), {rel: (gone, new)})


def test_an_update_in_the_changed_files_gives_what_computing_all_gives():
    program = parse_text(LIB)
    con = _db(CALLS, KIND, program)
    # a line more above b.cpp's calls, and one call gone from it
    gone, new = [("h", "g", "b.cpp", 7), ("x", "h", "b.cpp", 9)], [("h", "g", "b.cpp", 8)]
    counts, by_file = _update(con, program, "calls", gone, new)
    # b.cpp's rows only, through step0 (computed, not stored: only step reads it, and
    # positively, argument_free); callee_count counts the calls of each callee: those of
    # the two callees whose calls changed; reach is recursive, and carries its file from
    # itself to its head: at the values its rows as they were join the change with
    # (Note [A recursion by a carried column])
    assert by_file == {"step": ("file", 1), "callee_count": ("b", 2), "reach": ("file", 1)}
    assert set(counts) == {"step", "callee_count", "reach"}
    calls = [c for c in CALLS if c not in gone] + new
    assert _stored(con, program) == _stored(_db(calls, KIND, program), program)
    assert sorted(con.execute(f"SELECT * FROM {table_of('step')}").fetchall()) == [
        ("f", "f", "self", "none.cpp", 0), ("f", "g", "cpu", "a.cpp", 1), ("g", "h", "cuda", "a.cpp", 2),
        ("h", "g", "cpu", "b.cpp", 8)]


def test_a_change_with_no_file_is_updated_at_another_column_it_carries():
    """Note [Rows changed at other columns]: kind's rows hold no file, but
    step's rules carry kind's function to its column b (callee_count reads
    kind's functions only, which stay)."""
    program = parse_text(LIB)
    con = _db(CALLS, KIND, program)
    gone, new = [("g", "cpu")], [("g", "gpu")]
    _counts, by_file = _update(con, program, "kind", gone, new)
    assert by_file == {"step": ("b", 1)}
    kind = [k for k in KIND if k not in gone] + new
    assert _stored(con, program) == _stored(_db(CALLS, kind, program), program)


# a test's link to an op: through the op's API (which has no file) and the
# test file's coverage of it (Note [Tests of every op stored] in rules/ranking.dl)
LINKS = """
.decl cover(t: symbol, s: symbol, file: symbol)
.input cover
.decl api(a: symbol, op: symbol, line: number)
.input api
.decl link(op: symbol, t: symbol, file: symbol)
link(o, t, f) :- api(a, o, _), cover(t, a, f).
"""
COVER = [("t1", "torch.add", "test_a.py"), ("t2", "torch.mul", "test_b.py"), ("t3", "F.relu", "test_b.py")]
API = [("torch.add", "add", 1), ("torch.mul", "mul", 2)]


def _links_db(cover, api, program):
    return facts_db(program, {"cover": cover, "api": api})


@pytest.mark.parametrize("rel, gone, new, part", [
    # a Python module's edit gives relu an API, and moves add's a line: relu's rows come from
    # api's op column, not from a file; add's line is not read, so its rows stay
    ("api", [("torch.add", "add", 1)], [("torch.add", "add", 2), ("F.relu", "relu", 3)], ("op", 1)),
    # a test file's edit: its coverage rows, by file first
    ("cover", [("t2", "torch.mul", "test_b.py")], [("t4", "torch.mul", "test_b.py")], ("file", 1)),
])
def test_a_relation_is_updated_at_the_values_of_the_first_column_that_can_be(rel, gone, new, part):
    program = parse_text(LINKS)
    con = _links_db(COVER, API, program)
    _counts, by_part = _update(con, program, rel, gone, new)
    assert by_part == {"link": part}
    cover, api = ([c for c in COVER if c not in gone] + new, API) if rel == "cover" else (
        COVER, [a for a in API if a not in gone] + new)
    assert _stored(con, program) == _stored(_links_db(cover, api, program), program)


# Note [Derived in place]: a stored relation computed again whose rows did not
# move, as a later one reads them, leaves that one as it is (an early cutoff)
CUTOFF = """
.decl calls(a: symbol, b: symbol, file: symbol, line: number)
.input calls
.decl func(fn: symbol, file: symbol, line: number)
.input func
.decl dev(fn: symbol, d: symbol)
dev(fn, "cuda") :- func(fn, f, _), match(".*[.]cu", f).
.decl edge(a: symbol, b: symbol, d: symbol)
edge(a, b, d) :- calls(a, b, _, _), dev(b, d).
edge(a, b, "*") :- calls(a, b, _, _), !dev(b, _).
.decl hops(a: symbol, n: number)
hops(a, n) :- edge(a, _, _), n = count : { edge(a, _, _) }.
"""
CALLS2 = [("f", "g", "a.cpp", 1), ("g", "k", "a.cpp", 2), ("h", "k", "b.cu", 3)]
FUNC2 = [("f", "a.cpp", 1), ("g", "a.cpp", 2), ("k", "b.cu", 1)]


def _cutoff_db(calls, func, program):
    return facts_db(program, {"calls": calls, "func": func})


@pytest.mark.parametrize("gone, new, computed", [
    # a new function in a.cpp, lines moved: dev is computed again, and is what it was,
    # so what reads it (under a negation) stays
    ([("g", "a.cpp", 2)], [("g", "a.cpp", 3), ("p", "a.cpp", 1)], {"dev"}),
    # a new function in b.cu that nobody calls: dev gains a row, so the edges are
    # computed again, and are what they were, so hops stays
    ([], [("q", "b.cu", 9)], {"dev", "edge"}),
    # g moved to a .cu file: dev gains g, and the edges into g move
    ([("g", "a.cpp", 2)], [("g", "c.cu", 2)], {"dev", "edge", "hops"}),
])
def test_a_relation_computed_again_that_did_not_move_leaves_its_readers(gone, new, computed):
    program = parse_text(CUTOFF)
    con = _cutoff_db(CALLS2, FUNC2, program)
    counts, _by = _update(con, program, "func", gone, new)
    assert set(counts) == computed
    func = [f for f in FUNC2 if f not in gone] + new
    assert _stored(con, program) == _stored(_cutoff_db(CALLS2, func, program), program)


def test_an_update_of_a_db_without_its_stored_relations_stores_them_again():
    """A refresh that fails leaves the stored relations out (update.py); the
    next update, in its transaction as update.py runs it, computes them all
    again. Asking for the missing catalog by a query that fails aborted that
    transaction, and every later update failed on it."""
    program = parse_text(LIB)
    con = _db(CALLS, KIND, program)
    con.execute("DROP SCHEMA derived CASCADE")
    con.execute("BEGIN TRANSACTION")
    _update(con, program, "calls", [], [("q", "g", "c.cpp", 1)])
    con.execute("COMMIT")
    assert _stored(con, program) == _stored(_db(CALLS + [("q", "g", "c.cpp", 1)], KIND, program), program)
