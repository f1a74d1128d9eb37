"""How long after an edit `torchtalk watch` has the DB updated (issue 16).

Indexes a hard-linked copy of the real tree with `torchtalk index` (a
process, as a user indexes before watching), then runs `torchtalk watch` on
it and makes the edits of bench/incremental.py one at a time (the .cpp body
and the .py edits twice: the second update reads what the first kept, Note
[Layer memo]), and prints, per edit, the seconds from the file's write to
the watcher's line saying the DB is updated (the debounce included, 0.025 s
for the one file of each edit: Note [Quiet window] in torchtalk/watch.py).
The first edit comes once the watcher says it is ready for edits (it reads
the layers' state first, Note [Warmed memo] in torchtalk/warm.py), or,
from a checkout that says no such line, --settle seconds after it says it
is watching. The real tree is never modified. The layers are a default
index's (ops, cpp, python, tests), as bench/incremental.py's: a watcher
updates every layer its DB has.

    python bench/watch.py [--source TREE] [--layers ops,cpp,python,tests] [--seed-cache]
                          [--code CHECKOUT] [--settle S] [--built-by-watcher]

--code CHECKOUT runs another checkout's `torchtalk` (a git worktree of an
older commit) on the same edits, for runs by turns. --built-by-watcher
leaves the first index to the watcher (its first update builds the DB and
runs every layer, so their state is in memory from the start).
"""

from __future__ import annotations

import argparse
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import stop  # noqa: E402
from incremental import arguments, edit, index, scratch, watch_plan  # noqa: E402


class Lines:
    """The watcher's stdout lines, read as they come."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc, self.lines = proc, queue.Queue()
        threading.Thread(target=lambda: [self.lines.put(ln) for ln in proc.stdout] + [self.lines.put(None)],
                         daemon=True).start()

    def of(self, head: str, timeout: float | None = None) -> str | None:
        """The next line starting with `head` (it prints others: "serving
        ..."); None when none came within `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=None if deadline is None else max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                return None
            if line is None:
                raise SystemExit(f"torchtalk watch ended (exit {self.proc.wait()}) before a line starting {head!r}")
            if line.startswith(head):
                return line


def main() -> None:
    extra = argparse.ArgumentParser(add_help=False)
    extra.add_argument("--code", type=Path, default=Path(__file__).resolve().parents[1])
    extra.add_argument("--settle", type=float, default=10.0)
    extra.add_argument("--built-by-watcher", action="store_true")
    opts, rest = extra.parse_known_args()
    sys.argv[1:] = rest
    args = arguments("ops,cpp,python,tests")
    code = opts.code.resolve()
    rows = []
    with scratch(args) as (src, db):
        if not opts.built_by_watcher:
            wall, _cpu, mode, _ran = index(src, db, args.layers, code)
            rows.append((f"`torchtalk index` first ({mode})", wall, ""))
        t = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "torchtalk", "watch", "--source", str(src), "--db", str(db),
                                 "--layers", args.layers, "--jobs", "2"], text=True, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(code)}, cwd=code)
        lines = Lines(proc)
        try:
            lines.of("watching")
            ready = lines.of("ready for edits", opts.settle)
            rows.append(("watcher start to ready for edits", time.perf_counter() - t,
                         ready.strip() if ready else f"(no such line: {opts.settle:.0f} s waited)"))
            for what, rel, old, new in watch_plan():
                time.sleep(1.0)
                t = time.perf_counter()
                edit(src / rel, old, new)
                line = lines.of(rel)
                rows.append((what, time.perf_counter() - t, line.strip()))
        finally:
            stop(proc)
    print(f"code: {code}")
    print(f"layers: {args.layers}")
    for what, seconds, line in rows:
        print(f"  {what:<34} {seconds:7.2f}s   {line}")


if __name__ == "__main__":
    main()
