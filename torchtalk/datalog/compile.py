"""Compile a checked program to a SQL plan for DuckDB.

Per stratum (analysis/strata.py):
  - non-recursive: `INSERT INTO t SELECT ... UNION SELECT ...` (or, for an
    output nothing else reads, the SELECT is fetched directly);
  - linear recursion (one relation, each rule reads it once): one
    `WITH RECURSIVE` statement, which DuckDB evaluates semi-naively;
  - mutual / non-linear recursion: a `Fixpoint` of semi-naive steps over
    delta tables, driven by the engine until no new row appears.

Note [Derived tables]: every table the plan creates lives in DuckDB's temp
catalog (`temp.main`), named `<prefix><relation>`, so a read-only fact
database works and nothing is written to it. Input relations are read
in place, by the name the caller gives in `sources`.

Example:
    >>> plan = compile_program(parse_text(TC), ["path"], {"edge": ['"edge"']})
    >>> print(plan.render())  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from torchtalk.datalog import ast as A
from torchtalk.datalog.analysis.grounding import ground_body, injected
from torchtalk.datalog.analysis.grouped import grouped_form
from torchtalk.datalog.analysis.strata import Stratum, needed_relations, strata
from torchtalk.errors import SemanticError


@dataclass(frozen=True)
class Exec:
    """One SQL statement."""

    sql: str


@dataclass(frozen=True)
class Fixpoint:
    """Semi-naive loop: run `init` once; repeat `step`, stop when `count`
    returns 0, else run `advance`."""

    relations: tuple[str, ...]
    init: tuple[str, ...]
    step: tuple[str, ...]
    count: str
    advance: tuple[str, ...]


Step = Exec | Fixpoint


@dataclass(frozen=True)
class Plan:
    steps: tuple[Step, ...]
    fetch: dict[str, str]  # output relation -> SELECT giving its rows
    temp_tables: tuple[str, ...] = field(default=())  # to drop afterwards

    def render(self) -> str:
        """The plan as one SQL script (golden tests, `--explain`)."""
        out: list[str] = []
        for s in self.steps:
            if isinstance(s, Exec):
                out.append(s.sql + ";")
            else:
                out.append(f"-- fixpoint {', '.join(s.relations)}: init")
                out += [x + ";" for x in s.init]
                out.append("-- repeat: step")
                out += [x + ";" for x in s.step]
                out.append("-- until zero: " + s.count + ";")
                out.append("-- advance")
                out += [x + ";" for x in s.advance]
                out.append("-- end fixpoint")
        for rel, sql in self.fetch.items():
            out.append(f"-- output {rel}")
            out.append(sql + ";")
        return "\n".join(out) + "\n"


def q(name: str) -> str:
    """A quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def sql_literal(term: A.Str | A.Num) -> str:
    if isinstance(term, A.Str):
        return "'" + term.value.replace("'", "''") + "'"
    return str(term.value)


SQL_TYPES = {A.ColType.SYMBOL: "VARCHAR", A.ColType.NUMBER: "BIGINT"}


def compile_program(
    program: A.Program,
    outputs: Iterable[str],
    sources: dict[str, list[str]],
    prefix: str = "_tt_",
    stored: dict[str, str] | None = None,
    single: bool = False,
) -> Plan:
    """The SQL plan computing `outputs`.

    `sources` maps an input relation to the SQL table references holding its
    external rows (the fact DB table, a table of caller-given facts). Only
    the strata the outputs depend on are compiled. A relation in `stored` is
    always computed into that (persistent, not yet existing) table instead of
    a temp table, never fetched directly, and is not dropped (Note [Derived
    at index time]). `single`: one statement per output when the program
    allows it (Note [One statement]).
    """
    outputs = list(dict.fromkeys(outputs))
    if single and not stored:
        try:
            return _compile(program, outputs, sources, prefix, {}, single=True)
        except _NeedsTables:
            pass
    return _compile(program, outputs, sources, prefix, stored or {}, single=False)


