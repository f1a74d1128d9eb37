"""A relation computed only for the rows whose column has one of some values.

Note [Rows changed by file] (torchtalk/datalog/analysis/partition.py) says
when an update may delete a stored relation's rows of the changed files and
compute only those again. `restrict` makes the program that computes them:
each rule of the relation reads the new input `part` (the values) at the
column's variable, and so, to compute no more than needed, does a copy of
each derived relation the rule reads with that variable, at its column
(`step` of `step_at`'s files only). A copy is made only where it computes
the same rows as the relation with the values kept (not for a recursive
relation, or one with another term there than a variable or a constant).

Example:
    >>> p = parse_text(".decl c(a: symbol, f: symbol)\\n.input c\\n.decl s(a: symbol, f: symbol)\\ns(a, f) :- c(a, f).")
    >>> [str(r) for r in restrict(p, "s", 1, "part").rules]
    ['s(a, f) :- c(a, f), part(f).']
"""

from __future__ import annotations

import dataclasses

from torchtalk.datalog import ast as A
from torchtalk.datalog.analysis.strata import recursive_relations


def restrict(program: A.Program, rel: str, col: int, part: str) -> A.Program:
    """`program` computing `rel` only for the rows whose column `col` is a
    value of the new unary input `part` (of that column's type)."""
    inputs = frozenset(program.inputs)
    recursive = recursive_relations(program)
    made: dict[tuple[str, int], str | None] = {}
    copies: list[A.Rule] = []
    decls = dict(program.decls)

    def restricted_rule(rule: A.Rule, c: int, head: str) -> A.Rule:
        t = rule.head.args[c]
        body = list(rule.body)
        if isinstance(t, A.Var):
            for i, lit in enumerate(body):
                at = ([j for j, a in enumerate(lit.args) if isinstance(a, A.Var) and a.name == t.name]
                      if isinstance(lit, A.Atom) and lit.name not in inputs else [])
                sub = copy(lit.name, at[0]) if at else None
                if sub is not None:
                    body[i] = dataclasses.replace(lit, name=sub)
        body.append(A.Atom(part, (t,)))
        return dataclasses.replace(rule, head=dataclasses.replace(rule.head, name=head), body=tuple(body))

    def copy(name: str, c: int) -> str | None:
        if (name, c) not in made:
            rules = program.rules_for(name)
            ok = name not in recursive and all(isinstance(r.head.args[c], (A.Var, A.Str, A.Num)) for r in rules)
            made[name, c] = f"{name}__{c}__{part}" if ok else None
            if ok:
                new = made[name, c]
                decls[new] = dataclasses.replace(program.decls[name], name=new)
                copies.extend(restricted_rule(r, c, new) for r in rules)
        return made[name, c]

    own = [restricted_rule(r, col, rel) for r in program.rules_for(rel)]
    column = program.decls[rel].columns[col]
    decls[part] = A.Decl(part, (dataclasses.replace(column, name="v"),))
    rules = tuple(r for r in program.rules if r.head.name != rel) + tuple(own) + tuple(copies)
    dirs = program.directives + (A.IODirective(A.IOKind.INPUT, part),)
    return dataclasses.replace(program, decls=decls, rules=rules, directives=dirs)
