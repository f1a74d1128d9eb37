"""The C++/CUDA fast tier on the real PyTorch 2.6.0 tree (Note [Real-tree tests]).

The whole tree is scanned once per session (cached by content hash under the
TorchTalk cache dir, so later sessions only stat the files) and every test
asserts exact rows with file:line, checked where possible against the source
text itself.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from extractors import cpp
from extractors.base import ExtractContext
from extractors.cpp.names import split_sig

pytestmark = pytest.mark.real_tree

GEMM = "at::native::cpublas::gemm"
# the two ufunc::add overloads of aten/src/ATen/native/ufunc/add.h (Note [Overload ids])
ADD_T, ADD_V = "at::native::ufunc::add(T, T, T)", "at::native::ufunc::add(Vectorized<T>, Vectorized<T>, Vectorized<T>)"
NF = "aten/src/ATen/native/native_functions.yaml"


@pytest.fixture(scope="session")
def real(tree: Path) -> cpp.Run:
    from torchtalk.paths import cache_dir

    ctx = ExtractContext(root=tree, cache_dir=cache_dir() / "tests" / "cpp-fast", jobs=2)
    return cpp.run(ctx)


def where(run: cpp.Run, relation: str, **cols) -> list[tuple]:
    """Rows of `relation` whose columns (by position name c0, c1, ...) match."""
    out = []
    for row in run.rows.get(relation, []):
        if all(row[int(k[1:])] == v for k, v in cols.items()):
            out.append(row)
    return sorted(out)


def line_of(tree: Path, file: str, line: int) -> str:
    return (tree / file).read_text(errors="replace").splitlines()[line - 1]


def ufunc_links(run: cpp.Run, tree: Path) -> dict[str, list[tuple]]:
    """rules/link.dl's stub_impl_via and ufunc_loop_call on this run's facts and
    the ops layer's (the registrations torchgen generates for ufuncs)."""
    from _sinks import ListSink

    from extractors import ops
    from torchtalk.datalog.parser import parse_file
    from torchtalk.datalog.runner import evaluate

    sink = ListSink()
    ops.extract(ExtractContext(root=tree, cache_dir=tree), sink)
    facts = {r: run.rows[r] for r in ("func", "stub_register", "overload_param")}
    facts |= {r: sink.rows[r] for r in ("ufunc_inner_loop", "ufunc_stub_register")}
    program = parse_file(Path(__file__).resolve().parents[1] / "rules" / "link.dl")
    out = evaluate(program, None, outputs=["stub_impl_via", "ufunc_loop_call"], facts=facts)
    return {k: sorted(v) for k, v in out.items()}


def test_counts_reach_the_goals(real: cpp.Run):
    s = real.stats
    assert s["files"] >= 4100
    assert s["func"] >= 48000  # a bare syntactic count finds ~50K function_definition nodes
    assert s["calls"] >= 120000
    assert s["kernel"] >= 500 and s["launches"] >= 1000
    assert s["stub_decl"] >= 450 and s["stub_register"] >= 850


def test_callers_of_cpublas_gemm(real: cpp.Run, tree: Path):
    rows = [r for r in real.rows["calls"] if split_sig(r[1])[0] == GEMM]
    sites = {(r[2], r[3]) for r in rows}
    # Every `cpublas::gemm(` written in the tree is a resolved call site ...
    grep = set()
    for path in (tree / "aten").rglob("*.c*"):
        for i, text in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if re.search(r"cpublas::gemm\s*\(", text):
                grep.add((path.relative_to(tree).as_posix(), i))
    assert len(grep) == 30 and grep <= sites
    # ... plus the unqualified calls inside namespace cpublas itself.
    assert sorted(sites - grep) == [("aten/src/ATen/native/CPUBlas.cpp", n) for n in (560, 574, 605, 619, 1215, 1246, 1277)]
    # Note [Overload ids]: the ten gemm take 13 arguments each, so a call from a
    # template (scalar_t) reaches each, labelled a guess
    caller = "at::native::(anonymous:aten/src/ATen/native/ConvolutionMM2d.cpp)::slow_conv2d_backward_weight_frame"
    site = [r for r in rows if r[:4] == (caller, r[1], "aten/src/ATen/native/ConvolutionMM2d.cpp", 452)]
    assert len(site) == 10 and {r[4] for r in site} == {"overload"}
    for _caller, _callee, file, line, _via in rows:
        assert "gemm" in line_of(tree, file, line)


