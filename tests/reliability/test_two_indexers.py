"""Two `torchtalk index` processes on one tree and DB: the second waits for
the first (the flock of torchtalk/index.py `_locked`), saying so in one line
on stderr, and the DB is never torn: both exit 0 and it ends as a cold index
of the tree."""

from __future__ import annotations

import subprocess

import pytest

from tests.reliability._index import ROOT, env, index_cmd, leftovers, state, wait_for


@pytest.mark.real_tree
def test_the_second_indexer_waits(small_indexed):
    src, db = small_indexed
    _, tables, listing = state(db)
    lock = db.with_name(db.name + ".lock")
    first = subprocess.Popen(index_cmd(src, db, "--force", "--quiet"), env=env(), cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: lock.is_file() and lock.read_text() == str(first.pid), proc=first)
    second = subprocess.Popen(index_cmd(src, db, "--force", "--quiet"), env=env(), cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out1, err1 = first.communicate(timeout=120)
    out2, err2 = second.communicate(timeout=120)
    assert (first.returncode, err1) == (0, "")
    assert (second.returncode, err2) == (0, f"torchtalk: waiting for the index of {db} held by pid {first.pid}\n")
    assert out1.startswith(f"{db}: ") and out2.startswith(f"{db}: ")
    assert state(db)[1:] == (tables, listing)
    assert leftovers(db) == []
