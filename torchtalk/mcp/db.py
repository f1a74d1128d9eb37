"""The fact DB behind the server, and the background index that refreshes it.

Note [Serving while indexing]: the server answers at once from the DB it finds
(`torchtalk index` replaces the DB file atomically, so a read-only connection
never sees a half-written one). When no DB exists yet, or `--reindex` asks,
the server runs `torchtalk index` as a child process in stages, the quick
layers first (ops, python, tests) and then everything (the C++ layer takes
longest). Before each call `FactDB.connection` checks the file's identity and
reopens it when an index run replaced it, so answers grow as layers land;
`get_status` says which stage is running. While serving a `--source`, the
server also watches the tree (Note [Watching] in torchtalk/watch.py): each
debounced batch of changed files is an update in place, run by one child
process that keeps what the layers read between updates (Note [Update
worker] in torchtalk/updater.py), and `get_status` lists the files pending
and the update running.
"""

from __future__ import annotations

import dataclasses
import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from torchtalk.errors import StoreError, TorchTalkError

QUICK_LAYERS = ("ops", "python", "tests")


def stages() -> tuple[tuple[str, str | None], ...]:
    """(label, --layers value or None for all) run in order: the quick layers that
    exist in this checkout, then everything (the C++ layer takes longest)."""
    import importlib.util

    from extractors.layers import LAYERS

    quick = [
        layer.name for layer in LAYERS
        if layer.name in QUICK_LAYERS and importlib.util.find_spec(layer.module) is not None
    ]
    first = ((", ".join(quick), ",".join(quick)),) if quick else ()
    return (*first, ("all layers (C++/CUDA included)", None))


@dataclass(frozen=True)
class IndexState:
    """What the background index is doing: `stage` running (or '' when idle)."""

    stage: str
    pid: int | None
    log: str | None
    failed: str | None  # the last failure, one line
    watching: bool = False
    pending: tuple[str, ...] = ()  # changed files not yet in an update
    pending_since: float | None = None  # time.time() of the first of them
    compiler: str | None = None  # the compiler tier's run in the background, one line (None: none)


# Note [Compiler tier in the background]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# With `compiler` on (mcp-serve's default where libclang imports), the server
# runs `torchtalk index --precise` after its fast stages, at start when the DB
# has no compiler tier or has TUs pending, and after each update of the
# watched tree (Note [Compiler tier catching up] in torchtalk/index.py). The
# per-TU cache makes each run parse only what changed. A fast update never
# waits for it: a new batch of changes terminates the compiler run (the TUs
# it parsed are in the cache already; the index is swapped in whole or not
# at all) and holds off one about to start, runs the fast update, then starts
# the compiler run again.


