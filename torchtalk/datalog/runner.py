"""`evaluate`: check a program, pick the strata the outputs need, run an engine.

Example:
    >>> prog = parse_text('''.decl e(a: number, b: number)
    ... .decl p(a: number, b: number)
    ... .output p
    ... e(1, 2). e(2, 3).
    ... p(x, y) :- e(x, y).
    ... p(x, z) :- p(x, y), e(y, z).''')
    >>> sorted(evaluate(prog, None)["p"])
    [(1, 2), (1, 3), (2, 3)]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from torchtalk.datalog.analysis.checks import check
from torchtalk.datalog.ast import Program
from torchtalk.datalog.engines import get_engine
from torchtalk.errors import InputError, did_you_mean


def evaluate(
    program: Program,
    con: Any,
    *,
    outputs: Iterable[str] | None = None,
    facts: Mapping[str, Iterable[tuple]] | None = None,
    engine: str = "duckdb",
    checked: bool = False,
) -> dict[str, list[tuple]]:
    """Rows of each output relation (a set, as tuples in no given order).

    con:     duckdb connection to the fact DB (one table per input relation,
             named and typed as its .decl); may be read-only; None = no DB.
    outputs: relations to compute (only the strata they need run);
             None = every `.output` relation.
    facts:   extra input rows by relation (e.g. query seeds).
    checked: skip `check(program)` when the caller already did it.
    """
    if not checked:
        check(program)
    wanted = list(program.outputs if outputs is None else outputs)
    for rel in wanted:
        if rel not in program.decls:
            raise InputError(f"unknown relation '{rel}'", hint=did_you_mean(rel, program.decls))
    given = {rel: list(rows) for rel, rows in (facts or {}).items()}
    return get_engine(engine).run(program, con, wanted, given)
