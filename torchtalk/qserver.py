"""`torchtalk query` answered by a TorchTalk process already running for its DB.

Note [Query server]
~~~~~~~~~~~~~~~~~~~
A `torchtalk query` process spends most of its time importing DuckDB and
the Datalog layer and opening the DB, while a warm Session of the in-memory
engine answers the same query in a few ms (Note [Engine per session] in
torchtalk/connmemo.py). So a long-lived process that holds the DB's
`FactDB` pool (`torchtalk watch`, `mcp-serve`) also serves `torchtalk
query` on a Unix socket (`QueryServer`): `qclient.socket_path(db)`, named by
a hash of the DB's resolved path, in a directory only its user can enter
(`$XDG_RUNTIME_DIR/torchtalk`, else `/tmp/torchtalk-<uid>`). One request per
connection, each in a thread of its own on a connection leased from the
pool: the client sends one JSON line (the query's arguments as the CLI
parsed them, whether its stdout is a terminal), the server runs the CLI's
own `answer` (torchtalk/cli/query.py) on streams that record what is
written, and sends back one JSON object: the writes in order and the exit
code (a TorchTalkError: the CLI's one line and exit 1). The client replays
the writes on its stdout and stderr, so the bytes, and their order on a
terminal or in `2>&1`, are those of the query run in the process. The
stale-index note, the last line of an answer (Note [Stale index]: 7K
stats, 20-35 ms, more than most answers take in memory), is the client's:
it computes it while the server answers, and says it after the replay
when the exit code is 0, as `answer` does.

The client asks only where the answer cannot differ: no --rules, --list,
--dump-passes or --engine; the server declines ({"declined": why}) a client
of another torchtalk package or version, or of another config dir (whose
rules/ the library reads). A declined request, and any failure to ask (no
socket, a stale one, a server of another uid, a reply cut short), runs the
query in the process, as does TORCHTALK_SERVER=0. Each side checks the
other's uid (SO_PEERCRED). A request whose client leaves (Ctrl-C closes the
connection) or that runs past `call_timeout()` (30 s) is stopped as an MCP
call is (Note [Stopped calls] in torchtalk/mcp/db.py); an overrun is
declined, and its client computes it itself: the CLI has no time limit.
So is a request whose server closes under it (its pool interrupts the
connections leased): the interrupt is not the query's answer.
The server removes its socket when it stops; one nobody listens at (its
server killed) is replaced by the next server. While `torchtalk watch`
updates the DB in its own process the pool is closed, and calls wait for
the update (Note [One process, one instance per file] in torchtalk/mcp/db.py).

The client's side, and where the socket is, are torchtalk/qclient.py.

Example:
    >>> server = QueryServer(facts, db); server.start()  # doctest: +SKIP
    >>> qclient.ping(db)["served"]  # doctest: +SKIP
    0
"""


from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path

from torchtalk.qclient import PROTOCOL, client_key, ping, same_user, socket_path

READ_TIMEOUT_S = 5.0  # the server waits this long for a request's line
MAX_REQUEST = 1 << 16


class _Recorded:
    """A text stream that records its writes (`fd` 1 or 2) in `writes`, in
    the order of both streams, and says it is a terminal when the client's is."""

    def __init__(self, fd: int, writes: list, tty: bool) -> None:
        self.fd, self.writes, self.tty = fd, writes, tty

    def write(self, text: str) -> int:
        if self.writes and self.writes[-1][0] == self.fd:
            self.writes[-1][1] += text
        else:
            self.writes.append([self.fd, text])
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return self.tty


