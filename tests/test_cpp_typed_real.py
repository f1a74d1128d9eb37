"""Op calls by type on the real PyTorch 2.6.0 tree (Note [Op call resolution],
Note [Tensor operators], Note [Who can call ops], Note [Aliases]).

Each test asserts the right `calls_op` / `calls` rows with file:line and the
wrong ones absent. The tree is scanned once per session (cached by content
hash, shared with tests/test_cpp_real.py).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from extractors import cpp
from extractors.base import ExtractContext

pytestmark = pytest.mark.real_tree

LA = "aten/src/ATen/native/LinearAlgebra.cpp"


@pytest.fixture(scope="session")
def real(tree: Path) -> cpp.Run:
    from torchtalk.paths import cache_dir

    return cpp.run(ExtractContext(root=tree, cache_dir=cache_dir() / "tests" / "cpp-fast", jobs=2))


def at(run: cpp.Run, relation: str, file: str, line: int) -> set[tuple]:
    """The rows of `relation` at file:line, without those two columns."""
    col = 3 if relation in ("calls", "calls_op", "launches") else 2
    return {r[:col - 1] + r[col + 1:] for r in run.rows.get(relation, []) if r[col - 1] == file and r[col] == line}


def test_every_op_call_says_how_it_is_known(real: cpp.Run):
    vias = {r[4] for r in real.rows["calls_op"]}
    assert vias == {"qualified", "typed", "guess"}
    # LinearAlgebra.cpp:2028 `has_out ? at::dot_out(out, tensor1, tensor2) : tensor1.dot(tensor2)`
    assert {("at::native::(static:aten/src/ATen/native/LinearAlgebra.cpp)::_matmul_impl", "dot", "qualified"),
            ("at::native::(static:aten/src/ATen/native/LinearAlgebra.cpp)::_matmul_impl", "dot", "typed")} <= at(real, "calls_op", LA, 2028)


def test_c10_calls_no_op(real: cpp.Run, tree: Path):
    """c10 cannot see ATen's API: `sizes_[i + 1].max(1)` on a SymInt (TensorImpl.cpp:929) is no aten::max."""
    f = "c10/core/TensorImpl.cpp"
    assert "sizes_[i + 1].max(1)" in (tree / f).read_text().splitlines()[928]
    assert not [r for r in real.rows["calls_op"] if r[2].startswith("c10/")]
    assert at(real, "calls_op", f, 929) == set()
    assert len([r for r in real.rows["calls"] if r[2].startswith("c10/")]) > 5000  # c10 itself is scanned


def test_methods_of_non_tensor_types_are_no_ops(real: cpp.Run, tree: Path):
    """LinearAlgebra.cpp:2110 `tensor2.sizes().data()`: sizes() returns an IntArrayRef
    (an alias of c10::ArrayRef<int64_t>), whose data() is no op."""
    assert "tensor2.sizes().data()" in (tree / LA).read_text().splitlines()[2109]
    assert at(real, "calls_op", LA, 2110) == set()
    assert at(real, "calls", LA, 2110) == {("at::native::(static:aten/src/ATen/native/LinearAlgebra.cpp)::_matmul_impl", "at::TensorBase::sizes", "type"),
                                           ("at::native::(static:aten/src/ATen/native/LinearAlgebra.cpp)::_matmul_impl", "c10::ArrayRef::data", "type")}
    # `.size(0)` on a Tensor is TensorBase::size(int64_t) (TensorBody.h: `using TensorBase::size;`), no op
    nll = "aten/src/ATen/native/LossNLL.cpp"
    rows = [r for r in real.rows["calls_op"] if r[2] == nll and r[1] == "size"]
    assert rows == []


def test_generated_tensor_methods_hide_tensorbase(real: cpp.Run):
    """AffineGridGenerator.cpp:41 `base_grid.select(-1, 2).fill_(1)` where `auto
    base_grid = at::empty(...)`: Tensor::fill_ (generated) hides TensorBase::fill_."""
    f = "aten/src/ATen/native/AffineGridGenerator.cpp"
    assert at(real, "calls_op", f, 41) == {("at::native::(static:aten/src/ATen/native/AffineGridGenerator.cpp)::make_base_grid_4D", "select", "typed"),
                                           ("at::native::(static:aten/src/ATen/native/AffineGridGenerator.cpp)::make_base_grid_4D", "fill_", "typed")}
    assert at(real, "calls", f, 41) == set()