def test_the_gemm_overloads_are_distinct_nodes(real: cpp.Run, tree: Path):
    """Issue 13, deliverable 2: the nine cpublas::gemm of CPUBlas.cpp (and the
    template of CPUBlas.h) are ten nodes, each with its own file:line."""
    defs = sorted((r[2], r[3], r[0]) for r in real.rows["func"] if split_sig(r[0])[0] == GEMM)
    assert [(f, line) for f, line, _fn in defs] == [("aten/src/ATen/native/CPUBlas.cpp", n) for n in (
        139, 182, 230, 273, 316, 367, 396, 447, 483)] + [("aten/src/ATen/native/CPUBlas.h", 33)]
    assert len({fn for _f, _l, fn in defs}) == 10
    for f, line, _fn in defs:
        assert "gemm(" in line_of(tree, f, line) or "gemm(" in line_of(tree, f, line + 1)
    assert defs[0][2] == (GEMM + "(TransposeType, TransposeType, int64_t, int64_t, int64_t, double, const double*, int64_t,"
                          " const double*, int64_t, double, double*, int64_t)")
    assert defs[6][2].endswith("float, const BFloat16*, int64_t, const BFloat16*, int64_t, float, float*, int64_t)")
    assert ("at::native::cpublas::gemm", 13) in {(r[1], r[2]) for r in real.rows["overload"]}


def test_typed_gemm_calls_on_the_real_tree(real: cpp.Run, tree: Path):
    """Note [Typed overloads]: each of CPUBlas.cpp's three brgemm fallbacks calls
    gemm(..., B, ld_b, A, ld_a, beta, C, ld_c) with its own `const T* A, *B`
    and `float* C` parameters: exactly the one gemm of those pointer types
    (not the template of CPUBlas.h, which C++ ranks below it), typed."""
    blas = "aten/src/ATen/native/CPUBlas.cpp"
    tail = "TransposeType, TransposeType, int64_t, int64_t, int64_t, float, const {0}*, int64_t, const {0}*, int64_t, float, float*, int64_t)"
    for call, brgemm, elem, written in ((1215, 1190, "float", "const float* A,"),
                                        (1246, 1223, "BFloat16", "const at::BFloat16* A,"),
                                        (1277, 1254, "Half", "const at::Half* A,")):
        assert line_of(tree, blas, call).strip() == "gemm("
        assert line_of(tree, blas, brgemm) == "void brgemm("
        assert line_of(tree, blas, brgemm + 8).strip() == written and line_of(tree, blas, brgemm + 10).strip() == "float* C,"
        rows = [r for r in real.rows["calls"] if r[2:4] == (blas, call)]
        assert [(r[1], r[4]) for r in rows] == [(f"{GEMM}({tail.format(elem)}", "typed")]
        assert rows[0][0].startswith("at::native::cpublas::brgemm(") and f"const {elem}*, const {elem}*, float*" in rows[0][0]
    # the gemm each of them names is defined at its own line of CPUBlas.cpp
    defs = {r[0]: r[3] for r in real.rows["func"] if r[2] == blas}
    assert [defs[f"{GEMM}({tail.format(e)}"] for e in ("float", "BFloat16", "Half")] == [182, 396, 447]


def test_untyped_gemm_calls_stay_guesses(real: cpp.Run, tree: Path):
    """gemm_batched_generic (a template) passes `a[batch]` of `const scalar_t**
    a`: no type known, so the call lists the ten overloads, each a guess."""
    blas = "aten/src/ATen/native/CPUBlas.cpp"
    assert "gemm(transa, transb, m, n, k, alpha, a[batch], lda, b[batch], ldb, beta, c[batch], ldc);" in line_of(tree, blas, 560)
    rows = [r for r in real.rows["calls"] if r[2:4] == (blas, 560)]
    assert len(rows) == 10 and {r[4] for r in rows} == {"overload"}
    assert {split_sig(r[1])[0] for r in rows} == {GEMM}


def test_typed_overloads_by_tensor_and_pointer_arguments(real: cpp.Run, tree: Path):
    """A Tensor argument against a ScalarType parameter, and a `Stack*` against
    a `Stack&` one (Note [Typed overloads])."""
    la, fb = "aten/src/ATen/native/LinearAlgebra.cpp", "aten/src/ATen/LegacyBatchedFallback.cpp"
    assert 'checkLinalgCompatibleDtype("tensorinv", result, self);' in line_of(tree, la, 3312)
    assert [(r[1], r[4]) for r in real.rows["calls"] if r[2:4] == (la, 3312)] == [
        ("at::native::checkLinalgCompatibleDtype(const string&, Tensor, Tensor, const string&)", "typed")]
    assert "torch::jit::push(stack, argument);" in line_of(tree, fb, 334)
    assert "torch::jit::Stack* stack" in line_of(tree, fb, 250)
    assert [(r[1], r[4]) for r in real.rows["calls"] if r[2:4] == (fb, 334)] == [
        ("torch::jit::push(Stack*, Types&&...)", "typed")]


