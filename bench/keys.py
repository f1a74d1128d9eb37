"""Bench: do the walks keep their dispatch key, and how is each step resolved?

On an indexed tree (default: the default PyTorch tree's DB), evaluates
`kernels(op)` for every op of native_functions.yaml at the default depth and
prints:

- the rows, by dispatch key, and the CUDA `__global__` kernels reported under
  a key whose kernels cannot run on CUDA (goal: 0);
- the rows reached only through a name guess;
- the walks' steps by resolution (Note [Op call resolution] in
  rules/graph.dl): compiler, macro, typed, guess; and the share of the call
  sites in aten/src/ATen/native whose edges are the compiler's (precise tier),
  over all of them and over those in files a compiler run here can parse
  (`parseable_here`: not `.mm` Objective-C++, not under the ROCm-only,
  Apple-only, test or benchmark dirs the layer leaves out).

Usage: .venv/bin/python bench/keys.py [--db FILE] [--json]
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._machine import reference_line  # noqa: E402

CUDA_FAMILY = {"CUDA", "SparseCUDA", "SparseCsrCUDA", "QuantizedCUDA", "NestedTensorCUDA"}
PROGRAM = '#include "kernels.dl"\nkernels_arg(o) :- op(o, _, _, _, _, _).\nkernels_depth(5).\n'


def parseable_here(rel: str) -> bool:
    """Can a compiler run on Linux parse the file `rel` (a path in the tree)?
    Not a `.mm` (Objective-C++, MPS), nor one under the dirs the compiler
    tier leaves out: ROCm-only (hip, miopen), Apple-only (mps, metal), tests
    and benchmarks (QNNPACK's test dirs), torchgen's templates."""
    from extractors.clang import APPLE_ONLY_PARTS, EXCLUDED_PARTS, NOT_BUILT_PARTS

    parts = set(rel.split("/"))
    return not rel.endswith(".mm") and not parts & (EXCLUDED_PARTS | NOT_BUILT_PARTS | APPLE_ONLY_PARTS)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", help="fact DB (default: the default tree's)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    from torchtalk import api
    from torchtalk.datalog.engines.duckdb import DuckDBEngine
    from torchtalk.datalog.parser import parse_text
    from torchtalk.errors import TorchTalkError
    from torchtalk.query.derived import use_derived
    from torchtalk.query.library import RULES_DIR

    try:
        con = api.open_db(db=args.db) if args.db else api.open_db()
    except TorchTalkError as exc:
        print(f"bench/keys.py: {exc.headline()}", file=sys.stderr)
        return 2
    if not args.json:
        print(reference_line())
    t = time.perf_counter()
    program, tables = use_derived(parse_text(PROGRAM, "bench/keys.dl", base=RULES_DIR), con)
    rows = DuckDBEngine().run(program, con, ["kernels"], {}, tables=tables)["kernels"]
    seconds = time.perf_counter() - t
    by_key = collections.Counter(r[1] for r in rows)
    composite = {k for k in by_key if k.startswith("Composite") or k == "ZeroTensor"}
    wrong = [r for r in rows if r[1] not in CUDA_FAMILY | composite]
    guessed = sum(1 for r in rows if r[6] == "guess")
    res = dict(con.execute('SELECT res, count(*) FROM derived."step_at" GROUP BY res ORDER BY 2 DESC').fetchall())
    sites = con.execute(
        "SELECT file, file IN (SELECT file FROM precise_file) FROM "
        "(SELECT file, line FROM calls UNION SELECT file, line FROM calls_precise) WHERE file LIKE 'aten/src/ATen/native/%'"
    ).fetchall()
    native = (sum(1 for _, c in sites if c), len(sites))
    here = [c for f, c in sites if parseable_here(f)]
    out = {
        "ops": con.execute("SELECT count(*) FROM op").fetchone()[0],
        "kernels_rows": len(rows), "seconds": round(seconds, 2), "by_key": dict(by_key.most_common()),
        "wrong_key_rows": len(wrong), "wrong_key_examples": [list(r[:5]) for r in wrong[:5]],
        "guess_rows": guessed, "steps_by_resolution": res,
        "native_call_sites_compiler": native[0], "native_call_sites": native[1],
        "native_call_sites_parseable_here_compiler": sum(here), "native_call_sites_parseable_here": len(here),
    }
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    total = sum(res.values()) or 1
    print(f"kernels(op) over all {out['ops']} ops: {len(rows)} rows in {seconds:.1f} s")
    print("  by key: " + ", ".join(f"{k} {n}" for k, n in by_key.most_common()))
    print(f"  CUDA kernels under a non-CUDA key: {len(wrong)}")
    for r in wrong[:5]:
        print("    " + "  ".join(map(str, r[:5])))
    print(f"  rows reached only through a name guess: {guessed} ({guessed / max(len(rows), 1):.1%})")
    print("steps by resolution: " + ", ".join(f"{k} {n} ({n / total:.1%})" for k, n in res.items()))
    print(f"call sites in aten/src/ATen/native resolved by the compiler: {native[0]} of {native[1]} "
          f"({native[0] / max(native[1], 1):.1%})" + ("" if native[0] else " (index with --precise)"))
    print(f"  of them in files a compiler run here can parse: {sum(here)} of {len(here)} "
          f"({sum(here) / max(len(here), 1):.1%})")
    print(reference_line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
