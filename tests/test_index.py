"""`torchtalk index` / `status`: the fact DB, errors through the CLI, atomicity, no-op re-index."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from torchtalk import api, store
from torchtalk import index as index_mod
from torchtalk.cli import main
from torchtalk.errors import ExtractError

NF = "aten/src/ATen/native/native_functions.yaml"
NATIVE = (
    "- func: foo(Tensor self) -> Tensor\n"
    "  variants: function, method\n"
    "  tags: core\n"
    "  dispatch:\n"
    "    CPU, CUDA: foo_impl\n"
    "- func: bar.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)\n"
)
DERIV = "- name: foo(Tensor self) -> Tensor\n  self: foo_backward(grad, self)\n"


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "cache"
    monkeypatch.setenv("TORCHTALK_CACHE_DIR", str(path))
    return path


@pytest.fixture
def small(tmp_path) -> Path:
    root = tmp_path / "tree"
    (root / "aten/src/ATen/native").mkdir(parents=True)
    (root / NF).write_text(NATIVE)
    (root / "aten/src/ATen/native/tags.yaml").write_text("- tag: core\n  desc: core op\n")
    (root / "tools/autograd").mkdir(parents=True)
    (root / "tools/autograd/derivatives.yaml").write_text(DERIV)
    (root / "version.txt").write_text("9.9.9a0\n")
    return root


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def rows(db: Path, sql: str) -> list[tuple]:
    con = store.open_db(db)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


# ------------------------------------------------------------------ the DB


def test_index_small_tree_tables_and_status(small, cache, capsys):
    code, out, err = cli(capsys, "index", "--source", str(small), "--layers", "ops", "--json")
    assert code == 0
    report = json.loads(out)
    db = Path(report["db"])
    assert db == store.default_db(small) and db.parent == cache / "db"
    assert report["layers"][0]["layer"] == "ops" and report["layers"][0]["rows"] == 16  # 3 of them native_kernel_param (the kernels' signatures, one per dispatch entry)
    assert "ops: 16 rows in" in err
    assert rows(db, "select * from dispatch order by key") == [
        ("foo", "CPU", "foo_impl", NF, 5),
        ("foo", "CUDA", "foo_impl", NF, 5),
        ("bar.out", "CompositeImplicitAutograd", "bar_out", NF, 6),
    ]
    assert rows(db, "select column_name, data_type from information_schema.columns where table_name = 'op' order by ordinal_position") == [
        ("op", "VARCHAR"), ("name", "VARCHAR"), ("overload", "VARCHAR"), ("schema", "VARCHAR"),
        ("file", "VARCHAR"), ("line", "BIGINT"),
    ]
    # empty overload stays an empty string, not NULL
    assert rows(db, "select overload from op where op = 'foo'") == [("",)]
    # every schema relation has a table; the fact files sit beside the DB
    facts = store.facts_dir(db)
    assert (facts / "derivative_calls.facts").read_text() == "foo\tself\tfoo_backward\ttools/autograd/derivatives.yaml\t2\n"
    assert (facts / "calls.facts").read_text() == ""
    code, out, _ = cli(capsys, "status", "--source", str(small), "--json")
    st = json.loads(out)
    assert code == 0
    assert st["meta"]["version"] == "9.9.9a0" and st["meta"]["kind"] == "tree"
    assert st["meta"]["source"] == str(small.resolve()) and st["meta"]["git_commit"] == ""
    assert st["relations"]["op"] == 2 and st["relations"]["calls"] == 0
    assert [(lr["layer"], lr["rows"], lr["warnings"]) for lr in st["layers"]] == [("ops", 16, 0)]
    code, out, _ = cli(capsys, "status", "--source", str(small))
    assert "version   9.9.9a0" in out and "  op " in out


def test_reindex_unchanged_is_a_noop_and_change_reruns(small, cache, capsys):
    first = api.index(small, layers=["ops"])
    assert not first.up_to_date
    stamp = first.db.stat().st_mtime_ns
    again = api.index(small, layers=["ops"])
    assert again.up_to_date and again.layers[0].action == "carried" and again.layers[0].rows == 16
    assert first.db.stat().st_mtime_ns == stamp
    (small / NF).write_text(NATIVE + "- func: baz(Tensor self) -> Tensor\n")
    third = api.index(small, layers=["ops"])
    assert not third.up_to_date and third.layers[0].action == "ran"
    assert rows(third.db, "select count(*) from op") == [(3,)]
    forced = api.index(small, layers=["ops"], force=True)
    assert forced.layers[0].action == "ran"


def test_failed_index_leaves_previous_db(small, cache, capsys):
    db = api.index(small, layers=["ops"]).db
    before = db.read_bytes()
    (small / NF).write_text(NATIVE + "  dispach:\n    CPU: x\n")
    code, _, err = cli(capsys, "index", "--source", str(small), "--layers", "ops")
    assert code == 1
    assert err == f"torchtalk: {NF}:7: extract error: unknown key 'dispach' in entry 'bar.out' (did you mean 'dispatch'?)\n"
    assert db.read_bytes() == before
    assert rows(db, "select count(*) from op") == [(2,)]
    assert sorted(p.name for p in db.parent.iterdir() if p.name.startswith(".")) == []


def test_interrupted_index_leaves_previous_db(small, cache, monkeypatch):
    db = api.index(small, layers=["ops"]).db
    before = db.read_bytes()
    (small / NF).write_text(NATIVE + "- func: baz(Tensor self) -> Tensor\n")
    real_add, seen = index_mod.LayerSink.add, []

    def add(self, relation, *values):
        seen.append(relation)
        if len(seen) == 5:
            raise KeyboardInterrupt
        real_add(self, relation, *values)

    monkeypatch.setattr(index_mod.LayerSink, "add", add)
    with pytest.raises(KeyboardInterrupt):
        api.index(small, layers=["ops"])
    assert db.read_bytes() == before
    assert sorted(p.name for p in db.parent.iterdir() if p.name.startswith(".")) == []
    monkeypatch.undo()
    assert api.index(small, layers=["ops"]).layers[0].rows == 21


def test_sink_rejects_bad_rows(small, tmp_path):
    from extractors.layers import LAYERS

    schema = index_mod.load_schema()
    sink = index_mod.LayerSink(LAYERS[0], schema, tmp_path)
    with pytest.raises(ExtractError) as err:
        sink.add("opp", "x")
    assert str(err.value) == "extract error: layer ops: unknown relation 'opp' (not in facts/schema.dl) (did you mean 'op'?)"
    with pytest.raises(ExtractError) as err:
        sink.add("op_tag", "x")
    assert str(err.value) == "extract error: layer ops: relation op_tag: takes 2 values (op, tag), got 1"
    with pytest.raises(ExtractError) as err:
        sink.add("structured", "x", "a.yaml", "7")
    assert str(err.value) == "extract error: layer ops: relation structured: column line is a number, got '7'"
    with pytest.raises(ExtractError) as err:
        sink.add("calls", "a", "b", "f.cpp", 1, "unique")
    assert str(err.value) == "extract error: layer ops: writes relation 'calls', which extractors/layers.py does not list for it"
    sink.add("op_tag", "a\tb", "c\nd")
    # the bulk path checks the same, and names the same bad row
    with pytest.raises(ExtractError) as err:
        sink.add_rows("structured", [("y", "a.yaml", 3), ("x", "a.yaml", "7")])
    assert str(err.value) == "extract error: layer ops: relation structured: column line is a number, got '7'"
    with pytest.raises(ExtractError) as err:
        sink.add_rows("op_tag", [("a", "b"), ("x",)])
    assert str(err.value) == "extract error: layer ops: relation op_tag: takes 2 values (op, tag), got 1"
    sink.add_rows("op_tag", [("e", "f"), ("g\th", "i")])
    sink.close()
    # (a failed layer's files are discarded; the rows before the bad one were written, as with add)
    assert (tmp_path / "op_tag.facts").read_text() == "a b\tc d\na\tb\ne\tf\ng h\ti\n"


# ------------------------------------------------------------------ user errors


def test_error_missing_path(cache, capsys, tmp_path):
    code, _, err = cli(capsys, "index", "--source", str(tmp_path / "nope"))
    assert code == 1
    assert err == f"torchtalk: error: no such directory: {tmp_path / 'nope'} (pass the root of a PyTorch checkout)\n"


def test_error_tree_without_native_functions(cache, capsys, tmp_path):
    code, _, err = cli(capsys, "index", "--source", str(tmp_path))
    assert code == 1
    assert err == (
        f"torchtalk: error: not a PyTorch tree: {tmp_path} has no {NF} "
        "(pass the root of a PyTorch checkout or an installed torch package)\n"
    )


def test_error_malformed_yaml(small, cache, capsys):
    (small / "tools/autograd/derivatives.yaml").write_text("- name: foo(Tensor self) -> Tensor\n  self: [grad\n")
    code, _, err = cli(capsys, "index", "--source", str(small), "--layers", "ops")
    assert code == 1
    assert err.splitlines()[0] == (
        "torchtalk: tools/autograd/derivatives.yaml:3:1: parse error: malformed YAML: did not find expected ',' or ']'"
    )


def test_error_unwritable_cache_dir(small, capsys, tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("TORCHTALK_CACHE_DIR", str(blocker / "cache"))
    code, _, err = cli(capsys, "index", "--source", str(small), "--layers", "ops")
    assert code == 1
    assert err == f"torchtalk: store error: cannot create directory {blocker}/cache/db: Not a directory\n"


def test_error_corrupt_and_foreign_database(small, cache, capsys, tmp_path):
    bad = tmp_path / "bad.duckdb"
    bad.write_bytes(b"this is not a database" * 100)
    code, _, err = cli(capsys, "status", "--db", str(bad))
    assert code == 1
    assert err.startswith(f"torchtalk: store error: cannot read the database {bad}: ")
    assert err.endswith(" (it may be truncated or corrupt; re-run `torchtalk index --force`)\n") and err.count("\n") == 1
    import duckdb

    other = tmp_path / "other.duckdb"
    duckdb.connect(str(other)).execute("create table t (x int)").close()
    code, _, err = cli(capsys, "status", "--db", str(other))
    assert (code, err) == (1, f"torchtalk: store error: not a TorchTalk database: {other}\n")
    # indexing over a corrupt DB rebuilds it
    code, _, _ = cli(capsys, "index", "--source", str(small), "--layers", "ops", "--db", str(bad))
    assert code == 0 and rows(bad, "select count(*) from op") == [(2,)]


def test_error_not_indexed_and_unknown_layer(small, cache, capsys):
    code, _, err = cli(capsys, "status", "--source", str(small))
    assert (code, err) == (1, f"torchtalk: store error: {small} is not indexed yet (run `torchtalk index --source {small}`)\n")
    code, _, err = cli(capsys, "index", "--source", str(small), "--layers", "opz")
    assert code == 1 and err.startswith("torchtalk: error: unknown layer 'opz' (layers: ops, cpp, python, tests, precise) (did you mean 'ops'?)")


# ------------------------------------------------------------------ real inputs


@pytest.mark.real_tree
def test_index_real_tree_ops(tree, cache, capsys, tmp_path):
    db = tmp_path / "real.duckdb"
    code, out, _ = cli(capsys, "index", "--source", str(tree), "--layers", "ops", "--db", str(db), "--json")
    assert code == 0 and json.loads(out)["layers"][0]["layer"] == "ops"
    code, out, _ = cli(capsys, "status", "--db", str(db), "--json")
    st = json.loads(out)
    assert st["meta"]["version"] == "2.6.0a0"
    assert {k: st["relations"][k] for k in ("op", "dispatch", "dispatch_default", "derivative")} == {
        "op": 2633, "dispatch": 4609, "dispatch_default": 744, "derivative": 1508}
    assert rows(db, "select kernel, line from dispatch where op = 'matmul' and key = 'CompositeImplicitAutograd'") == [("matmul", 3778)]


@pytest.mark.wheel
def test_index_installed_wheel(torch_wheel, cache, capsys, tmp_path):
    pkg = Path(torch_wheel.__file__).parent
    db = tmp_path / "wheel.duckdb"
    code, out, err = cli(capsys, "index", "--source", str(pkg), "--db", str(db), "--json")
    assert code == 0
    report = json.loads(out)
    assert report["kind"] == "wheel" and report["source"] == str(pkg.parent.resolve())
    assert [lr["layer"] for lr in report["layers"]] == ["ops"]
    meta = dict(rows(db, "select key, value from torchtalk_meta"))
    assert meta["version"] == torch_wheel.__version__
    files = rows(db, "select distinct file from op")
    assert files == [("torchgen/packaged/ATen/native/native_functions.yaml",)]
    entries = (pkg.parent / "torchgen/packaged/ATen/native/native_functions.yaml").read_text().count("\n- func:")
    assert rows(db, "select count(*) from op") == [(entries + 0,)]
    assert rows(db, "select count(*) from derivative")[0][0] > 1000
    assert rows(db, "select kernel from dispatch where op = 'add.Tensor' and key = 'ZeroTensor'") == [("add_zerotensor",)]
    assert os.path.isdir(store.facts_dir(db))


def test_error_db_is_a_directory(small, cache, capsys, tmp_path):
    code, _, err = cli(capsys, "index", "--source", str(small), "--layers", "ops", "--db", str(tmp_path))
    assert (code, err) == (1, f"torchtalk: error: --db names a directory: {tmp_path} (give a file path, e.g. tree.duckdb)\n")


def test_schema_change_elsewhere_keeps_layer_rows(small, cache, tmp_path, monkeypatch):
    schema = tmp_path / "schema.dl"
    schema.write_text(store.SCHEMA_PATH.read_text())
    monkeypatch.setattr(store, "SCHEMA_PATH", schema)
    first = api.index(small, layers=["ops"])
    schema.write_text(schema.read_text() + "\n// new\n.decl brand_new(x: symbol)\n.input brand_new\n")
    second = api.index(small, layers=["ops"])
    assert not second.up_to_date and second.layers[0].action == "carried"
    assert rows(second.db, "select count(*) from brand_new") == [(0,)]
    assert rows(first.db, "select count(*) from op") == [(2,)]
    schema.write_text(schema.read_text().replace(".decl op_tag(op: OpName, tag: symbol)", ".decl op_tag(op: OpName, tag: symbol, extra: symbol)"))
    with pytest.raises(ExtractError, match="relation op_tag: takes 3 values"):
        api.index(small, layers=["ops"])


def test_git_commit_recorded(small, cache):
    import subprocess

    git = ["git", "-C", str(small), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "x"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    report = api.index(small, layers=["ops"])
    assert api.status(db=report.db)["meta"]["git_commit"] == head and len(head) == 40


def test_error_no_default_tree(cache, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("TORCHTALK_PYTORCH_SRC", str(tmp_path / "none"))
    code, _, err = cli(capsys, "index")
    assert (code, err) == (1, f"torchtalk: error: no PyTorch tree at {tmp_path / 'none'} (run `torchtalk fetch` or pass --source PATH)\n")


def test_killed_index_leftovers_are_removed(small, cache):
    db = api.index(small, layers=["ops"]).db
    (db.parent / f".{db.name}.tmp-999999").write_bytes(b"half a db")
    (db.parent / f".{store.facts_dir(db).name}.tmp-999999" / "layers").mkdir(parents=True)
    api.index(small, layers=["ops"])
    assert sorted(p.name for p in db.parent.iterdir() if p.name.startswith(".")) == []


def test_the_cpp_state_is_written_after_the_db_and_a_lost_one_costs_nothing(small, cache, tmp_path):
    """Note [Cache written after the update]: with `later`, the DB is in
    place before the C++ layer's state is written; an update whose state is
    never written (killed first) leaves the last one, and the next update
    still equals a cold index."""
    cpp = small / "aten/src/ATen/native/Foo.cpp"
    cpp.write_text("namespace at::native {\nvoid g() {}\nvoid foo_impl() { g(); }\n}\n")
    db = tmp_path / "db" / "tree.duckdb"
    state = db.with_name(db.stem + ".cache") / "cpp" / "state.bin"
    later: list = []
    assert api.index(small, db, layers=["ops", "cpp"], later=later).mode == "built"
    assert rows(db, "select caller, callee, line from calls") == [("at::native::foo_impl", "at::native::g", 3)]
    assert not state.exists() and len(later) == 1
    later.pop()()
    assert state.exists()
    written = state.stat().st_mtime_ns
    cpp.write_text("namespace at::native {\nvoid g() {}\n// a line\nvoid foo_impl() { g(); }\n}\n")
    assert api.index(small, db, layers=["ops", "cpp"], later=later).mode == "updated"
    assert rows(db, "select caller, callee, line from calls") == [("at::native::foo_impl", "at::native::g", 4)]
    # Note [Old files removed later]: the DB and facts dir replaced are kept aside until then
    old_db, old_facts = (db.with_name(f".{n}.old-{os.getpid()}") for n in (db.name, store.facts_dir(db).name))
    assert rows(old_db, "select caller, callee, line from calls") == [("at::native::foo_impl", "at::native::g", 3)]
    assert (old_facts / "layers" / "cpp" / "calls.facts").read_text() == "at::native::foo_impl\tat::native::g\t" \
        "aten/src/ATen/native/Foo.cpp\t3\tscope\n"
    later.clear()  # killed before the write: the state is the first run's, the old files are left
    assert state.stat().st_mtime_ns == written
    cpp.write_text("namespace at::native {\nvoid g() {}\n// a line\n// and one\nvoid foo_impl() { g(); g(); }\n}\n")
    assert api.index(small, db, layers=["ops", "cpp"]).mode == "updated"
    assert state.stat().st_mtime_ns != written  # written before `index` returned
    assert sorted(p.name for p in db.parent.iterdir() if ".old-" in p.name) == []  # the leftovers too
    from tests.test_incremental import assert_same_tables

    assert rows(db, "select caller, callee, line from calls") == [("at::native::foo_impl", "at::native::g", 5)]
    assert_same_tables(db, api.index(small, tmp_path / "cold" / "tree.duckdb", layers=["ops", "cpp"]).db)


def test_a_memo_knows_the_db_it_wrote_last(small, cache, tmp_path, monkeypatch):
    """Note [The DB written last]: with the memo of the run that wrote the
    DB, an update takes it as updatable without reading its meta; once the
    file is another (written by a run without that memo), the meta is read."""
    from torchtalk import update as update_mod

    cpp = small / "aten/src/ATen/native/Foo.cpp"
    cpp.write_text("namespace at::native {\nvoid g() {}\nvoid foo_impl() { g(); }\n}\n")
    db, memo, asked = tmp_path / "db" / "tree.duckdb", {}, []
    real = update_mod.updatable
    monkeypatch.setattr(update_mod, "updatable", lambda *a: (asked.append(a[1].name), real(*a))[1])
    assert api.index(small, db, layers=["ops", "cpp"], memo=memo).mode == "built"
    for line in (4, 5):
        cpp.write_text("namespace at::native {\nvoid g() {}\n" + "// a line\n" * (line - 3) + "void foo_impl() { g(); }\n}\n")
        assert api.index(small, db, layers=["ops", "cpp"], memo=memo).mode == "updated"
        assert rows(db, "select line from calls") == [(line,)]
    assert asked == []
    cpp.write_text("namespace at::native {\nvoid g() {}\nvoid foo_impl() { g(); }\n}\n")
    assert api.index(small, db, layers=["ops", "cpp"]).mode == "updated"  # another run: another file
    assert asked == [store.facts_dir(db).name]
    cpp.write_text("namespace at::native {\nvoid g() {}\n\nvoid foo_impl() { g(); }\n}\n")
    assert api.index(small, db, layers=["ops", "cpp"], memo=memo).mode == "updated"
    assert asked == [store.facts_dir(db).name] * 2 and rows(db, "select line from calls") == [(4,)]


def test_a_watcher_takes_the_copy_of_the_db_made_ahead(small, cache, tmp_path, monkeypatch):
    """Note [A copy made ahead]: with a memo and `later`, the DB put in
    place is copied after the line for the next update, which takes that
    copy instead of copying; a DB another run replaced since is copied, and
    the stale copy removed; `release` removes the copy, and another index
    removes that of a process no longer there."""
    from tests.test_incremental import assert_same_tables
    from torchtalk import index as index_mod
    from torchtalk import update as update_mod

    cpp = small / "aten/src/ATen/native/Foo.cpp"
    cpp.write_text("namespace at::native {\nvoid g() {}\nvoid foo_impl() { g(); }\n}\n")
    db, memo, later, copied = tmp_path / "db" / "tree.duckdb", {}, [], []
    real = update_mod.copy_db
    monkeypatch.setattr(update_mod, "copy_db", lambda a, b: (copied.append(b.name), real(a, b))[1])
    ahead = db.with_name(f".{db.name}.next-{os.getpid()}")

    def run(line: int, **kw) -> str:
        cpp.write_text("namespace at::native {\nvoid g() {}\n" + "// a line\n" * (line - 3) + "void foo_impl() { g(); }\n}\n")
        mode = api.index(small, db, layers=["ops", "cpp"], **kw).mode
        assert rows(db, "select line from calls") == [(line,)]
        return mode

    assert run(3, memo=memo, later=later) == "built"
    assert not ahead.exists()
    later.pop()()
    assert ahead.exists() and copied == [ahead.name]
    assert run(4, memo=memo, later=later) == "updated"
    assert copied == [ahead.name] and not ahead.exists()  # the update took the copy: none made
    later.pop()()
    assert ahead.exists() and copied == [ahead.name] * 2
    assert run(5) == "updated"  # another run (no memo): another DB file, copied
    assert copied[2:] == [f".{db.name}.tmp-{os.getpid()}"]
    assert run(6, memo=memo, later=later) == "updated"  # the copy made ahead is stale: copied, and removed
    assert copied[3:] == [f".{db.name}.tmp-{os.getpid()}"] and not ahead.exists()
    later.pop()()
    assert ahead.exists()
    assert_same_tables(db, api.index(small, tmp_path / "cold" / "tree.duckdb", layers=["ops", "cpp"]).db)
    index_mod.release(memo)
    assert not ahead.exists()
    import subprocess

    ended = subprocess.Popen(["true"])
    ended.wait()
    gone = db.with_name(f".{db.name}.next-{ended.pid}")  # a process no longer there
    gone.write_bytes(b"a copy")
    assert run(7) == "updated" and not gone.exists()


def test_an_update_where_no_row_changed(small, cache, tmp_path):
    """A layer whose input changed but whose rows did not (a blank line at
    a .cpp's end) is an update in place with no changed relation: the DB
    is as a cold index of the tree."""
    from tests.test_incremental import assert_same_tables

    cpp = small / "aten/src/ATen/native/Foo.cpp"
    cpp.write_text("namespace at::native {\nvoid g() {}\nvoid foo_impl() { g(); }\n}\n")
    db = tmp_path / "db" / "tree.duckdb"
    assert api.index(small, db, layers=["ops", "cpp"]).mode == "built"
    cpp.write_text(cpp.read_text() + "\n")
    report = api.index(small, db, layers=["ops", "cpp"])
    assert report.mode == "updated" and [lr.action for lr in report.layers if lr.name == "cpp"] == ["ran"]
    assert_same_tables(db, api.index(small, tmp_path / "cold" / "tree.duckdb", layers=["ops", "cpp"]).db)