def test_add_stub_and_scatter_add_stub_registrations(real: cpp.Run, tree: Path):
    assert where(real, "stub_decl", c0="at::native::add_stub") == [
        ("at::native::add_stub", "aten/src/ATen/native/BinaryOps.h", 56)]
    # add is a ufunc: no REGISTER_DISPATCH (nor DEFINE_DISPATCH) of add_stub is
    # written in the tree, but the stub's callers are there ...
    assert where(real, "stub_register", c0="at::native::add_stub") == []
    assert where(real, "stub_define", c0="at::native::add_stub") == []
    assert ("at::native::structured_sub_out::impl", "at::native::add_stub",
            "aten/src/ATen/native/BinaryOps.cpp", 436) in where(real, "stub_call", c1="at::native::add_stub")
    # ... and its CPU and CUDA registrations are the ones torchgen generates from
    # add.out's `ufunc_inner_loop:` (rules/link.dl over the ops layer's facts).
    derived = ufunc_links(real, tree)
    assert [r for r in derived["stub_impl_via"] if r[0] == "at::native::add_stub"] == [
        ("at::native::add_stub", "CPU", "at::native::(anonymous:UfuncCPUKernel_add.cpp)::add_kernel", NF, 579, "ufunc_codegen"),
        ("at::native::add_stub", "CUDA", "at::native::add_kernel", NF, 579, "ufunc_codegen"),
    ]
    assert line_of(tree, NF, 579) == "  ufunc_inner_loop:"
    # the generated kernels run the inner loop written in ATen/native/ufunc/add.h:
    # the CPU one both overloads (scalar and Vectorized), the CUDA one the scalar one
    assert derived["ufunc_loop_call"] == [
        ("at::native::(anonymous:UfuncCPUKernel_add.cpp)::add_kernel", ADD_T, "Generic", NF, 580),
        ("at::native::(anonymous:UfuncCPUKernel_add.cpp)::add_kernel", ADD_T, "ScalarOnly", NF, 581),
        ("at::native::(anonymous:UfuncCPUKernel_add.cpp)::add_kernel", ADD_V, "Generic", NF, 580),
        ("at::native::(anonymous:UfuncCPUKernel_add.cpp)::add_kernel", ADD_V, "ScalarOnly", NF, 581),
        ("at::native::add_kernel", ADD_T, "Generic", NF, 580),
        ("at::native::add_kernel", ADD_T, "ScalarOnly", NF, 581),
    ]
    # the two overloads are two nodes (Note [Overload ids])
    assert sorted(where(real, "func", c0=ADD_T) + where(real, "func", c0=ADD_V), key=lambda r: r[3]) == [
        (ADD_T, "add", "aten/src/ATen/native/ufunc/add.h", 15, "cpp"),
        (ADD_V, "add", "aten/src/ATen/native/ufunc/add.h", 22, "cpp"),
    ]
    # scatter_add_stub's are written in the tree
    assert [r for r in derived["stub_impl_via"] if r[0] == "at::native::scatter_add_stub"] == [
        (*r, "REGISTER_DISPATCH") for r in where(real, "stub_register", c0="at::native::scatter_add_stub")]
    assert where(real, "stub_register", c0="at::native::scatter_add_stub") == [
        ("at::native::scatter_add_stub", "CPU", "at::native::(anonymous:aten/src/ATen/native/cpu/ScatterGatherKernel.cpp)::scatter_add_cpu_kernel",
         "aten/src/ATen/native/cpu/ScatterGatherKernel.cpp", 960),
        ("at::native::scatter_add_stub", "CUDA", "at::native::scatter_add_cuda_kernel",
         "aten/src/ATen/native/cuda/ScatterGatherKernel.cu", 568),
    ]
    assert where(real, "stub_define", c0="at::native::scatter_add_stub") == [
        ("at::native::scatter_add_stub", "aten/src/ATen/native/TensorAdvancedIndexing.cpp", 491)]


