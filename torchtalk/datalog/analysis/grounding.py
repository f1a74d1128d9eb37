"""Which variables a rule body binds, and how (shared by checks and compile).

A variable is *grounded* by a positive atom of the body, or by an equality
`v = expr` whose other side is computable from grounded variables (this is
how aggregates bind: `n = count : { e(x, _) }`). Inside an aggregate body, a
variable that also occurs outside the aggregate is *injected* (it must be
grounded outside); every other variable is local to the aggregate.

Example:
    >>> g = ground_rule(parse_text('p(x, n) :- e(x, y), n = y + 1.').rules[0])
    >>> [a.var for a in g.assignments], g.ungrounded
    (['n'], ())
"""

from __future__ import annotations

from dataclasses import dataclass

from torchtalk.datalog import ast as A


@dataclass(frozen=True)
class Assignment:
    """`var` takes the value of `expr` (from the equality `lit`)."""

    var: str
    expr: A.Term
    lit: A.Comparison


@dataclass(frozen=True)
class Grounding:
    bound: frozenset[str]  # every variable bound after the body
    assignments: tuple[Assignment, ...]  # in dependency order
    conditions: tuple[A.Comparison, ...]  # comparisons used as filters
    ungrounded: tuple[A.Var, ...]  # first occurrence of each ungrounded variable


def injected(agg: A.Aggregate, rule: A.Rule) -> frozenset[str]:
    """Variables of `agg` that also occur in a scope enclosing `agg`.

    A sibling aggregate is a scope of its own: `v` in `count : { w(n, v) }`
    and in `min v : { w(n, v) }` are two local variables.
    """
    occ = occurrences(rule)
    parents = next((enc[:-1] for _, enc in occ if enc and enc[-1] is agg), None)
    if parents is None:
        parents = _parents_of(agg, rule)
    inside = {v.name for v, enc in occ if any(e is agg for e in enc)}
    visible = {v.name for v, enc in occ
               if len(enc) <= len(parents) and all(a is b for a, b in zip(enc, parents, strict=False))}
    return frozenset(inside & visible)


def _parents_of(agg: A.Aggregate, rule: A.Rule) -> tuple[A.Aggregate, ...]:
    """The aggregates enclosing `agg` (for an aggregate without variables)."""
    found: list[tuple[A.Aggregate, ...]] = []

    def term(t, enc) -> None:
        if t is agg:
            found.append(enc)
        if isinstance(t, A.Aggregate):
            for lit in t.body:
                for sub in A.literal_terms(lit):
                    term(sub, (*enc, t))
            if t.target is not None:
                term(t.target, (*enc, t))
        else:
            for sub in A.subterms(t):
                term(sub, enc)

    for lit in (rule.head, *rule.body):
        for t in A.literal_terms(lit):
            term(t, ())
    return found[0] if found else ()


def ground_rule(rule: A.Rule) -> Grounding:
    """Grounding of a rule's body; the head's variables are checked too."""
    g = ground_body(rule.body, frozenset(), rule)
    extra = [v for t in rule.head.args for v in A.term_vars(t) if v.name not in g.bound]
    extra += [v for t in rule.head.args for agg in A.term_aggregates(t) for v in _agg_missing(agg, g.bound, rule)]
    missing = list(g.ungrounded) + extra
    # `n = count : {...}` blocked by an ungrounded `z` inside: report `z`, not `n` too
    blocked = {
        v.name
        for c in g.conditions
        if c.op is A.CmpOp.EQ
        for v, other in ((c.left, c.right), (c.right, c.left))
        if isinstance(v, A.Var) and not isinstance(other, A.Var)
    }
    root = [v for v in missing if v.name not in blocked]
    return Grounding(g.bound, g.assignments, g.conditions, _first_each(root or missing))


