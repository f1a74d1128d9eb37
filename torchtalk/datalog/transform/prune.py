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


def prune(program: A.Program, empty: frozenset[str], sources: frozenset[str] | None = None) -> A.Program:
    """`program` keeping the rules whose positive atoms all read derivable
    relations. A relation is derivable if it is a source (default: an input)
    not in `empty`, or the head of a rule whose positive atoms are all
    derivable (a fixpoint, so a recursive relation without a base rule is
    not derivable). Such a dropped rule derives nothing: same answers."""
    if sources is None:
        sources = frozenset(program.inputs)
    live = set(sources) - set(empty)
    changed = True
    while changed:
        changed = False
        for rule in program.rules:
            if rule.head.name not in live and all(n in live for n in rule.positives):
                live.add(rule.head.name)
                changed = True
    keep = tuple(r for r in program.rules if all(n in live for n in r.positives))
    return dataclasses.replace(program, rules=keep)
