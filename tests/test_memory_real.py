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


@pytest.mark.parametrize("text", ["impact(cpublas::gemm)", "affected(at::native::layer_norm_cpu)"])
def test_a_page_walks_once_in_memory_and_keeps_nothing(real_con, memory_con, monkeypatch, text):
    """Note [One walk per answer] in memory: the chains' run reads the rows'
    run's `up_reach` (derived by no rule of its), the same page comes back,
    and nothing is left in the Session after."""
    from torchtalk import api
    from torchtalk.datalog.engines import memory

    derived, real = [], memory._fixpoint
    monkeypatch.setattr(memory, "_fixpoint", lambda p, members, *a: derived.append(members) or real(p, members, *a))
    embedded = api.query(text, con=real_con, all_matches=True, limit=5, engine="duckdb")
    page = api.query(text, con=memory_con, all_matches=True, limit=5)
    assert page.rows == embedded.rows and all(r[-1] for r in page.rows)
    assert sum("up_reach" in members for members in derived) == 1
    assert not [k for k in memory_con.memo if isinstance(k, tuple) and k[0] == "memory-kept"]


def test_a_page_whose_rows_ran_on_duckdb_reads_its_walks_in_memory(real_con, memory_con, monkeypatch):
    """The rows' run gone to DuckDB (Note [Large runs go to DuckDB]) leaves
    its walks as temp tables; the chains' run, in memory, reads them, and
    they are dropped after."""
    from torchtalk import api
    from torchtalk.datalog.engines import memory

    text = "impact(cpublas::gemm, depth=3)"
    embedded = api.query(text, con=real_con, all_matches=True, limit=5, engine="duckdb")
    real = memory.MemoryEngine.evaluate
    calls = []

    def first_too_large(self, program, con, outputs, *a):
        calls.append(outputs)
        if len(calls) == 1:
            raise memory._Large
        return real(self, program, con, outputs, *a)

    read, real_read = [], memory._read
    monkeypatch.setattr(memory.MemoryEngine, "evaluate", first_too_large)
    monkeypatch.setattr(memory, "_read", lambda con, table: read.append(table) or real_read(con, table))
    page = api.query(text, con=memory_con, all_matches=True, limit=5)
    assert calls[0] == ["impact"] and calls[-1] == ["chain"] and page.rows == embedded.rows
    assert any(t.startswith("temp.main.") and t.endswith('_up_reach"') for t in read)
    assert memory_con.execute("SELECT count(*) FROM duckdb_tables() WHERE temporary").fetchone()[0] == 0


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


def test_a_session_reading_ahead_runs_on_duckdb_until_its_tables_are_read(real_db, monkeypatch):
    """Note [Read ahead]: the MCP pool's Session answers on DuckDB while the
    warm thread reads the tables, in memory after; the same rows both ways."""
    from torchtalk import api
    from torchtalk.datalog.engines.duckdb import DuckDBEngine
    from torchtalk.datalog.engines.memory import read_tables
    from torchtalk.mcp.db import query_tables

    con = api.open_db(db=real_db)
    con.engine, con.read_ahead = "memory", True
    ran, real = [], DuckDBEngine.run
    monkeypatch.setattr(DuckDBEngine, "run", lambda self, *a, **k: ran.append(1) or real(self, *a, **k))
    text = "impact(at::native::cpublas::gemm, depth=3)"
    before = api.query(text, con=con, limit=20)
    assert ran and not any(k[0] == "memory-table" for k in con.memo if isinstance(k, tuple))
    tables = query_tables(con)
    assert 'derived."step_at"' in tables and '"calls"' in tables and '"calls_op"' in tables
    # not what only stored relations read: step is stored for the updates' sake (Note [Derived in place])
    assert 'derived."step"' not in tables and 'derived."fn_device"' not in tables
    assert read_tables(con, tables) == len(tables)
    ran.clear()
    after = api.query(text, con=con, limit=20)
    assert not ran and after.rows == before.rows and after.total == before.total
    con.close()


def test_the_mcp_pool_reads_its_tables_when_warm(real_db):
    """The server's warm thread reads the named queries' tables into the
    pool's Session (Note [Warm queries] in torchtalk/mcp/db.py)."""
    import time

    from torchtalk.mcp.db import FactDB, query_tables

    facts = FactDB(None, real_db)
    try:
        facts.start_warm()
        facts.answered.set()
        with facts.lease() as con:
            assert con.engine == "memory" and con.read_ahead
            want = {("memory-table", t) for t in query_tables(con)}
            deadline = time.monotonic() + 120
            while not want <= set(con.memo) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert want <= set(con.memo)
    finally:
        facts.close()