def test_tensor_operators(real: cpp.Run, tree: Path):
    act, norm = "aten/src/ATen/native/Activation.cpp", "aten/src/ATen/native/Normalization.cpp"
    # `grad_output * (input_sigmoid * (1 + input * (1 - input_sigmoid)))`: `1 - t` is
    # Scalar - Tensor (empty_like(t).fill_(1).sub_(t)), `1 + t` add, the rest mul
    assert "grad_output * (input_sigmoid * (1 + input * (1 - input_sigmoid)))" in (
        tree / act).read_text().splitlines()[554]
    fn = "at::native::math_silu_backward"
    assert at(real, "calls_op", act, 555) == {(fn, op, "typed") for op in ("mul", "add", "empty_like", "fill_", "sub_")}
    # `grad_input = grad_output * weight[0];`: t[i] is select
    fn = "at::native::_batch_norm_impl_index_backward"
    assert at(real, "calls_op", norm, 655) == {(fn, "mul", "typed"), (fn, "select", "typed")}
    # `(grad_output * input).sum(dims)`: a Tensor operator's result is a Tensor
    assert at(real, "calls_op", norm, 652) == {(fn, "mul", "typed"), (fn, "sum", "typed")}
    # an operator on operands of no Tensor type is never an op
    assert not [r for r in real.rows["calls_op"] if r[2] == "c10/util/ArrayRef.h"]


def test_operator_table_follows_the_headers(tree: Path):
    """Note [Tensor operators] is what TensorOperators.h and TensorBody.h define."""
    from extractors.cpp import aten
    from extractors.cpp.macros import balanced_args

    ops_h = (tree / "aten/src/ATen/TensorOperators.h").read_bytes().replace(b"\\\n", b" ")
    body = ops_h[ops_h.index(b"#define AT_FORALL_BINARY_OPS(_)"):ops_h.index(b"#define DEFINE_OPERATOR")]
    table = {}
    for m in re.finditer(rb"\b_\(", body):
        (sym, first, second), _end = balanced_args(body, m.end() - 1)
        table[sym.decode()] = (tuple(re.findall(r"\.(\w+)\(", first.decode())),
                               tuple(re.findall(r"[.:](\w+)\(", second.decode())))
    assert table == aten.BINARY_OPS
    body = (tree / "aten/src/ATen/templates/TensorBody.h").read_text()
    for sym, ops in [*aten.UNARY_OPS.items(), *aten.COMPOUND_OPS.items()]:
        m = re.search(r"Tensor&? operator" + re.escape(sym) + r"\((?:const (?:Tensor|Scalar) ?& ?\w+)?\) (?:const )?\{\s*return (\w+)\(", body)
        assert m and (m.group(1),) == ops, sym
    assert re.search(r"Tensor operator\[\]\(int64_t index\) const \{\s*return select\(0, index\);", body)
    assert re.search(r"operator=\(const Scalar &v\) && \{\s*return fill_\(v\);", body)
    assert re.search(r"operator=\(const Tensor &rhs\) && \{\s*return copy_\(rhs\);", body)


def test_type_aliases_type_receivers(real: cpp.Run):
    """ForeachOpsKernels.cpp:358 `FOREACH_BINARY_OP_LIST(div)`: `tensors1[i].div(tensors2[i])`
    on a TensorList (an alias of ArrayRef<Tensor>) is Tensor::div; `tensors1.size()` is none."""
    f = "aten/src/ATen/native/ForeachOpsKernels.cpp"
    assert at(real, "calls_op", f, 358) == {("at::native::foreach_tensor_div_list_kernel_slow", "div", "typed"),
                                            ("at::native::foreach_tensor_div_list_kernel_slow_", "div_", "typed")}


def test_unqualified_generated_functions_in_namespace_at(real: cpp.Run, tree: Path):
    """Histogram.cpp:213 `aminmax(input)` inside namespace at::native, where no
    function of the tree is named aminmax: C++ finds the generated at::aminmax."""
    f = "aten/src/ATen/native/Histogram.cpp"
    assert "aminmax(" in (tree / f).read_text().splitlines()[212]
    assert ("at::native::(anonymous:aten/src/ATen/native/Histogram.cpp)::histc_select_outer_bin_edges", "aminmax", "qualified") in at(
        real, "calls_op", f, 213)


