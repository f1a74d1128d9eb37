"""Incremental indexing (issue 9) on a copy of the real tree: after editing one
.cpp, re-indexing re-extracts only what changed, and the resulting database
equals a full, cold re-index of the same tree, table by table.

The copy is made of hard links (fast, no extra disk); an edited file is
written anew, which breaks its link, so the real tree is never modified.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from torchtalk import api
from torchtalk.store import open_db

EDITED = "aten/src/ATen/native/CPUBlas.cpp"
PROBE = "\nnamespace at { namespace native {\nvoid torchtalk_probe(const Tensor& t) { cpublas::gemm_stub(kCPU); t.mm(t); }\n}}\n"
# A second definition of a name another, unchanged file calls: its call, resolved
# by the name being unique, becomes ambiguous (Note [Incremental resolution]).
TWIN = "namespace torchtalk_probe_ns { void setConvolutionParams() {} }\n"
# (at::native::setConvolutionParams has a cudnn and a miopen overload: ten arguments pick the cudnn one)
SORT_CALL = ("PackedConvWeightCudnn::apply_impl_helper",
             "at::native::setConvolutionParams(ConvolutionParams*, const Tensor&, const Tensor&, IntArrayRef,"
             " IntArrayRef, IntArrayRef, int64_t, bool, bool, MemoryFormat)",
             "aten/src/ATen/native/quantized/cudnn/Conv.cpp", 102)


def _tables(db: Path) -> dict[str, list[tuple]]:
    """Every fact table and every stored relation (derived.*) of `db`, sorted rows."""
    con = open_db(db)
    try:
        names = [r[0] for r in con.execute("select relation from torchtalk_relations").fetchall()]
        out = {n: sorted(con.execute(f'select * from "{n}"').fetchall()) for n in names}
        stored = [r[0] for r in con.execute("select relation from derived.catalog").fetchall()]
        out.update({f"derived.{n}": sorted(con.execute(f'select * from derived."{n}"').fetchall()) for n in stored})
        out["derived.catalog"] = sorted(con.execute("select * from derived.catalog").fetchall())
        out["torchtalk_relations"] = sorted(con.execute("select * from torchtalk_relations").fetchall())
        return out
    finally:
        con.close()


def assert_same_tables(db: Path, cold: Path) -> None:
    """`db` equals the cold index `cold`, table by table."""
    got, want = _tables(db), _tables(cold)
    assert got.keys() == want.keys()
    differ = [rel for rel in want if got[rel] != want[rel]]  # all of them: the first may only echo another
    if differ:  # what differs, not two dumps of 300K rows
        lines = [f"tables differing from the cold index: {', '.join(differ)}"]
        for rel in differ:
            extra, missing = set(got[rel]) - set(want[rel]), set(want[rel]) - set(got[rel])
            lines.append(f"{rel}: {len(got[rel])} rows, cold {len(want[rel])}; "
                         f"{len(extra)} only here, {len(missing)} only in the cold index")
            lines += [f"  + {r}" for r in sorted(extra)[:10]] + [f"  - {r}" for r in sorted(missing)[:10]]
        pytest.fail("\n".join(lines), pytrace=False)


def _calls(db: Path, call: tuple) -> list[tuple]:
    con = open_db(db)
    try:
        return con.execute("select caller, callee, file, line from calls where caller = ? and callee = ? "
                           "and file = ? and line = ?", list(call)).fetchall()
    finally:
        con.close()


@pytest.fixture
def tree_copy(tree, tmp_path) -> Path:
    dst = tmp_path / "pytorch"
    subprocess.run(["cp", "-al", str(tree.resolve()), str(dst)], check=True)
    return dst


@pytest.mark.real_tree
def test_one_cpp_edit_reindexes_to_what_a_full_index_gives(tree_copy, tmp_path):
    layers = ["ops", "cpp"]
    db = tmp_path / "inc" / "tree.duckdb"
    first = api.index(tree_copy, db, layers=layers, jobs=2)
    assert [lr.action for lr in first.layers] == ["ran", "ran"]

    again = api.index(tree_copy, db, layers=layers, jobs=2)
    assert again.up_to_date and [lr.action for lr in again.layers] == ["carried", "carried"]
    assert _calls(db, SORT_CALL) == [SORT_CALL]

    path = tree_copy / EDITED
    text = path.read_text()
    path.unlink()  # break the hard link: the real tree keeps its file
    path.write_text(text + PROBE + TWIN)
    probe_line = len((text + PROBE).splitlines()) - 1
    inc = api.index(tree_copy, db, layers=layers, jobs=2)
    assert [(lr.name, lr.action) for lr in inc.layers] == [("ops", "carried"), ("cpp", "ran")]

    full_db = tmp_path / "full" / "tree.duckdb"  # its own, empty cache: a cold run
    api.index(tree_copy, full_db, layers=layers, jobs=2, force=True)
    assert_same_tables(db, full_db)
    assert _calls(db, SORT_CALL) == []  # Conv.cpp was not edited, yet its call changed

    con = open_db(db)
    try:
        assert con.execute("select fn, stub, line from stub_call where file = ? and fn like '%probe%'",
                           [EDITED]).fetchall() == [("at::native::torchtalk_probe", "at::native::cpublas::gemm_stub",
                                                     probe_line)]
        assert con.execute("select name, line from calls_op where caller = 'at::native::torchtalk_probe'"
                           ).fetchall() == [("mm", probe_line)]
    finally:
        con.close()
    shutil.rmtree(tree_copy, ignore_errors=True)
