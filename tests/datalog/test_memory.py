"""The in-memory engine (Note [In-memory evaluation] in
torchtalk/datalog/engines/memory.py) on hand-written programs: the same rows
as the embedded engine and the naive oracle, the plans it makes (lookups by
the bound columns, a text scan for `contains`, one pass for a grouped
aggregate), and what it hands to DuckDB (`ord`, a large run)."""

from __future__ import annotations

import duckdb
import pytest

from torchtalk.connmemo import Session
from torchtalk.datalog import evaluate, parse_text
from torchtalk.datalog.engines import memory, memrule
from torchtalk.datalog.engines.memrule import Relation
from torchtalk.datalog.gcpause import gc_paused
from torchtalk.errors import EngineError

from .oracle import naive_eval
from .test_engine import GRAPH, GROUPED, ORD, PROPOSITIONS, TYPED


def both(program: str, con, facts=None) -> tuple[dict, dict]:
    prog = parse_text(program)
    a = evaluate(prog, con, facts=facts)
    b = evaluate(prog, con, facts=facts, engine="memory")
    return {k: sorted(v) for k, v in a.items()}, {k: sorted(v) for k, v in b.items()}


@pytest.fixture
def con(db):
    return duckdb.connect(str(db), read_only=True)


@pytest.mark.parametrize("seed", [[("d",)], [("a",), ("e",)], []])
def test_graph_same_rows_as_duckdb(con, seed):
    a, b = both(GRAPH, con, {"seed": seed})
    assert a == b
    if seed == [("d",)]:
        assert b["up"] == [("a",), ("b",), ("c",), ("e",)]
        assert b["fanout"] == [
            ("a", 1),
            ("b", 1),
            ("c", 2),
            ("e", 1),
        ]  # the duplicate row counts once


@pytest.mark.parametrize("enabled", [True, False])
def test_nullary_relations_and_disjunction(con, enabled):
    a, b = both(PROPOSITIONS, con, {"enabled": [()] if enabled else []})
    assert a == b and b["props"] == [(1,)] if enabled else [(0,)]


def test_typed_program(con):
    a, b = both(TYPED, con)
    assert a == b and b["self_loop_free"] == [("a",), ("b",), ("c",), ("e",)]


@pytest.mark.parametrize(
    "rows", [[], [(1, 1, 5), (1, 1, 3), (1, 2, 3), (2, 1, 3), (2, 1, 3), (2, 2, -4)]]
)
def test_grouped_aggregates_equal_the_oracle(rows):
    con = duckdb.connect()
    con.execute("CREATE TABLE r (a BIGINT, b BIGINT, c BIGINT)")
    if rows:
        con.executemany("INSERT INTO r VALUES (?, ?, ?)", rows)
    prog = parse_text(GROUPED)
    got = {rel: set(v) for rel, v in evaluate(prog, con, engine="memory").items()}
    want = naive_eval(prog, {"r": set(rows)})
    assert got == {rel: want[rel] for rel in got}
    # lo, hi, n and s are one pass each over r; `all` (no variable to group by) a nested function
    grouped = [memrule._grouped(r) for r in prog.rules]
    assert [g.func.value for g in grouped if g is not None] == ["min", "max", "count", "sum"]


def test_given_rows_join_a_relation_with_rules(con):
    """Rows given for a relation that also has rules (an input with rules, or
    a relation presolved: Note [Presolve]) are added to its rules' rows."""
    program = """
    .decl edge(a: symbol, b: symbol)
    .input edge
    .decl start(n: symbol)
    .input start
    start(n) :- edge("e", n).
    .decl reach(n: symbol)
    .output reach
    reach(n) :- start(n).
    reach(m) :- reach(n), edge(n, m).
    """
    a, b = both(program, con, {"start": [("zz",)], "edge": [("zz", "yy")]})
    assert a == b
    assert b["reach"] == [("a",), ("b",), ("c",), ("d",), ("yy",), ("zz",)]