class Indexer:
    """Runs `torchtalk index` stages in a background thread, one child at a
    time, and the compiler tier after them (Note [Compiler tier in the background])."""

    def __init__(self, source: Path, db: Path | None, log: Path, compiler: bool = False) -> None:
        self.source, self.db, self.log, self.compiler = source, db, log, compiler
        self._state = IndexState("", None, None, None)
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()
        self._watcher = None
        self._compiler_proc: subprocess.Popen | None = None  # the last compiler child spawned
        self._compiler_busy = False  # a compiler run is claimed (its thread may not have spawned yet)
        self._compiler_note: str | None = None
        self._held = False  # a fast update runs: no compiler child may start
        self._stopped = False
        self._staged = False  # the stages run (`start`): the update worker warms after them
        self._worker: subprocess.Popen | None = None  # Note [Update worker] in torchtalk/updater.py
        self._asking = threading.Lock()  # one command at a time to the worker
        self._requests: queue.Queue = queue.Queue()  # (command, reply queue) for `_serve_worker`; None ends it

    @property
    def state(self) -> IndexState:
        with self._lock:
            state = dataclasses.replace(self._state, compiler=self._compiler_note)
        if self._watcher is None:
            return state
        pending = self._watcher.pending
        return dataclasses.replace(state, watching=True, pending=pending.files, pending_since=pending.since)

    def catch_up(self) -> None:
        """Start the compiler tier's run in a thread, unless it is off or running."""
        if not self.compiler:
            return
        with self._lock:
            if self._compiler_busy or self._stopped:
                return
            self._compiler_busy = True
            self._compiler_note = "starting"
        threading.Thread(target=self._run_compiler, name="torchtalk-compiler", daemon=True).start()

    def _run_compiler(self) -> None:
        try:
            with self._lock:  # spawned under the lock: _preempt and stop see the child or hold it off
                if self._stopped or self._held:
                    return  # the update that holds it off starts it again
                with open(self.log, "ab") as out:
                    proc = subprocess.Popen(self._command(None) + ["--precise"], stdout=out, stderr=out,
                                            stdin=subprocess.DEVNULL)
                self._compiler_proc = proc
                self._compiler_note = f"compiler tier (libclang) running, pid {proc.pid}"
            code = proc.wait()
            with self._lock:
                if code == 0:
                    self._compiler_note = None
                elif code < 0:  # terminated: a fast update came first, or the server stops
                    self._compiler_note = "compiler tier interrupted; it starts again after the update"
                else:
                    self._compiler_note = f"compiler tier failed (exit {code}); see {self.log}"
        finally:
            with self._lock:
                self._compiler_busy = False

    def _preempt(self) -> None:
        """Hold off the compiler tier and stop its running child, so the fast
        update needs no wait for the DB's lock (`_release` lets it run again)."""
        with self._lock:
            self._held = True
            proc = self._compiler_proc
        if proc is not None and proc.poll() is None:
            proc.terminate()
            proc.wait()

    def _release(self) -> None:
        with self._lock:
            self._held = False
        self.catch_up()

    def watch(self) -> None:
        """Watch the tree and update the index after each batch of changes
        (Note [Watching]); returns at once."""
        from torchtalk.watch import Watcher

        threading.Thread(target=self._serve_worker, name="torchtalk-updates", daemon=True).start()
        self._watcher = Watcher(self.source, self._update)
        self._watcher.start()
        if not self._staged:  # else once the stages are done
            threading.Thread(target=self._warm, name="torchtalk-warm", daemon=True).start()

    def _update(self, files: frozenset[str]) -> None:
        from torchtalk.watch import describe

        self._preempt()
        try:
            self._ask("update", f"update after changes to {describe(files)}")
        finally:
            self._release()

    def _ask(self, command: str, label: str) -> None:
        """Have the update worker run `command` (Note [Update worker] in
        torchtalk/updater.py), saying `label` meanwhile; a failure, or the
        worker's exit, is reported in the state (a new worker serves the next)."""
        with self._asking:
            reply: queue.Queue = queue.Queue(1)
            with self._lock:
                self._state = IndexState(label, self._worker.pid if self._worker else None, str(self.log),
                                         self._state.failed)
            self._requests.put((command, reply))
            answer = reply.get()
            with open(self.log, "a") as out:  # what each update did, beside the index runs' output
                out.write(f"{label}: {json.dumps(answer)}\n")
            failed = None if answer.get("ok") else f"{label} failed: {answer.get('error')}; see {self.log}"
            with self._lock:
                self._state = IndexState("", None, str(self.log), failed or self._state.failed)

    def _serve_worker(self) -> None:
        """The thread that owns the update worker: it spawns it, so the
        worker, told to die with the thread that spawned it (prctl
        PDEATHSIG), lives as long as this server watches, and passes it the
        commands of `_ask` one at a time."""
        while (item := self._requests.get()) is not None:
            command, reply = item
            proc = self._worker
            if proc is None or proc.poll() is not None:
                proc = self._worker = self._spawn_worker()
            try:
                proc.stdin.write(command + "\n")
                proc.stdin.flush()
                line = proc.stdout.readline()
            except OSError:  # its stdin closed: it exited
                line = ""
            try:
                reply.put(json.loads(line) if line else {"ok": False, "error": f"exited {proc.wait()}"})
            except ValueError:
                reply.put({"ok": False, "error": f"said {line.strip()[:200]!r}"})

    def _spawn_worker(self) -> subprocess.Popen:
        cmd = [sys.executable, "-m", "torchtalk.updater", "--source", str(self.source), "--parent", str(os.getpid())]
        if self.db is not None:
            cmd += ["--db", str(self.db)]
        with open(self.log, "ab") as out:
            return subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=out, text=True)

    def _warm(self) -> None:
        """The update worker's memo read before the first edit (Note [Warmed memo] in torchtalk/warm.py)."""
        if self._watcher is not None and not self._stopped:
            self._ask("warm", "reading the layers' state for the next update")

    def start(self) -> None:
        """Start the stages in a daemon thread (returns at once). The state says
        "starting" from here on, so a `get_status` that comes before the thread
        has spawned its first child already reports the index as running."""
        with self._lock:
            self._state = IndexState("starting", None, str(self.log), None)
            self._staged = True
        threading.Thread(target=self._run_all, name="torchtalk-index", daemon=True).start()

    def _run_all(self) -> None:
        for label, layers in stages():
            self._run_stage(label, layers)
        with self._lock:  # idle, also when there was no stage to run
            self._state = IndexState("", None, str(self.log), self._state.failed)
        self._warm()
        self.catch_up()

    def _command(self, layers: str | None) -> list[str]:
        cmd = [sys.executable, "-m", "torchtalk", "index", "--source", str(self.source), "--quiet"]
        if self.db is not None:
            cmd += ["--db", str(self.db)]
        if layers:
            cmd += ["--layers", layers]
        return cmd

    def _run_stage(self, label: str, layers: str | None) -> None:
        """One `torchtalk index` child; a failure is reported in the state."""
        cmd = self._command(layers)
        with open(self.log, "ab") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=out, stdin=subprocess.DEVNULL)
        with self._lock:
            self._proc = proc
            self._state = IndexState(label, proc.pid, str(self.log), self._state.failed)
        code = proc.wait()
        failed = None if code == 0 else f"`torchtalk index` ({label}) exited {code}; see {self.log}"
        with self._lock:  # a failed stage is reported; the next one still runs
            self._state = IndexState("", None, str(self.log), failed or self._state.failed)

    def stop(self) -> None:
        """Stop watching and terminate the running children, if any."""
        watcher, self._watcher = self._watcher, None
        self._requests.put(None)
        with self._lock:
            self._stopped = True
            procs = (self._proc, self._compiler_proc, self._worker)
        for proc in procs:
            if proc is not None and proc.poll() is None:
                proc.terminate()
        if watcher is not None:
            watcher.stop()


