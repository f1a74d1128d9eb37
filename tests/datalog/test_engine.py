"""The embedded engine on hand-written programs: exact rows, read-only DBs,
outputs-only evaluation, cleanup, given facts, errors; Soufflé cross-check."""

from __future__ import annotations

import duckdb
import pytest

from torchtalk.datalog import evaluate, parse_text
from torchtalk.datalog.compile import compile_program
from torchtalk.datalog.engines.souffle import souffle_text
from torchtalk.errors import EngineError, ErrorList, InputError

GRAPH = """
.decl edge(a: symbol, b: symbol)
.input edge
.decl seed(fn: symbol)
.input seed
// transitive callers of the seeds (linear recursion -> WITH RECURSIVE)
.decl up(fn: symbol)
.output up
up(c) :- seed(f), edge(c, f).
up(c) :- up(f), edge(c, f).
// all pairs, non-linear recursion (semi-naive fixpoint)
.decl tc(a: symbol, b: symbol)
.output tc
tc(x, y) :- edge(x, y).
tc(x, z) :- tc(x, y), tc(y, z).
// mutual recursion: odd / even distance from "a"
.decl odd(n: symbol)
.decl even(n: symbol)
.output odd, even
even("a").
odd(y) :- even(x), edge(x, y).
even(y) :- odd(x), edge(x, y).
// negation and aggregates over lower strata
.decl leaf(n: symbol)
.output leaf
leaf(y) :- edge(_, y), !edge(y, _).
.decl fanout(n: symbol, k: number)
.output fanout
fanout(x, k) :- edge(x, _), k = count : { edge(x, _) }.
.decl reach_count(n: symbol, k: number)
.output reach_count
reach_count(x, k) :- edge(x, _), k = count : { tc(x, _) }, k >= 2.
"""

EDGES = [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("e", "a")]




def test_exact_rows_on_read_only_db(db):
    con = duckdb.connect(str(db), read_only=True)
    out = evaluate(parse_text(GRAPH), con, facts={"seed": [("d",)]})
    assert sorted(out["up"]) == [("a",), ("b",), ("c",), ("e",)]
    nodes = "abcde"
    reach = {"a": "abcd", "b": "abcd", "c": "abcd", "d": "", "e": "abcd"}
    assert sorted(out["tc"]) == sorted((x, y) for x in nodes for y in reach[x])
    assert sorted(out["even"]) == [("a",), ("b",), ("c",), ("d",)]
    assert sorted(out["odd"]) == [("a",), ("b",), ("c",), ("d",)]
    assert sorted(out["leaf"]) == [("d",)]
    assert sorted(out["fanout"]) == [("a", 1), ("b", 1), ("c", 2), ("e", 1)]
    assert sorted(out["reach_count"]) == [("a", 4), ("b", 4), ("c", 4), ("e", 4)]
    # nothing left behind in the temp catalog
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE temporary").fetchone() == (0,)


def test_outputs_only_compiles_needed_strata():
    prog = parse_text(GRAPH)
    sql = compile_program(prog, ["leaf"], {"edge": ['"edge"']}).render()
    assert "tc" not in sql and "odd" not in sql and "up" not in sql
    assert sql == (
        "-- output leaf\n"
        'SELECT DISTINCT t0."b" AS "n" FROM "edge" AS t0 WHERE NOT EXISTS '
        '(SELECT 1 FROM "edge" AS t_n1 WHERE t_n1."a" = t0."b");\n'
    )


def test_missing_input_table_is_empty_and_facts_add_rows(db):
    con = duckdb.connect(str(db), read_only=True)
    out = evaluate(parse_text(GRAPH), con, outputs=["up"])  # no seed table, no seed facts
    assert out == {"up": []}
    more = evaluate(parse_text(GRAPH), con, outputs=["leaf"], facts={"edge": [("d", "z")]})
    assert sorted(more["leaf"]) == [("z",)]