def test_ord_runs_on_duckdb(con, monkeypatch):
    """`ord` numbers symbols as the embedded engine does (Note [ord]): such a
    program is handed to it, whole."""
    from torchtalk.datalog.engines.duckdb import DuckDBEngine

    ran = []
    real = DuckDBEngine.run
    monkeypatch.setattr(
        DuckDBEngine, "run", lambda self, *a, **k: ran.append(1) or real(self, *a, **k)
    )
    a, b = both(ORD, con, {"seed": [("d",)]})
    assert a == b and b["up"] == [("a",), ("b",), ("c",), ("d",), ("e",)] and len(ran) == 2


def test_a_large_run_goes_to_duckdb(con, monkeypatch):
    """Note [Large runs go to DuckDB]: past ROW_BUDGET rows derived, the run
    is done again by the embedded engine; the rows are the same."""
    from torchtalk.datalog.engines.duckdb import DuckDBEngine

    ran = []
    real = DuckDBEngine.run
    monkeypatch.setattr(
        DuckDBEngine, "run", lambda self, *a, **k: ran.append(1) or real(self, *a, **k)
    )
    small = evaluate(parse_text(GRAPH), con, facts={"seed": [("d",)]}, engine="memory")
    assert ran == []
    monkeypatch.setattr(memory, "ROW_BUDGET", 5)  # tc alone has 17 rows
    large = evaluate(parse_text(GRAPH), con, facts={"seed": [("d",)]}, engine="memory")
    assert ran == [1]
    assert {k: sorted(v) for k, v in small.items()} == {k: sorted(v) for k, v in large.items()}


def test_an_interrupted_session_stops_at_the_next_rule(db, monkeypatch):
    session = Session(duckdb.connect(str(db), read_only=True))
    real = memory.run_rule

    def interrupting(*a, **k):
        session.stopped = True  # as Session.interrupt() from another thread
        return real(*a, **k)

    monkeypatch.setattr(memory, "run_rule", interrupting)
    with pytest.raises(EngineError, match="^engine error: interrupted$"):
        evaluate(parse_text(GRAPH), session, facts={"seed": [("d",)]}, engine="memory")


def test_tables_are_read_once_per_session(db, monkeypatch):
    session = Session(duckdb.connect(str(db), read_only=True))
    first = evaluate(parse_text(GRAPH), session, facts={"seed": [("d",)]}, engine="memory")
    monkeypatch.setattr(memory, "_interned", lambda *a: pytest.fail("read again"))
    again = evaluate(parse_text(GRAPH), session, facts={"seed": [("d",)]}, engine="memory")
    assert first == again


def test_plans_look_up_bound_columns_and_scan_text():
    """A bound atom is looked up in an index by its bound columns; an atom
    whose only restriction is `contains(needle, v)` is read by its text."""
    prog = parse_text("""
    .decl probe(p: symbol)
    .decl name(n: symbol, f: symbol)
    .decl hit(n: symbol, f: symbol)
    hit(n, f) :- probe(p), name(n, f), contains(p, n).
    .decl file_of(n: symbol, f: symbol)
    file_of(n, f) :- hit(n, _), name(n, f).
    """)
    names = Relation({(f"fn{i}", f"f{i % 7}.cpp") for i in range(400)} | {("softmax_warp", "x.cu")})
    env = {"probe": Relation({("max_w",)}), "name": names}
    hit, file_of = prog.rules
    out: set = set()
    plan = memrule._compile(hit, env, None)
    assert ".containing(0, " in plan.source
    plan.run([env[name] for name, _ in plan.slots], out)
    assert out == {("softmax_warp", "x.cu")}
    env["hit"] = Relation(out)
    plan = memrule._compile(file_of, env, None)
    assert ".index((0,))" in plan.source and ".get(" in plan.source


def test_relation_text_scan_and_indexes_stay_exact():
    rel = Relation({("abcab", 1), ("xab", 2), ("zzz", 3), ("", 4)})
    assert sorted(rel.containing(0, "ab")) == [("abcab", 1), ("xab", 2)]  # each row once
    assert rel.containing(0, "q") == [] and len(rel.containing(0, "")) == 4
    by = rel.index((1,))
    rel.add({("ab", 5)})
    assert by[5] == [("ab", 5)] and sorted(rel.containing(0, "ab"))[0] == ("ab", 5)


