"""The rule library gives identical answers on the embedded engine (DuckDB,
with the relations stored at index time) and on the real Soufflé (which
computes everything from the fact tables), on the real PyTorch 2.6.0 tree."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.real_tree, pytest.mark.souffle]

QUERIES = [
    "kernels(_softmax)",
    "kernels(topk)",
    "impact(cpublas::gemm, depth=3)",
    "trace(add.Tensor)",
    "paths(softmax_warp_forward -> python)",
    "paths(torch.softmax -> cuda)",
    "affected(cpublas::gemm)",
    "callers(gemm)",
    "callees(matmul)",
    "tests(softmax)",
    "search(softmax)",
    "coverage(MPS)",
]


@pytest.fixture(scope="module")
def con(real_db):
    from torchtalk import api

    c = api.open_db(db=real_db)
    yield c
    c.close()


@pytest.mark.parametrize("text", QUERIES)
def test_souffle_gives_the_same_rows(con, text, souffle_bin):
    from torchtalk import api

    embedded = api.query(text, con=con, all_matches=True, limit=None)
    souffle = api.query(text, con=con, all_matches=True, limit=None, engine="souffle")
    assert embedded.total > 0
    assert souffle.rows == embedded.rows
