"""The in-memory engine: a checked program evaluated in Python, over the
fact DB's tables read once per connection.

Note [In-memory evaluation]: a query is a walk from a few seeds over tables
of 100K-400K rows. The embedded engine runs it as SQL: every statement is
planned, and every join, and every iteration of a walk, scans the tables
it reads whole (Note [Where a query's time goes] in docs/queries.md), so a
walk reaching 113 nodes costs as much as one reaching 7,000. Here each
stratum is evaluated in Python, semi-naively, each rule as nested loops
that look a bound atom up in a hash index of its relation by the columns
bound there, so a rule's cost is the rows it touches. The fact and stored
relations are read off a read-only connection once, and their indexes
built on first use, in the connection's Session (Note [DB info cache] in
torchtalk/connmemo.py): the engine suits a process that answers many
queries (the MCP server, the API in-process); one query in a fresh process
pays for reading the tables.

The rules are the definition, as for every engine: the same program, the
same rows as DuckDB and Soufflé (tests/datalog/test_memory.py and
tests/test_engines_real.py check it on every named query). Each rule's
body is ordered when it runs (`plan`): the atom with the fewest rows per
key of the columns bound at that point first, every comparison, negation
and assignment as soon as its variables are bound; the order is kept per
rule and size class, and turned into Python source once
(torchtalk/datalog/engines/memrule.py).
"""

from __future__ import annotations

import itertools
import sys
from operator import itemgetter
from typing import Any

from torchtalk.connmemo import Session
from torchtalk.datalog import ast as A
from torchtalk.datalog.analysis.shortest import distance_column
from torchtalk.datalog.analysis.strata import strata
from torchtalk.datalog.engines.base import Fetch, check_row, fetch_rows, needed_for
from torchtalk.datalog.engines.memrule import Relation, Unsupported, freeze, run_rule
from torchtalk.datalog.gcpause import gc_paused
from torchtalk.errors import EngineError


class MemoryEngine:
    name = "memory"

    def run(
        self,
        program: A.Program,
        con: Any,
        outputs: list[str],
        facts: dict[str, list[tuple]],
        tables: dict[str, str] | None = None,
        fetch: dict[str, Fetch] | None = None,
        keep: dict[str, str] | None = None,
    ) -> dict[str, list[tuple]]:
        """Evaluate `outputs` over `con` (read-only); an output in `fetch`
        comes back as its `Fetch` says. A program using what this engine
        does not evaluate (`ord`) runs on the embedded engine instead.
        `keep`: a dict that receives relation -> name of each relation the
        run derived, left in the Session for a later run to read as a table
        (Note [One walk per answer] in torchtalk/query/run.py); the caller
        lets go of them (`drop_kept`)."""
        from torchtalk.datalog.engines.duckdb import DuckDBEngine

        if isinstance(con, Session):
            con.stopped = False  # an interrupt stops the run under way, not the next
            if con.read_ahead and not all(_loaded(con, t) for t in _tables_read(program, con, outputs, tables or {})):
                return DuckDBEngine().run(program, con, outputs, facts, tables, fetch, keep)  # Note [Read ahead]
        try:
            with gc_paused():  # Note [No GC in a run] in torchtalk/datalog/gcpause.py
                env = self.evaluate(program, con, outputs, facts, tables or {}, cut := set())
        except (Unsupported, _Large):  # Note [Large runs go to DuckDB]
            return DuckDBEngine().run(program, con, outputs, facts, tables, fetch, keep)
        if keep is not None and isinstance(con, Session):
            inputs = _inputs(program)
            for rel, rows in env.items():  # not a walk cut short: a later run may read it otherwise
                if rel not in inputs and rel not in cut and program.rules_for(rel):
                    name = f'temp.main."_ttm{next(_KEPT)}_{rel}"'
                    con.memo[(_KEPT_KEY, name)] = rows
                    keep[rel] = name
        out = {}
        for rel in outputs:
            rows = env[rel].rows if rel in env else set()
            spec = (fetch or {}).get(rel)
            if spec is not None and spec.keep and rel in env and env[rel].kept:
                rows = _kept_rows(env[rel], spec.keep)
            out[rel] = list(rows) if spec is None else fetch_rows(rows, spec)
        return out

    def evaluate(
        self,
        program: A.Program,
        con: Any,
        outputs: list[str],
        facts: dict[str, list[tuple]],
        tables: dict[str, str],
        cut: set[str] | None = None,
    ) -> dict[str, Relation]:
        """Every relation `outputs` need -> its rows (a `Relation`). `cut`
        receives the relations whose rows a shorter walk covers were
        dropped (Note [Rows a shorter walk covers] in analysis/shortest.py)."""
        needed = needed_for(program, outputs)
        env: dict[str, Relation] = {}
        given: dict[str, set] = {}  # rows of relations with rules too, added to theirs
        inputs = _inputs(program)
        for rel in needed:
            if rel not in inputs and rel not in facts:
                continue
            rows = _input(program, con, rel, facts.get(rel, ()), tables)
            if program.rules_for(rel):
                given[rel] = rows.rows
            else:
                env[rel] = rows
        budget = _Budget()
        for st in program.cached(("strata", needed), lambda: strata(program, needed)):
            if all(r in env for r in st.relations):
                continue
            _check(con)
            if st.recursive:
                col = None if st.relations[0] in outputs else distance_column(program, st.relations)
                if col is not None and cut is not None:
                    cut.add(st.relations[0])
                _fixpoint(program, st.relations, env, given, con, budget, col)
            else:
                rel = st.relations[0]
                env[rel] = _simple(program, rel, env, given.get(rel, set()), budget)
        return env


