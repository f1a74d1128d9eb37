"""Benchmark `torchtalk report coverage` on an indexed tree (goal: all keys ≤ 10 s).

Usage:
    .venv/bin/python bench/report.py [--db FILE | --source TREE] [--runs 3]

Without --db, indexes the ops layer of the tree into a temp dir first. Prints,
per scenario, the median wall time in-process (compute + render) and as a
process (`torchtalk report coverage ... -o FILE`), plus the headline figures
(per-key coverage and core share for CPU, CUDA, MPS, Meta).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "tests" / "fixtures" / "backend_pkg"

SCENARIOS = (
    ("all keys, md", {}, "md"),
    ("all keys, html", {}, "html"),
    ("all keys, json", {}, "json"),
    ("CPU,CUDA,MPS,Meta core, md", {"keys": ("CPU", "CUDA", "MPS", "Meta"), "tag": "core"}, "md"),
    ("backend package (core)", {"keys": ("CPU",), "tag": "core", "backend_package": PKG}, "md"),
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", type=Path)
    ap.add_argument("--source", type=Path)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from torchtalk import api

    tmp = tempfile.TemporaryDirectory()
    db = args.db
    if db is None:
        from torchtalk.paths import default_source

        db = Path(tmp.name) / "ops.duckdb"
        t0 = time.perf_counter()
        api.index(args.source or default_source(), db=db, layers=["ops"])
        print(f"indexed the ops layer in {time.perf_counter() - t0:.2f} s → {db}")
    print(f"{'scenario':36} {'in-process':>11} {'process':>9} {'keys':>5} {'ops':>5}")
    for name, kw, fmt in SCENARIOS:
        inproc, report = _in_process(api, db, kw, fmt, args.runs)
        proc = _as_process(db, kw, fmt, Path(tmp.name) / f"out.{fmt}", args.runs)
        flag = "" if proc <= 10.0 else "  (over the 10 s goal)"
        print(f"{name:36} {inproc:10.2f}s {proc:8.2f}s {len(report.keys):5} {report.total:5}{flag}")
    full = api.coverage(db=db, keys=("CPU", "CUDA", "MPS", "Meta"))
    print("\nper key: covered/total (share), core covered/total")
    for kc in full.keys:
        core = kc.tag("core")
        print(f"  {kc.key:5} {kc.covered}/{kc.total} ({100 * kc.share:.1f}%), core {core.covered}/{core.total}"
              f" ({100 * core.covered / core.total:.1f}%), paths {dict(sorted(kc.by_path.items()))}")
    if full.layers_missing:
        print("not indexed: " + "; ".join(full.layers_missing))
    return 0


def _in_process(api, db, kw, fmt, runs):
    times, report = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        report = api.coverage(db=db, **kw)
        api.render_coverage(report, fmt)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), report


def _as_process(db, kw, fmt, out, runs):
    cmd = [sys.executable, "-m", "torchtalk", "report", "coverage", "--db", str(db), "--quiet",
           "--format", fmt, "-o", str(out)]
    if kw.get("keys"):
        cmd += ["--keys", ",".join(kw["keys"])]
    if kw.get("tag"):
        cmd += ["--tag", kw["tag"]]
    if kw.get("backend_package"):
        cmd += ["--backend-package", str(kw["backend_package"])]
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, cwd=ROOT, capture_output=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


if __name__ == "__main__":
    sys.exit(main())
