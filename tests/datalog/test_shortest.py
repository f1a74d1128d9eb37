"""Note [Rows a shorter walk covers] (torchtalk/datalog/analysis/shortest.py):
which columns are distances, and the in-memory engine's walk without the
rows a shorter one covers: fewer rows, the same answers as the embedded
engine and the naive oracle."""

from __future__ import annotations

import duckdb
import pytest

from torchtalk.connmemo import Session
from torchtalk.datalog import evaluate, parse_text
from torchtalk.datalog.analysis.shortest import distance_column
from torchtalk.datalog.engines.memory import MemoryEngine, drop_kept
from torchtalk.query.library import load_library

from .oracle import naive_eval

DECLS = """
.decl e(a: number, b: number, h: number)
.input e
.decl seed(a: number)
.input seed
.decl lim(m: number)
.input lim
.decl r(s: number, c: number, d: number, g: number)
.decl near(s: number, c: number, d: number)
.decl sure(s: number, c: number)
.decl seen(s: number, c: number)
.output near, sure, seen
r(s, s, 0, 0) :- seed(s).
"""

# A walk whose readers take the least distance, or none.
WALK = DECLS + """
r(s, c, d + 1, g + h - g * h) :- r(s, x, d, g), lim(m), d < m, e(x, c, h).
near(s, c, d) :- r(s, c, _, _), d = min x : { r(s, c, x, _) }.
sure(s, c) :- r(s, c, _, 0).
seen(s, c) :- r(s, c, k, _).
"""

# Paths of several lengths to the same node, a guessed shortcut (h = 1) and a cycle.
FACTS = {
    "e": [(1, 2, 0), (2, 3, 0), (3, 4, 0), (1, 4, 1), (4, 5, 0), (1, 3, 0), (5, 1, 0), (2, 4, 0)],
    "seed": [(1,)],
    "lim": [(4,)],
}


def test_the_library_walks_have_a_distance_column():
    lib = load_library()
    assert distance_column(lib, ("down_reach",)) == 4
    assert distance_column(lib, ("up_reach",)) == 3
    assert distance_column(lib, ("to_card",)) is None  # no distance: a set of nodes
    assert distance_column(lib, ("down_reach", "up_reach")) is None  # not one relation's stratum


def test_a_walk_keeps_the_least_distance_of_each_row_and_gives_the_same_answers():
    prog = parse_text(WALK)
    assert distance_column(prog, ("r",)) == 2
    con = duckdb.connect()
    cut: set = set()
    env = MemoryEngine().evaluate(prog, con, ["near", "sure", "seen"], FACTS, {}, cut)
    every = naive_eval(prog, {k: set(v) for k, v in FACTS.items()})
    least: dict = {}
    for s, c, d, g in every["r"]:
        least[s, c, g] = min(d, least.get((s, c, g), d))
    assert cut == {"r"}
    assert len(every["r"]) > len(least)  # the walk reaches nodes at several distances
    assert env["r"].rows == {(s, c, d, g) for (s, c, g), d in least.items()}
    for rel in ("near", "sure", "seen"):
        assert env[rel].rows == every[rel]
    assert sorted(every["near"]) == [(1, 1, 0), (1, 2, 1), (1, 3, 1), (1, 4, 1), (1, 5, 2)]
    assert sorted(every["sure"]) == [(1, 1), (1, 2), (1, 3), (1, 4), (1, 5)]
    duck = evaluate(prog, con, facts=FACTS)
    mem = evaluate(prog, con, facts=FACTS, engine="memory")
    assert {k: sorted(v) for k, v in duck.items()} == {k: sorted(v) for k, v in mem.items()}


def test_steps_of_several_lengths_keep_the_least_distance():
    """A round's rows are of several distances, some shorter than rows held."""
    prog = parse_text(WALK + "r(s, c, d + 3, g) :- r(s, x, d, g), lim(m), d < m, e(c, x, _).\n"
                      "r(s, c, d, g) :- r(s, x, d, g), d < 6, e(x, c, 1).\n")
    assert distance_column(prog, ("r",)) == 2
    facts = {**FACTS, "lim": [(7,)]}
    every = naive_eval(prog, {k: set(v) for k, v in facts.items()})
    least: dict = {}
    for s, c, d, g in every["r"]:
        least[s, c, g] = min(d, least.get((s, c, g), d))
    env = MemoryEngine().evaluate(prog, duckdb.connect(), ["near", "sure", "seen"], facts, {})
    got: dict = {}
    for s, c, d, g in env["r"].rows:
        got[s, c, g] = min(d, got.get((s, c, g), d))
    assert env["r"].rows < every["r"] and got == least  # a longer row held before a shorter came may stay
    for rel in ("near", "sure", "seen"):
        assert env[rel].rows == every[rel]


def test_an_output_walk_and_a_kept_one_keep_every_row():
    prog = parse_text(WALK.replace(".output near, sure, seen", ".output near, sure, seen, r"))
    con = duckdb.connect()
    every = naive_eval(prog, {k: set(v) for k, v in FACTS.items()})
    assert set(evaluate(prog, con, facts=FACTS, engine="memory")["r"]) == every["r"]
    # kept for a later run (Note [One walk per answer]): the walk cut short is not
    session = Session(duckdb.connect())
    keep: dict = {}
    MemoryEngine().run(parse_text(WALK), session, ["near"], FACTS, keep=keep)
    assert sorted(keep) == ["near"]
    assert drop_kept(session, keep.values()) == []


@pytest.mark.parametrize(
    "rules",
    [
        # a reader reads the distance itself
        "r(s, c, d + 1, g) :- r(s, x, d, g), lim(m), d < m, e(x, c, _).\nnear(s, c, d) :- r(s, c, d, _).",
        # ... its largest
        "r(s, c, d + 1, g) :- r(s, x, d, g), lim(m), d < m, e(x, c, _).\n"
        "near(s, c, d) :- r(s, c, _, _), d = max x : { r(s, c, x, _) }.",
        # ... or counts the rows
        "r(s, c, d + 1, g) :- r(s, x, d, g), lim(m), d < m, e(x, c, _).\n"
        "near(s, c, n) :- r(s, c, _, _), n = count : { r(s, c, _, _) }.",
        # a step shortens the distance
        "r(s, c, d - 1, g) :- r(s, x, d, g), lim(m), d > -9, e(x, c, _).",
        # a bound from below: a longer row passes where a shorter does not
        "r(s, c, d + 1, g) :- r(s, x, d, g), lim(m), d < m, d > 1, e(x, c, _).",
        # the distance picks the step
        "r(s, c, d + 1, g) :- r(s, x, d, g), lim(m), d < m, e(x, c, d).",
        # ... or goes into another column
        "r(s, c, d + 1, d) :- r(s, x, d, _), lim(m), d < m, e(x, c, _).",
        # a rule reads the walk twice
        "r(s, c, d + 1, g) :- r(s, x, d, g), r(s, c, _, _), lim(m), d < m, e(x, c, _).",
    ],
)
def test_a_column_read_otherwise_is_no_distance(rules):
    prog = parse_text(DECLS + "sure(s, c) :- r(s, c, _, 0).\n" + rules)  # g read as a value: no distance
    assert distance_column(prog, ("r",)) is None
    con = duckdb.connect()
    every = naive_eval(prog, {k: set(v) for k, v in FACTS.items()})
    mem = evaluate(prog, con, facts=FACTS, engine="memory")
    assert {k: set(v) for k, v in mem.items()} == {k: every[k] for k in mem}
