"""The code graph's node numbers are a fact the index writes (Note [Node
numbers] in torchtalk/nodes.py), checked on the real PyTorch 2.6.0 tree."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.real_tree


@pytest.fixture(scope="module")
def con(real_con):
    return real_con


def test_every_end_of_a_step_has_a_number(con):
    from torchtalk.datalog import evaluate
    from torchtalk.query.library import load_library

    steps = evaluate(load_library(user=False), con, outputs=["step"])["step"]
    ends = {a for a, *_ in steps} | {b for _, b, *_ in steps}
    numbered = {n for (n,) in con.execute("SELECT name FROM node").fetchall()}
    assert len(ends) > 30_000
    assert sorted(ends - numbered) == []


def test_numbers_are_dense_in_name_order_and_fit_souffle(con):
    """0, 1, 2, ... in the names' byte order: one per name, and below 2³¹
    (Soufflé's `number` is 32-bit)."""
    rows = dict(con.execute("SELECT name, id FROM node").fetchall())
    names = sorted(rows, key=lambda n: n.encode())
    assert [rows[n] for n in names] == list(range(len(names)))
    assert len(names) < 2**31
    gemm = "at::native::cpublas::gemm(TransposeType, TransposeType, int64_t, int64_t, int64_t, double, " \
           "const double*, int64_t, const double*, int64_t, double, double*, int64_t)"
    assert gemm in rows and "at::native::add_stub" in rows  # a stub (StubName) is a node too
    assert "add.Tensor" not in rows  # an op is not


def test_the_facts_dir_holds_the_same_numbers(con, real_db):
    from torchtalk.store import facts_dir

    lines = (facts_dir(real_db) / "node.facts").read_text().splitlines()
    table = con.execute("SELECT name, id FROM node ORDER BY name").fetchall()
    assert [tuple(ln.split("\t")) for ln in lines] == [(n, str(i)) for n, i in table]