def compiler_available() -> bool:
    """Whether the compiler tier can run here (libclang's bindings import)."""
    import importlib.util

    return importlib.util.find_spec("clang") is not None and importlib.util.find_spec("extractors.clang") is not None


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns)


# Note [Connection pool]: the tools' calls run in worker threads, each on a
# read-only connection of the pool it leases for the call (`FactDB.lease`), so
# concurrent HTTP clients are answered in parallel and a slow call holds one
# connection, not the server. The pool's connections are cursors of one
# `store.open_db` connection (DuckDB keeps one database instance per file:
# the blocks and compiled plans are shared, and `SET threads = 1` is the
# instance's, Note [One thread per query]) and share its Session memo (Note
# [DB info cache]: what a read-only connection reads never changes, so what
# one connection computed holds for the others). At most POOL_SIZE are open;
# a call beyond waits for one. When `torchtalk index` replaces the file, new
# calls wait until the leased connections are back (each call is bounded by
# run_tool's timeout), then every connection of the old file is closed
# before the new one opens (DuckDB would hand back the old instance while
# any connection of the path is open).
POOL_SIZE = 8
# Note [One process, one instance per file]: DuckDB keeps one database
# instance per path in a process while any connection of it is open, and a
# connection opened on that path gets that instance, whatever file the path
# names now. So an index run in a process whose pool is open on the DB
# (`torchtalk watch` answering queries, Note [Query server] in
# torchtalk/qserver.py) would read the file the pool opened, not the one its
# last update renamed over it: the DB's meta of the update before (then it
# builds the DB again instead of updating it in place), and its rows. The
# index runs inside `FactDB.paused()`: the pool closes first, and opens on
# the new file after. (mcp-serve's index runs in a child process.)
# The engine of the pool's queries (Note [Engine per session] in
# torchtalk/connmemo.py); TORCHTALK_MCP_ENGINE=duckdb restores the embedded one.
ENGINE = os.environ.get("TORCHTALK_MCP_ENGINE", "memory")


