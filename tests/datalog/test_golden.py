"""Golden SQL: tests/datalog/golden/<case>.dl beside the expected <case>.sql
(the plan over tables, as the index stores relations) and <case>.one.sql (the
one-statement plan a query runs, Note [One statement]).

Rewrite the goldens after an intended change with
    TORCHTALK_REGOLD=1 .venv/bin/python -m pytest tests/datalog/test_golden.py
and review the diff. Each case also runs, so a golden can't hold broken SQL.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import duckdb
import pytest

from torchtalk.datalog import check, evaluate, parse_file
from torchtalk.datalog.compile import compile_program, q

GOLDEN = Path(__file__).parent / "golden"
CASES = sorted(p.stem for p in GOLDEN.glob("*.dl"))


def compiled(case: str, single: bool) -> str:
    program = parse_file(GOLDEN / f"{case}.dl")
    check(program)
    sources = {rel: [q(rel)] for rel in program.inputs}
    return compile_program(program, program.outputs, sources, single=single).render()


@pytest.mark.parametrize("single", [False, True], ids=["tables", "one"])
@pytest.mark.parametrize("case", CASES)
def test_golden_sql(case, single):
    got = compiled(case, single)
    path = GOLDEN / f"{case}{'.one' if single else ''}.sql"
    if os.environ.get("TORCHTALK_REGOLD"):
        path.write_text(got)
    want = path.read_text() if path.exists() else ""
    if got != want:
        diff = "".join(difflib.unified_diff(want.splitlines(True), got.splitlines(True), str(path), "compiled"))
        pytest.fail(f"compiled SQL differs from {path.name} (TORCHTALK_REGOLD=1 rewrites it):\n{diff}")


@pytest.mark.parametrize("case", CASES)
def test_golden_program_runs(case):
    """Every golden program runs on empty input tables of the declared types."""
    program = parse_file(GOLDEN / f"{case}.dl")
    con = duckdb.connect()
    for rel in program.inputs:
        cols = ", ".join(f"{q(c.name)} {'VARCHAR' if c.type == 'symbol' else 'BIGINT'}" for c in program.decls[rel].columns)
        con.execute(f"CREATE TABLE {q(rel)} ({cols})")
    out = evaluate(program, con)
    assert set(out) == set(program.outputs)
