"""Note [Warm from history] (torchtalk/history.py): the DSL texts a
server's tools evaluated are kept beside the DB, and the next server's warm
thread runs them after its fixed queries."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest

from torchtalk import history
from torchtalk.errors import QueryError


@pytest.fixture
def kept(monkeypatch):
    """History on (the suite turns it off), and this process's memory of it empty."""
    monkeypatch.setenv("TORCHTALK_MCP_HISTORY", "1")
    monkeypatch.setattr(history, "_SEEN", {})


def test_texts_are_kept_beside_the_db_most_recent_first(tmp_path, kept):
    db = tmp_path / "tree.duckdb"
    for text in ("impact(gemm, depth=4)", "trace(matmul)", "impact(gemm, depth=4)", "callers(mm)"):
        history.record(db, text)
    assert history.history_path(db) == tmp_path / "tree.queries"
    assert history.history_path(db).read_text() == "trace(matmul)\nimpact(gemm, depth=4)\ncallers(mm)\n"
    assert history.recent(db) == ["callers(mm)", "impact(gemm, depth=4)", "trace(matmul)"]


def test_only_the_last_texts_are_kept(tmp_path, kept):
    db = tmp_path / "tree.duckdb"
    for i in range(history.KEPT + 5):
        history.record(db, f"callers(f{i})")
    got = history.recent(db)
    assert len(got) == history.KEPT
    assert got[0] == f"callers(f{history.KEPT + 4})" and got[-1] == "callers(f5)"


def test_a_second_process_adds_to_what_the_first_kept(tmp_path, kept, monkeypatch):
    db = tmp_path / "tree.duckdb"
    history.record(db, "trace(matmul)")
    monkeypatch.setattr(history, "_SEEN", {})  # another process: reads the file first
    history.record(db, "callers(mm)")
    assert history.recent(db) == ["callers(mm)", "trace(matmul)"]


def test_unreadable_or_odd_texts_are_passed_over(tmp_path, kept):
    db = tmp_path / "tree.duckdb"
    history.history_path(db).write_bytes(b"\xff\xfe\x00garbage")
    assert history.recent(db) == []
    history.record(db, "a(\nb)")  # not a line
    history.record(db, "x" * (history.MAX_TEXT + 1))
    history.record(None, "trace(matmul)")  # no DB open yet
    assert history.recent(db) == []
    history.record(db, "trace(matmul)")  # the unreadable file is replaced
    assert history.recent(db) == ["trace(matmul)"]


def test_switched_off_nothing_is_written_or_read(tmp_path, monkeypatch):
    db = tmp_path / "tree.duckdb"
    history.history_path(db).write_text("trace(matmul)\n")
    monkeypatch.setenv("TORCHTALK_MCP_HISTORY", "0")
    assert history.recent(db) == []
    history.record(db, "callers(mm)")
    assert history.history_path(db).read_text() == "trace(matmul)\n"


def test_warm_runs_the_kept_texts_after_its_own(tmp_path, kept, monkeypatch):
    from torchtalk import api
    from torchtalk.mcp import db as mcp_db

    db = tmp_path / "tree.duckdb"
    for text in ("callers(mm)", "impact(y)", "gone(z)"):
        history.record(db, text)
    facts = mcp_db.FactDB(None, db)
    facts._path = db  # as after the pool's first lease
    events = []
    con = SimpleNamespace(close=lambda: None)

    def query(text, **k):
        events.append(text)
        if text == "gone(z)":
            raise QueryError("no query or relation named 'gone'")

    monkeypatch.setattr(facts, "lease", contextmanager(lambda: iter([con])))
    monkeypatch.setattr(mcp_db, "prime", lambda c: None)
    monkeypatch.setattr(mcp_db, "warm_queries", lambda c: ["trace(x)", "impact(y)"])
    monkeypatch.setattr("torchtalk.query.library.load_library", lambda *a, **k: None)
    monkeypatch.setattr(api, "open_db", lambda **k: con)
    monkeypatch.setattr(api, "query", query)
    assert facts.warm_note() == "warm-up: reading the tables (after the first call)"
    facts.answered.set()
    facts.start_warm()
    facts._warm_thread.join(timeout=5)
    # the fixed ones, then the kept ones most recent first, each once; a
    # kept text that fails does not stop the warm-up
    assert events == ["trace(x)", "impact(y)", "gone(z)", "callers(mm)"]
    assert facts.warmed.is_set() and facts.warm_note() == "warm-up: done"