def _line(tree: Path, f: str, line: int) -> str:
    return (tree / f).read_text().splitlines()[line - 1]


def test_generated_api_beside_the_trees_functions(real: cpp.Run, tree: Path):
    """Note [Generated API beside the tree's]: a call naming op X that also
    resolves to a tree function X may call the generated at::X."""
    loss = "aten/src/ATen/native/Loss.cpp"  # NumericUtils.h's at::exp(T) takes one argument too: either
    assert "at::exp(target) * (target - input)" in _line(tree, loss, 246)
    assert ("at::native::kl_div", "exp", "guess") in at(real, "calls_op", loss, 246)
    assert at(real, "calls", loss, 246) == {("at::native::kl_div", "at::exp(T)", "overload"),
                                            ("at::native::kl_div", "at::exp(double)", "overload")}
    red = "aten/src/ATen/native/ReduceOps.cpp"  # 3 arguments; Functions.h's at::var(self, int dim) takes 2
    assert "return at::var(" in _line(tree, red, 2038)
    assert at(real, "calls_op", red, 2038) == {("at::native::var(const Tensor&, bool)", "var", "qualified")}
    assert at(real, "calls", red, 2038) == set()
    # unqualified inside namespace at, where only a global `transpose` of the tree has the name
    inv = "aten/src/ATen/FunctionalInverses.cpp"
    assert "return transpose(mutated_view, dim0, dim1);" in _line(tree, inv, 296)
    assert at(real, "calls_op", inv, 296) == {
        ("at::functionalization::FunctionalInverses::transpose_int_inverse", "transpose", "qualified")}
    assert at(real, "calls", inv, 296) == set()
    # ... but with `using namespace at::vec;` (line 175) in scope, at::vec's clamp_min is seen beside at::clamp_min
    gs = "aten/src/ATen/native/cpu/GridSamplerKernel.cpp"
    assert "using namespace at::vec;" in _line(tree, gs, 175)
    assert "clamp_max(Vec(max_val), clamp_min(Vec(0), in))" in _line(tree, gs, 213)
    clip = "at::native::(anonymous:aten/src/ATen/native/cpu/GridSamplerKernel.cpp)::ComputeLocationBase::clip_coordinates"
    assert at(real, "calls_op", gs, 213) == {(clip, "clamp_max", "guess"), (clip, "clamp_min", "guess")}


def test_global_qualified_calls(real: cpp.Run, tree: Path):
    """`::f(...)` names the global namespace's f only: NumericUtils.h:139
    `return ::exp(x);` inside at::exp(T) is complex_math.h's global
    `using c10_complex_math::exp` (or the C library's), never at::exp itself
    nor the op; `::fmax(a, b)` in namespace at::native is no at::fmax."""
    nu = "aten/src/ATen/NumericUtils.h"
    assert "return ::exp(x);" in _line(tree, nu, 139)
    assert at(real, "calls", nu, 139) == {("at::exp(T)", "c10_complex_math::exp", "qualified")}
    assert at(real, "calls_op", nu, 139) == set()
    mm = "aten/src/ATen/native/cuda/MaxMinElementwiseKernel.cu"
    assert "return ::fmax(a, b);" in _line(tree, mm, 73)
    assert at(real, "calls_op", mm, 73) == set()


def test_op_calls_typed_by_their_argument_count(real: cpp.Run, tree: Path):
    """`self.max()` takes no argument: max(Tensor) -> Tensor, not max.dim's
    pair, so `<`, `>=` and `&` on it are Tensor operators (Distributions.cpp:589);
    at::where(c, a, b) with 3 arguments is a Tensor, unlike where(c) (Loss.cpp:195)."""
    dist = "aten/src/ATen/native/Distributions.cpp"
    assert "auto is_valid = ((self.max() < INFINITY) & (self.min() >= 0));" in _line(tree, dist, 589)
    mo = "at::native::multinomial_out"
    assert at(real, "calls_op", dist, 589) == {(mo, "max", "typed"), (mo, "min", "typed"), (mo, "lt", "typed"),
                                               (mo, "ge", "typed"), (mo, "bitwise_and", "typed")}
    loss = "aten/src/ATen/native/Loss.cpp"
    assert "auto output_margin = at::where(target != 1, margin_clamp, zeros);" in _line(tree, loss, 193)
    assert at(real, "calls_op", loss, 195) == {("at::native::hinge_embedding_loss", "add", "typed")}
