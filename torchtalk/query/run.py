"""Bind a parsed query to its named relation and evaluate it.

Binding follows Note [Named queries] (torchtalk/query/library.py): seeds and
options become small input relations given to the engine, the other
arguments filter the rows. Only the strata the relation needs are computed.

`torchtalk.query.query` (the one entry point) parses, binds with `bind`
and evaluates with `evaluate_bound`.

Example:
    >>> b = bind(parse_query("callees(matmul)"), load_library(), Resolver(con))
    >>> b.sig.columns
    ('fn', 'callee', 'via', 'file', 'line')
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from torchtalk.errors import InputError, QueryError, SrcLoc, did_you_mean
from torchtalk.query.dsl import QUERY_FILE, Query, Value
from torchtalk.query.library import NAMESPACE_OF, Param, Signature, signature
from torchtalk.query.resolve import Ambiguous, Resolution, Resolver

if TYPE_CHECKING:
    from torchtalk.datalog.engines import Page

# `a -> b` ends that stand for a whole category (rules/paths.dl)
CATEGORY_WORDS = ("python", "cuda")
# options every query takes, handled here rather than by the rules
RESERVED_OPTIONS = ("all",)
# Note [Depth bound]: a walk keeps (node, depth) pairs while a cycle lets
# depths grow, so its memory grows with `depth` (kernels(add): 150 MB at 5,
# 490 MB at 20, 770 MB at 30) and `depth=100000` exhausts the machine. Every
# `depth` (a query's option, `affected --depth`, MCP's `depth`) is checked
# against this bound, documented in docs/queries.md; store.tune_for_queries
# also caps DuckDB's memory, so no query can take the machine.
MAX_DEPTH = 20


@dataclass(frozen=True)
class Bound:
    """A query bound to relation `sig.name`: engine facts + row filters."""

    query: Query
    sig: Signature
    facts: dict[str, list[tuple]]
    filters: tuple[tuple[int, frozenset], ...]
    resolutions: tuple[Resolution, ...]

    def __hash__(self) -> int:
        return hash(self.query)


@dataclass(frozen=True)
class Result:
    """The rows of a query, sorted; `total` before --limit."""

    name: str
    columns: tuple[str, ...]
    types: tuple[str, ...]
    rows: tuple[tuple, ...]
    total: int
    resolutions: tuple[Resolution, ...] = ()
    notes: tuple[str, ...] = field(default=())
    explanations: tuple[dict, ...] = ()
    # the first rows of each section were read (Note [Rows per section] in
    # torchtalk/query/output.py): rows per section value, the one-valued columns
    counts: dict | None = None
    one_value: frozenset[int] | None = None

    def records(self) -> list[dict]:
        """One dict per row keyed by column name (the `--json` form; a
        chain as its list of steps)."""
        return [{c: (v.as_json() if hasattr(v, "as_json") else v) for c, v in zip(self.columns, r, strict=True)}
                for r in self.rows]


def _err(q: Query, v: Value | None, message: str, hint: str | None = None) -> QueryError:
    loc = SrcLoc(QUERY_FILE, 1, v.col) if v is not None and v.col else None
    return QueryError(message, loc, hint=hint, source_line=q.text if loc else None)


def bind(q: Query, program, resolver: Resolver, *, all_matches: bool = False) -> Bound:
    """Bind `q` to its relation: resolve names, fill seeds/options, build filters."""
    sig = signature(program, q.name)
    all_matches = all_matches or _flag(q, "all")
    facts: dict[str, list[tuple]] = {}
    filters: list[tuple[int, frozenset]] = []
    resolutions: list[Resolution] = []

    def resolve(v: Value, column: str) -> tuple:
        ns = NAMESPACE_OF.get(column)
        if v.quoted or ns is None:
            return (v.value,)
        try:
            res = resolver.resolve(str(v.value), ns)
        except QueryError as exc:
            raise _err(q, v, exc.message, exc.hint) from None
        if res.ambiguous and not all_matches:
            raise Ambiguous(res)
        resolutions.append(res)
        return res.ids

    if sig.arg is not None:
        if not q.args:
            raise _err(q, None, f"{q.name} needs an argument: a {sig.arg.column}",
                       hint=f"e.g. {q.name}(NAME)")
        seeds = [i for v in q.args for i in resolve(v, sig.arg.column)]
        if f"{sig.name}_member" in program.inputs:
            seeds, facts[f"{sig.name}_member"] = grouped_seeds(seeds)
        facts[sig.arg.relation] = [(i,) for i in seeds]
        _bind_like(program, sig, facts, resolver.con)
    elif sig.src is not None and q.path is None:
        v = q.args[0] if q.args else None
        raise _err(q, v, f"{q.name} needs two ends: `A -> B`",
                   hint=f"e.g. {q.name}(softmax_warp_forward -> python), {q.name}(torch.softmax -> cuda)")
    else:
        _bind_filters(q, sig, resolve, filters)
    if q.path is not None:
        _bind_path(q, sig, resolve, facts)
    _bind_options(q, sig, resolve, facts, filters)
    return Bound(q, sig, facts, tuple(filters), tuple(resolutions))


# Note [Grouped seeds]: a query that declares `<query>_member` (impact,
# affected) walks once from each C++ name its arguments give, not once per
# overload (Note [One walk per name] in rules/graph.dl): the overload ids of
# one name become one seed, the name, and `<query>_member` pairs it with
# each. An id alone of its name among the arguments stays itself (so one
# quoted overload walks from that overload alone).
def grouped_seeds(ids: list) -> tuple[list, list[tuple[str, str]]]:
    """(the seeds, (seed, member) pairs) of resolved `ids`, grouped by name."""
    from extractors.cpp.names import split_sig

    by_name: dict[str, list[str]] = {}
    for i in dict.fromkeys(ids):
        by_name.setdefault(split_sig(i)[0] if isinstance(i, str) else i, []).append(i)
    seeds, members = [], []
    for name, group in by_name.items():
        if len(group) == 1:
            seeds.append(group[0])
        else:
            seeds.append(name)
            members += [(name, i) for i in group]
    return seeds, members


def _bind_like(program, sig: Signature, facts, con) -> None:
    """Fill `q_like` / `q_like_probe` from the text arguments (Note [Text arguments]
    in torchtalk/query/like.py), when the query declares them."""
    from torchtalk.connmemo import engine_of
    from torchtalk.query.like import like, name_sample, probes, rarity_in

    texts = [t for (t,) in facts[sig.arg.relation] if isinstance(t, str)]
    if f"{sig.name}_like" in program.inputs:
        facts[f"{sig.name}_like"] = [(t, *like(t)) for t in texts]
    if f"{sig.name}_like_probe" in program.inputs:
        # windows by rarity where the scans are by trigram (Note [Probes]); DuckDB scans every
        # name per case variant, so there the fewest letters (variants) are the cheaper
        rarity = rarity_in(name_sample(con)) if engine_of(con) == "memory" else None
        facts[f"{sig.name}_like_probe"] = [(t, role, p) for t in texts for role, p in probes(t, rarity)]


def _flag(q: Query, key: str) -> bool:
    v = q.options.get(key)
    return v is not None and str(v.value).lower() in ("1", "true", "yes")


def _bind_filters(q: Query, sig: Signature, resolve, filters) -> None:
    if len(q.args) > len(sig.columns):
        raise _err(q, q.args[len(sig.columns)], f"{q.name} has {len(sig.columns)} columns, "
                   f"got {len(q.args)} arguments")
    for i, v in enumerate(q.args):
        filters.append((i, _filter_values(v, sig.columns[i], sig.types[i], resolve)))


def _filter_values(v: Value, column: str, typ: str, resolve) -> frozenset:
    if typ == "number":
        if not v.is_number:
            raise QueryError(f"column {column!r} is a number, got {v.text!r}")
        return frozenset((v.value,))
    return frozenset((v.text, *resolve(v, column)))


def check_depth(value, where: str = "depth") -> int:
    """`value` as a walk depth, 1..MAX_DEPTH (Note [Depth bound]); a one-line
    InputError naming `where` otherwise.

    Example:
        >>> check_depth(-1)
        InputError: depth must be 1 to 20, got -1
    """
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_DEPTH:
        raise InputError(f"{where} must be 1 to {MAX_DEPTH}, got {value!r}",
                         hint="the walks' memory grows with depth; see docs/queries.md")
    return value


def _bind_path(q: Query, sig: Signature, resolve, facts) -> None:
    if sig.src is None or sig.dst is None:
        raise _err(q, q.path.src, f"{q.name} takes no `a -> b` argument")
    src, dst = q.path.src, q.path.dst
    if src.text in CATEGORY_WORDS and dst.text not in CATEGORY_WORDS:
        src, dst = dst, src  # `python -> X` asks the same as `X -> python`
    facts[sig.src.relation] = [(i,) for i in resolve(src, sig.src.column)]
    if dst.text in CATEGORY_WORDS and not dst.quoted:
        facts[sig.dst.relation] = [(dst.text,)]
    else:
        facts[sig.dst.relation] = [(i,) for i in resolve(dst, sig.dst.column)]


def _bind_options(q: Query, sig: Signature, resolve, facts, filters) -> None:
    for key, v in q.options.items():
        if key in RESERVED_OPTIONS:
            continue
        p = sig.options.get(key)
        if p is not None and p.type == "symbol" and p.column in NAMESPACE_OF:
            facts[p.relation] = [(i,) for i in resolve(v, p.column)]  # backend=cuda: the key CUDA
        elif p is not None:
            facts[p.relation] = [(_typed(q, v, p),)]
        elif key in sig.columns:
            i = sig.columns.index(key)
            filters.append((i, _filter_values(v, key, sig.types[i], resolve)))
        else:
            known = list(dict.fromkeys([*sig.options, *sig.columns, *RESERVED_OPTIONS]))
            raise _err(q, v, f"{q.name} has no option or column {key!r}",
                       hint=did_you_mean(key, known) or f"options: {', '.join(known)}")
    for key, p in sig.options.items():
        if p.relation not in facts and key in sig.defaults:
            facts[p.relation] = [(d,) for d in sig.defaults[key]]


def _typed(q: Query, v: Value, p: Param):
    if p.type == "number":
        name = p.relation.split('_', 1)[-1]
        if not v.is_number:
            raise _err(q, v, f"option {name!r} takes a number, got {v.text!r}")
        if name == "depth":
            try:
                check_depth(v.value)
            except InputError as exc:
                raise _err(q, v, exc.message, exc.hint) from None
        return v.value
    return str(v.value)


def evaluate_bound(b: Bound, program, con, *, engine: str = "duckdb",
                   tables: frozenset | None = None, limit: int | None = None, dump=None,
                   pick: Callable[[Page], Iterable[int]] | None = None, per: int | None = None):
    """The rows of the bound relation, filtered, in `sort_order`, at most
    `limit` of them: a `Page` (its `total` counts them all); `tables` = the
    fact DB's table names (for Note [Pruning]). The program goes through
    `query_passes` first; `dump(name, stage)` sees it after each pass. A
    walk answer's rows end with their chain (Note [Chains]), computed with
    them or, for a query that declares `<query>_shown`, for the rows of the
    page only (Note [Chains for the page] in rules/chains.dl). `pick(rows)`,
    for such a query, says which of the fetched rows will be shown (their
    indices): only those get their chain, the others None (Note [Chains for
    the rows read]). `per=N`: the first N rows of each section, with the
    counts of all, when the relation's rows can be sized so (Note [Rows per
    section] in torchtalk/query/output.py); `limit` applies otherwise."""
    from torchtalk.datalog.engines import Page
    from torchtalk.query.chains import ALL_SHOWN, CHAIN, chains, wants_chain

    name = b.sig.name
    spec = _fetch_spec(b, limit, per)
    with_chain = wants_chain(program, name) and CHAIN in program.decls
    shown = f"{name}_shown"
    paged = with_chain and shown in program.inputs
    picked = pick is not None and paged
    facts = b.facts
    if paged and not picked and spec.per is None and (limit is None or limit > PAGE_ROWS):  # every row, or many: one run
        program, paged = _all_shown(program, name, shown), False
        if ALL_SHOWN in program.decls:
            facts = {**facts, ALL_SHOWN: [()]}
    outputs = [name, CHAIN] if with_chain and not paged else [name]
    walks: dict[str, str] | None = {} if paged and engine in ("duckdb", "memory") else None  # Note [One walk per answer]
    try:
        out = _evaluate(b, program, con, engine, tables, dump, facts, outputs, name, {name: spec}, keep=walks)
        page = out.get(name, Page([]))
        if not with_chain:
            return page
        chosen = sorted(set(pick(page))) if picked else range(len(page))
        rows = [page[i] for i in chosen]
        if paged:
            every = bool(rows) and _small_walks(con, engine, walks)  # Note [Every edge of a small answer]
            edges = _page_chains(b, program, con, engine, tables, dump, rows, walks or {}, every) if rows else ()
        else:
            edges = out.get(CHAIN, ())
    finally:
        if walks:
            from torchtalk.datalog.engines.duckdb import drop_tables
            from torchtalk.datalog.engines.memory import drop_kept

            drop_tables(con, drop_kept(con, walks.values()))
    of = dict(zip(chosen, chains(name, rows, edges), strict=True))
    return Page([(*r, of.get(i)) for i, r in enumerate(page)], page.total, page.counts, page.one_value)


def _fetch_spec(b: Bound, limit: int | None, per: int | None):
    """How the bound relation's rows are read: filtered, in `sort_order`,
    the first `per` rows of each section when they can be sized so (Note
    [Rows per section]), else at most `limit` rows."""
    from torchtalk.datalog.engines import Fetch
    from torchtalk.query.output import section_column

    column = section_column(b.sig.columns) if per is not None else False
    if column is False:  # `limit` where `per` cannot be
        return Fetch(sort_order(b.sig), b.filters, limit)
    return Fetch(sort_order(b.sig), b.filters, per=(column, per))


def _page_chains(b: Bound, program, con, engine, tables, dump, rows, walks: dict[str, str], every: bool = False):
    """The chain edges of `rows` (Note [Chains for the page]): a second run
    given them as `<query>_shown`, reading the first run's `walks` where
    they are the same (Note [One walk per answer]); `every`: the edges out
    of every reached node, not only those the rows' chains can pass (Note
    [Every edge of a small answer])."""
    from torchtalk.query.chains import ALL_SHOWN, CHAIN

    shown = f"{b.sig.name}_shown"
    facts = {**b.facts, shown: [tuple(r) for r in rows]}
    if every and ALL_SHOWN in program.decls:
        facts[ALL_SHOWN] = [()]
    later = None if dump is None else (lambda n, st: dump(f"chain-{n}", st))
    reuse = _same_walks(program, walks, b.facts, facts)
    return _evaluate(b, program, con, engine, tables, later, facts, [CHAIN], CHAIN, {}, reuse=reuse)[CHAIN]


# Note [Chains for the rows read]: a table or an MCP answer reads every row
# of a walk answer, or the first rows of each section with the counts of
# all (Note [Rows per section] in output.py), but shows a few dozen.
# Computing every row's chain (impact(cpublas::gemm): 20,203 rows) cost
# four times the rows themselves, so the reader says which rows it will
# show (`pick`, from the rows without their chains), and only those get
# theirs, by the paged second run (Note [Chains for the page]); the rest
# carry None. The pick must not depend on the chains: impact and affected,
# the queries with `<query>_shown`, have no `op` column, so no overload
# grouping (torchtalk/query/output.py) reads the chain column, and a
# section's first rows are the same with or without it. A token budget
# (MCP) shows fewer rows once their chains are in, never others.


# A page of at most this many rows gets its chains by a second run (Note
# [Chains for the page]); a longer answer (every row, as a table or `--all`
# fetches) in the same run as its rows, its `_shown` relation all of them.
PAGE_ROWS = 1000

# Note [Every edge of a small answer]: the paged second run (Note [Chains
# for the page]) finds the nodes a shown row's chain can pass (up_dag_at,
# up_chain_at: closures from the rows) and takes the steps out of those.
# Given `chain_all_shown` as well, it takes the steps between every two
# nodes the walk reached at distances d and d - 1 instead (no closure); the
# steps the rows' chains take are among them, so the chains are the same.
# On DuckDB, which pays a few tens of ms for each statement of a walk
# whatever its rows, that skips the closure's statement: in-process,
# impact(host_softmax, depth=4) (a walk of 113 rows) 140 -> 106 ms,
# impact(cpublas::gemm) (1,234) 164 -> 143 ms, affected(cpublas::gemm)
# (the same walk, 9,125 rows) 167 -> 144 ms. Past a few thousand walk
# rows it costs more than it saves (impact(TensorIterator, depth=5), 6,473:
# 192 -> 208 ms), and on the in-memory engine always, which pays per row
# (impact(cpublas::gemm) 29 -> 45 ms): so on DuckDB, for kept walks of up
# to ALL_EDGES_WALK rows in all.
ALL_EDGES_WALK = 3000


def _small_walks(con, engine: str, walks: dict[str, str] | None) -> bool:
    """The walks the rows' run kept (Note [One walk per answer]) hold at
    most ALL_EDGES_WALK rows in all, on DuckDB."""
    if engine != "duckdb" or not walks:
        return False
    from torchtalk.datalog.engines.duckdb import table_rows

    return sum(table_rows(con, t) for t in walks.values()) <= ALL_EDGES_WALK


def _all_shown(program, name: str, shown: str):
    """`program` with `shown` derived as a copy of relation `name` instead
    of given (Note [Chains for the page]: every row is shown)."""
    import dataclasses

    from torchtalk.datalog import ast as A

    def compute():
        args = tuple(A.Var(f"x{i}") for i in range(program.decls[name].arity))
        rule = A.Rule(A.Atom(shown, args), (A.Atom(name, args),))
        dirs = tuple(d for d in program.directives if not (d.kind is A.IOKind.INPUT and d.name == shown))
        return dataclasses.replace(program, rules=(*program.rules, rule), directives=dirs)

    return program.cached(("all_shown", shown), compute)


# Note [One walk per answer]: a paged walk answer (Note [Chains for the
# page]) is two engine runs, its rows, then the chains of the rows shown;
# both need the same walks (impact's up_reach), and the second used to walk
# them again (a third of impact(cpublas::gemm)). The first run now leaves
# its walks in place (the engine's `keep`: DuckDB's temp tables, the
# in-memory engine's relations with the indexes built on them, held in the
# Session), and the second reads each as an input, as a stored relation is
# read (Note [Derived at index time]), when the relations it is computed
# from got the same facts in both runs: a relation is a function of its
# inputs, so its rows are the same. Both runs over, they are dropped.


def _same_walks(library, walks: dict[str, str], before: dict, after: dict) -> dict[str, str]:
    """Those of `walks` (relation -> kept table) whose closure in `library`
    reads no relation given different facts `before` and `after`."""
    from torchtalk.datalog.analysis.strata import needed_relations

    changed = {rel for rel in {*before, *after} if before.get(rel) != after.get(rel)}
    return {rel: t for rel, t in walks.items()
            if not library.cached(("needs", rel), lambda r=rel: frozenset(needed_relations(library, [r]))) & changed}


def _evaluate(b: Bound, program, con, engine, tables, dump, facts, outputs, output, fetch, keep=None, reuse=None):
    """`outputs` of `program` given `facts`, through `query_passes` (presolved
    toward `output`); `keep` receives the walks the run leaves in place,
    `reuse` (relation -> table) are read instead of computed (Note [One
    walk per answer])."""
    from torchtalk.datalog import evaluate
    from torchtalk.datalog.transform.pipeline import Stage, run_pipeline

    passes = query_passes(b, program, con, engine, tables, output, reuse)
    stage = run_pipeline(Stage(program, dict(facts)), passes, dump)
    return evaluate(stage.program, con, outputs=outputs, facts=stage.facts, engine=engine, checked=True,
                    tables=stage.tables, fetch=fetch, keep=keep)


def query_passes(b: Bound, library, con, engine: str, tables: frozenset | None, output: str | None = None,
                 reuse: dict[str, str] | None = None) -> list:
    """A query's passes, in order: prune (Note [Pruning]), stored relations
    read as inputs (Note [Derived at index time]; the embedded engine only,
    Soufflé computes everything), the walks of an earlier run read as inputs
    (`reuse`, Note [One walk per answer]), presolve (Note [Presolve]) toward
    `output` (the query's relation unless given)."""
    from dataclasses import replace

    from torchtalk.query.derived import use_derived

    def pruned(s):
        true = frozenset(rel for rel, rows in s.facts.items()
                         if rows and rel in s.program.decls and s.program.decls[rel].arity == 0)
        return replace(s, program=prune(s.program, frozenset(s.facts), tables, true))

    def stored(s):
        program, found = use_derived(s.program, con, library)
        return replace(s, program=program, tables=found)

    def kept(s):
        from torchtalk.datalog.transform.use_stored import use_stored

        use = frozenset(rel for rel in reuse if s.program.rules_for(rel))
        if not use:
            return s
        program = s.program.cached(("use_kept", use), lambda: use_stored(s.program, use))
        return replace(s, program=program, tables={**s.tables, **{rel: reuse[rel] for rel in use}})

    def presolved(s):
        program, facts = presolve(s.program, con, s.facts, output or b.sig.name, engine, s.tables)
        return replace(s, program=program, facts=facts)

    return [("prune", pruned), *([("use_stored", stored)] if engine in ("duckdb", "memory") else []),
            *([("use_kept", kept)] if reuse else []), ("presolve", presolved)]


def sort_order(sig: Signature) -> tuple[int, ...]:
    """How a query's rows are sorted: by rank, then API tier, then the most
    tests first, then depth (for the columns there are; Notes [Test ranking],
    [API tiers] in rules/ranking.dl), then column by column (Fetch.order:
    `~i` is column i, largest first)."""
    cols = tuple(range(len(sig.columns)))
    lead = tuple(sig.columns.index(c) for c in ("rank", "api") if c in sig.columns)
    most = tuple(~sig.columns.index(c) for c in ("tests",) if c in sig.columns and "api" in sig.columns)
    return (*lead, *most, *(sig.columns.index(c) for c in ("depth",) if c in sig.columns), *cols)


def _notes(b: Bound) -> tuple[str, ...]:
    notes = []
    from extractors.cpp.names import split_sig

    for r in b.resolutions:
        plain = {split_sig(i)[0] for i in r.ids}
        if len(r.ids) > 1 and len(plain) == 1 and plain != set(r.ids):  # Note [Overload ids]: long ids
            notes.append(f"{r.text!r}: the {len(r.ids)} overloads of {plain.pop()} ({r.tier})")
        elif len(r.ids) > 1:
            what = "overloads" if r.packet else "matches"
            notes.append(f"{r.text!r}: {len(r.ids)} {what} ({r.tier}): " + ", ".join(r.ids[:8])
                         + (" ..." if len(r.ids) > 8 else ""))
        elif r.ids and r.ids[0] != r.text:
            notes.append(f"{r.text!r} = {r.ids[0]}" + (" (the public one)" if r.others else ""))
        if r.others:  # Note [Public definitions] in resolve.py: the others it won over
            notes.append(f"{r.text!r} also names {len(r.others)} other(s), given by id to ask for one: "
                         + ", ".join(m.id for m in r.others[:8]) + (" ..." if len(r.others) > 8 else ""))
    return tuple(notes)


# Note [Pruning]: the rule library shares relations between queries (up_seed
# gets a rule from impact, paths and affected), so a query would also compute,
# on empty seeds, everything the other queries' rules need. Before evaluating,
# the rules with a positive body atom over an argument relation this query
# does not fill (another query's `q_arg`, `q_from`, `q_to`, `q_<opt>`) are
# dropped, and so, in turn, are the rules over relations left without rules.
# Such a rule derives nothing, so the answer is the same; fewer relations are
# computed. The pruned program is cached per (library, given relations).
def prune(program, given: frozenset, tables: frozenset | None = None, true: frozenset = frozenset()):
    """`program` without the rules that cannot fire for a query filling
    `given`: an input with no facts is empty when it is another query's
    argument, or (when `tables` is known) has no table in the fact DB; a
    rule negating a nullary input given a row (`true`) cannot fire either."""
    from torchtalk.datalog.transform.prune import prune as prune_empty
    from torchtalk.query.derived import is_argument

    def pruned():
        empty = frozenset(
            n for n in program.inputs
            if n not in given and (is_argument(program, n) or (tables is not None and n not in tables))
        )
        return prune_empty(program, empty, true=true)

    return program.cached(("pruned", given, tables, true), pruned)


# Note [Presolve]: after pruning, some derived relations read only the
# query's arguments and fact tables (`up_seed(s) :- tests_arg(s), func(s, ...)`):
# they are evaluated first, in one engine call, and their rows given as facts.
# One that comes out empty is pruned like an empty argument, with everything
# that needs it: `tests(softmax)` then skips the upward walk its function
# case would need, `paths(kernel -> python)` the downward one. Same answers,
# fewer statements.


def presolve(program, con, facts: dict, output: str, engine: str, tables: dict | None = None):
    """(program, facts) with the argument-level relations evaluated and frozen
    (`tables`: where stored input relations live, see evaluate()); the
    presolved program is the same object for the same query shape, so the
    engine's plan cache (Note [Plan cache]) recognizes it."""
    from torchtalk.datalog import evaluate
    from torchtalk.datalog.transform import presolve as P

    def run(cands):
        return evaluate(program, con, outputs=cands, facts=facts, engine=engine, checked=True, tables=tables)

    return P.presolve(program, facts, output, run,
                      memo=lambda shape, compute: program.cached(("presolved", shape), compute))
