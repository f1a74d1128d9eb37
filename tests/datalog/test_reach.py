"""The rows a change reaches (Note [Rows a change reaches] in
torchtalk/datalog/transform/reach.py): the program that finds them, and an
update in place at their values that gives what computing all gives."""

from __future__ import annotations

import pytest

from torchtalk.datalog.parser import parse_text
from torchtalk.datalog.transform.reach import reach, unrolled

from .test_partition import facts_db, refresh_after, stored_rows

# a call of an op by its name reaches the op's kernel (aten_call in rules/graph.dl):
# a new op links the calls of its name in every file; aten_call, read by step alone,
# is not stored (Note [Derived in place])
CORE = """
.decl calls_op(c: symbol, n: symbol, file: symbol, line: number)
.input calls_op
.decl op(o: symbol, n: symbol)
.input op
.decl kernel(o: symbol, x: symbol)
.input kernel
.decl hidden(x: symbol)
.input hidden
.decl roots(c: symbol, f: symbol)
.input roots
.decl aten_call(c: symbol, x: symbol, file: symbol, line: number)
aten_call(c, x, f, l) :- calls_op(c, n, f, l), op(o, n), kernel(o, x).
.decl step(c: symbol, x: symbol, file: symbol, line: number)
step(c, x, f, l) :- aten_call(c, x, f, l), !hidden(x).
step(c, c, f, 0) :- roots(c, f).
"""
# aten_call read by more than step: stored (Note [Derived in place])
LIB = CORE + """
.decl kernels_of(c: symbol, k: number)
kernels_of(c, k) :- calls_op(c, _, _, _), k = count : { aten_call(c, _, _, _) }.
.decl up(a: symbol, b: symbol)
up(a, b) :- aten_call(a, b, _, _).
up(a, c) :- up(a, b), aten_call(b, c, _, _).
"""
FACTS = {
    "calls_op": [("f", "mm", "a.cpp", 1), ("g", "tt", "a.cpp", 2), ("h", "tt", "b.cpp", 3), ("h", "mm", "b.cpp", 4)],
    "op": [("mm.default", "mm")],
    "kernel": [("mm.default", "mm_cpu")],
    "hidden": [],
    "roots": [("f", "a.cpp")],
}


def _moved(*rels):
    return lambda rel, cols: rel in rels


def test_each_changed_atom_is_read_from_the_change_and_the_others_before_and_after():
    program, deltas, both = reach(parse_text(LIB), "step", _moved("op", "kernel"))
    assert [str(r) for r in program.rules_for("step__d")] == ["step__d(c, x, f, l) :- aten_call__d(c, x, f, l), !hidden(x)."]
    # each read from its rows whose projection on the columns the atom reads went or came
    assert [str(r) for r in program.rules_for("aten_call__d")] == [
        "aten_call__d(c, x, f, l) :- calls_op(c, n, f, l), op__d_0_1(o, n), kernel__all(o, x).",
        "aten_call__d(c, x, f, l) :- calls_op(c, n, f, l), op__all(o, n), kernel__d_0_1(o, x).",
    ]
    assert deltas == {("op", frozenset({0, 1})), ("kernel", frozenset({0, 1}))} and both == {"op", "kernel"}
    assert {"op__d_0_1", "op__all", "kernel__d_0_1", "kernel__all"} <= set(program.inputs)


def test_a_changed_negation_is_read_from_the_change_as_a_positive_atom():
    program, deltas, both = reach(parse_text(LIB), "step", _moved("hidden"))
    assert [str(r) for r in program.rules_for("step__d")] == [
        "step__d(c, x, f, l) :- aten_call(c, x, f, l), hidden__d_0(x)."]
    assert (deltas, both) == ({("hidden", frozenset({0}))}, set())


@pytest.mark.parametrize("rel, why", [("kernels_of", "an aggregate of what changed"), ("up", "recursive")])
def test_no_program_through_an_aggregate_or_a_recursion(rel, why):
    assert reach(parse_text(LIB), rel, _moved("op")) is None, why


def test_no_program_when_a_rule_reads_every_row_of_a_changed_derived_relation():
    p = parse_text(LIB + ".decl both(c: symbol, x: symbol)\nboth(c, x) :- aten_call(c, x, _, _), op(x, _).\n")
    assert reach(p, "both", _moved("op")) is None  # aten_call__all would be aten_call whole