# Note [One statement]: a query's plan used to create, fill and drop a temp
# table per derived relation: 15-25 statements, each costing DuckDB about
# 0.3-0.5 ms whatever its work, and each planned alone. When no stratum needs
# the semi-naive loop (mutual or non-linear recursion), each output is
# instead one `WITH RECURSIVE` statement: a CTE per relation it needs, in
# stratum order, `MATERIALIZED` so a relation read twice is computed once.
# `trace(matmul)` went from 22 statements to 2 and from 59 to 42 ms. Index
# time (`stored`) keeps the tables.
#
# Note [Shared relations]: with several outputs (a walk answer and its
# `chain`, Note [Chains] in rules/chains.dl), a relation two statements need
# (two outputs, or an output and a walk's temp table) would be a CTE of
# each, computed once per statement; it is computed into a temp table once
# instead, as a walk is. Only the relations on the boundary (read directly
# by a relation other statements need): a statement costs DuckDB a few ms
# however small, and the relations under a boundary one are its CTEs. A
# single output's plan is left as it was.
#
# Note [Walks as tables]: except a linear recursive relation, which is one
# `CREATE TEMP TABLE ... AS WITH RECURSIVE ...` statement of its own. DuckDB
# estimates a recursive CTE at billions of rows, and every CTE computed from
# it likewise, so it would build its hash joins on the fact tables (230K
# steps) instead of on the few thousand rows a walk reaches: 14 ms for one
# join of `impact`. A table's row count is exact.


class _NeedsTables(Exception):
    """A stratum needs the semi-naive loop over tables (not one statement)."""


def _compile(program, outputs, sources, prefix, stored, single) -> Plan:
    needed = needed_relations(program, outputs)
    c = _Compiler(program, sources, prefix, stored, single)
    if single and len(outputs) > 1:  # Note [Shared relations]
        c.shared = _shared(program, outputs, needed)
    readers: dict[str, int] = {}
    for rule in program.rules:
        if rule.head.name in needed:
            for lit in rule.body:
                for atom, _ in A.literal_atoms(lit):
                    if atom.name != rule.head.name:
                        readers[atom.name] = readers.get(atom.name, 0) + 1
    for st in strata(program, needed):
        direct = (
            not st.recursive or st.linear
        ) and st.relations[0] in outputs and readers.get(st.relations[0], 0) == 0 and st.relations[0] not in c.stored
        c.stratum(st, direct)
    fetch = {rel: c.with_ctes(rel, c.fetch.get(rel) or c.fetch_sql(rel)) for rel in outputs}
    return Plan(tuple(c.steps), fetch, tuple(c.temps))


def _shared(program, outputs, needed) -> set[str]:
    """The relations two statements of a multi-output plan need, on the
    boundary (Note [Shared relations]): some relation reading one directly
    is needed by other statements than it is."""
    walks = [st.relations[0] for st in strata(program, needed) if st.recursive and st.linear]
    closures = [*(needed_relations(program, [o]) for o in outputs),
                *(needed_relations(program, [r]) - {r} for r in walks)]
    users = {rel: frozenset(i for i, cl in enumerate(closures) if rel in cl) for rel in needed}
    boundary = set()
    for rule in program.rules:
        head = rule.head.name
        if head not in needed:
            continue
        for lit in rule.body:
            for atom, _ in A.literal_atoms(lit):
                if atom.name in users and atom.name != head and users[atom.name] != users[head]:
                    boundary.add(atom.name)
    return {rel for rel in boundary if len(users[rel]) > 1}