def test_softmax_cu_kernels_and_their_host_launches(real: cpp.Run, tree: Path):
    f = "aten/src/ATen/native/cuda/SoftMax.cu"
    anon = f"at::native::(anonymous:{f})::"
    assert [r[1] for r in where(real, "kernel", c2=f)] == [
        "cunn_SoftMaxBackward", "cunn_SoftMaxForward", "cunn_SoftMaxForwardSmem",
        "cunn_SpatialSoftMaxBackward", "cunn_SpatialSoftMaxForward"]
    launches = where(real, "launches", c2=f)
    fwd, bwd = anon + "host_softmax", anon + "host_softmax_backward"
    assert [(r[0], r[1].removeprefix(anon), r[3], r[4]) for r in launches] == [
        (fwd, "cunn_SoftMaxForward", 876, "<<<>>>"),
        (fwd, "cunn_SoftMaxForward", 912, "<<<>>>"),
        (fwd, "cunn_SoftMaxForwardSmem", 873, "<<<>>>"),
        (fwd, "cunn_SoftMaxForwardSmem", 909, "<<<>>>"),
        (fwd, "cunn_SpatialSoftMaxForward", 936, "<<<>>>"),
        (fwd, "cunn_SpatialSoftMaxForward", 945, "<<<>>>"),
        (bwd, "cunn_SoftMaxBackward", 1000, "<<<>>>"),
        (bwd, "cunn_SoftMaxBackward", 1024, "<<<>>>"),
        (bwd, "cunn_SpatialSoftMaxBackward", 1043, "<<<>>>"),
        (bwd, "cunn_SpatialSoftMaxBackward", 1055, "<<<>>>"),
    ]
    # the kernel name is on the launch line, the `<<<` on the next one
    for r in launches:
        assert r[1].removeprefix(anon) in line_of(tree, f, r[3])
        assert "<<<" in line_of(tree, f, r[3] + 1)


def test_anonymous_namespace_functions_of_two_files_are_two_nodes(real: cpp.Run, tree: Path):
    """Note [Internal linkage ids]: host_softmax of SoftMax.cpp and that of
    cuda/SoftMax.cu are two nodes, each with its own file:line, callers and
    callees; neither file's calls reach the other's."""
    cpu_f, cuda_f = "aten/src/ATen/native/SoftMax.cpp", "aten/src/ATen/native/cuda/SoftMax.cu"
    cpu, cuda = (f"at::native::(anonymous:{f})::host_softmax" for f in (cpu_f, cuda_f))
    assert where(real, "func", c1="host_softmax") == [
        (cpu, "host_softmax", cpu_f, 153, "cpp"), (cuda, "host_softmax", cuda_f, 820, "cuda")]
    assert "host_softmax(" in line_of(tree, cpu_f, 153) and "host_softmax(" in line_of(tree, cuda_f, 820)
    assert [r[:4] for r in real.rows["calls"] if r[1] in (cpu, cuda)] == [
        ("at::native::masked_softmax_cpu", cpu, cpu_f, 624),
        ("at::native::structured_log_softmax_cuda_out::impl", cuda, cuda_f, 1072),
        ("at::native::structured_softmax_cuda_out::impl", cuda, cuda_f, 1096),
    ]
    cpu_calls = {r[1:4] for r in real.rows["calls"] if r[0] == cpu}
    cuda_calls = {r[1:4] for r in real.rows["calls"] if r[0] == cuda}
    assert ("at::parallel_for", cpu_f, 182) in cpu_calls
    assert (f"at::native::(anonymous:{cuda_f})::SoftMaxForward_getBlockSize", cuda_f, 861) in cuda_calls
    assert {f for _c, f, _l in cpu_calls} == {cpu_f} and {f for _c, f, _l in cuda_calls} == {cuda_f}
    assert not [r for r in real.rows["launches"] if r[0] == cpu]
    assert (cuda, f"at::native::(anonymous:{cuda_f})::cunn_SoftMaxForward", cuda_f, 876, "<<<>>>") in real.rows["launches"]


def test_helper_launches_reach_the_helpers_global_kernels(real: cpp.Run):
    rows = [r for r in real.rows["launches"] if r[4] == "gpu_kernel"]
    kernels = {r[1] for r in rows}
    assert {"at::native::vectorized_elementwise_kernel", "at::native::unrolled_elementwise_kernel",
            "at::native::elementwise_kernel"} <= kernels
    assert len({(r[2], r[3]) for r in rows}) >= 200  # ~230 gpu_kernel( call sites in native/cuda


