"""Note [Loop inputs cut first] (torchtalk/datalog/transform/loop_inputs.py):
a recursive rule's large input is read through the rows that can join the
relations computed before the loop, with the same answers."""

from __future__ import annotations

from unittest import mock

import duckdb
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from torchtalk.datalog import check, evaluate, parse_text
from torchtalk.datalog.engines import duckdb as engine
from torchtalk.datalog.transform.loop_inputs import loop_inputs

from .gen import facts, programs
from .oracle import naive_eval
from .test_differential import _engine

WALK = """
.decl step(a: number, b: number)
.input step
.decl near(a: number, d: number)
.input near
.decl seed(a: number)
.input seed
.decl close(a: number)
close(a) :- near(a, d), d < 3.
.decl walk(a: number)
.output walk
walk(a) :- seed(a).
walk(b) :- walk(a), step(a, b), close(b).
"""


class _Logged:
    """A DuckDB connection that keeps the SQL it is given."""

    def __init__(self, con) -> None:
        self.con, self.sql = con, []

    def __getattr__(self, name):
        return getattr(self.con, name)

    def execute(self, sql, *args):
        self.sql.append(sql)
        return self.con.execute(sql, *args)


def _walk_db(steps: int) -> duckdb.DuckDBPyConnection:
    """`steps` step rows, a chain 0 -> 1 -> ... and spokes; nodes below 40 close."""
    con = duckdb.connect()
    con.execute("CREATE TABLE step (a BIGINT, b BIGINT)")
    con.execute(f"INSERT INTO step SELECT i, i + 1 FROM range({steps}) t(i)")
    con.execute("CREATE TABLE near AS SELECT i AS a, CASE WHEN i < 40 THEN 1 ELSE 5 END AS d FROM range(100) t(i)")
    con.execute("CREATE TABLE seed AS SELECT 0 AS a")
    return con


def _run(steps: int) -> tuple[set, list[str]]:
    program = parse_text(WALK)
    check(program)
    con = _Logged(_walk_db(steps))
    out = evaluate(program, con, outputs=["walk"])
    return set(out["walk"]), con.sql


def test_a_large_input_of_a_walk_is_cut_to_the_rows_it_can_join():
    rows, sql = _run(engine.LOOP_INPUT_ROWS)
    assert rows == {(i,) for i in range(40)}
    plan = " ".join(sql)
    loop = plan[plan.index('_walk_rec"('):]
    assert '_step_cut0" AS MATERIALIZED' in plan  # computed once, before the loop
    assert '_step_cut0" AS t' in loop and '"step" AS t' not in loop


def test_a_small_input_is_read_as_it_is():
    rows, sql = _run(engine.LOOP_INPUT_ROWS - 1)
    assert rows == {(i,) for i in range(40)}
    plan = " ".join(sql)
    assert "step_cut0" not in plan and '"step" AS t' in plan[plan.index('_walk_rec"('):]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(programs(), facts(), st.booleans())
def test_every_input_cut_matches_the_naive_oracle(text, edb, via_db):
    """Random programs (recursion, negation, aggregates) that have a loop
    input to cut (about one in sixteen), with every such input cut."""
    program = parse_text(text)
    assume(loop_inputs(program))
    want = naive_eval(program, edb)
    with mock.patch.object(engine, "LOOP_INPUT_ROWS", 0):
        got = _engine(text, edb, via_db)
    for rel in program.outputs:
        assert got[rel] == want[rel], f"relation {rel} differs\n{text}\nfacts: {edb}"
