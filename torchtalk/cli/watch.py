"""`torchtalk watch`: keep a tree's fact DB up to date as its files change."""

from __future__ import annotations

import argparse
from pathlib import Path

NAME = "watch"
HELP = "keep a tree's fact database up to date as its files change (Ctrl-C stops)"


def register(p: argparse.ArgumentParser) -> None:
    from torchtalk.watch import QUIET_ONE_S, QUIET_S

    p.add_argument("--source", type=Path, help="PyTorch tree (default: the fetched 2.6.0 tree)")
    p.add_argument("--db", type=Path, help="database file (default: in the user cache dir, keyed by the tree)")
    p.add_argument("--layers", help="comma-separated layers to keep up to date (default: those `index` runs)")
    p.add_argument("--jobs", type=int, help="worker processes for the layers that use them")
    p.add_argument("--debounce", type=float, default=None, metavar="S",
                   help=f"seconds without a change before an update (default {QUIET_S}; "
                        f"{QUIET_ONE_S} when one file changed)")
    p.add_argument("--no-serve", dest="serve", action="store_false",
                   help="do not answer `torchtalk query` for the DB (by default it does, from memory: "
                        "about 0.7 GB for the PyTorch tree; TORCHTALK_SERVER=0 too)")


def run(args: argparse.Namespace) -> int:
    import contextlib
    import signal
    import sys
    import threading
    import time

    from torchtalk import api, store
    from torchtalk.errors import InputError, TorchTalkError
    from torchtalk.paths import default_source
    from torchtalk.qclient import enabled as qserver_enabled
    from torchtalk.watch import FULL_EVERY, Watcher, collect_between_updates, describe

    if args.jobs is not None and args.jobs < 1:
        raise InputError(f"--jobs must be at least 1, got {args.jobs}")
    if args.debounce is not None and args.debounce < 0:
        raise InputError(f"--debounce must be at least 0, got {args.debounce}")
    source = args.source or default_source()
    if args.source is None and not source.exists():
        raise InputError(f"no PyTorch tree at {source}", hint="run `torchtalk fetch` or pass --source PATH")
    from torchtalk.extension import recorded_torch

    if recorded_torch(source, args.db) is not None:  # an extension: indexed beside its recorded torch
        root = source.expanduser().resolve()
    else:
        root = store.resolve_source(source).root
    layers = args.layers.split(",") if args.layers else None

    def say(msg: str) -> None:
        print(msg, flush=True)

    memo: dict = {}  # what the layers read, kept between updates (Note [Layer memo])

    db: list[Path] = []  # the DB the first update wrote
    server = None
    updates = [0]
    busy = threading.Lock()  # an update or the warm-up: one at a time, on the one memo

    def update(files: frozenset[str] | None = None) -> None:
        with busy:
            _update(files)

    def _update(files: frozenset[str] | None) -> None:
        t = time.perf_counter()
        later: list = []
        try:
            # the pool answering queries closes while the DB is updated (Note [One process, one instance per file])
            with server.facts.paused() if server is not None else contextlib.nullcontext():
                # once the update is out: the GC, paused for it (Note [No GC in an update]), and the
                # layers' cache writes (Note [Cache written after the update])
                report = api.index(root, db=args.db, layers=layers, jobs=args.jobs, memo=memo, resume_gc=False,
                                   later=later)
            db[:] = [report.db]
            ran = [lr.name for lr in report.layers if lr.action == "ran"]
            what = "no change to the facts" if report.up_to_date else f"{report.mode} ({', '.join(ran) or 'no layer'} ran)"
            head = f"{describe(files)}: " if files else ""
            say(f"{head}{what} in {time.perf_counter() - t:.2f} s")
            for write in later:
                write()
        finally:
            updates[0] += 1
            collect_between_updates(full=updates[0] % FULL_EVERY == 0)

    def failed(exc: BaseException) -> None:
        if isinstance(exc, TorchTalkError):
            print(f"torchtalk: {exc.render()}", file=sys.stderr, flush=True)
        else:
            print(f"torchtalk: update failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)

    update()
    quiet = {} if args.debounce is None else {"quiet": args.debounce, "quiet_one": args.debounce}
    watcher = Watcher(root, update, on_error=failed, **quiet)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())  # `kill` stops as Ctrl-C does: the update running ends first
    try:  # from the watcher's start: a Ctrl-C right after "watching" still stops it cleanly
        serving = None
        if args.serve and qserver_enabled():  # before the watcher: no update runs while its pool opens
            server, serving = _serve(db[0])
        watcher.start()
        say(f"watching {root} (Ctrl-C to stop)")
        if serving:
            say(serving)
        _warm_up(lambda: api.warm(root, db=args.db, layers=layers, jobs=args.jobs, memo=memo), busy, say)
        while not stop.wait(3600):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        watcher.stop()
        if server is not None:
            server.stop()
            server.facts.close()
        from torchtalk.index import release

        release(memo)  # the copy of the DB made for the next update (Note [A copy made ahead])
    return 0


def _warm_up(warm, busy, say) -> None:
    """Read what the layers' next updates read (Note [Warmed memo] in
    torchtalk/warm.py), between updates, and say when it is done; a warm-up
    that fails is said on stderr and leaves the updates as they were."""
    import sys
    import time

    from torchtalk.errors import TorchTalkError
    from torchtalk.watch import collect_between_updates

    t = time.perf_counter()
    try:
        with busy:
            warmed = warm()
            collect_between_updates(full=False)
    except Exception as exc:  # noqa: BLE001 - the updates do without it
        why = exc.render() if isinstance(exc, TorchTalkError) else f"{type(exc).__name__}: {exc}"
        print(f"torchtalk: warm-up failed (updates read the layers' caches instead): {why}", file=sys.stderr,
              flush=True)
        return
    took = f": read {', '.join(warmed)} in {time.perf_counter() - t:.2f} s" if warmed else ""
    say(f"ready for edits{took}")


def _serve(db: Path):
    """Answer `torchtalk query` for `db` from its pool (Note [Query server]
    in torchtalk/qserver.py): (the `QueryServer` or None when it cannot,
    the line that says so)."""
    from torchtalk.mcp.db import FactDB
    from torchtalk.qserver import QueryServer

    facts = FactDB(None, db)
    server = QueryServer(facts, db)
    why = server.start()
    if why is not None:
        return None, f"not serving queries: {why}"
    facts.start_warm()
    return server, f"serving `torchtalk query` for {db} at {server.path}"
