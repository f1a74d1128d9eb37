"""Fixtures of the fault tests: a small real sub-tree and its fact DB
(tests/reliability/_index.py), built once per session, copied per test."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reliability._index import LAYERS, copy_db, make_small_tree


@pytest.fixture(scope="session")
def small_template(tree, tmp_path_factory) -> tuple[Path, Path]:
    """(the sub-tree, its fact DB of LAYERS): shared, never written to."""
    from torchtalk import api

    base = tmp_path_factory.mktemp("small")
    src = make_small_tree(tree, base / "pytorch")
    db = base / "db" / "tree.duckdb"
    db.parent.mkdir()
    assert api.index(src, db, layers=list(LAYERS), jobs=2).mode == "built"
    return src, db


@pytest.fixture
def small_indexed(small_template, tmp_path) -> tuple[Path, Path]:
    """(the sub-tree, a copy of its fact DB, facts dir and caches, for this test)."""
    src, db = small_template
    return src, copy_db(db, tmp_path / "db")
