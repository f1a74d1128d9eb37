"""One rule of the in-memory engine (Note [In-memory evaluation] in
memory.py): its body ordered for the sizes at hand (`plan`), then turned
into a Python function of nested loops (`_Source`), compiled once per plan.

Example: `p(x, d + 1) :- q(x, y), e(y, z), z != "a", d = count : { r(z, _) }.`
with q small and y bound after it becomes, in substance,

    for t0 in Q.rows:                       # q(x, y)
        x, y = t0[0], t0[1]
        for t1 in E_by_col0.get(y, ()):     # e(y, z): looked up by y
            z = t1[1]
            if not (z != "a"): continue
            d = count_r(z)                  # memoized per z
            out.add((x, d + 1))
"""

from __future__ import annotations

import bisect
import gc
import re
import threading
from array import array
from collections import Counter, OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from itertools import starmap
from operator import itemgetter

from torchtalk.datalog import ast as A
from torchtalk.datalog.analysis.grounding import injected
from torchtalk.datalog.analysis.grouped import grouped_form
from torchtalk.errors import EngineError


class Unsupported(Exception):
    """The rule uses what this engine does not evaluate (`ord`)."""


class Relation:
    """A relation's rows (a set of tuples) and its hash indexes, built on
    first use: columns -> {key: [rows]} (a one-column key is the value
    itself, a longer one a tuple)."""

    __slots__ = ("rows", "_indexes", "_distinct", "_per_key", "kept")

    def __init__(self, rows: set, kept: bool = False) -> None:
        self.rows = rows
        self.kept = kept  # a Session's table: its indexes are kept too (Note [Frozen tables] in memory.py)
        self._indexes: dict[tuple[int, ...], dict] = {}
        self._distinct: dict[int, int] = {}
        self._per_key: dict[tuple[int, ...], float] = {}

    def distinct(self, col: int) -> int:
        """How many values column `col` holds (for plans; kept once counted)."""
        got = self._distinct.get(col)
        if got is None:
            got = self._distinct[col] = len(set(map(itemgetter(col), self.rows))) or 1  # C's loop
        return got

    def per_key(self, cols: tuple[int, ...]) -> float:
        """The rows a lookup by columns `cols` finds, on average over the
        rows' own keys (Note [Rows per key]; kept once counted)."""
        got = self._per_key.get(cols)
        if got is None:
            ix = self._indexes.get(cols)
            sizes = map(len, ix.values()) if ix is not None else Counter(map(itemgetter(*cols), self.rows)).values()
            got = self._per_key[cols] = max(1.0, sum(b * b for b in sizes) / max(1, len(self.rows)))
        return got

    def know_distinct(self, counts: dict[int, int]) -> None:
        """Take these counts of distinct values per column (Note [Distinct
        counts from DuckDB] in memory.py)."""
        self._distinct.update(counts)

    def index(self, cols: tuple[int, ...]) -> dict:
        got = self._indexes.get(cols)
        if got is None:
            got = self._indexes[cols] = _bucket({}, cols, self.rows)
            if self.kept:
                freeze()
        return got

    def containing(self, col: int, needle: str) -> list:
        """The rows whose column `col` holds `needle` (`contains`): C's
        substring search over one text of the column's values, or, for a
        needle of GRAM characters or more, the rows holding its first GRAM
        characters, found once for every case of them (Note [Text scans])."""
        rows, starts, text, folded, grams = self._text(col)
        if len(needle) < GRAM:
            return [rows[k] for k in _scan(text, starts, needle)]
        gram = needle[:GRAM].translate(FOLD)
        cases = grams.get(gram)
        if cases is None:
            if len(grams) >= GRAMS_KEPT:
                grams.clear()  # one step (another thread may be reading it): they are found again as asked
            cases = grams[gram] = _cases(text, folded, starts, gram)
        got = map(rows.__getitem__, cases.get(needle[:GRAM], ()))
        return list(got) if len(needle) == GRAM else [r for r in got if needle in r[col]]

    def _text(self, col: int) -> tuple:
        got = self._indexes.get(("text", col))
        if got is None:
            rows = list(self.rows)
            starts, at = [], 0
            for r in rows:
                starts.append(at)
                at += len(r[col]) + 1
            text = "\0".join(r[col] for r in rows)
            got = self._indexes[("text", col)] = (rows, starts, text, text.translate(FOLD), {})
            if self.kept:
                freeze()
        return got

    def add(self, rows: set) -> None:
        """Add `rows` (none of them here yet), keeping the indexes built so far."""
        self.rows |= rows
        self._indexes = {cols: got for cols, got in self._indexes.items() if cols[0] != "text"}
        for cols, got in self._indexes.items():
            _bucket(got, cols, rows)


def freeze() -> None:
    """Move what is alive out of the cyclic GC's sight, and collect the
    oldest generation less often (Note [Frozen tables] in memory.py)."""
    gc.freeze()
    t0, t1, t2 = gc.get_threshold()
    if t2 < FULL_EVERY:
        gc.set_threshold(t0, t1, FULL_EVERY)


# collections of the middle generation per full collection (Python's default: 10)
FULL_EVERY = 100


def _scan(text: str, starts: list[int], needle: str) -> list[int]:
    """The indices of the values of `text` (joined by NULs, value k at
    `starts[k]`) holding `needle`, each once."""
    out, i = [], text.find(needle)
    while i >= 0:
        k = bisect.bisect_right(starts, i) - 1
        out.append(k)
        if k + 1 == len(starts):
            break
        i = text.find(needle, starts[k + 1])  # the next value's: one match per value is enough
    return out


