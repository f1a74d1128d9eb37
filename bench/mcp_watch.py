"""How long after an edit `mcp-serve --source` answers from the updated DB (issue 16).

Indexes a hard-linked copy of the real tree with `torchtalk index` (a
process, as a user indexes before serving), starts `torchtalk mcp-serve
--source` on it over stdio (no compiler tier), waits until get_status says
nothing runs in the background (the server's first update, and its update
worker reading the layers' state: Note [Update worker] in
torchtalk/updater.py), then makes the edits of bench/incremental.py one at
a time (the .cpp body and the .py edits twice) and prints, per edit, the
seconds from the file's write to the new DB file in place (the server
reopens it at its next call, Note [Serving while indexing]), the watcher's
debounce included, and beside it the update worker's own seconds as the
server logs them. After each edit it waits for the background to be idle
again, so edits do not overlap. The real tree is never modified.

    python bench/mcp_watch.py [--source TREE] [--seed-cache] [--code CHECKOUT] [--rounds N]

--code CHECKOUT runs another checkout's server (a git worktree of an older
commit); --rounds N makes the edits N times over (each edit undone by the
next round's), and prints each edit's median.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from _machine import reference_line  # (from this directory, before it leaves sys.path)
from incremental import arguments, edit, index, scratch, watch_plan

# bench/mcp.py is named mcp.py: keep this directory off sys.path so `import mcp` finds the SDK
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import anyio  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

IDLE = "indexing in the background"  # get_status says this while a stage or update runs


def identity(db: Path) -> tuple[int, int] | None:
    try:
        st = db.stat()
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns


async def idle(client, timeout: float = 600) -> float:
    """Seconds until get_status says nothing runs in the background and nothing is pending."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        text = (await client.call_tool("get_status", {})).content[0].text
        if IDLE not in text and "nothing pending" in text:
            return time.perf_counter() - t0
        await anyio.sleep(0.05)
    raise SystemExit(f"the server was still busy after {timeout:.0f} s")


async def session(p: StdioServerParameters, src: Path, db: Path, edits: list) -> list[tuple[str, float]]:
    rows = []
    async with Client(p) as client:
        t0 = time.perf_counter()
        await idle(client)
        rows.append(("server start to idle", time.perf_counter() - t0))
        for what, rel, old, new in edits:
            await anyio.sleep(1.0)
            before = identity(db)
            t = time.perf_counter()
            edit(src / rel, old, new)
            while identity(db) == before:
                if time.perf_counter() - t > 120:
                    raise SystemExit(f"no update 120 s after: {what}")
                await anyio.sleep(0.005)
            rows.append((what, time.perf_counter() - t))
            await idle(client)
    return rows


def worker_seconds(cache: Path) -> list[float]:
    """The update worker's own seconds per update, as the server's log has
    them (Note [Update worker]); none from a server older than it."""
    out = []
    for log in (cache / "logs").glob("*.mcp-index.log"):
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith("update after changes to ") and ": {" in line:
                out.append(json.loads(line.split(": ", 1)[1]).get("seconds", float("nan")))
    return out


def main() -> None:
    extra = argparse.ArgumentParser(add_help=False)
    extra.add_argument("--code", type=Path, default=Path(__file__).resolve().parents[1])
    extra.add_argument("--rounds", type=int, default=1)
    opts, rest = extra.parse_known_args()
    sys.argv[1:] = rest
    args = arguments("ops,cpp,python,tests")
    code = opts.code.resolve()
    print(f"mcp-serve --source of a copy of {args.source}, code {code}")
    print(reference_line())
    results: dict[str, list[float]] = {}
    with scratch(args) as (src, seeded):
        # `mcp-serve --source` serves the tree's default DB: in a cache dir of the scratch's own
        os.environ["TORCHTALK_CACHE_DIR"] = str(seeded.parent.parent / "cache")
        from torchtalk.paths import default_db

        db = default_db(src)
        db.parent.mkdir(parents=True)
        if seeded.with_name(seeded.stem + ".cache").is_dir():
            seeded.with_name(seeded.stem + ".cache").rename(db.with_name(db.stem + ".cache"))
        wall, _cpu, mode, _ran = index(src, db, args.layers, code)
        print(f"  `torchtalk index` first ({mode}): {wall:.2f} s")
        env = {**os.environ, "PYTHONPATH": str(code), "TORCHTALK_MCP_CACHE": "0"}
        p = StdioServerParameters(command=sys.executable, cwd=str(code), env=env,
                                  args=["-m", "torchtalk", "mcp-serve", "--source", str(src), "--no-compiler-tier"])
        for r in range(opts.rounds):
            edits = watch_plan() if r % 2 == 0 else [(w, rel, new, old) for w, rel, old, new in watch_plan()][::-1]
            logs = Path(os.environ["TORCHTALK_CACHE_DIR"]) / "logs"
            for log in logs.glob("*.mcp-index.log"):
                log.unlink()
            rows = anyio.run(session, p, src, db, edits)
            own = [float("nan")] + worker_seconds(logs.parent)  # none for the start
            for i, (what, seconds) in enumerate(rows):
                results.setdefault(what, []).append(seconds)
                mine = f"  (the worker's own {own[i]:.2f} s)" if i < len(own) and own[i] == own[i] else ""
                print(f"  round {r + 1}: {what:<34} {seconds:7.2f} s{mine}", flush=True)
    print("medians:")
    for what, xs in results.items():
        print(f"  {what:<34} {statistics.median(xs):7.2f} s   ({', '.join(f'{x:.2f}' for x in xs)})")
    print(reference_line())


if __name__ == "__main__":
    main()