def test_get_status_says_how_far_the_warm_up_is(monkeypatch):
    from torchtalk.mcp import db as mcp_db

    facts = mcp_db.FactDB(None, Path("unused.duckdb"))
    facts.warm_progress = (3, 14)
    assert facts.warm_note() == "warm-up: 3 of 14 queries run"
    monkeypatch.setattr(facts, "lease", lambda: (_ for _ in ()).throw(RuntimeError("no DB")))
    facts.answered.set()
    facts.start_warm()
    facts._warm_thread.join(timeout=5)
    assert not facts.warmed.is_set()
    assert facts.warm_note() == "warm-up: stopped (a query's first call reads what it needs)"


# run in a process of its own: a library's programs keep their plans for the process
PLANS_AFTER_WARM = """
import sys, time
from pathlib import Path
from torchtalk import api
from torchtalk.datalog.engines import memrule
from torchtalk.mcp.db import FactDB

db, text = Path(sys.argv[1]), sys.argv[2]
if len(sys.argv) > 3:  # the fixed warm queries slower than the kept texts' budget
    import torchtalk.mcp.db as mdb
    mdb.WARM_HISTORY_S = float(sys.argv[3])
    query = api.query
    def slow(q, *a, **k):
        if q != text:
            time.sleep(2 * mdb.WARM_HISTORY_S)
        return query(q, *a, **k)
    api.query = slow
facts = FactDB(None, db)
facts.start_warm()
facts.answered.set()
deadline = time.monotonic() + 120
while not facts.warmed.is_set() and time.monotonic() < deadline:
    time.sleep(0.1)
assert facts.warmed.is_set(), "not warmed"
made = []
compile_ = memrule._compile
memrule._compile = lambda *a: made.append(1) or compile_(*a)
with facts.lease() as con:
    assert con.engine == "memory"
    api.query(text, con=con, limit=1)
facts.close()
print(len(made))
"""


def _plans_made_after_warm(db: Path, text: str, on: bool, budget: float | None = None) -> int:
    """A new server's warm thread runs on `db`; then `text` on its pool: the
    plans that still had to be made (Note [Plans by rule]). `budget`: the
    kept texts' time (WARM_HISTORY_S), each other warm query taking twice it."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "TORCHTALK_MCP_HISTORY": "1" if on else "0"}
    budget_arg = [] if budget is None else [str(budget)]
    out = subprocess.run([sys.executable, "-c", PLANS_AFTER_WARM, str(db), text, *budget_arg], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return int(out.stdout.split()[-1])


@pytest.mark.real_tree
def test_a_tool_call_keeps_its_text_and_the_next_server_warms_it(real_db, tmp_path, kept):
    """Through the SDK's client on the real DB (a copy, so the shared one's
    history is not touched): impact's text is kept, and a new server's warm
    thread plans it before any call; with history off, it does not."""
    import shutil

    import anyio
    from mcp import Client

    from torchtalk.mcp.serve import build_server

    db = tmp_path / Path(real_db).name
    shutil.copy(real_db, db)
    text = "impact(at::native::cpublas::gemm, depth=2)"

    async def one_call():
        async with Client(build_server(None, db, watch=False)) as client:
            res = await client.call_tool("test_file_info", {"path": "test_linalg.py"})
            assert not res.is_error
            res = await client.call_tool("impact", {"name": "at::native::cpublas::gemm", "depth": 2})
            assert not res.is_error

    anyio.run(one_call)
    # impact's text, and the queries test_file_info runs itself (on the server's connection), each once
    assert history.recent(db) == [text, 'test_file_subjects("test/test_linalg.py")',
                                  'test_file_uses("test/test_linalg.py")', 'test(file="test/test_linalg.py")']
    assert _plans_made_after_warm(db, text, on=True) == 0
    assert _plans_made_after_warm(db, text, on=False) > 0
    # the kept texts' time counts from the first of them, not from the fixed
    # warm queries before them (a loaded machine's: CI once found 16 plans left)
    assert _plans_made_after_warm(db, text, on=True, budget=0.2) == 0