def _cases(text: str, folded: str, starts: list[int], gram: str) -> dict[str, array]:
    """The values of `text` (as `_scan`'s) holding `gram` in any case:
    each case found -> the indices of the values holding it."""
    out: dict[str, array] = {}
    i = folded.find(gram)
    while i >= 0:
        k = bisect.bisect_right(starts, i) - 1
        case = text[i:i + len(gram)]
        got = out.get(case)
        if got is None:
            out[case] = array("i", (k,))
        elif got[-1] != k:
            got.append(k)
        i = folded.find(gram, i + 1)
    return out


# Note [Text scans]: `contains(needle, v)` reads the rows of an atom whose
# column holds `needle` (search's probes, Note [Probes] in
# torchtalk/query/like.py). One substring search over the column's values
# joined in one text costs a pass over it (124,598 names, 5 MB: 5 ms), and
# a probe comes in up to 8 case variants, each a pass. So a needle of GRAM
# characters or more is found among the rows holding its first GRAM
# characters as written. Those rows are found for every case at once, by
# one pass over the text with its ASCII letters folded (so offsets stay),
# and kept with the column's text (up to GRAMS_KEPT trigrams, then
# forgotten at once): an index of the column by its trigrams, filled as
# they are asked for. search(softmax) in memory: 59 -> 5 ms once found.
GRAM = 3
GRAMS_KEPT = 4096
# ASCII letters to lower case, nothing else (so a text keeps its length)
FOLD = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _bucket(index: dict, cols: tuple[int, ...], rows) -> dict:
    """`rows` put in `index` by their values at `cols` (one value, or a tuple of them)."""
    key = itemgetter(*cols)
    for r in rows:
        k = key(r)
        bucket = index.get(k)
        if bucket is None:
            index[k] = [r]
        else:
            bucket.append(r)
    return index


@dataclass(frozen=True)
class _Plan:
    slots: tuple[tuple[str, bool], ...]  # (relation, reads the delta) per slot of the function
    run: object  # fn(relations per slot, out set)
    source: str


def run_rule(
    program: A.Program,
    rule: A.Rule,
    env: dict[str, Relation],
    out: set,
    delta: tuple[int, Relation] | None = None,
) -> None:
    """Add the head rows `rule` derives over `env` to `out`; `delta` =
    (body position, rows): that atom reads those rows instead."""
    k = None if delta is None else delta[0]
    grouped = program.cached(
        ("memory-grouped", rule.head.name, _position(program, rule)), lambda: _grouped(rule)
    )
    if grouped is not None and delta is None:
        _run_grouped(grouped, env[grouped.relation], out)
        return

    def size(i: int, lit: A.Atom) -> int:  # a size class: plans are made again past 8x
        rel = delta[1] if i == k else env[lit.name]
        return (len(rel.rows).bit_length() + 2) // 3

    shape = tuple(size(i, lit) for i, lit in enumerate(rule.body) if isinstance(lit, A.Atom))
    plan = program.cached(
        ("memory-plan", rule.head.name, _position(program, rule), k, shape),
        lambda: _shared_plan(rule, k, shape, env, delta),
    )
    rels = [delta[1] if is_delta else env[name] for name, is_delta in plan.slots]
    plan.run(rels, out)


@dataclass(frozen=True)
class _Grouped:
    """A rule of Note [Grouped aggregate] (analysis/grouped.py): one pass over
    `relation`'s rows, grouped by the `keys` columns, folding column `value`
    (None: count); `head(key, aggregate)` is the row it derives."""

    relation: str
    keys: tuple[int, ...]
    value: int | None
    func: A.AggFunc
    head: object


def _grouped(rule: A.Rule) -> _Grouped | None:
    """The rule as a `_Grouped`, or None when it is not of that form."""
    g = grouped_form(rule)
    if g is None:
        return None
    names = {n: i for i, n in enumerate(g.keys)}
    try:
        head = "".join(_head_value(t, names, g.var.name) + ", " for t in rule.head.args)
    except Unsupported:
        return None
    target = g.agg.target
    return _Grouped(g.atom.name, tuple(g.keys.values()), None if target is None else g.local[target.name],
                    g.agg.func, eval(f"lambda k, x: ({head})"))  # noqa: S307 - built from the AST


def _head_value(t: A.Term, names: dict[str, int], var: str) -> str:
    """A head argument of a grouped rule, as Python over (group key `k`, aggregate `x`)."""
    if isinstance(t, A.Var) and t.name in names:
        return f"k[{names[t.name]}]"
    if isinstance(t, A.Var) and t.name == var:
        return "x"
    if isinstance(t, (A.Num, A.Str)):
        return repr(t.value)
    if isinstance(t, A.BinOp) and t.op in _ARITH:
        return f"({_head_value(t.left, names, var)} {_ARITH[t.op]} {_head_value(t.right, names, var)})"
    raise Unsupported(f"head argument {t}")


