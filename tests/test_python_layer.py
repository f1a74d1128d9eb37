"""The python layer (extractors.python): hand-written snippets for the edge
cases, and exact facts with file:line on the real PyTorch 2.6.0 tree."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from extractors.base import ExtractContext

NATIVE = """\
- func: gelu(Tensor self, *, str approximate='none') -> Tensor
  python_module: nn

- func: add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor
  variants: function, method

- func: add.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor
  variants: function, method

- func: softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor
  variants: function, method

- func: linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor
  python_module: nn

- func: lstm.input(Tensor input, Tensor[] hx) -> (Tensor, Tensor)

- func: abs(Tensor self) -> Tensor
  variants: function, method

- func: matmul(Tensor self, Tensor other) -> Tensor
  variants: function, method

- func: add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)
  variants: method

- func: abs_(Tensor(a!) self) -> Tensor(a!)
  variants: function, method
  autogen: abs_.out

- func: ones(SymInt[] size, *, ScalarType? dtype=None) -> Tensor

- func: values(Tensor(a) self) -> Tensor(a)
  variants: method
"""


class ListSink:
    """The smallest Sink: keeps rows and warnings."""

    def __init__(self) -> None:
        self.rows: dict[str, set[tuple]] = {}
        self.warnings: list[tuple[str, int, str]] = []

    def add(self, relation: str, *values) -> None:
        self.rows.setdefault(relation, set()).add(values)

    def warn(self, file: str, line: int, message: str) -> None:
        self.warnings.append((file, line, message))

    def progress(self, advance: int = 1, total: int | None = None, what: str = "") -> None:
        pass

    def get(self, relation: str, **where) -> set[tuple]:
        return self.rows.get(relation, set())


class DeltaSink(ListSink):
    """A ListSink that may write deltas from the rows of the `last` run
    (Note [Layer deltas]): a relation it writes none of keeps its rows."""

    def __init__(self, last: DeltaSink | None = None) -> None:
        super().__init__()
        self.last, self.kept = last.result() if last else {}, False

    def deltas_from_previous(self) -> None:
        self.kept = True

    def delta(self, relation: str, removed, added) -> None:
        rows = set(self.last.get(relation, set()))
        assert set(removed) <= rows and len(set(removed)) == len(removed)
        self.rows[relation] = (rows - set(removed)) | set(added)

    def result(self) -> dict[str, set[tuple]]:
        return {**self.last, **self.rows} if self.kept else self.rows


def make_tree(root: Path, files: dict[str, str]) -> Path:
    (root / "aten/src/ATen/native").mkdir(parents=True)
    (root / "aten/src/ATen/native/native_functions.yaml").write_text(NATIVE)
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
    return root


def run(tmp_path: Path, files: dict[str, str], jobs: int = 1) -> ListSink:
    from extractors import python as layer

    root = make_tree(tmp_path / "tree", files)
    sink = ListSink()
    layer.extract(ExtractContext(root, tmp_path / "cache" / "python", jobs), sink)
    return sink


SNIPPETS = {
    "torch/__init__.py": """\
        from torch._tensor import Tensor
        from torch.functional import *
    """,
    "torch/_tensor.py": """\
        import torch
        class Tensor(torch._C.TensorBase):
            def __rsub__(self, other):
                return _C._VariableFunctions.rsub(self, other)
            def twice(self):
                return self.add(self)
    """,
    "torch/functional.py": """\
        import torch
        from torch import _VF
        def my_lstm(x, hx):
            return _VF.lstm(x, hx)
    """,
    "torch/nn/__init__.py": """\
        from .modules import *
        from . import functional
    """,
    "torch/nn/modules/__init__.py": """\
        from .module import Module
        from .linear import Linear
    """,
    "torch/nn/modules/module.py": """\
        class Module:
            def __call__(self, *a):
                return self.forward(*a)
    """,
    "torch/nn/modules/linear.py": """\
        import torch.nn.functional as F
        from .module import Module
        class Linear(Module):
            def forward(self, x):
                return F.linear(x, self.weight, self.bias)
        class Tiny(Linear):
            def forward(self, x):
                y = super().forward(x)
                return y.softmax(0)
    """,
    "torch/nn/functional.py": """\
        import torch
        from torch._C import _add_docstr
        gelu = _add_docstr(
            torch._C._nn.gelu,
            "gelu(input) -> Tensor")
        linear = torch._C._nn.linear
        def add_twice(a, b):
            fn = torch.add
            return fn(fn(a, b), b)
        def _private(a):
            return torch.ops.aten.abs.default(a)
        from torch._jit_internal import boolean_dispatch
        def _pool(x):
            return torch.abs(x)
        def pool_with_indices(x):
            return torch.matmul(x, x)
        pool = boolean_dispatch(arg_name="return_indices", default=False,
                                if_true=pool_with_indices, if_false=_pool)
    """,
    "torch/_decomp/decompositions.py": """\
        import torch
        from torch._decomp import register_decomposition
        aten = torch._ops.ops.aten
        @register_decomposition([aten.add.Tensor, aten.softmax])
        def add_or_softmax(a, b):
            return a
        @register_decomposition(aten.gelu.default)
        def gelu(a):
            return a
        def later(a):
            return a
        register_decomposition(aten.abs)(later)
        def register_inplace(aten_op, outplace_op):
            pass
        register_inplace(aten.add_, aten.add)
    """,
    "torch/_refs/__init__.py": """\
        def _make_inplace(fn):
            return fn
        def abs(a):
            return a
        abs_ = _make_inplace(abs)
    """,
    "torch/_meta_registrations.py": """\
        from torch._ops import ops
        from torch._meta_registrations_util import register_meta
        @register_meta(ops.aten.linear)
        def meta_linear(x):
            return x
    """,
    "torch/masked/__init__.py": "from torch.masked._ops import amax\n",
    "torch/masked/_ops.py": "import torch\ndef amax(x):\n    return torch.abs(x)\n",
    "torch/broken.py": "def f(:\n    pass\n",
}


def test_snippets_bindings_and_apis(tmp_path: Path) -> None:
    s = run(tmp_path, SNIPPETS)
    binds = s.get("binds")
    assert ("torch.nn.functional.gelu", "torch._C._nn.gelu", "alias", "torch/nn/functional.py", 3) in binds
    assert ("torch.nn.functional.linear", "torch._C._nn.linear", "alias", "torch/nn/functional.py", 6) in binds
    # `from torch import _VF`: _VF.X is torch._C._VariableFunctions.X
    assert ("torch.functional.my_lstm", "torch._C._VariableFunctions.lstm", "wrapper", "torch/functional.py", 4) in binds
    api = s.get("py_api")
    assert ("torch.nn.functional.gelu", "gelu", "alias", "torch/nn/functional.py", 3) in api
    assert ("torch.functional.my_lstm", "lstm.input", "wrapper", "torch/functional.py", 4) in api
    # a local alias of torch.add, one row per overload of the name
    assert {r[1] for r in api if r[0] == "torch.nn.functional.add_twice"} == {"add.Tensor", "add.Scalar"}
    # a private module's function re-exported by a public package is an API by its public name
    assert ("torch.masked.amax", "abs", "wrapper", "torch/masked/_ops.py", 3) in api
    assert not [r for r in api if r[0] == "torch.masked._ops.amax"]
    # private functions are no API, but their call edges are kept
    assert not [r for r in api if r[0] == "torch.nn.functional._private"]
    assert ("torch.nn.functional._private", "torch.ops.aten.abs.default", "torch/nn/functional.py", 11) in s.get("py_calls")
    # boolean_dispatch(if_true=..., if_false=...) binds both
    f = "torch/nn/functional.py"
    assert {r for r in binds if r[0] == "torch.nn.functional.pool"} == {
        ("torch.nn.functional.pool", "torch.nn.functional.pool_with_indices", "alias", f, 17),
        ("torch.nn.functional.pool", "torch.nn.functional._pool", "alias", f, 17),
    }
    assert {r[1:3] for r in api if r[0] == "torch.nn.functional.pool"} == {("abs", "wrapper"), ("matmul", "wrapper")}
    # leaves from the yaml
    assert ("torch._C._nn.gelu", "gelu", "python_module", "aten/src/ATen/native/native_functions.yaml", 1) in api
    assert ("torch.Tensor.add", "add.Scalar", "variant", "aten/src/ATen/native/native_functions.yaml", 7) in api
    # torch._tensor.Tensor is named torch.Tensor; self.add on a Tensor is the method leaf
    assert ("torch.Tensor.twice", "add.Tensor", "wrapper", "torch/_tensor.py", 6) in api


def test_snippets_modules_and_methods(tmp_path: Path) -> None:
    s = run(tmp_path, SNIPPETS)
    assert s.get("module_class") == {
        ("torch.nn.modules.module.Module", "nn", "torch/nn/modules/module.py", 1),
        ("torch.nn.modules.linear.Linear", "nn", "torch/nn/modules/linear.py", 3),
        ("torch.nn.modules.linear.Tiny", "nn", "torch/nn/modules/linear.py", 6),
    }
    assert ("torch.nn.modules.linear.Tiny", "torch.nn.modules.linear.Linear", "torch/nn/modules/linear.py", 6) in s.get("class_base")
    calls = s.get("py_calls")
    # `import torch.nn.functional as F`
    assert ("torch.nn.modules.linear.Linear.forward", "torch.nn.functional.linear", "torch/nn/modules/linear.py", 5) in calls
    # super().forward resolves through the base; y.softmax is a Tensor-method guess
    assert ("torch.nn.modules.linear.Tiny.forward", "torch.nn.modules.linear.Linear.forward", "torch/nn/modules/linear.py", 8) in calls
    assert ("torch.nn.modules.linear.Tiny.forward", "torch.Tensor.softmax", "torch/nn/modules/linear.py", 9) in calls
    api = s.get("py_api")
    assert ("torch.nn.modules.linear.Linear.forward", "linear", "wrapper", "torch/nn/modules/linear.py", 5) in api
    assert ("torch.nn.modules.linear.Tiny.forward", "softmax.int", "method_guess", "torch/nn/modules/linear.py", 9) in api
    assert ("torch.nn.modules.module.Module.__call__", "torch.nn.modules.module.Module.forward", "torch/nn/modules/module.py", 3) not in calls
    assert ("torch.nn.modules.linear.Linear.forward", "method", "torch/nn/modules/linear.py", 4) in s.get("py_def")
    assert ("torch.nn.functional.gelu", "alias", "torch/nn/functional.py", 3) in s.get("py_def")


def test_snippets_decompositions(tmp_path: Path) -> None:
    s = run(tmp_path, SNIPPETS)
    f = "torch/_decomp/decompositions.py"
    assert s.get("decomp") == {
        ("add.Tensor", "torch._decomp.decompositions.add_or_softmax", f, 4),
        ("softmax.int", "torch._decomp.decompositions.add_or_softmax", f, 4),  # a packet: every overload
        ("gelu", "torch._decomp.decompositions.gelu", f, 7),  # .default is the empty overload
        ("abs", "torch._decomp.decompositions.later", f, 12),  # decorator applied by hand
        ("add_.Tensor", "torch._decomp.decompositions.register_inplace", f, 15),
        # abs_ = _make_inplace(abs): the abs_ packet, with its autogen'd abs_.out
        ("abs_", "torch._refs.abs_", "torch/_refs/__init__.py", 5),
        ("abs_.out", "torch._refs.abs_", "torch/_refs/__init__.py", 5),
    }
    assert s.get("py_op_impl") == {
        ("torch._meta_registrations.meta_linear", "linear", "register_meta", "torch/_meta_registrations.py", 3)
    }


# Note [Receiver types]: calls on receivers the code types (sets, dicts, strings, annotated
# parameters and attributes, submodules), and functions chosen through local variables.
TYPED = {
    **SNIPPETS,
    "torch/nn/modules/block.py": """\
        from typing import Dict, Optional, Set, cast
        import torch
        from torch import Tensor
        from .module import Module
        from .linear import Linear
        class Block(Module):
            _hooks: Dict[int, int]
            def __init__(self, act):
                self.lin = Linear()
                self.seen = set()
                self.act = act
                self.norm = None
            def forward(self, x: Tensor, memo: Optional[Set[int]] = None, *args, **kwargs):
                if memo is None:
                    memo = set()
                memo.add(x)
                self.seen.add(x)
                self._hooks.values()
                kwargs.values()
                names = {}
                names.values()
                y = self.lin(x)
                self.act(y)
                return x.abs()
            def guess(self, z):
                cast(Tensor, z).matmul(z)
                return z.add(z)
            def chained(self, z):
                return self.lin.forward(z).softmax(0)
    """,
    "torch/nn/pick.py": """\
        import torch
        def _one(x):
            return torch.abs(x)
        def _two(x):
            return torch.matmul(x, x)
        def pick(x, fast):
            if fast:
                func = _one
            else:
                func = _two
            return func(x)
        def with_default(x, impl=_one):
            return impl(x)
        def shadowed(x, _two):
            return _two(x)
        def made(x):
            y = torch.ones(3)
            return y.add(x)
    """,
}


def test_typed_receivers_are_no_ops(tmp_path: Path) -> None:
    """A method call on a set, dict or string (literal, constructor, annotation,
    **kwargs, class attribute) is no edge; an untyped receiver stays a guess."""
    s = run(tmp_path, TYPED)
    f, cls = "torch/nn/modules/block.py", "torch.nn.modules.block.Block"
    calls = s.get("py_calls")
    fwd = {r[1:] for r in calls if r[0] == f"{cls}.forward"}
    assert not [r for r in fwd if r[0] in ("torch.Tensor.add", "torch.Tensor.values")]
    # a Tensor-annotated parameter: the method itself, not a guess
    assert ("torch.Tensor.abs", f, 24) in fwd
    api = s.get("py_api")
    assert ({r[1:] for r in api if r[0] == f"{cls}.forward"}
            == {("abs", "wrapper", f, 24), ("linear", "wrapper", f, 22)})
    # `z` has no type: x.add(...) stays a guess, and says so; cast(Tensor, z) is typed
    assert {r[1:] for r in api if r[0] == f"{cls}.guess"} == {
        ("matmul", "wrapper", f, 26), ("add.Tensor", "method_guess", f, 27), ("add.Scalar", "method_guess", f, 27),
    }


def test_submodule_call_is_its_forward(tmp_path: Path) -> None:
    """`self.lin(x)` with `self.lin = Linear()` calls Linear.forward (Module.__call__ → forward);
    an attribute bound to an untyped parameter (`self.act = act`) gives no edge."""
    s = run(tmp_path, TYPED)
    f, cls = "torch/nn/modules/block.py", "torch.nn.modules.block.Block"
    calls = s.get("py_calls")
    assert (f"{cls}.forward", "torch.nn.modules.linear.Linear.forward", f, 22) in calls
    assert {r[1] for r in calls if r[0] == f"{cls}.forward" and r[3] == 23} == set()
    # a method of a typed attribute: self.lin.forward(z); its result is untyped
    assert (f"{cls}.chained", "torch.nn.modules.linear.Linear.forward", f, 29) in calls
    assert (f"{cls}.chained", "torch.Tensor.softmax", f, 29) in calls
    assert ("torch.nn.modules.block.Block", "torch.nn.modules.module.Module", f, 6) in s.get("class_base")


def test_functions_chosen_through_variables(tmp_path: Path) -> None:
    """Each function a local variable (or a parameter's default) is bound to is a callee
    at the call; a parameter shadows the module-level function of the same name."""
    s = run(tmp_path, TYPED)
    f = "torch/nn/pick.py"
    calls = s.get("py_calls")
    assert {r for r in calls if r[0] == "torch.nn.pick.pick"} == {
        ("torch.nn.pick.pick", "torch.nn.pick._one", f, 11),
        ("torch.nn.pick.pick", "torch.nn.pick._two", f, 11),
    }
    assert {r[1:3] for r in s.get("py_api") if r[0] == "torch.nn.pick.pick"} == {("abs", "wrapper"), ("matmul", "wrapper")}
    assert ("torch.nn.pick.with_default", "torch.nn.pick._one", f, 13) in calls
    assert not [r for r in calls if r[0] == "torch.nn.pick.shadowed"]


def test_op_results_are_tensors(tmp_path: Path) -> None:
    """`y = torch.ones(3)`: an op whose schema returns one Tensor types `y`."""
    s = run(tmp_path, TYPED)
    f = "torch/nn/pick.py"
    assert {r[1:] for r in s.get("py_api") if r[0] == "torch.nn.pick.made"} == {
        ("ones", "wrapper", f, 17), ("add.Tensor", "wrapper", f, 18), ("add.Scalar", "wrapper", f, 18),
    }


def test_no_duplicate_api_rows(tmp_path: Path) -> None:
    """A def written several times (`@overload` stubs, then the body) is one API."""
    from extractors import python as layer

    root = make_tree(tmp_path / "tree", {
        "torch/__init__.py": "",
        "torch/over.py": """\
            import torch
            from typing import overload
            @overload
            def f(x: int) -> int: ...
            @overload
            def f(x: str) -> str: ...
            def f(x):
                return torch.abs(x)
        """,
    })
    rows: list[tuple] = []
    sink = ListSink()
    sink.add = lambda rel, *v: rows.append((rel, *v))  # keeps duplicates
    layer.extract(ExtractContext(root, tmp_path / "cache" / "python", 1), sink)
    api = [r[1:] for r in rows if r[0] == "py_api" and r[1] == "torch.over.f"]
    assert api == [("torch.over.f", "abs", "wrapper", "torch/over.py", 8)]


def test_parse_failure_is_a_warning(tmp_path: Path) -> None:
    s = run(tmp_path, SNIPPETS)
    assert s.warnings == [("torch/broken.py", 1, "Python file does not parse: invalid syntax")]
    assert not [r for r in s.get("py_def") if r[2] == "torch/broken.py"]


def test_cache_and_jobs_give_the_same_rows(tmp_path: Path) -> None:
    first = run(tmp_path / "a", SNIPPETS, jobs=2)
    from extractors import python as layer

    again = ListSink()  # same tree and cache: every summary comes from the cache
    layer.extract(ExtractContext(tmp_path / "a" / "tree", tmp_path / "a" / "cache" / "python", 1), again)
    assert again.rows == first.rows
    cached = list((tmp_path / "a" / "cache" / "python-summaries").rglob("*.pkl"))
    assert len(cached) == len(SNIPPETS)


# ------------------------------------------------------------------ real tree


@pytest.fixture(scope="module")
def real(tree: Path, tmp_path_factory) -> ListSink:
    from extractors import python as layer

    sink = ListSink()
    # one summary cache per test session, shared with tests/test_testsx_layer.py
    cache = tmp_path_factory.getbasetemp() / "pylayers" / "python"
    layer.extract(ExtractContext(tree, cache, 2), sink)
    return sink


@pytest.mark.real_tree
def test_real_gelu_reaches_aten_gelu(real: ListSink) -> None:
    assert ("torch.nn.functional.gelu", "gelu", "alias", "torch/nn/functional.py", 1987) in real.get("py_api")
    assert ("torch.nn.functional.gelu", "torch._C._nn.gelu", "alias", "torch/nn/functional.py", 1987) in real.get("binds")
    assert (
        "torch._C._nn.gelu", "gelu", "python_module", "aten/src/ATen/native/native_functions.yaml", 5099
    ) in real.get("py_api")


@pytest.mark.real_tree
def test_real_linear_module(real: ListSink) -> None:
    assert ("torch.nn.modules.linear.Linear", "nn", "torch/nn/modules/linear.py", 50) in real.get("module_class")
    assert (
        "torch.nn.modules.linear.Linear.forward", "torch.nn.functional.linear", "torch/nn/modules/linear.py", 125
    ) in real.get("py_calls")
    assert ("torch.nn.functional.linear", "torch._C._nn.linear", "alias", "torch/nn/functional.py", 2309) in real.get("binds")
    assert (
        "torch.nn.modules.linear.Linear.forward", "linear", "wrapper", "torch/nn/modules/linear.py", 125
    ) in real.get("py_api")


@pytest.mark.real_tree
def test_real_max_pool_boolean_dispatch(real: ListSink) -> None:
    f = "torch/nn/functional.py"
    assert {r for r in real.get("binds") if r[0] == "torch.nn.functional.max_pool2d"} == {
        ("torch.nn.functional.max_pool2d", "torch.nn.functional.max_pool2d_with_indices", "alias", f, 833),
        ("torch.nn.functional.max_pool2d", "torch.nn.functional._max_pool2d", "alias", f, 833),
    }
    ops = {r[1] for r in real.get("py_api") if r[0] == "torch.nn.modules.pooling.MaxPool2d.forward"}
    assert {"max_pool2d", "max_pool2d_with_indices"} <= ops


@pytest.mark.real_tree
def test_real_adam(real: ListSink) -> None:
    assert ("torch.optim.adam.Adam", "optim", "torch/optim/adam.py", 34) in real.get("module_class")
    assert ("torch.optim.adam.Adam", "torch.optim.optimizer.Optimizer", "torch/optim/adam.py", 34) in real.get("class_base")
    ops = {r[1] for r in real.get("py_api") if r[0] == "torch.optim.adam.Adam.step"}
    # foreach path (a local alias `func = _multi_tensor_adam`) and the single-tensor path
    assert {"_foreach_addcdiv_.Scalar", "_foreach_lerp_.Scalar", "addcdiv_"} <= ops


@pytest.mark.real_tree
def test_real_decompositions(real: ListSink) -> None:
    decomp = real.get("decomp")
    assert ("gelu", "torch._refs.nn.functional.gelu", "torch/_refs/nn/functional/__init__.py", 1042) in decomp
    # the packet aten.addmm gives every overload
    assert {r[0] for r in decomp if r[1] == "torch._decomp.decompositions.addmm"} == {"addmm", "addmm.out"}
    # register_inplace(aten.addmm_, aten.addmm) and sin_ = _make_inplace(sin)
    assert ("addmm_", "torch._decomp.decompositions.register_inplace", "torch/_decomp/decompositions.py", 5195) in decomp
    assert ("sin_", "torch._refs.sin_", "torch/_refs/__init__.py", 6410) in decomp
    assert not [r for r in decomp if r[1].startswith("torch._inductor.lowering.")]
    # a torch._refs unary reference registers the op of its own name
    assert {r for r in decomp if r[1] == "torch._refs.abs"} == {
        ("abs", "torch._refs.abs", "torch/_refs/__init__.py", 549),
        ("abs.out", "torch._refs.abs", "torch/_refs/__init__.py", 549),
    }


@pytest.mark.real_tree
def test_real_linalg_and_tensor(real: ListSink) -> None:
    api = real.get("py_api")
    assert ("torch.linalg.vector_norm", "linalg_vector_norm", "alias", "torch/linalg/__init__.py", 1401) in api
    assert {r[1] for r in api if r[0] == "torch.matmul"} == {"matmul", "matmul.out"}
    assert not real.warnings


@pytest.mark.real_tree
def test_real_registrations_made_by_helper_functions(real: ListSink) -> None:
    """`alias_copy = _make_copy_from_view(aten.alias)` registers a decomposition of the
    aten.alias_copy packet (autogen'd .out included); `_create_binary_float_meta_func(aten.x)`
    applies @register_meta(x) in its body."""
    refs = "torch/_refs/__init__.py"
    assert {r for r in real.get("decomp") if r[0].startswith("alias_copy")} == {
        ("alias_copy", "torch._refs.alias_copy", refs, 6429),
        ("alias_copy.out", "torch._refs.alias_copy", refs, 6429),
    }
    meta = "torch/_meta_registrations.py"
    got = {r[1] for r in real.get("py_op_impl")
           if r[2] == "register_meta" and r[3] == meta and r[4] == 6638}
    assert got == {"special_chebyshev_polynomial_t", "special_chebyshev_polynomial_t.out",
                   "special_chebyshev_polynomial_t.x_scalar", "special_chebyshev_polynomial_t.x_scalar_out",
                   "special_chebyshev_polynomial_t.n_scalar", "special_chebyshev_polynomial_t.n_scalar_out"}


def test_summaries_are_kept_in_the_process_by_cache_dir_and_content(tmp_path: Path, monkeypatch) -> None:
    """Note [Summaries kept in the process]: a second call with the same cache
    dir reads no cached summary and parses nothing but the edited file; a
    call with another cache dir fills that one."""
    from extractors.python import corpus

    root = tmp_path / "tree"
    (root / "torch").mkdir(parents=True)
    (root / "torch" / "a.py").write_text("def f():\n    g()\n")
    (root / "torch" / "b.py").write_text("def g():\n    pass\n")
    files = ["torch/a.py", "torch/b.py"]
    first = corpus.summarize_tree(root, files, tmp_path / "c1")
    loads, parsed = [], []
    real_load, real_work = corpus._load, corpus._work
    monkeypatch.setattr(corpus, "_load", lambda *a: loads.append(a) or real_load(*a))
    monkeypatch.setattr(corpus, "_work", lambda a: parsed.append(a[2]) or real_work(a))
    again = corpus.summarize_tree(root, files, tmp_path / "c1")
    assert again == first and again[0] is first[0] and not loads and not parsed
    (root / "torch" / "a.py").write_text("def f():\n    g()\n    h()\n")
    edited = corpus.summarize_tree(root, files, tmp_path / "c1")
    assert parsed == ["torch/a.py"] and edited[1] is first[1]
    assert (first[0].lines, edited[0].lines) == (3, 4)
    corpus.summarize_tree(root, files, tmp_path / "c2")
    assert len(list((tmp_path / "c2").rglob("*.pkl"))) == 2


def test_summaries_are_kept_for_the_last_cache_dirs_only(tmp_path: Path) -> None:
    """Note [Summaries kept in the process]: a process that indexes many trees
    keeps the summaries of the last KEPT_DIRS cache dirs, not of all."""
    from extractors.python import corpus

    root = tmp_path / "tree"
    (root / "torch").mkdir(parents=True)
    (root / "torch" / "a.py").write_text("def f():\n    pass\n")
    dirs = [str(tmp_path / f"c{i}") for i in range(corpus.KEPT_DIRS + 2)]
    for d in dirs:
        corpus.summarize_tree(root, ["torch/a.py"], Path(d))
    assert list(corpus._KEPT)[-corpus.KEPT_DIRS:] == dirs[-corpus.KEPT_DIRS:]
    assert not set(dirs[:2]) & set(corpus._KEPT) and len(corpus._KEPT) == corpus.KEPT_DIRS


def test_a_file_whose_identity_stays_is_not_read_again(tmp_path: Path, monkeypatch) -> None:
    """Note [Files stat'ed, not read]: a file of the same inode, size and
    mtime as when last read takes its key unread; another size, another
    mtime or another tree reads it again."""
    import os

    from extractors.python import corpus

    tree = make_tree(tmp_path / "tree", {"torch/a.py": "def f():\n    pass\n", "torch/b.py": "x = 1\n"})
    cache = tmp_path / "cache"
    read: list[str] = []
    key = corpus._key
    monkeypatch.setattr(corpus, "_key", lambda rel, data: (read.append(rel), key(rel, data))[1])

    def names(root: Path = tree) -> list[str]:
        read.clear()
        return [d.qual for s in corpus.summarize_tree(root, ["torch/a.py", "torch/b.py"], cache) for d in s.defs]

    assert names() == ["f"] and read == ["torch/a.py", "torch/b.py"]
    assert names() == ["f"] and read == []
    a = tree / "torch" / "a.py"
    st = a.stat()
    a.write_text("def g():\n    pass\n")  # the same size
    os.utime(a, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert names() == ["g"] and read == ["torch/a.py"]
    a.write_text("def gg():\n    pass\n")
    assert names() == ["gg"] and read == ["torch/a.py"]
    other = make_tree(tmp_path / "other", {"torch/a.py": "def f():\n    pass\n", "torch/b.py": "x = 1\n"})
    assert names(other) == ["f"] and read == ["torch/a.py", "torch/b.py"]


def test_a_body_edit_computes_only_its_files_edges_again(tmp_path: Path, monkeypatch) -> None:
    """Note [A model kept across a body edit]: run with a memo, a body edit
    (a call added, lines moved) resolves again the calls of the edited
    file's functions only, and gives the rows of a fresh run; a new def
    (another interface) resolves every call again."""
    from extractors import python as layer
    from extractors.python import names
    from extractors.python.model import Model

    root = make_tree(tmp_path / "tree", SNIPPETS)
    memo: dict = {}
    last = DeltaSink()
    layer.extract(ExtractContext(root, tmp_path / "cache" / "python", 1, generation="g0", memo=memo), last)
    computed: list[str] = []
    compute = Model._compute_edges
    monkeypatch.setattr(Model, "_compute_edges", lambda self, caller: (computed.append(caller), compute(self, caller))[1])
    made: list[str] = []  # the modules made (Note [Modules kept]): those of the summaries not kept
    module = names._Module.__init__
    monkeypatch.setattr(names._Module, "__init__", lambda self, s: (made.append(s.file), module(self, s))[1])
    runs = iter(range(1, 100))

    def edit(rel: str, old: str, new: str) -> ListSink:
        nonlocal last
        path = root / rel
        path.write_text(path.read_text().replace(old, new, 1))
        computed.clear()
        made.clear()
        sink = DeltaSink(last)
        gen = memo[layer.ROWS][0]
        layer.extract(ExtractContext(root, tmp_path / "cache" / "python", 1, previous=gen,
                                     generation=f"g{next(runs)}", memo=memo), sink)
        assert made == [rel]
        asked = list(computed)
        fresh = ListSink()
        layer.extract(ExtractContext(root, tmp_path / "fresh" / "python", 1), fresh)
        # written as deltas from the last run's rows (Note [Layer deltas]): the rows of a fresh run
        assert sink.kept and sink.result() == fresh.rows
        computed[:] = asked
        last, sink.rows = sink, sink.result()
        return sink

    sink = edit("torch/_tensor.py", "        return self.add(self)", "        x = 1\n        return self.abs()")
    assert computed and {c.rsplit(".", 1)[0] for c in computed} == {"torch._tensor.Tensor"}
    assert ("torch.Tensor.twice", "abs", "wrapper", "torch/_tensor.py", 7) in sink.rows["py_api"]
    assert ("torch.Tensor.twice", "add.Tensor", "wrapper", "torch/_tensor.py", 6) not in sink.rows["py_api"]
    edit("torch/_tensor.py", "    def twice(self):", "    def thrice(self):\n        pass\n    def twice(self):")
    assert "torch.nn.functional.gelu" in computed  # another interface: every edge again


def test_a_yaml_edit_computes_only_the_edges_it_may_move_again(tmp_path: Path, monkeypatch) -> None:
    """Note [A model kept across a YAML edit]: run with a memo, a new op in
    native_functions.yaml resolves again the calls that name its bindings
    or methods only, and gives the rows of a fresh run; so does its removal."""
    from extractors import python as layer
    from extractors.python.model import Model

    probe = """\
        import torch
        def by_name(x):
            return torch.tt_new(x)
        def by_method(x):
            return x.tt_new()
        def untouched(x):
            return torch.abs(x)
    """
    root = make_tree(tmp_path / "tree", {**SNIPPETS, "torch/probe.py": probe})
    memo: dict = {}
    layer.extract(ExtractContext(root, tmp_path / "cache" / "python", 1, memo=memo), ListSink())
    computed: list[str] = []
    compute = Model._compute_edges
    monkeypatch.setattr(Model, "_compute_edges", lambda self, caller: (computed.append(caller), compute(self, caller))[1])
    yaml = root / "aten/src/ATen/native/native_functions.yaml"

    def rows_after(text: str) -> dict[str, set[tuple]]:
        yaml.write_text(text)
        computed.clear()
        sink = ListSink()
        layer.extract(ExtractContext(root, tmp_path / "cache" / "python", 1, memo=memo), sink)
        asked = list(computed)
        fresh = ListSink()
        layer.extract(ExtractContext(root, tmp_path / "fresh" / "python", 1), fresh)
        assert sink.rows == fresh.rows
        computed[:] = asked
        return sink.rows

    rows = rows_after(NATIVE + "\n- func: tt_new(Tensor self) -> Tensor\n  variants: function, method\n")
    assert set(computed) == {"torch.probe.by_name", "torch.probe.by_method"}
    assert ("torch.probe.by_name", "tt_new", "wrapper", "torch/probe.py", 3) in rows["py_api"]
    assert ("torch.probe.by_method", "tt_new", "method_guess", "torch/probe.py", 5) in rows["py_api"]
    assert ("torch.tt_new", "tt_new", "variant", "aten/src/ATen/native/native_functions.yaml", 36) in rows["py_api"]
    rows = rows_after(NATIVE)
    assert set(computed) == {"torch.probe.by_name", "torch.probe.by_method"}
    assert not {r for r in rows["py_api"] if r[1] == "tt_new"}


@pytest.mark.real_tree
def test_an_update_takes_its_files_from_the_inputs_the_index_stated(tree: Path) -> None:
    """A layer run takes its `.py` files from the stats of its inputs the
    index took for its fingerprint (ExtractContext.stats), not a walk of the
    tree: the same files, for the python and the tests layers."""
    from extractors import python as layer
    from extractors import tests as tests_layer
    from extractors.python.corpus import input_files, python_files
    from torchtalk.index import input_stats

    for mod in (layer, tests_layer):
        files = input_files(tree, mod.TOPS, input_stats(mod, tree))
        assert files == python_files(tree, mod.TOPS) and len(files) > 1900
        assert all(f.endswith(".py") for f in files)