class FactDB:
    """The pool of read-only connections the tools use, reopened when the DB
    file is replaced (Note [Connection pool]). A call leases one with `lease`.
    """

    def __init__(self, source: Path | None, db: Path | None) -> None:
        self.source, self.explicit = source, db
        self._cond = threading.Condition()
        self._con = None  # the pool's root connection; the others are its cursors
        self._idle: list = []  # connections of the pool not leased
        self._open: list = []  # every open connection of the pool
        self._leased = 0
        self._path: Path | None = None
        self._ident: tuple[int, int] | None = None
        self._closing = threading.Event()  # the server is closing
        self._paused = 0  # `paused` blocks running: no connection opens
        self._halt = threading.Event()  # the running warm stops (the pool reopens, or closes)
        self._rules: tuple[Path, ...] = ()
        self._warm_cursor = None
        self.answered = threading.Event()  # set when the first tool call is answered
        self.warm_progress: tuple[int, int] | None = None  # (warm queries run, of how many); None before they start
        self.warmed = threading.Event()  # set when the warm of the file served now has finished
        self._warm_thread: threading.Thread | None = None

    @property
    def closing(self) -> bool:
        """The server closes: `close` interrupts the connections leased."""
        return self._closing.is_set()

    def path(self) -> Path | None:
        """The DB file, or None while nothing is indexed for the source."""
        if self.explicit is not None:
            return self.explicit
        from torchtalk import api

        try:
            return Path(api.resolve_db(source=self.source, db=None))
        except TorchTalkError:
            return None

    def _current(self) -> tuple[Path, tuple[int, int]]:
        """The DB file now and its identity; StoreError when nothing is indexed."""
        path = self._path or self.path()
        ident = _identity(path) if path is not None else None
        if ident is None:
            path = self.path()  # a first index may have created it since
            ident = _identity(path) if path is not None else None
        if path is None or ident is None:
            where = f"--source {self.source}" if self.source else f"--db {self.explicit}"
            raise StoreError(
                f"no fact database yet for {self.source or self.explicit}",
                hint=f"run `torchtalk index {where}` (get_status shows a running index)",
            )
        return path, ident

    def generation(self) -> tuple | None:
        """The DB file now and its identity (Note [Answer cache]), or None
        while nothing is indexed."""
        try:
            return self._current()
        except StoreError:
            return None

    def served(self) -> tuple | None:
        """The DB file the pool's connections read and its identity: what
        `generation` was when they opened (call it while holding a lease:
        the pool is not reopened under a leased connection)."""
        return (self._path, self._ident) if self._con is not None else None

    @contextmanager
    def lease(self, optional: bool = False):
        """A connection of the pool for one call, given back after it. StoreError
        when nothing is indexed (None instead when `optional`)."""
        try:
            con = self._acquire()
        except StoreError:
            if not optional:
                raise
            yield None
            return
        try:
            yield con
        finally:
            self._release(con)

    def _acquire(self):
        with self._cond:
            while True:
                if self._closing.is_set() and self._con is None and self._path is not None:
                    raise StoreError("the server is shutting down")
                if self._paused:
                    self._cond.wait()
                    continue
                path, ident = self._current()
                if self._con is None or (path, ident) != (self._path, self._ident):
                    if self._leased:  # calls on the old file finish first
                        self._cond.wait(timeout=0.5)
                        continue
                    self._reopen(path, ident)
                if self._idle:
                    con = self._idle.pop()
                elif len(self._open) < POOL_SIZE:
                    con = self._cursor()
                else:
                    self._cond.wait()
                    continue
                self._leased += 1
                return con

    @contextmanager
    def paused(self):
        """No connection of the pool open while the block runs (leased ones
        are waited for; new calls wait for its end, then the pool reopens on
        the file there is then, and warms again). Note [One process, one
        instance per file]: what an index in this process needs."""
        with self._cond:
            self._paused += 1
            while self._leased:
                self._cond.wait(timeout=0.5)
            if self._con is not None:
                self._stop_warm(for_good=False)
                self._close_all()
        try:
            yield
        finally:
            with self._cond:
                self._paused -= 1
                self._cond.notify_all()

    def in_use(self) -> tuple[int, int]:
        """(connections leased now, connections open) of the pool."""
        with self._cond:
            return self._leased, len(self._open)

    def _release(self, con) -> None:
        with self._cond:
            self._leased -= 1
            if con in self._open:  # else closed meanwhile (the server shut down)
                self._idle.append(con)
            self._cond.notify_all()

    def _cursor(self):
        """One more connection of the pool (a cursor of the root, sharing its memo)."""
        from torchtalk.connmemo import Session

        con = Session(self._con.con.cursor(), engine=self._con.engine)
        con.memo, con.read_ahead, con.history = self._con.memo, self._con.read_ahead, self._con.history
        self._open.append(con)
        return con

    def _reopen(self, path: Path, ident: tuple[int, int]) -> None:
        """Close the pool (no connection leased) and open the root on `path`."""
        from torchtalk import api

        if self._con is not None:
            # warming holds a connection of its own to the file being replaced;
            # DuckDB keeps one database per path open while any connection is
            self._stop_warm(for_good=False)
            self._close_all()
        self._con = api.open_db(db=path, read_only=True)
        self._con.engine = ENGINE  # Note [Engine per session]: the pool answers many queries
        self._con.read_ahead = ENGINE == "memory"  # ... in memory once its tables are read (Note [Read ahead])
        self._con.history = path  # the texts its queries evaluate are kept (Note [Warm from history])
        self._open, self._idle = [self._con], [self._con]
        reopened = self._path is not None
        self._path, self._ident = path, ident
        if reopened and self._warm_thread is not None and not self._closing.is_set():
            self.start_warm(self._rules)  # the new file's tables, its plans

    def _close_all(self) -> None:
        for con in reversed(self._open):  # the cursors, then their root
            con.close()
        self._open, self._idle, self._con = [], [], None

    def warm(self, rules: tuple[Path, ...] = (), halt: threading.Event | None = None) -> None:
        """Open the DB, load the query library and warm what the first calls
        would pay for (Note [Warm queries]; in a thread while the client does
        its handshake), then read the tables the named queries read into the
        pool's Session (Note [Read ahead]); errors wait for that call. `halt`
        set: stop. `warmed` is set once all of it has run (a query server's
        ping says so, Note [Query server] in torchtalk/qserver.py)."""
        from torchtalk import api, lookup
        from torchtalk.datalog.engines.memory import read_tables
        from torchtalk.history import recent
        from torchtalk.query.library import load_library

        halt = halt or self._halt
        mine = None  # this warm's own connection (a later warm, for a new file, has its own)
        try:
            with self.lease():
                pass
            load_library(tuple(rules))
            # the rest after the first call is answered (or a quiet moment):
            # it would slow that call, which a client waits for at its start
            if self.answered.wait(timeout=WARM_AFTER_S):
                halt.wait(timeout=WARM_GRACE_S)  # the answer is still being sent
            if halt.is_set():
                return
            with self.lease() as con:  # held, the file is not replaced under it
                prime(con)
                texts = warm_queries(con)
                kept = [t for t in recent(self._path) if t not in texts]  # Note [Warm from history]
                texts += kept
                # a connection of its own, not the pool's (the pool could not
                # be closed under it when a new index replaces the file)
                mine = self._warm_cursor = api.open_db(db=self._path, read_only=True)
                _share_session(con, mine)
            if getattr(mine, "engine", None) == "memory":  # first: until then the pool's queries run on DuckDB
                read_tables(mine, query_tables(mine, rules), halt.is_set)
                lookup.warm(mine)  # Note [Tests by token]
            fixed, start = len(texts) - len(kept), None
            for n, text in enumerate(texts):  # ... then in memory, building the indexes the calls use
                if n == fixed:  # the kept texts' time counts from the first of them
                    start = time.monotonic()
                if halt.is_set() or (start is not None and time.monotonic() - start > WARM_HISTORY_S):
                    break
                self.warm_progress = (n, len(texts))
                try:
                    api.query(text, con=mine, rules=rules, limit=1)
                except TorchTalkError:  # a kept text the index no longer answers
                    continue
        except Exception:  # the first tool call reports it properly (or the server is closing)
            self.warm_progress = (-1, -1)
        else:
            if not halt.is_set():
                self.warmed.set()
        finally:  # without the pool's lock: _stop_warm may hold it while it waits for this
            if self._warm_cursor is mine:
                self._warm_cursor = None
            if mine is not None:
                mine.close()

    def warm_note(self) -> str:
        """What the warm-up has done (get_status; Note [Warm queries])."""
        if self.warmed.is_set():
            return "warm-up: done"
        if self.warm_progress is None:
            return "warm-up: reading the tables (after the first call)"
        run, total = self.warm_progress
        if total < 0:
            return "warm-up: stopped (a query's first call reads what it needs)"
        return f"warm-up: {run} of {total} queries run"

    def interrupt(self, con) -> None:
        """Abort the statement running on `con`, a leased connection (from another thread)."""
        if con is not None:
            con.interrupt()

    def start_warm(self, rules: tuple[Path, ...] = ()) -> None:
        """`warm` in a thread of its own (joined by `close`), again for each
        new DB file the pool opens."""
        self._rules, self._halt = tuple(rules), threading.Event()
        self.warmed.clear()
        self.warm_progress = None
        self._warm_thread = threading.Thread(target=self.warm, args=(rules, self._halt), name="torchtalk-warm",
                                             daemon=True)
        self._warm_thread.start()

    def _stop_warm(self, wait: bool = False, for_good: bool = True) -> None:
        """Warming stops (for good unless the pool reopens on a new file): a
        running warm query is interrupted, and the
        thread joined when it has its own connection (it needs the pool no
        more) or `wait` says nothing it waits for is held. Otherwise it is
        before its leased start, and sees the flag there."""
        if for_good:
            self._closing.set()
        self._halt.set()
        self.answered.set()  # wakes it if it waits for the first call
        cursor, thread = self._warm_cursor, self._warm_thread
        if cursor is not None:
            try:
                cursor.interrupt()
            except Exception:  # closed meanwhile
                pass
        if thread is not None and thread is not threading.current_thread() and (wait or cursor is not None):
            thread.join(timeout=10)

    def close(self) -> None:
        """Stop warming (a running warm query is interrupted: a thread still in
        DuckDB when the interpreter exits aborts the process), then close."""
        self._stop_warm()
        with self._cond:
            for con in self._open:  # a leased one may be mid-call: abort it, wait for it
                if con not in self._idle:
                    con.interrupt()
            deadline = time.monotonic() + 10
            while self._leased and time.monotonic() < deadline:
                self._cond.wait(timeout=0.5)
            self._close_all()
        self._stop_warm(wait=True)  # it may have been in its leased start, and gone on to a query