def test_many_given_facts_go_through_a_temp_table(db):
    con = duckdb.connect(str(db), read_only=True)
    seeds = [(f"n{i}",) for i in range(1500)] + [("d",)]
    out = evaluate(parse_text(GRAPH), con, outputs=["up"], facts={"seed": seeds})
    assert sorted(out["up"]) == [("a",), ("b",), ("c",), ("e",)]
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE temporary").fetchone() == (0,)


def test_given_numbers_are_typed_by_the_first_row_only():
    """Note [Typed once]: inlined facts cast only the first row's numbers;
    the column is BIGINT all the same (sums past 2**31, large values, and
    negatives come back exact), and later rows carry no CAST."""
    from torchtalk.datalog.engines.duckdb import inline_values

    prog = parse_text(""".decl r(k: symbol, n: number)
.input r
.decl total(s: number)
.output total
total(s) :- s = sum n : { r(_, n) }.
""")
    rows = [("a", 2**31 - 1), ("b", 2**31 - 1), ("c", -5), ("d", 2**40)]
    out = evaluate(prog, duckdb.connect(), outputs=["total"], facts={"r": rows})
    assert out == {"total": [(2 * (2**31 - 1) - 5 + 2**40,)]}
    sql = inline_values(prog.decls["r"], rows)
    assert sql.count("CAST(") == 1
    assert duckdb.connect().execute(f"SELECT DISTINCT typeof(n) FROM {sql}").fetchall() == [("BIGINT",)]


@pytest.mark.parametrize("engine", ["duckdb", "memory"])
def test_symbols_with_quotes_and_builtins(engine):
    prog = parse_text(
        """.decl s(x: symbol)
        .decl m(x: symbol)
        .output m
        s("it's"). s("a\\"b"). s("torch.nn.Linear"). s("torch.optim.SGD").
        m(x) :- s(x), contains("nn", x).
        m(x) :- s(x), match("it.*", x).
        m(x) :- s(x), !contains(".", x), !match("it.*", x)."""
    )
    assert sorted(evaluate(prog, None, engine=engine)["m"]) == [('a"b',), ("it's",), ("torch.nn.Linear",)]


@pytest.mark.parametrize("engine", ["duckdb", "memory"])
def test_arithmetic_truncates_like_c(engine):
    prog = parse_text(
        """.decl n(x: number)
        .decl r(a: number, q: number, m: number)
        .output r
        n(-7). n(7).
        r(x, x / 2, x % 2) :- n(x)."""
    )
    assert sorted(evaluate(prog, None, engine=engine)["r"]) == [(-7, -3, -1), (7, 3, 1)]


@pytest.mark.parametrize("engine", ["duckdb", "memory"])
def test_min_over_nothing_yields_no_row_sum_yields_zero(engine):
    prog = parse_text(
        """.decl k(x: symbol)
        .decl w(x: symbol, v: number)
        .decl lo(x: symbol, v: number)
        .decl tot(x: symbol, v: number)
        .output lo, tot
        k("a"). k("b"). w("a", 3). w("a", 5).
        lo(x, v) :- k(x), v = min c : { w(x, c) }.
        tot(x, v) :- k(x), v = sum c : { w(x, c) }."""
    )
    out = evaluate(prog, None, engine=engine)
    assert sorted(out["lo"]) == [("a", 3)]
    assert sorted(out["tot"]) == [("a", 8), ("b", 0)]


def test_table_with_other_columns_is_an_engine_error(tmp_path):
    con = duckdb.connect()
    con.execute("CREATE TABLE edge (src VARCHAR, dst VARCHAR)")
    with pytest.raises(EngineError) as ei:
        evaluate(parse_text(GRAPH, "g.dl"), con, outputs=["leaf"])
    assert ei.value.message == (
        "table 'edge' of the fact database has columns (src VARCHAR, dst VARCHAR), "
        "but its .decl at g.dl:2:1 says (a: symbol, b: symbol)"
    )


