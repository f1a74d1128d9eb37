"""A watcher's memo warmed before the first edit (Note [Warmed memo] in
torchtalk/warm.py), on a small tree: what the layers read is in the memo
and the DB untouched after the warm-up; the first update then writes deltas
from the rows kept; a layer whose rows moved before the warm-up is left
cold, its caches unwritten, and the update that follows equals a cold index."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.test_incremental import assert_same_tables
from torchtalk import api, store
from torchtalk.cli.watch import _warm_up

NF = "aten/src/ATen/native/native_functions.yaml"
CPP = "aten/src/ATen/native/Foo.cpp"
PY = "torch/nn/functional.py"
LAYERS = ["ops", "cpp", "python"]
BODY = "namespace at::native {{\nvoid g() {{}}\nvoid h() {{}}\n{}Tensor foo_impl(const Tensor& self) {{ g(); }}\n}}\n"


@pytest.fixture
def small(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("TORCHTALK_CACHE_DIR", str(tmp_path / "cache"))
    root = tmp_path / "tree"
    (root / "aten/src/ATen/native").mkdir(parents=True)
    (root / NF).write_text("- func: foo(Tensor self) -> Tensor\n  variants: function\n  dispatch:\n"
                           "    CPU: foo_impl\n")
    (root / "tools/autograd").mkdir(parents=True)
    (root / "tools/autograd/derivatives.yaml").write_text("")
    (root / "version.txt").write_text("9.9.9a0\n")
    (root / CPP).write_text(BODY.format(""))
    (root / "torch/nn").mkdir(parents=True)
    (root / "torch/__init__.py").write_text("")
    (root / "torch/nn/__init__.py").write_text("")
    (root / PY).write_text("import torch\n\ndef relu(input):\n    return torch.foo(input)\n")
    return root


def _identity(db: Path) -> tuple:
    st = db.stat()
    return st.st_ino, st.st_size, st.st_mtime_ns, (store.facts_dir(db) / "facts_id").read_text()


def _leftovers(db: Path) -> list[str]:
    return sorted(p.name for p in db.parent.iterdir() if ".warm-" in p.name)


def test_a_warm_up_fills_the_memo_and_leaves_the_db(small, tmp_path):
    db = tmp_path / "db" / "tree.duckdb"
    assert api.index(small, db, layers=LAYERS).mode == "built"  # `torchtalk index`, then a watcher:
    memo: dict = {}
    assert api.index(small, db, layers=LAYERS, memo=memo).up_to_date  # its first update runs no layer
    assert not any(name in memo for name in LAYERS)
    before = _identity(db)
    assert api.warm(small, db, layers=LAYERS, memo=memo) == LAYERS
    assert _identity(db) == before and _leftovers(db) == []
    assert "index" in memo["cpp"] and "rows" in memo["python"]  # the Index, the python layer's rows
    assert api.warm(small, db, layers=LAYERS, memo=memo) == []  # nothing left to read
    # the first edits: deltas from the rows kept, in the python layer too (no memo: all its rows)
    (small / PY).write_text("import torch\n\n\ndef relu(input):\n    return torch.foo(input)\n")
    report = api.index(small, db, layers=LAYERS, memo=memo)
    assert report.mode == "updated"
    ran = {lr.name: lr for lr in report.layers if lr.action == "ran"}
    assert list(ran) == ["python"] and ran["python"].sink.deltas is not None
    (small / CPP).write_text(BODY.format("\n"))
    assert api.index(small, db, layers=LAYERS, memo=memo).mode == "updated"
    con = store.open_db(db)
    try:
        assert con.execute("select caller, callee, line from calls").fetchall() == [
            ("at::native::foo_impl", "at::native::g", 5)]
    finally:
        con.close()
    assert_same_tables(db, api.index(small, tmp_path / "cold" / "tree.duckdb", layers=LAYERS).db)


def test_a_layer_whose_rows_moved_is_left_cold_and_its_caches_unwritten(small, tmp_path):
    """An edit the layers' stamp cannot see (same size, same mtime) but the
    layer reads: the warm-up finds its rows are not the DB's, keeps nothing
    of it and writes none of its caches (its state would label the new
    rows as the DB's, and the next update would write no delta of them)."""
    db = tmp_path / "db" / "tree.duckdb"
    assert api.index(small, db, layers=LAYERS).mode == "built"
    cache = db.with_name(db.stem + ".cache") / "cpp"
    state = cache / "state.bin"
    written = state.read_bytes()
    cpp = small / CPP
    st = cpp.stat()
    cpp.write_text(cpp.read_text().replace("{ g(); }", "{ h(); }"))  # the same size
    os.utime(cpp, ns=(st.st_atime_ns, st.st_mtime_ns))
    (cache / "index.pkl").unlink()  # so the layer hashes the file again: it reads the new text
    memo: dict = {}
    assert api.warm(small, db, layers=LAYERS, memo=memo) == ["ops", "python"]
    assert "cpp" not in memo and state.read_bytes() == written and _leftovers(db) == []
    cpp.write_text(cpp.read_text() + "// a line\n")  # seen now
    assert api.index(small, db, layers=LAYERS, memo=memo).mode == "updated"
    assert_same_tables(db, api.index(small, tmp_path / "cold" / "tree.duckdb", layers=LAYERS).db)


def test_a_failed_warm_up_is_said_and_leaves_no_memo(small, tmp_path, capsys, monkeypatch):
    import threading

    import extractors.python as python_layer

    db = tmp_path / "db" / "tree.duckdb"
    assert api.index(small, db, layers=LAYERS).mode == "built"
    memo: dict = {}

    def broken(ctx, sink):
        raise OSError("disk gone")

    monkeypatch.setattr(python_layer, "extract", broken)
    said: list[str] = []
    _warm_up(lambda: api.warm(small, db, layers=LAYERS, memo=memo), threading.Lock(), said.append)
    assert said == []
    err = capsys.readouterr().err
    assert err.startswith("torchtalk: warm-up failed (updates read the layers' caches instead): OSError: disk gone")
    assert "python" not in memo and _leftovers(db) == []


def test_the_update_worker_keeps_its_memo_between_commands(small, tmp_path):
    """Note [Update worker]: one process answers each command with one JSON
    line, warms before the first edit, updates from what it kept, says an
    unknown command as a failure and goes on, and ends when its stdin closes."""
    import json
    import subprocess
    import sys

    db = tmp_path / "db" / "tree.duckdb"
    assert api.index(small, db).mode == "built"  # every layer that runs on this tree, as the server's stages do
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.Popen([sys.executable, "-m", "torchtalk.updater", "--source", str(small), "--db", str(db),
                             "--parent", str(os.getpid())], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)

    def ask(command: str) -> dict:
        proc.stdin.write(command + "\n")
        proc.stdin.flush()
        answer = json.loads(proc.stdout.readline())
        answer.pop("seconds", None)
        return answer

    try:
        assert ask("update") == {"ok": True, "mode": "current", "ran": []}
        assert ask("warm") == {"ok": True, "warmed": LAYERS + ["tests"]}
        assert ask("reindex") == {"ok": False, "error": "unknown command 'reindex' (commands: update, warm)"}
        (small / PY).write_text("import torch\n\n\ndef relu(input):\n    return torch.foo(input)\n")
        assert ask("update") == {"ok": True, "mode": "updated", "ran": ["python", "tests"]}
        assert ask("warm") == {"ok": True, "warmed": []}
    finally:
        proc.stdin.close()
        code = proc.wait(timeout=60)
    assert (code, proc.stderr.read()) == (0, "")
    assert_same_tables(db, api.index(small, tmp_path / "cold" / "tree.duckdb").db)
