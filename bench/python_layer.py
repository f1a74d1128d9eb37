"""Benchmark of the python and tests layers on a PyTorch tree: time and row counts.

    .venv/bin/python bench/python_layer.py [--source PATH] [--jobs N] [--cold] [--layers python,tests]

`--cold` uses an empty cache (every file parsed); without it the second run
shows the cached (warm) time. Prints one line per layer and the counts.
"""

from __future__ import annotations

import argparse
import importlib
import os
import resource
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from extractors.base import ExtractContext  # noqa: E402


class CountingSink:
    """Keeps every row (to count distinct values) and the warnings."""

    def __init__(self) -> None:
        self.rows: dict[str, list[tuple]] = {}
        self.warnings: list[tuple[str, int, str]] = []

    def add(self, relation: str, *values) -> None:
        self.rows.setdefault(relation, []).append(values)

    def warn(self, file: str, line: int, message: str) -> None:
        self.warnings.append((file, line, message))

    def progress(self, advance: int = 1, total: int | None = None, what: str = "") -> None:
        pass


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", default="/work/src/pytorch-v2.6.0")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--cold", action="store_true")
    ap.add_argument("--cache", default=None)
    ap.add_argument("--layers", default="python,tests")
    ap.add_argument("--oracle", action="store_true",
                    help="index the installed torch (site-packages) and compare with it at run time")
    args = ap.parse_args()
    if args.oracle:
        return oracle(args)
    cache_root = Path(tempfile.mkdtemp(prefix="tt-bench-")) if args.cold else Path(
        args.cache or Path(tempfile.gettempdir()) / "tt-bench-cache"
    )
    for layer in args.layers.split(","):
        mod = importlib.import_module(f"extractors.{layer}")
        sink = CountingSink()
        ctx = ExtractContext(Path(args.source), cache_root / layer, args.jobs)
        t0, c0 = time.perf_counter(), _cpu()
        mod.extract(ctx, sink)
        dt, cpu = time.perf_counter() - t0, _cpu() - c0
        total = sum(len(r) for r in sink.rows.values())
        print(f"layer {layer}: {dt:.1f} s wall, {cpu:.1f} s CPU (this process + workers; "
              f"load {os.getloadavg()[0]:.1f}), {total} rows, {len(sink.warnings)} warnings "
              f"({'cold' if args.cold else 'cache ' + str(cache_root)}, jobs={args.jobs})")
        for rel, rows in sorted(sink.rows.items()):
            extra = ""
            if rel in ("py_api", "decomp", "tests_cover", "module_class", "binds", "opinfo", "test"):
                c = Counter(r[2] if rel in ("py_api", "binds", "tests_cover", "opinfo") else r[1] for r in rows)
                extra = "  " + ", ".join(f"{k}={v}" for k, v in c.most_common(8))
            print(f"  {rel:14s} {len(rows):8d}{extra}")
        if rel_has(sink, "py_api"):
            apis = {r[0] for r in sink.rows["py_api"]}
            ops = {r[1] for r in sink.rows["py_api"]}
            print(f"  distinct APIs with an op: {len(apis)}, ops reached from Python: {len(ops)}")
        if rel_has(sink, "decomp"):
            print(f"  ops with a decomposition: {len({r[0] for r in sink.rows['decomp']})}")
        if rel_has(sink, "tests_cover"):
            print(f"  tests with a cover edge: {len({r[0] for r in sink.rows['tests_cover']})}, "
                  f"subjects: {len({r[1] for r in sink.rows['tests_cover']})}")
        for w in sink.warnings[:5]:
            print(f"  warning {w[0]}:{w[1]}: {w[2]}")


def oracle(args) -> None:
    """Python layer over the installed torch vs. the same torch at run time."""
    import json

    import torch

    from extractors import python as layer
    from extractors.python.oracle import compare

    root = Path(torch.__file__).resolve().parents[1]
    cache_root = Path(tempfile.mkdtemp(prefix="tt-oracle-")) if args.cold else Path(
        args.cache or Path(tempfile.gettempdir()) / "tt-bench-cache"
    ) / "wheel"
    sink = CountingSink()
    t0 = time.perf_counter()
    layer.extract(ExtractContext(root, cache_root / "python", args.jobs), sink)
    print(f"python layer over torch {torch.__version__} at {root}: {time.perf_counter() - t0:.1f} s, "
          f"{sum(len(r) for r in sink.rows.values())} rows")
    report = compare({k: set(v) for k, v in sink.rows.items()})
    for what in ("decomp", "nn_modules"):
        r = report[what]
        print(f"  {what:10s} ours {r['ours']}, runtime {r['runtime']}, both {r['both']}: "
              f"precision {r['precision']:.3f}, recall {r['recall']:.3f}")
        print(f"    missed e.g. {r['missed'][:8]}")
        print(f"    extra  e.g. {r['extra'][:8]}")
    a = report["alias"]
    print(f"  alias binds agreeing with the runtime object: {a['ok']}/{a['checked']}")
    for b in a["bad"][:5]:
        print(f"    differs: {b}")
    if args.cache:
        Path(args.cache, "oracle.json").write_text(json.dumps(report, indent=1))


def _cpu() -> float:
    """User+system CPU seconds of this process and its finished workers: a
    figure the other jobs on a shared machine do not inflate."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def rel_has(sink: CountingSink, rel: str) -> bool:
    return bool(sink.rows.get(rel))


if __name__ == "__main__":
    main()
