"""Note [Grouped aggregate]: a rule `m(s, c, d) :- r(s, c, _), d = min x : { r(s, c, x) }.`
aggregates, for each binding of its atom, the rows of the same relation
with the same values in the same places: one pass over the relation,
grouped by those columns, computes it (a GROUP BY in SQL, compile.py; a
dict in the in-memory engine, engines/memrule.py), not an aggregate per row.

Example:
    >>> g = grouped_form(parse_text('.decl r(a: number, b: number)\\n.decl m(a: number, b: number)\\n'
    ...                             'm(a, v) :- r(a, _), v = min x : { r(a, x) }.').rules[0])
    >>> g.keys, g.local, g.var.name
    ({'a': 0}, {'x': 1}, 'v')
"""

from __future__ import annotations

from dataclasses import dataclass

from torchtalk.datalog import ast as A


@dataclass(frozen=True)
class GroupedForm:
    atom: A.Atom  # the body's atom (the aggregate reads the same relation)
    var: A.Var  # the variable the aggregate binds
    agg: A.Aggregate
    keys: dict[str, int]  # the atom's variables, at the same places inside the aggregate -> column
    local: dict[str, int]  # the aggregate's own variables -> column


def grouped_form(rule: A.Rule) -> GroupedForm | None:
    """The rule's parts when it is of the grouped form above, else None."""
    atoms = [lit for lit in rule.body if isinstance(lit, A.Atom)]
    eqs = [lit for lit in rule.body if isinstance(lit, A.Comparison) and lit.op is A.CmpOp.EQ]
    if len(atoms) != 1 or len(eqs) != 1 or len(rule.body) != 2:
        return None
    atom, eq = atoms[0], eqs[0]
    var, agg = (eq.left, eq.right) if isinstance(eq.right, A.Aggregate) else (eq.right, eq.left)
    if not isinstance(var, A.Var) or not isinstance(agg, A.Aggregate) or len(agg.body) != 1:
        return None
    inner = agg.body[0]
    if not isinstance(inner, A.Atom) or inner.name != atom.name:
        return None
    keys: dict[str, int] = {}
    local: dict[str, int] = {}
    for k, (a, b) in enumerate(zip(atom.args, inner.args, strict=True)):
        if isinstance(a, A.Var) and isinstance(b, A.Var) and a.name == b.name and a.name not in keys:
            keys[a.name] = k
        elif isinstance(a, A.Wildcard) and isinstance(b, A.Var) and b.name not in local:
            local[b.name] = k
        elif not (isinstance(a, A.Wildcard) and isinstance(b, A.Wildcard)):
            return None
    target = agg.target
    if not keys or var.name in keys or set(keys) & set(local) or (
            target is not None and not (isinstance(target, A.Var) and target.name in local)):
        return None
    return GroupedForm(atom, var, agg, keys, local)