def _run_grouped(g: _Grouped, rel: Relation, out: set) -> None:
    """Note [Grouped aggregate in C]: the pass runs in C's loops, not
    Python's: the group keys are read by `itemgetter` over the rows, a count
    is a Counter of them, and a min (max) is a dict of (key, value) pairs
    over the rows sorted by value, largest (smallest) first, so each key
    keeps its last, least (greatest) value. down_min of trace(torch.matmul),
    15K rows into 8K groups: 15 -> 5 ms."""
    rows = rel.rows
    if g.func is A.AggFunc.COUNT:
        acc = Counter(_group_keys(g.keys, rows))
    elif g.func is A.AggFunc.SUM:
        acc = {}
        for k, x in zip(_group_keys(g.keys, rows), map(itemgetter(g.value), rows), strict=True):
            acc[k] = acc.get(k, 0) + x
    else:
        value = itemgetter(g.value)
        ordered = sorted(rows, key=value, reverse=g.func is A.AggFunc.MIN)
        acc = dict(zip(_group_keys(g.keys, ordered), map(value, ordered), strict=True))
    out.update(starmap(g.head, acc.items()))


def _group_keys(keys: tuple[int, ...], rows):
    """Each row's values at `keys`, a tuple (one value: a 1-tuple, by zip)."""
    return zip(map(itemgetter(keys[0]), rows)) if len(keys) == 1 else map(itemgetter(*keys), rows)


def _position(program: A.Program, rule: A.Rule) -> int:
    for i, r in enumerate(program.rules_for(rule.head.name)):
        if r is rule:
            return i
    raise EngineError(f"rule not in its program: {rule}")


# Note [Plans by rule]: a plan is kept in its program (the fast path: a few
# dict lookups per rule run), and, keyed by the rule's value, across programs:
# each query shape is a program of its own (pruned, presolved), most of whose
# rules are the library's, unchanged, so a new shape plans only what is new
# Planning a rule (its order's estimates, then Python's compile) took
# impact(at::native::matmul), run after bench/query.py's queries, 56 of its
# 87 ms (52 plans); with the plans shared, compiled code kept by its text,
# the planner's variable needs found once per term and size classes of 8x,
# 6.5 of 37 ms (17 plans).
_PLANS: OrderedDict = OrderedDict()
_PLANS_KEPT = 4096
_PLANS_LOCK = threading.Lock()


def _shared_plan(rule: A.Rule, k: int | None, shape: tuple, env: dict[str, Relation], delta) -> _Plan:
    key = (rule, k, shape)
    with _PLANS_LOCK:
        plan = _PLANS.get(key)
        if plan is not None:
            _PLANS.move_to_end(key)
            return plan
    plan = _compile(rule, env, delta)
    with _PLANS_LOCK:
        _PLANS[key] = plan
        if len(_PLANS) > _PLANS_KEPT:
            _PLANS.popitem(last=False)
    return plan


def _compile(rule: A.Rule, env: dict[str, Relation], delta) -> _Plan:
    src = _Source(rule, env, delta)
    text = src.function()
    patterns = tuple(sorted((name, rx.pattern) for name, rx in src.regexes.items()))
    try:
        run = _function(text, patterns, str(rule.loc))
    except SyntaxError as exc:  # a bug here, not in the rule
        raise EngineError(f"in-memory plan of {rule} does not compile: {exc}") from None
    return _Plan(tuple(src.slots), run, text)


@lru_cache(maxsize=4096)
def _function(text: str, patterns: tuple[tuple[str, str], ...], where: str):
    """The function Python source `text` defines (regexes `patterns` in its
    scope), compiled once: the same plan recurs across query shapes and
    size classes (Note [Plans by rule])."""
    scope = {"_ONE": (0,), "_MISS": object(), "_full": _full, "_div": _div, "_mod": _mod,
             **{name: _regex(p) for name, p in patterns}}
    exec(compile(text, f"<rule {where}>", "exec"), scope)
    return scope["_rule"]


def _div(a: int, b: int) -> int:
    """a / b truncated toward zero, as Soufflé's (C's) and DuckDB's `//`."""
    if b == 0:
        raise Unsupported("division by zero")  # DuckDB's NULL: that engine says what it is
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _mod(a: int, b: int) -> int:
    """a % b with the sign of a, as C's and DuckDB's."""
    return a - b * _div(a, b)


@lru_cache(maxsize=256)
def _regex(pattern: str) -> re.Pattern:
    return re.compile(pattern)


def _full(pattern: str, s: str) -> bool:
    """match(pattern, s): the whole of `s` matches (RE2's and std::regex's
    full match, for the patterns the rules use)."""
    return _regex(pattern).fullmatch(s) is not None


_CMP = {
    A.CmpOp.EQ: "==",
    A.CmpOp.NE: "!=",
    A.CmpOp.LT: "<",
    A.CmpOp.LE: "<=",
    A.CmpOp.GT: ">",
    A.CmpOp.GE: ">=",
}
_ARITH = {A.ArithOp.ADD: "+", A.ArithOp.SUB: "-", A.ArithOp.MUL: "*"}


