"""The embedded engine: the compiled SQL plan (compile.py) run on DuckDB.

Input relations are read in place from the fact DB; every derived table is
a temp table (Note [Derived tables]) dropped when the run ends, so the fact
DB may be opened read-only and several runs can share a connection in turn.

Example:
    >>> DuckDBEngine().run(prog, duckdb.connect("facts.duckdb", read_only=True), ["impact"], {})  # doctest: +SKIP
"""

from __future__ import annotations

import itertools
import re
import uuid
from contextlib import contextmanager
from typing import Any

from torchtalk.datalog import ast as A
from torchtalk.datalog.compile import SQL_TYPES, Exec, Plan, compile_program, q
from torchtalk.datalog.duck import duckdb as lean_duckdb
from torchtalk.datalog.engines.base import Fetch, Page, check_row, needed_for, sort_key
from torchtalk.datalog.io import copy_rows
from torchtalk.datalog.transform.loop_inputs import LOOP_INPUT_ROWS, cut_loop_inputs, loop_inputs
from torchtalk.datalog.transform.nullary_as_unary import nullary_as_unary
from torchtalk.errors import EngineError, InputError

_RUNS = itertools.count()
_TEMP = "temp.main."  # where a run's tables live (Note [Derived tables])
def _nullary(program: A.Program) -> frozenset[str]:
    return program.cached("nullary", lambda: frozenset(n for n, d in program.decls.items() if d.arity == 0))


class DuckDBEngine:
    name = "duckdb"

    def run(self, program: A.Program, con: Any, outputs: list[str], facts: dict[str, list[tuple]],
            tables: dict[str, str] | None = None,
            fetch: dict[str, Fetch] | None = None,
            keep: dict[str, str] | None = None) -> dict[str, list[tuple]]:
        """Evaluate `outputs` over `con` (a duckdb connection, may be read-only);
        an output in `fetch` comes back as its `Fetch` says, done in SQL.
        `keep`: a dict that receives relation -> temp table of each walk the
        run computed into a table, left in place for a later run to read
        (Note [One walk per answer]); the caller drops them (`drop_tables`)."""
        return self._run(program, con, outputs, facts, tables or {}, None, fetch or {}, keep)

    def materialize(self, program: A.Program, con: Any, into: dict[str, str],
                    tables: dict[str, str] | None = None) -> dict[str, int]:
        """Evaluate relations `into`'s keys, each into the table named by its
        value (created on the writable `con`); -> row counts."""
        return self._run(program, con, list(into), {}, tables or {}, into, {})

    def _run(self, program, con, outputs, facts, tables, into, fetch, keep=None):
        nullary = _nullary(program)
        if nullary:  # Note [Nullary relations]
            program = program.cached("as_unary", lambda: nullary_as_unary(program))
            facts = {rel: [(0,) for _ in rows] if rel in nullary else rows for rel, rows in facts.items()}
            out = self._run_sql(program, con, outputs, facts, tables, into, fetch, keep)
            if into is not None:
                return out
            return {rel: ([()] if rows else []) if rel in nullary else rows for rel, rows in out.items()}
        return self._run_sql(program, con, outputs, facts, tables, into, fetch, keep)

    def _run_sql(self, program, con, outputs, facts, tables, into, fetch, keep=None):
        duckdb = lean_duckdb()  # Note [Lean DuckDB import]

        if con is None:
            con = duckdb.connect()
        prefix = f"_tt{next(_RUNS)}_"
        created: list[str] = []
        try:
            needed = needed_for(program, outputs)
            sources = self._sources(program, con, needed, facts, tables, prefix, created, frozenset(outputs))
            if into is None:  # Note [Loop inputs cut first]
                program = _cut_loops(program, con, sources, needed)
                needed = needed_for(program, outputs)
            if into is None:
                plan = _query_plan(program, outputs, sources, prefix)
            else:
                plan = compile_program(program, outputs, sources, prefix, stored=into)
            created += plan.temp_tables
            if keep is not None:  # Note [One walk per answer]: its walks stay for the next run
                kept = {rel: f"temp.main.{q(prefix + rel)}" for rel in needed if rel not in program.inputs}
                keep.update({rel: t for rel, t in kept.items() if t in plan.temp_tables})
                created = [t for t in created if t not in keep.values()]
            columns = {rel: [c.name for c in program.decls[rel].columns] for rel in fetch}
            return _execute(con, plan, into, fetch, columns)
        except duckdb.Error as exc:
            raise EngineError(f"DuckDB failed: {str(exc).splitlines()[0]}") from None
        finally:
            drop_tables(con, created)

    def _sources(self, program, con, needed, facts, tables, prefix, created,
                 outputs: frozenset = frozenset()) -> dict[str, list[str]]:
        """Where each needed input relation's external rows are: DB table
        (`tables[rel]`, else the table named `rel`), given facts (as the
        rules read them, Note [Given rows as read])."""
        sources: dict[str, list[str]] = {}
        inputs = [rel for rel in program.inputs if rel in needed]
        names = {rel: tables.get(rel) or q(rel) for rel in inputs}
        found = db_tables(con, [n for n in names.values() if not n.startswith(_TEMP)]) if inputs else {}
        for rel in inputs:
            if names[rel].startswith(_TEMP):  # a walk an earlier run kept: made from this decl
                sources.setdefault(rel, []).append(names[rel])
            elif names[rel] in found:
                check_table(program.decls[rel], found[names[rel]])
                sources.setdefault(rel, []).append(names[rel])
        for rel, rows in facts.items():
            decl = program.decls.get(rel)
            if decl is None:
                raise InputError(f"facts given for undeclared relation '{rel}'")
            if rel not in needed:
                continue
            checked = [check_row(decl, i, row) for i, row in enumerate(rows, 1)]
            if checked and rel not in outputs:
                checked = as_read(program, rel, checked, needed)
            if not checked:
                continue
            if len(checked) <= INLINE_ROWS:
                sources.setdefault(rel, []).append(inline_values(decl, checked))
                continue
            table = f"{prefix}{rel}_given"
            load_rows(con, decl, table, checked)
            created.append(f"temp.main.{q(table)}")
            sources.setdefault(rel, []).append(f"temp.main.{q(table)}")
        return sources


