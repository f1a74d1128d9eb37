"""A full disk during `torchtalk index --force`: the DB lives on a small tmpfs
the test mounts, with room for the previous index and `headroom` more. The
user gets one line naming the directory, exit 1, the previous DB as it was,
and no temporary file left."""

from __future__ import annotations

import subprocess

import pytest

from tests.conftest import _missing
from tests.reliability._index import ROOT, copy_db, env, index_cmd, leftovers, state

MB = 1 << 20


@pytest.fixture
def small_fs(small_indexed, tmp_path, request):
    """(the sub-tree, its DB copied onto a tmpfs with `request.param` MB free)."""
    src, db = small_indexed
    used = sum(p.stat().st_size for p in db.parent.rglob("*") if p.is_file())
    mnt = tmp_path / "fs"
    mnt.mkdir()
    size = used + request.param * MB
    got = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)],
                         capture_output=True, text=True)
    if got.returncode != 0:
        _missing(f"cannot mount a tmpfs: {got.stderr.strip()}")
    try:
        yield src, copy_db(db, mnt)
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=True)


@pytest.mark.real_tree
@pytest.mark.parametrize("small_fs", [1, 10], ids=["facts-dont-fit", "db-doesnt-fit"], indirect=True)
def test_a_full_disk_is_one_line(small_fs):
    src, db = small_fs
    before = state(db)
    got = subprocess.run(index_cmd(src, db, "--force", "--quiet"), env=env(), cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert (got.returncode, got.stdout) == (1, "")
    assert got.stderr == (f"torchtalk: store error: no space left on device in {db.parent}: the index of "
                          f"{db.name} was not written, the previous one is kept "
                          "(free some space, or index into another filesystem with --db)\n")
    assert state(db) == before
    assert leftovers(db) == []
