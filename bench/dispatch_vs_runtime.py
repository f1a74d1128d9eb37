"""Bench: static dispatch facts vs the runtime dispatcher of the installed torch wheel.

Indexes the wheel's own YAML (torchgen/packaged/...) with `torchtalk index`,
derives per key which aten ops get a kernel (rules/dispatch.dl `dispatch_registered`: the yaml's
dispatch tables plus what codegen derives from structured / structured_delegate
/ autogen), and compares with `torch._C._dispatch_get_registrations_for_dispatch_key`
for CPU, Meta and the Composite keys. Prints precision and recall per key
(goal >= 0.98) and every class of remaining mismatch with counts and examples;
a mismatch is classified by where the runtime says its kernel was registered
(`torch._C._dispatch_dump`): codegen output (Register*.cpp), a hand-written
C++ registration (TORCH_LIBRARY_IMPL in aten/...), or Python (torch/_meta_registrations.py ...).

With --python the wheel's torch/ Python package is indexed too (the python
layer, minutes), so rules/dispatch.dl also derives the Meta kernels that
`import torch` registers from Python (torch/_meta_registrations.py activate_meta).

Usage: .venv/bin/python bench/dispatch_vs_runtime.py [--python] [--examples N]
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KEYS = ("CPU", "Meta", "CompositeImplicitAutograd", "CompositeExplicitAutograd",
        "CompositeExplicitAutogradNonFunctional")


def runtime_registrations(torch, key: str) -> set[str]:
    """aten ops (as "add.Tensor") with a kernel registered for `key` at runtime."""
    return {n[len("aten::"):] for n in torch._C._dispatch_get_registrations_for_dispatch_key(key)
            if n.startswith("aten::")}


def registered_at(torch, op: str, key: str) -> str:
    """Where the runtime registered `op`'s kernel for `key`: a file path, shortened."""
    dump = torch._C._dispatch_dump(f"aten::{op}")
    for line in dump.splitlines():
        name = line.split(":", 1)[0].replace("[alias]", "")
        if name == key:
            m = re.search(r"registered at (\S+?):\d+", line)
            if m:
                return short_path(m.group(1))
    return "?"


def short_path(path: str) -> str:
    """A registration's file as the runtime names it, relative to the build or
    source tree: "/pytorch/build/aten/src/ATen/RegisterCPU.cpp" -> "aten/src/ATen/RegisterCPU.cpp"."""
    for marker in ("/site-packages/", "/pytorch/build/", "/pytorch/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path


def classify_missing(torch, op: str, key: str, yaml_ops: set[str], python: bool) -> str:
    where = registered_at(torch, op, key)
    if where.endswith(".py"):
        if python and op not in yaml_ops:
            return (f"registered from Python on a packet (aten.foo) that covers this codegen-added "
                    f"overload; facts do not tell packet from overload ({where})")
        if python:
            return f"registered from Python, no decomp/register_meta fact names it ({where})"
        return f"registered from Python ({where}; run with --python)"
    if op not in yaml_ops:
        return "op not in native_functions.yaml (defined by a C++ TORCH_LIBRARY m.def)"
    if re.search(r"Register\w+\.cpp$", where):
        return f"codegen registration not derived ({re.sub(r'_[0-9]+', '', Path(where).name)})"
    return f"hand-written C++ registration ({where.rsplit('/', 1)[0]}/...)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=4)
    ap.add_argument("--python", action="store_true", help="also index the wheel's Python (Meta from Python)")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    import torch

    from torchtalk import api

    wheel = Path(torch.__file__).parent
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "wheel.duckdb"
        t = time.perf_counter()
        api.index(wheel, db=db, layers=["ops", "python"] if args.python else ["ops"], jobs=2)
        t_index = time.perf_counter() - t
        t = time.perf_counter()
        rows = api.eval_program(ROOT / "rules/dispatch.dl", db=db, outputs=["dispatch_registered"])["dispatch_registered"]
        t_rules = time.perf_counter() - t
        con = api.open_db(db=db)
        yaml_ops = {r[0] for r in con.execute("select op from op").fetchall()}
        con.close()
    static: dict[str, dict[str, set[str]]] = collections.defaultdict(lambda: collections.defaultdict(set))
    for op, key, how in rows:
        static[key][op].add(how)
    print(f"torch {torch.__version__} at {wheel}")
    what = "YAML and Python" if args.python else "YAML"
    print(f"indexed the wheel's {what} in {t_index:.2f} s ({len(yaml_ops)} ops); rules/dispatch.dl in {t_rules:.2f} s")
    print("recall(C++): recall over the runtime kernels registered by C++ (codegen or by hand),")
    print("             leaving out those registered from Python files (not derivable from the YAML)")
    print(f"{'key':<40} {'static':>6} {'runtime':>7} {'both':>6} {'precision':>9} {'recall':>7} {'recall(C++)':>11}")
    report = []
    for key in KEYS:
        st, rt = set(static[key]), runtime_registrations(torch, key)
        both = st & rt
        cpp = {op for op in rt if not registered_at(torch, op, key).endswith(".py")}
        p = len(both) / len(st) if st else 1.0
        r = len(both) / len(rt) if rt else 1.0
        rc = len(both & cpp) / len(cpp) if cpp else 1.0
        print(f"{key:<40} {len(st):>6} {len(rt):>7} {len(both):>6} {p:>9.4f} {r:>7.4f} {rc:>11.4f}")
        report.append((key, st - rt, rt - st))
    for key, extra, missing in report:
        if not extra and not missing:
            continue
        print(f"\n{key}:")
        classes: dict[str, list[str]] = collections.defaultdict(list)
        for op in sorted(missing):
            classes["missing: " + classify_missing(torch, op, key, yaml_ops, args.python)].append(op)
        for op in sorted(extra):
            hows = ",".join(sorted(static[key][op]))
            classes[f"extra: derived by {hows}, not registered at runtime"].append(op)
        for name, ops in sorted(classes.items(), key=lambda kv: -len(kv[1])):
            print(f"  {len(ops):>5}  {name}: {', '.join(ops[:args.examples])}{' ...' if len(ops) > args.examples else ''}")
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    # skip interpreter teardown: torch + duckdb together print nanobind leak noise at exit
    os._exit(code)