class _Compiler:
    def __init__(self, program: A.Program, sources: dict[str, list[str]], prefix: str,
                 stored: dict[str, str], single: bool = False) -> None:
        self.program = program
        self.single = single
        self.ctes: list[tuple[str, str]] = []  # (relation, CTE) in stratum order (Note [One statement])
        self.sources = sources
        self.prefix = prefix
        self.stored = stored
        self.steps: list[Step] = []
        self.temps: list[str] = []
        self.fetch: dict[str, str] = {}
        self.refs: dict[str, str] = {}
        self.shared: set[str] = set()  # Note [Shared relations]

    def ref(self, rel: str) -> str:
        """The table holding `rel`'s rows once its stratum has run."""
        if rel in self.refs:
            return self.refs[rel]
        if not self.program.rules_for(rel) and len(self.sources.get(rel, [])) == 1:
            return self.sources[rel][0]
        return self.temp(rel)

    def fetch_sql(self, rel: str) -> str:
        ref = self.ref(rel)
        if ref.startswith("temp.main.") or ref == self.stored.get(rel) or rel in self.derived():
            return f"SELECT * FROM {ref}"
        return f"SELECT DISTINCT * FROM {ref}"  # an input read in place may repeat rows

    def derived(self) -> set[str]:
        return {rel for rel, _ in self.ctes}

    def with_ctes(self, rel: str, select: str) -> str:
        """`select` (of output `rel`) preceded by the CTEs it reads, if any."""
        if not self.ctes:
            return select
        closure = self.reads(rel)
        ctes = [cte for r, cte in self.ctes if r in closure]
        return f"WITH RECURSIVE {', '.join(ctes)} {select}" if ctes else select

    def reads(self, rel: str) -> set[str]:
        """The relations `rel` reads, transitively, up to those already in a
        table (a walk's, Note [Shared relations]): the CTEs its statement needs."""
        tables = {r for r, ref in self.refs.items() if ref.startswith("temp.main.") and r != rel}
        seen, todo = {rel}, [rel]
        while todo:
            for rule in self.program.rules_for(todo.pop()):
                for lit in rule.body:
                    for atom, _ in A.literal_atoms(lit):
                        if atom.name not in seen and atom.name not in tables:
                            seen.add(atom.name)
                            todo.append(atom.name)
        return seen

    def cte(self, rel: str, body: str, cols: str = "") -> str:
        """Add `rel`'s CTE (materialized unless `cols`: a recursive one) -> its name."""
        name = q(self.prefix + rel + ("_rec" if cols else ""))
        self.ctes.append((rel, f"{name}({cols}) AS ({body})" if cols else f"{name} AS MATERIALIZED ({body})"))
        return name

    def temp(self, rel: str, suffix: str = "") -> str:
        if not suffix and rel in self.stored:
            return self.stored[rel]
        return f"temp.main.{q(self.prefix + rel + suffix)}"

    def create(self, rel: str, suffix: str = "") -> str:
        decl = self.program.decls[rel]
        cols = ", ".join(f"{q(c.name)} {SQL_TYPES[c.type]}" for c in decl.columns)
        if not suffix and rel in self.stored:
            return f"CREATE TABLE {self.stored[rel]} ({cols})"
        self.temps.append(self.temp(rel, suffix))
        return f"CREATE TEMP TABLE {q(self.prefix + rel + suffix)} ({cols})"

    def stratum(self, st: Stratum, direct: bool) -> None:
        if not st.recursive:
            self.simple(st.relations[0], direct)
        elif st.linear:
            self.linear(st.relations[0], direct)
        else:
            self.fixpoint(st.relations)

    def base_selects(self, rel: str, members: set[str]) -> list[str]:
        """SELECTs of `rel` that read no relation of `members`: facts, sources, rules."""
        out = [f"SELECT * FROM {src}" for src in self.sources.get(rel, [])]
        facts = [r for r in self.program.rules_for(rel) if r.is_fact]
        if facts:
            out.append(self.values(rel, facts))
        for r in self.program.rules_for(rel):
            if not r.is_fact and not _reads(r, members):
                out.append(self.select(r, lambda atom, i: self.ref(atom.name)))
        return out

    def simple(self, rel: str, direct: bool) -> None:
        if not self.program.rules_for(rel) and len(self.sources.get(rel, [])) == 1:
            return  # read in place
        selects = self.base_selects(rel, set())
        body = _union(selects, self.empty(rel))
        if direct:
            self.fetch[rel] = body
            return
        if self.single and rel in self.shared:  # Note [Shared relations]
            self.refs[rel] = self.cte(rel, body)
            self.as_table(rel, f"SELECT * FROM {self.refs[rel]}")
            return
        if self.single:
            self.refs[rel] = self.cte(rel, body)
            return
        self.steps.append(Exec(self.create(rel)))
        self.steps.append(Exec(f"INSERT INTO {self.temp(rel)} {body}"))
        self.refs[rel] = self.temp(rel)

    def linear(self, rel: str, direct: bool) -> None:
        cte = q(self.prefix + rel + "_rec")
        base = self.base_selects(rel, {rel})
        rec = [
            self.select(r, lambda atom, i: cte if atom.name == rel else self.ref(atom.name))
            for r in self.program.rules_for(rel)
            if not r.is_fact and _reads(r, {rel})
        ]
        cols = ", ".join(q(c.name) for c in self.program.decls[rel].columns)
        anchor = " UNION ".join(base) if base else self.empty(rel)
        if self.single:  # the recursive CTE, computed into a table (Note [Walks as tables])
            self.cte(rel, f"({anchor}) UNION ({' UNION '.join(rec)})", cols)
            select = f"SELECT * FROM {cte}"
            if direct:
                self.fetch[rel] = select
                return
            self.as_table(rel, select)
            return
        sql = (
            f"WITH RECURSIVE {cte}({cols}) AS (({anchor}) UNION ({' UNION '.join(rec)})) "
            f"SELECT * FROM {cte}"
        )
        if direct:
            self.fetch[rel] = sql
            return
        self.steps.append(Exec(self.create(rel)))
        self.steps.append(Exec(f"INSERT INTO {self.temp(rel)} {sql}"))
        self.refs[rel] = self.temp(rel)

    def as_table(self, rel: str, select: str) -> None:
        """Compute `rel` (its CTE, read by `select`) into a temp table, read
        from there by the statements after it."""
        self.steps.append(Exec(f"CREATE TEMP TABLE {q(self.prefix + rel)} AS {self.with_ctes(rel, select)}"))
        self.temps.append(self.temp(rel))
        self.refs[rel] = self.temp(rel)
        self.ctes = [(r, c) for r, c in self.ctes if r != rel]

    def fixpoint(self, rels: tuple[str, ...]) -> None:
        if self.single:
            raise _NeedsTables
        members = set(rels)
        init: list[str] = []
        for rel in rels:
            self.refs[rel] = self.temp(rel)
            init.append(self.create(rel))
            init.append(self.create(rel, "_delta"))
            init.append(self.create(rel, "_new"))
            base = self.base_selects(rel, members)
            if base:
                init.append(f"INSERT INTO {self.temp(rel)} {_union(base, '')}")
            init.append(f"INSERT INTO {self.temp(rel, '_delta')} SELECT * FROM {self.temp(rel)}")
        step, advance = [], []
        for rel in rels:
            variants = self.delta_variants(rel, members)
            step.append(f"DELETE FROM {self.temp(rel, '_new')}")
            if variants:
                step.append(
                    f"INSERT INTO {self.temp(rel, '_new')} ({' UNION '.join(variants)}) "
                    f"EXCEPT SELECT * FROM {self.temp(rel)}"
                )
            advance.append(f"INSERT INTO {self.temp(rel)} SELECT * FROM {self.temp(rel, '_new')}")
            advance.append(f"DELETE FROM {self.temp(rel, '_delta')}")
            advance.append(f"INSERT INTO {self.temp(rel, '_delta')} SELECT * FROM {self.temp(rel, '_new')}")
        count = "SELECT " + " + ".join(f"(SELECT count(*) FROM {self.temp(r, '_new')})" for r in rels)
        self.steps.append(Fixpoint(rels, tuple(init), tuple(step), count, tuple(advance)))

    def delta_variants(self, rel: str, members: set[str]) -> list[str]:
        """One SELECT per (recursive rule, body atom of the stratum): that atom reads the delta."""
        out = []
        for r in self.program.rules_for(rel):
            if r.is_fact or not _reads(r, members):
                continue
            positions = [i for i, lit in enumerate(r.body) if isinstance(lit, A.Atom) and lit.name in members]
            for k in positions:

                def table(atom: A.Atom, i: int, k: int = k) -> str:
                    if i == k:
                        return self.temp(atom.name, "_delta")
                    return self.ref(atom.name)

                out.append(self.select(r, table))
        return out

    def values(self, rel: str, facts: list[A.Rule]) -> str:
        cols = ", ".join(q(c.name) for c in self.program.decls[rel].columns)
        rows = ", ".join("(" + ", ".join(_const_sql(t) for t in f.head.args) + ")" for f in facts)
        return f"SELECT * FROM (VALUES {rows}) AS v({cols})"

    def empty(self, rel: str) -> str:
        cols = ", ".join(
            f"CAST(NULL AS {SQL_TYPES[c.type]}) AS {q(c.name)}" for c in self.program.decls[rel].columns
        )
        return f"SELECT {cols} WHERE false"

    def select(self, rule: A.Rule, table: Callable[[A.Atom, int], str]) -> str:
        return _RuleSQL(self, rule, table).select()