CALL_TIMEOUT_S = 30.0  # a call's limit, unless $TORCHTALK_MCP_CALL_TIMEOUT says otherwise


def call_timeout() -> float:
    """Seconds a call (an MCP tool call, a served query) may run: $TORCHTALK_MCP_CALL_TIMEOUT when it is a
    positive number, else CALL_TIMEOUT_S."""
    import os

    try:
        value = float(os.environ.get("TORCHTALK_MCP_CALL_TIMEOUT", ""))
    except ValueError:
        return CALL_TIMEOUT_S
    return value if value > 0 else CALL_TIMEOUT_S


class Call:
    """A call's work in its worker thread, as the caller stops it: an MCP
    tool call (torchtalk/mcp/server.py) or a served query (torchtalk/qserver.py).

    Note [Stopped calls]: a call the client cancels (notifications/cancelled)
    or that overruns its time limit (call_timeout) is abandoned by the event
    loop (a served query's, by its guard thread: Note [Query server] in
    torchtalk/qserver.py), but its thread would go on, holding a pooled connection until its
    query ends (minutes for a deep impact). `stop` interrupts the connection's
    statement, and keeps interrupting while the work is on it (a work runs
    several statements: one interrupt could fall between two), so the
    connection is back in the pool at once; a work not started yet never
    starts. `start`/`finish` and the interrupts hold one lock: a connection
    given back to the pool is never interrupted for another call. (Python
    work between statements, such as building chains, is not interrupted: it
    must stay short, linear in the rows.) A client
    whose HTTP connection drops mid-call is taken to have cancelled it (Note
    [Disconnect cancels] in serve.py; tests/reliability/test_mcp_stops.py).
    """

    def __init__(self, db: FactDB, limit: float) -> None:
        import threading

        self.db, self.limit, self.con, self.stopped, self.done = db, limit, None, False, False
        self.generation = None  # the DB file's identity the work reads (Note [Answer cache])
        self.lock = threading.Lock()

    def start(self, con) -> bool:
        """In the worker, once `con` is leased: False when stopped already
        (then done: the interrupts stop, and never reach `con`, which goes
        back to the pool for another call)."""
        with self.lock:
            if self.stopped:
                self.done = True
                return False
            self.con = con
            return True

    def finish(self) -> None:
        with self.lock:
            self.done = True

    def stop(self) -> None:
        """From the event loop: interrupt the work now and until it returns."""
        import threading

        with self.lock:
            self.stopped = True
        threading.Thread(target=self._interrupt, name="torchtalk-stop", daemon=True).start()

    def _interrupt(self) -> None:
        import time

        deadline = time.monotonic() + self.limit
        while time.monotonic() < deadline:
            with self.lock:
                if self.done:
                    return
                if self.con is not None:
                    self.db.interrupt(self.con)
            time.sleep(0.05)


