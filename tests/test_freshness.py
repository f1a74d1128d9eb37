"""Noticing a tree changed since its index, without a watcher (Note [Stale
index]), on a cut-down copy of the real tree's YAML (the ops layer)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.test_mcp_server import _mini_tree
from torchtalk import api, freshness, store
from torchtalk.cli import main

pytestmark = pytest.mark.real_tree
YAML = "aten/src/ATen/native/native_functions.yaml"


@pytest.fixture
def mini(tree, tmp_path) -> tuple[Path, Path]:
    src = _mini_tree(tree, tmp_path / "mini")
    db = tmp_path / "db" / "mini.duckdb"
    api.index(src, db, layers=["ops"])
    return src, db


def _later(path: Path, text: str) -> None:
    """Write `text` to `path` with an mtime surely after the last one."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(text)
    if path.stat().st_mtime_ns <= before:
        os.utime(path, ns=(before + 1_000_000, before + 1_000_000))


def test_an_edit_is_noticed_until_indexed(mini, capsys):
    src, db = mini
    assert freshness.notice(db, str(src)) is None
    yaml = src / YAML
    _later(yaml, yaml.read_text() + "\n- func: tt_fresh(Tensor self) -> Tensor\n")
    assert freshness.notice(db, str(src)) == (
        f"the tree changed since it was indexed ({YAML}): run `torchtalk index --source {src}`, "
        f"or keep `torchtalk watch --source {src}` running")
    assert main(["status", "--db", str(db)]) == 0
    assert f"changed   the tree changed since it was indexed ({YAML})" in capsys.readouterr().out
    assert main(["query", "--db", str(db), "search(tt_fresh)"]) == 0
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == f"torchtalk: note: {freshness.notice(db, str(src))}"
    assert api.index(src, db, layers=["ops"]).mode == "updated"
    assert freshness.notice(db, str(src)) is None


def test_a_new_source_file_is_noticed_a_swap_file_is_not(mini):
    src, db = mini
    native = src / "aten/src/ATen/native"
    time.sleep(0.01)
    (native / ".native_functions.yaml.swp").write_text("vim")
    assert freshness.notice(db, str(src)) is None
    layer = store.facts_dir(db) / "layers" / "ops"
    code = freshness._read(layer)[0]
    assert freshness.quick_stats(layer, code) is not None  # the dir moved, its source files did not
    (native / "tt_new.yaml").write_text("[]\n")
    assert freshness.changed_inputs(store.facts_dir(db)) == [str(native / "tt_new.yaml")]
    assert freshness.quick_stats(layer, code) is None  # a new source file: walk the tree again


def test_a_save_by_rename_keeps_the_quick_path(mini):
    src, db = mini
    import extractors.ops as ops
    from torchtalk.index import input_stats

    yaml = src / YAML
    text = yaml.read_text()
    yaml.unlink()  # as editors and `git checkout` write: a new file under the old name
    _later(yaml, text + "\n")
    layer = store.facts_dir(db) / "layers" / "ops"
    assert freshness.quick_stats(layer, freshness._read(layer)[0]) == input_stats(ops, src)
    assert freshness.changed_inputs(store.facts_dir(db)) == [str(yaml)]


def test_quick_stats_are_the_layers_own(mini):
    src, db = mini
    import extractors.ops as ops
    from torchtalk.index import input_stats

    layer = store.facts_dir(db) / "layers" / "ops"
    code = freshness._read(layer)[0]
    assert freshness.quick_stats(layer, code) == input_stats(ops, src)
    assert freshness.quick_stats(layer, "another code digest") is None


def test_quick_stats_stat_a_file_once_per_run(mini, monkeypatch):
    """Layers of one run share the files they stat (`seen`): the second
    layer's stamp reads the first one's, and gives what its own stats would."""
    src, db = mini
    import extractors.ops as ops
    from torchtalk.index import input_stats

    layer = store.facts_dir(db) / "layers" / "ops"
    code = freshness._read(layer)[0]
    seen: dict = {}
    first = freshness.quick_stats(layer, code, seen)
    assert first == input_stats(ops, src) and len(seen) == len(first) >= 3
    stat = os.stat
    asked: list[str] = []
    monkeypatch.setattr(os, "stat", lambda p, *a, **k: (asked.append(str(p)), stat(p, *a, **k))[1])
    assert freshness.quick_stats(layer, code, seen) == first
    assert [p for p in asked if p in seen] == []  # only its dirs, no file again
    assert freshness.quick_stats(layer, code) == first and set(seen) <= set(asked)