@pytest.mark.parametrize("what, deltas, part", [
    # a new op: the calls of its name in a.cpp and b.cpp reach its kernel
    ("a new op", {"op": ([], [("tt.default", "tt")]), "kernel": ([], [("tt.default", "tt_cpu")])}, ("x", 1)),
    # an op gone with its kernel: its calls' steps go; each atom read from the change
    # finds them only with the other read as it was (kernel__all holds the row that went)
    ("an op gone", {"op": ([("mm.default", "mm")], []), "kernel": ([("mm.default", "mm_cpu")], [])}, ("x", 1)),
    # a kernel hidden: a negated atom's change reaches the steps it blocks
    ("a kernel hidden", {"hidden": ([], [("mm_cpu",)])}, ("x", 1)),
    # a call moved a line: its file's and line's step, one of each
    ("a call moved", {"calls_op": ([("h", "mm", "b.cpp", 4)], [("h", "mm", "b.cpp", 5)])}, ("file", 1)),
])
def test_an_update_at_the_values_reached_gives_what_computing_all_gives(what, deltas, part):
    program = parse_text(CORE)
    con = facts_db(program, FACTS)
    counts, by_part = refresh_after(con, program, frozenset(program.inputs), deltas)
    assert by_part.get("step") == part, (what, by_part)
    after = {rel: [r for r in rows if r not in deltas.get(rel, ([], []))[0]] + deltas.get(rel, ([], []))[1]
             for rel, rows in FACTS.items()}
    assert stored_rows(con) == stored_rows(facts_db(program, after)), what


# Note [A recursion by a carried column]: the functions each start reaches in at most
# two calls (link_reach in rules/link.dl), and what reaches a marked one (to_card in
# rules/graph.dl), which carries no column from itself to its head
RECURSIVE = """
.decl calls(a: symbol, b: symbol, file: symbol)
.input calls
.decl start(a: symbol)
.input start
.decl mark(a: symbol)
.input mark
.decl near(s: symbol, b: symbol, d: number)
near(s, s, 0) :- start(s).
near(s, c, d + 1) :- near(s, b, d), d < 2, calls(b, c, _).
.decl to_mark(a: symbol)
to_mark(a) :- mark(a).
to_mark(a) :- to_mark(b), calls(a, b, _).
"""
RFACTS = {
    "calls": [("f", "g", "a.cpp"), ("g", "h", "a.cpp"), ("h", "k", "b.cpp"), ("x", "y", "c.cpp"), ("y", "h", "c.cpp")],
    "start": [("f",), ("x",)],
    "mark": [("k",)],
}


def test_a_recursion_is_unrolled_at_the_columns_it_carries():
    program, carried = unrolled(parse_text(RECURSIVE), "near")
    assert carried == {0}
    assert [str(r) for r in program.rules_for("near")] == [
        "near(s, s, 0) :- start(s).", "near(s, c, d + 1) :- near__before(s, b, d), d < 2, calls(b, c, _)."]
    assert "near__before" in program.inputs
    assert unrolled(parse_text(RECURSIVE), "to_mark") is None  # a, not b, in its head
    assert unrolled(parse_text(RECURSIVE), "start") is None  # not recursive


@pytest.mark.parametrize("what, deltas, part", [
    # a call more from a reached function: the starts that reach its caller (f, two steps off)
    ("a call more", {"calls": ([], [("g", "x", "a.cpp")])}, ("s", 1)),
    # a call gone: what f and x reached through h (x's path is its own)
    ("a call gone", {"calls": ([("g", "h", "a.cpp")], [])}, ("s", 1)),
    # a call more from what both starts reach (y one off x, g one off f): each start's rows
    ("a call more from what both reach", {"calls": ([], [("g", "z", "a.cpp"), ("y", "z", "c.cpp")])}, ("s", 2)),
    # past the bound of two steps (h is two off f and x): no start's rows
    ("a call gone past the bound", {"calls": ([("h", "k", "b.cpp")], [])}, ("s", 0)),
    ("a call more past the bound", {"calls": ([], [("k", "z", "b.cpp")])}, ("s", 0)),
    ("a start more and one gone", {"start": ([("x",)], [("g",)])}, ("s", 2)),
    # its file moved: neither reads the file of calls (nothing computed again)
    ("a call moved to another file", {"calls": ([("f", "g", "a.cpp")], [("f", "g", "z.cpp")])}, None),
])
def test_a_recursion_updated_at_the_carried_values_gives_what_computing_all_gives(what, deltas, part):
    program = parse_text(RECURSIVE)
    con = facts_db(program, RFACTS)
    counts, by_part = refresh_after(con, program, frozenset(program.inputs), deltas)
    assert by_part.get("near") == part, (what, by_part)
    assert "to_mark" not in by_part  # whole, when it moved
    after = {rel: [r for r in rows if r not in deltas.get(rel, ([], []))[0]] + deltas.get(rel, ([], []))[1]
             for rel, rows in RFACTS.items()}
    assert stored_rows(con) == stored_rows(facts_db(program, after)), what