def test_a_plan_counts_the_index_it_builds_on_a_derived_relation():
    """Note [Index builds in a plan]: a large derived relation joined with
    a small table by two columns of each is scanned, the table looked up,
    rather than hashed for a few lookups; the same rows as a Session's
    table (whose indexes are kept) are looked up."""
    prog = parse_text("""
    .decl why(w: symbol, r: symbol, y: symbol)
    .decl row(t: number, r: symbol, w: symbol)
    .decl out(t: number, y: symbol)
    out(t, y) :- row(t, r, w), why(w, r, y).
    """)
    (rule,) = prog.rules
    label = {(w, r): f"{w}-{r}" for w in ("op", "name", "file", "test", "doc") for r in ("resolved", "guess")}
    why = Relation({(w, r, y) for (w, r), y in label.items()}, kept=True)
    rows = {(i, ("resolved", "guess")[i % 2], ("op", "name")[i % 3 == 0]) for i in range(3000)}
    want = {(t, label[w, r]) for t, r, w in rows}
    for kept, lookup in ((False, ".index((0, 1))"), (True, ".index((1, 2))")):
        env = {"why": why, "row": Relation(rows, kept=kept)}
        plan = memrule._compile(rule, env, None)
        assert lookup in plan.source
        out: set = set()
        plan.run([env[name] for name, _ in plan.slots], out)
        assert out == want


def test_a_membership_test_comes_before_the_steps_it_spares():
    """Note [Probed from elsewhere]: a small relation whose every column is
    bound (near(k, v)) is tested as soon as its key is, not after reading
    every step out of every reached node (chains.dl's up_dag): the steps'
    average fan-out (most nodes have one) hides that the reached ones have
    twelve."""
    prog = parse_text("""
    .decl reach(k: number, v: symbol, d: number)
    .decl step(k: number, j: number, w: symbol)
    .decl near(k: number, v: symbol)
    .decl out(k: number, j: number, w: symbol)
    out(k, j, w) :- reach(k, v, d), d > 0, step(k, j, w), reach(j, v, e), e = d - 1, near(k, v).
    """)
    (rule,) = prog.rules
    reach = {(k, "*ab"[k % 3], k % 7) for k in range(1200)}
    step = ({(k, (k * 7 + i) % 1200, f"s{i}") for k in range(1200) for i in range(12)}
            | {(k, k % 1200, "x") for k in range(2000, 40000)})
    near = {(k, "*ab"[k % 3]) for k in range(1, 1200, 60)}
    env = {"reach": Relation(reach), "step": Relation(step, kept=True), "near": Relation(near)}
    plan = memrule._compile(rule, env, None)
    slot = {name: i for i, (name, _) in enumerate(plan.slots)}
    assert plan.source.index(f"not in s{slot['near']}") < plan.source.index(f"s{slot['step']}.get(")
    out: set = set()
    plan.run([env[name] for name, _ in plan.slots], out)
    at = {k: (v, d) for k, v, d in reach}
    assert out == {(k, j, w) for k, j, w in step
                   if k in at and (k, at[k][0]) in near and at[k][1] > 0 and at.get(j) == (at[k][0], at[k][1] - 1)}
    assert out


def test_two_atoms_binding_one_variable_read_the_fewer_rows():
    """Note [Two ways to one variable]: the callers k of a node j (`step`)
    that are at distance d - 1 (`level`) are read from whichever of the two
    has fewer rows at its bound columns: a hub's thousands of callers are
    not read for the few nodes at that distance, and a node with few callers
    is read by them, without building the other's index. The rows are the
    join's either way."""
    prog = parse_text("""
    .decl at(i: number, j: number, d: number)
    .decl step(k: number, j: number, g: number)
    .decl level(i: number, k: number, e: number)
    .decl out(i: number, k: number, e: number)
    out(i, k, e) :- at(i, j, d), d > 0, step(k, j, _), level(i, k, e), e = d - 1.
    """)
    (rule,) = prog.rules
    step = ({(k, 0, k % 2) for k in range(1, 3000)}  # the hub, node 0: every node calls it, twice over
            | {(k, j, 0) for j in range(1, 400) for k in (j + 1, j + 2, j + 3)})
    level = {(i, k, k % 4) for i in (1, 2) for k in range(0, 4000, 97)}
    env = {"step": Relation(step, kept=True), "level": Relation(level)}
    for at, hub in (({(1, j, 1 + j % 3) for j in range(1, 400)}, False), ({(1, 0, 3), (2, 0, 1)}, True)):
        env["at"] = Relation(at)
        plan = memrule._compile(rule, env, None)
        assert ":= " in plan.source  # the two ways, chosen at each binding
        out: set = set()
        plan.run([env[name] for name, _ in plan.slots], out)
        want = {(i, k, d - 1) for i, j, d in at for k, j2, _g in step if j2 == j and (i, k, d - 1) in level}
        assert out == want and out
        # only the hub's nodes were read from `level`, by an index of it on (i, e)
        assert ((0, 2) in env["level"]._indexes) is hub


