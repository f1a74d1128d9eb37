"""HTTP load benchmark: concurrent MCP clients against one `mcp-serve --transport http`.

Starts `torchtalk mcp-serve --transport http` on a free loopback port (or
drives `--url`), then at 1, 8 and 32 clients (each its own MCP session over
the SDK's streamable-HTTP client) runs a call mix: trace, impact, called_by,
search, cuda_kernels, and one unknown name (answered with a tool error and
its candidates: counted as answered, not as an error). Prints per level the
calls, throughput, p50/p95/max latency and errors (an exception, or a tool
error where an answer was expected), and the CPU time a call took in the
server's process (when this bench started it) and in this one (the
clients, on the same 2 cores: what bounds the throughput). Then, with `--slow`, p50/p95 of
`called_by` calls while another client keeps `affected` calls running.

Issue 18 goals (on 2 cores): >= 150 calls/s at 8 clients with p95 <= 100 ms,
no error at 32 clients; a slow call keeps concurrent called_by p95 <= 50 ms.

With `--profile`, each call of the mix on one session, in this process (no
HTTP) and over HTTP: the tools' work against the transport's share.

The server keeps answers (Note [Answer cache], torchtalk/mcp/cache.py): after
the warm-up, the mix's calls are answered from it, so the figures are the
transport's and the lanes'; `--no-cache` starts the server with
TORCHTALK_MCP_CACHE=0, every call computed.

The server runs its slow lane in a process of its own (Note [Slow lane
process] in torchtalk/mcp/slowlane.py); TORCHTALK_MCP_SLOW_PROCESS=0 in this
process's environment keeps it in the server, to compare. The peak memory
of the server and of that process is printed at the end.

Usage: .venv/bin/python bench/load.py [--db FILE | --source PATH | --url URL]
       [--levels 1,8,32] [--calls 60,240,320] [--token T] [--slow] [--profile] [--no-cache]
       [--engine memory|duckdb] [--settle S]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio  # noqa: E402
from _machine import reference_line  # noqa: E402  (from this directory)

ROOT = Path(__file__).resolve().parents[1]

# (tool, arguments, expect_error)
MIX = (
    ("trace", {"name": "torch.matmul"}, False),
    ("impact", {"name": "at::native::cpublas::gemm", "depth": 2}, False),
    ("called_by", {"name": "at::native::cpublas::gemm"}, False),
    ("search", {"query": "softmax"}, False),
    ("cuda_kernels", {"name": "softmax_warp_forward"}, False),
    ("called_by", {"name": "no_such_function_qqq"}, True),
)
SLOW = ("affected", {"functions": ["at::native::cpublas::gemm", "at::native::matmul", "at::native::addmm_out_cuda",
                                   "at::native::softmax", "at::native::layer_norm_cpu"]})


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))] if s else float("nan")


def client(url: str, token: str | None):
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else None
    return Client(streamable_http_client(url, http_client=create_mcp_http_client(headers=headers)))


async def one_client(url, token, k: int, calls: int, ready, go: anyio.Event, out: dict) -> None:
    """Open a session, wait for every client's, then run `calls` calls of the mix."""
    try:
        async with client(url, token) as c:
            ready()
            await go.wait()
            for i in range(calls):
                tool, args, expect_error = MIX[(k + i) % len(MIX)]
                out["calls"] += 1
                t0 = time.perf_counter()
                try:
                    r = await c.call_tool(tool, args)
                except Exception as exc:  # noqa: BLE001 - counted and shown
                    out["errors"].append(f"{tool}: {type(exc).__name__}: {exc}")
                    continue
                out["ms"].append((time.perf_counter() - t0) * 1000)
                if r.is_error != expect_error:
                    out["errors"].append(f"{tool}: {r.content[0].text.splitlines()[0] if r.content else '?'}")
    except Exception as exc:  # noqa: BLE001 - a session that failed to open
        ready()
        out["errors"].append(f"session: {type(exc).__name__}: {exc}")


