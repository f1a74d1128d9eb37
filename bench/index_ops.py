"""Bench: the ops layer of the PyTorch 2.6.0 tree, the no-op re-index, and `torchtalk status`.

Usage: .venv/bin/python bench/index_ops.py [TREE]     (default: TORCHTALK_PYTORCH_SRC / the fetched tree)
Goals: ops layer indexed <= 5 s; `torchtalk status` as a process <= 0.3 s.
Each figure is the median of N runs of a fresh process, in a throwaway cache dir.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TORCHTALK = [sys.executable, "-m", "torchtalk"]


CPU: list[float] = []  # CPU seconds (user+sys) of each timed process: less sensitive to load


def timed(argv: list[str], env: dict) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return wall


def median(argv: list[str], env: dict, n: int) -> tuple[float, float, float]:
    CPU.clear()
    runs = [timed(argv, env) for _ in range(n)]
    return statistics.median(runs), min(runs), statistics.median(CPU)


def main() -> int:
    sys.path.insert(0, str(ROOT))
    from torchtalk.paths import default_source

    tree = Path(sys.argv[1]) if len(sys.argv) > 1 else default_source()
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, TORCHTALK_CACHE_DIR=tmp)
        src = ["--source", str(tree)]
        index = [*TORCHTALK, "index", *src, "--layers", "ops", "--quiet"]
        fresh = [timed([*index, "--force"], env) for _ in range(3)]
        fresh_cpu = statistics.median(CPU)
        noop = median(index, env, 5)
        status = median([*TORCHTALK, "status", *src], env, 7)
        out = subprocess.run([*TORCHTALK, "status", *src, "--json"], env=env, capture_output=True, text=True, check=True)
    import json

    st = json.loads(out.stdout)
    layer = st["layers"][0]
    rows = {k: v for k, v in st["relations"].items() if v}
    print(f"tree: {tree} (PyTorch {st['meta']['version']})")
    print(f"ops rows: {layer['rows']:,} ({', '.join(f'{k} {v:,}' for k, v in rows.items())})")
    print(f"ops layer extraction alone:        {layer['seconds']:.2f} s")
    ok_index = statistics.median(fresh) <= 5.0
    ok_status = status[0] <= 0.3
    print(f"index --layers ops --force (proc): median {statistics.median(fresh):.2f} s, min {min(fresh):.2f} s, cpu {fresh_cpu:.2f} s   goal <= 5 s   {'OK' if ok_index else 'OVER'}")
    print(f"no-op re-index (proc):             median {noop[0]:.3f} s, min {noop[1]:.3f} s, cpu {noop[2]:.3f} s")
    print(f"status (proc):                     median {status[0]:.3f} s, min {status[1]:.3f} s, cpu {status[2]:.3f} s   goal <= 0.3 s   {'OK' if ok_status else 'OVER'}")
    print(f"load average: {', '.join(f'{x:.2f}' for x in os.getloadavg())} (figures are slower on a busy machine)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