# Note [Warm queries]: the first call of a query shape compiles its plan
# (Note [Plan cache]) and reads the stored relations' blocks from the file,
# and the first call on a connection fills its caches (Note [DB info cache]):
# 50-100 ms more than the calls after it. Once the first call is answered
# and sent (it waits for no warming, and a client waits for it at its start;
# sending takes a moment after the answer is returned) or the
# client is quiet for WARM_AFTER_S, `warm` primes the caches the pool's
# connections share (a few ms, on a leased one), reads the tables the named
# queries read into the pool's Session for the in-memory engine (Note [Read
# ahead]: 2M rows, about 3 s; the pool's queries run on DuckDB until then),
# then runs one query of each
# kind the tools send, on the busiest op of the index and a function with a
# few dozen callers, then the texts earlier servers' tools evaluated on
# this DB (Note [Warm from history] in torchtalk/history.py), on a connection of its own: the plans and the
# database's blocks are shared with the tools' connection (DuckDB keeps one
# instance per file), and it holds no connection of the pool, so a client's first call
# never waits for a warm query. A new DB file (an index, a watcher's update)
# is warmed again once the pool reopens on it.
WARM_AFTER_S = 2.0  # warm after the first call, or after this long without one
WARM_GRACE_S = 0.1  # after the first call's answer is returned, for it to be sent
WARM_HISTORY_S = 5.0  # replaying kept texts stops after this long (Note [Warm from history])
_WARM = ("trace({op})", "impact({fn})", "callers({fn})", "callees({fn})",
         "search({fn})", "kernels({op})", "tests({op})", "op_callees({op})", "op_callers({op})",
         "impact({name})", "trace_module({cls})", 'test(file="{file}")', 'test_file_uses("{file}")',
         'test_file_subjects("{file}")')