def ground_body(body: tuple[A.Literal, ...], outer: frozenset[str], rule: A.Rule) -> Grounding:
    """Grounding of a body given the variables bound around it (`outer`)."""
    bound = set(outer)
    for lit in body:
        if isinstance(lit, A.Atom):
            bound.update(t.name for t in lit.args if isinstance(t, A.Var))
    assignments: list[Assignment] = []
    pending = [lit for lit in body if isinstance(lit, A.Comparison)]
    progress = True
    while progress:
        progress = False
        for lit in list(pending):
            a = _assignment(lit, bound, rule)
            if a is not None:
                assignments.append(a)
                bound.add(a.var)
                pending.remove(lit)
                progress = True
    missing = _missing(body, bound, pending, rule)
    return Grounding(frozenset(bound), tuple(assignments), tuple(pending), _first_each(missing))


def computable(term: A.Term, bound: set[str] | frozenset[str], rule: A.Rule) -> bool:
    """True when every variable `term` needs is bound."""
    if any(v.name not in bound for v in A.term_vars(term)):
        return False
    return all(injected(agg, rule) <= bound for agg in A.term_aggregates(term))


def _assignment(lit: A.Comparison, bound: set[str], rule: A.Rule) -> Assignment | None:
    if lit.op is not A.CmpOp.EQ:
        return None
    for var, other in ((lit.left, lit.right), (lit.right, lit.left)):
        if isinstance(var, A.Var) and var.name not in bound and computable(other, bound, rule):
            if not isinstance(other, A.Wildcard):
                return Assignment(var.name, other, lit)
    return None


def _missing(body, bound: set[str], pending, rule: A.Rule) -> list[A.Var]:
    """Variables used where they must already be bound, but are not."""
    out: list[A.Var] = []
    for lit in body:
        terms: tuple = ()
        if isinstance(lit, A.Atom):
            terms = tuple(t for t in lit.args if not isinstance(t, A.Var))
        elif isinstance(lit, A.Negation):
            target = lit.target
            terms = target.args if isinstance(target, A.Atom) else (target.left, target.right)
        elif isinstance(lit, A.Builtin):
            terms = (lit.left, lit.right)
        elif lit in pending:
            terms = (lit.left, lit.right)
        for t in terms:
            out += [v for v in A.term_vars(t) if v.name not in bound]
            for agg in A.term_aggregates(t):
                out += _agg_missing(agg, bound, rule)
    for a in (x for x in body if isinstance(x, A.Comparison) and x not in pending):
        for t in (a.left, a.right):
            for agg in A.term_aggregates(t):
                out += _agg_missing(agg, bound, rule)
    return out


def _agg_missing(agg: A.Aggregate, bound, rule: A.Rule) -> list[A.Var]:
    """Ungrounded variables of an aggregate (injected ones unbound outside, or local ones)."""
    inj = injected(agg, rule)
    inner = ground_body(agg.body, frozenset(inj & set(bound)), rule)
    out = list(inner.ungrounded)
    if agg.target is not None:
        out += [v for v in A.term_vars(agg.target) if v.name not in inner.bound]
    return out


def occurrences(rule: A.Rule) -> list[tuple[A.Var, tuple[A.Aggregate, ...]]]:
    """Every occurrence of a named variable in `rule` (head, body, aggregate
    bodies), in source order, with the aggregates enclosing it."""
    out: list[tuple[A.Var, tuple[A.Aggregate, ...]]] = []

    def term(t, enc) -> None:
        if isinstance(t, A.Var):
            out.append((t, enc))
        elif isinstance(t, A.Aggregate):
            inner = (*enc, t)
            if t.target is not None:
                term(t.target, inner)
            for lit in t.body:
                literal(lit, inner)
        else:
            for sub in A.subterms(t):
                term(sub, enc)

    def literal(lit, enc) -> None:
        if isinstance(lit, A.Atom):
            for a in lit.args:
                term(a, enc)
        elif isinstance(lit, A.Negation):
            literal(lit.target, enc)
        else:
            term(lit.left, enc)
            term(lit.right, enc)

    literal(rule.head, ())
    for lit in rule.body:
        literal(lit, ())
    return out


def _first_each(vars_: list[A.Var]) -> tuple[A.Var, ...]:
    seen: dict[str, A.Var] = {}
    for v in vars_:
        seen.setdefault(v.name, v)
    return tuple(seen.values())
