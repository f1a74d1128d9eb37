"""Drop the rules that cannot fire because they read relations known to be
empty (Note [Pruning] in torchtalk/query/run.py says which ones a query
knows).

Example:
    >>> p = parse_text('.decl a(x: number)\\n.input a\\n.decl b(x: number)\\n.input b\\n'
    ...                '.decl c(x: number)\\nc(x) :- a(x).\\nc(x) :- b(x).')
    >>> [str(r) for r in prune(p, frozenset({"b"})).rules]
    ['c(x) :- a(x).']
"""

from __future__ import annotations

import dataclasses

from torchtalk.datalog import ast as A


def prune(program: A.Program, empty: frozenset[str], sources: frozenset[str] | None = None,
          true: frozenset[str] = frozenset()) -> A.Program:
    """`program` keeping the rules whose positive atoms all read derivable
    relations. A relation is derivable if it is a source (default: an input)
    not in `empty`, or the head of a rule whose positive atoms are all
    derivable (a fixpoint, so a recursive relation without a base rule is
    not derivable). Such a dropped rule derives nothing: same answers.
    `true`: nullary inputs known to hold; a rule negating one is dropped too
    (`!chain_all_shown()` when every row is shown)."""
    if sources is None:
        sources = frozenset(program.inputs)
    rules = program.rules
    if true:
        rules = tuple(r for r in rules if not any(
            isinstance(lit, A.Negation) and isinstance(lit.target, A.Atom) and not lit.target.args
            and lit.target.name in true for lit in r.body))
    live = set(sources) - set(empty)
    changed = True
    while changed:
        changed = False
        for rule in rules:
            if rule.head.name not in live and all(n in live for n in rule.positives):
                live.add(rule.head.name)
                changed = True
    keep = tuple(r for r in rules if all(n in live for n in r.positives))
    return dataclasses.replace(program, rules=keep)