class QueryServer:
    """Answers `torchtalk query` for fact DB `db` on connections of `facts`,
    a `FactDB` pool (Note [Query server]). `start`, then `stop`."""

    def __init__(self, facts, db: str | Path) -> None:
        self.facts, self.db = facts, Path(db).resolve()
        self.key = client_key()  # a client of another key is declined (its answers could differ)
        self.path: Path | None = None
        self.served = 0  # queries answered
        self.declined = 0
        self.busy = 0.0  # seconds spent on the queries answered, from request to reply
        self._sock: socket.socket | None = None
        self._ino: int | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self) -> str | None:
        """Listen (returns at once); None when serving, else why not, in a few words."""
        path = socket_path(self.db, create=True)
        if path is None:
            return "no private directory for its socket"
        live = ping(self.db)
        if live is not None:
            return f"pid {live.get('pid')} serves them already"
        # bound under a name of its own, then renamed over the path: a stale
        # socket (its server killed) is replaced, never unlinked under another's
        tmp = path.with_name(f".{os.getpid()}.tmp")  # no longer than the socket's name (MAX_PATH)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            tmp.unlink(missing_ok=True)
            sock.bind(str(tmp))
            sock.listen(64)
            os.replace(tmp, path)
            self._ino = os.stat(path).st_ino
        except OSError as exc:
            sock.close()
            tmp.unlink(missing_ok=True)
            return f"cannot listen at {path}: {exc.strerror or exc}"
        self._sock, self.path = sock, path
        self._thread = threading.Thread(target=self._accept, name="torchtalk-qserver", daemon=True)
        self._thread.start()
        return None

    def stop(self) -> None:
        """Stop listening and remove the socket (unless another server's replaced it)."""
        sock, self._sock = self._sock, None
        if sock is None:
            return
        try:
            sock.shutdown(socket.SHUT_RDWR)  # wakes the accept
        except OSError:
            pass
        sock.close()
        try:
            if self.path is not None and os.stat(self.path).st_ino == self._ino:
                self.path.unlink()
        except OSError:
            pass
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def status(self) -> dict:
        """What a ping answers: pid, DB, socket, whether the pool's warm has
        finished (Note [Warm queries]), queries answered and declined, and
        the seconds spent answering (what a client's process adds to them
        is its own cost: bench/query.py --server)."""
        return {"pid": os.getpid(), "db": str(self.db), "socket": str(self.path),
                "warm": self.facts.warmed.is_set(), "served": self.served, "declined": self.declined,
                "busy_s": round(self.busy, 6)}

    def _accept(self) -> None:
        while self._sock is not None:
            try:
                conn, _ = self._sock.accept()
            except OSError:  # stopped, or a transient failure (out of fds): go on while listening
                time.sleep(0.05)
                continue
            threading.Thread(target=self._handle, args=(conn,), name="torchtalk-qserver-call", daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            try:
                if not same_user(conn):
                    return
                conn.settimeout(READ_TIMEOUT_S)
                message = json.loads(_read_line(conn))
                conn.settimeout(None)
                if not isinstance(message, dict) or message.get("protocol") != PROTOCOL:
                    reply = {"declined": f"protocol {PROTOCOL} only"}
                elif message.get("op") == "ping":
                    reply = self.status()
                elif message.get("op") == "query":
                    t = time.perf_counter()
                    reply = self._query(message, conn)
                    with self._lock:
                        self.served += "writes" in reply
                        self.declined += "declined" in reply
                        self.busy += (time.perf_counter() - t) if "writes" in reply else 0.0
                else:
                    reply = {"declined": "unknown request"}
                conn.sendall(json.dumps(reply).encode())
                # the end of the reply, at once: a close would wait for the
                # guard's select on the connection to return (and wakes it)
                conn.shutdown(socket.SHUT_RDWR)
            except (OSError, ValueError):  # the client left, or sent no request
                return

    def _query(self, message: dict, conn: socket.socket) -> dict:
        from torchtalk.cli.query import answer, from_request
        from torchtalk.errors import TorchTalkError
        from torchtalk.mcp.db import Call, call_timeout

        why = self._refuse(message)
        if why:
            return {"declined": why}
        try:
            args = from_request(message)
        except (KeyError, TypeError, ValueError) as exc:
            return {"declined": f"bad request: {exc}"}
        limit = call_timeout()
        work = Call(self.facts, limit)
        stopped: list[str] = []
        threading.Thread(target=_guard, args=(conn, work, limit, stopped), name="torchtalk-qserver-guard",
                         daemon=True).start()
        writes: list = []
        out, err = _Recorded(1, writes, bool(message.get("stdout_tty"))), _Recorded(2, writes, False)
        try:
            with self.facts.lease() as con:
                if not work.start(con):
                    return {"declined": stopped[0] if stopped else "stopped"}
                try:
                    code = answer(args, out, err, con=con, note=False)  # the client says it
                except TorchTalkError as exc:
                    if work.stopped:
                        return {"declined": stopped[0] if stopped else "stopped"}
                    if self.facts.closing:  # interrupted by the pool's close: not the query's own error
                        return {"declined": "the server is closing"}
                    from torchtalk.cli import report_error

                    code = report_error(exc, err)
                finally:
                    work.finish()
                    self.facts.answered.set()  # warming may start (Note [Warm queries])
        except Exception as exc:  # a DuckDB error, a bug, or stopped: the client runs it itself
            return {"declined": stopped[0] if stopped and work.stopped else f"{type(exc).__name__}: {exc}"}
        return {"writes": writes, "code": int(code or 0)}

    def _refuse(self, message: dict) -> str | None:
        """Why this server cannot answer `message` as its client would, or None."""
        from torchtalk.paths import resolve_db

        if message.get("client") != self.key:
            return "another torchtalk package, version or config dir"
        try:
            db = resolve_db(source=message.get("source"), db=message.get("db")).resolve()
        except Exception as exc:  # noqa: BLE001 - the client's own run says it properly
            return f"no DB: {exc}"
        return None if db == self.db else f"serves {self.db}, not {db}"


def _read_line(conn: socket.socket) -> bytes:
    data = bytearray()
    while not data.endswith(b"\n"):
        chunk = conn.recv(4096)
        if not chunk:
            break
        data += chunk
        if len(data) > MAX_REQUEST:
            raise ValueError("request too long")
    return bytes(data)


def _guard(conn: socket.socket, work, limit: float, stopped: list[str]) -> None:
    """Stop `work` (a `Call`) when its client leaves (its connection becomes
    readable: a client sends nothing after its request, so that is its end)
    or when it runs past `limit` seconds; `stopped` gets why."""
    import select

    deadline = time.monotonic() + limit
    while not work.done:
        left = deadline - time.monotonic()
        if left <= 0:
            stopped.append(f"gave up after {limit:g} s")
            work.stop()
            return
        try:
            ready, _, _ = select.select([conn], [], [], min(left, 0.2))
        except (OSError, ValueError):  # closed: the answer was sent
            return
        if ready and not work.done:
            stopped.append("the client left")
            work.stop()
            return
