"""The process that updates a served tree's index, keeping its memo (Note [Update worker]).

Note [Update worker]: `mcp-serve --source` watches the tree (Note [Watching]
in torchtalk/watch.py). Each batch of changes used to run `torchtalk index`
as a new process, which read every layer's state from its caches again: a
`.cpp` body edit took ~2 s, a `.py` edit 4-6 s, where `torchtalk watch`,
keeping what the layers read in memory (Note [Layer memo]), takes under
1 s. The server cannot run the updates in its own process: an update holds
the GIL for most of a second and the server answers tools meanwhile, and
the memo holds about a GB. So it keeps one child process, this module's
`main`, that runs the updates with one memo for its whole life, and warms
that memo before the first edit (Note [Warmed memo] in torchtalk/warm.py).
The server writes one command per line on its stdin (`update`, `warm`); the
child answers each with one JSON line on stdout: {"ok": true, "mode",
"seconds", "ran"} or {"ok": false, "error"}. It exits when its stdin
closes (the server stopped), and is killed when the server dies (Note
[Workers die with their parent]; the kernel's signal comes when the
*thread* that spawned it ends, so one server thread, living as long as the
server watches, spawns it and passes it the commands: a worker spawned by
the short thread that asked for the warm-up was killed right after it,
and the first edits found a new worker with nothing read). One killed
mid-update leaves the previous DB, as any index does.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

COMMANDS = ("update", "warm")


def main(argv: list[str] | None = None) -> int:
    """Serve update commands on stdin until it closes (Note [Update worker])."""
    ap = argparse.ArgumentParser(prog="python -m torchtalk.updater")
    ap.add_argument("--source", type=Path, required=True)
    ap.add_argument("--db", type=Path)
    ap.add_argument("--parent", type=int, help="the server's pid: this process dies with it")
    args = ap.parse_args(argv)
    if args.parent is not None:
        from extractors.workers import die_with_parent

        die_with_parent(args.parent)
    from torchtalk.watch import FULL_EVERY, collect_between_updates

    memo: dict = {}
    done = 0
    for line in sys.stdin:
        command = line.strip()
        if not command:
            continue
        later: list = []
        answer = _run(command, args.source, args.db, memo, later)
        print(json.dumps(answer), flush=True)  # the DB is in place: said before the caches are written
        for write in later:
            write()
        done += 1
        collect_between_updates(full=done % FULL_EVERY == 0)  # Note [GC between updates]
    from torchtalk.index import release

    release(memo)
    return 0


def _run(command: str, source: Path, db: Path | None, memo: dict, later: list) -> dict:
    """One command's answer (`later`: the layers' cache writes, for after
    it); a failure is an answer, not the end of the process."""
    from torchtalk import api
    from torchtalk.errors import TorchTalkError

    t = time.perf_counter()
    try:
        if command == "update":
            report = api.index(source, db=db, memo=memo, resume_gc=False, later=later)
            answer = {"ok": True, "mode": "current" if report.up_to_date else report.mode,
                      "ran": [lr.name for lr in report.layers if lr.action == "ran"]}
        elif command == "warm":
            answer = {"ok": True, "warmed": api.warm(source, db=db, memo=memo)}
        else:
            return {"ok": False, "error": f"unknown command {command!r} (commands: {', '.join(COMMANDS)})"}
    except TorchTalkError as exc:
        return {"ok": False, "error": exc.render()}
    except Exception as exc:  # noqa: BLE001 - said to the server, which reports it in get_status
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    answer["seconds"] = round(time.perf_counter() - t, 3)
    return answer


if __name__ == "__main__":
    sys.exit(main())
