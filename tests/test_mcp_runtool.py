"""`run_tool`: every failure becomes a tool error the agent can read; nothing hangs."""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import anyio
import pytest
from mcp.server.mcpserver.exceptions import ToolError

from torchtalk.errors import QueryError, StoreError
from torchtalk.lookup import Table
from torchtalk.mcp import db as db_module
from torchtalk.mcp.server import App, run_tool


class FakeDB:
    def __init__(self, con=None, fail: Exception | None = None):
        self.answered = threading.Event()
        self.con, self.fail, self.interrupted = con, fail, None

    @contextmanager
    def lease(self, optional=False):
        if self.fail and not optional:
            raise self.fail
        yield None if self.fail else self.con

    def interrupt(self, con):
        self.interrupted = con

    def path(self):
        return None


def ctx_for(db) -> SimpleNamespace:
    return SimpleNamespace(request_context=SimpleNamespace(lifespan_context=App(db, None)))


def call(db, work, **kw):
    return anyio.run(lambda: run_tool(ctx_for(db), "t", work, **kw))


def test_answer_is_text_and_structured():
    r = call(FakeDB("con"), lambda con: Table(f"q on {con}", ("a", "file", "line"), (("x", "f.cpp", 3),), 1))
    assert r.content[0].text == "q on con: 1 row\n  x  f.cpp:3"
    assert r.structured_content["rows"] == [{"a": "x", "file": "f.cpp", "line": 3}]


def test_torchtalk_errors_keep_their_hint_and_candidates():
    def work(con):
        raise QueryError("no function named 'gemmm'", hint="did you mean 'gemm'?")

    with pytest.raises(ToolError, match=r"^query error: no function named 'gemmm' \(did you mean 'gemm'\?\)$"):
        call(FakeDB("con"), work)


def test_missing_db_is_an_error_except_for_status():
    db = FakeDB(fail=StoreError("no fact database yet for /src", hint="run `torchtalk index --source /src`"))
    with pytest.raises(ToolError, match=r"^store error: no fact database yet for /src"):
        call(db, lambda con: Table("x", (), (), 0))
    r = call(db, lambda con: Table(f"status {con}", (), (), 0), optional_db=True)
    assert r.content[0].text == "status None: no results"


def test_a_bug_is_reported_not_crashing():
    with pytest.raises(ToolError, match=r"^t: internal error: KeyError: 'x'$"):
        call(FakeDB("con"), lambda con: {}["x"])


def test_a_slow_query_is_interrupted_and_reported(monkeypatch):
    monkeypatch.setattr(db_module, "CALL_TIMEOUT_S", 0.3)
    db = FakeDB("con")
    t0 = time.monotonic()
    with pytest.raises(ToolError, match=r"^t: gave up after 0.3 s; narrow the question$"):
        call(db, lambda con: time.sleep(3))
    assert time.monotonic() - t0 < 2.5
    assert db.interrupted == "con"  # the call's own connection


def test_indexer_reports_running_before_its_thread_starts_a_child(tmp_path, monkeypatch):
    """get_status right after start() must say an index runs (CI once saw it idle)."""
    from torchtalk.mcp import db as mcp_db

    release = threading.Event()
    seen = []

    def slow_stages():
        release.wait(10)
        seen.append("stages")
        return ()

    monkeypatch.setattr(mcp_db, "stages", slow_stages)
    ix = mcp_db.Indexer(tmp_path / "tree", None, tmp_path / "index.log")
    assert ix.state.stage == ""
    ix.start()
    assert ix.state.stage == "starting" and ix.state.log == str(tmp_path / "index.log")
    release.set()
    deadline = time.monotonic() + 10
    while ix.state.stage:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert seen == ["stages"] and ix.state.failed is None