def _reads(rule: A.Rule, members: set[str]) -> bool:
    return any(isinstance(lit, A.Atom) and lit.name in members for lit in rule.body)


def _union(selects: list[str], empty: str) -> str:
    if not selects:
        return empty
    if len(selects) == 1:
        s = selects[0]
        return "SELECT DISTINCT" + s[len("SELECT") :] if s.startswith("SELECT ") else s
    return " UNION ".join(selects)


def _const_sql(term: A.Term) -> str:
    if isinstance(term, (A.Str, A.Num)):
        return sql_literal(term)
    raise SemanticError(f"fact argument {term} is not a constant", term.loc)


class _RuleSQL:
    """One rule -> `SELECT head FROM atoms WHERE joins AND filters`."""

    def __init__(self, comp: _Compiler, rule: A.Rule, table, scope: str = "t") -> None:
        self.comp = comp
        self.rule = rule
        self.table = table
        self.scope = scope
        self.nagg = 0
        self.env: dict[str, str] = {}

    def select(self) -> str:
        grouped = self.grouped()
        if grouped is not None:
            return grouped
        from_, conds = self.body(self.rule.body, top=True)
        decl = self.comp.program.decls[self.rule.head.name]
        cols = ", ".join(
            f"{self.expr(t)} AS {q(c.name)}" for t, c in zip(self.rule.head.args, decl.columns, strict=True)
        )
        return _assemble(f"SELECT {cols}", from_, conds)

    def body(self, body: tuple[A.Literal, ...], top: bool) -> tuple[list[str], list[str]]:
        """FROM items and WHERE conditions of a body; binds variables in self.env."""
        from_, conds, later = [], [], []
        pos = 0
        for i, lit in enumerate(body):
            if not isinstance(lit, A.Atom):
                continue
            alias = f"{self.scope}{pos}"
            pos += 1
            from_.append(f"{self.table(lit, i) if top else self.comp.ref(lit.name)} AS {alias}")
            cols = self.comp.program.decls[lit.name].columns
            for col, arg in zip(cols, lit.args, strict=True):
                ref = f"{alias}.{q(col.name)}"
                if isinstance(arg, A.Wildcard):
                    continue
                if isinstance(arg, A.Var) and arg.name not in self.env:
                    self.env[arg.name] = ref
                elif isinstance(arg, A.Var):
                    conds.append(f"{ref} = {self.env[arg.name]}")
                else:
                    later.append((ref, arg))
        g = ground_body(body, frozenset(self.env), self.rule)
        for a in g.assignments:
            if isinstance(a.expr, A.Aggregate) and from_:
                # computed once per row, as a LATERAL join, however often `a.var` is used
                alias = f"{self.scope}_l{self._next()}"
                from_.append(f"LATERAL ({self.aggregate(a.expr, column=True)}) AS {alias}")
                sql = f"{alias}.v"
            else:
                sql = self.expr(a.expr)
            self.env[a.var] = sql
            conds += self.not_null(a.expr, sql)
        conds += [f"{ref} = {self.expr(arg)}" for ref, arg in later]
        for lit in body:
            if isinstance(lit, A.Comparison) and lit in g.conditions:
                conds.append(f"{self.expr(lit.left)} {_CMP[lit.op]} {self.expr(lit.right)}")
            elif isinstance(lit, A.Builtin):
                conds.append(self.builtin(lit))
            elif isinstance(lit, A.Negation):
                conds.append(self.negation(lit))
        return from_, conds

    def grouped(self) -> str | None:
        """Note [Grouped aggregate] (analysis/grouped.py): one GROUP BY over
        the relation, not a correlated subquery per row (the walks' shortest
        distances, 2x faster). None when the rule is not of that form."""
        g = grouped_form(self.rule)
        if g is None:
            return None
        atom, var, agg, keys, local, target = g.atom, g.var, g.agg, g.keys, g.local, g.agg.target
        cols = self.comp.program.decls[atom.name].columns
        group = ", ".join(q(cols[k].name) for k in keys.values())
        v = q(cols[local[target.name]].name) if target is not None else ""
        value = {A.AggFunc.COUNT: "count(*)", A.AggFunc.SUM: f"sum({v})",
                 A.AggFunc.MIN: f"min({v})", A.AggFunc.MAX: f"max({v})"}[agg.func]
        table = self.table(atom, self.rule.body.index(atom))
        source = f"(SELECT {group}, {value} AS _v FROM (SELECT DISTINCT * FROM {table}) AS g0 GROUP BY {group}) AS g"
        self.env = {name: f"g.{q(cols[k].name)}" for name, k in keys.items()}
        self.env[var.name] = "g._v"
        decl = self.comp.program.decls[self.rule.head.name]
        head = ", ".join(f"{self.expr(t)} AS {q(c.name)}" for t, c in zip(self.rule.head.args, decl.columns, strict=True))
        return f"SELECT {head} FROM {source}"

    def not_null(self, expr: A.Term, sql: str) -> list[str]:
        """min/max over an empty body yield no binding (Soufflé): filter NULL."""
        if any(a.func in (A.AggFunc.MIN, A.AggFunc.MAX) for a in A.term_aggregates(expr)):
            return [f"{sql} IS NOT NULL"]
        return []

    def negation(self, lit: A.Negation) -> str:
        if isinstance(lit.target, A.Builtin):
            return f"NOT {self.builtin(lit.target)}"
        atom = lit.target
        alias = f"{self.scope}_n{self._next()}"
        cols = self.comp.program.decls[atom.name].columns
        conds = [
            f"{alias}.{q(c.name)} = {self.expr(a)}"
            for c, a in zip(cols, atom.args, strict=True)
            if not isinstance(a, A.Wildcard)
        ]
        return f"NOT EXISTS ({_assemble('SELECT 1', [f'{self.comp.ref(atom.name)} AS {alias}'], conds)})"

    def builtin(self, lit: A.Builtin) -> str:
        left, right = self.expr(lit.left), self.expr(lit.right)
        if lit.name is A.BuiltinName.MATCH:
            return f"regexp_full_match({right}, {left})"
        return f"contains({right}, {left})"

    def _next(self) -> int:
        self.nagg += 1
        return self.nagg

    def expr(self, term: A.Term) -> str:
        if isinstance(term, A.Var):
            if term.name not in self.env:
                raise SemanticError(f"variable '{term.name}' is not grounded", term.loc)
            return self.env[term.name]
        if isinstance(term, (A.Str, A.Num)):
            return sql_literal(term)
        if isinstance(term, A.Neg):
            return f"(- {self.expr(term.operand)})"
        if isinstance(term, A.BinOp):
            return f"({self.expr(term.left)} {_ARITH[term.op]} {self.expr(term.right)})"
        if isinstance(term, A.Functor) and term.name is A.FunctorName.AS:  # Note [Types]: a value as it is
            return self.expr(term.args[0])
        if isinstance(term, A.Functor):  # Note [ord]
            return f"CAST(hash({self.expr(term.args[0])}) >> 1 AS BIGINT)"
        if isinstance(term, A.Aggregate):
            return self.aggregate(term)
        raise SemanticError(f"'{term}' has no value here", term.loc)

    def aggregate(self, agg: A.Aggregate, column: bool = False) -> str:
        """Correlated scalar subquery over the distinct matches of the body
        (`column`: a one-row SELECT with the value as column `v`)."""
        inner = _RuleSQL(self.comp, self.rule, self.table, f"{self.scope}_a{self._next()}_")
        inj = injected(agg, self.rule)
        inner.env = {k: v for k, v in self.env.items() if k in inj}
        from_, conds = inner.body(agg.body, top=False)
        cols = _star_cols(inner, agg.body, from_)
        if agg.target is not None:
            cols.append(f"{inner.expr(agg.target)} AS _v")
        sub = _assemble(f"SELECT DISTINCT {', '.join(cols)}", from_, conds)
        value = {
            A.AggFunc.COUNT: "count(*)",
            A.AggFunc.SUM: "coalesce(sum(_v), 0)",
            A.AggFunc.MIN: "min(_v)",
            A.AggFunc.MAX: "max(_v)",
        }[agg.func]
        if column:
            return f"SELECT {value} AS v FROM ({sub})"
        return f"(SELECT {value} FROM ({sub}))"