def test_user_errors():
    prog = parse_text(GRAPH)
    with pytest.raises(InputError, match=r"unknown relation 'lef' \(did you mean 'leaf'\?\)"):
        evaluate(prog, None, outputs=["lef"])
    with pytest.raises(InputError, match=r"row 1 of 'seed' has 2 values, its .decl has 1 columns"):
        evaluate(prog, None, outputs=["up"], facts={"seed": [("a", "b")]})
    with pytest.raises(InputError, match=r"row 1 of 'seed': column 'fn' is a symbol, got 3"):
        evaluate(prog, None, outputs=["up"], facts={"seed": [(3,)]})
    with pytest.raises(ErrorList):
        evaluate(parse_text(".decl p(x: number)\n.output p\np(x) :- q(x)."), None)


def test_souffle_missing_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(EngineError) as ei:
        evaluate(parse_text(GRAPH), None, engine="souffle")
    assert ei.value.headline() == (
        "engine error: souffle is not on PATH "
        "(install Soufflé (https://souffle-lang.github.io) or use --engine duckdb)"
    )


def test_souffle_program_text_is_flat_and_reparses():
    prog = parse_text(GRAPH)
    text = souffle_text(prog, ["leaf"])
    again = parse_text(text)
    assert again.outputs == ("leaf",) and again.inputs == ("edge", "seed")
    assert again.rules == prog.rules and again.decls == prog.decls


@pytest.mark.souffle
def test_cross_engine_same_rows(db, souffle_bin):
    con = duckdb.connect(str(db), read_only=True)
    prog = parse_text(GRAPH)
    a = evaluate(prog, con, facts={"seed": [("d",)]})
    b = evaluate(prog, con, facts={"seed": [("d",)]}, engine="souffle")
    assert {k: sorted(v) for k, v in a.items()} == {k: sorted(v) for k, v in b.items()}


ORD = """
.decl edge(a: symbol, b: symbol)
.input edge
.decl node(name: symbol, id: number)
node(a, ord(a)) :- edge(a, _).
node(b, ord(b)) :- edge(_, b).
.decl pair(a: number, b: number)
pair(ord(a), ord(b)) :- edge(a, b).
.decl seed(fn: symbol)
.input seed
// callers of the seeds, walked over numbers and named again
.decl up_n(n: number)
up_n(i) :- seed(s), node(s, i).
up_n(c) :- up_n(x), pair(c, x).
.decl up(fn: symbol)
.output up
up(c) :- up_n(i), node(c, i).
"""


def test_ord_numbers_symbols_the_same_in_every_run(db):
    con = duckdb.connect(str(db), read_only=True)
    prog = parse_text(ORD)
    first = dict(evaluate(prog, con, outputs=["node"])["node"])
    again = dict(evaluate(prog, con, outputs=["node"])["node"])
    assert first == again and sorted(first) == list("abcde")
    assert len(set(first.values())) == 5  # one-to-one
    assert all(isinstance(i, int) and 0 <= i < 2**63 for i in first.values())
    # the walk over numbers gives the walk over names (GRAPH's `up`)
    assert sorted(evaluate(prog, con, outputs=["up"], facts={"seed": [("d",)]})["up"]) == [
        ("a",), ("b",), ("c",), ("d",), ("e",)]


def test_linear_program_is_one_statement_and_mutual_falls_back_to_tables(db):
    prog = parse_text(GRAPH)
    one = compile_program(prog, ["up", "leaf"], {"edge": ['"edge"'], "seed": ['"seed"']}, single=True)
    assert one.steps == () and one.temp_tables == ()
    assert one.fetch["up"] == (
        'WITH RECURSIVE "_tt_up_rec"("fn") AS ((SELECT t1."a" AS "fn" FROM "seed" AS t0, "edge" AS t1 '
        'WHERE t1."b" = t0."fn") UNION (SELECT t1."a" AS "fn" FROM "_tt_up_rec" AS t0, "edge" AS t1 '
        'WHERE t1."b" = t0."fn")) SELECT * FROM "_tt_up_rec"')
    assert "WITH" not in one.fetch["leaf"]  # reads no derived relation
    both = compile_program(prog, ["odd"], {"edge": ['"edge"']}, single=True)
    assert any(not hasattr(s, "sql") for s in both.steps)  # the semi-naive loop over tables
    con = duckdb.connect(str(db), read_only=True)
    out = evaluate(prog, con, outputs=["odd", "reach_count"])
    assert sorted(out["odd"]) == [("a",), ("b",), ("c",), ("d",)]
    assert sorted(out["reach_count"]) == [("a", 4), ("b", 4), ("c", 4), ("e", 4)]


