"""`torchtalk query` answered by a running `torchtalk watch` (Note [Query
server] in torchtalk/qclient.py), real processes on the real tree's DB: the
bytes on stdout and stderr and the exit code are those of the query run in
its own process (TORCHTALK_SERVER=0), and the server counts it. Each module
run has its own $XDG_RUNTIME_DIR, so its server is the only one its clients
see (an xdist worker each, or a developer's own watch, are left alone)."""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from torchtalk import qclient

pytestmark = pytest.mark.real_tree

ROOT = Path(__file__).resolve().parents[1]


class Proc:
    """A TorchTalk process whose stdout lines are read as they come."""

    def __init__(self, args: list[str], env: dict) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "torchtalk", *args], env=env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [self.lines.put(line) for line in self.proc.stdout], daemon=True).start()

    def line_with(self, text: str, timeout: float = 120) -> str:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no line with {text!r} after {timeout} s") from None
            if text in line:
                return line

    def stop(self) -> tuple[int | str, str]:
        """SIGTERM; (exit code, stderr)."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = "still running 60 s after SIGTERM"
        return code, self.proc.stderr.read()


def _env(run: Path, **extra) -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), "XDG_RUNTIME_DIR": str(run), **extra}


@contextmanager
def _as_client(run: Path):
    """This process asks the servers of `run`, as the clients do."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_RUNTIME_DIR", str(run))
        yield


def _wait_warm(db: Path, run: Path, timeout: float = 180) -> dict:
    deadline = time.monotonic() + timeout
    with _as_client(run):
        while True:
            status = qclient.ping(db)
            if status and status["warm"]:
                return status
            assert time.monotonic() < deadline, f"not warm after {timeout} s: {status}"
            time.sleep(0.5)


@pytest.fixture(scope="module")
def served(real_db, tree, tmp_path_factory):
    """`torchtalk watch` of the real DB (its first update a no-op), warm."""
    run = tmp_path_factory.mktemp("run")
    run.chmod(0o700)
    watch = Proc(["watch", "--db", str(real_db), "--source", str(tree)], _env(run))
    try:
        line = watch.line_with("serving `torchtalk query`")
        sock = Path(line.rsplit(" at ", 1)[1].strip())
        assert sock.parent == run / "torchtalk"
        _wait_warm(real_db, run)
        yield real_db, run, sock
    finally:
        code, err = watch.stop()
    assert code == 0 and "Traceback" not in err, err  # (it may have said it waited for another's index)
    assert not sock.exists()


def _query(args: list[str], env: dict) -> tuple[str, str, int]:
    out = subprocess.run([sys.executable, "-m", "torchtalk", "query", *args], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=300)
    return out.stdout, out.stderr, out.returncode


CASES = [
    ["callees(matmul)"],  # a table, with notes and "… N more" on stderr
    ["trace(torch.matmul)", "--limit", "10"],
    ["tests(softmax)", "--json", "--limit", "50", "--all"],
    ["callers(cpublas::gemm)", "--explain"],
    ["impact(at::native::cpublas::gemm, depth=3)", "--json"],
    ["callers(no_such_function_zz)"],  # unknown name: one line, exit 1
    ["impact(cpublas::gemm, depth=99)"],  # a bad depth
    ["nosuch(x)"],  # no such query
]


@pytest.mark.parametrize("args", CASES, ids=lambda a: " ".join(a))
def test_served_answer_is_the_process_own(served, args):
    db, run, _sock = served
    with _as_client(run):
        before = qclient.ping(db)["served"]
    here = _query([*args, "--db", str(db)], _env(run, TORCHTALK_SERVER="0"))
    there = _query([*args, "--db", str(db)], _env(run))
    assert there == here
    with _as_client(run):
        assert qclient.ping(db)["served"] == before + 1
    if args[0].startswith(("callers(no_such", "impact(cpublas::gemm, depth=99", "nosuch")):
        assert here[2] == 1 and here[1].startswith("torchtalk: ") and here[0] == ""
    else:
        assert here[2] == 0 and here[0]


def test_engine_given_runs_in_the_process(served):
    db, run, _sock = served
    with _as_client(run):
        before = qclient.ping(db)["served"]
    out = _query(["callees(matmul)", "--db", str(db), "--engine", "duckdb"], _env(run))
    assert out[2] == 0
    with _as_client(run):
        assert qclient.ping(db)["served"] == before


def test_status_names_the_server(served):
    import json

    db, run, sock = served
    out = subprocess.run([sys.executable, "-m", "torchtalk", "status", "--db", str(db), "--json"],
                         capture_output=True, text=True, env=_env(run), cwd=ROOT, timeout=120)
    server = json.loads(out.stdout)["server"]
    assert server["socket"] == str(sock) and server["warm"] is True