def _until(cond, what: str, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_a_fast_update_preempts_the_compiler_tier_then_restarts_it(tmp_path, monkeypatch):
    """Note [Compiler tier in the background]: the compiler tier runs after
    the stages; a batch of changes stops it, runs the fast update first, then
    starts it again; stop() ends it. A real child stands for `index --precise`."""
    import subprocess
    import sys

    from torchtalk.mcp import db as mcp_db

    monkeypatch.setattr(mcp_db, "stages", lambda: ())
    ix = mcp_db.Indexer(tmp_path / "tree", None, tmp_path / "index.log", compiler=True)
    commands, updates = [], []

    def command(layers):
        commands.append(layers)
        return [sys.executable, "-c", "import time; time.sleep(60)"]

    monkeypatch.setattr(ix, "_command", command)
    # Note [Update worker]: the update goes to the worker process
    monkeypatch.setattr(ix, "_ask", lambda command, label: updates.append((command, label, ix._compiler_proc.poll())))
    ix.start()
    _until(lambda: isinstance(ix._compiler_proc, subprocess.Popen), "the compiler tier never started")
    first = ix._compiler_proc
    _until(lambda: (ix.state.compiler or "").startswith("compiler tier (libclang) running"), "no running state")
    ix.catch_up()  # already running: no second child
    assert ix._compiler_proc is first

    ix._update(frozenset({"aten/src/ATen/native/CPUBlas.cpp"}))
    assert first.poll() is not None  # stopped before the update ran
    assert updates == [("update", "update after changes to aten/src/ATen/native/CPUBlas.cpp", first.poll())]
    _until(lambda: isinstance(ix._compiler_proc, subprocess.Popen) and ix._compiler_proc is not first,
           "the compiler tier did not start again after the update")
    second = ix._compiler_proc
    assert commands == [None, None]  # the compiler tier's `index` of every layer, twice (--precise added by the runner)
    ix.stop()
    assert second.wait(10) is not None
    ix.catch_up()  # a stopped indexer starts nothing
    assert ix._compiler_proc is second


def test_the_compiler_tier_is_off_unless_asked(tmp_path, monkeypatch):
    from torchtalk.mcp import db as mcp_db

    ix = mcp_db.Indexer(tmp_path / "tree", None, tmp_path / "index.log")
    ix.catch_up()
    assert ix._compiler_proc is None and ix.state.compiler is None


@pytest.mark.real_tree
def test_warm_runs_each_tools_query_kind_on_the_busiest_names(real_db):
    from torchtalk import api
    from torchtalk.mcp.db import warm_queries

    con = api.open_db(db=real_db)
    # the function that calls something with the most call sites up to 50 (ties: the first name), counted here
    calls = con.execute("SELECT caller, callee FROM calls").fetchall()
    callers = {a for a, _ in calls}
    sites = Counter(b for _, b in calls if b in callers)
    most = max(n for n in sites.values() if n <= 50)
    fn = '"' + min(c for c, n in sites.items() if n == most) + '"'
    assert most == 50
    # an unquoted C++ name of 2-4 overloads, the most of them (then the first name), counted here
    bases = Counter(b for (b,) in con.execute("SELECT base FROM overload").fetchall()
                    if re.fullmatch(r"[A-Za-z_]\w*(::[A-Za-z_]\w*)+", b))
    name = min(bases, key=lambda b: (bases[b] > 4, -bases[b], b))
    tests = Counter(f for (f,) in con.execute("SELECT file FROM test").fetchall())
    file = min(tests, key=lambda f: (-tests[f], f))
    cls = min(c for (c,) in con.execute("SELECT cls FROM module_class").fetchall())
    assert (name, file) == ("at::Tensor::Tensor", "test/test_jit.py")
    assert warm_queries(con) == [
        'trace("empty.memory_format")', f"impact({fn})", f"callers({fn})", f"callees({fn})",
        f"search({fn})", 'kernels("empty.memory_format")', 'tests("empty.memory_format")',
        'op_callees("empty.memory_format")', 'op_callers("empty.memory_format")', f"impact({name})",
        f'trace_module("{cls}")', f'test(file="{file}")', f'test_file_uses("{file}")',
        f'test_file_subjects("{file}")']
    for text in warm_queries(con):
        assert api.query(text, con=con, limit=1).total > 0, text
    con.close()


@pytest.mark.real_tree
def test_closing_stops_a_warm_run_at_once(real_db):
    from torchtalk.mcp.db import FactDB

    facts = FactDB(None, real_db)
    facts.start_warm()
    t = time.perf_counter()
    facts.close()  # interrupts the warm query it may be in, joins the thread
    assert not facts._warm_thread.is_alive() and time.perf_counter() - t < 5


def test_warming_waits_for_the_first_answer(monkeypatch):
    from torchtalk import api
    from torchtalk.mcp import db as mcp_db

    facts = mcp_db.FactDB(None, Path("unused.duckdb"))
    events = []
    con = SimpleNamespace(close=lambda: None)
    monkeypatch.setattr(facts, "lease", contextmanager(lambda: iter([con])))
    monkeypatch.setattr(mcp_db, "prime", lambda c: events.append("prime"))
    monkeypatch.setattr(mcp_db, "warm_queries", lambda c: ["trace(x)", "impact(y)"])
    monkeypatch.setattr("torchtalk.query.library.load_library", lambda *a, **k: None)
    monkeypatch.setattr(api, "open_db", lambda **k: con)
    monkeypatch.setattr(api, "query", lambda text, **k: events.append(text))
    facts.start_warm()
    time.sleep(0.3)
    assert events == []  # no call answered yet, and not quiet for WARM_AFTER_S
    facts.answered.set()
    facts._warm_thread.join(timeout=5)
    assert events == ["prime", "trace(x)", "impact(y)"]


def test_a_whole_answer_tool_goes_where_fewer_calls_run():
    """Note [Either process]: trace/trace_module/cuda_kernels go to the slow
    lane's process unless it runs more calls than this one; slow tools
    always go there, quick ones never; without a ready child, nothing does."""
    app = App(FakeDB(), None, slow=SimpleNamespace(ready=True, running=0))
    assert [app.in_child(t) for t in ("trace", "cuda_kernels", "impact", "called_by")] == [True, True, True, False]
    app.slow.running = 2
    app.running = 1
    assert [app.in_child(t) for t in ("trace", "trace_module", "affected", "search")] == [False, False, True, False]
    app.running = 2
    assert app.in_child("trace_module")
    app.slow.ready = False
    assert not any(app.in_child(t) for t in ("trace", "impact"))


def test_the_calls_running_here_are_counted_until_each_ends():
    """App.running counts a call while it computes, and after it ends, by
    an answer or an error, not any more."""
    seen = []
    db = FakeDB("con")
    ctx = ctx_for(db)

    def work(con):
        seen.append(ctx.request_context.lifespan_context.running)
        return Table("q", ("a",), (("x",),), 1)

    def failing(con):
        raise QueryError("no function named 'x'")

    anyio.run(lambda: run_tool(ctx, "t", work))
    with pytest.raises(ToolError):
        anyio.run(lambda: run_tool(ctx, "t", failing))
    assert seen == [1] and ctx.request_context.lifespan_context.running == 0
