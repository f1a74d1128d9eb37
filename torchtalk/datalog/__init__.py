"""TorchTalk's Datalog: a documented Soufflé subset (docs/datalog.md).

Pipeline (one way): grammar.tx -> parser (textX -> typed `ast`) ->
analysis/ (dependency graph, strata, checks) -> compile (rules -> SQL) ->
engines/ (duckdb: embedded, default; souffle: subprocess).

Example:
    >>> from torchtalk.datalog import parse_file
    >>> parse_file("facts/schema.dl").decls["calls"].columns[1].name
    'callee'
"""

from __future__ import annotations

from torchtalk.datalog.ast import (
    Atom,
    ColType,
    Column,
    Decl,
    IODirective,
    Program,
    Rule,
)
from torchtalk.datalog.parser import parse_file, parse_text

__all__ = [
    "Atom",
    "ColType",
    "Column",
    "Decl",
    "IODirective",
    "Program",
    "Rule",
    "parse_file",
    "parse_text",
]

from torchtalk.datalog.analysis.checks import check  # noqa: E402
from torchtalk.datalog.runner import evaluate  # noqa: E402

__all__ += ["check", "evaluate"]