def test_a_derived_relation_is_planned_by_its_rows_per_key():
    """Note [Rows per key]: a walk's distances are mostly one seed's (5,000
    of 5,049 rows; 50 seeds), so a lookup by the seed finds thousands of
    rows, not the 101 an even spread would give: the few needed nodes are
    looked up by node (and seed) instead."""
    prog = parse_text("""
    .decl need(s: symbol, c: symbol)
    .decl node(n: symbol, i: number)
    .decl reach(i: number, j: number, d: number)
    .decl out(i: number, j: number, d: number)
    out(i, j, d) :- need(s, c), node(s, i), node(c, j), reach(i, j, d).
    """)
    (rule,) = prog.rules
    node = Relation({(f"n{i}", i) for i in range(6000)}, kept=True)
    reach = {(0, j, j % 5) for j in range(5000)} | {(i, i, 0) for i in range(1, 50)}
    need = {("n0", f"n{j}") for j in range(0, 400, 7)} | {("n3", "n3")}
    env = {"need": Relation(need), "node": node, "reach": Relation(reach)}
    plan = memrule._compile(rule, env, None)
    slot = [i for i, (name, _) in enumerate(plan.slots) if name == "reach"]
    assert len(slot) == 1 and f"s{slot[0]} = R[{slot[0]}].index((0,))" not in plan.source
    assert f"s{slot[0]} = R[{slot[0]}].index(" in plan.source
    out: set = set()
    plan.run([env[name] for name, _ in plan.slots], out)
    assert out == {(i, j, d) for i, j, d in reach if (f"n{i}", f"n{j}") in need}


def test_a_text_scan_by_trigram_finds_each_case_as_written():
    """Note [Text scans]: a needle of three characters or more is found among
    the rows holding its first three in that case, found once for every
    case; a row holding two cases is found by each, a row once per needle."""
    rel = Relation({("GeMM_out", 1), ("gemm", 2), ("xgemmgEMm", 3), ("gem", 4), ("other", 5), ("ggemm", 6)})
    by_case = {n: sorted(r[1] for r in rel.containing(0, n)) for n in ("gem", "GeM", "gEM", "gemm", "gEMm", "GEM")}
    assert by_case == {"gem": [2, 3, 4, 6], "GeM": [1], "gEM": [3], "gemm": [2, 3, 6], "gEMm": [3], "GEM": []}
    assert sorted(r[1] for r in rel.containing(0, "ge")) == [2, 3, 4, 6]  # shorter: the plain scan
    (*_, grams) = rel._text(0)
    assert list(grams) == ["gem"]  # one pass for every case of it


def test_reading_a_table_freezes_it_and_makes_full_collections_rarer(db):
    """Note [Frozen tables]: a table read into a Session is out of the
    cyclic GC's sight, and the oldest generation is collected after
    FULL_EVERY collections of the middle one, the young ones as they were."""
    import gc

    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        s = Session(duckdb.connect(str(db), read_only=True), engine="memory")
        frozen = gc.get_freeze_count()
        evaluate(parse_text(GRAPH), s, engine="memory")
        assert gc.get_freeze_count() > frozen
        assert gc.get_threshold() == (700, 10, memrule.FULL_EVERY)
    finally:
        gc.set_threshold(*before)


