"""Engines that run a checked program (STYLE practice 9).

Both implement `Engine.run(program, con, outputs, facts, tables, order) -> {relation: rows}`;
rows are tuples (str for symbol, int for number), a set in no given order,
except that an output in `order` comes back distinct and sorted by those
column positions.
`tables` names the fact DB table of an input relation stored under another
name (e.g. `derived."flow"`, Note [Derived at index time]); other inputs are
read from the table of their own name.

Example:
    >>> get_engine("duckdb").run(prog, con, ["path"], {})  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any, Protocol

from torchtalk.datalog.ast import Program
from torchtalk.errors import InputError, did_you_mean

Rows = list[tuple]


class Engine(Protocol):
    name: str

    def run(
        self,
        program: Program,
        con: Any,
        outputs: list[str],
        facts: dict[str, list[tuple]],
        tables: dict[str, str] | None = None,
        order: dict[str, tuple[int, ...]] | None = None,
    ) -> dict[str, Rows]:
        """Evaluate `outputs` of a checked program over the fact DB `con`."""


ENGINES = ("duckdb", "souffle")


def get_engine(name: str) -> Engine:
    """The engine called `name` ("duckdb" or "souffle")."""
    if name == "duckdb":
        from torchtalk.datalog.engines.duckdb import DuckDBEngine

        return DuckDBEngine()
    if name == "souffle":
        from torchtalk.datalog.engines.souffle import SouffleEngine

        return SouffleEngine()
    raise InputError(f"unknown engine '{name}' (engines: {', '.join(ENGINES)})", hint=did_you_mean(name, ENGINES))
