"""Nullary relations as one-column relations, for SQL.

Note [Nullary relations]: `.decl ok()` is a proposition, true when it holds
the empty tuple. Soufflé has them natively; a SQL table cannot have zero
columns. So before compiling to SQL, each nullary relation gets one column,
`unit: number`, and each of its atoms the argument 0: `ok() :- e(_, 3).`
becomes `ok(0) :- e(_, 3).`, and `!ok()` becomes `!ok(0)`. The embedded
engine gives each row back without that column (`()`), so both engines
answer the same.

Example:
    >>> p = parse_text('.decl ok()\\n.decl e(a: number)\\nok() :- e(_).')
    >>> str(nullary_as_unary(p).rules[0])
    'ok(0) :- e(_).'
"""

from __future__ import annotations

import dataclasses

from torchtalk.datalog import ast as A

UNIT = A.Column("unit", A.ColType.NUMBER)


def nullary_as_unary(program: A.Program) -> A.Program:
    """`program` with every nullary relation given the column `unit` (the
    program itself when it has none)."""
    nullary = frozenset(name for name, d in program.decls.items() if d.arity == 0)
    if not nullary:
        return program
    decls = {name: dataclasses.replace(d, columns=(UNIT,)) if name in nullary else d
             for name, d in program.decls.items()}
    rules = tuple(_rule(r, nullary) if r.head.name in nullary or any(b in nullary for b, _ in r.reads) else r
                  for r in program.rules)  # a rule without a nullary atom stays as it is (Note [Rule reads])
    return dataclasses.replace(program, decls=decls, rules=rules)


def _rule(rule: A.Rule, nullary: frozenset[str]) -> A.Rule:
    return A.Rule(_atom(rule.head, nullary), tuple(_literal(lit, nullary) for lit in rule.body), rule.loc)


def _atom(atom: A.Atom, nullary: frozenset[str]) -> A.Atom:
    if atom.name in nullary:
        return A.Atom(atom.name, (A.Num(0, atom.loc),), atom.loc)
    return A.Atom(atom.name, tuple(_term(t, nullary) for t in atom.args), atom.loc)


def _literal(lit: A.Literal, nullary: frozenset[str]) -> A.Literal:
    if isinstance(lit, A.Atom):
        return _atom(lit, nullary)
    if isinstance(lit, A.Negation):
        return A.Negation(_literal(lit.target, nullary), lit.loc)  # type: ignore[arg-type]
    if isinstance(lit, A.Comparison):
        return A.Comparison(lit.op, _term(lit.left, nullary), _term(lit.right, nullary), lit.loc)
    return A.Builtin(lit.name, _term(lit.left, nullary), _term(lit.right, nullary), lit.loc)


def _term(term: A.Term, nullary: frozenset[str]) -> A.Term:
    """Aggregate bodies may read a nullary relation too."""
    if isinstance(term, A.Aggregate):
        target = None if term.target is None else _term(term.target, nullary)
        return A.Aggregate(term.func, target, tuple(_literal(x, nullary) for x in term.body), term.loc)
    if isinstance(term, A.Neg):
        return A.Neg(_term(term.operand, nullary), term.loc)
    if isinstance(term, A.BinOp):
        return A.BinOp(term.op, _term(term.left, nullary), _term(term.right, nullary), term.loc)
    if isinstance(term, A.Functor):
        return dataclasses.replace(term, args=tuple(_term(a, nullary) for a in term.args))
    return term
