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

from dataclasses import dataclass, field

from torchtalk.errors import InputError, QueryError, SrcLoc, did_you_mean
from torchtalk.query.dsl import QUERY_FILE, Query, Value
from torchtalk.query.library import NAMESPACE_OF, Param, Signature, signature
from torchtalk.query.resolve import Ambiguous, Resolution, Resolver

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

    def records(self) -> list[dict]:
        """One dict per row keyed by column name (the `--json` form)."""
        return [dict(zip(self.columns, r, strict=True)) for r in self.rows]


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
        facts[sig.arg.relation] = [(i,) for v in q.args for i in resolve(v, sig.arg.column)]
        _bind_like(program, sig, facts)
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


def _bind_like(program, sig: Signature, facts) -> None:
    """Fill `q_like` / `q_like_probe` from the text arguments (Note [Text arguments]
    in torchtalk/query/like.py), when the query declares them."""
    from torchtalk.query.like import like, probes

    texts = [t for (t,) in facts[sig.arg.relation] if isinstance(t, str)]
    if f"{sig.name}_like" in program.inputs:
        facts[f"{sig.name}_like"] = [(t, *like(t)) for t in texts]
    if f"{sig.name}_like_probe" in program.inputs:
        facts[f"{sig.name}_like_probe"] = [(t, role, p) for t in texts for role, p in probes(t)]


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
                   tables: frozenset | None = None, limit: int | None = None):
    """The rows of the bound relation, filtered, in `sort_order`, at most
    `limit` of them: a `Page` (its `total` counts them all); `tables` = the
    fact DB's table names (for Note [Pruning])."""
    from torchtalk.datalog import evaluate
    from torchtalk.datalog.engines import Fetch, Page
    from torchtalk.query.derived import use_derived

    library = program
    program = prune(program, frozenset(b.facts), tables)
    stored: dict[str, str] = {}
    if engine == "duckdb":  # Note [Derived at index time]; Soufflé computes everything
        program, stored = use_derived(program, con, library)
    program, facts = presolve(program, con, b.facts, b.sig.name, engine, stored)
    spec = Fetch(sort_order(b.sig), b.filters, limit)
    out = evaluate(program, con, outputs=[b.sig.name], facts=facts, engine=engine, checked=True,
                   tables=stored, fetch={b.sig.name: spec})
    return out.get(b.sig.name, Page([]))


def sort_order(sig: Signature) -> tuple[int, ...]:
    """How a query's rows are sorted: by depth (when there is one), then
    column by column."""
    cols = tuple(range(len(sig.columns)))
    return (sig.columns.index("depth"), *cols) if "depth" in sig.columns else cols


def _notes(b: Bound) -> tuple[str, ...]:
    notes = []
    for r in b.resolutions:
        if len(r.ids) > 1:
            what = "overloads" if r.packet else "matches"
            notes.append(f"{r.text!r}: {len(r.ids)} {what} ({r.tier}): " + ", ".join(r.ids[:8])
                         + (" ..." if len(r.ids) > 8 else ""))
        elif r.ids and r.ids[0] != r.text:
            notes.append(f"{r.text!r} = {r.ids[0]}")
    return tuple(notes)


# Note [Pruning]: the rule library shares relations between queries (up_seed
# gets a rule from impact, paths and affected), so a query would also compute,
# on empty seeds, everything the other queries' rules need. Before evaluating,
# the rules with a positive body atom over an argument relation this query
# does not fill (another query's `q_arg`, `q_from`, `q_to`, `q_<opt>`) are
# dropped, and so, in turn, are the rules over relations left without rules.
# Such a rule derives nothing, so the answer is the same; fewer relations are
# computed. The pruned program is cached per (library, given relations).
_PRUNED: dict = {}  # per (program, given, tables), torchtalk/connmemo.py's per_object


def prune(program, given: frozenset, tables: frozenset | None = None):
    """`program` without the rules that cannot fire for a query filling
    `given`: an input with no facts is empty when it is another query's
    argument, or (when `tables` is known) has no table in the fact DB."""
    from torchtalk.connmemo import per_object

    def pruned():
        inputs = frozenset(program.inputs)
        empty = frozenset(
            n for n in inputs
            if n not in given and (_is_argument(program, n) or (tables is not None and n not in tables))
        )
        return _live_rules(program, program.rules, inputs, empty)

    return per_object(_PRUNED, program, (given, tables), pruned)


def _is_argument(program, rel: str) -> bool:
    """`rel` is a seed or option input of some named query (Note [Named queries])."""
    for suffix in ("_arg", "_from", "_to", "_like", "_like_probe"):
        if rel.endswith(suffix) and rel[: -len(suffix)] in program.decls:
            return True
    head, _, opt = rel.rpartition("_")
    while head:
        if head in program.decls and f"{rel}_default" in program.decls:
            return True
        head, _, _ = head.rpartition("_")
    return False


