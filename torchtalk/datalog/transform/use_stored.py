"""Relations already computed and stored read as inputs: their rules are
dropped and an `.input` added (Note [Derived at index time] in
torchtalk/query/derived.py says which ones and where they are stored).

Example:
    >>> [str(r) for r in use_stored(parse_text(".decl e(x: number)\\n.input e\\n.decl p(x: number)\\np(x) :- e(x)."),
    ...                             frozenset({"p"})).rules]
    []
"""

from __future__ import annotations

import dataclasses

from torchtalk.datalog import ast as A


def use_stored(program: A.Program, stored: frozenset[str]) -> A.Program:
    """`program` with each relation of `stored` an input, without its rules."""
    rules = tuple(r for r in program.rules if r.head.name not in stored)
    dirs = program.directives + tuple(A.IODirective(A.IOKind.INPUT, rel) for rel in sorted(stored))
    return dataclasses.replace(program, rules=rules, directives=dirs)