def test_torch_library_impl_block(real: cpp.Run):
    f = "aten/src/ATen/native/mkldnn/Linear.cpp"
    assert where(real, "lib_impl", c4=f) == [
        ("mkl", "_mkl_linear", "CPU", "at::native::mkl_linear", f, 423),
        ("mkl", "_mkl_linear", "MkldnnCPU", "at::native::mkl_linear", f, 427),
        ("mkldnn", "_linear_pointwise", "CPU", "at::native::mkldnn_linear_pointwise", f, 433),
        ("mkldnn", "_linear_pointwise", "MkldnnCPU", "at::native::mkldnn_linear_pointwise", f, 442),
        ("mkldnn", "_linear_pointwise.binary", "CPU", "at::native::mkldnn_linear_pointwise_binary", f, 436),
        ("mkldnn", "_linear_pointwise.binary", "MkldnnCPU", "at::native::mkldnn_linear_pointwise_binary", f, 445),
    ]


def test_pybind_binding_in_torch_csrc(real: cpp.Run):
    f = "torch/csrc/instruction_counter/Module.cpp"
    assert where(real, "binds", c3=f) == [
        ("torch._C._instruction_counter.end", "torch::instruction_counter::end", "pybind", f, 87),
        ("torch._C._instruction_counter.start", "torch::instruction_counter::start", "pybind", f, 86),
    ]
    assert where(real, "func", c0="torch::instruction_counter::start")[0][2] == f


def test_torch_impl_func_gives_impl_func_and_func(real: cpp.Run):
    f = "aten/src/ATen/native/LinearAlgebra.cpp"
    fn = "at::native::structured_addmm_out_cpu::impl"
    assert where(real, "impl_func", c0="addmm_out_cpu") == [("addmm_out_cpu", "impl", fn, f, 1611)]
    assert where(real, "func", c0=fn) == [(fn, "impl", f, 1611, "cpp")]
    assert where(real, "impl_func", c0="addmm") == [
        ("addmm", "meta", "at::meta::structured_addmm::meta", f, 190)]


def test_a_method_of_a_tensor_expression_is_an_op_call_not_a_guess(real: cpp.Run):
    f = "aten/src/ATen/native/BinaryOps.cpp"
    # line 1552: `return at::full({}, 2.0, self.options()).pow(other);` -- at::full is
    # generated code returning a Tensor, so `.pow` is Tensor::pow: op `pow`, typed;
    # not one of the tree's 7 unrelated methods named pow, and no ambiguous call
    assert ("at::native::(static:aten/src/ATen/native/BinaryOps.cpp)::_pow2", "pow", f, 1552, "typed") in real.rows["calls_op"]
    assert ("at::native::(static:aten/src/ATen/native/BinaryOps.cpp)::_pow2", "full", f, 1552, "qualified") in real.rows["calls_op"]
    assert not [r for r in real.rows["call_ambiguous"] if r[0] == "at::native::(static:aten/src/ATen/native/BinaryOps.cpp)::_pow2"]
    assert [r[1] for r in real.rows["calls"] if (r[0], r[2], r[3]) == ("at::native::(static:aten/src/ATen/native/BinaryOps.cpp)::_pow2", f, 1552)] == [
        "at::TensorBase::options"]  # `self.options()`: self is a `const Tensor&`
    methods = {"at::native::(anonymous:aten/src/ATen/native/cpu/DistanceOpsKernel.cpp)::Dist::pow", "c10::SymNodeImpl::pow", "torch::impl::PythonSymNodeImpl::pow"}
    assert methods <= {split_sig(r[0])[0] for r in real.rows["func"] if r[1] == "pow"}  # Dist::pow: overloads
    # line 1549: `at::pow(2.0, other)` is generated code (not in the tree): no call edge
    assert not [r for r in real.rows["calls"] + real.rows["call_ambiguous"] if r[-2:] == (f, 1549) or r[2:4] == (f, 1549)]


