"""Accuracy of the fast tier's `calls` edges against libclang's `calls_precise`.

On a sample of TUs of aten/src/ATen/native (every k-th .cpp, >= 50), both
tiers' edges are compared as (caller, callee, line) within each TU's main
file, over the TUs libclang parsed without a fatal error. The reference is the
precise edges whose callee is a function the fast tier knows (`func`), since
the fast tier cannot name functions that only exist in generated headers
(at::mm_out, at::Tensor::mm): those are counted apart. Prints precision,
recall and the main classes of disagreement with examples. Run:

    .venv/bin/python bench/fast_vs_precise.py --tus 60 --jobs 2 [--precise-cache DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.precise import RowSink  # noqa: E402
from extractors.base import ExtractContext  # noqa: E402


def sample(root: Path, directory: str, n: int) -> list[Path]:
    """n TUs spread evenly over the sorted .cpp files of `directory`."""
    from extractors.clang import tu_files

    files = tu_files(root, [directory])
    step = max(1, len(files) // n)
    return files[::step][:n]


INACTIVE = "no such call in libclang's AST, line inside #if (branch likely not compiled)"
MACRO_MADE = "call made by a macro's expansion (name not written on the line)"


def last(name: str) -> str:
    return name.rsplit("::", 1)[-1]


class Compare:
    """Classifies the disagreements of the two tiers over one set of files."""

    def __init__(self, root: Path, fast, ambiguous, precise, funcs: set[str], dependent=()) -> None:
        self.root = root
        self.dependent = set(dependent)  # (caller, name, file, line) libclang left unresolved
        self.fast = fast  # {(caller, callee, file, line)}
        self.precise_all = precise
        self.precise = {e for e in precise if e[1] in funcs}
        self.funcs = funcs
        self.amb = {(c, f, ln, last(name)) for c, name, _n, f, ln in ambiguous}
        self.fast_callers = {e[0] for e in fast}
        self.fast_at = defaultdict(list)  # (file, line) -> fast edges
        for e in fast:
            self.fast_at[e[2], e[3]].append(e)
        self.precise_at = defaultdict(list)
        self.precise_pairs = set()
        for e in precise:
            self.precise_at[e[2], e[3]].append(e)
            self.precise_pairs.add((e[0], e[1], e[2]))
        self.lines: dict[str, list[str]] = {}
        self.cond: dict[str, set[int]] = {}

    def source(self, file: str, line: int) -> str:
        if file not in self.lines:
            self.lines[file] = (self.root / file).read_text(errors="replace").splitlines()
        text = self.lines[file]
        return text[line - 1] if 0 < line <= len(text) else ""

    def in_conditional(self, file: str, line: int) -> bool:
        """Is `line` inside an #if/#ifdef/#ifndef block (a textual check)?"""
        if file not in self.cond:
            self.source(file, 1)
            inside, depth = set(), 0
            for i, text in enumerate(self.lines[file], 1):
                t = text.lstrip()
                if re.match(r"#\s*if", t):
                    depth += 1
                elif re.match(r"#\s*endif", t):
                    depth = max(0, depth - 1)
                elif depth:
                    inside.add(i)
            self.cond[file] = inside
        return line in self.cond[file]

    def miss_class(self, e) -> str:
        caller, callee, file, line = e
        if (caller, file, line, last(callee)) in self.amb:
            return "fast: call_ambiguous (several definitions, no edge)"
        if not re.search(r"\b" + re.escape(last(callee)) + r"\b", self.source(file, line)):
            return MACRO_MADE
        same_line = {f for f in self.fast_at[file, line] if last(f[1]) == last(callee)}
        if any(f[0] != caller for f in same_line):
            return "caller named differently"
        if same_line:
            return "resolved to another definition of the same name"
        if caller not in self.fast_callers:
            return "caller has no fast edges (definition missed or named differently)"
        return "fast: no edge (unresolved / external to the fast index)"

    def extra_class(self, e) -> str:
        caller, callee, file, line = e
        at_line = [p for p in self.precise_at[file, line] if last(p[1]) == last(callee)]
        if any(p[1] == callee and p[0] != caller for p in at_line):
            return "caller named differently"
        if any(p[1] != callee for p in at_line):
            return "resolved to another definition of the same name"
        if (caller, last(callee), file, line) in self.dependent:
            return "libclang: dependent call in a template, no single callee"
        if (caller, callee, file) in self.precise_pairs:
            return "same call, other line (multi-line call / macro)"
        if self.in_conditional(file, line):
            return INACTIVE
        return "no such call in libclang's AST (dependent call, lambda, ...)"

    def report(self, top: int = 8) -> dict:
        both = self.fast & self.precise
        misses = self.precise - self.fast
        extras = self.fast - self.precise
        mc = Counter(self.miss_class(e) for e in misses)
        written = len(self.precise) - mc[MACRO_MADE]
        ec = Counter(self.extra_class(e) for e in extras)
        compiled = len(self.fast) - ec[INACTIVE]
        ex_m, ex_e = defaultdict(list), defaultdict(list)
        for e in sorted(misses):
            k = self.miss_class(e)
            if len(ex_m[k]) < 2:
                ex_m[k].append(e)
        for e in sorted(extras):
            k = self.extra_class(e)
            if len(ex_e[k]) < 2:
                ex_e[k].append(e)
        return {
            "fast_edges": len(self.fast), "precise_edges": len(self.precise_all),
            "precise_reference": len(self.precise),
            "precise_callee_not_in_func": len(self.precise_all) - len(self.precise),
            "agree": len(both),
            "precision": round(len(both) / len(self.fast), 4) if self.fast else None,
            "precision_compiled_lines": round(len(both) / compiled, 4) if compiled else None,
            "recall": round(len(both) / len(self.precise), 4) if self.precise else None,
            "recall_written_calls": round(len(both) / written, 4) if written else None,
            "missed_by_fast": dict(mc.most_common(top)),
            "fast_only": dict(ec.most_common(top)),
            "examples_missed": {k: v for k, v in ex_m.items()},
            "examples_fast_only": {k: v for k, v in ex_e.items()},
            "overloads": self.overloads(),
        }

    def overloads(self) -> dict:
        """At the call sites where libclang's callee is an overload (an id with
        a parameter list, Note [Overload ids]): how many sites the fast tier
        names that one overload of the name only, names it among others, or
        misses; and its edges there to the name's overloads."""
        from extractors.cpp.names import split_sig

        fast_at = defaultdict(set)
        for c, e, f, ln in self.fast:
            fast_at[(c, f, ln, split_sig(e)[0])].add(e)
        only = among = missed = edges = 0
        sites = {(c, f, ln, split_sig(e)[0]): e for c, e, f, ln in self.precise if split_sig(e)[1]}
        for key, callee in sites.items():
            got = fast_at.get(key, set())
            edges += len(got)
            only += got == {callee}
            among += callee in got and len(got) > 1
            missed += callee not in got
        return {"sites": len(sites), "fast_that_one_only": only, "fast_among_several": among,
                "fast_missed": missed, "fast_edges_there": edges}


