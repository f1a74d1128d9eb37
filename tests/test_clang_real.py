"""Precise tier on the real 2.6.0 tree: which calls the compiler says are ATen
op calls (calls_op via "compiler", Note [Op calls by the compiler] in
extractors/clang/api.py), overloads, and a `.cu` TU parsed as CUDA host code
(Note [CUDA host parse] in extractors/clang/flags.py), and headers parsed as
their own main file (Note [Header jobs] in extractors/clang/__init__.py).
Each test names its rows with file:line; the files are parsed once."""

from __future__ import annotations

from pathlib import Path

import pytest

from extractors.base import ExtractContext

pytestmark = pytest.mark.real_tree

LINALG = "aten/src/ATen/native/LinearAlgebra.cpp"
TENSOR_IMPL = "c10/core/TensorImpl.cpp"
MARGIN = "aten/src/ATen/native/cuda/MultiMarginLoss.cu"
LOOPS = "aten/src/ATen/native/cpu/Loops.h"
SORT_UTILS = "aten/src/ATen/native/cuda/SortUtils.cuh"


class Rows:
    """Rows by relation."""

    def __init__(self) -> None:
        self.rel: dict[str, set[tuple]] = {"calls_precise": set(), "calls_op": set(), "precise_file": set()}
        self.warnings: list[tuple[str, int, str]] = []

    def add(self, relation: str, *values) -> None:
        self.rel[relation].add(values)

    def warn(self, file: str, line: int, message: str) -> None:
        self.warnings.append((file, line, message))

    def progress(self, advance: int = 1, total: int | None = None, what: str = "") -> None:
        pass

    def at(self, relation: str, file: str, line: int) -> set[tuple]:
        return {r for r in self.rel[relation] if r[-2 if relation == "calls_precise" else 2] == file
                and r[3] == line}


@pytest.fixture(scope="module")
def parsed(tree: Path, cuda_sdk: Path, tmp_path_factory):
    from extractors.clang import run

    rows = Rows()
    stats = run(ExtractContext(tree, tmp_path_factory.mktemp("precise-real"), jobs=2), rows,
                [tree / f for f in (LINALG, TENSOR_IMPL, MARGIN, LOOPS, SORT_UTILS)])
    return rows, stats


def test_all_parse(parsed) -> None:
    rows, stats = parsed
    assert (stats.tus, stats.headers, stats.ok, stats.skipped_cuda) == (5, 2, 5, 0)
    assert rows.warnings == []
    assert rows.rel["precise_file"] == {(LINALG,), (TENSOR_IMPL,), (MARGIN,), (LOOPS,), (SORT_UTILS,)}


def test_symint_max_is_not_an_op(parsed) -> None:
    """c10/core/TensorImpl.cpp:929 `sizes_[i + 1].max(1)` is c10::SymInt::max,
    and nothing in c10 can call an op."""
    rows, _ = parsed
    assert ("c10::TensorImpl::set_sizes_and_strides", "c10::SymInt::max", TENSOR_IMPL, 929) not in rows.rel[
        "calls_op"]
    assert {r[1] for r in rows.at("calls_precise", TENSOR_IMPL, 929)} >= {"c10::SymInt::max"}
    assert [r for r in rows.rel["calls_op"] if r[2] == TENSOR_IMPL] == []


def test_sizes_data_is_not_an_op(parsed) -> None:
    """LinearAlgebra.cpp:2110 `tensor2.sizes().data()`: TensorBase::sizes and
    ArrayRef::data, edges of the tree, no op."""
    rows, _ = parsed
    assert rows.at("calls_op", LINALG, 2110) == set()
    assert rows.at("calls_precise", LINALG, 2110) == {
        ("at::native::(static:aten/src/ATen/native/LinearAlgebra.cpp)::_matmul_impl", "at::TensorBase::sizes", LINALG, 2110),
        ("at::native::(static:aten/src/ATen/native/LinearAlgebra.cpp)::_matmul_impl", "c10::ArrayRef::data", LINALG, 2110),
    }


def test_a_function_named_operator_something_is_no_operator(parsed) -> None:
    """LinearAlgebra.cpp:2638 `operator_1_norm(a)` in mexp_impl: a function
    whose name starts with the word `operator`, called, not an operator."""
    rows, _ = parsed
    mexp = "at::native::(anonymous:aten/src/ATen/native/LinearAlgebra.cpp)::"
    assert rows.at("calls_precise", LINALG, 2638) == {
        (mexp + "mexp_impl", mexp + "operator_1_norm", LINALG, 2638)}


