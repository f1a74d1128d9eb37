"""Note [Parsed ahead] in torchtalk/index.py: a build starts a process that
fills the per-file caches of its later layers while an earlier one runs,
and stops it, leaving no half-written file, before those layers run."""

from __future__ import annotations

import os
import sys
import time
import types
from pathlib import Path

from extractors.python import corpus
from extractors.python.summary import summarize
from torchtalk import index
from torchtalk.atomic import atomic_open


def _plan(name: str, mod, rerun=True) -> tuple:
    return (types.SimpleNamespace(name=name), mod, ("fp", []), rerun)


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    (root / "torch" / "nn").mkdir(parents=True)
    (root / "torch" / "__init__.py").write_text("from torch.nn import f\n")
    (root / "torch" / "nn" / "__init__.py").write_text("def f(x):\n    return g(x)\n\ndef g(x):\n    return x\n")
    return root


def test_a_build_parses_the_python_files_ahead_while_an_earlier_layer_runs(tmp_path):
    import extractors.ops as ops
    import extractors.python as python

    root = _tree(tmp_path)
    db = tmp_path / "db" / "t.duckdb"
    db.parent.mkdir()
    ahead = index._parse_ahead(types.SimpleNamespace(root=root), db, [_plan("ops", ops), _plan("python", python)], 2)
    assert ahead.proc is not None
    ahead.proc.join(60)
    assert ahead.proc.exitcode == 0
    cache = corpus.shared_cache_dir(db.with_name("t.cache") / "python")
    for rel in ("torch/__init__.py", "torch/nn/__init__.py"):
        data = (root / rel).read_bytes()
        assert corpus._load(cache, corpus._key(rel, data)) == summarize(data, rel)
    ahead.stop()
    assert ahead.proc is None


def test_nothing_is_parsed_ahead_without_a_layer_running_before_or_a_core_for_it(tmp_path):
    import extractors.ops as ops
    import extractors.python as python

    src, db = types.SimpleNamespace(root=_tree(tmp_path)), tmp_path / "t.duckdb"
    assert index._parse_ahead(src, db, [_plan("ops", ops, False), _plan("python", python)], 2).proc is None
    assert index._parse_ahead(src, db, [_plan("ops", ops), _plan("python", python)], 1).proc is None
    assert index._parse_ahead(src, db, [_plan("python", python), _plan("ops", ops)], 2).proc is None


def test_stopping_it_mid_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    """The child unwinds on SIGTERM: atomic_open removes what it was writing."""
    import extractors.ops as ops

    target = tmp_path / "cache" / "entry.pkl"

    def prefetch(ctx):
        with atomic_open(target) as fh:
            fh.write(b"half")
            fh.flush()
            time.sleep(600)

    slow = types.ModuleType("tt_slow_prefetch")
    slow.prefetch = prefetch
    monkeypatch.setitem(sys.modules, "tt_slow_prefetch", slow)
    ahead = index._parse_ahead(types.SimpleNamespace(root=_tree(tmp_path)), tmp_path / "t.duckdb",
                               [_plan("ops", ops), _plan("slow", slow)], 2)
    deadline = time.monotonic() + 30
    while not list(target.parent.glob(".tmp-*")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list(target.parent.glob(".tmp-*")), "the prefetch never started writing"
    pid = ahead.proc.pid
    ahead.stop()
    assert not list(target.parent.glob(".tmp-*")) and not target.exists()
    try:
        os.kill(pid, 0)
        alive = True
    except ProcessLookupError:
        alive = False
    assert not alive