# Note [Frozen tables]: the tables read into a Session and the indexes built
# on them (millions of tuples and lists) live as long as it, and a full
# collection of the cyclic GC scanned them all: 90-160 ms, about once per
# large query. When a table is read, or an index built on one
# (Relation.kept), the objects alive are moved out of the collector's sight
# (gc.freeze): what a run makes and drops is still freed by its reference
# count, and the GC scans only what came after. A cycle alive at that
# moment (a server's call in flight) would stay, so it is done then only:
# at a server's warm-up and the first queries of a new shape, not per run.
# Frozen objects do not count toward the old generation's size, which held
# full collections back while what came after was small against it; with
# that size small, a full collection came after every 10 of the middle one,
# 35 in bench/query.py's 100 queries (250 ms). After the first freeze, one
# comes after every FULL_EVERY (memrule.py): 4 (25 ms), the young
# generations' collections unchanged.


# Note [Read ahead]: reading the tables a query needs takes 0.1-2 s the
# first time (the 20 queries of bench/query.py read theirs in 7 s), which a
# server's first calls should not wait for. A Session that reads ahead
# (`read_ahead`, the MCP server's pool) runs a query in memory only once
# every table it reads is there, and on DuckDB before; whoever owns it reads
# the tables meanwhile (`read_tables`, the server's warm thread).


def read_tables(con: Any, tables: list[str], stop=lambda: False) -> int:
    """Read each of `tables` (references as the query layer gives them:
    `"op"`, `derived."step_at"`) into `con`'s Session; `stop()` is asked
    between two. -> how many were read now."""
    n = 0
    for table in tables:
        if stop():
            break
        if not _loaded(con, table):
            _table(con, table)
            n += 1
    return n


# the Session's memo key of a relation an earlier run kept (MemoryEngine.run's `keep`)
_KEPT_KEY = "memory-kept"
_KEPT = itertools.count()


def drop_kept(con: Any, tables) -> list[str]:
    """Let go of the relations `tables` that runs on `con` kept in memory;
    -> the others (kept by the embedded engine, as temp tables)."""
    memo = con.memo if isinstance(con, Session) else {}
    return [t for t in tables if memo.pop((_KEPT_KEY, t), None) is None]


def _loaded(con: Any, table: str) -> bool:
    return isinstance(con, Session) and ("memory-table", table) in con.memo


def _tables_read(program: A.Program, con: Any, outputs: list[str], tables: dict[str, str]) -> list[str]:
    """The fact-DB tables a run of `outputs` reads."""
    from torchtalk.datalog.compile import q
    from torchtalk.datalog.engines.duckdb import db_tables

    needed = needed_for(program, outputs)
    names = [tables.get(rel) or q(rel) for rel in _inputs(program) if rel in needed]
    return [t for t in names if not t.startswith("temp.main.") and db_tables(con, [t])]