def test_op_calls_by_the_compiler(parsed) -> None:
    """at::mm_out / tensor.mm / a * b / a + b / a == s, each at its line, by base name."""
    rows, _ = parsed
    impl = "at::native::(static:aten/src/ATen/native/LinearAlgebra.cpp)::_matmul_impl"
    # 2035: `return has_out ? at::mm_out(out, tensor1, tensor2) : tensor1.mm(tensor2);`
    assert rows.at("calls_op", LINALG, 2035) == {(impl, "mm", LINALG, 2035, "compiler")}
    # 2032-2033: at::mm_out(out, tensor1.unsqueeze(0), tensor2).squeeze_(0)
    #            : tensor1.unsqueeze(0).mm(tensor2).squeeze_(0)
    for line in (2032, 2033):
        assert rows.at("calls_op", LINALG, line) == {
            (impl, op, LINALG, line, "compiler") for op in ("mm", "squeeze_", "unsqueeze")}
    # 1310: `return self * other;` (at::operator* -> x.mul(y))
    assert rows.at("calls_op", LINALG, 1310) == {("at::native::inner", "mul", LINALG, 1310, "compiler")}
    # 438: `return sign.log() + logabsdet;`  440: `at::where(sign == -1., NAN, logabsdet)`
    assert rows.at("calls_op", LINALG, 438) == {
        ("at::native::logdet", "add", LINALG, 438, "compiler"), ("at::native::logdet", "log", LINALG, 438, "compiler")}
    assert rows.at("calls_op", LINALG, 440) == {
        ("at::native::logdet", "eq", LINALG, 440, "compiler"), ("at::native::logdet", "where", LINALG, 440, "compiler")}
    # 1586: `result.addmm_(batch1[batch], batch2[batch], ...)`: Tensor::operator[](int64_t) is select(0, i)
    assert rows.at("calls_op", LINALG, 1586) == {
        ("at::native::(static:aten/src/ATen/native/LinearAlgebra.cpp)::addbmm_impl_", "addmm_", LINALG, 1586, "compiler"),
        ("at::native::(static:aten/src/ATen/native/LinearAlgebra.cpp)::addbmm_impl_", "select", LINALG, 1586, "compiler")}
    # no edge to the generated API once it is an op call
    assert not any(r[1].startswith(("at::Tensor::", "at::mm")) for r in rows.rel["calls_precise"])


def test_tensor_operators_with_a_dependent_operand(parsed) -> None:
    """Note [Dependent operators and constructions], in templates over
    scalar_t: LinearAlgebra.cpp:2574 `norm / theta` (norm a Tensor, theta a
    scalar_t) takes at::operator/'s candidates whose first parameter is a
    Tensor: the op call `div`, not the ops of operator/(Scalar, Tensor);
    :2576 `a * pow2s.view(...)` is `mul`; :2671 `norm_lower_bound < norm_cpu`
    (Tensor second) is operator<(Scalar, Tensor), `gt`, or (Tensor, Tensor),
    `lt`: the compiler cannot tell which before instantiation."""
    rows, _ = parsed
    t18 = "at::native::(anonymous:aten/src/ATen/native/LinearAlgebra.cpp)::compute_T18_scale_square"
    mexp = "at::native::(anonymous:aten/src/ATen/native/LinearAlgebra.cpp)::mexp_impl"
    assert rows.at("calls_op", LINALG, 2574) == {(t18, op, LINALG, 2574, "compiler") for op in ("ceil", "div", "log2")}
    assert rows.at("calls_op", LINALG, 2576) == {(t18, "mul", LINALG, 2576, "compiler")}
    assert rows.at("calls_op", LINALG, 2671) == {(mexp, op, LINALG, 2671, "compiler") for op in ("gt", "le", "lt")}


def test_member_templates_with_dependent_arguments(parsed) -> None:
    """LinearAlgebra.cpp:1647-1652 in baddbmm_cpu_kernel<scalar_t, is_bmm>:
    `alpha_.to<opmath_t>()` and `result.accessor<scalar_t, 3>()` name member
    templates of a known class with dependent template arguments: edges to
    c10::Scalar::to and at::TensorBase::accessor; none of the kernel's calls
    is left unresolved by the compiler."""
    rows, stats = parsed
    k = "at::native::baddbmm_cpu_kernel"
    for line in (1647, 1648):
        assert rows.at("calls_precise", LINALG, line) == {(k, "c10::Scalar::to", LINALG, line)}
    for line in (1650, 1651, 1652):
        assert rows.at("calls_precise", LINALG, line) == {(k, "at::TensorBase::accessor", LINALG, line)}
    assert stats.per_tu[MARGIN][2] == 0  # MultiMarginLoss.cu: each call site resolved


def test_generated_method_without_op_reaches_the_tree(parsed) -> None:
    """LinearAlgebra.cpp:2077 `output.mT().contiguous()`: Tensor::contiguous
    (TensorBody.h, generated: no node) dispatches no op itself but calls
    TensorBase::contiguous (TensorBase.h): the call site gets that edge."""
    rows, _ = parsed
    impl = "at::native::(static:aten/src/ATen/native/LinearAlgebra.cpp)::_matmul_impl"
    assert rows.at("calls_precise", LINALG, 2077) == {(impl, "at::TensorBase::contiguous", LINALG, 2077)}
    assert rows.at("calls_op", LINALG, 2077) == {(impl, "mT", LINALG, 2077, "compiler")}


