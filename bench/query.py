"""Query latency: 20 representative DSL queries and `trace` of the five
largest ops (those with the most kernels, dispatch rows), as a process and
in-process (issue 16).

    .venv/bin/python bench/query.py [--source PATH | --db FILE] [--repeat N]

Prints, per query, the rows and the in-process time on each engine (the
embedded DuckDB one, and the in-memory one a server's Session uses, Note
[Engine per session] in torchtalk/connmemo.py), then p50/p95 of
`torchtalk query` run as a process (goal p95 <= 0.3 s), of the same
queries in-process on one open connection, per engine (goal p95 <= 20 ms), and of the
CLI's default view, a table, in-process, beside the same with every row
read with its chain. A query that
fails (e.g. its layer is not indexed) is reported and left out of the figures.

    .venv/bin/python bench/query.py --breakdown

instead prints, per query (in-process, after a warm run), where its time
goes by DuckDB's own profiler: the SQL statements the engine ran, their
time, the share spent binding, optimizing and planning them, and the time
in recursive CTEs (the walks), the figures of Note [Where a query's time
goes] in docs/queries.md.

    .venv/bin/python bench/query.py --server [--repeat N]

instead starts `torchtalk watch` on the DB (its first update a no-op on an
unchanged tree; a private $XDG_RUNTIME_DIR, so its socket is the only one
the clients see), waits until its pool is warm, and times `torchtalk query`
processes answered by it (Note [Query server] in torchtalk/qserver.py)
beside the same processes with TORCHTALK_SERVER=0, by turns: p50/p95 of
each, of the server's own time per query (its ping's busy seconds) and of
what the client process adds to it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _machine import reference_line, stop

QUERIES = (
    "callers(cpublas::gemm)",
    "callees(matmul)",
    "callees(_matmul_impl)",
    "impact(cpublas::gemm)",
    "impact(at::native::cpublas::gemm, depth=3)",
    "trace(matmul)",
    "trace(torch.matmul)",
    "trace(aten::add.Tensor)",
    "trace(softmax)",
    "kernels(softmax)",
    "kernels(add)",
    "paths(cunn_SoftMaxForward -> python)",
    "paths(torch.softmax -> cuda)",
    "tests(softmax)",
    "tests(matmul)",
    "affected(cpublas::gemm)",
    'search("softmax_warp")',
    "search(gemm)",
    "callers(add_stub)",
    "impact(host_softmax, depth=4)",
)


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    k = max(0, min(len(xs) - 1, round(p / 100 * (len(xs) - 1))))
    return xs[k]


def in_process(db: Path, repeat: int) -> tuple[dict[str, list[float]], set[str]]:
    """Each query `repeat` times on one open connection, on each engine
    (Note [Engine per session] in torchtalk/connmemo.py): DuckDB's times and
    the in-memory engine's, after a first pass that reads its tables (timed
    apart: what a server pays once)."""
    from torchtalk import api
    from torchtalk.errors import TorchTalkError

    times: dict[str, list[float]] = {e: [] for e in ENGINES}
    shown: dict[str, dict[str, float]] = {e: {} for e in ENGINES}
    failed: set[str] = set()
    rows: dict[str, int] = {}
    for engine in ENGINES:
        con = api.open_db(db=db)
        con.engine = engine
        t = time.perf_counter()
        api.query("search(gemm)", con=con, limit=1)  # load the library once
        if engine == "memory":
            for q in QUERIES:
                _query(api, con, q, failed, TorchTalkError)
            print(f"  (in memory: the first pass over the {len(QUERIES)} queries, reading the tables, "
                  f"{time.perf_counter() - t:.1f} s)")
        for q in QUERIES:
            for i in range(repeat):
                t = time.perf_counter()
                res = _query(api, con, q, failed, TorchTalkError)
                if res is None:
                    break
                times[engine].append(time.perf_counter() - t)
                if i == 0:
                    shown[engine][q], rows[q] = times[engine][-1], res.total
        con.close()
    print(f"  {'':<46} {'rows':>7}  {'DuckDB':>9}  {'in memory':>9}")
    for q in QUERIES:
        if q in rows:
            d, m = (shown[e].get(q, float("nan")) * 1000 for e in ENGINES)
            print(f"  {q:<46} {rows[q]:>7}  {d:6.1f} ms  {m:6.1f} ms")
    return times, failed


ENGINES = ("duckdb", "memory")


def _query(api, con, q: str, failed: set[str], error):
    try:
        return api.query(q, con=con, limit=50, all_matches=True)
    except error as exc:
        if q not in failed:
            failed.add(q)
            print(f"  FAILED {q}: {exc.headline()}")
        return None


def as_table(db: Path, repeat: int, failed: set[str], chains_for_shown: bool = True) -> list[float]:
    """The CLI's default view in-process: a table of about CLI_ROWS lines
    printed (to a buffer), read as the CLI reads it (the first rows of each
    section where the answer can be sized so, Note [Rows per section]; the
    chains of the rows shown, Note [Chains for the rows read]) or, with
    `chains_for_shown` False, as before both: every row and its chain."""
    import contextlib
    import io

    from torchtalk import api
    from torchtalk.query import output

    con = api.open_db(db=db)
    api.query("search(gemm)", con=con, limit=1)
    cap = output.CLI_ROWS
    pick = (lambda cols, rows: output.table_rows(cols, rows, cap)) if chains_for_shown else None

    def table(q: str) -> None:
        res = api.query(q, con=con, all_matches=True, chains_for=pick, per_section=cap if chains_for_shown else None)
        with contextlib.redirect_stderr(io.StringIO()):  # its notes and "… N more" lines
            output.print_table(res, file=io.StringIO(), cap=cap, text=q)

    times = _timed(table, repeat, failed)
    con.close()
    return times


def _timed(run, repeat: int, failed: set[str]) -> list[float]:
    """Seconds of `run(q)` for each query that did not fail, `repeat` times."""
    times = []
    for q in QUERIES:
        if q in failed:
            continue
        for _ in range(repeat):
            t = time.perf_counter()
            run(q)
            times.append(time.perf_counter() - t)
    return times


class Profiled:
    """A DuckDB connection whose statements are profiled by DuckDB itself:
    `stats` gets (seconds, planning seconds, recursive-CTE seconds) of each
    statement the engine runs, its rows read at once so the profile is
    complete (the bench's cost, not in the figures)."""

    QUIET = ("SET ", "PRAGMA ", "DROP ")

    def __init__(self, con, out: Path) -> None:
        self._con, self._out, self.stats = con, out, []

    def __getattr__(self, name: str):
        return getattr(self._con, name)

    def execute(self, sql: str, *args):
        if sql.lstrip().upper().startswith(self.QUIET):
            return self._con.execute(sql, *args)
        self._con.execute("SET enable_profiling = 'json'")
        self._con.execute(f"SET profiling_output = '{self._out}'")
        t = time.perf_counter()
        res = self._con.execute(sql, *args)
        rows, desc = (res.fetchall(), res.description) if res.description else ([], None)
        wall = time.perf_counter() - t
        self._con.execute("PRAGMA disable_profiling")
        prof = json.loads(self._out.read_text())
        # a statement DuckDB answers without a plan (a table's count(*)) has no planner timings
        plan = sum(prof.get(k, {}).get("total_time", 0.0) for k in ("planner", "physical_planner", "optimizer"))
        self.stats.append((wall, plan, _recursive(prof.get("operator", []))))
        return _Rows(rows, desc)


class _Rows:
    """The rows of a profiled statement, read as a DuckDB result is."""

    def __init__(self, rows: list, description) -> None:
        self._rows, self.description = rows, description

    def fetchall(self) -> list:
        return self._rows

    def fetchone(self):
        return self._rows[0] if self._rows else None


def _recursive(ops: list) -> float:
    """Seconds in the recursive CTEs of a profile's operator tree (each
    counted once, with what runs under it)."""
    total = 0.0
    for op in ops:
        total += _subtree(op) if op.get("type") == "RECURSIVE_CTE" else _recursive(op.get("children", []))
    return total


def _subtree(op: dict) -> float:
    return op.get("timing", 0.0) + sum(_subtree(c) for c in op.get("children", []))


def breakdown(db: Path) -> None:
    """Per query: statements, their time, the planning share and the time in
    recursive CTEs, by DuckDB's profiler (Note [Where a query's time goes])."""
    from torchtalk import api
    from torchtalk.errors import TorchTalkError

    con = api.open_db(db=db)
    with tempfile.TemporaryDirectory() as tmp:
        prof = Profiled(con.con, Path(tmp) / "profile.json")
        con.con = prof
        sums = [0, 0.0, 0.0, 0.0, 0.0]
        print(f"  {'query':<46} {'stmts':>5} {'total':>9} {'in SQL':>9} {'planning':>14} {'walks':>9}")
        for q in QUERIES:
            try:
                api.query(q, con=con, limit=50, all_matches=True)  # warm: the library, plans, probes
                prof.stats.clear()
                t = time.perf_counter()
                api.query(q, con=con, limit=50, all_matches=True)
                total = time.perf_counter() - t
            except TorchTalkError as exc:
                print(f"  FAILED {q}: {exc.headline()}")
                continue
            n, sql = len(prof.stats), sum(s[0] for s in prof.stats)
            plan, rec = sum(s[1] for s in prof.stats), sum(s[2] for s in prof.stats)
            print(f"  {q:<46} {n:>5} {total * 1000:7.1f}ms {sql * 1000:7.1f}ms {plan * 1000:7.1f}ms {_share(plan, sql):>5}"
                  f" {rec * 1000:7.1f}ms")
            for i, v in enumerate((n, total, sql, plan, rec)):
                sums[i] += v
        n, total, sql, plan, rec = sums
        print(f"  {'all':<46} {n:>5} {total * 1000:7.0f}ms {sql * 1000:7.0f}ms {plan * 1000:7.0f}ms {_share(plan, sql):>5}"
              f" {rec * 1000:7.0f}ms")
        print(f"in SQL: {_share(sql, total)} of the time; planning (bind, optimize, plan): {_share(plan, sql)} of "
              f"that; recursive CTEs (the walks): {_share(rec, sql)}; {sql / max(n, 1) * 1000:.1f} ms per statement")
    con.close()


def _share(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


def as_process(db: Path, repeat: int, failed: set[str]) -> list[float]:
    """`torchtalk query` processes with TORCHTALK_SERVER=0: each computes its answer."""
    import os

    env = {**os.environ, "TORCHTALK_SERVER": "0"}
    return _timed(lambda q: subprocess.run([*_query_cmd(db), q], capture_output=True, check=False, env=env),
                  repeat, failed)


def _torchtalk() -> list[str]:
    exe = Path(sys.executable).with_name("torchtalk")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "torchtalk"]


def _query_cmd(db: Path) -> list[str]:
    """`torchtalk query` on `db` as both timings run it (the query text to append)."""
    return [*_torchtalk(), "query", "--db", str(db), "--json", "--limit", "50", "--all"]


def served(db: Path, repeat: int) -> int:
    """`torchtalk query` processes answered by a warm `torchtalk watch`,
    beside the same computed in their own process (Note [Query server])."""
    import os

    from torchtalk import api, qclient

    source = api.status(db=db)["meta"].get("source")
    run = Path(tempfile.mkdtemp(prefix="torchtalk-bench-"))  # mode 0700
    env = {**os.environ, "XDG_RUNTIME_DIR": str(run)}
    os.environ["XDG_RUNTIME_DIR"] = str(run)  # this process pings the server there
    t = time.perf_counter()
    watch = subprocess.Popen([*_torchtalk(), "watch", "--db", str(db), "--source", source], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while not (qclient.ping(db) or {}).get("warm"):
            if watch.poll() is not None or time.perf_counter() - t > 600:
                print(f"the server did not become warm (exit {watch.poll()})")
                return 1
            time.sleep(0.2)
        print(f"server: `torchtalk watch` pid {watch.pid}, warm {time.perf_counter() - t:.1f} s after its start")
        local, proc, own = [], [], []
        cmd = _query_cmd(db)
        for q in QUERIES:
            for _ in range(repeat):  # by turns, so that both see the machine alike
                t = time.perf_counter()
                subprocess.run([*cmd, q], capture_output=True, check=False, env={**env, "TORCHTALK_SERVER": "0"})
                local.append(time.perf_counter() - t)
                before = qclient.ping(db)
                t = time.perf_counter()
                subprocess.run([*cmd, q], capture_output=True, check=False, env=env)
                proc.append(time.perf_counter() - t)
                after = qclient.ping(db)
                if after["served"] != before["served"] + 1:
                    print(f"  NOT SERVED: {q}")
                own.append(after["busy_s"] - before["busy_s"])
    finally:
        stop(watch)
        shutil.rmtree(run, ignore_errors=True)
    extra = [p - o for p, o in zip(proc, own, strict=True)]
    print(f"  {'median of ' + str(repeat):<46} {'computed':>9}  {'served':>9}  {'server':>9}")
    for i, q in enumerate(QUERIES):
        cut = slice(i * repeat, (i + 1) * repeat)
        print(f"  {q:<46} " + "  ".join(f"{statistics.median(xs[cut]) * 1000:6.0f} ms" for xs in (local, proc, own)))
    print(reference_line())
    for label, xs in (("process, computed in it (TORCHTALK_SERVER=0)", local),
                      ("process, answered by the server", proc),
                      ("  the server's own time", own), ("  what the client process adds", extra)):
        print(f"{label:<48} p50 {pct(xs, 50) * 1000:6.0f} ms   p95 {pct(xs, 95) * 1000:6.0f} ms   "
              f"(n={len(xs)}, mean {statistics.mean(xs) * 1000:.0f} ms)")
    print("goal: p95 <= 0.3 s answered by the server")
    return 0


def largest_ops(db: Path, n: int = 5) -> list[str]:
    """The `n` ops with the most kernels (dispatch rows; ties by name)."""
    from torchtalk import store

    con = store.open_db(db)
    try:
        return [op for (op,) in con.execute(
            "SELECT op FROM dispatch GROUP BY op ORDER BY count(*) DESC, op LIMIT ?", [n]).fetchall()]
    finally:
        con.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path)
    ap.add_argument("--db", type=Path)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--breakdown", action="store_true",
                    help="where each query's time goes, by DuckDB's profiler, instead of the latency figures")
    ap.add_argument("--server", action="store_true",
                    help="`torchtalk query` processes answered by a warm `torchtalk watch`, beside computed ones")
    args = ap.parse_args()
    from torchtalk import api

    db = api.resolve_db(source=args.source, db=args.db)
    print(reference_line())
    global QUERIES
    QUERIES = QUERIES + tuple(f"trace({op})" for op in largest_ops(db))
    if args.server:
        print(f"fact DB: {db}")
        return served(db, args.repeat)
    if args.breakdown:
        print(f"fact DB: {db}\nwhere the time goes (in-process, one run after a warm one):")
        breakdown(db)
        return 0
    print(f"fact DB: {db}\nin-process (first run of each query shown):")
    inproc, failed = in_process(db, args.repeat)
    table = as_table(db, max(1, args.repeat // 2), failed)
    table_every = as_table(db, max(1, args.repeat // 2), failed, chains_for_shown=False)
    proc = as_process(db, max(1, args.repeat // 2), failed)
    ok = len(QUERIES) - len(failed)
    print(f"\n{ok} of {len(QUERIES)} queries answered")
    for engine, label in (("duckdb", "DuckDB"), ("memory", "in memory")):
        xs = inproc[engine]
        if xs:
            print(f"in-process  p50 {pct(xs, 50) * 1000:7.1f} ms   p95 {pct(xs, 95) * 1000:7.1f} ms"
                  f"   {label} (goal p95 <= 20 ms; n={len(xs)})")
    if inproc["duckdb"] and inproc["memory"]:
        d, m = inproc["duckdb"], inproc["memory"]
        print(f"            in memory / DuckDB: p50 {pct(m, 50) / pct(d, 50):.2f}x, p95 {pct(m, 95) / pct(d, 95):.2f}x")
    if table:
        print(f"as a table  p50 {pct(table, 50) * 1000:7.1f} ms   p95 {pct(table, 95) * 1000:7.1f} ms"
              f"   (the CLI's default view, in-process; n={len(table)})")
        print(f"            p50 {pct(table_every, 50) * 1000:7.1f} ms   p95 {pct(table_every, 95) * 1000:7.1f} ms"
              f"   (the same, every row read with its chain)")
    print(reference_line())
    if proc:
        print(f"process     p50 {pct(proc, 50):7.3f} s    p95 {pct(proc, 95):7.3f} s"
              f"    (goal p95 <= 0.3 s; n={len(proc)}, mean {statistics.mean(proc):.3f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
