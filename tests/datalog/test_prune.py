"""Pruning the rules that cannot fire (torchtalk/datalog/transform/prune.py):
over an empty relation, and negating a nullary input known to hold."""

from __future__ import annotations

import pytest

from torchtalk.datalog import evaluate, parse_text
from torchtalk.datalog.transform.prune import prune

PROGRAM = """
.decl e(a: number, b: number)
.input e
.decl seed(a: number)
.input seed
.decl every()
.input every
.decl reach(a: number)
reach(a) :- seed(a).
reach(b) :- reach(a), e(a, b), !every().
reach(b) :- every(), e(_, b).
.decl out(a: number)
out(a) :- reach(a).
"""


@pytest.mark.parametrize("engine", ["memory", "duckdb"])
def test_a_rule_negating_a_true_nullary_is_dropped_with_the_same_answer(engine):
    program = parse_text(PROGRAM)
    facts = {"e": [(1, 2), (2, 3), (7, 8)], "seed": [(1,)], "every": [()]}
    pruned = prune(program, frozenset(), true=frozenset({"every"}))
    assert [str(r) for r in pruned.rules_for("reach")] == ["reach(a) :- seed(a).", "reach(b) :- every(), e(_, b)."]
    whole = evaluate(program, None, outputs=["out"], facts=facts, engine=engine)["out"]
    assert sorted(evaluate(pruned, None, outputs=["out"], facts=facts, engine=engine)["out"]) == sorted(whole)
    assert sorted(whole) == [(1,), (2,), (3,), (8,)]


def test_a_nullary_not_known_to_hold_keeps_its_negations():
    program = parse_text(PROGRAM)
    assert len(prune(program, frozenset()).rules_for("reach")) == 3
    # known empty, the rules reading it positively go instead
    assert [str(r) for r in prune(program, frozenset({"every"})).rules_for("reach")] == [
        "reach(a) :- seed(a).", "reach(b) :- reach(a), e(a, b), !every()."]
