"""A cold index of the fast tier: `torchtalk index` as a process on a new DB
with empty caches (the layers' caches beside the DB, and TORCHTALK_CACHE_DIR's
parsed rules), as a first index on a new machine runs.

Prints, per run: the wall time, the CPU time of the process and its workers
(user + sys: the machine's load moves wall time, much less this), the peak
RSS of the largest of them, and each layer's seconds; then the median of
each over the runs.

    python bench/cold.py [--source TREE] [--layers ops,cpp,python,tests] [--runs N] [--jobs 2]
                         [--baseline CHECKOUT] [--keep DIR]

--baseline CHECKOUT takes turns with another checkout of TorchTalk (a git
worktree of an older commit), so both see the same load, and prints the
ratio of the medians (this code's over the baseline's).
--keep DIR writes the DBs there (cold-<code>-<run>.duckdb) instead of a
temporary dir, e.g. to compare their tables.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import reference_line  # noqa: E402

HERE = Path(__file__).resolve().parents[1]


def cold_index(src: Path, work: Path, name: str, layers: str, jobs: int, code: Path) -> dict:
    """{"wall", "cpu", "rss_mb", layer: seconds} of one cold `torchtalk index`
    of `src` by the checkout `code`, into `work/name.duckdb`."""
    cache = work / f"{name}.cache-dir"
    cache.mkdir()
    env = {**os.environ, "PYTHONPATH": str(code), "TORCHTALK_CACHE_DIR": str(cache)}
    out = work / f"{name}.json"
    t = time.perf_counter()
    with open(out, "w") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "torchtalk", "index", "--source", str(src),
                                 "--db", str(work / f"{name}.duckdb"), "--layers", layers, "--jobs", str(jobs),
                                 "--json", "--quiet"], stdout=fh, env=env, cwd=code)
        _pid, status, ru = os.wait4(proc.pid, 0)  # this process's rusage: its workers' included
        proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"index failed (exit code {proc.returncode}): {out}")
    report = json.loads(out.read_text())
    row = {"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "rss_mb": ru.ru_maxrss / 1024}
    row.update((lr["layer"], lr["seconds"]) for lr in report["layers"])
    return row


def line(label: str, row: dict) -> str:
    layers = ", ".join(f"{k} {v:.1f}" for k, v in row.items() if k not in ("wall", "cpu", "rss_mb"))
    return f"{label:>16}: {row['wall']:6.1f} s wall {row['cpu']:6.1f} s CPU {row['rss_mb']:6.0f} MB  ({layers})"


def median(rows: list[dict]) -> dict:
    return {k: statistics.median(r[k] for r in rows) for k in rows[0]}


def main() -> None:
    from torchtalk.paths import default_source

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, default=None, help="PyTorch tree (default: the fetched 2.6.0 tree)")
    ap.add_argument("--layers", default="ops,cpp,python,tests")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--baseline", type=Path, help="another checkout of TorchTalk to take turns with")
    ap.add_argument("--keep", type=Path, help="write the DBs here")
    args = ap.parse_args()
    src = (args.source or default_source()).expanduser().resolve()
    codes = {"this": HERE} | ({"baseline": args.baseline.resolve()} if args.baseline else {})
    print(f"cold index of {src}, layers {args.layers}, --jobs {args.jobs}")
    print(reference_line())
    rows: dict[str, list[dict]] = {k: [] for k in codes}
    with tempfile.TemporaryDirectory(prefix="tt-cold-") as tmp:
        work = Path(tmp) if args.keep is None else args.keep
        work.mkdir(parents=True, exist_ok=True)
        for i in range(args.runs):
            for label, code in codes.items():
                row = cold_index(src, work, f"cold-{label}-{i}", args.layers, args.jobs, code)
                rows[label].append(row)
                print(line(f"{label} #{i + 1}", row), flush=True)
    for label in codes:
        print(line(f"{label} median", median(rows[label])))
    if args.baseline:
        a, b = median(rows["this"]), median(rows["baseline"])
        print(f"this / baseline: wall {a['wall'] / b['wall']:.2f}, CPU {a['cpu'] / b['cpu']:.2f}")
    print(reference_line())


if __name__ == "__main__":
    main()
