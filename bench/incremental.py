"""Incremental re-index on a hard-linked copy of the real tree (issue 9).

Prints, for `torchtalk index` as a process: the cold index, a no-op re-index,
and the re-index after editing one .cpp (a function body, then a new function),
with the layers that ran. The real tree is never modified (edited files are
written anew, breaking their hard link).

    python bench/incremental.py [--source TREE] [--layers ops,cpp,python,tests]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EDITED = "aten/src/ATen/native/CPUBlas.cpp"


def index(src: Path, db: Path, layers: str) -> tuple[float, list[str]]:
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "torchtalk", "index", "--source", str(src), "--db", str(db),
                          "--layers", layers, "--jobs", "2", "--json"], capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t
    ran = [f"{lr['layer']}:{lr['action']}" for lr in json.loads(out.stdout)["layers"]]
    return wall, ran


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.unlink()
    path.write_text(text.replace(old, new, 1))


def main() -> None:
    from torchtalk.paths import default_source

    ap = argparse.ArgumentParser()
    ap.add_argument("--source", type=Path, default=default_source())
    ap.add_argument("--layers", default="ops,cpp,python,tests")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "pytorch"
        subprocess.run(["cp", "-al", str(args.source.resolve()), str(src)], check=True)
        db = Path(tmp) / "db" / "tree.duckdb"
        rows = [("cold index", *index(src, db, args.layers))]
        rows.append(("no change", *index(src, db, args.layers)))
        edit(src / EDITED, "int m_ = m, n_ = n, k_ = k", "int m_ = m,  n_ = n, k_ = k")
        rows.append(("one .cpp, body edit", *index(src, db, args.layers)))
        edit(src / EDITED, "namespace at::native::cpublas {", "namespace at::native::cpublas {\nvoid tt_probe() {}")
        rows.append(("one .cpp, new function", *index(src, db, args.layers)))
        shutil.rmtree(src, ignore_errors=True)
    print(f"layers: {args.layers}")
    for what, wall, ran in rows:
        print(f"  {what:<26} {wall:8.2f} s   {' '.join(ran)}")


if __name__ == "__main__":
    main()
