"""The listings MCP and the CLI answer besides the walks are named queries
(rules/lookups.dl) on the real 2.6.0 tree: exact rows, checked against the
fact tables they count and against the source lines."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.real_tree


@pytest.fixture(scope="module")
def con(real_con):
    return real_con


def rows(con, text):
    from torchtalk import api

    return api.query(text, con=con, limit=None).records()


def test_module_categories_count_the_classes(con):
    got = {r["category"]: r["classes"] for r in rows(con, "module_category()")}
    want = dict(con.execute("SELECT category, count(*) FROM module_class GROUP BY category").fetchall())
    assert got == want and {"nn", "optim", "lr_scheduler"} <= set(got)


def test_a_kernel_is_defined_then_launched(con, tree):
    got = rows(con, "kernel_launches(softmax_warp_forward)")
    kernel = "(anonymous:aten/src/ATen/native/cuda/PersistentSoftmax.cuh)::softmax_warp_forward"
    assert got[0] == {"kernel": kernel, "launched_by": "", "how": "defined",
                      "file": "aten/src/ATen/native/cuda/PersistentSoftmax.cuh", "line": 68}
    lines = (tree / "aten/src/ATen/native/cuda/PersistentSoftmax.cuh").read_text().splitlines()
    assert "softmax_warp_forward" in lines[67]
    launches = got[1:]
    assert launches and {r["launched_by"] for r in launches} == {"dispatch_softmax_forward"}
    # each launch is an invocation of the file's LAUNCH_SOFTMAX_WARP_FORWARD macro, whose body launches it
    assert all(lines[r["line"] - 1].strip().startswith("LAUNCH_SOFTMAX_WARP_FORWARD(") for r in launches)
    start = next(i for i, t in enumerate(lines) if t.strip().startswith("#define LAUNCH_SOFTMAX_WARP_FORWARD("))
    body = "\n".join(lines[start:start + 6])
    assert "softmax_warp_forward<" in body and "<<<" in body


def test_test_file_subjects_count_its_links(con):
    got = {r["subject"]: r["links"] for r in rows(con, 'test_file_subjects("test/test_linalg.py")')}
    want = dict(con.execute("SELECT subject, count(*) FROM (SELECT DISTINCT * FROM tests_cover) "
                            "WHERE file = 'test/test_linalg.py' GROUP BY subject").fetchall())
    assert got == want and got["addmm"] > 0


@pytest.mark.parametrize("query", ["matmul out", "softmax backward", "conv2d", "linalg", "dropout", "nn module",
                                   "index_select cuda", "sparse coo add", "quantized", "test_is_mutated_tensor",
                                   "dict copy", "zzzqqq"])
def test_similar_tests_by_token_are_the_sql_ones(con, real_db, query):
    """Note [Tests by token]: a server's connection answers find_similar_tests
    from token maps, a one-shot one by SQL: the same rows in the same order."""
    from torchtalk import lookup, store

    by_sql = lookup.find_similar_tests(con, query, limit=100000)
    mem = store.open_db(real_db)
    try:
        mem.engine = "memory"
        by_token = lookup.find_similar_tests(mem, query, limit=100000)
        assert "tests-by-token" in mem.memo
    finally:
        mem.close()
    assert (by_token.rows, by_token.total) == (by_sql.rows, by_sql.total)
    if query == "matmul out":
        multiarray = "test/torch_np/numpy_tests/core/test_multiarray.py"  # both words in its name, and it covers matmul
        assert by_sql.rows[0] == (f"{multiarray}::TestMethods::test_matmul_out", 5, multiarray, 2655)
    if query == "zzzqqq":  # no test has the token
        assert by_sql.total == 0