class _Source:
    """The Python source of one rule's plan."""

    def __init__(self, rule: A.Rule, env: dict[str, Relation], delta) -> None:
        self.rule = rule
        self.env = env
        self.delta = delta
        self.slots: list[tuple[str, bool]] = []
        self.setup: list[str] = []  # slot reads at the top of the function
        self.regexes: dict[str, re.Pattern] = {}
        self.aggs: list[str] = []  # nested functions, one per aggregate
        self.names: dict[str, str] = {}  # Datalog variable -> Python name
        self.counter = 0
        self.needs: dict[int, frozenset[str]] = {}  # id of a term of the rule -> the variables it needs
        self.loops: dict[str, A.Atom] = {}  # a loop's row (`t3`) -> the atom of the rule's body it reads

    def function(self) -> str:
        body = _whole_rows(self.body(self.rule.body, frozenset(), self.delta, self.head_line(), 2))
        lines = ["def _rule(R, out):", *self.setup, *self.aggs, "    for _o in _ONE:", *body]
        return "\n".join(lines) + "\n"

    def head_line(self):
        def emit(bound, depth: int) -> list[str]:
            head = self.rule.head.args
            for t, atom in self.loops.items():  # Note [Rows kept whole]
                if len(atom.args) == len(head) and all(map(_same_value, atom.args, head)):
                    return [" " * (4 * depth) + f"out.add({t})"]
            args = [self.expr(t, bound) for t in head]
            tup = "(" + "".join(a + ", " for a in args) + ")"
            return [" " * (4 * depth) + f"out.add({tup})"]

        return emit

    # -------------------------------------------------------------- planning
    def body(
        self, body: tuple[A.Literal, ...], bound: frozenset, delta, inner, depth: int
    ) -> list[str]:
        """Nested loops over `body` (variables `bound` already), then
        `inner(bound, depth)` at the innermost level."""
        bound = set(bound)
        pending = [i for i, lit in enumerate(body) if not isinstance(lit, A.Atom)]
        atoms = [i for i, lit in enumerate(body) if isinstance(lit, A.Atom)]
        lines: list[str] = []
        if delta is not None and delta[0] in atoms and body is self.rule.body:
            atoms.remove(delta[0])
            depth = self.filters(body, pending, bound, lines, depth)
            depth = self.atom(body[delta[0]], delta[1], True, bound, lines, depth)
        outer = depth == 2 and body is self.rule.body  # nothing placed yet: the loop runs once
        order = self.order(body, atoms, pending, bound, outer)
        done: set[int] = set()
        for pos, best in enumerate(order):
            if best in done:
                continue
            depth = self.filters(body, pending, bound, lines, depth)
            whole = self.hashing(body[best], bound, outer and depth == 2)[0]
            scan = self.text_scan(body, body[best], pending, bound)
            if scan is not None:
                pending.remove(scan[2])
            if not whole and scan is None and pos + 1 < len(order):
                shared = self.two_ways(body[best], body[order[pos + 1]], bound)
                if shared is not None:  # Note [Two ways to one variable]
                    depth = self.both(body[best], body[order[pos + 1]], shared, bound, lines, depth)
                    done.add(order[pos + 1])
                    continue
            depth = self.atom(
                body[best], self.env[body[best].name], False, bound, lines, depth, scan, whole
            )
        depth = self.filters(body, pending, bound, lines, depth)
        if pending:
            raise EngineError(f"cannot order the body of {self.rule} ({self.rule.loc})")
        return lines + inner(frozenset(bound), depth)

    def order(self, body, atoms: list[int], pending: list[int], bound: set, outer: bool = False) -> list[int]:
        """The order of `atoms` with the fewest rows visited, and hashed
        into indexes, by the estimates below (over every order of up to 10
        atoms: a left-deep join order by dynamic programming over the sets
        placed)."""
        if len(atoms) > 10:
            return atoms  # as written
        start = (0.0, 1.0, (), frozenset(self.closure(body, pending, bound)))
        best = {frozenset(): start}
        seen: dict = {}  # (atom, variables bound, first): its estimates, the same whichever atoms bound them
        for _ in atoms:
            nxt: dict = {}
            for placed, (cost, card, seq, have) in best.items():
                for i in atoms:
                    if i in placed:
                        continue
                    first = outer and not placed
                    got = seen.get((i, have, first))
                    if got is None:
                        got = seen[(i, have, first)] = (self.step(body, body[i], pending, have),
                                                         self.hashing(body[i], have, first))
                    (fetched, kept, have2), (whole, built) = got
                    c2 = card * kept
                    key = placed | {i}
                    if whole:
                        fetched = len(self.env[body[i].name].rows)
                    entry = (cost + card + card * fetched + built, c2, (*seq, i), have2)
                    if key not in nxt or entry[0] < nxt[key][0]:
                        nxt[key] = entry
            best = nxt
        return list(best[frozenset(atoms)][2]) if atoms else []

    def step(
        self, body, atom: A.Atom, pending: list[int], have: frozenset
    ) -> tuple[float, float, frozenset]:
        """(rows of `atom` visited per binding of `have`, those kept by the
        filters it makes ready, the variables bound then)."""
        rel = self.env[atom.name]
        n = len(rel.rows)
        cols = self.key_cols(atom, have)
        if not cols and self.text_scan(body, atom, pending, have) is not None:
            cols, n = (
                [],
                max(1.0, n * _SELECTIVITY[A.Builtin] ** 2),
            )  # found by its text, not scanned
        if len(cols) == len(atom.args):  # a membership test (Note [Probed from elsewhere])
            rows = min(1.0, n / max(1.0, _prod(max(rel.distinct(j), self.domain(body, atom, j)) for j in cols)))
        elif not cols:
            rows = float(n)
        elif not rel.kept:  # Note [Rows per key]
            rows = rel.per_key(tuple(cols))
        else:
            rows = max(n / _prod(rel.distinct(j) for j in cols), 1.0)
        after = self.closure(
            body, pending, have | {a.name for a in atom.args if isinstance(a, A.Var)}
        )
        kept = rows
        for i in pending:
            lit = body[i]
            if self.ready_lit(lit, after) and not self.ready_lit(lit, have):
                kept *= _SELECTIVITY.get(type(lit), 0.5)
        return rows, kept, after

    def domain(self, body, atom: A.Atom, j: int) -> int:
        """The most distinct values any other positive atom of `body` holds
        where it has the variable of `atom`'s column j (1 if none has)."""
        var = atom.args[j]
        if not isinstance(var, A.Var):
            return 1
        most = 1
        for lit in body:
            if isinstance(lit, A.Atom) and lit is not atom:
                for k, arg in enumerate(lit.args):
                    if isinstance(arg, A.Var) and arg.name == var.name:
                        most = max(most, self.env[lit.name].distinct(k))
        return most

    def hashing(self, atom: A.Atom, have, first: bool) -> tuple[bool, float]:
        """How `atom`, read after `have`, pays for the index of its bound
        columns (Note [Index builds in a plan]): (read whole, its bound
        columns tested, instead: a relation the run derived, read `first`,
        its loop running once; the rows hashed to build the index). A
        Session's table keeps its indexes; a full key is looked up in the
        row set; no bound column, no index (a scan, or a text scan)."""
        rel = self.env[atom.name]
        cols = self.key_cols(atom, have)
        if rel.kept or not cols or len(cols) == len(atom.args):
            return False, 0.0
        if first:
            return True, 0.0
        n = len(rel.rows)
        return False, n + NEW_KEY * min(n, _prod(rel.distinct(j) for j in cols))

    def closure(self, body, pending: list[int], bound) -> frozenset:
        """`bound` and the variables the equalities ready then bind."""
        bound = set(bound)
        grew = True
        while grew:
            grew = False
            for i in pending:
                lit = body[i]
                if isinstance(lit, A.Comparison) and lit.op is A.CmpOp.EQ:
                    for var, other in ((lit.left, lit.right), (lit.right, lit.left)):
                        if (
                            isinstance(var, A.Var)
                            and var.name not in bound
                            and self.ready(other, bound)
                        ):
                            bound.add(var.name)
                            grew = True
        return frozenset(bound)

    def ready_lit(self, lit, bound) -> bool:
        if isinstance(lit, A.Negation):
            t = lit.target
            terms = t.args if isinstance(t, A.Atom) else (t.left, t.right)
        else:
            terms = (lit.left, lit.right)
        return all(isinstance(a, A.Wildcard) or self.ready(a, bound) for a in terms)

    def key_cols(self, atom: A.Atom, bound: set) -> list[int]:
        return [
            j
            for j, a in enumerate(atom.args)
            if not isinstance(a, A.Wildcard) and self.ready(a, bound)
        ]

    def ready(self, term: A.Term, bound) -> bool:
        """`term` can be computed from the variables `bound` (grounding's
        `computable`, its needs found once per term: the planner asks often)."""
        needs = self.needs.get(id(term))
        if needs is None:
            _no_ord(term)
            aggs = [injected(agg, self.rule) for agg in A.term_aggregates(term)]
            needs = self.needs[id(term)] = frozenset(v.name for v in A.term_vars(term)).union(*aggs)
        return needs <= bound

    def filters(self, body, pending: list[int], bound: set, lines: list[str], depth: int) -> int:
        """Emit every pending literal whose variables are bound (an equality
        with one side an unbound variable binds it), until none is."""
        progress = True
        while progress:
            progress = False
            for i in list(pending):
                done = self.literal(body[i], bound, lines, depth)
                if done:
                    pending.remove(i)
                    progress = True
        return depth

    # -------------------------------------------------------------- literals
    def literal(self, lit: A.Literal, bound: set, lines: list[str], depth: int) -> bool:
        pad = " " * (4 * depth)
        if isinstance(lit, A.Comparison):
            for var, other in ((lit.left, lit.right), (lit.right, lit.left)):
                if (
                    lit.op is A.CmpOp.EQ
                    and isinstance(var, A.Var)
                    and var.name not in bound
                    and self.ready(other, bound)
                ):
                    name = self.local(var.name)
                    lines.append(f"{pad}{name} = {self.expr(other, bound)}")
                    if any(
                        a.func in (A.AggFunc.MIN, A.AggFunc.MAX) for a in A.term_aggregates(other)
                    ):
                        lines.append(
                            f"{pad}if {name} is None: continue"
                        )  # min/max of nothing: no binding
                    bound.add(var.name)
                    return True
            if not (self.ready(lit.left, bound) and self.ready(lit.right, bound)):
                return False
            lines.append(
                f"{pad}if not ({self.expr(lit.left, bound)} {_CMP[lit.op]} {self.expr(lit.right, bound)}): continue"
            )
            return True
        if isinstance(lit, A.Builtin):
            if not (self.ready(lit.left, bound) and self.ready(lit.right, bound)):
                return False
            lines.append(f"{pad}if not {self.builtin(lit, bound)}: continue")
            return True
        target = lit.target
        if isinstance(target, A.Builtin):
            if not (self.ready(target.left, bound) and self.ready(target.right, bound)):
                return False
            lines.append(f"{pad}if {self.builtin(target, bound)}: continue")
            return True
        if not all(isinstance(a, A.Wildcard) or self.ready(a, bound) for a in target.args):
            return False
        lines.append(f"{pad}if {self.member(target, bound)}: continue")
        return True

    def member(self, atom: A.Atom, bound) -> str:
        """A Python test: some row of `atom`'s relation matches its bound arguments."""
        cols = [j for j, a in enumerate(atom.args) if not isinstance(a, A.Wildcard)]
        if len(cols) == len(atom.args):
            s = self.slot(atom.name, False, "rows")
            return f"{self.tuple([self.expr(a, bound) for a in atom.args])} in {s}"
        if not cols:
            return f"bool({self.slot(atom.name, False, 'rows')})"
        s = self.slot(atom.name, False, tuple(cols))
        return f"{self.key([self.expr(atom.args[j], bound) for j in cols])} in {s}"

    def text_scan(
        self, body, atom: A.Atom, pending: list[int], bound
    ) -> tuple[int, A.Term, int] | None:
        """(column, needle, literal) when `atom` has no bound column and a
        pending `contains(needle, v)` has its needle bound and `v` one of
        the atom's variables: the atom is read by `Relation.containing`."""
        if self.key_cols(atom, bound):
            return None
        for i in pending:
            lit = body[i]
            if (
                isinstance(lit, A.Builtin)
                and lit.name is A.BuiltinName.CONTAINS
                and isinstance(lit.right, A.Var)
                and lit.right.name not in bound
                and self.ready(lit.left, bound)
            ):
                cols = [
                    j
                    for j, a in enumerate(atom.args)
                    if isinstance(a, A.Var) and a.name == lit.right.name
                ]
                if cols:
                    return cols[0], lit.left, i
        return None

    def atom(
        self,
        atom: A.Atom,
        rel: Relation,
        is_delta: bool,
        bound: set,
        lines: list[str],
        depth: int,
        scan: tuple[int, A.Term, int] | None = None,
        whole: bool = False,
    ) -> int:
        pad = " " * (4 * depth)
        cols = [] if whole else self.key_cols(atom, bound)
        if cols and len(cols) == len(atom.args):
            s = self.slot(atom.name, is_delta, "rows")
            lines.append(
                f"{pad}if {self.tuple([self.expr(a, bound) for a in atom.args])} not in {s}: continue"
            )
            return depth
        t = f"t{self.next()}"
        self.loops[t] = atom
        if scan is not None:
            s = self.slot(atom.name, is_delta, "self")
            lines.append(f"{pad}for {t} in {s}.containing({scan[0]}, {self.expr(scan[1], bound)}):")
        elif cols:
            s = self.slot(atom.name, is_delta, tuple(cols))
            key = self.key([self.expr(atom.args[j], bound) for j in cols])
            lines.append(f"{pad}for {t} in {s}.get({key}, ()):")
        else:
            lines.append(f"{pad}for {t} in {self.slot(atom.name, is_delta, 'rows')}:")
        pad = " " * (4 * (depth + 1))
        for j, a in enumerate(atom.args):
            if j in cols or isinstance(a, A.Wildcard):
                continue
            if isinstance(a, A.Var) and a.name not in bound:
                self.names[a.name] = f"{t}[{j}]"  # read where used: most are used once
                bound.add(a.name)
            else:  # a variable met earlier in this atom, or a term of others bound here
                pending_ok = self.ready(a, bound)
                if not pending_ok:
                    raise Unsupported(f"argument {a} of {atom}")
                lines.append(f"{pad}if {t}[{j}] != {self.expr(a, bound)}: continue")
        return depth + 1

    def two_ways(self, first: A.Atom, then: A.Atom, bound: set) -> list[tuple[str, int, int]] | None:
        """(variable, its column in `first`, in `then`) for each variable
        both bind, when `first` read by its bound columns binds just those
        and `then`, read next, has some column bound and binds nothing else
        (Note [Two ways to one variable]); else None."""
        out = []
        for atom in (first, then):
            cols = self.key_cols(atom, bound)
            if not cols or len(cols) == len(atom.args):
                return None
            new = [(a.name, j) for j, a in enumerate(atom.args)
                   if j not in cols and not isinstance(a, A.Wildcard)]
            if not all(isinstance(atom.args[j], A.Var) for _, j in new) or len({n for n, _ in new}) < len(new):
                return None
            out.append(dict(new))
        if not out[0] or out[0].keys() != out[1].keys():
            return None
        if any(isinstance(a, A.Wildcard) for a in first.args) and not self.env[first.name].kept:
            return None  # testing a row of `first` would need an index of it, built whether used or not
        return [(n, j, out[1][n]) for n, j in out[0].items()]

    def both(self, first: A.Atom, then: A.Atom, shared: list[tuple[str, int, int]], bound: set,
             lines: list[str], depth: int) -> int:
        """The values of the variables `shared` (two_ways) that both
        `first` and `then` hold at the bound columns, read from whichever
        of the two has fewer rows there (Note [Two ways to one variable])."""
        pad = " " * (4 * depth)
        n = self.next()
        got, t = f"_a{n}", f"t{n}"

        def lookup(atom: A.Atom) -> tuple[tuple[int, ...], str]:
            cols = self.key_cols(atom, bound)
            return tuple(cols), self.key([self.expr(atom.args[j], bound) for j in cols])

        def found(col: int) -> str:  # the shared values of row `_r`, their columns at `col` of `shared`
            cols = [share[col] for share in shared]
            return f"_r[{cols[0]}]" if len(cols) == 1 else self.tuple([f"_r[{j}]" for j in cols])

        def holds(atom: A.Atom, col: int) -> str:  # `atom` has a row of row `_r`'s shared values (`col`)
            for share in shared:
                self.names[share[0]] = f"_r[{share[col]}]"
            return self.member(atom, bound | {share[0] for share in shared})

        cols_a, key_a = lookup(first)
        cols_b, key_b = lookup(then)
        rows_a = self.slot(first.name, False, cols_a)
        rel_b = self.slot(then.name, False, "self")
        other = f"_b{n}"
        from_b = f"[{found(2)} for _r in {other} if {holds(first, 2)}]"
        from_a = f"[{found(1)} for _r in {got} if {holds(then, 1)}]"
        lines.append(f"{pad}{got} = {rows_a}.get({key_a}, ())")
        lines.append(f"{pad}if len({got}) > {TWO_WAYS_AT} and len({other} := {rel_b}.index({cols_b!r}).get({key_b}, ())) < len({got}):")
        lines.append(f"{pad}    {got} = {from_b}")
        lines.append(f"{pad}else:")
        lines.append(f"{pad}    {got} = {from_a}")
        lines.append(f"{pad}for {t} in {got}:")
        for i, (name, *_) in enumerate(shared):
            self.names[name] = t if len(shared) == 1 else f"{t}[{i}]"
            bound.add(name)
        return depth + 1

    def slot(self, name: str, is_delta: bool, how) -> str:
        """A local of the function holding relation `name`'s rows ("rows")
        or its index by the columns `how`."""
        i = len(self.slots)
        self.slots.append((name, is_delta))
        s = f"s{i}"
        read = (
            {"rows": ".rows", "self": ""}.get(how, f".index({how!r})")
            if isinstance(how, str)
            else f".index({how!r})"
        )
        self.setup.append(f"    {s} = R[{i}]{read}")
        return s

    # -------------------------------------------------------------- terms
    def expr(self, term: A.Term, bound) -> str:
        if isinstance(term, A.Var):
            if term.name not in bound:
                raise EngineError(f"variable '{term.name}' is not grounded ({term.loc})")
            return self.var(term.name)
        if isinstance(term, (A.Str, A.Num)):
            return repr(term.value)
        if isinstance(term, A.Neg):
            return f"(-{self.expr(term.operand, bound)})"
        if isinstance(term, A.BinOp):
            left, right = self.expr(term.left, bound), self.expr(term.right, bound)
            if term.op in _ARITH:
                return f"({left} {_ARITH[term.op]} {right})"
            return f"{'_div' if term.op is A.ArithOp.DIV else '_mod'}({left}, {right})"
        if isinstance(term, A.Functor) and term.name is A.FunctorName.AS:
            return self.expr(term.args[0], bound)
        if isinstance(term, A.Aggregate):
            return self.aggregate(term, bound)
        raise Unsupported(f"term {term}")

    def builtin(self, lit: A.Builtin, bound) -> str:
        right = self.expr(lit.right, bound)
        if lit.name is A.BuiltinName.CONTAINS:
            return f"({self.expr(lit.left, bound)} in {right})"
        if isinstance(lit.left, A.Str):
            name = f"_rx{len(self.regexes)}"
            self.regexes[name] = _regex(lit.left.value)
            return f"({name}.fullmatch({right}) is not None)"
        return f"_full({self.expr(lit.left, bound)}, {right})"

    def aggregate(self, agg: A.Aggregate, bound) -> str:
        """A call of a nested function computing `agg` for the values of the
        variables it shares with the rule (memoized per those values)."""
        shared = sorted(injected(agg, self.rule) & set(bound))
        k = self.next()
        outer = [self.var(v) for v in shared]
        saved, loops = dict(self.names), self.loops
        self.loops = {}  # an aggregate's rows are its function's, not the rule's
        args = [f"a{k}_{i}" for i in range(len(shared))]
        self.names.update(zip(shared, args, strict=True))
        init = "0" if agg.func in (A.AggFunc.COUNT, A.AggFunc.SUM) else "None"

        def fold(inner_bound, depth: int) -> list[str]:
            pad = " " * (4 * depth)
            if agg.func is A.AggFunc.COUNT:
                return [f"{pad}acc += 1"]
            x = self.expr(agg.target, inner_bound)
            if agg.func is A.AggFunc.SUM:
                return [f"{pad}acc += {x}"]
            op = "<" if agg.func is A.AggFunc.MIN else ">"
            return [f"{pad}_x = {x}", f"{pad}if acc is None or _x {op} acc: acc = _x"]

        body = self.body(agg.body, frozenset(shared), None, fold, 3)
        key = self.tuple(args)
        self.aggs += [
            f"    _memo{k} = {{}}",
            f"    def _agg{k}({', '.join(args)}):",
            f"        got = _memo{k}.get({key}, _MISS)",
            "        if got is not _MISS: return got",
            f"        acc = {init}",
            "        for _o in _ONE:",
            *body,
            f"        _memo{k}[{key}] = acc",
            "        return acc",
        ]
        self.names, self.loops = saved, loops
        return f"_agg{k}({', '.join(outer)})"

    def var(self, name: str) -> str:
        """The Python expression of bound variable `name` (a local, or the
        column of the row an atom binds it from)."""
        return self.names[name]

    def local(self, name: str) -> str:
        """A new local for variable `name`, bound by an assignment."""
        got = self.names[name] = f"v{self.next()}"
        return got

    def next(self) -> int:
        self.counter += 1
        return self.counter

    @staticmethod
    def tuple(items: list[str]) -> str:
        return "(" + "".join(i + ", " for i in items) + ")"

    @staticmethod
    def key(items: list[str]) -> str:
        return items[0] if len(items) == 1 else "(" + ", ".join(items) + ")"


