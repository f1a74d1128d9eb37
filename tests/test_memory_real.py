"""The in-memory engine (Note [In-memory evaluation] in
torchtalk/datalog/engines/memory.py) gives the embedded engine's answers on
the real PyTorch 2.6.0 tree: every named query of tests/test_engines_real.py,
every row and every chain, and the same pages. (That module checks the
embedded engine against Soufflé, so the three agree.)"""

from __future__ import annotations

import pytest

from tests.test_engines_real import PAGED, QUERIES

pytestmark = pytest.mark.real_tree


@pytest.fixture(scope="module")
def memory_con(real_db):
    """A Session of its own whose queries run in memory (Note [Engine per
    session] in torchtalk/connmemo.py): the tables it reads stay in it."""
    from torchtalk import api

    con = api.open_db(db=real_db)
    con.engine = "memory"
    yield con
    con.close()


@pytest.mark.parametrize("text", QUERIES)
def test_memory_gives_the_same_rows(real_con, memory_con, text):
    from torchtalk import api

    embedded = api.query(text, con=real_con, all_matches=True, limit=None, engine="duckdb")
    memory = api.query(text, con=memory_con, all_matches=True, limit=None)
    assert embedded.total > 0
    assert memory.rows == embedded.rows and memory.total == embedded.total


@pytest.mark.parametrize("text", [*PAGED, "impact(cpublas::gemm)", "affected(cpublas::gemm)"])
def test_memory_gives_the_same_page_and_chains(real_con, memory_con, text):
    from torchtalk import api

    embedded = api.query(text, con=real_con, all_matches=True, limit=7, engine="duckdb")
    memory = api.query(text, con=memory_con, all_matches=True, limit=7)
    assert embedded.total > 7 and len(memory.rows) == 7
    assert memory.rows == embedded.rows and memory.total == embedded.total
    assert all(len(r[-1]) > 0 for r in memory.rows)  # every row has its chain


def test_a_query_too_large_for_memory_is_answered_by_duckdb(real_con, memory_con, monkeypatch):
    """Note [Large runs go to DuckDB]: past the budget, the same answer."""
    from torchtalk import api
    from torchtalk.datalog.engines import memory
    from torchtalk.datalog.engines.duckdb import DuckDBEngine

    text = "impact(cpublas::gemm, depth=3)"
    embedded = api.query(text, con=real_con, all_matches=True, limit=20, engine="duckdb")
    ran, real = [], DuckDBEngine.run
    monkeypatch.setattr(
        DuckDBEngine, "run", lambda self, *a, **k: ran.append(1) or real(self, *a, **k)
    )
    monkeypatch.setattr(memory, "ROW_BUDGET", 1000)
    assert api.query(text, con=memory_con, all_matches=True, limit=20).rows == embedded.rows
    assert ran  # the walk's run went to DuckDB