def test_plan_cache_fills_each_runs_sources(db, monkeypatch):
    import torchtalk.datalog.compile as C
    import torchtalk.datalog.engines.duckdb as E

    calls = []
    real = C.compile_program
    monkeypatch.setattr(E, "compile_program", lambda *a, **k: calls.append(1) or real(*a, **k))
    con = duckdb.connect(str(db), read_only=True)
    prog = parse_text(GRAPH)
    assert sorted(evaluate(prog, con, outputs=["up"], facts={"seed": [("d",)]})["up"]) == [
        ("a",), ("b",), ("c",), ("e",)]
    assert sorted(evaluate(prog, con, outputs=["up"], facts={"seed": [("e",)]})["up"]) == []
    assert sorted(evaluate(prog, con, outputs=["up"], facts={"seed": [("a",), ("it's",)]})["up"]) == [
        ("a",), ("b",), ("c",), ("e",)]
    seeds = [(f"n{i}",) for i in range(1500)] + [("b",)]  # a temp table, not VALUES
    assert sorted(evaluate(prog, con, outputs=["up"], facts={"seed": seeds})["up"]) == [
        ("a",), ("b",), ("c",), ("e",)]
    assert len(calls) == 1  # every run reads `seed` from one source: one plan


def test_fetch_filters_sorts_limits_and_counts(db):
    from torchtalk.datalog.engines import Fetch, fetch_rows

    con = duckdb.connect(str(db), read_only=True)
    prog = parse_text(GRAPH)
    spec = Fetch(order=(1, 0), keep=((0, frozenset({"a", "b", "c", "z"})),), limit=3)
    page = evaluate(prog, con, outputs=["tc"], fetch={"tc": spec})["tc"]
    assert list(page) == [("a", "a"), ("b", "a"), ("c", "a")] and page.total == 12
    every = evaluate(prog, con, outputs=["tc"])["tc"]
    assert list(fetch_rows(every, spec)) == list(page) and fetch_rows(every, spec).total == 12
    none = evaluate(prog, con, outputs=["tc"], fetch={"tc": Fetch((0,), ((0, frozenset()),), 5)})["tc"]
    assert list(none) == [] and none.total == 0
    zero = evaluate(prog, con, outputs=["tc"], fetch={"tc": Fetch((0,), (), 0)})["tc"]
    assert list(zero) == [] and zero.total == 16


NUMS = """
.decl r(a: symbol, n: number)
.input r
.decl out(a: symbol, n: number)
.output out
out(a, n) :- r(a, n).
"""


def test_fetch_sorts_a_number_column_largest_first(db):
    """Fetch.order's `~i`: column i descending (impact's `tests`, Note [API tiers])."""
    from torchtalk.datalog.engines import Fetch, fetch_rows

    con = duckdb.connect(str(db), read_only=True)
    rows = [("a", 1), ("b", 239), ("d", 50), ("c", 50)]
    spec = Fetch(order=(~1, 0), limit=3)
    page = evaluate(parse_text(NUMS), con, outputs=["out"], facts={"r": rows}, fetch={"out": spec})["out"]
    assert list(page) == [("b", 239), ("c", 50), ("d", 50)] and page.total == 4
    assert list(fetch_rows(rows, spec)) == list(page)


SECTIONED = """
.decl r(kind: symbol, name: symbol, n: number)
.input r
.decl out(kind: symbol, name: symbol, n: number)
.output out
out(k, a, n) :- r(k, a, n).
"""