# Note [Rows kept whole]: a rule whose head is one of its body atoms as
# written (`op_test_ranked(o, t, p, w, h, v, f, l) :- test_need(o),
# op_test_rank(o, t, p, w, h, v, f, l).`: the stored rows of the ops a
# query needs) derives each row that atom reads, as it is: every column
# of the row holds the head's value there (a variable bound before it is
# its lookup key or tested equal, a constant is its key). So the row
# itself is added, not a tuple built of its columns, and when nothing
# filters it in its loop, the loop is `set.update` in C:
# affected(cpublas::gemm)'s op_test_ranked, 10,328 rows: 6.0 -> 2.5 ms.
def _same_value(arg: A.Term, head: A.Term) -> bool:
    """A row's column for body argument `arg` holds what head argument `head` is."""
    if isinstance(arg, A.Var) and isinstance(head, A.Var):
        return arg.name == head.name
    return isinstance(arg, (A.Str, A.Num)) and type(head) is type(arg) and head.value == arg.value


_ADD_ROW = re.compile(r"( *)out\.add\((t\d+)\)")
_LOOP = re.compile(r"( *)for (t\d+) in (.*):")


def _whole_rows(lines: list[str]) -> list[str]:
    """`lines` with an innermost loop that adds each row it reads, unfiltered, as one update (Note [Rows kept whole])."""
    if len(lines) < 2:
        return lines
    add, loop = _ADD_ROW.fullmatch(lines[-1]), _LOOP.fullmatch(lines[-2])
    if add and loop and add[2] == loop[2] and len(add[1]) == len(loop[1]) + 4:
        return [*lines[:-2], f"{loop[1]}out.update({loop[3]})"]
    return lines