def test_calls_of_aten_ops_through_the_generated_api(real: cpp.Run):
    """Note [ATen API calls]: at::dot_out(...) / tensor1.dot(...) name op `dot`."""
    f = "aten/src/ATen/native/LinearAlgebra.cpp"
    rows = {(r[1], r[3]) for r in real.rows["calls_op"] if r[0] == "at::native::(static:aten/src/ATen/native/LinearAlgebra.cpp)::_matmul_impl" and r[2] == f}
    # line 2028: `has_out ? at::dot_out(out, ...) : tensor1.dot(tensor2)`; 2030 the same with mv;
    # 2032: `at::mm_out(out, tensor1.unsqueeze(0), tensor2).squeeze_(0)`; 2161: `tensor1_expanded.bmm(...)`
    assert {("dot", 2028), ("mv", 2030), ("mm", 2032), ("unsqueeze", 2032), ("squeeze_", 2032),
            ("bmm", 2161), ("_unsafe_view", 2161)} <= rows
    # generated-API names never leak as call edges to unrelated tree classes
    assert not [r for r in real.rows["calls"] if r[0] == "at::native::(static:aten/src/ATen/native/LinearAlgebra.cpp)::_matmul_impl" and r[1].endswith("::mm")]


def test_unqualified_calls_reach_base_class_methods(real: cpp.Run, tree: Path):
    """C++ class scope lookup searches the bases: `refresh_numel();` in a
    method of FunctionalTensorWrapper (a c10::TensorImpl) is
    TensorImpl::refresh_numel, and `dtype()` TensorImpl::dtype, not c10::dtype()."""
    f = "aten/src/ATen/FunctionalTensorWrapper.cpp"
    assert line_of(tree, f, 30).strip() == "refresh_numel();"
    assert where(real, "calls", c2=f, c3=30) == [
        ("at::FunctionalTensorWrapper::set_constructor_metadata", "c10::TensorImpl::refresh_numel", f, 30, "scope")]
    assert line_of(tree, f, 230).strip().startswith("if (dtype() != value_.unsafeGetTensorImpl()->dtype()")
    assert {r[1] for r in where(real, "calls", c2=f, c3=230, c4="scope")} == {"c10::TensorImpl::dtype", "c10::TensorImpl::layout"}


def test_structured_kernel_classes_have_their_generated_bases(real: cpp.Run, tree: Path):
    """Note [Structured kernel classes]: the meta function of eq.Tensor (in the
    CREATE_COMPARISON_SCALAR_TENSOR_META_FUNC expansion, BinaryOps.cpp:365) is
    a method of at::meta::structured_eq_Tensor, a TensorIteratorBase
    (`structured_inherits`), so its build_borrowing_comparison_op(...) and
    maybe_get_output() are those of TensorIteratorBase and MetaBase; threshold's
    `build(...)` (Activation.cpp:88) is TensorIteratorBase::build, not torch::jit::build."""
    f = "aten/src/ATen/native/BinaryOps.cpp"
    assert line_of(tree, f, 365) == "CREATE_COMPARISON_SCALAR_TENSOR_META_FUNC(eq)"
    assert [r[1:] for r in where(real, "calls", c0="at::meta::structured_eq_Tensor::meta")] == [
        ("at::TensorIteratorBase::build_borrowing_comparison_op", f, 365, "scope"),
        ("at::impl::MetaBase::maybe_get_output", f, 365, "scope")]
    a = "aten/src/ATen/native/Activation.cpp"
    assert line_of(tree, a, 88).strip() == "build(TensorIteratorConfig()"
    assert where(real, "calls", c2=a, c3=88) == [
        ("at::meta::structured_threshold::meta", "at::TensorIteratorBase::build", a, 88, "scope")]


def test_stub_registrations_name_the_files_own_kernels(real: cpp.Run, tree: Path):
    """A REGISTER_DISPATCH names the registering file's own function: mode_stub's
    CPU `mode_kernel_impl` (TensorCompareKernel.cpp:409) is that file's
    anonymous-namespace one, not cuda/TensorModeKernel.cpp's at::native one of
    the same parameters; `CPU_CAPABILITY::abs_kernel` (UnaryOpsKernel.cpp:817)
    is written through CPU_CAPABILITY, an inline namespace elsewhere. Every
    registration but one then names a definition of the tree."""
    tc = "aten/src/ATen/native/cpu/TensorCompareKernel.cpp"
    assert line_of(tree, tc, 409).strip() == "REGISTER_DISPATCH(mode_stub, &mode_kernel_impl)"
    assert where(real, "stub_register", c2=f"at::native::(anonymous:{tc})::mode_kernel_impl") == [
        ("at::native::mode_stub", "CPU", f"at::native::(anonymous:{tc})::mode_kernel_impl", tc, 409)]
    un = "aten/src/ATen/native/cpu/UnaryOpsKernel.cpp"
    assert line_of(tree, un, 817) == "REGISTER_DISPATCH(abs_stub, &CPU_CAPABILITY::abs_kernel)"
    assert where(real, "stub_register", c0="at::native::abs_stub", c3=un) == [
        ("at::native::abs_stub", "CPU", f"at::native::CPU_CAPABILITY::(static:{un})::abs_kernel", un, 817)]
    defined = {split_sig(r[0])[0] for r in real.rows["func"]}
    unlinked = [r for r in real.rows["stub_register"] if r[2] != "nullptr" and split_sig(r[2])[0] not in defined]
    # Activation.cpp's anonymous glu_backward_kernel(TensorIterator&) beside the
    # __global__ at::native::glu_backward_kernel of ActivationGluKernel.cu (other parameters)
    assert [(r[0], r[2], r[4]) for r in unlinked] == [("at::native::glu_backward_stub", "glu_backward_kernel", 1363)]


