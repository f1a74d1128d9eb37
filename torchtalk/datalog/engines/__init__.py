"""Engines that run a checked program (STYLE practice 9).

Both implement `Engine.run(program, con, outputs, facts, tables, fetch) -> {relation: rows}`;
rows are tuples (str for symbol, int for number), a set in no given order,
except that an output in `fetch` comes back as that `Fetch` says: a `Page`
of distinct rows, filtered, sorted and cut to a limit.
`tables` names the fact DB table of an input relation stored under another
name (e.g. `derived."flow"`, Note [Derived at index time]); other inputs are
read from the table of their own name.

Example:
    >>> get_engine("duckdb").run(prog, con, ["path"], {})  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from torchtalk.datalog.ast import Program
from torchtalk.errors import InputError, did_you_mean

Rows = list[tuple]


@dataclass(frozen=True)
class Fetch:
    """How an output comes back: its distinct rows whose column i is one of
    `keep`'s values for i, sorted by the columns `order`, at most `limit`."""

    order: tuple[int, ...]
    keep: tuple[tuple[int, frozenset], ...] = ()
    limit: int | None = None


class Page(list):
    """The rows of a fetched output; `total` counts them before the limit."""

    def __init__(self, rows: Iterable[tuple], total: int | None = None) -> None:
        super().__init__(rows)
        self.total = len(self) if total is None else total


def fetch_rows(rows: Iterable[tuple], spec: Fetch) -> Page:
    """`spec` applied in Python (for an engine that cannot do it itself)."""
    kept = [r for r in set(rows) if all(r[i] in allowed for i, allowed in spec.keep)]
    kept.sort(key=lambda r: tuple(r[i] for i in spec.order))
    return Page(kept if spec.limit is None else kept[: spec.limit], len(kept))


class Engine(Protocol):
    name: str

    def run(
        self,
        program: Program,
        con: Any,
        outputs: list[str],
        facts: dict[str, list[tuple]],
        tables: dict[str, str] | None = None,
        fetch: dict[str, Fetch] | None = None,
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
