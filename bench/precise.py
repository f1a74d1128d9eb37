"""Precise tier benchmark: a cold libclang run over the layer's scope (aten,
c10, torch/csrc: `.cpp` and `.cu`), or over `--dir`s.

Prints, per directory and kind (.cpp / .cu, and the native headers parsed
as their own main file: .h / .cuh / .hpp, Note [Header jobs] in
extractors/clang/__init__.py), how many TUs parse without a fatal error; the cold wall time (header generation apart); the rows written
(calls_precise, calls_op via "compiler", precise_file); the share of call
sites in aten/src/ATen/native resolved by the compiler, counted two ways
(below); the kernel launches the compiler resolves in `.cu` TUs against the
fast tier's `<<<>>>` launches in the same files; and with `--edit REL` the
time of the re-run after one TU changes (its cache entry dropped, so exactly
that TU is parsed again, as after an edit).

Call sites in aten/src/ATen/native resolved by the compiler:
  * expressions: every call expression (calls, member calls, operator calls,
    constructor calls, launches) inside a function defined in the main file
    of a native TU or header job; resolved = the TU parsed without a fatal error and clang
    bound the call to a declaration (a dependent call in a template with
    candidates of one name counts as resolved; one with none or several
    names does not; an operator or a construction on a dependent type, an
    immediately called lambda, a member of a dependent class outside the
    tree, each told apart by the compiler (Note [Dependent operators and
    constructions] in extractors/clang/visit.py), count as resolved, and
    "bound" leaves out all but the lambdas: they name no declaration);
  * fast-tier sites (bench/keys.py's measure): the distinct (file, line) of
    the fast tier's calls / calls_op / call_ambiguous rows in files under
    aten/src/ATen/native (headers included); resolved = the file is a TU or
    header the precise tier parsed (precise_file). Needs the tree's fact DB (the cpp
    layer), or `--fast-facts DIR`.

Run:
    .venv/bin/python bench/precise.py --jobs 2                      # the whole scope, cold
    .venv/bin/python bench/precise.py --dir aten/src/ATen/native --edit aten/src/ATen/native/Activation.cpp
    .venv/bin/python bench/precise.py --limit 20 --json             # a quick look
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from extractors.base import ExtractContext  # noqa: E402

NATIVE = "aten/src/ATen/native/"
GROUPS = ("aten/src/ATen/native", "aten", "c10", "torch/csrc")


class RowSink:
    """Keeps the rows by relation and the warnings in memory."""

    def __init__(self) -> None:
        self.rows: dict[str, list[tuple]] = defaultdict(list)
        self.warnings: list[tuple[str, int, str]] = []

    def add(self, relation: str, *values) -> None:
        self.rows[relation].append(values)

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


def group_of(rel: str) -> str:
    """The first of GROUPS that `rel` is under."""
    return next((g for g in GROUPS if rel.startswith(g + "/")), "other")


def _facts(path: Path) -> list[list[str]]:
    if not path.is_file():
        return []
    with path.open(newline="") as fh:
        return list(csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE))


def fast_tier(facts: Path | None, parsed: set[str], cu_files: set[str]) -> dict | None:
    """The fast tier's native call sites and `<<<>>>` launches, against what
    the precise tier parsed (None without the fact files)."""
    if facts is None or not (facts / "calls.facts").is_file():
        return None
    sites = set()
    for rel, fcol, lcol in (("calls", 2, 3), ("calls_op", 2, 3), ("call_ambiguous", 3, 4)):
        for row in _facts(facts / f"{rel}.facts"):
            if row[fcol].startswith(NATIVE):
                sites.add((row[fcol], int(row[lcol])))
    launches = {(r[0], r[1], r[2], int(r[3])) for r in _facts(facts / "launches.facts")
                if r[4] == "<<<>>>" and r[2] in cu_files}
    return {"native_sites": len(sites), "native_sites_compiler": sum(1 for f, _ in sites if f in parsed),
            "launches": launches}


def main(argv: list[str] | None = None) -> int:
    from extractors.clang import DEFAULT_DIRS, excluded_tus, header_files, run, sdk, tu_files
    from extractors.clang.flags import generated_dir
    from torchtalk import store
    from torchtalk.paths import default_source

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--source", type=Path, default=None)
    p.add_argument("--dir", action="append", help="dir(s) to parse (default: the layer's scope)")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--limit", type=int, default=0, help="only the first N TUs (0 = all)")
    p.add_argument("--cache", type=Path, default=None, help="cache dir (default: a fresh one = cold)")
    p.add_argument("--no-skip-bodies", action="store_true", help="parse header function bodies too")
    p.add_argument("--no-pch", action="store_true", help="parse without the common precompiled headers")
    p.add_argument("--no-headers", action="store_true", help="parse the TUs only, not the native headers as their own")
    p.add_argument("--edit", default=None, help="then re-run as if this TU (relative path) were edited")
    p.add_argument("--fast-facts", type=Path, default=None, help="the fast tier's .facts dir (default: the tree's DB)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)

    root = (args.source or default_source()).resolve()
    cache = args.cache or Path(tempfile.mkdtemp(prefix="tt-precise-bench-"))
    dirs = args.dir or list(DEFAULT_DIRS)
    all_files = tu_files(root, dirs)
    files = all_files[: args.limit] if args.limit else all_files
    if not args.no_headers:  # Note [Header jobs] in extractors/clang/__init__.py
        files = files + header_files(root, dirs)[: args.limit or None]
    excluded = excluded_tus(root, dirs)  # Note [Not a TU of the build]: neither parsed nor failures
    t0 = time.perf_counter()
    generated_dir(root, cache)
    gen_s = time.perf_counter() - t0
    sink = RowSink()
    ctx = ExtractContext(root, cache, jobs=args.jobs)
    st = run(ctx, sink, files, skip_header_bodies=not args.no_skip_bodies, use_pch=not args.no_pch)
    total_s = time.perf_counter() - t0

    by_group: dict[str, Counter] = defaultdict(Counter)
    for f in files:
        rel = f.relative_to(root).as_posix()
        kind = f.suffix.lstrip(".")
        status = st.per_tu.get(rel, ("skipped",))[0]
        by_group[f"{group_of(rel)} .{kind}"]["tus"] += 1
        by_group[f"{group_of(rel)} .{kind}"][status] += 1
    native = [(rel, v) for rel, v in st.per_tu.items() if rel.startswith(NATIVE)]
    sites = sum(v[1] for _, v in native)
    resolved = sum(v[1] - v[2] for _, v in native if v[0] == "ok")
    bound = resolved - sum(v[3] for _, v in native if v[0] == "ok")
    parsed = set(st.parsed)
    cu_files = {rel for rel, v in st.per_tu.items() if rel.endswith(".cu") and v[0] == "ok"}
    facts = args.fast_facts or store.facts_dir(store.default_db(root))
    fast = fast_tier(facts, parsed, cu_files)
    ours = set(st.launches)
    ours_parsed = {r for r in ours if r[2] in cu_files}
    causes = Counter(failure_class(msg) for _, msg in st.failed)
    out = {
        "dirs": dirs, "jobs": args.jobs, "tus": st.tus, "ok": st.ok, "fatal": st.fatal,
        "timeout": st.timeout, "crash": st.crash, "cached": st.cached, "skipped_cu": st.skipped_cuda,
        "headers": st.headers, "incomplete_headers": st.incomplete,
        "excluded": len(excluded),
        "parsed_share": round(st.parsed_share, 4),
        "by_group": {g: dict(c) for g, c in sorted(by_group.items())},
        "calls_precise": st.edges, "calls_op": st.ops, "precise_file": len(parsed),
        "error_diagnostics": st.errors, "dropped_calls": dict(st.dropped),
        "cold_wall_s": round(total_s, 1), "headers_gen_s": round(gen_s, 1),
        "parse_s_per_tu": round(st.parse_seconds / max(1, st.tus - st.cached), 2),
        "native_call_expressions": sites, "native_call_expressions_compiler": resolved,
        "native_call_expressions_bound": bound,
        "launches_compiler": len(ours),
        "failure_causes": dict(causes.most_common(15)),
        "sdks": [name for name, one in sdk.SDKS.items() if sdk.include_dir(one)],
    }
    if fast is not None:
        theirs = fast["launches"]
        out.update({
            "native_fast_sites": fast["native_sites"], "native_fast_sites_compiler": fast["native_sites_compiler"],
            "launches_fast_in_parsed_cu": len(theirs), "launches_both": len(ours_parsed & theirs),
            "launches_compiler_only": len(ours_parsed - theirs), "launches_fast_only": len(theirs - ours_parsed),
            "launches_compiler_only_examples": sorted(ours_parsed - theirs)[:8],
            "launches_fast_only_examples": sorted(theirs - ours_parsed)[:8],
        })
    if args.edit:
        from extractors.clang.cache import FileHashes, TuCache

        TuCache(cache / "tu", FileHashes())._entry(str(root / args.edit)).unlink(missing_ok=True)
        t1 = time.perf_counter()
        again = run(ctx, RowSink(), files, skip_header_bodies=not args.no_skip_bodies, use_pch=not args.no_pch)
        out["after_edit_s"] = round(time.perf_counter() - t1, 1)
        out["after_edit_parsed"] = again.tus - again.cached
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    print(f"precise tier over {', '.join(dirs)} (--jobs {args.jobs}), cache {cache}")
    print(f"  TUs {st.tus - st.headers}, headers {st.headers} ({st.incomplete} not self-contained here) (+{st.skipped_cuda} .cu not parsed: no CUDA headers; {len(excluded)} files excluded:"
          f" no CUDA/CPU build compiles them); SDK headers: {', '.join(out['sdks']) or 'none'}")
    print(f"  parsed without fatal error: {st.ok}/{st.tus} = {100 * st.parsed_share:.1f}%"
          f"  (fatal {st.fatal}, timeout {st.timeout}, crash {st.crash})")
    for g, c in sorted(by_group.items()):
        print(f"    {g:28s} {c['ok']:5d}/{c['tus']:<5d} ({100 * c['ok'] / c['tus']:.1f}%)")
    print(f"  cold wall time {total_s:.1f} s (header generation {gen_s:.1f} s), {out['parse_s_per_tu']} s per TU")
    print(f"  rows: calls_precise {st.edges}, calls_op (compiler) {st.ops}, precise_file {len(parsed)}")
    print(f"  calls not kept: {dict(st.dropped)}")
    print(f"  aten/src/ATen/native call expressions resolved by the compiler: {resolved}/{sites}"
          f" ({100 * resolved / max(sites, 1):.1f}%); bound to a declaration: {bound}"
          f" ({100 * bound / max(sites, 1):.1f}%)")
    if fast is not None:
        print(f"  aten/src/ATen/native fast-tier call sites in a parsed TU: {fast['native_sites_compiler']}/"
              f"{fast['native_sites']} ({100 * fast['native_sites_compiler'] / max(fast['native_sites'], 1):.1f}%)")
        print(f"  launches: compiler {len(ours)} ({len(ours_parsed)} in parsed .cu); fast tier <<<>>> in those"
              f" files {out['launches_fast_in_parsed_cu']}: both {out['launches_both']}, compiler only"
              f" {out['launches_compiler_only']}, fast only {out['launches_fast_only']}")
    else:
        print(f"  launches: compiler {len(ours)} (no fast-tier facts at {facts} to compare)")
    if args.edit:
        print(f"  after editing {args.edit}: {out['after_edit_s']} s ({out['after_edit_parsed']} TU parsed)")
    for cause, n in causes.most_common(15):
        print(f"  failures: {n:4d}  {cause}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