def test_template_arguments_pass_functors(real: cpp.Run, tree: Path):
    """Note [Functor arguments], template arguments: `normal_impl_<NormalStub,
    Generator>(...)` (Distributions.cpp:276) runs NormalStub::operator(), which
    normal_impl_ calls as `normal_kernel<RNG>()(...)`; inside the template
    that name is its template parameter, never at::native::random_kernel (the
    CUDA kernel of that name): DistributionTemplates.h:87 has no calls row."""
    d = "aten/src/ATen/native/Distributions.cpp"
    assert line_of(tree, d, 276).strip() == (
        "return at::native::templates::normal_impl_<NormalStub, Generator>(self, mean, std, std::move(gen));")
    assert where(real, "calls", c2=d, c3=276) == [
        ("at::native::normal_", "at::native::NormalStub::operator()", d, 276, "functor"),
        ("at::native::normal_", "at::native::templates::normal_impl_", d, 276, "qualified")]
    t = "aten/src/ATen/native/DistributionTemplates.h"
    assert line_of(tree, t, 87).strip() == "random_kernel<RNG>()(iter, generator);"
    assert where(real, "calls", c2=t, c3=87) == []


def test_template_arguments_reach_static_methods(real: cpp.Run, tree: Path):
    """`upsample_generic_Nd_kernel_impl<1, scale_t, HelperInterpNearest>(...)`
    (UpSampleKernel.cpp:1666) runs HelperInterpNearest::compute_indices_weights,
    which the template calls as `F::compute_indices_weights(...)` on its third
    template parameter (line 1457: no function of the tree, no row there)."""
    u = "aten/src/ATen/native/cpu/UpSampleKernel.cpp"
    anon = f"at::native::(anonymous:{u})"
    assert line_of(tree, u, 1666).strip() == "upsample_generic_Nd_kernel_impl<1, scale_t, HelperInterpNearest>("
    assert where(real, "calls", c2=u, c3=1666) == [
        (f"{anon}::upsample_nearest1d_kernel_impl", f"{anon}::HelperInterpNearest::compute_indices_weights", u, 1666, "functor"),
        (f"{anon}::upsample_nearest1d_kernel_impl", f"{anon}::upsample_generic_Nd_kernel_impl", u, 1666, "scope")]
    assert line_of(tree, u, 1457).strip() == "F::compute_indices_weights("
    assert where(real, "calls", c2=u, c3=1457) == []


def test_constructor_calls(real: cpp.Run, tree: Path):
    """Note [Constructor calls]: `return AdvancedIndex(self, indices);`
    (TensorAdvancedIndexingUtils.h:92) runs AdvancedIndex's one constructor;
    `at::complex(re, im)` (Correlation.cpp:149) is the op, not c10::complex's
    constructors."""
    u = "aten/src/ATen/native/TensorAdvancedIndexingUtils.h"
    assert line_of(tree, u, 92).strip() == "return AdvancedIndex(self, indices);"
    assert where(real, "calls", c2=u, c3=92) == [
        ("at::native::make_info", "at::native::AdvancedIndex::AdvancedIndex", u, 92, "scope")]
    c = "aten/src/ATen/native/Correlation.cpp"
    assert "? at::complex(at::real(c).clip(-1, 1), at::imag(c).clip(-1, 1))" in line_of(tree, c, 149)
    assert ("at::native::corrcoef", "complex", c, 149, "qualified") in where(real, "calls_op", c2=c, c3=149)
    assert where(real, "calls", c2=c, c3=149) == []


