"""Semantic checks: the exact message and location of each error."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchtalk.datalog import check, parse_text
from torchtalk.datalog.analysis.checks import check_errors
from torchtalk.datalog.analysis.strata import strata
from torchtalk.datalog.analysis.warnings import check_warnings
from torchtalk.errors import ErrorList

HEAD = """.decl e(a: number, b: symbol)
.decl p(a: number, n: number)
.decl q(a: symbol)
"""  # rules below start on line 4

CASES = [
    ("p(x, 1) :- ee(x, _).", "<text>:4:12: semantic error: relation 'ee' is not declared (did you mean 'e'?)"),
    ("p(x) :- e(x, _).", "<text>:4:1: semantic error: 'p' has 2 columns but is used with 1 argument"),
    ("q(y) :- e(1, y, 2).", "<text>:4:9: semantic error: 'e' has 2 columns but is used with 3 arguments"),
    ("p(x, y) :- e(x, y).", "<text>:4:17: semantic error: variable 'y' is a symbol here (column 'b' of 'e') but a number as column 'n' of 'p' at <text>:4:6"),
    ('q("a") :- e("b", "c").', "<text>:4:13: semantic error: column 'a' of 'e' is a number, got the symbol \"b\""),
    ("q(y) :- e(1, y), y < 3.", "<text>:4:18: semantic error: '<' compares numbers, got a symbol"),
    ('q(y) :- e(x, y), x = y.', "<text>:4:18: semantic error: '=' compares a number with a symbol"),
    ("p(x, n) :- e(x, y), n = y + 1.", "<text>:4:25: semantic error: arithmetic on the symbol y"),
    ("q(y) :- e(x, y), contains(x, y).", "<text>:4:27: semantic error: 'contains' takes symbols, got the number x"),
    ("p(x, n) :- e(x, s), n = sum s : { e(x, s) }.", "<text>:4:29: semantic error: 'sum' aggregates numbers, got the symbol s"),
    ("p(x, y) :- e(x, _).", "<text>:4:6: semantic error: variable 'y' is not grounded (bind it in a positive atom of the body)"),
    ("p(x, 1) :- e(x, _), !q(z).", "<text>:4:24: semantic error: variable 'z' is not grounded (bind it in a positive atom of the body)"),
    ("p(x, 1) :- e(x, _), y > 2.", "<text>:4:21: semantic error: variable 'y' is not grounded (bind it in a positive atom of the body)"),
    ("p(x, n) :- e(x, _), n = count : { e(z, _) }, z > 1.", "<text>:4:46: semantic error: variable 'z' is not grounded (bind it in a positive atom of the body)"),
    ("p(x, n) :- e(x, _), n = max k : { e(j, _) }.", "<text>:4:29: semantic error: variable 'k' is not grounded (bind it in a positive atom of the body)"),
    ("p(_, 1) :- e(1, _).", "<text>:4:3: semantic error: '_' in the head of a rule for 'p'"),
    ("p(x, 1) :- e(x, y), x < _.", "<text>:4:25: semantic error: '_' in a comparison (use a variable)"),
    ("p(x, n) :- e(x, _), n = count : { x > 1 }.", "<text>:4:25: semantic error: 'count' aggregate body needs a positive atom"),
    ("p(x, count : { e(x, _) }) :- e(x, _).", "<text>:4:6: semantic error: an aggregate in the head of a rule is outside the subset (bind it in the body)"),
    (".output r", "<text>:4:1: semantic error: '.output' of undeclared relation 'r'"),
    ("p(x, ord(x)) :- e(x, _).", "<text>:4:10: semantic error: 'ord' takes a symbol, got the number x"),
    ("q(ord(y)) :- e(_, y).", "<text>:4:3: semantic error: column 'a' of 'q' is a symbol, got a number expression"),
    ("q(y) :- e(1, y), !q(y).", "<text>:4:19: semantic error: 'q' reads 'q' under negation or aggregation, but 'q' depends on 'q' (cycle q -> q): not stratifiable"),
]


@pytest.mark.parametrize("rule,message", CASES, ids=[c[0] for c in CASES])
def test_check_message(rule, message):
    errors = check_errors(parse_text(HEAD + rule))
    assert [e.headline() for e in errors] == [message]


def test_unstratifiable_cycle_through_aggregate():
    src = HEAD + ".decl r(a: symbol)\nq(y) :- e(1, y), n = count : { r(y) }, n = 0.\nr(y) :- q(y).\n"
    with pytest.raises(ErrorList) as ei:
        check(parse_text(src))
    assert ei.value.headline() == (
        "<text>:5:32: semantic error: 'q' reads 'r' under negation or aggregation, but 'r' depends "
        "on 'q' (cycle q -> r -> q): not stratifiable"
    )


def test_errors_sorted_and_rendered_with_caret():
    src = HEAD + "p(x, y) :- e(x, _).\nq(y) :- zz(y).\n"
    with pytest.raises(ErrorList) as ei:
        check(parse_text(src, "r.dl"))
    assert ei.value.render().splitlines() == [
        "r.dl:4:6: semantic error: variable 'y' is not grounded (bind it in a positive atom of the body)",
        "    p(x, y) :- e(x, _).",
        "         ^",
        "r.dl:5:9: semantic error: relation 'zz' is not declared",
        "    q(y) :- zz(y).",
        "            ^",
    ]
    assert ei.value.headline().endswith("(and 1 more)")


def test_sibling_aggregates_have_their_own_locals():
    src = HEAD + "p(x, n) :- e(x, _), n = count : { e(x, v) }, m = min k : { e(k, v) }, m < n.\n"
    assert check_errors(parse_text(src)) == []


def test_strata_order_and_recursion_kinds():
    prog = parse_text(
        """.decl e(a: number, b: number)
        .decl tc(a: number, b: number)
        .decl a(x: number)
        .decl b(x: number)
        .decl lin(a: number, b: number)
        .decl top(a: number)
        tc(x, z) :- tc(x, y), tc(y, z).
        tc(x, y) :- e(x, y).
        a(x) :- b(x). b(x) :- a(x). a(x) :- e(x, _).
        lin(x, y) :- e(x, y). lin(x, z) :- lin(x, y), e(y, z).
        top(x) :- a(x), !tc(x, x), !lin(x, x)."""
    )
    got = [(s.relations, s.recursive, s.linear) for s in strata(prog)]
    assert got[0] == (("e",), False, False)
    assert set(got[1:4]) == {(("tc",), True, False), (("a", "b"), True, False), (("lin",), True, True)}
    assert got[4] == (("top",), False, False)


WARNED = """.decl e(a: number, b: number)
.input e
.decl hook(a: number)
.decl p(x: number)
.output p
p(x) :- e(x, y).
p(x) :- e(x, _unused), hook(x).
p(x) :- e(x, z), (z = 1 ; e(z, _)).
p(x) :- e(x, w), (x > 2 ; x = 3).
p(x) :- e(x, v), (v > 2 ; x = 4).
"""


def test_warnings_are_kept_apart_from_errors():
    """Line 10: `v` occurs once in one alternative only, so it is meant."""
    prog = parse_text(WARNED)
    check(prog)  # no error: the program runs
    assert [w.headline() for w in check_warnings(prog)] == [
        "<text>:3:1: warning: relation 'hook' has no rules, no facts and no .input, so it is always empty",
        "<text>:6:14: warning: variable 'y' occurs only once (use '_' if any value will do)",
        "<text>:9:14: warning: variable 'w' occurs only once (use '_' if any value will do)",
    ]


def test_a_library_file_without_outputs_leaves_its_hooks_unreported():
    prog = parse_text(WARNED.replace(".output p\n", ""))
    assert [w.message for w in check_warnings(prog)] == [
        "variable 'y' occurs only once (use '_' if any value will do)",
        "variable 'w' occurs only once (use '_' if any value will do)",
    ]


TYPED = """.type Op <: symbol
.type Fn <: symbol
.type Node = Op | Fn
.decl op(o: Op)
.decl fn(f: Fn)
.decl any(s: symbol)
.decl both(x: symbol)
both(x) :- op(x), any(x).
.decl n(x: Node)
n(x) :- op(x).
n(x) :- fn(x).
.decl m(x: Op)
m(x) :- n(x), op(x).
m(as(x, Op)) :- any(x).
m("a constant").
"""


def test_subtypes_and_unions_check_as_in_souffle():
    """Note [Types]: a symbol column takes any subtype, a union its members,
    `as` asserts a type, a constant fits any type of its base."""
    check(parse_text(TYPED))


@pytest.mark.parametrize("rule,message", [
    ("bad(x) :- op(x), fn(x).",
     "<text>:17:21: semantic error: variable 'x' has type Fn here (column 'f' of 'fn') "
     "but type Op as column 'o' of 'op' at <text>:17:14"),
    ("bad(x) :- any(x).",
     "<text>:17:5: semantic error: column 'x' of 'bad' has type Op, got type symbol "
     "(bound as column 's' of 'any' at <text>:17:15) (write as(x, Op) if every value is one)"),
    ("bad(x) :- n(x).",
     "<text>:17:5: semantic error: column 'x' of 'bad' has type Op, got type Node "
     "(bound as column 'x' of 'n' at <text>:17:13) (write as(x, Op) if every value is one)"),
    ("bad(as(x, Fn)) :- any(x).",
     "<text>:17:5: semantic error: column 'x' of 'bad' has type Op, got type Fn"),
    ("bad(as(x, Nope)) :- any(x).",
     "<text>:17:5: semantic error: unknown type 'Nope' in as() (did you mean 'Node'?)"),
])
def test_type_errors_name_both_places(rule, message):
    with pytest.raises(ErrorList) as ei:
        check(parse_text(TYPED + ".decl bad(x: Op)\n" + rule))
    assert [e.headline() for e in ei.value.errors] == [message]


def test_the_schema_types_a_join_of_two_namespaces(tmp_path):
    """Note [Fact namespaces]: an op name joined with a function id is a type
    error with its location; the library itself has none (test_cli)."""
    root = Path(__file__).resolve().parents[2]
    prog = tmp_path / "join.dl"
    prog.write_text(f'#include "{root / "facts/schema.dl"}"\n.decl bad(x: symbol)\n'
                    "bad(x) :- op(x, _, _, _, _, _), func(x, _, _, _, _).\n")
    from torchtalk.datalog import parse_file

    with pytest.raises(ErrorList) as ei:
        check(parse_file(prog))
    assert [e.headline() for e in ei.value.errors] == [
        f"{prog}:3:38: semantic error: variable 'x' has type FnId here (column 'fn' of 'func') "
        f"but type OpName as column 'op' of 'op' at {prog}:3:14"]
