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


def test_numbers_are_md5_buckets_one_per_name_and_fit_souffle(con):
    """A name's number is the first 28 bits of its MD5 times 8, plus its rank
    in byte order among the names of that bucket (Note [Numbers that stay]):
    one per name, below 2³¹ (Soufflé's `number` is 32-bit)."""
    import hashlib

    rows = dict(con.execute("SELECT name, id FROM node").fetchall())
    buckets: dict[int, list[str]] = {}
    for name in rows:
        buckets.setdefault(int(hashlib.md5(name.encode()).hexdigest()[:7], 16), []).append(name)
    assert {n: i for n, i in rows.items()} == {
        n: b * 8 + k for b, names in buckets.items() for k, n in enumerate(sorted(names, key=str.encode))}
    assert len(set(rows.values())) == len(rows) > 50_000 and max(rows.values()) < 2**31
    assert any(len(names) > 1 for names in buckets.values())  # a bucket shared: the ranks are used
    gemm = "at::native::cpublas::gemm(TransposeType, TransposeType, int64_t, int64_t, int64_t, double, " \
           "const double*, int64_t, const double*, int64_t, double, double*, int64_t)"
    assert gemm in rows and "at::native::add_stub" in rows  # a stub (StubName) is a node too
    assert "add.Tensor" not in rows  # an op is not


def test_the_facts_dir_holds_the_same_numbers(con, real_db):
    from torchtalk.store import facts_dir

    lines = (facts_dir(real_db) / "node.facts").read_text().splitlines()
    table = con.execute("SELECT name, id FROM node ORDER BY name").fetchall()
    assert [tuple(ln.split("\t")) for ln in lines] == [(n, str(i)) for n, i in table]