def test_a_derived_relation_read_once_by_a_constant_is_scanned():
    """Note [Index builds in a plan]: the outermost atom's loop runs once, so
    a derived relation there is read whole, its constant tested, rather
    than hashed into an index for one lookup; a Session's table is looked up."""
    prog = parse_text("""
    .decl row(k: symbol, n: number)
    .decl out(n: number)
    out(n) :- row("python", n).
    """)
    (rule,) = prog.rules
    rows = {(("python", "op", "function")[i % 3], i) for i in range(300)}
    for kept, read in ((False, "R[0].rows"), (True, "R[0].index((0,))")):
        env = {"row": Relation(set(rows), kept=kept)}
        plan = memrule._compile(rule, env, None)
        assert read in plan.source
        out: set = set()
        plan.run([env[name] for name, _ in plan.slots], out)
        assert out == {(i,) for i in range(0, 300, 3)}


def test_a_row_the_head_repeats_is_added_whole():
    """Note [Rows kept whole]: a head that is a body atom as written adds
    the rows that atom reads (an unfiltered innermost loop: one update), a
    constant or a repeated variable among its columns kept as tests; a head
    that moves, drops or computes a column builds its tuple."""
    prog = parse_text("""
    .decl need(o: symbol)
    .decl link(o: symbol, t: symbol, p: number)
    .decl kept(o: symbol, t: symbol, p: number)
    kept(o, t, p) :- need(o), link(o, t, p).
    .decl kept_cpu(o: symbol, t: symbol, p: number)
    kept_cpu(o, "cpu", p) :- need(o), link(o, "cpu", p).
    .decl kept_low(o: symbol, t: symbol, p: number)
    kept_low(o, t, p) :- need(o), link(o, t, p), p < 2.
    .decl swapped(t: symbol, o: symbol, p: number)
    swapped(t, o, p) :- need(o), link(o, t, p).
    .decl self_loop(o: symbol, t: symbol, p: number)
    self_loop(o, o, p) :- link(o, o, p).
    .decl bumped(o: symbol, t: symbol, p: number)
    bumped(o, t, p + 1) :- need(o), link(o, t, p).
    """)
    link = {("mm", "cpu", 1), ("mm", "cuda", 2), ("add", "cpu", 3), ("add", "add", 0), ("sub", "cpu", 1)}
    env = {"need": Relation({("mm",), ("add",)}), "link": Relation(link, kept=True)}
    needed = {r for r in link if r[0] != "sub"}
    want = {
        "kept": (needed, "out.update("),
        "kept_cpu": ({r for r in needed if r[1] == "cpu"}, "whole"),
        "kept_low": ({r for r in needed if r[2] < 2}, "out.add(t"),
        "swapped": ({(t, o, p) for o, t, p in needed}, "out.add(("),
        "self_loop": ({("add", "add", 0)}, "out.add(t"),
        "bumped": ({(o, t, p + 1) for o, t, p in needed}, "out.add(("),
    }
    for rule in prog.rules:
        rows, emitted = want[rule.head.name]
        plan = memrule._compile(rule, env, None)
        out: set = set()
        plan.run([env[name] for name, _ in plan.slots], out)
        assert out == rows, rule.head.name
        if emitted == "whole":  # by update or add, as the plan reads it
            assert "out.add((" not in plan.source and "out.update(" in plan.source or "out.add(t" in plan.source
        else:
            assert emitted in plan.source, plan.source


def test_a_run_pauses_the_gc_and_the_last_run_resumes_it(con, monkeypatch):
    """Note [No GC in a run]: the GC is off while a run evaluates, on after;
    of two overlapping runs, the one ending last resumes it; a GC found off
    stays off."""
    import gc

    seen = []
    evaluate_rows = memory.MemoryEngine.evaluate

    def spy(self, *a, **k):
        seen.append(gc.isenabled())
        return evaluate_rows(self, *a, **k)

    monkeypatch.setattr(memory.MemoryEngine, "evaluate", spy)
    assert gc.isenabled()
    evaluate(parse_text(GRAPH), con, facts={"seed": [("d",)]}, engine="memory")
    assert seen == [False] and gc.isenabled()
    outer = gc_paused()
    outer.__enter__()
    inner = gc_paused()
    inner.__enter__()
    outer.__exit__(None, None, None)
    assert not gc.isenabled()  # the inner run goes on
    inner.__exit__(None, None, None)
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