def test_fetch_per_section_keeps_the_first_rows_of_each_and_counts_all(db):
    """Fetch.per (Note [Rows per section]): the first n rows of each value
    of a column, in the order, with every section's count and the columns
    of one value over all rows; the same from the engine and in Python."""
    from torchtalk.datalog.engines import Fetch, fetch_rows

    con = duckdb.connect(str(db), read_only=True)
    rows = [("op", "mm", 1), ("fn", "gemm", 2), ("fn", "addmm", 9), ("fn", "bmm", 1), ("op", "addmm", 1),
            ("python", "torch.mm", 1)]
    prog = parse_text(SECTIONED)
    spec = Fetch(order=(~2, 1, 0, 2), per=(0, 2))
    page = evaluate(prog, con, outputs=["out"], facts={"r": rows}, fetch={"out": spec})["out"]
    assert list(page) == [("fn", "addmm", 9), ("fn", "gemm", 2), ("op", "addmm", 1), ("op", "mm", 1),
                          ("python", "torch.mm", 1)]
    assert page.total == 6 and page.counts == {"fn": 3, "op": 2, "python": 1} and page.one_value == frozenset()
    py = fetch_rows(rows, spec)
    assert (list(py), py.total, py.counts, py.one_value) == (list(page), 6, page.counts, page.one_value)
    # unsectioned; a column with one value over all the rows is said so, not one over the rows kept
    same = [("fn", a, n) for _, a, n in rows]
    whole = evaluate(prog, con, outputs=["out"], facts={"r": same}, fetch={"out": Fetch((1, 0, 2), per=(None, 2))})["out"]
    assert list(whole) == [("fn", "addmm", 1), ("fn", "addmm", 9)]
    assert whole.total == 6 and whole.counts == {None: 6} and whole.one_value == frozenset({0})
    empty = evaluate(prog, con, outputs=["out"], facts={"r": []}, fetch={"out": spec})["out"]
    assert list(empty) == [] and empty.total == 0 and empty.counts == {}


GROUPED = """
.decl r(a: number, b: number, c: number)
.input r
.decl lo(a: number, b: number, m: number)
.output lo
lo(a, b, m) :- r(a, b, _), m = min c : { r(a, b, c) }.
.decl hi(a: number, m: number)
.output hi
hi(a, m + 1) :- r(a, _, _), m = max c : { r(a, _, c) }.
.decl n(a: number, k: number)
.output n
n(a, k) :- r(a, _, _), k = count : { r(a, _, _) }.
.decl s(b: number, t: number)
.output s
s(b, t) :- r(_, b, _), t = sum c : { r(_, b, c) }.
.decl all(k: number)
.output all
all(k) :- r(_, _, _), k = count : { r(_, _, _) }.
"""


@pytest.mark.parametrize("rows", [[], [(1, 1, 5), (1, 1, 3), (1, 2, 3), (2, 1, 3), (2, 1, 3), (2, 2, -4)]])
def test_grouped_aggregates_equal_the_oracle(rows):
    from .oracle import naive_eval

    prog = parse_text(GROUPED)
    sql = compile_program(prog, ["lo", "hi", "n", "s", "all"], {"r": ['"r"']}, single=True).fetch
    assert all("GROUP BY" in sql[rel] for rel in ("lo", "hi", "n", "s"))
    assert "GROUP BY" not in sql["all"] and "LATERAL" in sql["all"]  # no variable to group by
    con = duckdb.connect()
    con.execute("CREATE TABLE r (a BIGINT, b BIGINT, c BIGINT)")
    if rows:
        con.executemany("INSERT INTO r VALUES (?, ?, ?)", rows)
    got = {rel: set(v) for rel, v in evaluate(prog, con).items()}
    want = naive_eval(prog, {"r": set(rows)})
    assert got == {rel: want[rel] for rel in got}
    if rows:
        assert got["lo"] == {(1, 1, 3), (1, 2, 3), (2, 1, 3), (2, 2, -4)}
        assert got["n"] == {(1, 3), (2, 2)} and got["s"] == {(1, 11), (2, -1)}


