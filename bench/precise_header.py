"""The compiler tier catching up after a header edit (issue 16: a header
used by 200 TUs, the semantic tier in the background in <= 5 min on 2 cores).

From a finished compiler tier (the tree DB's precise cache), the jobs whose
cache entries record the header among the files they read (their own deps
or a shared set, Note [Precise cache] in extractors/clang/cache.py) are
those an edit of it makes stale; `index --precise` after the edit (Note
[Compiler tier catching up]) parses them again and reads every other job
from the cache. This runs the two halves in the cache itself: the stale
jobs parsed (their entries written again, the same, as the tree is not
edited), then every other job read from the cache; a copy of the cache
would not do, as its generated headers and precompiled headers are named
by their paths in it. Prints how many, and the wall time of each half and
of both (the fact DB's update after it is not included).

    python bench/precise_header.py [--source TREE] [--header REL] [--jobs 2] [--db DB]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from extractors.base import ExtractContext  # noqa: E402

IR_H = "torch/csrc/jit/ir/ir.h"  # bench/incremental.py's header: 258 files of the tree include it


class CountSink:
    def __init__(self) -> None:
        self.rows = 0

    def add(self, relation: str, *values) -> None:
        self.rows += 1

    def warn(self, file: str, line: int, message: str) -> None:
        pass

    def progress(self, advance: int = 1, total: int | None = None, what: str = "") -> None:
        pass


def stale_jobs(cache: Path, jobs: list[Path], header: Path) -> list[Path]:
    """The jobs whose entry in the precise cache `cache` records `header` among what they read."""
    from extractors.clang.cache import FileHashes, TuCache

    tu = TuCache(cache / "tu", FileHashes())
    sets: dict[str, bool] = {}

    def in_set(sid: str) -> bool:
        if sid not in sets:
            try:
                sets[sid] = str(header) in json.loads((cache / "tu" / "sets" / f"{sid}.json").read_text())
            except (OSError, ValueError):
                sets[sid] = False
        return sets[sid]

    out = []
    for job in jobs:
        try:
            entry = json.loads(tu.entry_path(str(job)).read_text())
        except (OSError, ValueError):
            continue
        if str(header) in entry.get("deps", {}) or any(in_set(s) for s in entry.get("sets", ())):
            out.append(job)
    return out


def main() -> int:
    from extractors.clang import header_files, run, tu_files
    from torchtalk import store
    from torchtalk.paths import default_source

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--source", type=Path, default=None)
    p.add_argument("--db", type=Path, default=None, help="the tree's fact DB (default: its default DB)")
    p.add_argument("--header", default=IR_H)
    p.add_argument("--jobs", type=int, default=2)
    args = p.parse_args()
    root = (args.source or default_source()).resolve()
    db = args.db or store.default_db(root)
    real = db.with_name(db.stem + ".cache") / "precise"
    if not (real / "tu").is_dir():
        raise SystemExit(f"no compiler tier cache at {real}: run `torchtalk index --precise --source {root}` first")
    jobs = [f.resolve() for f in tu_files(root) + header_files(root)]
    stale = stale_jobs(real, jobs, (root / args.header).resolve())
    ctx = ExtractContext(root, real, jobs=args.jobs)
    t = time.perf_counter()
    parsed = run(ctx, CountSink(), stale, use_cache=False)
    parse_s = time.perf_counter() - t
    others = sorted(set(jobs) - set(stale))
    t = time.perf_counter()
    read = run(ctx, CountSink(), others)
    read_s = time.perf_counter() - t
    print(f"header {args.header}: {len(stale)} of {len(jobs)} jobs read it")
    print(f"  parsed again: {parsed.tus} jobs ({parsed.ok} parse) in {parse_s:.1f} s wall with {args.jobs} jobs")
    print(f"  the others from the cache: {read.cached} of {read.tus} in {read_s:.1f} s")
    print(f"catching up after its edit: {parse_s + read_s:.1f} s (goal <= 300 s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
