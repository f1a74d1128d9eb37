"""Differential tests: the embedded engine vs independent oracles on random
programs (recursion, mutual recursion, negation, arithmetic, aggregates)."""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys

import duckdb
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from torchtalk.datalog import check, evaluate, parse_text

from .gen import facts, programs
from .oracle import naive_eval

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _engine(text: str, edb: dict[str, set[tuple]], via_db: bool) -> dict[str, set[tuple]]:
    program = parse_text(text)
    check(program)
    con = duckdb.connect()
    given = {}
    if via_db:  # the fact-DB path: one table per input relation
        for rel, rows in edb.items():
            cols = ", ".join(f"c{i} BIGINT" for i in range(program.decls[rel].arity))
            con.execute(f"CREATE TABLE {rel} ({cols})")
            if rows:
                con.executemany(f"INSERT INTO {rel} VALUES ({', '.join('?' * program.decls[rel].arity)})", list(rows))
    else:  # the seed path: facts given to evaluate()
        given = {rel: sorted(rows) for rel, rows in edb.items()}
    out = evaluate(program, con, facts=given)
    assert all(len(rows) == len(set(rows)) for rows in out.values()), "set semantics: no duplicate rows"
    return {rel: set(rows) for rel, rows in out.items()}


@SETTINGS
@given(programs(), facts(), st.booleans())
def test_engine_matches_naive_oracle(text, edb, via_db):
    program = parse_text(text)
    want = naive_eval(program, edb)
    got = _engine(text, edb, via_db)
    for rel in program.outputs:
        assert got[rel] == want[rel], f"relation {rel} differs\n{text}\nfacts: {edb}"


def _pydatalog(text: str, edb: dict[str, set[tuple]]) -> dict[str, set[tuple]] | None:
    """The same program run by pyDatalog (variables upper-cased, ~ for negation),
    in a subprocess: pyDatalog never returns on some programs, so after
    PYD_TIMEOUT seconds the example is skipped (None)."""
    program = parse_text(text)
    lines = [f"+ {rel}({', '.join(map(str, row))})" for rel, rows in edb.items() for row in rows]
    for rule in program.rules:
        body = " & ".join(_pyd_literal(str(lit)) for lit in rule.body)
        lines.append(f"{_pyd_terms(str(rule.head))} <= {body}")
    # relations with no facts and no rules must exist for pyDatalog
    for rel, decl in program.decls.items():
        if not any(r.head.name == rel for r in program.rules) and not edb.get(rel):
            head = ", ".join(f"X{i}" for i in range(decl.arity))
            lines.append(f"{rel}({head}) <= {' & '.join(f'(X{i} == -99)' for i in range(decl.arity))}")
    asks = {rel: f"{rel}({', '.join('Q' + str(i) for i in range(program.decls[rel].arity))})" for rel in program.outputs}
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _PYD_WORKER],
            input=json.dumps({"code": "\n".join(lines), "asks": asks}),
            capture_output=True, text=True, timeout=PYD_TIMEOUT, check=True,
        )
    except subprocess.TimeoutExpired:
        return None
    return {rel: {tuple(r) for r in rows} for rel, rows in json.loads(proc.stdout).items()}


PYD_TIMEOUT = 5

_PYD_WORKER = """
import json, sys
from pyDatalog import pyDatalog
job = json.load(sys.stdin)
pyDatalog.load(job["code"])
out = {}
for rel, ask in job["asks"].items():
    ans = pyDatalog.ask(ask)
    out[rel] = [] if ans is None else [list(a) for a in ans.answers]
print(json.dumps(out))
"""


def _pyd_terms(s: str) -> str:
    """Variables upper-cased (`x` -> `VX`); each `_` a fresh variable (pyDatalog
    would share one variable named `_` across the rule)."""
    s = re.sub(r"\b([a-z]\w*)\b(?!\()", lambda m: "V" + m.group(1).upper(), s)
    return re.sub(r"(?<![\w])_(?![\w])", lambda m: f"W{next(_FRESH)}", s)


_FRESH = itertools.count()


def _pyd_literal(s: str) -> str:
    if s.startswith("!"):
        return "~" + _pyd_terms(s[1:])
    if "(" in s:
        return _pyd_terms(s)
    s = _pyd_terms(s).replace("!=", "!==").replace(" = ", " == ").replace("!==", "!=")
    return f"({s})"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(programs(aggregates=False, arithmetic=False), facts())
def test_engine_matches_pydatalog(text, edb):
    """pyDatalog supports recursion, negation and comparisons (not our aggregates).

    pyDatalog misreads a negated atom with an unbound variable (`!e(_, 0)`:
    "no e row ends in 0"), so those programs are left to the naive oracle.
    It can also read a negated relation before its table is complete, when
    that relation is mutually recursive with another (r and p in `r(0) :-
    p(x, x). p(0, x) :- r(x), f(_), p(x, y). t(0) :- f(x), !r(x).`: it
    derived t(0), which the naive oracle and the strata do not): a program
    on which the two oracles disagree is left to the naive one too.
    """
    pytest.importorskip("pyDatalog")
    assume(not re.search(r"![a-z]+\([^)]*\b_\b", text))
    want = _pydatalog(text, edb)
    assume(want is not None)  # pyDatalog did not finish in PYD_TIMEOUT s
    naive = naive_eval(parse_text(text), edb)
    assume(all(naive[rel] == rows for rel, rows in want.items()))  # a pyDatalog misreading
    got = _engine(text, edb, via_db=True)
    for rel, rows in want.items():
        assert got[rel] == rows, f"relation {rel} differs\n{text}\nfacts: {edb}"