def _cut_loops(program: A.Program, con, sources: dict[str, list[str]], needed: frozenset) -> A.Program:
    """`program` with the large inputs of the recursive rules of `needed`
    cut first (Note [Loop inputs cut first]): those of `loop_inputs` whose
    sources hold at least LOOP_INPUT_ROWS rows."""
    candidates = program.cached(("loop_inputs", needed), lambda: loop_inputs(program, needed))
    large = frozenset(rel for rel in candidates if rel in sources
                      and sum(table_rows(con, ref) for ref in sources[rel]) >= LOOP_INPUT_ROWS)
    if not large:
        return program
    return program.cached(("cut_loops", large, needed), lambda: cut_loop_inputs(program, large, needed))


def table_rows(con, ref: str) -> int:
    """The rows of source `ref`: a table's count (kept per read-only
    connection, Note [DB info cache]; a run's temp table counted each time),
    or 0 for facts inlined as VALUES (at most INLINE_ROWS)."""
    from torchtalk.connmemo import session_memo

    if ref.startswith("(SELECT"):
        return 0
    cache = None if ref.startswith(_TEMP) else session_memo(con, "rows")
    if cache is not None and ref in cache:
        return cache[ref]
    n = con.execute(f"SELECT count(*) FROM {ref}").fetchone()[0]
    if cache is not None:
        cache[ref] = n
    return n


def drop_tables(con, tables, kind: str = "TABLE") -> None:
    """Drop the temp `tables` a run created (or kept, Note [One walk per
    answer]), or views with kind="VIEW"; each drop's own failure ignored."""
    duckdb = lean_duckdb()  # Note [Lean DuckDB import]

    for table in tables:
        try:
            con.execute(f"DROP {kind} IF EXISTS {table}")
        except duckdb.Error:
            pass


# Note [Plan cache]: compiling a query's program costs 2-4 ms of Python, as
# much as a small query's SQL. The plan of a program depends on its sources
# only through where they are written (a fact table, a query's seeds inlined
# as VALUES), so a one-statement plan (Note [One statement]) is compiled once
# per (program, outputs, number of sources per relation) with placeholders
# where the sources go, and each run fills them in. The query layer reuses
# one program object per query shape (torchtalk/query/run.py), so
# `trace(softmax)` after `trace(matmul)` compiles nothing. The plans live in
# the program they were compiled from (Program.cached), and go with it.
_HOLE = f"tt_source_{uuid.uuid4().hex[:12]}_"


