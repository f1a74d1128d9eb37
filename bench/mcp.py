"""MCP server benchmark: cold start to first answer, and per-call latency on one session.

Drives `torchtalk mcp-serve` as a subprocess with the SDK's stdio client, on an
already indexed tree (the cached DB of --source, or --db FILE):

  cold start   process spawn -> initialize -> first `search` answered (goal <= 1 s), 5 runs
  per call     100 calls cycling through the lookup and query tools on one session,
               p50/p95 overall and per tool (goal p95 <= 50 ms); `coverage` (a whole
               report) timed apart
  workflows    the skill's workflow calls (SKILL.md's "Common Workflows" and the /trace
               example, as bench/answer_sizes.py parses them), --rounds times each on one
               session: p50/p95 overall and per call, with the load average

The server keeps answers (Note [Answer cache], torchtalk/mcp/cache.py): a
call's first answer is computed, a repeat on the same session is the kept
one. The workflows print both (round 1, and the rounds after it); `--no-cache`
runs the server with TORCHTALK_MCP_CACHE=0.

Usage: .venv/bin/python bench/mcp.py [--source PATH | --db FILE] [--calls 100] [--rounds 5] [--no-cache]
                                     [--no-history] [--engine memory|duckdb] [--code DIR]

--code DIR runs the server from another checkout (an older commit, by
`git worktree add DIR COMMIT`), on an index that code made (--db), so two
commits can be measured by turns on one machine.

The server runs without its background compiler tier (--no-compiler-tier),
so the calls are measured alone. It warms from the queries earlier servers'
tools evaluated on the DB (Note [Warm from history]): a second run finds the
first's. --no-history measures a server without them (and keeps none).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from _machine import reference_line  # noqa: E402  (from this directory, before it leaves sys.path)
from answer_sizes import WORKFLOWS, call_text  # noqa: E402  (it keeps this directory off sys.path itself)

# this file is named mcp.py: keep its directory off sys.path so `import mcp` finds the SDK
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import anyio  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

COLD_GOAL_S = 1.0
P95_GOAL_MS = 50.0

# (tool, arguments): answered from any index with the ops layer; the rest need their layer
MIX = (
    ("search", {"query": "softmax"}),
    ("search", {"query": "gelu", "backend": "CUDA"}),
    ("get_status", {}),
    ("list_modules", {"category": "nn"}),
    ("list_test_utils", {"category": "decorator"}),
    ("test_file_info", {"path": "test/test_linalg.py"}),
    ("find_similar_tests", {"query": "matmul out"}),
    ("cuda_kernels", {"name": "softmax_warp_forward"}),
    ("trace_module", {"name": "torch.nn.Linear"}),
    ("calls", {"name": "at::native::matmul"}),
    ("called_by", {"name": "at::native::cpublas::gemm"}),
    ("trace", {"name": "torch.matmul"}),
    ("impact", {"name": "at::native::cpublas::gemm", "depth": 2}),
    ("query", {"dsl": "callers(at::native::cpublas::gemm)"}),
)


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def params(args: argparse.Namespace) -> StdioServerParameters:
    import os

    where = ["--db", str(args.db)] if args.db else ["--source", str(args.source)]
    env = {**os.environ, **({"TORCHTALK_MCP_CACHE": "0"} if args.no_cache else {}),
           **({"TORCHTALK_MCP_HISTORY": "0"} if args.no_history else {}),
           **({"TORCHTALK_MCP_ENGINE": args.engine} if args.engine else {})}
    # no compiler tier: a DB whose libclang tier is missing or behind would
    # have every server start one in the background, its minutes of CPU
    # beside the calls measured (it doubled this machine's workflow p95)
    tier = ["--no-compiler-tier"]
    cwd = None
    if args.code:  # the server runs that checkout's torchtalk: `-m` looks in the cwd first
        env["PYTHONPATH"] = cwd = str(args.code)
        if "--no-compiler-tier" not in (args.code / "torchtalk/cli/mcp.py").read_text():
            tier = []  # older than the flag
    return StdioServerParameters(command=sys.executable, args=["-m", "torchtalk", "mcp-serve", *where, *tier],
                                 env=env, cwd=cwd)


async def cold_start(p: StdioServerParameters) -> float:
    t0 = time.perf_counter()
    async with Client(p) as client:
        r = await client.call_tool("search", {"query": "matmul"})
        dt = time.perf_counter() - t0
        if r.is_error:
            raise SystemExit(f"first answer is an error: {r.content[0].text}")
    return dt


async def settle(client, seconds: float) -> None:
    """A first call, then `seconds` for the server's warm thread (--settle),
    and longer while get_status says its warm-up still runs (at most 60 s
    more): measured calls do not share the cores with it."""
    if seconds > 0:
        await client.call_tool("get_status", {})
        await anyio.sleep(seconds)
        for _ in range(120):
            status = await client.call_tool("get_status", {})
            if "warm-up: done" in status.content[0].text or "warm-up: stopped" in status.content[0].text:
                return
            await anyio.sleep(0.5)


async def per_call(p: StdioServerParameters, n: int, wait: float = 0) -> tuple[dict[str, list[float]], list[str], float]:
    times: dict[str, list[float]] = {}
    errors: list[str] = []
    async with Client(p) as client:
        await settle(client, wait)
        for i in range(n):
            tool, arguments = MIX[i % len(MIX)]
            t0 = time.perf_counter()
            r = await client.call_tool(tool, arguments)
            ms = (time.perf_counter() - t0) * 1000
            if r.is_error:
                errors.append(f"{tool}: {r.content[0].text.splitlines()[0]}")
                continue
            times.setdefault(tool, []).append(ms)
        t0 = time.perf_counter()
        await client.call_tool("coverage", {"key": "CPU"})
        coverage_ms = (time.perf_counter() - t0) * 1000
    return times, sorted(set(errors)), coverage_ms


async def workflows(p: StdioServerParameters, rounds: int, wait: float = 0) -> tuple[dict[str, list[float]], list[str]]:
    """Milliseconds of each workflow call, `rounds` times each (round-robin, one session)."""
    times: dict[str, list[float]] = {}
    errors: list[str] = []
    async with Client(p) as client:
        await settle(client, wait)
        for _ in range(rounds):
            for _question, tool, arguments in WORKFLOWS:
                t0 = time.perf_counter()
                r = await client.call_tool(tool, arguments)
                ms = (time.perf_counter() - t0) * 1000
                call = call_text(tool, arguments)
                if r.is_error:
                    errors.append(f"{call}: {r.content[0].text.splitlines()[0]}")
                times.setdefault(call, []).append(ms)
    return times, sorted(set(errors))


def report_workflows(p: StdioServerParameters, rounds: int, wait: float = 0) -> None:
    """Print the workflows' per-call p50/p95, overall and per call, with the load average."""
    import os

    load0 = os.getloadavg()[0]
    times, errors = anyio.run(workflows, p, rounds, wait)
    every = [t for ts in times.values() for t in ts]
    print(f"workflows ({len(times)} calls x {rounds} rounds, one session; load average {load0:.1f} -> "
          f"{os.getloadavg()[0]:.1f}): p50 {pct(every, 0.5):.1f} ms, p95 {pct(every, 0.95):.1f} ms, "
          f"max {max(every):.1f} ms")
    first, rest = [ts[0] for ts in times.values()], [t for ts in times.values() for t in ts[1:]]
    print(f"  round 1 (answers computed): p50 {pct(first, 0.5):.1f} ms, p95 {pct(first, 0.95):.1f} ms; "
          f"rounds after it: p50 {pct(rest, 0.5) if rest else float('nan'):.1f} ms, "
          f"p95 {pct(rest, 0.95) if rest else float('nan'):.1f} ms")
    for call, ts in times.items():
        print(f"  {call[:64]:64s} first {ts[0]:7.1f} ms  p50 {pct(ts, 0.5):7.1f} ms  p95 {pct(ts, 0.95):7.1f} ms")
    for e in errors:
        print(f"  error: {e}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path)
    ap.add_argument("--db", type=Path)
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--cold-runs", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=5, help="rounds of the workflow calls")
    ap.add_argument("--no-cache", action="store_true", help="the server keeps no answers (TORCHTALK_MCP_CACHE=0)")
    ap.add_argument("--no-history", action="store_true",
                    help="the server neither replays nor keeps the queries of earlier servers on the DB "
                         "(TORCHTALK_MCP_HISTORY=0, Note [Warm from history])")
    ap.add_argument("--settle", type=float, default=0,
                    help="seconds between the first call and the measured ones (the server's warm thread: "
                         "Note [Warm queries]); 0: measure from the start")
    ap.add_argument("--engine", choices=("memory", "duckdb"),
                    help="the server's engine (TORCHTALK_MCP_ENGINE; default: the server's, in memory)")
    ap.add_argument("--code", type=Path, metavar="DIR",
                    help="run the server from this checkout of TorchTalk (a `git worktree add DIR COMMIT`), "
                         "to measure an older commit beside this one; give it --db, an index that code made")
    args = ap.parse_args()
    if args.code and not (args.code / "torchtalk/__init__.py").is_file():
        print(f"bench/mcp.py: --code {args.code}: no torchtalk package there (a TorchTalk checkout?)", file=sys.stderr)
        return 2
    if not args.db:
        from torchtalk.paths import default_source

        args.source = args.source or default_source()
    p = params(args)
    import os
    import resource

    def child_cpu() -> float:
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        return ru.ru_utime + ru.ru_stime

    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; {reference_line()}")
    if args.code:
        import subprocess

        rev = subprocess.run(["git", "-C", str(args.code), "log", "-1", "--format=%h %s"], capture_output=True,
                             text=True).stdout.strip()
        print(f"server code: {args.code} ({rev or 'not a git checkout'})")
    if args.db:
        from torchtalk.history import recent

        kept = "off (--no-history)" if args.no_history else f"{len(recent(args.db))} texts of earlier servers"
        print(f"warm history (Note [Warm from history]): {kept}")
    colds, cpus = [], []
    for _ in range(args.cold_runs):
        c0 = child_cpu()
        colds.append(anyio.run(cold_start, p))
        cpus.append(child_cpu() - c0)
    cold = statistics.median(colds)
    print(f"cold start to first answer: median {cold:.3f} s, max {max(colds):.3f} s "
          f"over {len(colds)} runs (goal <= {COLD_GOAL_S:.1f} s: {'OK' if cold <= COLD_GOAL_S else 'MISSED'}); "
          f"server CPU per run (start, first answer, exit): median {statistics.median(cpus):.3f} s")
    times, errors, coverage_ms = anyio.run(per_call, p, args.calls, args.settle)
    every = [t for ts in times.values() for t in ts]
    if every:
        p95 = pct(every, 0.95)
        print(f"per call over {len(every)} answered calls on one session: p50 {pct(every, 0.5):.1f} ms, "
              f"p95 {p95:.1f} ms, max {max(every):.1f} ms "
              f"(goal p95 <= {P95_GOAL_MS:.0f} ms: {'OK' if p95 <= P95_GOAL_MS else 'MISSED'})")
        for tool, ts in sorted(times.items()):
            print(f"  {tool:20s} n={len(ts):3d}  p50 {pct(ts, 0.5):7.1f} ms  p95 {pct(ts, 0.95):7.1f} ms")
    print(f"coverage(key=CPU), a whole report: {coverage_ms:.0f} ms")
    if args.rounds > 0:
        report_workflows(p, args.rounds, args.settle)
    if args.settle:
        print(f"(per call and workflows measured {args.settle:g} s after a first call, the server's warm-up done)")
    print(f"at the end: {reference_line()}")
    for e in errors:
        print(f"  not answered (layer or query missing?): {e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
