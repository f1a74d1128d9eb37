"""The tests layer (extractors.tests): snippets for the edge cases, and exact
facts with file:line on the real PyTorch 2.6.0 tree."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_python_layer import SNIPPETS, DeltaSink, ListSink, make_tree

from extractors.base import ExtractContext
from extractors.python import names

TESTING = "torch/testing/_internal"

FILES = {
    **{k: v for k, v in SNIPPETS.items() if k != "torch/broken.py"},
    f"{TESTING}/__init__.py": "",
    f"{TESTING}/opinfo/__init__.py": "",
    f"{TESTING}/opinfo/core.py": """\
        class OpInfo:
            pass
        class UnaryUfuncInfo(OpInfo):
            pass
    """,
    f"{TESTING}/common_utils.py": """\
        import unittest
        TEST_CUDA = False
        class TestCase(unittest.TestCase):
            pass
        def run_tests():
            pass
        def make_thing():
            return 1
    """,
    f"{TESTING}/common_device_type.py": """\
        class ops:
            def __init__(self, op_list, **kw):
                self.op_list = op_list
    """,
    f"{TESTING}/common_methods_invocations.py": """\
        import torch
        from torch.testing._internal.opinfo.core import OpInfo, UnaryUfuncInfo
        op_db = [
            UnaryUfuncInfo('abs', ref=None),
            OpInfo('softmax', aten_name='softmax', variant_test_name='with_dtype'),
            OpInfo('nn.functional.gelu', aten_name='gelu'),
            OpInfo('linalg.vector_norm'),
            OpInfo('nn.functional.dropout2d'),
            make_something_else(),
        ]
        extra_db = [OpInfo('add'), OpInfo('__radd__'), OpInfo('torch.ops.aten.abs.default')]
        op_db += extra_db
        unary_ufuncs = [op for op in op_db if isinstance(op, UnaryUfuncInfo)]
    """,
    "test/test_things.py": """\
        import torch
        import torch.nn.functional as F
        from torch import nn
        from torch.testing._internal.common_utils import TestCase, run_tests, TEST_CUDA
        from torch.testing._internal.common_device_type import ops
        from torch.testing._internal.common_methods_invocations import op_db, unary_ufuncs

        class TestThings(TestCase):
            @ops(op_db)
            def test_all(self, device, dtype, op):
                pass

            @ops([op for op in op_db if op.name in ('softmax', 'add')])
            def test_some(self, device, dtype, op):
                pass

            @ops(unary_ufuncs)
            def test_unary(self, device, dtype, op):
                pass

            @ops(filter(lambda op: op.supports_out, op_db))
            def test_filtered(self, device, dtype, op):
                pass

            def helper(self, x):
                return torch.abs(x)

            def test_calls(self):
                x = torch.ones(3)
                y = F.gelu(x)
                x.add_(y)
                nn.Linear(3, 3)
                self.helper(x)

            def test_softmax_name_only(self):
                pass

        class NotATest:
            def test_nothing(self):
                pass

        def test_module_level():
            torch.matmul(1, 2)

        if __name__ == "__main__":
            run_tests()
    """,
}


def run(tmp_path: Path) -> ListSink:
    from extractors import tests as layer

    root = make_tree(tmp_path / "tree", FILES)
    sink = ListSink()
    layer.extract(ExtractContext(root, tmp_path / "cache" / "tests", 1), sink)
    return sink


def covers(s: ListSink, test: str) -> set[tuple]:
    return {r[1:] for r in s.get("tests_cover") if r[0] == test}


def test_snippet_tests_and_files(tmp_path: Path) -> None:
    s = run(tmp_path)
    f = "test/test_things.py"
    assert s.get("test") == {
        (f"{f}::TestThings", "class", f, 8),
        (f"{f}::TestThings::test_all", "function", f, 10),
        (f"{f}::TestThings::test_some", "function", f, 14),
        (f"{f}::TestThings::test_unary", "function", f, 18),
        (f"{f}::TestThings::test_filtered", "function", f, 22),
        (f"{f}::TestThings::test_calls", "function", f, 28),
        (f"{f}::TestThings::test_softmax_name_only", "function", f, 35),
        (f"{f}::NotATest", "class", f, 38),  # holds test_* methods
        (f"{f}::NotATest::test_nothing", "function", f, 39),
        (f"{f}::test_module_level", "function", f, 42),
    }
    assert s.get("test_file") == {(f, 2, 8, 47)}
    uses = {r[1] for r in s.get("test_file_uses")}
    assert uses == {
        "torch.testing._internal.common_utils.TestCase",
        "torch.testing._internal.common_utils.run_tests",
        "torch.testing._internal.common_utils.TEST_CUDA",
        "torch.testing._internal.common_device_type.ops",
        "torch.testing._internal.common_methods_invocations.op_db",
        "torch.testing._internal.common_methods_invocations.unary_ufuncs",
    }


def test_snippet_opinfo_entries(tmp_path: Path) -> None:
    s = run(tmp_path)
    f = f"{TESTING}/common_methods_invocations.py"
    assert s.get("opinfo") == {
        ("abs", "abs", "op_db", f, 4),
        ("softmax:with_dtype", "softmax", "op_db", f, 5),
        ("nn.functional.gelu", "gelu", "op_db", f, 6),
        ("linalg.vector_norm", "torch.linalg.vector_norm", "op_db", f, 7),  # no such op in this yaml
        ("nn.functional.dropout2d", "torch.nn.functional.dropout2d", "op_db", f, 8),
        ("add", "add", "extra_db", f, 11),
        ("__radd__", "torch.Tensor.__radd__", "extra_db", f, 11),
        ("torch.ops.aten.abs.default", "abs", "extra_db", f, 11),
    }


def test_snippet_covers(tmp_path: Path) -> None:
    s = run(tmp_path)
    t = "test/test_things.py::TestThings::"
    f = "test/test_things.py"
    everything = {"abs", "softmax", "gelu", "torch.linalg.vector_norm", "torch.nn.functional.dropout2d", "add",
                  "torch.Tensor.__radd__"}
    assert covers(s, t + "test_all") == {(x, "opinfo", f, 9) for x in everything}
    assert covers(s, t + "test_some") == {("softmax", "opinfo", f, 13), ("add", "opinfo", f, 13)}
    assert covers(s, t + "test_unary") == {("abs", "opinfo", f, 17)}
    assert covers(s, t + "test_filtered") == {(x, "opinfo_maybe", f, 21) for x in everything}
    assert covers(s, t + "test_calls") == {
        # torch.ones(3): an input factory, evidence only in a test named for it
        ("torch.nn.functional.gelu", "call", f, 30),  # import torch.nn.functional as F
        ("torch.Tensor.add_", "method", f, 31),  # x.add_ on an untyped receiver
        ("torch.nn.modules.linear.Linear", "call", f, 32),  # from torch import nn; nn.Linear
        ("torch.abs", "call", f, 26),  # through the helper method self.helper
    }
    assert covers(s, t + "test_softmax_name_only") == {("softmax", "name", f, 35)}
    assert covers(s, "test/test_things.py::test_module_level") == {("torch.matmul", "call", f, 43)}


def test_snippet_test_utils(tmp_path: Path) -> None:
    s = run(tmp_path)
    f = f"{TESTING}/common_utils.py"
    utils = {r for r in s.get("test_util") if r[2] == f}
    assert utils == {
        ("torch.testing._internal.common_utils.TestCase", "base_class", f, 3),
        ("torch.testing._internal.common_utils.run_tests", "helper", f, 5),
        ("torch.testing._internal.common_utils.make_thing", "helper", f, 7),
        ("torch.testing._internal.common_utils.TEST_CUDA", "flag", f, 2),
    }
    assert ("torch.testing._internal.common_device_type.ops", "decorator", f"{TESTING}/common_device_type.py", 1) in s.get("test_util")
    assert ("torch.testing._internal.common_methods_invocations.op_db", "opinfo_db",
            f"{TESTING}/common_methods_invocations.py", 3) in s.get("test_util")


def test_a_body_edit_keeps_the_test_files_it_cannot_change(tmp_path: Path, monkeypatch) -> None:
    """Note [Test files kept across a body edit]: run with a memo, a body
    edit of torch/ computes again the test files whose tests call an API
    whose subject it changed, and gives a fresh run's rows; an edit under
    test/ computes every file again."""
    from extractors import tests as layer

    files = {
        **FILES,
        "torch/extra.py": "import torch\ndef helper_api(x):\n    return x\n",
        "test/test_extra.py": """\
            import torch
            import torch.extra
            from torch.testing._internal.common_utils import TestCase
            class TestExtra(TestCase):
                def test_helper(self):
                    torch.extra.helper_api(torch.ones(2))
        """,
    }
    root = make_tree(tmp_path / "tree", files)
    memo: dict = {}
    computed: list[str] = []
    real_file = layer._test_file
    monkeypatch.setattr(layer, "_test_file", lambda m, f, s: (computed.append(s.file), real_file(m, f, s))[1])
    walked: list[tuple] = []  # the class hierarchies walked: a model that adopts the last one's takes its answers
    real_walk = names.Index.subclasses_of
    monkeypatch.setattr(names.Index, "subclasses_of", lambda ix, roots: (walked.append(tuple(roots)), real_walk(ix, roots))[1])
    runs = iter(range(1, 100))
    last = DeltaSink()
    gen = None

    def update(rel: str | None = None, old: str = "", new: str = "") -> dict[str, set[tuple]]:
        nonlocal last, gen
        if rel is not None:
            path = root / rel
            path.write_text(path.read_text().replace(old, new, 1))
        computed.clear()
        walked.clear()
        sink, now = DeltaSink(last), f"g{next(runs)}"
        layer.extract(ExtractContext(root, tmp_path / "cache" / "tests", 1, previous=gen, generation=now, memo=memo), sink)
        asked, walks = list(computed), list(walked)
        fresh = ListSink()
        layer.extract(ExtractContext(root, tmp_path / "fresh" / "tests", 1), fresh)
        assert sink.result() == fresh.rows
        computed[:], walked[:] = asked, walks
        last, gen = sink, memo[layer.KEPT].generation
        return sink.result()

    update()
    assert sorted(computed) == ["test/test_extra.py", "test/test_things.py"] and walked
    row = ("test/test_extra.py::TestExtra::test_helper", "torch.extra.helper_api", "call", "test/test_extra.py", 6)
    rows = update("torch/extra.py", "    return x", "    y = 1\n    return torch.abs(x)")
    assert computed == ["test/test_extra.py"]  # the only file calling the API whose subject moved
    assert walked == []  # the same classes: the last model's hierarchies
    assert row in rows["tests_cover"]
    rows = update("torch/extra.py", "    y = 1\n", "")  # lines move, the subject stays
    assert computed == [] and row in rows["tests_cover"]
    update("test/test_things.py", "    def test_softmax_name_only(self):", "    def test_softmax_name_x(self):")
    assert sorted(computed) == ["test/test_extra.py", "test/test_things.py"]


# ------------------------------------------------------------------ real tree


@pytest.fixture(scope="module")
def real(tree: Path, tmp_path_factory) -> ListSink:
    from extractors import tests as layer

    sink = ListSink()
    # one summary cache per test session, shared with tests/test_python_layer.py
    layer.extract(ExtractContext(tree, tmp_path_factory.getbasetemp() / "pylayers" / "tests", 2), sink)
    return sink


CMI = "torch/testing/_internal/common_methods_invocations.py"


@pytest.mark.real_tree
def test_real_softmax_opinfo(real: ListSink) -> None:
    rows = {r for r in real.get("opinfo") if r[1] == "softmax"}
    assert ("softmax", "softmax", "op_db", CMI, 14548) in rows
    assert ("softmax:with_dtype", "softmax", "op_db", CMI, 14560) in rows
    assert ("_refs.softmax", "softmax", "python_ref_db", CMI, 22671) in rows
    assert ("Linear", "torch.nn.modules.linear.Linear", "module_db",
            "torch/testing/_internal/common_modules.py", 3838) in real.get("opinfo")
    # a factory call: make_mvlgamma_opinfo(variant_test_name='mvlgamma_p_1', ...)
    assert ("mvlgamma:mvlgamma_p_1", "mvlgamma", "op_db", CMI, 16917) in real.get("opinfo")


@pytest.mark.real_tree
def test_real_linalg_test_covers_matmul(real: ListSink) -> None:
    t = "test/test_linalg.py::TestLinalg::test_matmul_small_brute_force_1d_Nd"
    assert (t, "function", "test/test_linalg.py", 4509) in real.get("test")
    got = covers(real, t)
    assert ("matmul", "name", "test/test_linalg.py", 4509) in got
    # the call is in the helper self.check_single_matmul
    assert ("torch.matmul", "call", "test/test_linalg.py", 4470) in got


@pytest.mark.real_tree
def test_real_opinfo_driven_test(real: ListSink) -> None:
    # @ops(op_db, allowed_dtypes=...) covers every op of op_db, softmax among them
    t = "test/test_ops.py::TestCommon::test_multiple_devices"
    got = covers(real, t)
    assert ("softmax", "opinfo", "test/test_ops.py", 252) in got
    assert ("linalg_vector_norm", "opinfo", "test/test_ops.py", 252) in got
    # OpInfo('abs', aliases=('absolute',)): the alias op is covered too
    assert ("absolute", "opinfo_alias", "test/test_ops.py", 252) in got
    assert {how for _, how, _, _ in got} == {"opinfo", "opinfo_alias"}


@pytest.mark.real_tree
def test_real_files_and_utils(real: ListSink) -> None:
    assert ("test/test_linalg.py", 1, 231, 8727) in real.get("test_file")
    assert ("torch.testing._internal.common_device_type.ops", "decorator",
            "torch/testing/_internal/common_device_type.py", 1059) in real.get("test_util")
    assert ("torch.testing._internal.common_utils.TestCase", "base_class",
            "torch/testing/_internal/common_utils.py", 2898) in real.get("test_util")
    assert not real.warnings