def test_qualified_calls_reach_base_class_methods(real: cpp.Run, tree: Path):
    """`HelperInterpLinear::init_indices_weights(...)` (UpSampleKernel.cpp:1176)
    names the static method HelperInterpLinear inherits from HelperInterpBase
    (C++ qualified lookup in a class searches its bases)."""
    u = "aten/src/ATen/native/cpu/UpSampleKernel.cpp"
    anon = f"at::native::(anonymous:{u})"
    assert line_of(tree, u, 1176).strip() == "HelperInterpLinear::init_indices_weights("
    assert where(real, "calls", c2=u, c3=1176) == [
        (f"{anon}::HelperInterpLinear::compute_indices_weights", f"{anon}::HelperInterpBase::init_indices_weights",
         u, 1176, "qualified")]


def test_the_indexed_cpp_relations_hold_each_row_once(real_con):
    """Note [Rows of their own file]: the index makes only the relations with
    rows of no one file distinct; on the real tree every other row holds its
    file, so no relation of the layer has a row twice."""
    from extractors.layers import LAYERS

    layer = next(lr for lr in LAYERS if lr.name == "cpp")
    counted = {rel: real_con.execute(f'SELECT count(*) FROM (SELECT DISTINCT * FROM "{rel}")').fetchone()[0]
               for rel in layer.relations}
    total = {rel: real_con.execute(f'SELECT count(*) FROM "{rel}"').fetchone()[0] for rel in layer.relations}
    assert counted == total and total["calls"] > 200_000


def test_a_definitions_edit_patches_the_index_to_the_one_built_from_every_file(real: cpp.Run, tree: Path):
    """Note [Index patched] on the real tree: a function added (a new one, an
    overload, a namespace of its own, a template, an internal twin of
    another file's), then taken out again, patches the Index to the one
    built from every file."""
    import pickle

    from _index_contents import contents

    from extractors.cpp import _current_digests, _tree_facts, source_files
    from extractors.cpp import resolve as R
    from extractors.cpp.overloads import Overloads
    from extractors.cpp.project import load_macros
    from extractors.cpp.scan import scan_file
    from torchtalk.paths import cache_dir

    macros, _warnings = load_macros(tree)
    digests, _index = _current_digests(tree, source_files(tree), {}, macros=macros)
    facts = _tree_facts(tree, cache_dir() / "tests" / "cpp-fast", digests, 2, None, {}, macros)[0].all()
    ov = Overloads.of(facts)
    base = R.Index([ov.rename(f) for f in facts])
    # an internal function of a source file whose lookup key another file's function shares
    twin = min(q for q in base.twin_sigs if q.startswith("at::native::(anonymous:") and q.count("::") == 3)
    blas, act, soft = "aten/src/ATen/native/CPUBlas.cpp", "aten/src/ATen/native/Activation.cpp", \
        "aten/src/ATen/native/cuda/SoftMax.cu"
    edits = [
        (blas, "namespace at::native::cpublas {", "void tt_probe() {}"),
        (act, "namespace at::native {", "namespace cpublas { void axpy(int, int) {} }"),  # an overload, elsewhere
        (act, "namespace at::native {", "namespace tt_new_ns { void f() {} }"),
        (soft, "namespace at::native {", "template <typename T> void tt_t(T sorter) { sorter.sort(1); }"),
        (act, "namespace at::native {", f"namespace {{ void {twin.rpartition('::')[2]}(int zz) {{}} }}"),
    ]
    by_file = {f.file: f for f in facts}
    for rel, anchor, added in edits:
        text = (tree / rel).read_text()
        assert anchor in text
        edited = scan_file(rel, text.replace(anchor, f"{anchor}\n{added}\n", 1).encode())
        now = {**by_file, rel: edited}
        ov_now = Overloads.of(now[r] for r in sorted(now))
        fresh = R.Index([ov_now.rename(now[r]) for r in sorted(now)])
        assert contents(fresh) != contents(base), (rel, added)
        for old, new, old_ov, new_ov, files, want in (
                (by_file[rel], edited, ov, ov_now, now, fresh),  # added
                (edited, by_file[rel], ov_now, ov, by_file, base)):  # taken out again
            ix = pickle.loads(pickle.dumps(base if want is fresh else fresh, pickle.HIGHEST_PROTOCOL))
            ix.patch([old_ov.rename(old)], [new_ov.rename(new)], lambda rels, fs=files, o=new_ov: [
                o.rename(fs[r]) for r in rels])
            assert contents(ix) == contents(want), (rel, added, want is fresh)
