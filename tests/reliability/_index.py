"""A small real sub-tree of PyTorch and its fact DB, for fault tests that
run `torchtalk index` as a subprocess many times (the whole tree takes
minutes, this one seconds): the ops YAML files, the first 60 `.cpp` files of
aten/src/ATen/native (enough for the cpp layer's worker pool) and torch/nn's
Python. Files are hard links: the real tree is never modified (an edit writes
a new file).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from tests.test_incremental import _tables

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("ops", "cpp", "python")
NATIVE = "aten/src/ATen/native"


def make_small_tree(tree: Path, dst: Path, cpp_files: int = 48) -> Path:
    """Hard-link the sub-tree described above from `tree` into `dst`."""
    tree = tree.resolve()
    picks = [*sorted((tree / NATIVE).glob("*.yaml")), tree / "tools/autograd/derivatives.yaml",
             *sorted((tree / NATIVE).glob("*.cpp"), key=lambda p: -p.stat().st_size)[:cpp_files], tree / "torch/__init__.py",
             *sorted((tree / "torch/nn").glob("*.py")), *sorted((tree / "torch/nn/modules").glob("*.py"))]
    for src in picks:
        out = dst / src.relative_to(tree)
        out.parent.mkdir(parents=True, exist_ok=True)
        os.link(src, out)
    return dst


def index_cmd(source: Path, db: Path, *extra: str) -> list[str]:
    """The `torchtalk index` command line of LAYERS for `source` into `db`."""
    return [sys.executable, "-m", "torchtalk", "index", "--source", str(source), "--db", str(db),
            "--layers", ",".join(LAYERS), "--jobs", "2", *extra]


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def copy_db(db: Path, dst_dir: Path) -> Path:
    """A copy of `db` with its facts dir and caches in `dst_dir`."""
    dst_dir.mkdir(parents=True, exist_ok=True)
    for p in db.parent.iterdir():
        if p.name.startswith(db.stem):
            (shutil.copytree if p.is_dir() else shutil.copy2)(p, dst_dir / p.name)
    return dst_dir / db.name


def state(db: Path) -> tuple[str, dict, list[str]]:
    """(sha1 of the DB file, its tables' rows, the facts dir's listing)."""
    from torchtalk import store

    facts = store.facts_dir(db)
    return (hashlib.sha1(db.read_bytes()).hexdigest(), _tables(db),
            sorted(str(p.relative_to(facts)) for p in facts.rglob("*")))


def leftovers(db: Path) -> list[str]:
    """Temporary files of an index beside `db` (`.<name>.tmp-*`, `.old-*`)."""
    return sorted(p.name for p in db.parent.iterdir() if p.name.startswith(".") and (
        ".tmp-" in p.name or ".old-" in p.name))


def children(pid: int) -> list[int]:
    """The live child processes of `pid` (from /proc)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and _stat(int(d.name))[1] == pid:
            out.append(int(d.name))
    return out


def alive(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie."""
    return _stat(pid)[0] not in ("", "Z", "X")


def parent_of(pid: int) -> int:
    """The parent pid of `pid` (0 when it is gone)."""
    return _stat(pid)[1]


def _stat(pid: int) -> tuple[str, int]:
    """(state letter, parent pid) of `pid`, ("", 0) when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "", 0
    fields = text[text.rindex(")") + 2:].split()
    return fields[0], int(fields[1])


def wait_for(what, timeout: float = 60.0, proc: subprocess.Popen | None = None, every: float = 0.005):
    """Poll `what()` until it is true (-> its value); fails after `timeout`,
    or as soon as `proc` has exited."""
    deadline = time.monotonic() + timeout
    while True:
        got = what()
        if got:
            return got
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the process exited ({proc.returncode}) before it could be caught")
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(every)