def test_gemm_overloads_resolved_by_the_compiler(parsed) -> None:
    """LinearAlgebra.cpp:1533: each AT_DISPATCH case calls another of the
    overloads of cpublas::gemm: the compiler names which, each an id of the
    fast tier (Note [Overload ids]); the two mixed-precision overloads
    (BFloat16/Half in, float out: CPUBlas.cpp:396, :447) are not called here."""
    rows, _ = parsed
    g = "at::native::cpublas::gemm(TransposeType, TransposeType, int64_t, int64_t, int64_t, "
    caller = "at::native::(static:aten/src/ATen/native/LinearAlgebra.cpp)::addmm_impl_cpu_"
    assert rows.at("calls_precise", LINALG, 1533) == {(caller, g + rest, LINALG, 1533) for rest in (
        "double, const double*, int64_t, const double*, int64_t, double, double*, int64_t)",
        "float, const float*, int64_t, const float*, int64_t, float, float*, int64_t)",
        "complex<double>, const complex<double>*, int64_t, const complex<double>*, int64_t, complex<double>,"
        " complex<double>*, int64_t)",
        "complex<float>, const complex<float>*, int64_t, const complex<float>*, int64_t, complex<float>,"
        " complex<float>*, int64_t)",
        "float, const BFloat16*, int64_t, const BFloat16*, int64_t, float, BFloat16*, int64_t)",
        "float, const Half*, int64_t, const Half*, int64_t, float, Half*, int64_t)",
        "int64_t, const int64_t*, int64_t, const int64_t*, int64_t, int64_t, int64_t*, int64_t)",
        "opmath_type<scalar_t>, const scalar_t*, int64_t, const scalar_t*, int64_t, opmath_type<scalar_t>,"
        " scalar_t*, int64_t)",  # the template of CPUBlas.h:33 (the other scalar types)
    )}


def test_cuda_tu_launches(parsed) -> None:
    """MultiMarginLoss.cu parsed as CUDA host code: the compiler resolves each
    `MultiMarginLoss_forward_kernel<P> <<<...>>>` to the __global__ template
    of its anonymous namespace, at the line of the kernel's name."""
    _, stats = parsed
    host = "at::native::multi_margin_loss_cuda_out"
    kernel = "at::native::(anonymous:aten/src/ATen/native/cuda/MultiMarginLoss.cu)::MultiMarginLoss_forward_kernel"
    assert sorted(r for r in stats.launches if r[0] == host) == [
        (host, kernel, MARGIN, line) for line in (202, 213, 235, 245, 258, 268)]
    assert len(stats.launches) == 10  # and the four of the backward kernel


def test_header_calls_by_the_compiler(parsed, real_con) -> None:
    """Note [Header jobs]: calls written in native headers are the
    compiler's, at the header's file:line. cpu/Loops.h:276 (VectorizedLoop2d's
    `vectorized_loop(...)`, CPU_CAPABILITY as written); cuda/SortUtils.cuh
    (parsed as CUDA host code): :269 `IndexToOffset<K, IndexType,
    KeyDims>::get(...)`, a static method of a class template with dependent
    arguments; :338 `StoreKeys(tmp_storage.store_keys).Store(...)` is cub's
    BlockStore::Store, outside the tree: no edge, where the fast tier guesses
    by the name alone torch::jit::tensorexpr::Store's constructor (and
    precise_file(SortUtils.cuh) leaves that guess out of the graph)."""
    rows, stats = parsed
    vec2d = "at::native::CPU_CAPABILITY::VectorizedLoop2d::operator()"
    assert {r[1] for r in rows.at("calls_precise", LOOPS, 276)} == {"at::native::CPU_CAPABILITY::vectorized_loop"}
    assert (vec2d, "at::native::CPU_CAPABILITY::vectorized_loop", LOOPS, 276) in rows.rel["calls_precise"]
    radix = "at::native::radixSortKVInPlace"
    assert rows.at("calls_precise", SORT_UTILS, 269) == {
        (radix, "at::cuda::detail::IndexToOffset::get", SORT_UTILS, 269)}
    assert rows.at("calls_precise", SORT_UTILS, 338) == set()
    guess = real_con.execute("select callee, via from calls where file = ? and line = 338", [SORT_UTILS]).fetchall()
    assert guess == [("torch::jit::tensorexpr::Store::Store", "member")]
    assert stats.per_tu[SORT_UTILS][0] == stats.per_tu[LOOPS][0] == "ok"
