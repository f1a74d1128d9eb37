"""Incremental re-index on a hard-linked copy of the real tree (issues 9, 16).

Prints, for `torchtalk index` as a process: the first index, a no-op
re-index, and the re-index after each edit (a .cpp body, a new C++ function,
a .py body, one native_functions.yaml entry, a header 258 files include),
with the wall time, the CPU time of the process (user + sys: the machine's
load moves wall time, much less this), how the DB was written (built,
updated in place, current) and the layers that ran. The real tree is never
modified (edited files are written anew, breaking their hard link).

    python bench/incremental.py [--source TREE] [--layers ops,cpp,python,tests] [--seed-cache]
                                [--baseline CHECKOUT] [--checkout N]

--seed-cache starts from the per-file parse caches of the tree's default DB
(keyed by path and content; the whole-tree results are not copied), so the
first index skips the parse, not the rest.
--baseline CHECKOUT compares with another checkout of TorchTalk (a git
worktree of an older commit): each step runs once with each code, taking
turns on two copies of the tree, so both see the same load; the ratio is
this code's time over the baseline's.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

EDITS = (
    ("one .cpp, body edit", "aten/src/ATen/native/CPUBlas.cpp",
     "int m_ = m, n_ = n, k_ = k", "// a line more\n  int m_ = m, n_ = n, k_ = k"),
    ("one .cpp, new function", "aten/src/ATen/native/CPUBlas.cpp",
     "namespace at::native::cpublas {", "namespace at::native::cpublas {\nvoid tt_probe() {}"),
    ("one .py, body edit", "torch/nn/functional.py",
     "    if inplace:\n        result = torch.relu_(input)",
     "    torch.sigmoid(input)\n    if inplace:\n        result = torch.relu_(input)"),
    ("one native_functions.yaml entry", "aten/src/ATen/native/native_functions.yaml",
     "- func: mm(Tensor self, Tensor mat2) -> Tensor\n",
     "- func: tt_probe(Tensor self) -> Tensor\n  dispatch:\n    CPU: tt_probe_cpu\n\n"
     "- func: mm(Tensor self, Tensor mat2) -> Tensor\n"),
    # 258 files of the tree #include it (aten, torch/csrc): a line more moves its rows
    ("a header 258 files include", "torch/csrc/jit/ir/ir.h",
     "  inline graph_node_list_iterator iterator() {",
     "  // a line more\n  inline graph_node_list_iterator iterator() {"),
)



def watch_plan() -> list[tuple[str, str, str, str]]:
    """EDITS as the watcher benchmarks make them (bench/watch.py,
    bench/mcp_watch.py): the .cpp body and the .py edits twice, the second
    time reading what the first kept (Note [Layer memo])."""
    cpp, py = EDITS[0][1], EDITS[2][1]
    return [EDITS[0], ("the same .cpp, again", cpp, "// a line more\n", "// a line more\n// and one\n"),
            EDITS[1], EDITS[2],
            ("the same .py, again", py, "    torch.sigmoid(input)\n", "    torch.sigmoid(input)\n" * 2),
            *EDITS[3:]]

def index(src: Path, db: Path, layers: str, code: Path | None = None) -> tuple[float, float, str, list[str]]:
    """(wall s, CPU s, mode, layers that ran) of one `torchtalk index`
    process (of the checkout `code`, default this one)."""
    code = code or Path(__file__).resolve().parents[1]  # its cwd too: `-m` puts the cwd first on sys.path
    env = {**os.environ, "PYTHONPATH": str(code)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "torchtalk", "index", "--source", str(src), "--db", str(db),
                          "--layers", layers, "--jobs", "2", "--json"], capture_output=True, text=True, check=True,
                         env=env, cwd=code)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    report = json.loads(out.stdout)
    ran = [lr["layer"] for lr in report["layers"] if lr["action"] == "ran"]
    return wall, cpu, report.get("mode", "?"), ran


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.unlink()
    path.write_text(text.replace(old, new, 1))


def checkout(tree: Path, n: int) -> None:
    """What a `git checkout` touching `n` files does to the index (issue 16):
    the first n*4/5 .cpp files of aten/src/ATen/native and the first n/5
    .py files of torch/nn/modules, by name, each with a line more after its
    first (every row of it moves), all written before the index runs."""
    cpp = sorted((tree / "aten/src/ATen/native").glob("*.cpp"))[: n - n // 5]
    py = sorted((tree / "torch/nn/modules").glob("*.py"))[: n // 5]
    for path in (*cpp, *py):
        first, _, rest = path.read_text().partition("\n")
        path.unlink()  # a new file: the hard link to the real tree breaks
        path.write_text(f"{first}\n{'#' if path.suffix == '.py' else '//'} a checkout's line\n{rest}")


def seed(tree: Path, db: Path) -> None:
    from torchtalk import store

    real = store.default_db(tree)
    for sub in ("cpp/files", "python-summaries"):
        s = real.with_name(real.stem + ".cache") / sub
        if s.is_dir():
            d = db.with_name(db.stem + ".cache") / sub
            d.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(["cp", "-al", str(s), str(d)], check=True)


def arguments(layers: str) -> argparse.Namespace:
    """--source, --layers (default `layers`), --seed-cache: what this bench and bench/watch.py take."""
    from torchtalk.paths import default_source

    ap = argparse.ArgumentParser()
    ap.add_argument("--source", type=Path, default=default_source())
    ap.add_argument("--layers", default=layers)
    ap.add_argument("--seed-cache", action="store_true", help="start from the tree's per-file parse caches")
    ap.add_argument("--baseline", type=Path, help="another checkout of TorchTalk to compare with, taking turns")
    ap.add_argument("--checkout", type=int, default=0, metavar="N",
                    help="last, N files changed at once, as a git checkout does (`checkout`)")
    return ap.parse_args()


@contextlib.contextmanager
def scratch(args: argparse.Namespace) -> Iterator[tuple[Path, Path]]:
    """(tree, DB path) in a temp dir: the tree a hard-linked copy of
    --source, the DB's caches seeded from the tree's with --seed-cache."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "pytorch"
        subprocess.run(["cp", "-al", str(args.source.resolve()), str(src)], check=True)
        db = Path(tmp) / "db" / "tree.duckdb"
        db.parent.mkdir()
        if args.seed_cache:
            seed(args.source.resolve(), db)
        yield src, db