def _input(program: A.Program, con: Any, rel: str, given, tables: dict[str, str]) -> Relation:
    """An input relation's rows: its table in the fact DB (read once per
    Session) and the rows given for it (given rows may come for any relation)."""
    from torchtalk.datalog.compile import q
    from torchtalk.datalog.engines.duckdb import db_tables

    decl = program.decls[rel]
    rows = {check_row(decl, i, row) for i, row in enumerate(given, 1)}
    table = tables.get(rel) or q(rel)
    if table.startswith("temp.main.") and rel in _inputs(program):  # an earlier run's (Note [One walk per answer])
        kept = con.memo.get((_KEPT_KEY, table)) if isinstance(con, Session) else None
        if kept is None:  # the embedded engine's, run in its place
            kept = Relation(_read(con, table))
        return Relation(rows | kept.rows) if rows else kept
    if (
        rel in _inputs(program)
        and con is not None
        and not table.startswith("temp.main.")
        and db_tables(con, [table])
    ):
        stored = _table(con, table)
        if not rows:
            return stored
        rows |= stored.rows
    return Relation(rows)


def _table(con: Any, table: str) -> Relation:
    """The rows of fact-DB `table`, once per Session (Note [DB info cache])."""
    from torchtalk.connmemo import per_connection

    def read(c) -> Relation:
        rel = Relation(_read(c, table), kept=True)
        rel.know_distinct(_distinct_counts(c, table))
        freeze()  # Note [Frozen tables]
        return rel

    return per_connection(con, ("memory-table", table), read)


# Note [Distinct counts from DuckDB]: the planner estimates a lookup's rows
# by the distinct values of the columns it is keyed by (memrule's
# `Relation.distinct`). Counted in Python, a set of each column's values,
# that was 0.92 of the 1.3 s bench/query.py's 20 queries spent planning in
# a new process (607 columns, step_at's 240K rows among them): paid by the
# first call of each query shape. DuckDB counts every column of a table at
# once, in C++ and in parallel, when the table is read (in a server, by its
# warm thread, Note [Read ahead]).
def _distinct_counts(con: Any, table: str) -> dict[int, int]:
    """Column number -> its distinct values in DuckDB `table` ({} when it
    cannot say: the planner counts them itself then)."""
    from torchtalk.datalog.duck import duckdb as lean_duckdb

    try:
        row = con.execute(f"SELECT count(DISTINCT COLUMNS(*)) FROM {table}").fetchone()  # one per column
    except lean_duckdb().Error:
        return {}
    return {i: n for i, n in enumerate(row or ()) if n}


def _read(con: Any, table: str) -> set:
    """The rows of DuckDB `table`, text values interned."""
    from torchtalk.datalog.duck import duckdb as lean_duckdb

    try:
        cur = con.execute(f"SELECT * FROM {table}")
        text = [str(d[1]) == "VARCHAR" for d in cur.description]
        return _interned(cur.fetchall(), text)
    except lean_duckdb().Error as exc:
        raise EngineError(f"DuckDB failed reading {table}: {str(exc).splitlines()[0]}") from None


def _interned(rows: list[tuple], text: list[bool]) -> set:
    """`rows` as a set, the values of each `text` column interned: a file
    path or kind repeated over 100K rows is one object (1.0 -> 0.74 GB for
    the 20 queries of bench/query.py), and equal strings compare by
    identity first."""
    if not rows or not any(text):
        return set(rows)
    cols = list(zip(*rows, strict=True))
    return set(
        zip(*(_intern_all(c) if t else c for c, t in zip(cols, text, strict=True)), strict=True)
    )


def _intern_all(col: tuple) -> tuple:
    try:
        return tuple(map(sys.intern, col))
    except TypeError:  # a NULL among them: kept as they are
        return col


def _simple(
    program: A.Program, rel: str, env: dict[str, Relation], given: set, budget: _Budget
) -> Relation:
    out: set = set(given)  # a copy: `given` may be a table's rows, kept
    for rule in program.rules_for(rel):
        if rule.is_fact:
            out.add(tuple(_const(t) for t in rule.head.args))
        else:
            before = len(out)
            run_rule(program, rule, env, out)
            budget.spend(len(out) - before)
    return Relation(out)