def test_a_stale_socket_is_answered_in_the_process(real_db, tmp_path, runtime_dir):
    """A socket file nobody listens at (its server killed with SIGKILL): the
    query answers, in its own process, as without a server."""
    run = runtime_dir
    with _as_client(run):
        path = qclient.socket_path(real_db, create=True)
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))
    dead.close()
    args = ["callees(matmul)", "--db", str(real_db)]
    stale = _query(args, _env(run))
    assert stale[2] == 0 and stale == _query(args, _env(run, TORCHTALK_SERVER="0"))
    assert path.exists()


def test_mcp_serve_serves_and_the_stale_note_is_said(tree, tmp_path, runtime_dir):
    """`mcp-serve` answers `torchtalk query` too; a tree changed since its
    index is noted on stderr as by the process; SIGTERM removes the socket
    (uvicorn's shutdown runs the lifespan's end)."""
    from tests.test_mcp_server import _mini_tree

    src = _mini_tree(tree, tmp_path / "mini")
    db = tmp_path / "db" / "mini.duckdb"
    run = runtime_dir
    env = _env(run, TORCHTALK_CACHE_DIR=str(tmp_path / "cache"))
    assert subprocess.run([sys.executable, "-m", "torchtalk", "index", "--source", str(src), "--db", str(db),
                           "--layers", "ops"], env=env, cwd=ROOT, capture_output=True, timeout=300).returncode == 0
    yaml = src / "aten/src/ATen/native/native_functions.yaml"
    yaml.write_text(yaml.read_text() + "\n- func: tt_unindexed(Tensor self) -> Tensor\n")
    server = Proc(["mcp-serve", "--db", str(db), "--transport", "http", "--port", str(_free_port())], env)
    sock = None
    try:
        deadline = time.monotonic() + 60
        with _as_client(run):
            while qclient.ping(db) is None:
                if time.monotonic() > deadline or server.proc.poll() is not None:
                    raise AssertionError(f"no query server: {server.stop()}")  # its stderr, once stopped
                time.sleep(0.2)
        with _as_client(run):
            sock = qclient.socket_path(db)
        args = ["search(abs)", "--db", str(db)]
        here = _query(args, {**env, "TORCHTALK_SERVER": "0"})
        there = _query(args, env)
        assert there == here and "the tree changed since it was indexed" in here[1]
        with _as_client(run):
            assert qclient.ping(db)["served"] == 1
    finally:
        code, _err = server.stop()
    assert code == -signal.SIGTERM  # uvicorn shuts down, then raises the signal it caught again
    assert not sock.exists()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _query_on_a_terminal(args: list[str], env: dict) -> tuple[bytes, str, int]:
    """`torchtalk query` with its stdout on a pseudo-terminal (a table is drawn)."""
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "torchtalk", "query", *args], stdout=slave,
                            stderr=subprocess.PIPE, env=env, cwd=ROOT)
    os.close(slave)
    out = bytearray()
    while True:
        try:
            chunk = os.read(master, 1 << 16)
        except OSError:  # EIO: the process closed its end
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    err = proc.stderr.read().decode()
    return bytes(out), err, proc.wait(timeout=300)


def test_a_terminal_gets_the_same_table(served):
    db, run, _sock = served
    args = ["trace(torch.matmul)", "--db", str(db)]
    here = _query_on_a_terminal(args, _env(run, TORCHTALK_SERVER="0"))
    assert here[2] == 0 and here[0] != _query(args, _env(run, TORCHTALK_SERVER="0"))[0].encode()  # not the TSV
    assert _query_on_a_terminal(args, _env(run)) == here


def test_served_answers_follow_each_update(tree, tmp_path, runtime_dir):
    """After each update of the watched tree the served answer has the new
    rows, and each update is in place: the pool closes while the index runs
    in the same process (Note [One process, one instance per file])."""
    from tests.test_mcp_server import _mini_tree

    src = _mini_tree(tree, tmp_path / "mini")
    db = tmp_path / "db" / "mini.duckdb"
    run = runtime_dir
    env = _env(run, TORCHTALK_CACHE_DIR=str(tmp_path / "cache"))
    watch = Proc(["watch", "--source", str(src), "--db", str(db), "--layers", "ops"], env)
    try:
        watch.line_with("serving `torchtalk query`")
        yaml = src / "aten/src/ATen/native/native_functions.yaml"
        for names in (("tt_first", "tt_second"), ("tt_third",)):  # two updates with no query between them
            for name in names:
                yaml.write_text(yaml.read_text() + f"\n- func: {name}(Tensor self) -> Tensor\n")
                assert "updated (ops ran)" in watch.line_with("native_functions.yaml: ")
            with _as_client(run):
                before = qclient.ping(db)["served"]
            out, err, code = _query(["search(tt_)", "--db", str(db)], env)
            assert code == 0 and all(f"{name}\t" in out for name in names), (out, err)
            with _as_client(run):
                assert qclient.ping(db)["served"] == before + 1
    finally:
        code, err = watch.stop()
    assert code == 0 and "Traceback" not in err, err