def main() -> None:
    args = arguments("ops,cpp,python,tests")
    if args.baseline is not None:
        compare(args)
        return
    with scratch(args) as (src, db):
        rows = [("first index" + (" (seeded)" if args.seed_cache else " (cold)"), *index(src, db, args.layers))]
        rows.append(("no change", *index(src, db, args.layers)))
        for what, rel, old, new in EDITS:
            edit(src / rel, old, new)
            rows.append((what, *index(src, db, args.layers)))
        if args.checkout:
            checkout(src, args.checkout)
            rows.append((f"a checkout of {args.checkout} files", *index(src, db, args.layers)))
        shutil.rmtree(src, ignore_errors=True)
    print(f"layers: {args.layers}")
    print(f"  {'':<34} {'wall':>8} {'cpu':>8}")
    for what, wall, cpu, mode, ran in rows:
        print(f"  {what:<34} {wall:7.2f}s {cpu:7.2f}s  {mode:<8} ran: {','.join(ran) or '-'}")


def compare(args: argparse.Namespace) -> None:
    """Each step with the baseline's code and this one's, taking turns
    (which goes first alternates), on a tree copy each; the load average
    before each pair."""
    base = args.baseline.resolve()
    with scratch(args) as (src_a, db_a), scratch(args) as (src_b, db_b):
        steps = [("first index", None), ("no change", None), *((e[0], e) for e in EDITS)]
        print(f"layers: {args.layers}; baseline {base}")
        print(f"  {'':<34} {'load':>5} {'base wall':>9} {'cpu':>6} {'this wall':>9} {'cpu':>6} {'cpu ratio':>9}")
        for i, (what, e) in enumerate(steps):
            if e is not None:
                edit(src_a / e[1], e[2], e[3])
                edit(src_b / e[1], e[2], e[3])
            load = os.getloadavg()[0]
            runs = [("base", src_a, db_a, base), ("this", src_b, db_b, None)]
            got = {name: index(src, db, args.layers, code) for name, src, db, code in (runs if i % 2 else runs[::-1])}
            (bw, bc, bm, _), (tw, tc, tm, ran) = got["base"], got["this"]
            mode = tm if tm == bm else f"{bm}->{tm}"
            print(f"  {what:<34} {load:5.1f} {bw:8.2f}s {bc:5.2f}s {tw:8.2f}s {tc:5.2f}s {tc / bc:8.2f}x"
                  f"  {mode} ran: {','.join(ran) or '-'}", flush=True)
        shutil.rmtree(src_a, ignore_errors=True)
        shutil.rmtree(src_b, ignore_errors=True)


if __name__ == "__main__":
    main()