def _query_plan(program: A.Program, outputs: list[str], sources: dict[str, list[str]], prefix: str) -> Plan:
    """The plan of a query run, from the cache when it is one statement."""
    rels = sorted(sources)

    def compile_with_holes() -> Plan | None:
        holes = {rel: [f"{_HOLE}{i}_{j}" for j in range(len(sources[rel]))] for i, rel in enumerate(rels)}
        plan = compile_program(program, outputs, holes, f"{_HOLE}p_", single=True)
        return None if any(not isinstance(step, Exec) for step in plan.steps) else plan

    shape = (tuple(outputs), tuple((rel, len(sources[rel])) for rel in rels))
    plan = program.cached(("plan", shape), compile_with_holes)
    if plan is None:  # the semi-naive loop: compiled for each run
        return compile_program(program, outputs, sources, prefix, single=True)
    pattern = re.compile(re.escape(_HOLE) + r"(?:(\d+)_(\d+)|p_)")

    def fill(m: re.Match) -> str:
        return prefix if m.group(1) is None else sources[rels[int(m.group(1))]][int(m.group(2))]

    return Plan(tuple(Exec(pattern.sub(fill, step.sql)) for step in plan.steps),
                {rel: pattern.sub(fill, sql) for rel, sql in plan.fetch.items()},
                tuple(pattern.sub(fill, t) for t in plan.temp_tables))


def _execute(con, plan: Plan, into: dict[str, str] | None = None,
             fetch: dict[str, Fetch] | None = None, columns: dict[str, list[str]] | None = None) -> dict:
    for step in plan.steps:
        if isinstance(step, Exec):
            con.execute(step.sql)
            continue
        for sql in step.init:
            con.execute(sql)
        while True:
            for sql in step.step:
                con.execute(sql)
            if con.execute(step.count).fetchone()[0] == 0:
                break
            for sql in step.advance:
                con.execute(sql)
    if into is not None:  # the plan computed them in their tables
        return {rel: con.execute(f"SELECT count(*) FROM {into[rel]}").fetchone()[0] for rel in plan.fetch}
    out = {}
    for rel, sql in plan.fetch.items():
        spec = (fetch or {}).get(rel)
        out[rel] = con.execute(sql).fetchall() if spec is None else _page(con, sql, spec, (columns or {})[rel])
    return out


def _page(con, sql: str, spec: Fetch, columns: list[str]) -> Page:
    """`sql`'s rows as `spec` says. With a limit, only those rows reach
    Python; a window count gives the total (a query's 10K rows cost more
    to hand over than to compute)."""
    conds = [f"{q(columns[i])} IN ({', '.join(_literal(v) for v in sorted(allowed, key=repr))})"
             if allowed else "false" for i, allowed in spec.keep]
    rows_sql = f"SELECT DISTINCT * FROM ({sql}) AS r" + (f" WHERE {' AND '.join(conds)}" if conds else "")
    order = ", ".join(str(i + 1) if i >= 0 else f"{~i + 1} DESC" for i in spec.order)
    if spec.write_to is not None:
        return Page([], copy_rows(con, f"{rows_sql} ORDER BY {order}", spec.write_to))
    if spec.per is not None:
        return _per_section(con, rows_sql, spec, columns)
    if spec.limit is None:
        return Page(con.execute(f"{rows_sql} ORDER BY {order}").fetchall())
    if spec.limit <= 0:
        return Page([], con.execute(f"SELECT count(*) FROM ({rows_sql})").fetchone()[0])
    rows = con.execute(f"SELECT *, count(*) OVER () FROM ({rows_sql}) ORDER BY {order} LIMIT {int(spec.limit)}").fetchall()
    return Page([r[:-1] for r in rows], rows[0][-1] if rows else 0)


