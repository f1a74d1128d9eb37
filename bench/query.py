"""Query latency: 20 representative DSL queries, as a process and in-process.

    .venv/bin/python bench/query.py [--source PATH | --db FILE] [--repeat N]

Prints, per query, the rows and the in-process time, then p50/p95 of
`torchtalk query` run as a process (goal p95 <= 0.5 s), of the same
queries in-process on one open connection (goal p95 <= 50 ms), and of the
CLI's default view, a table, in-process, beside the same with every row
read with its chain. A query that
fails (e.g. its layer is not indexed) is reported and left out of the figures.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _machine import reference_line

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


def in_process(db: Path, repeat: int) -> tuple[list[float], set[str]]:
    from torchtalk import api
    from torchtalk.errors import TorchTalkError

    con = api.open_db(db=db)
    times, failed = [], set()
    api.query("search(gemm)", con=con, limit=1)  # load the library once
    for q in QUERIES:
        for i in range(repeat):
            t = time.perf_counter()
            try:
                res = api.query(q, con=con, limit=50, all_matches=True)
            except TorchTalkError as exc:
                failed.add(q)
                print(f"  FAILED {q}: {exc.headline()}")
                break
            dt = time.perf_counter() - t
            times.append(dt)
            if i == 0:
                print(f"  {q:<46} {res.total:>7} rows  {dt * 1000:7.1f} ms")
    con.close()
    return times, failed


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


def as_process(db: Path, repeat: int, failed: set[str]) -> list[float]:
    exe = Path(sys.executable).with_name("torchtalk")
    cmd0 = [str(exe)] if exe.exists() else [sys.executable, "-m", "torchtalk"]
    return _timed(lambda q: subprocess.run([*cmd0, "query", q, "--db", str(db), "--json", "--limit", "50", "--all"],
                                           capture_output=True, check=False), repeat, failed)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path)
    ap.add_argument("--db", type=Path)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    from torchtalk import api

    db = api.resolve_db(source=args.source, db=args.db)
    print(reference_line())
    print(f"fact DB: {db}\nin-process (first run of each query shown):")
    inproc, failed = in_process(db, args.repeat)
    table = as_table(db, max(1, args.repeat // 2), failed)
    table_every = as_table(db, max(1, args.repeat // 2), failed, chains_for_shown=False)
    proc = as_process(db, max(1, args.repeat // 2), failed)
    ok = len(QUERIES) - len(failed)
    print(f"\n{ok} of {len(QUERIES)} queries answered")
    if inproc:
        print(f"in-process  p50 {pct(inproc, 50) * 1000:7.1f} ms   p95 {pct(inproc, 95) * 1000:7.1f} ms"
              f"   (goal p95 <= 50 ms; n={len(inproc)})")
    if table:
        print(f"as a table  p50 {pct(table, 50) * 1000:7.1f} ms   p95 {pct(table, 95) * 1000:7.1f} ms"
              f"   (the CLI's default view, in-process; n={len(table)})")
        print(f"            p50 {pct(table_every, 50) * 1000:7.1f} ms   p95 {pct(table_every, 95) * 1000:7.1f} ms"
              f"   (the same, every row read with its chain)")
    print(reference_line())
    if proc:
        print(f"process     p50 {pct(proc, 50):7.3f} s    p95 {pct(proc, 95):7.3f} s"
              f"    (goal p95 <= 0.5 s; n={len(proc)}, mean {statistics.mean(proc):.3f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