def main(argv: list[str] | None = None) -> int:
    from extractors import cpp
    from extractors.clang import run
    from torchtalk.paths import default_source

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--source", type=Path, default=None)
    p.add_argument("--dir", default="aten/src/ATen/native")
    p.add_argument("--tus", type=int, default=60)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--precise-cache", type=Path, default=None)
    p.add_argument("--fast-cache", type=Path, default=None)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    root = (args.source or default_source()).resolve()
    tmp = Path(tempfile.mkdtemp(prefix="tt-fvp-"))

    t0 = time.perf_counter()
    files = sample(root, args.dir, args.tus)
    sink = RowSink()
    st = run(ExtractContext(root, args.precise_cache or tmp / "precise", jobs=args.jobs), sink, files)
    t_precise = time.perf_counter() - t0
    bad = {rel for rel, _ in st.failed}
    ok_files = {f.relative_to(root).as_posix() for f in files} - bad
    precise = {tuple(r) for r in sink.rows.get("calls_precise", ()) if r[2] in ok_files}

    t1 = time.perf_counter()
    fast_run = cpp.run(ExtractContext(root, args.fast_cache or tmp / "fast", jobs=args.jobs))
    t_fast = time.perf_counter() - t1
    rows = fast_run.rows
    fast = {(c, e, f, ln) for c, e, f, ln, _via in rows.get("calls", ()) if f in ok_files}
    amb = [r for r in rows.get("call_ambiguous", ()) if r[3] in ok_files]
    funcs = {r[0] for r in rows.get("func", ())}

    out = {"tus": len(files), "parsed_ok": len(ok_files), "precise_s": round(t_precise, 1),
           "fast_whole_tree_s": round(t_fast, 1)}
    out.update(Compare(root, fast, amb, precise, funcs, st.unresolved).report())
    if args.json:
        print(json.dumps(out, indent=1, default=list))
        return 0
    print(f"fast vs precise on {len(ok_files)}/{len(files)} TUs of {args.dir} parsed by libclang")
    print(f"  precise {out['precise_edges']} edges ({out['precise_callee_not_in_func']} to functions"
          f" the fast tier cannot know: generated headers / declarations only)")
    print(f"  reference {out['precise_reference']}, fast {out['fast_edges']}, agree {out['agree']}")
    print(f"  precision {out['precision']} ({out['precision_compiled_lines']} leaving out lines in #if"
          f" blocks libclang has no call on)")
    print(f"  recall {out['recall']} ({out['recall_written_calls']} on calls written in the source,"
          " leaving out calls made by macro expansions)")
    print("  missed by the fast tier:")
    for k, n in out["missed_by_fast"].items():
        print(f"    {n:6d}  {k}   e.g. {out['examples_missed'][k][0]}")
    print("  fast-tier edges libclang does not have:")
    for k, n in out["fast_only"].items():
        print(f"    {n:6d}  {k}   e.g. {out['examples_fast_only'][k][0]}")
    ov = out["overloads"]
    print(f"  overloads: at {ov['sites']} sites libclang calls an overload, the fast tier names that one only at"
          f" {ov['fast_that_one_only']}, among others at {ov['fast_among_several']}, misses it at {ov['fast_missed']}"
          f" ({ov['fast_edges_there']} fast edges there)")
    print(f"  time: precise {t_precise:.1f} s, fast (whole tree, for resolution) {t_fast:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
