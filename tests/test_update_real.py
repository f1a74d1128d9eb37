"""Updating the fact DB in place (issue 16, Note [Update in place]) on a copy
of the real tree: after each kind of edit (a .cpp body, a new C++ function,
a header many files include, a .py body, a native_functions.yaml entry) `index` updates the DB in place,
and the DB equals a cold index of the same tree, table by table, stored
relations included; an update killed midway leaves the previous DB.

The copy is made of hard links; an edited file is written anew (its link
broken), so the real tree is never modified. The caches start from the
per-file parse caches of the real tree's DB when there is one (entries are
keyed by path and content, so they are what a cold run would compute);
the whole-tree results (resolution, layer rows) are never copied.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.test_incremental import _tables, assert_same_tables
from torchtalk import api, store

LAYERS = ["ops", "cpp", "python"]
BLAS = "aten/src/ATen/native/CPUBlas.cpp"
FUNCTIONAL = "torch/nn/functional.py"
IR_H = "torch/csrc/jit/ir/ir.h"  # 258 files of the tree include it
YAML = "aten/src/ATen/native/native_functions.yaml"
PER_FILE_CACHES = ("cpp/files", "python-summaries")


def _seed_cache(db: Path, tree: Path) -> None:
    """Hard-link the per-file parse caches of the real tree's DB (if any) into `db`'s cache dir."""
    given = os.environ.get("TORCHTALK_TEST_DB")
    real = Path(given) if given else store.default_db(tree)
    for sub in PER_FILE_CACHES:
        src = real.with_name(real.stem + ".cache") / sub
        if src.is_dir():
            dst = db.with_name(db.stem + ".cache") / sub
            dst.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(["cp", "-al", str(src), str(dst)], check=True)


def _edit(root: Path, rel: str, old: str, new: str) -> int:
    """Replace the first `old` in tree file `rel` by `new` (a new file: the hard
    link breaks); -> the 1-based line where `new` starts."""
    path = root / rel
    text = path.read_text()
    assert old in text, old
    path.unlink()
    path.write_text(text.replace(old, new, 1))
    return text[: text.index(old)].count("\n") + 1


def _cold(tree_copy: Path, tmp_path: Path, name: str, layers: list[str] = LAYERS) -> Path:
    db = tmp_path / f"cold-{name}" / "tree.duckdb"
    db.parent.mkdir(parents=True)
    _seed_cache(db, tree_copy)
    report = api.index(tree_copy, db, layers=layers, jobs=2)
    assert report.mode == "built"
    return db


def _rows(db: Path, sql: str, params: list) -> list[tuple]:
    con = store.open_db(db)
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()


def _indexed(tree: Path, tmp_path: Path, layers: list[str], memo: dict | None = None) -> tuple[Path, Path]:
    """(a hard-linked copy of the tree, its fact DB of `layers`, just built,
    with the layers' `memo` when given, as a watcher keeps it)."""
    copy = tmp_path / "pytorch"
    subprocess.run(["cp", "-al", str(tree.resolve()), str(copy)], check=True)
    db = tmp_path / "inc" / "tree.duckdb"
    db.parent.mkdir()
    _seed_cache(db, tree)
    assert api.index(copy, db, layers=layers, jobs=2, memo=memo).mode == "built"
    return copy, db


@pytest.fixture
def indexed(tree, tmp_path) -> tuple[Path, Path]:
    """(a hard-linked copy of the tree, its fact DB of LAYERS)."""
    copy, db = _indexed(tree, tmp_path, LAYERS)
    yield copy, db
    shutil.rmtree(copy, ignore_errors=True)


def _update(copy: Path, db: Path, ran: list[str], layers: list[str] = LAYERS) -> tuple[set[str], set[str]]:
    """Index `copy` again: an update in place that re-ran the layers `ran`;
    -> the stored relations it recomputed (Note [Derived in place]), and
    those of them it recomputed in the changed files only (Note [Rows
    changed by file]), each with its count of files or ops ("step_at (1 file)")."""
    lines: list[str] = []
    report = api.index(copy, db, layers=layers, jobs=2, log=lines.append)
    assert report.mode == "updated"
    assert [lr.name for lr in report.layers if lr.action == "ran"] == ran
    done = [ln.split(": ", 1)[1] for ln in lines if ln.startswith("stored relations recomputed in ")]
    by_part = [ln.split(": ", 1)[1] for ln in lines if ln.startswith("… at the changed files, ops or other values only: ")]
    return (set(done[0].split(", ")) if done else set(), set(by_part[0].split(", ")) if by_part else set())


TESTS_LAYERS = ["ops", "python", "tests"]


@pytest.mark.real_tree
def test_a_py_edit_updates_its_ops_tests_in_place_to_a_cold_index(tree, tmp_path):
    """A .py body's edit changes what the tests of a few ops reach: the
    stored test links of every op (Note [Tests of every op stored] in
    rules/ranking.dl) are computed again at those ops only, not at the 277
    whose APIs the edit moved a line down (Note [Rows changed by file])."""
    copy, db = _indexed(tree, tmp_path, TESTS_LAYERS)
    relu = "select count(*) from derived.op_test_rank where op = 'sigmoid' and via = 'torch.nn.functional.relu'"
    assert _rows(db, relu, []) == [(0,)]
    # relu calls sigmoid: sigmoid is reached through relu, so relu's tests now cover it
    _edit(copy, FUNCTIONAL, "    if inplace:\n        result = torch.relu_(input)",
          "    torch.sigmoid(input)\n    if inplace:\n        result = torch.relu_(input)")
    recomputed, by_part = _update(copy, db, ["python", "tests"], TESTS_LAYERS)
    assert "op_test_rank" in recomputed and "op_test_rank (2 ops)" in by_part
    assert _rows(db, relu, [])[0][0] > 0
    assert_same_tables(db, _cold(copy, tmp_path, "py-tests", TESTS_LAYERS))
    shutil.rmtree(copy, ignore_errors=True)


@pytest.mark.real_tree
def test_a_py_edit_in_a_watcher_computes_again_the_test_files_it_changes(tree, tmp_path, monkeypatch):
    """Note [Test files kept across a body edit]: with the memo a watcher
    keeps, a body edit after which F.softmin reaches no op computes again
    only the test file whose test calls it (test_nn's test_softmin covers it
    no more), and the DB equals a cold index."""
    from extractors import tests as layer

    memo: dict = {}
    copy, db = _indexed(tree, tmp_path, TESTS_LAYERS, memo)
    softmin = "select test, line from tests_cover where subject = 'torch.nn.functional.softmin' and how = 'call'"
    assert _rows(db, softmin, []) == [("test/test_nn.py::TestNN::test_softmin", 6837)]
    computed: list[str] = []
    real = layer._test_file
    monkeypatch.setattr(layer, "_test_file", lambda m, f, s: (computed.append(s.file), real(m, f, s))[1])
    _edit(copy, FUNCTIONAL, "        ret = (-input).softmax(dim)\n    else:\n        ret = (-input).softmax(dim, dtype=dtype)\n",
          "        ret = -input\n    else:\n        ret = -input\n")
    report = api.index(copy, db, layers=TESTS_LAYERS, jobs=2, memo=memo)
    assert report.mode == "updated" and [lr.name for lr in report.layers if lr.action == "ran"] == ["python", "tests"]
    assert computed == ["test/test_nn.py"]
    assert _rows(db, softmin, []) == []
    monkeypatch.undo()
    assert_same_tables(db, _cold(copy, tmp_path, "py-kept", TESTS_LAYERS))
    shutil.rmtree(copy, ignore_errors=True)


@pytest.mark.real_tree
def test_a_yaml_edit_in_a_watcher_computes_again_the_test_files_it_changes(tree, tmp_path, monkeypatch):
    """Note [Test files kept across a YAML edit]: with a watcher's memo, a
    new op `tensorinv` (an op name the tests named test_tensorinv* start
    with, no OpInfo's) computes again only the test files with such a test,
    which now cover it by name, and the python layer walks no API again
    (Note [API answers kept across a YAML edit]); the DB equals a cold index."""
    from extractors import tests as layer

    memo: dict = {}
    copy, db = _indexed(tree, tmp_path, TESTS_LAYERS, memo)
    named = _rows(db, "select test, file from test where kind = 'function' and (test like '%::test\\_tensorinv' "
                      "escape '\\' or test like '%::test\\_tensorinv\\_%' escape '\\') order by test", [])
    assert named and _rows(db, "select count(*) from tests_cover where subject = 'tensorinv'", []) == [(0,)]
    computed: list[str] = []
    real = layer._test_file
    monkeypatch.setattr(layer, "_test_file", lambda m, f, s: (computed.append(s.file), real(m, f, s))[1])
    was = memo["python"]["model"][1]._api_ops
    _edit(copy, YAML, "- func: mm(Tensor self, Tensor mat2) -> Tensor\n",
          "- func: tensorinv(Tensor self) -> Tensor\n  dispatch:\n    CPU: tensorinv_cpu\n\n"
          "- func: mm(Tensor self, Tensor mat2) -> Tensor\n")
    report = api.index(copy, db, layers=TESTS_LAYERS, jobs=2, memo=memo)
    assert report.mode == "updated" and [lr.name for lr in report.layers if lr.action == "ran"] == TESTS_LAYERS
    assert computed == sorted({f for _t, f in named})
    # Note [API answers kept across a YAML edit]: no API's walk reads a tensorinv leaf
    now = memo["python"]["model"][1]._api_ops
    assert was and all(now.get(api) is hit for api, hit in was.items())
    covered = "select test from tests_cover where subject = 'tensorinv' and how = 'name' order by test"
    assert _rows(db, covered, []) == [(t,) for t, _f in named]
    monkeypatch.undo()
    assert_same_tables(db, _cold(copy, tmp_path, "yaml-kept", TESTS_LAYERS))
    shutil.rmtree(copy, ignore_errors=True)


@pytest.mark.real_tree
def test_each_edit_updates_in_place_to_a_cold_index(indexed, tmp_path):
    copy, db = indexed

    # a .cpp body: a line more in gemm's body moves the rows below it
    line = _edit(copy, BLAS, "int m_ = m, n_ = n, k_ = k", "// probe\n  int m_ = m, n_ = n, k_ = k")
    before = _rows(db, "select line from func where file = ? and line > ? order by line limit 1", [BLAS, line])
    recomputed, by_file = _update(copy, db, ["cpp"])
    # lines moved, no call: the walks' nodes and edges stay, where they are written does not,
    # in this file's rows only (Note [Rows changed by file])
    assert "step_at" in recomputed and "search_entity" in recomputed
    assert not recomputed & {"step_pair", "step_dev", "op_stub_impl"}
    assert {"step_at (1 file)", "search_entity (1 file)"} <= by_file
    after = _rows(db, "select line from func where file = ? and line > ? order by line limit 1", [BLAS, line])
    assert after == [(before[0][0] + 1,)]
    assert_same_tables(db, _cold(copy, tmp_path, "body"))

    # a new C++ function, calling an op
    line = _edit(copy, BLAS, "namespace at::native::cpublas {",
                 "namespace at::native::cpublas {\nvoid tt_probe(const Tensor& t) { t.mm(t); }")
    numbers = dict(_rows(db, "select name, id from node", []))
    recomputed, by_file = _update(copy, db, ["cpp"])
    # a new step: the pairs whole, the steps in this file only: func's new row moves
    # fn_device, which the steps read under a negation, but fn_device is computed
    # again to the same rows (Note [Derived in place])
    assert {"step_pair", "fn_device"} <= recomputed
    assert {"step (1 file)", "step_at (1 file)"} <= by_file
    # the new node is numbered by its name's bucket, and no other name in another
    # bucket is numbered again (Note [Numbers that stay])
    probe = "at::native::cpublas::tt_probe"
    after = dict(_rows(db, "select name, id from node", []))
    assert after[probe] // 8 == int(hashlib.md5(probe.encode()).hexdigest()[:7], 16)
    assert {n: i for n, i in after.items() if i // 8 != after[probe] // 8} == {
        n: i for n, i in numbers.items() if i // 8 != after[probe] // 8}
    assert _rows(db, "select count(*) from node where name = 'at::native::cpublas::tt_probe'", []) == [(1,)]
    assert _rows(db, "select fn, line from func where name = 'tt_probe'", []) == [
        ("at::native::cpublas::tt_probe", line + 1)]
    assert _rows(db, "select name, line from calls_op where caller = 'at::native::cpublas::tt_probe'", []) == [
        ("mm", line + 1)]
    assert_same_tables(db, _cold(copy, tmp_path, "newfn"))

    # a call more in a gemm's body: a new step, and link_reach (what a kernel reaches in
    # three calls, recursive) computed again for the functions that reached that gemm
    # only, its rows of each by the column its recursion carries (Note [A recursion by a
    # carried column])
    line = _edit(copy, BLAS, "    int m_ = m, n_ = n, k_ = k", "    axpy(n, 1.0, a, 1, c, 1);\n    int m_ = m, n_ = n, k_ = k")
    recomputed, by_file = _update(copy, db, ["cpp"])
    assert {"step_pair", "link_reach"} <= recomputed
    reached = [p for p in by_file if p.startswith("link_reach (")]
    assert len(reached) == 1 and reached[0].endswith(" fns)") and reached[0] != "link_reach (0 fns)", by_file
    calls = _rows(db, "select caller like 'at::native::cpublas::gemm(%', callee like 'at::native::cpublas::axpy(%' "
                      "from calls where file = ? and line = ?", [BLAS, line])
    assert calls and set(calls) == {(True, True)}, calls
    assert_same_tables(db, _cold(copy, tmp_path, "call"))

    # a header 258 files include: a line more moves its rows; the includers keep theirs
    line = _edit(copy, IR_H, "  inline graph_node_list_iterator iterator() {",
                 "  // probe\n  inline graph_node_list_iterator iterator() {")
    _update(copy, db, ["cpp"])
    assert _rows(db, "select line from func where file = ? and fn = 'torch::jit::Node::iterator' order by line",
                 [IR_H]) == [(line + 1,), (line + 7,)]  # and its const twin
    assert_same_tables(db, _cold(copy, tmp_path, "header"))

    # a .py body: relu calls one more function
    line = _edit(copy, FUNCTIONAL, "    if inplace:\n        result = torch.relu_(input)",
                 "    torch.sigmoid(input)\n    if inplace:\n        result = torch.relu_(input)")
    _update(copy, db, ["python"])
    assert ("torch.sigmoid", line) in _rows(
        db, "select callee, line from py_calls where caller = 'torch.nn.functional.relu'", [])
    assert_same_tables(db, _cold(copy, tmp_path, "py"))

    # one native_functions.yaml entry
    line = _edit(copy, YAML, "- func: mm(Tensor self, Tensor mat2) -> Tensor\n",
                 "- func: tt_probe(Tensor self) -> Tensor\n  dispatch:\n    CPU: tt_probe_cpu\n\n"
                 "- func: mm(Tensor self, Tensor mat2) -> Tensor\n")
    recomputed, by_part = _update(copy, db, ["ops", "cpp", "python"])
    assert _rows(db, "select op, key, kernel, line from dispatch where op = 'tt_probe'", []) == [
        ("tt_probe", "CPU", "tt_probe_cpu", line + 2)]
    # the op's new bindings are the Python names whose documented test runs again
    # (Note [Rows changed at other columns])
    names = _rows(db, "select distinct api from py_api where op = 'tt_probe'", [])
    assert len(names) >= 2 and f"api_name_documented ({len(names)} names)" in by_part, (names, by_part)
    assert_same_tables(db, _cold(copy, tmp_path, "yaml"))


@pytest.mark.real_tree
def test_a_checkout_of_50_files_updates_to_a_cold_index(indexed, tmp_path):
    """Issue 16: 50 files changed at once, as a `git checkout` does (bench/
    incremental.py's `checkout`: 40 .cpp, 10 .py), update the DB in place to
    a cold index's."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("incremental", Path(__file__).resolve().parents[1] / "bench/incremental.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    copy, db = indexed
    first = sorted((copy / "aten/src/ATen/native").glob("*.cpp"))[0].relative_to(copy).as_posix()
    lines = "select line from func where file = ? order by line, fn"
    before = _rows(db, lines, [first])
    bench.checkout(copy, 50)
    _update(copy, db, ["cpp", "python"])
    assert before and _rows(db, lines, [first]) == [(line + 1,) for (line,) in before]  # a line more at the top
    assert_same_tables(db, _cold(copy, tmp_path, "checkout"))


def _digest(path: Path) -> str:
    return hashlib.sha1(path.read_bytes()).hexdigest()


@pytest.mark.real_tree
def test_a_killed_update_leaves_the_previous_db(indexed, tmp_path):
    copy, db = indexed
    tables, digest = _tables(db), _digest(db)
    facts = store.facts_dir(db)
    fact_files = sorted(p.relative_to(facts) for p in facts.rglob("*"))
    _edit(copy, BLAS, "namespace at::native::cpublas {",
          "namespace at::native::cpublas {\nvoid tt_killed() {}")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.Popen([sys.executable, "-m", "torchtalk", "index", "--source", str(copy), "--db", str(db),
                             "--layers", ",".join(LAYERS), "--jobs", "2", "--quiet"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    tmp_db = db.with_name(f".{db.name}.tmp-{proc.pid}")
    while not tmp_db.exists():  # the update has begun writing its copy of the DB
        assert proc.poll() is None, "the index finished before it could be killed"
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert _digest(db) == digest
    assert _tables(db) == tables
    assert sorted(p.relative_to(facts) for p in facts.rglob("*")) == fact_files

    report = api.index(copy, db, layers=LAYERS, jobs=2)  # picks up the edit, in place
    assert report.mode == "updated"
    assert _rows(db, "select count(*) from func where name = 'tt_killed'", []) == [(1,)]
    assert not list(db.parent.glob(f".{db.name}.tmp-*"))
    assert_same_tables(db, _cold(copy, tmp_path, "killed"))


@pytest.mark.real_tree
def test_watch_picks_up_edits(indexed, tmp_path):
    """`torchtalk watch` started on an indexed tree reads the layers' state
    before the first edit (Note [Warmed memo]), then updates the DB after
    each edit from what it keeps in memory (Note [Layer memo]), to a cold
    index's DB."""
    copy, db = indexed
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    err = tmp_path / "watch.err"
    # Ctrl-C reaches the watcher even when this suite runs as a background job, which ignores SIGINT
    proc = subprocess.Popen([sys.executable, "-m", "torchtalk", "watch", "--source", str(copy), "--db", str(db),
                             "--layers", ",".join(LAYERS), "--jobs", "2"], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=err.open("w"),
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        lines = [proc.stdout.readline() for _ in range(4)]
        assert lines[0].startswith("no change to the facts in "), lines
        assert lines[1] == f"watching {copy.resolve()} (Ctrl-C to stop)\n"
        assert lines[2].startswith(f"serving `torchtalk query` for {db} at "), lines  # Note [Query server]
        # Note [Warmed memo]: the layers' state read before the first edit; the edits write deltas from it
        assert lines[3].startswith(f"ready for edits: read {', '.join(LAYERS)} in "), lines
        for old, new in (("int m_ = m, n_ = n, k_ = k", "// moved\n  int m_ = m, n_ = n, k_ = k"),
                         ("// moved\n", "// moved\n// again\n"),
                         ("namespace at::native::cpublas {", "namespace at::native::cpublas {\nvoid tt_watched() {}")):
            line = _edit(copy, BLAS, old, new)
            done = proc.stdout.readline()
            assert done.startswith(f"{BLAS}: updated (cpp ran) in "), done
        assert _rows(db, "select fn, line from func where name = 'tt_watched'", []) == [
            ("at::native::cpublas::tt_watched", line + 1)]
        # .py edits: the second reads the summaries and native ops the first kept (Note [Layer memo])
        for old, new in (("    if inplace:\n        result = torch.relu_(input)",
                          "    torch.sigmoid(input)\n    if inplace:\n        result = torch.relu_(input)"),
                         ("    torch.sigmoid(input)\n",
                          "    torch.sigmoid(input)\n    torch.tanh(input)\n    torch.tt_probe(input)\n")):
            py_line = _edit(copy, FUNCTIONAL, old, new)
            done = proc.stdout.readline()
            assert done.startswith(f"{FUNCTIONAL}: updated (python ran) in "), done
        assert ("torch.tanh", py_line + 1) in _rows(
            db, "select callee, line from py_calls where caller = 'torch.nn.functional.relu'", [])
        relu_ops = "select op, how, line from py_api where api = 'torch.nn.functional.relu' and op like 'tt%'"
        assert _rows(db, relu_ops, []) == []
        # a new op: relu's call of torch.tt_probe is an edge to its binding now, from the
        # model the .py edits kept, its other edges kept (Note [A model kept across a YAML edit])
        _edit(copy, YAML, "- func: mm(Tensor self, Tensor mat2) -> Tensor\n",
              "- func: tt_probe(Tensor self) -> Tensor\n\n- func: mm(Tensor self, Tensor mat2) -> Tensor\n")
        done = proc.stdout.readline()
        assert done.startswith(f"{YAML}: updated ("), done
        assert _rows(db, relu_ops, []) == [("tt_probe", "wrapper", py_line + 2)]
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:  # never left behind
            proc.kill()
            proc.wait()
            code = "still running 60 s after Ctrl-C"
        assert code == 0, (code, err.read_text())
    assert_same_tables(db, _cold(copy, tmp_path, "watched"))
