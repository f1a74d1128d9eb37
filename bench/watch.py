"""How long after an edit `torchtalk watch` has the DB updated (issue 16).

Runs `torchtalk watch` on a hard-linked copy of the real tree, then makes the
edits of bench/incremental.py one at a time (the .cpp body and the .py
edits twice: the watcher's second update reads its memo, Note [Layer
memo]), and prints, per
edit, the seconds from the file's write to the watcher's line saying the DB
is updated (the debounce included, 0.025 s for the one file of each edit: Note [Quiet window] in
torchtalk/watch.py). The real tree is never modified. The layers are a
default index's (ops, cpp, python, tests), as bench/incremental.py's: a
watcher updates every layer its DB has.

    python bench/watch.py [--source TREE] [--layers ops,cpp,python,tests] [--seed-cache]
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import stop  # noqa: E402
from incremental import EDITS, arguments, edit, scratch  # noqa: E402


def line_of(proc: subprocess.Popen, head: str) -> str:
    """The watcher's next line starting with `head` (it prints others: "serving ...")."""
    while line := proc.stdout.readline():
        if line.startswith(head):
            return line
    raise SystemExit(f"torchtalk watch ended (exit {proc.wait()}) before a line starting {head!r}")


def main() -> None:
    args = arguments("ops,cpp,python,tests")
    rows = []
    with scratch(args) as (src, db):
        proc = subprocess.Popen([sys.executable, "-m", "torchtalk", "watch", "--source", str(src), "--db", str(db),
                                 "--layers", args.layers, "--jobs", "2"], text=True, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, env=os.environ)
        try:
            line_of(proc, "watching")
            cpp, py = EDITS[0][1], EDITS[2][1]
            plan = [EDITS[0], ("the same .cpp, again", cpp, "// a line more\n", "// a line more\n// and one\n"),
                    EDITS[1], EDITS[2],
                    ("the same .py, again", py, "    torch.sigmoid(input)\n", "    torch.sigmoid(input)\n" * 2),
                    *EDITS[3:]]
            for what, rel, old, new in plan:
                time.sleep(1.0)
                t = time.perf_counter()
                edit(src / rel, old, new)
                line = line_of(proc, rel)
                rows.append((what, time.perf_counter() - t, line.strip()))
        finally:
            stop(proc)
    print(f"layers: {args.layers}")
    for what, seconds, line in rows:
        print(f"  {what:<34} {seconds:7.2f}s   {line}")


if __name__ == "__main__":
    main()
