"""Tests linked to what they test (issue 15, deliverable 6), on the real
2.6.0 tree: OpInfo names (`nn.functional.X`) and `aliases=`, ModuleInfo and
module tests (by call or by name), optimizer tests (`@optims(optim_db)`), each
a tests_cover row saying how it links, and the `tests`/`affected` answers that
use them (Note [Test cover subjects] in extractors/tests/cover.py)."""

from __future__ import annotations

import difflib
import re

import pytest

pytestmark = pytest.mark.real_tree

CMI = "torch/testing/_internal/common_methods_invocations.py"


@pytest.fixture(scope="module")
def con(real_con):
    return real_con


def _tests(con, text):
    from torchtalk import api

    r = api.query(text, con=con, limit=None)
    return r.records()


def _line(tree, rel, line):
    return (tree / rel).read_text().splitlines()[line - 1]


@pytest.mark.parametrize("name,op", [
    ("nn.functional.embedding", "embedding"), ("nn.functional.layer_norm", "layer_norm"),
    ("nn.functional.group_norm", "group_norm"), ("nn.functional.max_pool2d", "max_pool2d"),
])
def test_nn_functional_opinfos_cover_their_ops(con, tree, name, op):
    (file, line), = con.execute("select file, line from opinfo where name = ?", [name]).fetchall()
    assert re.search(rf"""OpInfo\(\s*['"]{name}['"]""", "".join((tree / file).read_text().splitlines()[line - 1:line + 1]))
    rows = [r for r in _tests(con, f"tests({op})") if r["test"] == "test/test_ops.py::TestCommon::test_out"]
    assert rows and {(r["how"], r["via"]) for r in rows} == {("opinfo", op)}
    assert "@ops(" in _line(tree, "test/test_ops.py", rows[0]["line"])


def test_cross_entropy_opinfo_covers_its_python_api(con):
    # no op is named cross_entropy: the subject is the Python API, which py_api maps to ops
    assert con.execute("select subject from opinfo where name = 'nn.functional.cross_entropy'").fetchall() == [
        ("torch.nn.functional.cross_entropy",)]
    rows = [r for r in _tests(con, "tests(cross_entropy_loss)") if r["how"] == "opinfo"]
    assert {r["via"] for r in rows} == {"torch.nn.functional.cross_entropy"}


def test_opinfo_aliases_cover_the_alias_ops(con, tree):
    # OpInfo('abs', aliases=('absolute',)) and UnaryUfuncInfo('sigmoid', aliases=('special.expit', ...))
    rows = con.execute("select name, subject, line from opinfo where name in ('abs', 'sigmoid') "
                       "and file = ? and db = 'op_db' order by subject", [CMI]).fetchall()
    assert [(n, s) for n, s, _ in rows] == [("abs", "abs"), ("abs", "absolute"),
                                            ("sigmoid", "sigmoid"), ("sigmoid", "special_expit")]
    assert "aliases=('absolute', )" in "".join((tree / CMI).read_text().splitlines()[rows[0][2]:rows[0][2] + 3])
    hit = [r for r in _tests(con, "tests(special_expit)") if r["test"] == "test/test_ops.py::TestCommon::test_out"]
    assert {r["how"] for r in hit} == {"opinfo_alias"}


def test_module_tests_reach_the_ops_through_the_module(con, tree):
    eb = {r["test"]: r for r in _tests(con, "tests(embedding_bag)")}
    t = eb["test/nn/test_embedding.py::TestEmbeddingNNDeviceType::test_EmbeddingBag_per_sample_weights_failures"]
    assert (t["how"], t["via"], t["why"]) == ("call", "torch.nn.modules.sparse.EmbeddingBag", "through a caller")
    assert "nn.EmbeddingBag(" in _line(tree, t["file"], t["line"])
    ln = {r["test"]: r for r in _tests(con, "tests(layer_norm)")}
    assert ln["test/test_nn.py::TestNNDeviceType::test_LayerNorm_general"]["via"] == (
        "torch.nn.modules.normalization.LayerNorm")
    # a ModuleInfo sweep: @modules(module_db) runs LayerNorm's forward
    fwd = [r for r in _tests(con, "tests(layer_norm)") if r["test"] == "test/test_modules.py::TestModule::test_forward"]
    assert ("moduleinfo", "torch.nn.modules.normalization.LayerNorm", "sweep") in {
        (r["how"], r["via"], r["why"]) for r in fwd}
    gn = {r["test"] for r in _tests(con, "tests(group_norm)")}
    assert "test/test_nn.py::TestNNDeviceType::test_GroupNorm_general" in gn


def test_module_runs_its_own_or_inherited_methods(con):
    rows = set(con.execute("select cls, method, py from module_runs where cls in "
                           "('torch.nn.modules.linear.LazyLinear', 'torch.optim.adamw.AdamW')").fetchall())
    assert ("torch.nn.modules.linear.LazyLinear", "forward", "torch.nn.modules.linear.Linear.forward") in rows
    assert ("torch.optim.adamw.AdamW", "step", "torch.optim.adamw.AdamW.step") in rows
    # the root classes' placeholders are no one's (Module.forward, Optimizer.step)
    assert not con.execute("select * from module_runs where py in ('torch.optim.optimizer.Optimizer.step', "
                           "'torch.nn.modules.module.Module.forward')").fetchall()


def test_a_test_named_for_a_module_class(con):
    rows = con.execute("select subject, how, line from tests_cover where test = "
                       "'test/nn/test_convolution.py::TestConvolutionNN::test_Conv2d_inconsistent_types'").fetchall()
    assert ("torch.nn.modules.conv.Conv2d", "name", 453) in rows


def test_optim_db_tests_cover_adamw(con, tree):
    rows = con.execute("select test, line from tests_cover where subject = 'torch.optim.adamw.AdamW' "
                       "and how = 'optiminfo' and test like 'test/test_optim.py::%'").fetchall()
    assert len(rows) >= 20
    assert all(_line(tree, "test/test_optim.py", ln).lstrip().startswith("@optims(") for _, ln in rows)


def test_a_diff_in_adamw_lists_the_adamw_tests_first(real_db, tree, con):
    from torchtalk import api

    rel = "torch/optim/adamw.py"
    old = (tree / rel).read_text().splitlines(keepends=True)
    at = next(i for i, s in enumerate(old) if s.startswith("def _single_tensor_adamw("))
    new = list(old)
    new[at + 20] = new[at + 20].rstrip("\n") + "  # edited\n"
    report = api.affected(diff="".join(difflib.unified_diff(old, new, f"a/{rel}", f"b/{rel}")), db=real_db)
    assert report.changes.pys == {"torch.optim.adamw._single_tensor_adamw": (rel, at + 1)}
    adamw = {t for (t,) in con.execute("select test from tests_cover where subject = 'torch.optim.adamw.AdamW'"
                                       " and (test like 'test/test_%' or test like 'test/optim/%')").fetchall()}
    # every test of the core suites (top-level files, test/optim) that covers AdamW comes first
    assert {t.test for t in report.tests[:len(adamw)]} == adamw
    hit = report.tests[0]
    # _single_tensor_adamw <- adamw <- AdamW.step: the class is 3 steps up
    assert [s.what.split(",")[0] for s in hit.chain][:2] == [
        "changed Python torch.optim.adamw._single_tensor_adamw", "class torch.optim.adamw.AdamW"]