def _per_section(con, rows_sql: str, spec: Fetch, columns: list[str]) -> Page:
    """The first `n` rows of each section of `rows_sql` (Note [Rows per
    section] in torchtalk/query/output.py), in one pass: per section, its
    count, each column's least and greatest value, and its first rows by
    `arg_min` over the sort key (a bounded heap: no sort of all the rows,
    which cost twice the relation itself for affected's 91,250 rows)."""
    column, n = spec.per
    cols = ", ".join(f"{q(c)} := {q(c)}" for c in columns)
    key = ", ".join(f"k{j} := {q(columns[i])}" if i >= 0 else f"k{j} := -{q(columns[~i])}"
                    for j, i in enumerate(spec.order))
    bounds = ", ".join(f"min({q(c)}), max({q(c)})" for c in columns)
    sec = "NULL" if column is None else q(columns[column])
    groups = con.execute(
        f"SELECT {sec}, count(*), {bounds}, arg_min(struct_pack({cols}), struct_pack({key}), {int(n)}) "
        f"FROM ({rows_sql}) AS r GROUP BY 1").fetchall()  # no rows: no group
    width = len(columns)
    values = [{g[2 + 2 * i] for g in groups} | {g[3 + 2 * i] for g in groups} for i in range(width)]
    rows = sorted((tuple(d[c] for c in columns) for g in groups for d in g[-1]), key=sort_key(spec.order))
    return Page(rows, sum(g[1] for g in groups), {g[0]: g[1] for g in groups},
                frozenset(i for i in range(width) if len(values[i]) == 1))


def _literal(v) -> str:
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    return f"CAST({int(v)} AS BIGINT)"


def db_tables(con, names: list[str]) -> dict[str, list[tuple[str, str]]]:
    """Those of `names` (SQL table references, quoted as needed) the
    connection can read as tables -> [(column, type)].

    Probes `SELECT * FROM name LIMIT 0` (about 0.2 ms each, missing or not):
    much cheaper than the catalog functions on a DB with many tables. On a
    read-only connection the tables cannot change, so each name is probed
    once per connection (a query reads ~15 inputs, twice).
    """
    duckdb = lean_duckdb()

    cache = _probe_cache(con)
    fixed = _FIXED.get(id(con)) if cache is None else None
    out: dict[str, list[tuple[str, str]]] = {}
    for name in names:
        if cache is not None and name in cache:
            cols = cache[name]
        elif fixed is not None and name in fixed:
            cols = fixed[name]
        else:
            try:
                desc = con.execute(f"SELECT * FROM {name} LIMIT 0").description
                cols = [(col[0], str(col[1])) for col in desc]
            except duckdb.CatalogException:
                cols = None
            if cache is not None:
                cache[name] = cols
            elif fixed is not None and cols is not None:
                fixed[name] = cols
        if cols is not None:
            out[name] = cols
    return out


# Note [Columns kept in a refresh]: a writable connection's probes are not
# kept (its tables may change), but while an update refreshes the stored
# relations the tables it reads keep their columns: their rows change,
# and a stored relation computed again is made anew from the same
# .decl. Each relation of a refresh probed its ~10 inputs again (48
# probes in a .cpp body edit's refresh, half a millisecond each). So
# inside `columns_kept(con)` the columns found are kept until the block
# ends; a table not found is probed again (it may be made later).
_FIXED: dict[int, dict[str, list[tuple[str, str]]]] = {}


@contextmanager
def columns_kept(con):
    """Keep the columns of the tables `con`'s runs find while the block
    runs (Note [Columns kept in a refresh]); the tables' columns must not
    change meanwhile; a block inside another keeps the outer one's)."""
    if id(con) in _FIXED:
        yield
        return
    _FIXED[id(con)] = {}
    try:
        yield
    finally:
        _FIXED.pop(id(con), None)


def _probe_cache(con) -> dict | None:
    """The probe results of read-only `con` (Note [DB info cache] in
    torchtalk/connmemo.py); None for a writable connection, whose tables may change."""
    from torchtalk.connmemo import session_memo

    return session_memo(con, "probed")  # {table reference: columns or None}


_COMPATIBLE = {A.ColType.SYMBOL: {"VARCHAR"}, A.ColType.NUMBER: {"BIGINT", "INTEGER", "HUGEINT", "SMALLINT", "TINYINT", "UBIGINT", "UINTEGER"}}


def check_table(decl: A.Decl, columns: list[tuple[str, str]]) -> None:
    """The fact DB table must have the declared columns, in order, with matching types."""
    want = [(c.name, c.type) for c in decl.columns]
    got = [(name, typ) for name, typ in columns]
    ok = len(want) == len(got) and all(
        wn == gn and gt in _COMPATIBLE[wt] for (wn, wt), (gn, gt) in zip(want, got, strict=True)
    )
    if not ok:
        have = ", ".join(f"{n} {t}" for n, t in got)
        raise EngineError(
            f"table '{decl.name}' of the fact database has columns ({have}), but its .decl at "
            f"{decl.loc} says ({', '.join(str(c) for c in decl.columns)})",
            hint="re-index the tree, or fix the .decl",
        )


