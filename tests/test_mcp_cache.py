"""`run_tool`'s kept answers (Note [Answer cache]) and lanes (Note [Lanes]),
torchtalk/mcp/cache.py: an answer is kept per DB generation and rule
library, errors of the question too, never a timeout or a missing DB; a slow
tool runs in its own bounded lane, and a quick one is never held up by it."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from types import SimpleNamespace

import anyio
import pytest
from mcp.server.mcpserver.exceptions import ToolError

from torchtalk.errors import QueryError, StoreError
from torchtalk.lookup import Table
from torchtalk.mcp import db as db_module
from torchtalk.mcp import server
from torchtalk.mcp.cache import AnswerCache, freeze
from torchtalk.mcp.server import App, run_tool


class GenDB:
    """A fake pool whose file identity (`gen`) a test changes."""

    def __init__(self, fail: Exception | None = None) -> None:
        self.answered = threading.Event()
        self.gen, self.fail = ("f.duckdb", (1, 1)), fail

    @contextmanager
    def lease(self, optional=False):
        if self.fail:
            raise self.fail
        yield "con"

    def interrupt(self, con):
        pass

    def generation(self):
        return None if self.fail else self.gen

    def served(self):
        return self.gen


def app_for(db, rules=()) -> App:
    return App(db, None, tuple(rules), AnswerCache(), {})


def ask(app: App, work, name: str = "called_by", args: dict | None = None):
    ctx = SimpleNamespace(request_context=SimpleNamespace(lifespan_context=app))
    return anyio.run(lambda: run_tool(ctx, name, work, args=args if args is not None else {"name": "gemm"}))


def counting(runs: list):
    def work(con):
        runs.append(con)
        return Table(f"answer {len(runs)}", ("a", "file", "line"), (("x", "f.cpp", len(runs)),), 1)
    return work


def test_an_answer_is_kept_for_the_same_call_on_the_same_file():
    db, runs = GenDB(), []
    app = app_for(db)
    first = ask(app, counting(runs))
    again = ask(app, counting(runs))
    assert len(runs) == 1 and again.content[0].text == first.content[0].text == "answer 1: 1 row\n  x  f.cpp:1"
    assert again.structured_content == first.structured_content
    ask(app, counting(runs), args={"name": "gemm", "budget": 2000})  # other arguments: asked again
    ask(app, counting(runs), name="calls")  # another tool
    assert len(runs) == 3
    db.gen = ("f.duckdb", (2, 7))  # `torchtalk index` replaced the file
    assert ask(app, counting(runs)).content[0].text.startswith("answer 4:")
    ask(app, counting(runs))
    assert len(runs) == 4


def test_a_call_without_arguments_given_or_get_status_is_never_kept():
    app, runs = app_for(GenDB()), []
    ctx = SimpleNamespace(request_context=SimpleNamespace(lifespan_context=app))
    for _ in range(2):
        anyio.run(lambda: run_tool(ctx, "trace", counting(runs)))  # no args: not kept
        ask(app, counting(runs), name="get_status", args={})
    assert len(runs) == 4


def test_an_unknown_name_is_kept_a_timeout_or_missing_db_is_not(monkeypatch):
    app, runs = app_for(GenDB()), []

    def unknown(con):
        runs.append(con)
        raise QueryError("no function named 'gemmm'", hint="did you mean 'gemm'?")

    for _ in range(2):
        with pytest.raises(ToolError, match=r"^query error: no function named 'gemmm' \(did you mean 'gemm'\?\)$"):
            ask(app, unknown)
    assert len(runs) == 1

    monkeypatch.setattr(db_module, "CALL_TIMEOUT_S", 0.2)
    slow = []
    for _ in range(2):
        with pytest.raises(ToolError, match="gave up after 0.2 s"):
            ask(app, lambda con: (slow.append(con), time.sleep(0.6)), args={"name": "slow"})
    assert len(slow) == 2

    gone = app_for(GenDB(fail=StoreError("no fact database yet for /src")))
    for _ in range(2):
        with pytest.raises(ToolError, match="no fact database yet"):
            ask(gone, counting(runs), args={"name": "x"})
    assert len(gone.cache) == 0


def test_an_edited_rule_file_drops_the_kept_answers(tmp_path, monkeypatch):
    from torchtalk.query import library

    monkeypatch.setattr(library, "KEY_CHECK_S", 0.0)  # the library's key taken at each call
    rules = tmp_path / "rules"
    rules.mkdir()
    rule = rules / "mine.dl"
    rule.write_text("my_rel(x) :- op(x, _, _, _).\n")
    app, runs = app_for(GenDB(), [rules]), []
    ask(app, counting(runs))
    ask(app, counting(runs))
    assert len(runs) == 1
    rule.write_text("my_rel(x) :- op(x, _, _, _), x != \"add\".\n")
    ask(app, counting(runs))
    assert len(runs) == 2


def test_the_library_key_is_taken_again_after_the_check_interval(tmp_path, monkeypatch):
    from torchtalk.mcp import cache
    from torchtalk.query import library

    rule = tmp_path / "mine.dl"
    rule.write_text("a(x) :- op(x, _, _, _).\n")
    key = cache.LibraryKey((tmp_path,))
    first = key.get()
    rule.write_text("a(x) :- op(x, _, _, _), x != \"add\".\n")
    assert key.get() == first  # within KEY_CHECK_S: not looked at again
    monkeypatch.setattr(library, "KEY_CHECK_S", 0.0)
    assert key.get() != first


def test_the_cache_is_bounded_and_can_be_turned_off(monkeypatch):
    cache = AnswerCache(size=2)
    for k in "abc":
        cache.put(k, k.upper())
    assert cache.get("a") is None and cache.get("b") == "B" and len(cache) == 2
    assert freeze({"functions": ["f", "g"], "budget": None}) == (("budget", None), ("functions", ("f", "g")))
    monkeypatch.setenv("TORCHTALK_MCP_CACHE", "0")
    from torchtalk.mcp.cache import enabled

    assert not enabled()


def test_a_slow_tool_runs_in_its_own_lane_and_a_quick_one_passes_it(monkeypatch):
    """Note [Lanes]: with the slow lane full (one `affected` running, one
    waiting for it), a `called_by` is answered at once; the waiting one runs
    after the first, never beside it."""
    monkeypatch.setattr(server, "slow_lane_size", lambda: 1)
    release = threading.Event()
    running, most, quick_done = [0], [0], []
    lock = threading.Lock()

    def slow(con):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        release.wait(10)
        with lock:
            running[0] -= 1
        return Table("slow", ("a",), (("x",),), 1)

    async def main():
        app = App(GenDB(), None, (), None, server.lanes())
        ctx = SimpleNamespace(request_context=SimpleNamespace(lifespan_context=app))
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: run_tool(ctx, "affected", slow))
            tg.start_soon(lambda: run_tool(ctx, "affected", slow))
            await anyio.sleep(0.3)  # the first is in its work, the second waits for the lane
            with anyio.fail_after(5):
                r = await run_tool(ctx, "called_by", lambda con: Table("quick", ("a",), (("y",),), 1))
            quick_done.append((r.content[0].text, running[0]))
            release.set()

    anyio.run(main)
    assert quick_done == [("quick: 1 row\n  y", 1)]  # answered while an `affected` ran
    assert most[0] == 1  # the slow lane ran one at a time


@pytest.mark.real_tree
def test_a_name_not_found_is_remembered_with_its_did_you_mean(real_db):
    """Note [DB info cache]: the resolver keeps a failed resolution too (its
    nearest names cost as much as a match), and raises a fresh copy each time."""
    from torchtalk import api
    from torchtalk.query.resolve import Resolver

    con = api.open_db(db=real_db, read_only=True)
    try:
        first = _not_found(Resolver(con), "gemmm")
        assert first.message == "no C++ function named 'gemmm'" and "did you mean" in (first.hint or "")
        first.hint = "changed by a caller"
        statements = []
        real = con.con
        con.con = SimpleNamespace(execute=lambda *a: statements.append(a) or real.execute(*a))
        again = _not_found(Resolver(con), "gemmm")
        con.con = real
        assert statements == [] and again is not first
        assert again.message == "no C++ function named 'gemmm'" and "did you mean" in again.hint
    finally:
        con.close()


def _not_found(resolver, text: str) -> QueryError:
    with pytest.raises(QueryError) as info:
        resolver.resolve(text, "fn")
    return info.value


def test_a_call_stopped_before_its_work_never_interrupts_the_connection_after():
    """Note [Stopped calls]: a call stopped while it waited for a lane or a
    connection gives the connection back untouched; its interrupts (they go
    on for the time limit while the work runs) must not reach the next call
    on it (under load: `called_by` failed with DuckDB's INTERRUPT error)."""
    seen = []
    db = SimpleNamespace(interrupt=seen.append)
    call = db_module.Call(db, limit=1.0)
    call.stop()  # the client left, or its time ran out, before the work started
    assert call.start("con") is False
    time.sleep(0.3)  # the interrupting thread runs every 50 ms
    assert seen == []