def _star_cols(inner: _RuleSQL, body, from_: list[str]) -> list[str]:
    """Every column of every positive atom of an aggregate body, uniquely named."""
    out = []
    atoms = [lit for lit in body if isinstance(lit, A.Atom)]
    for k, (atom, item) in enumerate(zip(atoms, from_, strict=True)):
        alias = item.split(" AS ")[-1]
        for j, col in enumerate(inner.comp.program.decls[atom.name].columns):
            out.append(f"{alias}.{q(col.name)} AS _c{k}_{j}")
    return out


def _assemble(select: str, from_: list[str], conds: list[str]) -> str:
    sql = select
    if from_:
        sql += " FROM " + ", ".join(from_)
    if conds:
        sql += " WHERE " + " AND ".join(conds)
    return sql


# Note [ord]: Soufflé's ord(s) is the index of s in its symbol table. DuckDB
# keeps no symbol table, so here ord(s) is s's 64-bit hash, shifted right to
# fit a BIGINT: the same in every evaluation of one DuckDB version, one number
# per symbol (two share one with probability about n²/2⁶⁴), but not the
# number Soufflé gives. A relation stored at index time that holds ord()
# numbers is fingerprinted with the DuckDB version, and torchtalk/query/
# derived.py checks that it numbers its symbols one-to-one. The rule library
# itself numbers the code graph's nodes by a fact instead (Note [Node
# numbers] in torchtalk/nodes.py), so both engines join the same numbers.

_CMP = {A.CmpOp.EQ: "=", A.CmpOp.NE: "<>", A.CmpOp.LT: "<", A.CmpOp.LE: "<=", A.CmpOp.GT: ">", A.CmpOp.GE: ">="}
# Soufflé's / truncates like C; DuckDB's // on integers does too.
_ARITH = {A.ArithOp.ADD: "+", A.ArithOp.SUB: "-", A.ArithOp.MUL: "*", A.ArithOp.DIV: "//", A.ArithOp.MOD: "%"}
