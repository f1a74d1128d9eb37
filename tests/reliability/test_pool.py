"""The MCP server's connection pool (Note [Connection pool], torchtalk/mcp/db.py),
on the real tree's DB: a slow call holds one connection, not the server; the
pool is bounded; a replaced DB file is reopened once the calls on the old
one are back, and each call sees the old file or the new one."""

from __future__ import annotations

import os
import shutil
import threading
import time

import duckdb
import pytest

from torchtalk import api
from torchtalk.mcp import db as mcp_db
from torchtalk.mcp.db import FactDB

pytestmark = pytest.mark.real_tree

SLOW_SQL = "SELECT count(*) FROM range(100000000000) t(i) WHERE i % 7 = 3"  # minutes on one thread


def run_slow(facts: FactDB, started: threading.Event, held: list, outcome: list) -> None:
    with facts.lease() as con:
        held.append(con)
        started.set()
        try:
            con.execute(SLOW_SQL).fetchone()
            outcome.append("finished")
        except duckdb.InterruptException:
            outcome.append("interrupted")


def test_a_slow_call_holds_one_connection_not_the_server(real_db):
    facts = FactDB(None, real_db)
    started, held, outcome = threading.Event(), [], []
    slow = threading.Thread(target=run_slow, args=(facts, started, held, outcome))
    slow.start()
    try:
        assert started.wait(30)
        time.sleep(0.2)  # it is in DuckDB now
        # every overload of cpublas::gemm (Note [Overload ids]), as the query resolves the name
        want = api.open_db(db=real_db).execute(
            "SELECT count(DISTINCT caller) FROM calls WHERE callee LIKE 'at::native::cpublas::gemm(%'").fetchone()[0]
        t0 = time.monotonic()
        with facts.lease() as con:
            assert con is not held[0]
            got = api.query("callers(at::native::cpublas::gemm)", con=con, limit=None)
        assert time.monotonic() - t0 < 10 and slow.is_alive() and not outcome
        at = got.columns.index("caller")
        assert len({r[at] for r in got.rows}) == want > 0
    finally:
        facts.interrupt(held[0] if held else None)
        slow.join(30)
        facts.close()
    assert outcome == ["interrupted"]


def test_the_pool_is_bounded_and_a_call_beyond_it_waits(real_db, monkeypatch):
    monkeypatch.setattr(mcp_db, "POOL_SIZE", 2)
    facts = FactDB(None, real_db)
    first, second = facts.lease(), facts.lease()
    a, b = first.__enter__(), second.__enter__()
    got = []
    third = threading.Thread(target=lambda: got.append(facts.lease().__enter__()))
    third.start()
    third.join(1.0)
    assert third.is_alive() and not got  # waits: two are out
    second.__exit__(None, None, None)
    third.join(10)
    assert got == [b]  # the one given back
    assert {id(a), id(b)} == {id(c) for c in facts._open}
    first.__exit__(None, None, None)
    facts._release(got[0])
    facts.close()


def test_a_replaced_file_is_reopened_after_the_calls_on_the_old_one(real_db, tmp_path):
    live = tmp_path / "live.duckdb"
    shutil.copy(real_db, live)
    ops = duckdb.connect(str(live), read_only=True).execute("SELECT count(*) FROM op").fetchone()[0]
    facts = FactDB(None, live)
    seen = []
    with facts.lease() as old:
        new = tmp_path / "new.duckdb"
        shutil.copy(real_db, new)
        con = duckdb.connect(str(new))
        con.execute("DELETE FROM op WHERE op = 'gelu'")
        con.close()
        os.replace(new, live)  # what `torchtalk index` does
        after = threading.Thread(target=lambda: seen.append(
            _count(facts)))
        after.start()
        after.join(1.0)
        assert after.is_alive() and not seen  # waits for the call on the old file
        assert old.execute("SELECT count(*) FROM op").fetchone()[0] == ops  # the old file, whole
    after.join(30)
    assert seen == [ops - 1]
    facts.close()


def _count(facts: FactDB) -> int:
    with facts.lease() as con:
        return con.execute("SELECT count(*) FROM op").fetchone()[0]
