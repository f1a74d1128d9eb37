"""Benchmark of the C++/CUDA fast tier (extractors/cpp) on a PyTorch tree.

Prints: cold time (empty cache, --jobs workers), no-change time, time after
one .cpp changed (a body edit, then a new function, which changes the
tree's interface; in a temp copy of the tree: the source tree is never
modified), each as wall and CPU seconds, through `extract` into a counting
sink; then the counts of every relation and of call sites.

    .venv/bin/python bench/cpp_fast.py [--source PATH] [--jobs 2] [--json]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from extractors import cpp  # noqa: E402
from extractors.base import ExtractContext  # noqa: E402

CHANGED = "aten/src/ATen/native/BinaryOps.cpp"
BODY_EDIT = ("add_stub(device_type(), *this, -alpha);",
             "add_stub(device_type(), *this, -alpha); add_stub(device_type(), *this, alpha);")


class CountSink:
    def __init__(self) -> None:
        self.rows: Counter[str] = Counter()
        self.warnings = 0

    def add(self, relation, *values):
        self.rows[relation] += 1

    def warn(self, file, line, message):
        self.warnings += 1

    def progress(self, advance=1, total=None, what=""):
        pass


def _cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def timed(ctx: ExtractContext) -> tuple[float, float, CountSink]:
    sink = CountSink()
    t0, c0 = time.perf_counter(), _cpu()
    cpp.extract(ctx, sink)
    return time.perf_counter() - t0, _cpu() - c0, sink


def copy_tree(src: Path, dst: Path) -> None:
    for top in cpp.SOURCE_DIRS:
        shutil.copytree(src / top, dst / top, symlinks=True,
                        ignore=shutil.ignore_patterns("third_party", "*.py", "*.yaml", "*.md"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, default=Path("/work/src/pytorch-v2.6.0"))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    out: dict = {"source": str(args.source), "jobs": args.jobs}
    with tempfile.TemporaryDirectory(prefix="cpp-bench-") as tmp:
        root, cache = Path(tmp) / "tree", Path(tmp) / "cache"
        copy_tree(args.source, root)
        ctx = ExtractContext(root=root, cache_dir=cache, jobs=args.jobs)
        out["cold_s"], out["cold_cpu_s"], sink = timed(ctx)
        out["nochange_s"], out["nochange_cpu_s"], _ = timed(ctx)
        path = root / CHANGED
        text = path.read_text()
        assert BODY_EDIT[0] in text
        path.write_text(text.replace(BODY_EDIT[0], BODY_EDIT[1], 1))  # a function body edited
        out["one_cpp_changed_s"], out["one_cpp_changed_cpu_s"], sink2 = timed(ctx)
        path.write_text(path.read_text() + "\nnamespace at::native { void bench_added() { add_stub(kCPU, x); } }\n")
        out["new_function_s"], out["new_function_cpu_s"], _ = timed(ctx)  # the tree's interface changed
        result = cpp.run(ctx)
    stats = result.stats
    launches = result.rows.get("launches", [])
    out["counts"] = {
        "files": stats.get("files", 0),
        "files_with_tree_sitter_errors": stats.get("files_with_errors", 0),
        "functions": sink.rows["func"],
        "call_sites": stats.get("call_sites", 0),
        "calls_edges": sink.rows["calls"],
        "call_ambiguous": sink.rows["call_ambiguous"],
        "external_call_sites": stats.get("external_call_sites", 0),
        "stub_decl": sink.rows["stub_decl"],
        "stub_define": sink.rows["stub_define"],
        "stub_register": sink.rows["stub_register"],
        "stub_call": sink.rows["stub_call"],
        "kernels": sink.rows["kernel"],
        "launches": sink.rows["launches"],
        "launches_<<<>>>": sum(1 for r in launches if r[4] == "<<<>>>"),
        "launches_helper": sum(1 for r in launches if r[4] != "<<<>>>"),
        "binds_pybind": sink.rows["binds"],
        "lib_def": sink.rows["lib_def"],
        "lib_impl": sink.rows["lib_impl"],
        "impl_func": sink.rows["impl_func"],
        "warnings": sink.warnings,
    }
    out["calls_by_via"] = dict(Counter(r[4] for r in result.rows.get("calls", [])).most_common())
    out["after_change_calls_edges"] = sink2.rows["calls"]
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        _print(out)
    return 0


def _print(out: dict) -> None:
    print(f"cpp fast tier on {out['source']} (jobs={out['jobs']})")
    print(f"  cold            {out['cold_s']:7.2f} s wall  {out['cold_cpu_s']:7.2f} s cpu   (goal <= 60 s)")
    print(f"  no change       {out['nochange_s']:7.2f} s wall  {out['nochange_cpu_s']:7.2f} s cpu   (goal <= 3 s)")
    print(f"  one .cpp changed{out['one_cpp_changed_s']:7.2f} s wall  {out['one_cpp_changed_cpu_s']:7.2f} s cpu   (goal <= 5 s; a body edit)")
    print(f"  + new function  {out['new_function_s']:7.2f} s wall  {out['new_function_cpu_s']:7.2f} s cpu   (interface changed: all re-resolved)")
    for k, v in out["counts"].items():
        print(f"  {k:32s}{v:>9,}")
    print("  calls by via: " + ", ".join(f"{k} {v:,}" for k, v in out["calls_by_via"].items()))


if __name__ == "__main__":
    raise SystemExit(main())
