"""torchtalk/atomic.py: a reader sees the old file/dir or the new one, never a mix."""

from __future__ import annotations

import pytest

from torchtalk.atomic import atomic_open, link_tree, replace_dir


def test_atomic_open_replaces_on_success_and_keeps_the_old_file_on_error(tmp_path):
    path = tmp_path / "sub" / "out.txt"
    with atomic_open(path, "w") as fh:
        fh.write("one\n")
    assert path.read_text() == "one\n"
    with pytest.raises(RuntimeError), atomic_open(path, "w") as fh:
        fh.write("two\n")
        raise RuntimeError("interrupted")
    assert path.read_text() == "one\n"
    assert sorted(p.name for p in path.parent.iterdir()) == ["out.txt"]  # no temp file left


def test_replace_dir_and_link_tree(tmp_path):
    src = tmp_path / "src"
    (src / "a").mkdir(parents=True)
    (src / "a" / "f.facts").write_text("x\n")
    final = tmp_path / "final"
    (final / "stale").mkdir(parents=True)
    new = tmp_path / ".new"
    link_tree(src, new)
    assert (new / "a" / "f.facts").stat().st_ino == (src / "a" / "f.facts").stat().st_ino  # hard link
    replace_dir(new, final)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["final", "src"]
    assert [p.name for p in final.iterdir()] == ["a"]
    link_tree(tmp_path / "missing", tmp_path / "empty")
    assert list((tmp_path / "empty").iterdir()) == []
