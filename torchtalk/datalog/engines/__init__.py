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

from torchtalk.datalog.engines.base import Engine, Fetch, Page, Rows, fetch_rows
from torchtalk.errors import InputError, did_you_mean

__all__ = ["ENGINES", "Engine", "Fetch", "Page", "Rows", "fetch_rows", "get_engine"]

ENGINES = ("duckdb", "memory", "souffle", "souffle-compiled")


def get_engine(name: str) -> Engine:
    """The engine called `name`: "duckdb", "souffle" (Soufflé's interpreter)
    or "souffle-compiled" (`souffle -o`, each program compiled once)."""
    if name == "duckdb":
        from torchtalk.datalog.engines.duckdb import DuckDBEngine

        return DuckDBEngine()
    if name == "memory":
        from torchtalk.datalog.engines.memory import MemoryEngine

        return MemoryEngine()
    if name in ("souffle", "souffle-compiled"):
        from torchtalk.datalog.engines.souffle import SouffleEngine

        return SouffleEngine(compiled=name == "souffle-compiled")
    raise InputError(f"unknown engine '{name}' (engines: {', '.join(ENGINES)})", hint=did_you_mean(name, ENGINES))
