"""The DuckDB module the engine calls, imported lean.

Note [Lean DuckDB import]
~~~~~~~~~~~~~~~~~~~~~~~~~
The engine uses only DuckDB's connection API: `connect`, `execute`,
`fetchall`, `description` and the exception classes. All of them live in the
C++ extension `_duckdb`, which the `duckdb` package re-exports (its own
docstring says so). Importing the package also builds its Python layer (the
relational and expression APIs, and `importlib.metadata` for the version):
about 68 ms against 15 ms for the extension alone on the 2-core CI machine,
a third of a whole `torchtalk eval` process (bench/engine.py).

So a process that has not imported `duckdb` yet takes the extension alone:
`torchtalk eval` and `torchtalk query` (the engine, store.open_db and the
derived relations all call `duckdb()`). Where `duckdb` is already loaded
(the index, a report, a user's program) it is returned as is: the classes are the same objects either way, so
`except mod.Error` catches what either module raises. Where a DuckDB
release has no top-level `_duckdb`, the package is imported as usual.

    >>> duckdb().connect().execute("SELECT 1").fetchall()
    [(1,)]
"""

from __future__ import annotations

import sys


def duckdb():
    """The module whose `connect` and exception classes the engine uses."""
    loaded = sys.modules.get("duckdb")
    if loaded is not None:
        return loaded
    try:
        import _duckdb
    except ImportError:
        import duckdb as package

        return package
    if not hasattr(_duckdb, "connect") or not hasattr(_duckdb, "CatalogException"):
        import duckdb as package

        return package
    return _duckdb