def test_a_failing_stale_note_comes_after_the_answer(mini, monkeypatch, capsys):
    """The note is computed while the query runs (Note [Stale note
    meanwhile]); an error in it is raised once the answer is written."""
    from torchtalk.cli import query as cli_query
    from torchtalk.errors import StoreError

    _src, db = mini

    def broken(_args):
        raise StoreError("cannot read the inputs record")

    monkeypatch.setattr(cli_query, "stale_note", broken)
    assert main(["query", "--db", str(db), "--json", "search(relu)"]) == 1
    out, err = capsys.readouterr()
    assert '"columns"' in out
    assert err == "torchtalk: store error: cannot read the inputs record\n"


def test_the_stale_note_imports_nothing_once_its_modules_are(mini):
    """Note [Stale note meanwhile]: after `note_imports`, the note (run in a
    thread beside the query's own imports) imports no module, in a new
    process (a module two threads import at once can reach one of them
    half made); for a --db and for a --source."""
    import subprocess
    import sys

    src, db = mini
    code = (
        "import sys, argparse\n"
        "from torchtalk.cli import query as q\n"
        "from torchtalk.errors import StoreError\n"
        "q.note_imports()\n"
        "before = set(sys.modules)\n"
        f"for db, source in (({str(db)!r}, None), (None, {str(src)!r})):\n"
        "    try:\n"
        "        q.stale_note(argparse.Namespace(db=db, source=source))\n"
        "    except StoreError:\n"  # that tree is indexed elsewhere: resolve_db says so
        "        pass\n"
        "print(sorted(set(sys.modules) - before))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False,
                         env={**os.environ, "TORCHTALK_CACHE_DIR": str(db.parent.parent / "cache")})
    assert out.stdout.strip() == "[]", out.stdout + out.stderr[-2000:]


def test_an_update_leaves_the_gc_paused_in_the_program_only(mini, monkeypatch, capsys):
    """Note [No GC in an update]: `torchtalk index` as the program exits once
    the update is done, so the GC is not run again over what it made; called
    in a process that goes on (`main`, here), it is."""
    import gc
    import json

    from torchtalk import cli

    src, db = mini
    yaml = src / YAML
    args = ["index", "--source", str(src), "--db", str(db), "--layers", "ops", "--json"]
    for n, program in enumerate((False, True)):
        _later(yaml, yaml.read_text() + f"\n- func: tt_gc{n}(Tensor self) -> Tensor\n")
        monkeypatch.setattr(cli, "AS_PROGRAM", program)
        assert gc.isenabled()
        try:
            assert main(args) == 0
            assert json.loads(capsys.readouterr().out)["mode"] == "updated"
            assert gc.isenabled() is not program
        finally:
            gc.enable()


def test_a_record_is_read_once_per_file(mini, monkeypatch):
    """Note [Records read once]: the record the index wrote (or read) is
    taken again while its file is the same (linked or renamed too), and a
    file written anew is read; either way it is what parsing gives."""
    src, db = mini
    layer = store.facts_dir(db) / "layers" / "ops"
    written = freshness._read(layer)
    freshness._RECORDS.clear()
    parsed = freshness._read(layer)
    assert parsed == written and parsed[1] and parsed[2]  # as written: files and dirs
    reads: list[str] = []
    read_text = Path.read_text
    monkeypatch.setattr(Path, "read_text", lambda p, *a, **k: (reads.append(p.name), read_text(p, *a, **k))[1])
    moved = layer.parent / "moved"
    os.link(layer / freshness.INPUTS, layer.parent / "linked.tsv")
    moved.mkdir()
    os.replace(layer.parent / "linked.tsv", moved / freshness.INPUTS)
    assert freshness._read(moved) == parsed and reads == []
    text = (moved / freshness.INPUTS).read_text()
    (moved / freshness.INPUTS).unlink()
    (moved / freshness.INPUTS).write_text(text.replace("#code\t", "#code\tx"))
    reads.clear()
    assert freshness._read(moved) == ("x" + parsed[0], parsed[1], parsed[2]) and reads == [freshness.INPUTS]
