"""Fixtures of the engine tests."""

from __future__ import annotations

import duckdb
import pytest

from .test_engine import EDGES


@pytest.fixture
def db(tmp_path):
    """A fact DB with GRAPH's `edge` table (test_engine.py), a row repeated."""
    path = tmp_path / "facts.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE edge (a VARCHAR, b VARCHAR)")
    con.executemany("INSERT INTO edge VALUES (?, ?)", EDGES + [("a", "b")])  # a duplicate row
    con.close()
    return path
