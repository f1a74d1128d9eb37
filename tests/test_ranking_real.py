"""Ranked answers (issue 15, deliverable 4), on the real 2.6.0 tree: tests
named for the subject or calling it, or its own *Info entry, before generic
sweeps and before other suites, each row saying why (`rank`, `why`; Note
[Test ranking] in rules/ranking.dl); `torchtalk affected` by distance plus the
strength of the test's link."""

from __future__ import annotations

import difflib

import pytest

pytestmark = pytest.mark.real_tree

EB = "aten/src/ATen/native/cuda/EmbeddingBag.cu"


@pytest.fixture(scope="module")
def con(real_con):
    return real_con


def _rows(con, text):
    from torchtalk import api

    r = api.query(text, con=con, limit=None)
    return r.records()


def test_tests_of_softmax_start_with_test_nn_and_test_ops(con):
    rows = _rows(con, "tests(softmax.int)")
    assert rows[0]["test"].startswith("test/test_nn.py::") and rows[0]["why"] == "named for it"
    files = [r["test"].split("::")[0] for r in rows]
    # the named and calling tests of the core suites, then sweeps; every other suite after them
    first_other = next(i for i, r in enumerate(rows) if r["why"].endswith("other suite"))
    assert "test/test_ops.py" in files[:first_other]
    assert not any(f.startswith(("test/distributed/", "test/inductor/")) for f in files[:first_other])
    assert [r["rank"] for r in rows] == sorted(r["rank"] for r in rows)
    # one rank per test: a test's best link
    assert len({r["test"] for r in rows}) == len({(r["test"], r["rank"]) for r in rows})


def test_each_rank_says_why(con):
    rows = _rows(con, "tests(softmax.int)")
    by_why = {}
    for r in rows:
        by_why.setdefault(r["why"], set()).add((r["rank"], r["how"]))
    assert by_why["named for it"] == {(0, "name")}
    assert {h for _, h in by_why["calls it"]} <= {"call", "method"}
    assert {h for _, h in by_why["sweep"]} <= {"opinfo", "opinfo_alias", "moduleinfo", "optiminfo"}
    other = {r["test"].split("::")[0] for r in rows if r["why"].endswith("other suite")}
    assert {"test/distributed/_tensor/test_math_ops.py", "test/inductor/test_torchinductor.py"} <= other
    assert not other & {"test/test_nn.py", "test/test_ops.py", "test/nn/test_embedding.py"}


def test_a_function_s_tests_rank_by_distance_plus_link(con):
    rows = _rows(con, "tests(cpublas::gemm, depth=3)")
    assert all(r["rank"] >= r["depth"] for r in rows)
    named = [r for r in rows if r["why"] == "named for it"]
    assert named and all(r["rank"] == r["depth"] for r in named)


def test_embedding_bag_cuda_diff_puts_its_tests_first(real_db, tree):
    from torchtalk import api

    old = (tree / EB).read_text().splitlines(keepends=True)
    at = next(i for i, s in enumerate(old) if s.startswith("_embedding_bag_cuda(const Tensor &weight"))
    new = list(old)
    new[at + 20] = new[at + 20].rstrip("\n") + " // edited\n"
    report = api.affected(diff="".join(difflib.unified_diff(old, new, f"a/{EB}", f"b/{EB}")), db=real_db)
    assert list(report.changes.fns) == ["at::native::_embedding_bag_cuda"]
    names = [t.test.rpartition("::")[2] for t in report.tests]
    assert all(n.lower().startswith("test_embedding_bag") for n in names[:15]), names[:15]
    nn = [i for i, t in enumerate(report.tests)
          if t.test.startswith("test/nn/test_embedding.py::") and "::test_embedding_bag_" in t.test]
    assert len(nn) == 14 and max(nn) < 20
    sweeps = [i for i, t in enumerate(report.tests) if t.why.startswith("sweep")]
    assert sweeps and max(nn) < min(sweeps)
    keys = [(t.rank, t.depth, -t.reached_by, t.test) for t in report.tests]
    assert keys == sorted(keys)


def test_kernels_of_an_op_own_launches_first(con):
    """Note [Kernel ranking]: embedding_bag's own launches (EmbeddingBag.cu, the
    file of its `_embedding_bag` CUDA kernel) before the fill and gpu_kernel
    launches reached through at::X calls and stubs."""
    rows = _rows(con, "kernels(embedding_bag, depth=8)")
    own = [r for r in rows if r["why"] == "the op's own"]
    assert {(r["host"], r["file"]) for r in own} == {
        ("at::native::_embedding_bag_cuda", "aten/src/ATen/native/cuda/EmbeddingBag.cu")}
    assert rows[:len(own)] == own and len(rows) > len(own)
    assert {r["host"] for r in rows[len(own):]} >= {"at::native::fill_kernel_cuda"}
    assert all(r["rank"] == 1 for r in rows[len(own):])
    # a host called from the op's own file: SoftMax.cu's host_softmax → dispatch_softmax_forward
    sm = {r["kernel"].rpartition("::")[2]: r["why"] for r in _rows(con, "kernels(_softmax)")}
    assert sm["softmax_warp_forward"] == "the op's own"
    topk = {r["host"]: r["why"] for r in _rows(con, "kernels(topk)")}
    assert topk["at::native::arange_cuda_out"] == "through a shared helper"