async def level(url: str, token: str | None, clients: int, calls: int) -> dict:
    out: dict = {"ms": [], "errors": [], "calls": 0}
    go = anyio.Event()
    opened = [0]

    def ready():
        opened[0] += 1

    async with anyio.create_task_group() as tg:
        per = [calls // clients + (1 if k < calls % clients else 0) for k in range(clients)]
        for k in range(clients):
            tg.start_soon(one_client, url, token, k, per[k], ready, go, out)
        while opened[0] < clients:
            await anyio.sleep(0.01)
        t0 = time.perf_counter()
        go.set()
    out["wall"] = time.perf_counter() - t0
    return out


async def slow_mix(url: str, token: str | None, seconds: float = 8.0) -> tuple[list[float], int, list[str]]:
    """called_by latencies from 4 clients while one keeps `affected` running."""
    quick: list[float] = []
    slow_done = [0]
    errors: list[str] = []
    stop = anyio.Event()

    async def slow():
        async with client(url, token) as c:
            while not stop.is_set():
                r = await c.call_tool(*SLOW)
                slow_done[0] += 1
                if r.is_error:
                    errors.append(f"affected: {r.content[0].text.splitlines()[0]}")

    async def fast():
        async with client(url, token) as c:
            await anyio.sleep(0.5)  # the slow calls are running
            while not stop.is_set():
                t0 = time.perf_counter()
                r = await c.call_tool("called_by", {"name": "at::native::cpublas::gemm"})
                quick.append((time.perf_counter() - t0) * 1000)
                if r.is_error:
                    errors.append(f"called_by: {r.content[0].text.splitlines()[0]}")
                await anyio.sleep(0.05)

    async with anyio.create_task_group() as tg:
        tg.start_soon(slow)
        for _ in range(4):
            tg.start_soon(fast)
        await anyio.sleep(seconds)
        stop.set()
    return quick, slow_done[0], errors


async def timed(c, tool: str, args: dict) -> float:
    t0 = time.perf_counter()
    await c.call_tool(tool, args)
    return (time.perf_counter() - t0) * 1000


async def profile(url: str, token: str | None, db: Path, settle: float, rounds: int = 7) -> None:
    """Where a call's time goes: each call of the mix on a session in this
    process (the SDK's in-memory transport: the tools' work, no HTTP) and on
    one over HTTP, taken in turns (other load weighs on both alike); the
    difference of the medians is the HTTP transport's share. The server in
    this process keeps answers as the other does, and is given as long to
    settle."""
    from mcp import Client

    from torchtalk.mcp.serve import build_server

    print("call                                    | in-process | over HTTP | HTTP's share (median ms)")
    async with client(url, token) as remote, Client(build_server(None, db, watch=False)) as local:
        await local.call_tool(*MIX[0][:2])
        await anyio.sleep(settle)
        for tool, args, _ in MIX:
            await local.call_tool(tool, args)  # warm: the first call of a kind compiles its plan
            await remote.call_tool(tool, args)
            here, there = [], []
            for _ in range(rounds):
                here.append(await timed(local, tool, args))
                there.append(await timed(remote, tool, args))
            name = f"{tool}({next(iter(args.values()))})"
            print(f"{name[:39]:39s} | {pct(here, 0.5):10.1f} | {pct(there, 0.5):9.1f} | "
                  f"{pct(there, 0.5) - pct(here, 0.5):6.1f}")


def start_server(args) -> tuple[subprocess.Popen, str, object]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    where = ["--db", str(args.db)] if args.db else ["--source", str(args.source)]
    log = tempfile.TemporaryFile("w+")
    # no compiler tier: its background libclang run would share the CPUs with the clients measured
    proc = subprocess.Popen([sys.executable, "-m", "torchtalk", "mcp-serve", *where, "--transport", "http",
                             "--port", str(port), "--no-compiler-tier"], stdout=subprocess.DEVNULL, stderr=log,
                            env={**os.environ, "PYTHONPATH": str(ROOT),
                                 **({"TORCHTALK_MCP_CACHE": "0"} if args.no_cache else {}),
                                 **({"TORCHTALK_MCP_ENGINE": args.engine} if args.engine else {})})
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, f"http://127.0.0.1:{port}/mcp", log
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                proc.kill()
                raise SystemExit(f"the server did not start: {log.read()[-2000:]}") from None
            time.sleep(0.1)


def memory(pid: int) -> str:
    """Peak resident memory of the server `pid` and of its children (the slow
    lane's process, Note [Slow lane process]), from /proc."""
    def peak(p: int) -> float | None:
        try:
            line = next(x for x in Path(f"/proc/{p}/status").read_text().splitlines() if x.startswith("VmHWM:"))
        except (OSError, StopIteration):
            return None
        return int(line.split()[1]) / 2**20  # kB -> GB
    parts = [f"server {peak(pid) or 0:.2f} GB"] + [f"child {k} {peak(k) or 0:.2f} GB" for k in children(pid)]
    return "peak memory: " + ", ".join(parts)


def cpu_seconds(pid: int | None) -> float:
    """CPU seconds (user + system) used so far by process `pid` and its
    live children (the slow lane's process), or by this process when None,
    from /proc."""
    if pid is None:
        t = os.times()
        return t.user + t.system

    def own(p: int) -> float:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
    return own(pid) + sum(own(k) for k in children(pid))


def children(pid: int) -> list[int]:
    try:
        return [int(k) for k in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def measured(url: str, token: str | None, clients: int, calls: int, server: int | None) -> dict:
    """A level's figures, with the CPU the server (its process, `server`,
    and the slow lane's, when this bench started it) and this process (the
    clients) used."""
    before = cpu_seconds(server) if server else None, cpu_seconds(None)
    out = anyio.run(level, url, token, clients, calls)
    out["cpu"] = (None if server is None else cpu_seconds(server) - before[0], cpu_seconds(None) - before[1])
    return out


def report(clients: int, out: dict) -> None:
    ms, ok = out["ms"], out["calls"] - len(out["errors"])
    server, here = out.get("cpu", (None, None))
    n = max(out["calls"], 1)
    them = "?" if server is None else f"{server / n * 1000:.1f}"
    cpu = "" if here is None else f" | CPU a call: server {them} ms, clients {here / n * 1000:.1f} ms"
    print(f"{clients:7d} | {out['calls']:5d} | {ok / out['wall']:7.1f} calls/s | "
          f"p50 {pct(ms, 0.5):6.1f} ms | p95 {pct(ms, 0.95):6.1f} ms | max {max(ms, default=0):7.1f} ms | "
          f"{len(out['errors'])} errors{cpu}")
    for e in sorted(set(out["errors"]))[:5]:
        print(f"          error: {e}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--db", type=Path)
    where.add_argument("--source", type=Path)
    where.add_argument("--url", help="a running server's /mcp URL")
    ap.add_argument("--token", default=os.environ.get("TORCHTALK_MCP_TOKEN"))
    ap.add_argument("--levels", default="1,8,32")
    ap.add_argument("--calls", default="60,240,320", help="calls per level, in all")
    ap.add_argument("--slow", action="store_true", help="also called_by p95 beside running `affected` calls")
    ap.add_argument("--profile", action="store_true",
                    help="with --db: also each call's median in this process and over HTTP (where time goes)")
    ap.add_argument("--no-cache", action="store_true", help="the server keeps no answers (TORCHTALK_MCP_CACHE=0)")
    ap.add_argument("--settle", type=float, default=0,
                    help="seconds after the warm-up calls before the measured ones (the server's warm thread)")
    ap.add_argument("--engine", choices=("memory", "duckdb"),
                    help="the server's engine (TORCHTALK_MCP_ENGINE; default: the server's, in memory)")
    args = ap.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    calls = [int(x) for x in args.calls.split(",")]
    if not args.url and not args.db:
        from torchtalk.paths import default_source

        args.source = args.source or default_source()
    proc = log = None
    url = args.url
    if url is None:
        proc, url, log = start_server(args)
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; {reference_line()}; "
          f"answers {'not kept' if args.no_cache else 'kept'} by the server; slow lane "
          f"{'in the server' if os.environ.get('TORCHTALK_MCP_SLOW_PROCESS', '1') == '0' else 'in its own process'}")
    try:
        anyio.run(level, url, args.token, 1, 12)  # warm-up, not counted
        if args.settle:  # the server's warm thread (Note [Warm queries])
            print(f"(measured {args.settle:g} s after the warm-up calls)")
            time.sleep(args.settle)
        print("clients | calls | throughput      | latency")
        for clients, n in zip(levels, calls, strict=True):
            report(clients, measured(url, args.token, clients, n, proc.pid if proc is not None else None))
        if args.profile and args.db:
            if args.no_cache:
                os.environ["TORCHTALK_MCP_CACHE"] = "0"  # this process's server too
            anyio.run(profile, url, args.token, args.db, args.settle)
        if args.slow:
            quick, slow_n, errors = anyio.run(slow_mix, url, args.token)
            print(f"called_by beside {slow_n} `affected` calls: n={len(quick)} p50 {pct(quick, 0.5):.1f} ms "
                  f"p95 {pct(quick, 0.95):.1f} ms; {len(errors)} errors")
    finally:
        if proc is not None:
            print(memory(proc.pid))
            proc.terminate()
            proc.wait(timeout=30)
            log.close()
    print(f"load average at the end: {os.getloadavg()[0]:.1f}; {reference_line()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