# Note [Presolve]: after pruning, some derived relations read only the
# query's arguments and fact tables (`up_seed(s) :- tests_arg(s), func(s, ...)`):
# they are evaluated first, in one engine call, and their rows given as facts.
# One that comes out empty is pruned like an empty argument, with everything
# that needs it: `tests(softmax)` then skips the upward walk its function
# case would need, `paths(kernel -> python)` the downward one. Same answers,
# fewer statements.


def presolve(program, con, facts: dict, output: str, engine: str, tables: dict | None = None):
    """(program, facts) with the argument-level relations evaluated and frozen
    (`tables`: where stored input relations live, see evaluate())."""
    from torchtalk.connmemo import per_object
    from torchtalk.datalog import evaluate
    from torchtalk.datalog.analysis.strata import needed_relations

    needed = needed_relations(program, [output])
    cands = [rel for rel in needed if rel != output and _argument_level(program, rel, facts)]
    if not cands:
        return program, facts
    rows = _copies(program, cands, facts)
    if rows is None:
        rows = evaluate(program, con, outputs=cands, facts=facts, engine=engine, checked=True, tables=tables)
    full = {rel: rs for rel in cands if (rs := rows.get(rel, []))}

    def frozen():
        kept = [r for r in program.rules if r.head.name not in cands]
        sources = frozenset(program.inputs) | frozenset(facts) | frozenset(full)
        return _live_rules(program, kept, sources, frozenset())

    shape = (frozenset(cands), frozenset(full), frozenset(facts))
    return per_object(_PRESOLVED, program, shape, frozen), {**facts, **full}


# presolved programs by (program, frozen relations, non-empty ones, given
# relations): the same program object for the same query shape, so the
# engine's plan cache (Note [Plan cache]) can recognize it
_PRESOLVED: dict = {}


def _copies(program, cands: list[str], facts: dict) -> dict[str, list[tuple]] | None:
    """The rows of `cands` when each of their rules copies given facts
    (`up_limit(d) :- impact_depth(d).`, `entry_need(o) :- trace_arg(o).`),
    computed here rather than by an engine call; None if some rule does more."""
    from torchtalk.datalog import ast as A

    out: dict[str, list[tuple]] = {}
    for rel in cands:
        rows: set[tuple] = set()
        for rule in program.rules_for(rel):
            if len(rule.body) != 1 or not isinstance(rule.body[0], A.Atom) or rule.body[0].name not in facts:
                return None
            atom = rule.body[0]
            if not all(isinstance(t, (A.Var, A.Wildcard, A.Str, A.Num)) for t in atom.args) or not all(
                    isinstance(t, (A.Var, A.Str, A.Num)) for t in rule.head.args):
                return None
            for row in facts[atom.name]:
                env: dict[str, object] = {}
                if all(_match(t, v, env) for t, v in zip(atom.args, row, strict=True)):
                    rows.add(tuple(env[t.name] if isinstance(t, A.Var) else t.value for t in rule.head.args))
        out[rel] = sorted(rows, key=repr)
    return out


def _match(term, value, env: dict) -> bool:
    """Bind or check `term` (a variable, `_` or a constant) against `value`."""
    from torchtalk.datalog import ast as A

    if isinstance(term, A.Var):
        return env.setdefault(term.name, value) == value
    return isinstance(term, A.Wildcard) or term.value == value


def _argument_level(program, rel: str, facts: dict) -> bool:
    """Every rule of derived `rel` reads only given arguments and fact tables."""
    from torchtalk.datalog import ast as A

    rules = program.rules_for(rel)
    if not rules or rel in program.inputs:
        return False
    derived = {r.head.name for r in program.rules}
    reads_args = False
    for rule in rules:
        reads_args |= any(isinstance(lit, A.Atom) and lit.name in facts for lit in rule.body)
        for lit in rule.body:
            target = lit.target if isinstance(lit, A.Negation) else lit
            if isinstance(target, A.Atom):
                if target.name in derived and target.name not in facts:
                    return False
            elif isinstance(target, A.Comparison):
                if any(isinstance(t, A.Aggregate) for t in (target.left, target.right)):
                    return False
            elif not isinstance(target, A.Builtin):
                return False
    return reads_args


def _live_rules(program, rules, sources: frozenset, empty: frozenset):
    """Keep the rules whose positive atoms all read derivable relations: a
    relation is derivable if it is a source (an input not known empty) or the
    head of a rule whose positive atoms are all derivable (a fixpoint, so a
    recursive relation without a base rule is not derivable)."""
    import dataclasses

    from torchtalk.datalog import ast as A

    def positives(rule):
        return [lit.name for lit in rule.body if isinstance(lit, A.Atom)]

    live = set(sources) - set(empty)
    changed = True
    while changed:
        changed = False
        for rule in rules:
            if rule.head.name not in live and all(n in live for n in positives(rule)):
                live.add(rule.head.name)
                changed = True
    keep = tuple(r for r in rules if all(n in live for n in positives(r)))
    return dataclasses.replace(program, rules=keep)
