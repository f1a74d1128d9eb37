"""`kill -9` of a cold `torchtalk index --force` (a real subprocess, a real
SIGKILL) at several points: while its workers parse, while it writes the new
DB, just before the swap. Each time the previous DB is left as it was (same
bytes, same tables, same facts dir), no worker outlives it (Note [Workers die
with their parent]), and the next index leaves no temporary file behind.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from tests.reliability._index import (
    ROOT,
    alive,
    children,
    env,
    index_cmd,
    leftovers,
    state,
    wait_for,
)
from torchtalk import api, store

# Runs the CLI with one function of torchtalk.index replaced by a SIGKILL of
# the process itself: a kill at exactly that point (argv[1] names it).
KILL_AT = """
import os, signal, sys
import torchtalk.index as ix
setattr(ix, sys.argv.pop(1), lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL))
from torchtalk.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _start(cmd: list[str]) -> subprocess.Popen:
    return subprocess.Popen(cmd, env=env(), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _kill(proc: subprocess.Popen) -> list[int]:
    """SIGKILL `proc`; -> its children at that moment."""
    kids = children(proc.pid)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return kids


def _no_orphans(kids: list[int]) -> None:
    """Every one of `kids` is gone within half a second (a worker that outlives
    its parent goes on with its chunk of 16 large files: over a second)."""
    deadline = time.monotonic() + 0.5
    while [k for k in kids if alive(k)] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [k for k in kids if alive(k)] == []


def _after(src, db, before) -> None:
    """The previous DB as it was; the next index (a no-op) leaves no temp file."""
    assert state(db) == before
    assert leftovers(db)  # the killed run's, removed by the next one
    assert api.index(src, db, layers=["ops", "cpp", "python"], jobs=2).mode == "current"
    assert leftovers(db) == []
    assert state(db) == before


@pytest.mark.real_tree
def test_killed_while_workers_parse(small_indexed):
    src, db = small_indexed
    before = state(db)
    for sub in ("cpp", "python-summaries"):  # cold: every file is parsed again, by the workers
        shutil.rmtree(db.with_name(db.stem + ".cache") / sub)
    proc = _start(index_cmd(src, db, "--force", "--quiet"))
    kids = wait_for(lambda: len(children(proc.pid)) >= 2 and children(proc.pid), proc=proc)
    time.sleep(0.3)  # the workers are well into their files
    kids = sorted(set(kids) | set(_kill(proc)))
    _no_orphans(kids)
    _after(src, db, before)


@pytest.mark.real_tree
def test_killed_while_writing_the_db(small_indexed):
    src, db = small_indexed
    before = state(db)
    proc = _start(index_cmd(src, db, "--force", "--quiet"))
    tmp_db = db.with_name(f".{db.name}.tmp-{proc.pid}")
    wait_for(tmp_db.exists, proc=proc)
    _no_orphans(_kill(proc))
    _after(src, db, before)


@pytest.mark.real_tree
def test_killed_just_before_the_swap(small_indexed):
    src, db = small_indexed
    before = state(db)
    proc = _start([sys.executable, "-c", KILL_AT, "_swap", *index_cmd(src, db, "--force", "--quiet")[3:]])
    assert proc.wait(timeout=120) == -signal.SIGKILL, proc.stderr.read().decode()
    assert (db.parent / f".{db.name}.tmp-{proc.pid}").is_file()  # the new DB, complete, never swapped in
    _after(src, db, before)


@pytest.mark.real_tree
def test_killed_between_the_db_and_the_facts_swap(small_indexed):
    """The new DB is in place, the facts dir not yet: readers see the new DB
    (the same tables: the tree did not change), and the next index puts the
    matching facts dir in place."""
    src, db = small_indexed
    _, tables, listing = state(db)
    proc = _start([sys.executable, "-c", KILL_AT, "replace_dir", *index_cmd(src, db, "--force", "--quiet")[3:]])
    assert proc.wait(timeout=120) == -signal.SIGKILL, proc.stderr.read().decode()
    assert state(db)[1:] == (tables, listing)
    con = store.open_db(db)
    try:
        new_id = store.read_meta(con)["facts_id"]
    finally:
        con.close()
    api.index(src, db, layers=["ops", "cpp", "python"], jobs=2)
    assert leftovers(db) == []
    assert (store.facts_dir(db) / "facts_id").read_text() == new_id
