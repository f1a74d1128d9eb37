"""The query server (Note [Query server] in torchtalk/qclient.py) in-process,
on the fixture DB: its socket's place and owner, a stale socket, the peer
check, and an answer the same as the CLI's own."""

from __future__ import annotations

import argparse
import io
import os
import socket
import stat
from pathlib import Path

import pytest
from test_query import build_db

from torchtalk import qclient, qserver
from torchtalk.cli.query import SERVED, answer, from_request, stale_note, to_request


@pytest.fixture
def run_dir(tmp_path, monkeypatch, runtime_dir):
    """A private $XDG_RUNTIME_DIR: this test's sockets, no one else's server."""
    d = runtime_dir
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(d))
    monkeypatch.setenv("TORCHTALK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TORCHTALK_CONFIG_DIR", str(tmp_path / "config"))
    return d


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "f.duckdb"
    build_db(path).close()
    return path


@pytest.fixture
def server(db, run_dir):
    from torchtalk.mcp.db import FactDB

    facts = FactDB(None, db)
    srv = qserver.QueryServer(facts, db)
    assert srv.start() is None
    yield srv
    srv.stop()
    facts.close()


def _args(db: Path, query: str, **kw) -> argparse.Namespace:
    base = {"query": query, "json": False, "limit": None, "all_matches": False, "explain": False, "explain_rows": 1}
    return argparse.Namespace(**{**base, **kw}, db=db, source=None, rules=[], engine=None, list=False,
                              dump_passes=None)


def _here(args) -> tuple[str, str, int]:
    """The answer as the CLI gives it in its own process."""
    from torchtalk.cli import report_error
    from torchtalk.errors import TorchTalkError

    out, err = io.StringIO(), io.StringIO()
    try:
        code = answer(args, out, err)
    except TorchTalkError as exc:
        code = report_error(exc, err)
    return out.getvalue(), err.getvalue(), code


def _served(args, db) -> tuple[str, str, int] | None:
    out, err = io.StringIO(), io.StringIO()
    code = qclient.ask_query(to_request(args, False), db, out, err, note=lambda: stale_note(args))
    return None if code is None else (out.getvalue(), err.getvalue(), code)


def test_socket_dir_is_private_and_made_once(run_dir):
    d = qclient.socket_dir(create=True)
    assert d == run_dir / "torchtalk"
    assert stat.S_IMODE(d.stat().st_mode) == 0o700
    path = qclient.socket_path(run_dir / "x.duckdb")
    assert path.parent == d and path.suffix == ".sock" and len(str(path)) < 100


def test_a_dir_others_can_enter_or_a_link_is_refused(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    assert not qclient.private_dir(shared)
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(mine)
    assert qclient.private_dir(mine) and not qclient.private_dir(tmp_path / "link")
    # $XDG_RUNTIME_DIR/torchtalk not private: the /tmp one is taken instead
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    (tmp_path / "torchtalk").mkdir(mode=0o777)
    (tmp_path / "torchtalk").chmod(0o777)
    assert qclient.socket_dir(create=True) == Path(f"/tmp/torchtalk-{os.getuid()}")


def test_a_runtime_dir_too_long_for_a_socket_is_passed_over(tmp_path, monkeypatch):
    long = tmp_path / ("d" * (qclient.MAX_PATH - len(str(tmp_path))))
    long.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(long))
    path = qclient.socket_path(tmp_path / "x.duckdb", create=True)
    assert path.parent == Path(f"/tmp/torchtalk-{os.getuid()}") and len(str(path)) <= qclient.MAX_PATH


def test_peer_check_reads_the_peer_uid(monkeypatch):
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with a, b:
        assert qclient.peer_uid(a) == os.getuid()
        assert qclient.same_user(a)
        monkeypatch.setattr(os, "getuid", lambda: os.geteuid() + 4242)  # as if another user's process asked
        assert not qclient.same_user(a)


def test_served_answers_are_the_cli_own(server, db):
    for args in (_args(db, "callees(at::native::matmul)"),
                 _args(db, "callees(at::native::matmul)", json=True, limit=1),
                 _args(db, "callers(matmull)"),  # a QueryError: one line and exit 1
                 _args(db, "callees(at::native::matmul)", explain=True)):
        assert _served(args, db) == _here(args)
    assert qclient.ping(db)["served"] == 4
    assert _here(_args(db, "callers(matmull)"))[2] == 1


def test_a_query_the_closing_server_interrupts_is_left_to_its_client(server, db, monkeypatch):
    """The pool's close interrupts a served query (a DuckDB INTERRUPT): that
    is no answer of the query's, so the client computes it itself."""
    import threading
    import time

    from torchtalk.cli import query as cli_query
    from torchtalk.errors import EngineError

    def closed_under_it(args, out, err, con=None, note=True):
        threading.Thread(target=server.facts.close, daemon=True).start()  # waits for this lease
        deadline = time.monotonic() + 5
        while not server.facts.closing and time.monotonic() < deadline:
            time.sleep(0.01)
        raise EngineError("DuckDB failed: INTERRUPT Error: Interrupted!")

    monkeypatch.setattr(cli_query, "answer", closed_under_it)
    assert _served(_args(db, "callees(at::native::matmul)"), db) is None
    assert server.declined == 1 and server.served == 0


def test_a_stale_socket_is_not_a_server_and_the_next_server_replaces_it(db, run_dir):
    from torchtalk.mcp.db import FactDB

    path = qclient.socket_path(db, create=True)
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))
    dead.close()  # the file stays, nobody listens: a server killed with SIGKILL
    assert path.exists() and qclient.ping(db) is None
    assert _served(_args(db, "callees(at::native::matmul)"), db) is None  # the CLI then runs it itself
    facts = FactDB(None, db)
    srv = qserver.QueryServer(facts, db)
    try:
        assert srv.start() is None
        assert qclient.ping(db)["pid"] == os.getpid()
        other = qserver.QueryServer(facts, db)
        assert other.start() == f"pid {os.getpid()} serves them already"
    finally:
        srv.stop()
        facts.close()
    assert not path.exists()


def test_a_client_of_another_config_dir_is_declined(server, db, monkeypatch, tmp_path):
    monkeypatch.setenv("TORCHTALK_CONFIG_DIR", str(tmp_path / "other"))  # its rules/ may differ
    assert _served(_args(db, "callees(at::native::matmul)"), db) is None
    assert qclient.ping(db)["declined"] == 1


def test_request_round_trip_and_malformed_requests(db):
    args = _args(db, "impact(gemm)", json=True, limit=3)
    back = from_request(to_request(args, True))
    assert {k: getattr(back, k) for k in SERVED} == {k: getattr(args, k) for k in SERVED}
    assert back.db == db.absolute() and back.engine is None and back.rules == []
    for bad in ({"limit": "3"}, {"json": 1}, {"explain_rows": True}, {"query": None}):
        with pytest.raises(ValueError):
            from_request({**to_request(args, False), **bad})


def test_disabled_by_env(monkeypatch):
    monkeypatch.setenv("TORCHTALK_SERVER", "0")
    assert not qclient.enabled()
    monkeypatch.setenv("TORCHTALK_SERVER", "1")
    assert qclient.enabled()
