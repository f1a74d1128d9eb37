"""A DB indexed from another tree (the same files under another path, e.g.
a moved checkout): indexing this tree into it runs every layer on this
tree's files, so that an edit here is seen by the next index. Before, the
layers were carried with the other tree's recorded inputs, and the edit was
missed ("current")."""

from __future__ import annotations

import subprocess

import pytest

from tests.reliability._index import LAYERS
from torchtalk import api, store


@pytest.mark.real_tree
def test_a_db_of_another_tree_is_rebuilt_from_this_one(small_indexed, tmp_path):
    src0, db = small_indexed
    src = tmp_path / "moved"
    subprocess.run(["cp", "-al", str(src0), str(src)], check=True)
    report = api.index(src, db, layers=list(LAYERS), jobs=2)
    assert (report.mode, [lr.action for lr in report.layers]) == ("built", ["ran"] * len(LAYERS))
    edited = src / "torch/nn/functional.py"
    text = edited.read_text()
    edited.unlink()  # a new file: the hard link to the real tree breaks
    edited.write_text(text + "\n\ndef tt_moved():\n    pass\n")
    assert api.index(src, db, layers=list(LAYERS), jobs=2).mode == "updated"
    con = store.open_db(db)
    try:
        assert con.execute("select count(*) from py_def where py = 'torch.nn.functional.tt_moved'").fetchone() == (1,)
    finally:
        con.close()