PROPOSITIONS = """
.decl edge(a: symbol, b: symbol)
.input edge
.decl enabled()
.input enabled
// nullary relations (Note [Nullary relations]) and disjunction in bodies
.decl cyclic()
.output cyclic
cyclic() :- edge(x, y), edge(y, z), edge(z, x), enabled().
.decl acyclic()
.output acyclic
acyclic() :- !cyclic().
.decl ends(n: symbol)
.output ends
ends(n) :- edge(n, _), (n = "a" ; n = "e" ; n = "z").
.decl pick(n: symbol)
.output pick
pick(n) :- edge(n, m), !acyclic(), (m = "b", cyclic() ; m = "d" ; m = "a", n = "c").
.decl props(k: number)
.output props
props(k) :- k = count : { cyclic() }.
"""


@pytest.mark.parametrize("enabled", [True, False])
def test_nullary_relations_and_disjunction(db, enabled):
    con = duckdb.connect(str(db), read_only=True)
    rows = evaluate(parse_text(PROPOSITIONS), con, facts={"enabled": [()] if enabled else []})
    got = {k: sorted(v) for k, v in rows.items()}
    if enabled:
        assert got == {"cyclic": [()], "acyclic": [], "ends": [("a",), ("e",)],
                       "pick": [("a",), ("c",)], "props": [(1,)]}
    else:
        assert got == {"cyclic": [], "acyclic": [()], "ends": [("a",), ("e",)], "pick": [], "props": [(0,)]}


@pytest.mark.parametrize("enabled", [True, False])
def test_nullary_relations_and_disjunction_same_on_souffle(db, souffle_bin, enabled):
    con = duckdb.connect(str(db), read_only=True)
    facts = {"enabled": [()] if enabled else []}
    a = evaluate(parse_text(PROPOSITIONS), con, facts=facts)
    b = evaluate(parse_text(PROPOSITIONS), con, facts=facts, engine="souffle")
    assert {k: sorted(v) for k, v in a.items()} == {k: sorted(v) for k, v in b.items()}


TYPED = """
.type Caller <: symbol
.type Callee <: symbol
.type Fn = Caller | Callee
.decl edge(a: Caller, b: Callee)
.input edge
.decl named(f: Fn)
.output named
named(x) :- edge(x, _).
named(y) :- edge(_, y).
.decl self_loop_free(a: Caller)
.output self_loop_free
self_loop_free(a) :- edge(a, b), !edge(as(b, Caller), as(a, Callee)).
"""


def test_typed_programs_run_the_same_on_both_engines(db, souffle_bin):
    """Note [Types]: the names are for the checker; the rows are the base type's."""
    con = duckdb.connect(str(db), read_only=True)
    a = evaluate(parse_text(TYPED), con)
    b = evaluate(parse_text(TYPED), con, engine="souffle")
    assert sorted(a["named"]) == [("a",), ("b",), ("c",), ("d",), ("e",)]
    assert sorted(a["self_loop_free"]) == [("a",), ("b",), ("c",), ("e",)]
    assert {k: sorted(v) for k, v in a.items()} == {k: sorted(v) for k, v in b.items()}


def test_compiled_souffle_gives_the_same_rows_and_compiles_once(db, souffle_compiler, tmp_path, monkeypatch):
    """Note [Compiled Soufflé]: `souffle -o` once per program text, cached."""
    monkeypatch.setenv("TORCHTALK_CACHE_DIR", str(tmp_path / "cache"))
    con = duckdb.connect(str(db), read_only=True)
    prog = parse_text(GRAPH + PROPOSITIONS.replace(".decl edge(a: symbol, b: symbol)\n.input edge\n", ""))
    facts = {"seed": [("d",)], "enabled": [()]}
    embedded = evaluate(prog, con, facts=facts)
    compiled = evaluate(prog, con, facts=facts, engine="souffle-compiled")
    assert {k: sorted(v) for k, v in compiled.items()} == {k: sorted(v) for k, v in embedded.items()}
    assert len(list((tmp_path / "cache/souffle").glob("program-*"))) == 1
    evaluate(prog, con, facts={"seed": [("a",)], "enabled": []}, engine="souffle-compiled")  # other facts, same program
    assert len(list((tmp_path / "cache/souffle").glob("program-*"))) == 1