# Note [Two ways to one variable]: a rule's plan reads its atoms in one
# order, by estimates that take a relation's rows as spread evenly over
# its keys. They are not: down_chain_at's step back (chains.dl) reads the
# callers of a chain's node j on device n (`step_dev(k, j, n, _)`, 0.8 rows
# by the estimate) and keeps those at distance d - 1 (`down_min(i, u, v,
# k, e)`); but the nodes on chains toward kernels are the called ones
# (gpu_kernel has hundreds of callers), and paths(torch.softmax -> cuda)
# read 48,764 callers for 123 rows, where the nodes at that distance were
# 8,313. When two atoms read next to each other each bind the same
# variables and nothing more (`two_ways`), the values both hold are read,
# for each binding before them, from whichever has fewer rows at its bound
# columns, and tested in the other: the first atom's when it has at most
# TWO_WAYS_AT (the second's index, a relation the run derived, is then
# never built), else the smaller.
TWO_WAYS_AT = 8

# How many of the rows a literal keeps, for plans (`_Source.step`).
_SELECTIVITY = {A.Comparison: 0.3, A.Builtin: 0.1, A.Negation: 0.5}

# Note [Probed from elsewhere]: a membership test, an atom whose every
# column is bound when it is read (`up_dag_at(i, v, k)` after up_min and
# step_at bound i, v and k), keeps a probe with the chance that its key is
# among the relation's rows. Taking the key's values to be those the
# relation holds (n / the distinct values of its columns) said 1 for a
# relation of 27 rows probed with 1,234 nodes, and the plan of chains.dl's
# up_dag read every reached node's steps (61,000 for impact(cpublas::gemm))
# before the test that keeps 27 nodes. A column's values now count as the
# most distinct values any other atom of the body holds for its variable,
# if more: where the probes come from, the plan does not yet know, so the
# test is taken as selective as the largest source could make it.
# Note [Rows per key]: a lookup by some columns of a relation the run
# derived is taken to find the rows per key its own keys see on average
# (the sum of its buckets' squares over its rows), not its rows over its
# distinct keys: a walk's rows are far from even (down_min of
# kernels(interpolate): 3,353 rows, mostly one seed's and one device's),
# and chains.dl's down_chain_at read every node a seed reached, on the
# even estimate of 26 per (seed, from, device), for each of 73 needed
# nodes (5 ms), where looking each up by its number reads one. Counted
# once per relation (a pass over its rows, or its index if built), as
# `distinct` is; a Session's table, whose counts DuckDB gives (Note
# [Distinct counts from DuckDB] in memory.py), keeps the even estimate.
# Note [Index builds in a plan]: hashing a row into an index costs about a
# row visited, and a key met first (a new bucket) three more
NEW_KEY = 3.0

# Note [Index builds in a plan]: an atom read by some of its columns is
# looked up in a hash index of its relation on them, built on first use.
# A Session's table keeps its indexes for every later query, but a relation
# the run derives gets them anew each run, at about the cost of visiting
# each of its rows. Counting only the rows visited, the planner read
# affected(cpublas::gemm)'s 85,930 test rows by the 12 rows of test_why:
# 86K rows hashed (20 ms) for 12 lookups, where scanning them and looking
# test_why up costs half. So a plan also counts, once, the rows of each
# derived relation it indexes, and their keys (a new bucket costs more).


def _prod(xs) -> float:
    out = 1.0
    for x in xs:
        out *= x
    return out


def _no_ord(term: A.Term) -> None:
    if isinstance(term, A.Functor) and term.name is A.FunctorName.ORD:
        raise Unsupported("ord")
    for sub in A.subterms(term):
        _no_ord(sub)