# a C++ name typed as people type it (unquoted: one walk from all its overloads, Note [One walk per name])
_PLAIN_NAME = r"^[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_][A-Za-z0-9_]*)+$"


def _share_session(pooled, other) -> None:
    """`other` keeps what it computes in `pooled`'s memo, and runs its queries
    on the same engine: the warm queries read the in-memory engine's tables
    into the pool's Session (Note [Engine per session] in torchtalk/connmemo.py)."""
    from torchtalk.connmemo import Session

    if isinstance(pooled, Session) and isinstance(other, Session):
        other.memo, other.engine = pooled.memo, pooled.engine


def query_tables(con, rules: tuple[Path, ...] = ()) -> list[str]:
    """The fact-DB tables the library's named queries read, as the query
    layer names them: a stored relation's table (Note [Derived at index
    time]) in place of what it is computed from. Not a stored relation only
    other stored relations read (`step` under `step_pair`, Note [Derived in
    place]): a query reads it only when it names it, and then reads it as
    any table not read ahead."""
    from torchtalk.datalog import ast as A
    from torchtalk.datalog.compile import q
    from torchtalk.datalog.engines.duckdb import db_tables
    from torchtalk.query.derived import readers, stored, table_of
    from torchtalk.query.library import load_library, query_names

    program = load_library(tuple(rules))
    kept = stored(con)
    read_by = readers(program)
    inner = {rel for rel in kept if read_by.get(rel) and all(h in kept for h, _strict in read_by[rel])}
    seen, todo, out = set(), [n for n in query_names(program) if n not in inner], []
    while todo:
        rel = todo.pop()
        if rel in seen:
            continue
        seen.add(rel)
        if rel in kept:
            out.append(table_of(rel))
            continue
        if rel in program.inputs:
            out.append(q(rel))
        todo += [atom.name for rule in program.rules_for(rel) for lit in rule.body for atom, _ in A.literal_atoms(lit)]
    return sorted(t for t in out if db_tables(con, [t]))