def _fixpoint(
    program: A.Program,
    members: tuple[str, ...],
    env: dict[str, Relation],
    given: dict[str, set],
    con: Any,
    budget: _Budget,
    cut: int | None = None,
) -> None:
    """Semi-naive evaluation of a recursive stratum: each round, every rule
    reading a member is run once per member atom of its body, that atom
    reading the rows the last round added (the delta). `cut`: the one
    member's distance column, by which a row a shorter one covers is
    dropped (Note [Rows a shorter walk covers] in analysis/shortest.py)."""
    names = set(members)
    for rel in members:
        env[rel] = Relation(set())
    delta: dict[str, set] = {}
    for rel in members:
        base: set = set(given.get(rel, ()))
        for rule in program.rules_for(rel):
            if rule.is_fact:
                base.add(tuple(_const(t) for t in rule.head.args))
            elif not _reads(rule, names):
                run_rule(program, rule, env, base)
        delta[rel] = base
    shorter = _Shorter(program.decls[members[0]].arity, cut) if cut is not None else None
    if shorter is not None:
        delta[members[0]] = shorter.keep(delta[members[0]])
    for rel in members:
        env[rel].add(delta[rel])
    recursive = [
        (
            rel,
            rule,
            [i for i, lit in enumerate(rule.body) if isinstance(lit, A.Atom) and lit.name in names],
        )
        for rel in members
        for rule in program.rules_for(rel)
        if not rule.is_fact and _reads(rule, names)
    ]
    while any(delta.values()):
        _check(con)
        new: dict[str, set] = {rel: set() for rel in members}
        deltas = {rel: Relation(rows) for rel, rows in delta.items()}
        for rel, rule, positions in recursive:
            for k in positions:
                name = rule.body[k].name
                if deltas[name].rows:
                    before = len(new[rel])
                    run_rule(program, rule, env, new[rel], delta=(k, deltas[name]))
                    budget.spend(len(new[rel]) - before)
        delta = {rel: rows - env[rel].rows for rel, rows in new.items()}
        if shorter is not None:
            delta[members[0]] = shorter.keep(delta[members[0]])
        for rel in members:
            env[rel].add(delta[rel])


class _Shorter:
    """The least distance held for each set of other columns of a walk's
    rows (Note [Rows a shorter walk covers] in analysis/shortest.py)."""

    __slots__ = ("col", "key", "least")

    def __init__(self, arity: int, col: int) -> None:
        self.col = col
        self.key = itemgetter(*(i for i in range(arity) if i != col)) if arity > 1 else (lambda row: ())
        self.least: dict = {}

    def keep(self, rows: set) -> set:
        """Those of `rows` shorter than every row held with their other
        columns, now held; the shortest first where several share them."""
        col, key, least = self.col, self.key, self.least
        out = set()
        for row in sorted(rows, key=itemgetter(col)) if len(rows) > 1 else rows:
            k = key(row)
            held = least.get(k)
            if held is None or row[col] < held:
                least[k] = row[col]
                out.add(row)
        return out


# Note [Large runs go to DuckDB]: Python pays a microsecond or more per row
# a rule derives, DuckDB much less once a join is large. Over the named
# queries of tests/test_engines_real.py and bench/query.py, the in-memory
# engine is faster up to about 200,000 rows derived in a run
# (affected(cpublas::gemm): 288,127 rows, 0.32 s against 0.39 s), and
# slower beyond (impact(empty, depth=10, all=true): 9.8 million rows, 40 s
# against 7.3 s). A run whose rules have derived more than ROW_BUDGET rows
# (each rule's new rows, counted as they come) stops and is run again on
# DuckDB: about half a second lost, on a query that takes seconds anyway.
ROW_BUDGET = 400_000


class _Large(Exception):
    """The run derived more than ROW_BUDGET rows (Note [Large runs go to DuckDB])."""


class _Budget:
    """The rows a run's rules may still derive."""

    __slots__ = ("left",)

    def __init__(self) -> None:
        self.left = ROW_BUDGET

    def spend(self, rows: int) -> None:
        self.left -= rows
        if self.left < 0:
            raise _Large


def _kept_rows(relation: Relation, keep: tuple[tuple[int, frozenset], ...]) -> set:
    """The rows of a Session's table that may pass `keep`: those its index
    on the filter with the fewest values gives (kept with the table), not a
    scan of all (test_file_info's filters by file: 47,000 rows a relation).
    fetch_rows still applies every filter."""
    col, allowed = min(keep, key=lambda k: len(k[1]))
    index = relation.index((col,))
    return {r for v in allowed for r in index.get(v, ())}


def _inputs(program: A.Program) -> frozenset[str]:
    return program.cached("input-set", lambda: frozenset(program.inputs))


def _check(con: Any) -> None:
    """Raise when the Session was interrupted (a cancelled or overlong MCP
    call, Note [Stopped calls] in torchtalk/mcp/db.py)."""
    if isinstance(con, Session) and con.stopped:
        raise EngineError("interrupted")


def _reads(rule: A.Rule, names: set[str]) -> bool:
    return any(isinstance(lit, A.Atom) and lit.name in names for lit in rule.body)


def _const(term: A.Term):
    if isinstance(term, (A.Str, A.Num)):
        return term.value
    raise EngineError(f"fact argument {term} is not a constant")