# Note [Given rows as read] (engines/duckdb.py): given rows as the rules read them
AS_READ = """
.decl shown(s: symbol, kind: symbol, name: symbol, note: symbol, n: number)
.input shown
.decl e(a: symbol, b: symbol)
.input e
.decl fn_need(s: symbol, x: symbol)
fn_need(s, x) :- shown(s, "function", x, _, _).
.decl py_need(s: symbol, y: symbol)
py_need(s, y) :- shown(s, "python", x, _, _), e(x, y).
.decl gone(s: symbol)
gone(s) :- shown(s, "function", _, _, _), !shown(s, "python", _, _, _).
.decl rows(s: symbol, c: number)
rows(s, c) :- shown(s, _, _, _, _), c = count : { shown(s, _, _, _, _) }.
.decl out(s: symbol, x: symbol)
out(s, x) :- fn_need(s, x).
out(s, y) :- py_need(s, y).
out(s, "gone") :- gone(s).
"""
SHOWN = [("a", "function", "f1", "long note " * 20, 1), ("a", "function", "f2", "other note", 2),
         ("a", "op", "o1", "n", 3), ("a", "python", "p1", "n", 4), ("b", "function", "f3", "n", 5),
         ("c", "op", "o2", "n", 6)]


def test_given_rows_are_cut_to_what_the_rules_read():
    from torchtalk.datalog.engines.duckdb import as_read

    program = parse_text(AS_READ)
    read = as_read(program, "shown", SHOWN, frozenset({"out", "fn_need", "py_need", "gone"}))
    # the op rows no rule reads are gone; the note and n no rule reads take one value
    assert read == [("a", "function", "f1", "", 0), ("a", "function", "f2", "", 0),
                    ("a", "python", "p1", "", 0), ("b", "function", "f3", "", 0)]
    facts = {"shown": SHOWN, "e": [("p1", "y1"), ("o1", "y2")]}
    want = evaluate(program, None, outputs=["out"], facts=facts, engine="memory")["out"]
    assert sorted(want) == [("a", "f1"), ("a", "f2"), ("a", "y1"), ("b", "f3"), ("b", "gone")]
    assert sorted(evaluate(program, duckdb.connect(), outputs=["out"], facts=facts)["out"]) == sorted(want)


def test_given_rows_a_count_reads_are_kept_apart():
    # rows differing only in columns the rules leave `_` are still counted apart
    from torchtalk.datalog.engines.duckdb import as_read

    program = parse_text(AS_READ)
    assert as_read(program, "shown", SHOWN, frozenset({"rows"})) == SHOWN
    got = evaluate(program, duckdb.connect(), outputs=["rows"], facts={"shown": SHOWN})["rows"]
    assert sorted(got) == [("a", 4), ("b", 1), ("c", 1)]


def test_columns_kept_while_a_refresh_runs_probe_a_found_table_once():
    """Note [Columns kept in a refresh]: inside `columns_kept`, a writable
    connection's table found once is not probed again; one not found is
    (it may be made later); outside, every call probes."""
    from torchtalk.datalog.engines.duckdb import columns_kept, db_tables

    class Probes:
        def __init__(self, con):
            self.con, self.probed = con, []

        def execute(self, sql, *args):
            if sql.endswith(" LIMIT 0"):
                self.probed.append(sql.split()[3])
            return self.con.execute(sql, *args)

    con = duckdb.connect()
    con.execute("CREATE TABLE e (a VARCHAR, n BIGINT)")
    probes = Probes(con)
    with columns_kept(probes):
        assert db_tables(probes, ['"e"', '"f"']) == {'"e"': [("a", "VARCHAR"), ("n", "BIGINT")]}
        with columns_kept(probes):  # a block inside keeps the outer one's
            assert db_tables(probes, ['"e"']) == {'"e"': [("a", "VARCHAR"), ("n", "BIGINT")]}
        con.execute("CREATE TABLE f (x BIGINT)")
        assert db_tables(probes, ['"e"', '"f"']) == {'"e"': [("a", "VARCHAR"), ("n", "BIGINT")],
                                                      '"f"': [("x", "BIGINT")]}
    assert probes.probed == ['"e"', '"f"', '"f"']
    db_tables(probes, ['"e"'])
    assert probes.probed[3:] == ['"e"']