def as_read(program: A.Program, rel: str, rows: list[tuple], needed: frozenset) -> list[tuple]:
    """Given `rows` of input `rel` as the rules of the `needed` relations
    read them (Note [Given rows as read]): the rows none can match dropped,
    and the columns none reads set to one value."""
    use = program.cached(("read_as", rel, needed), lambda: _read_as(program, rel, needed))
    if use is None:
        return rows
    consts, blank = use
    out = dict.fromkeys(
        tuple(blank[i] if i in blank else v for i, v in enumerate(row)) for row in rows
        if all(row[i] in vals for i, vals in consts.items()))
    return list(out)


def _read_as(program: A.Program, rel: str, needed: frozenset):
    """({column: the constants every reading atom has there}, {column never
    read: its one value}) for input `rel` read by the rules of `needed`, or
    None when it is also derived (its rules' rows are whole)."""
    if program.rules_for(rel):
        return None
    # each atom reading `rel`, and whether an aggregate reads it (nested too; a negation's is strict, not counted)
    reads = [(a, strict and not isinstance(lit, A.Negation)) for r in program.rules if r.head.name in needed
             for lit in r.body for a, strict in A.literal_atoms(lit) if a.name == rel]
    atoms = [a for a, _ in reads]
    counted = any(in_aggregate for _, in_aggregate in reads)
    decl = program.decls[rel]
    consts: dict[int, frozenset] = {}
    blank: dict[int, object] = {}
    for i, col in enumerate(decl.columns):
        terms = [a.args[i] for a in atoms]
        if terms and all(isinstance(t, (A.Str, A.Num)) for t in terms):
            consts[i] = frozenset(t.value for t in terms)
        elif not counted and all(isinstance(t, A.Wildcard) for t in terms):  # a sum or count reads every row
            blank[i] = "" if col.type is A.ColType.SYMBOL else 0
    return (consts, blank) if consts or blank else None


# Note [Given rows as read]: a walk answer's page is given to its chains'
# run (Note [Chains for the page] in rules/chains.dl) as 50 rows of 9-11
# columns, long names and paths mostly, inlined as VALUES in each statement
# that reads them (41 KB of SQL for impact(cpublas::gemm)'s). The rules read
# few of those columns, and some only for a kind (`impact_shown(s,
# "python", a, o, _, f, l, _, _, _, _)`). So the rows no reading atom can
# match (a column every atom gives a constant, and the row another) are
# dropped, and a column every atom leaves `_` takes one value (the empty
# symbol, or 0): the relation then holds fewer, shorter rows, and every
# rule derives what it did from the rows it did. An input that also has
# rules, or that the run outputs, is given whole. DuckDB only: it parses
# and binds the literals once per statement; the in-memory engine reads the
# rows as they are.


# Given facts up to this many rows are inlined in the SQL as VALUES (no temp table).
INLINE_ROWS = 1000


def inline_values(decl: A.Decl, rows: list[tuple]) -> str:
    """`rows` as a SQL subquery with the relation's column names and types.

    Note [Typed once]: a VALUES list takes each column's type from all its
    rows, so only the first row casts its numbers to BIGINT; the others are
    plain literals. Binding a CAST per value cost DuckDB ~0.3 ms per row
    (a 50-row page of impact given to its chains' run: 9-19 ms per
    statement that reads it, against 2.5-7 ms)."""
    cols = ", ".join(q(c.name) for c in decl.columns)
    body = ", ".join(
        "(" + ", ".join(_sql_value(v, c.type, i == 0) for v, c in zip(row, decl.columns, strict=True)) + ")"
        for i, row in enumerate(rows))
    return f"(SELECT * FROM (VALUES {body}) AS v({cols}))"


def _sql_value(v, ctype: A.ColType, typed: bool = True) -> str:
    if ctype is A.ColType.SYMBOL:
        return "'" + v.replace("'", "''") + "'"
    return f"CAST({int(v)} AS BIGINT)" if typed else str(int(v))


def load_rows(con, decl: A.Decl, table: str, rows: list[tuple]) -> None:
    """Create temp table `table` for `decl` holding `rows` (already validated)."""
    cols = ", ".join(f"{q(c.name)} {SQL_TYPES[c.type]}" for c in decl.columns)
    con.execute(f"CREATE TEMP TABLE {q(table)} ({cols})")
    con.executemany(f"INSERT INTO temp.main.{q(table)} VALUES ({', '.join('?' * decl.arity)})", rows)
