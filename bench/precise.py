"""Precise tier benchmark: cold libclang run over aten/src/ATen/native.

Prints the cold wall time (header generation included, and apart), the share
of TUs parsed without a fatal error (goal >= 95%), the edge count, the calls
not kept by kind, and the main causes of failure. The GPU SDK headers are used
when fetched (`torchtalk fetch cuda`, `torchtalk fetch xpu`); the output says
which were. Run:

    .venv/bin/python bench/precise.py --jobs 2            # the full figure (~452 TUs)
    .venv/bin/python bench/precise.py --limit 20 --json   # a quick look
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from extractors.base import ExtractContext  # noqa: E402


class RowSink:
    """Keeps the rows and warnings in memory."""

    def __init__(self) -> None:
        self.rows: list[tuple] = []
        self.warnings: list[tuple[str, int, str]] = []

    def add(self, relation: str, *values) -> None:
        self.rows.append(values)

    def warn(self, file: str, line: int, message: str) -> None:
        self.warnings.append((file, line, message))

    def progress(self, advance: int = 1, total: int | None = None, what: str = "") -> None:
        pass


def failure_class(message: str) -> str:
    """'cuda_runtime_api.h' file not found -> "missing header cuda_runtime_api.h"."""
    m = re.search(r"'([^']+)' file not found", message)
    if m:
        return f"missing header {m.group(1)}"
    return message.split(":")[-1].strip()[:80]


def main(argv: list[str] | None = None) -> int:
    from extractors.clang import run, sdk, tu_files
    from extractors.clang.flags import generated_dir
    from torchtalk.paths import default_source

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--source", type=Path, default=None)
    p.add_argument("--dir", default="aten/src/ATen/native")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--limit", type=int, default=0, help="only the first N TUs (0 = all)")
    p.add_argument("--cache", type=Path, default=None, help="cache dir (default: a fresh one = cold)")
    p.add_argument("--no-skip-bodies", action="store_true", help="parse header function bodies too")
    p.add_argument("--no-pch", action="store_true", help="parse without the common precompiled header")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)

    root = (args.source or default_source()).resolve()
    cache = args.cache or Path(tempfile.mkdtemp(prefix="tt-precise-bench-"))
    all_files = tu_files(root, [args.dir]) + sorted((root / args.dir).rglob("*.cu"))
    files = all_files[: args.limit] if args.limit else all_files
    t0 = time.perf_counter()
    generated_dir(root, cache)
    gen_s = time.perf_counter() - t0
    sink = RowSink()
    st = run(ExtractContext(root, cache, jobs=args.jobs), sink, files,
             skip_header_bodies=not args.no_skip_bodies, use_pch=not args.no_pch)
    total_s = time.perf_counter() - t0
    causes = Counter(failure_class(msg) for _, msg in st.failed)
    out = {
        "dir": args.dir, "jobs": args.jobs, "tus": st.tus, "ok": st.ok, "fatal": st.fatal,
        "timeout": st.timeout, "crash": st.crash, "cached": st.cached,
        "parsed_share": round(st.parsed_share, 4), "skipped_cu": st.skipped_cuda,
        "edges": st.edges, "distinct_edges": len(set(sink.rows)),
        "callers": len({r[0] for r in sink.rows}), "callees": len({r[1] for r in sink.rows}),
        "error_diagnostics": st.errors, "dropped_calls": dict(st.dropped),
        "cold_wall_s": round(total_s, 1), "headers_gen_s": round(gen_s, 1),
        "parse_s_per_tu": round(st.parse_seconds / max(1, st.tus - st.cached), 2),
        "failure_causes": dict(causes.most_common(15)),
        "sdks": [name for name, one in sdk.SDKS.items() if sdk.include_dir(one)],
    }
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    print(f"precise tier over {args.dir} (--jobs {args.jobs}), cache {cache}")
    print(f"  TUs {st.tus} (+{st.skipped_cuda} .cu skipped: device code, fast tier only);"
          f" SDK headers: {', '.join(out['sdks']) or 'none'}")
    print(f"  parsed without fatal error: {st.ok}/{st.tus} = {100 * st.parsed_share:.1f}%"
          f"  (fatal {st.fatal}, timeout {st.timeout}, crash {st.crash})")
    print(f"  cold wall time {total_s:.1f} s (header generation {gen_s:.1f} s),"
          f" {out['parse_s_per_tu']} s per TU")
    print(f"  calls_precise edges {st.edges} ({out['callers']} callers, {out['callees']} callees)")
    print(f"  calls not kept: {dict(st.dropped)}")
    for cause, n in causes.most_common(15):
        print(f"  failures: {n:4d}  {cause}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