def prime(con) -> None:
    """Fill `con`'s caches a query reads first: its table list, its stored
    relations, the columns of every table (torchtalk/connmemo.py)."""
    from torchtalk.datalog.compile import q
    from torchtalk.datalog.engines.duckdb import db_tables
    from torchtalk.query.derived import SCHEMA, stored, table_of
    from torchtalk.query.resolve import Resolver

    Resolver(con)
    stored(con)
    names = con.execute("SELECT schema_name, table_name FROM duckdb_tables() "
                        "WHERE schema_name IN ('main', ?)", [SCHEMA]).fetchall()
    db_tables(con, [q(t) if schema == "main" else table_of(t) for schema, t in names])


def warm_queries(con) -> list[str]:
    """The DSL texts `warm` runs: `_WARM` on this DB's busiest op and the
    function that calls something with the most call sites up to 50 (a warm
    query should be quick, and find rows both ways)."""
    op = con.execute("SELECT op FROM dispatch GROUP BY op ORDER BY count(*) DESC, op LIMIT 1").fetchone()
    fn = con.execute("SELECT callee FROM calls WHERE callee IN (SELECT caller FROM calls) GROUP BY callee "
                     "ORDER BY count(*) <= 50 DESC, count(*) DESC, callee LIMIT 1").fetchone()
    name = con.execute("SELECT base FROM overload WHERE regexp_matches(base, ?) GROUP BY base "
                       "ORDER BY count(*) <= 4 DESC, count(*) DESC, base LIMIT 1", [_PLAIN_NAME]).fetchone()
    cls = con.execute("SELECT cls FROM module_class ORDER BY cls LIMIT 1").fetchone()
    file = con.execute("SELECT file FROM test GROUP BY file ORDER BY count(*) DESC, file LIMIT 1").fetchone()
    if op is None or fn is None:
        return []
    # quoted: taken as the exact id (the DSL reads a quoted value as written, no escapes)
    names = dict(op=f'"{op[0]}"', fn=f'"{fn[0]}"', name=name[0] if name else None,
                 cls=f'"{cls[0]}"' if cls else None, file=file[0] if file else None)
    return [t.format(**names) for t in _WARM if all(names[k] is not None for k in re.findall(r"{(\w+)}", t))]


def default_log(source: Path | None) -> Path:
    """Where the background index writes its output."""
    from torchtalk.paths import cache_dir

    name = (source.name if source else "db") + ".mcp-index.log"
    path = cache_dir() / "logs" / name
    os.makedirs(path.parent, exist_ok=True)
    return path
