"""Columns drawn from typed fact columns (torchtalk/datalog/analysis/drawn.py),
and the update in place that counts `node` unchanged for a stored relation
that numbers only such names (Note [Names that come and go] in
torchtalk/query/derived.py): its rows equal those computed whole."""

from __future__ import annotations

import pytest

from torchtalk.datalog.analysis.drawn import drawn_columns, numbers_drawn_names
from torchtalk.datalog.parser import parse_text

from .test_partition import facts_db, refresh_after, stored_rows

LIB = """
.type F <: symbol
.decl calls(a: F, b: F, file: symbol, line: number)
.input calls
.decl func(fn: F, file: symbol, line: number)
.input func
.decl label(fn: symbol, text: symbol)
.input label
.decl node(name: symbol, id: number)
.input node
.decl seed(fn: F)
.input seed
.decl edge(a: symbol, b: symbol)
edge(a, b) :- calls(a, b, _, _).
edge(a, b) :- calls(b, a, _, _).
.decl pair(na: number, nb: number)
pair(na, nb) :- edge(a, b), node(a, na), node(b, nb).
.decl at(na: number, nb: number, file: symbol, line: number)
at(na, nb, f, l) :- calls(a, b, f, l), node(a, na), node(b, nb).
.decl card(n: number, file: symbol)
card(n, f) :- func(fn, f, _), node(fn, n).
.decl every(n: number, file: symbol)
every(n, f) :- node(_, n), func(_, f, _).
.decl labelled(n: number, t: symbol)
labelled(n, t) :- label(fn, t), node(fn, n).
.decl reach(a: symbol, b: symbol)
reach(a, b) :- calls(a, b, _, _).
reach(a, c) :- reach(a, b), calls(b, c, _, _).
.decl odd(a: symbol)
odd(a) :- calls(a, _, _, _).
odd("main") :- func(_, _, _).
.decl from_seed(n: number)
from_seed(n) :- seed(s), node(s, n).
.decl unnamed(n: number)
unnamed(n) :- node("main", n), func("main", _, _).
.decl missing(a: symbol)
missing(a) :- calls(a, _, _, _), !node(a, _).
"""
FACTS = frozenset({"calls", "func", "label", "node"})
TYPES = frozenset({"F"})


def test_a_column_is_drawn_when_every_rule_takes_it_from_a_typed_fact_column():
    drawn = drawn_columns(parse_text(LIB), FACTS, TYPES)
    assert drawn["calls"] == {0, 1} and drawn["func"] == {0}
    assert drawn["edge"] == {0, 1}  # both rules: from calls' two columns
    assert drawn["reach"] == {0, 1}  # recursive: every value comes from a base rule in the end
    assert drawn["odd"] == set()  # "main" is a constant, no fact's value
    assert drawn["label"] == set()  # a fact column, but not of the type
    assert drawn["seed"] == set()  # typed, but not a fact: a query's argument holds anything


@pytest.mark.parametrize("rel, numbers_drawn", [
    ("pair", True),  # through edge, whose columns are drawn
    ("at", True),
    ("card", True),
    ("every", False),  # every number, whatever its name
    ("labelled", False),  # label's names are not node names
    ("from_seed", False),  # a query's argument
    ("unnamed", False),  # a constant
    ("missing", False),  # a negation
])
def test_which_relations_number_only_drawn_names(rel, numbers_drawn):
    assert numbers_drawn_names(parse_text(LIB), rel, "node", 0, FACTS, TYPES) is numbers_drawn


CALLS = [("f", "g", "a.cpp", 1), ("g", "h", "a.cpp", 2), ("h", "g", "b.cpp", 7)]
FUNC = [("f", "a.cpp", 1), ("g", "a.cpp", 2), ("h", "b.cpp", 6)]
NODE = [("f", 8), ("g", 16), ("h", 24)]


def _db(program, calls, func, node):
    return facts_db(program, {"calls": calls, "func": func, "node": node})


@pytest.mark.parametrize("keyed", [True, False])
def test_a_new_function_leaves_what_numbers_only_drawn_names_to_its_fact_rows(keyed):
    """A new function `k` at b.cpp:1 moves h's def and call a line down, and gives
    `node` one row: with `node` keyed (its names came or went only), pair is kept
    (no edge came), at and card are updated in b.cpp only, and the
    relations that read every number compute again; the rows are those computed whole."""
    program = parse_text(LIB)
    con = _db(program, CALLS, FUNC, NODE)
    deltas = {"calls": ([("h", "g", "b.cpp", 7)], [("h", "g", "b.cpp", 8)]),
              "func": ([("h", "b.cpp", 6)], [("h", "b.cpp", 7), ("k", "b.cpp", 1)]),
              "node": ([], [("k", 40)])}
    counts, by_part = refresh_after(con, program, FACTS, deltas, keyed={"node": (0, TYPES)} if keyed else None)
    # every number's and labelled's rows are updated at k's number alone, carried from
    # node's (Note [Rows changed at other columns]), missing's at k's name, which its
    # negation reads; from_seed's at none (no seed is k); the rows of unnamed that k's
    # node row reaches are none: k is not "main" (Note [Rows a change reaches])
    parts = {"at": ("file", 1), "card": ("file", 1), "every": ("n", 1), "labelled": ("n", 1),
             "from_seed": ("n", 0), "unnamed": ("n", 0), "missing": ("a", 1)}
    if keyed:
        assert by_part == parts
        # (from_seed numbers the names of `seed`, which is no fact: node changed for it)
        assert set(counts) == {"at", "card", "every", "labelled", "from_seed", "unnamed", "missing"}
    else:  # pair reads node, whose new row reaches no edge
        assert by_part == {**parts, "pair": ("na", 0)}
        assert {"at", "card", "pair", "every", "labelled"} <= set(counts)
    after = {rel: [r for r in rows if r not in deltas[rel][0]] + deltas[rel][1] if rel in deltas else rows
             for rel, rows in (("calls", CALLS), ("func", FUNC), ("node", NODE))}
    assert stored_rows(con) == stored_rows(_db(program, after["calls"], after["func"], after["node"]))
