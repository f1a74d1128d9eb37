"""Keeping a tree's fact DB live: watch the tree, update the DB when it changes.

Note [Watching]: a `Watcher` asks watchdog (inotify on Linux) for the events
below the tree's source dirs (`watched_dirs`: aten, c10, torch, test, …; not
.git, whose churn is not the tree's) and keeps the paths of source files
(`SUFFIXES`) that were written, created, deleted or moved. The first such
event opens a batch; the batch is handed to `on_batch` once the tree has
been quiet for `quiet` seconds (`quiet_one` while it holds one file), or
`max_delay` after it opened, so a `git checkout` of 500 files is one
update, not 500. Events during an update
open the next batch, which waits for the update to end: updates never
overlap. `torchtalk watch` runs `index` in-process for each batch (an
update in place, Note [Update in place]); `mcp-serve` hands it to its
update worker, one child process for the server's life (Note [Update
worker] in torchtalk/updater.py), and `get_status` shows the batch pending
and the update running.

Example:
    >>> w = Watcher(root, lambda paths: print(sorted(paths)))  # doctest: +SKIP
    >>> w.start(); ...; w.stop()
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

SUFFIXES = (".cpp", ".cc", ".cxx", ".c", ".h", ".hpp", ".cu", ".cuh", ".mm", ".py", ".yaml", ".yml")
TOP_DIRS = ("aten", "c10", "torch", "test", "torchgen", "functorch", "tools")
SKIP_PARTS = frozenset({".git", "__pycache__", ".mypy_cache", ".pytest_cache"})
QUIET_S = 0.1  # a batch waits for this long without events (Note [Quiet window])
QUIET_ONE_S = 0.025  # … a batch of one file, for this long
MAX_DELAY_S = 5.0  # … and never longer than this after its first event

# Note [Quiet window]: how long a burst of events may pause and still be
# one batch. Measured with watchdog (inotify) on a git repository of 500
# files, a `git checkout` between two commits that change all of them gave
# 2,910-3,972 events over 170-200 ms, no two of them more than 5.7 ms apart
# (p99 0.23 ms); an editor's save (write, or write and rename) is one
# burst of well under a millisecond. A quiet window of 0.1 s is 17 times the
# longest pause seen; it was 0.3 s, a fifth of issue 16's second from an
# edit to its answer. A burst that pauses longer anyway (a checkout on a
# loaded machine) is two updates, each right: only the second one's work
# is wasted, and MAX_DELAY_S bounds how long a steady stream waits.
#
# A batch of one file waits QUIET_ONE_S only: an editor's save is one file
# (its backup and temporary names are not source files), and a burst's
# second file follows its first within the burst's longest pause, which
# the 25 ms is four times over; so the edit a contributor then asks about
# is not held up by 75 ms of the window kept for bursts. A burst whose
# second file comes later anyway has its first file updated alone, right
# as above. `--debounce` sets both windows.


def watched_dirs(root: Path) -> list[Path]:
    """The dirs below `root` whose files the layers read (those that exist);
    `root` itself for a tree of another shape (an extension: its test/ is no
    PyTorch tree's)."""
    found = [root / d for d in TOP_DIRS if (root / d).is_dir()]
    return found if any(p.name in ("aten", "torch") for p in found) else [root]


def relevant(root: Path, path: str) -> str | None:
    """`path` relative to `root` when it is a source file of the tree, else None."""
    try:
        rel = Path(path).relative_to(root)
    except ValueError:
        return None
    if not rel.name.endswith(SUFFIXES) or SKIP_PARTS & set(rel.parts):
        return None
    return rel.as_posix()


@dataclass(frozen=True)
class Pending:
    """The batch waiting for its update: files, and when its first event came."""

    files: tuple[str, ...]
    since: float | None  # time.time() of its first event, None when empty
    updating: tuple[str, ...]  # the batch being updated now (empty when idle)


class Watcher:
    """Calls `on_batch(files)` for each debounced batch of changed source files
    (Note [Watching]), in a thread of its own, one batch at a time."""

    def __init__(self, root: Path, on_batch: Callable[[frozenset[str]], None], quiet: float = QUIET_S,
                 max_delay: float = MAX_DELAY_S, on_error: Callable[[BaseException], None] | None = None,
                 quiet_one: float = QUIET_ONE_S) -> None:
        self.root = Path(root).resolve()
        self.on_batch, self.on_error = on_batch, on_error
        self.quiet, self.max_delay = quiet, max_delay
        self.quiet_one = min(quiet, quiet_one)
        self._cond = threading.Condition()
        self._files: set[str] = set()
        self._first = self._last = 0.0
        self._since: float | None = None
        self._updating: tuple[str, ...] = ()
        self._stopped = False
        self._observer = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start watching (returns at once)."""
        from watchdog.events import FileSystemEventHandler
        from watchdog.observers import Observer

        watcher = self

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event) -> None:
                if event.event_type in ("opened", "closed_no_write"):
                    return
                paths = [event.src_path, getattr(event, "dest_path", "") or ""]
                watcher.add(p for p in paths if p)

        self._observer = Observer()
        for d in watched_dirs(self.root):
            self._observer.schedule(Handler(), str(d), recursive=True)
        self._observer.daemon = True
        self._observer.start()
        self._thread = threading.Thread(target=self._loop, name="torchtalk-watch", daemon=True)
        self._thread.start()

    def add(self, paths) -> None:
        """Note changed paths (absolute); those not a source file are ignored."""
        rels = [r for p in paths if (r := relevant(self.root, p if isinstance(p, str) else p.decode()))]
        if not rels:
            return
        with self._cond:
            now = time.monotonic()
            if not self._files:
                self._first, self._since = now, time.time()
            self._files.update(rels)
            self._last = now
            self._cond.notify_all()

    @property
    def pending(self) -> Pending:
        with self._cond:
            return Pending(tuple(sorted(self._files)), self._since, self._updating)

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._stopped and not self._files:
                    self._cond.wait()
                if self._stopped:
                    return
                while not self._stopped:  # debounce: quiet for `quiet` (one file: `quiet_one`), or `max_delay` in all
                    now = time.monotonic()
                    quiet = self.quiet_one if len(self._files) == 1 else self.quiet
                    due = min(self._last + quiet, self._first + self.max_delay)
                    if now >= due:
                        break
                    self._cond.wait(due - now)
                if self._stopped:
                    return
                batch = frozenset(self._files)
                self._files.clear()
                self._since = None
                self._updating = tuple(sorted(batch))
            try:
                self.on_batch(batch)
            except BaseException as exc:  # noqa: BLE001 - reported, and the watch goes on
                if self.on_error is not None:
                    self.on_error(exc)
            finally:
                with self._cond:
                    self._updating = ()

    def stop(self) -> None:
        """Stop watching; a running update finishes first (joined up to 60 s)."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=10)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=60)


# every how many updates the GC walks the frozen objects too (Note [GC between updates])
FULL_EVERY = 8


def collect_between_updates(full: bool = True) -> None:
    """Note [GC between updates]: an update runs with the cyclic GC paused
    (Note [No GC in an update] in extractors/base.py) and leaves millions of
    new objects the layers keep for the next one (Note [Layer memo]).
    Resumed as it is, the GC would walk them all in its next collections,
    some of them inside the next update (0.5-0.8 s of a .py edit's). So the
    watcher (`torchtalk watch`, and mcp-serve's update worker: Note
    [Update worker] in torchtalk/updater.py) collects once, after saying the update is out, then freezes the
    survivors: until the next update, collections (of the query server's
    objects) walk only new ones. That collection walks only what is not
    frozen, the objects made since the last one (0.03-0.23 s after a .cpp,
    .py or YAML edit, where walking every object took 0.76-1.09 s, and an
    edit made within it waited for it): a cycle of objects frozen before
    that became garbage since is freed by the `full` collection, which
    unfreezes every object first, every FULL_EVERY updates (a .cpp body
    edit leaves ~9,000 such objects)."""
    import gc

    if full:
        gc.unfreeze()
    gc.collect()
    gc.freeze()
    gc.enable()


def describe(files: tuple[str, ...] | frozenset[str], shown: int = 3) -> str:
    """`a.cpp, b.py and 3 more` for a log line."""
    files = sorted(files)
    head = ", ".join(files[:shown])
    return head + (f" and {len(files) - shown} more" if len(files) > shown else "")
