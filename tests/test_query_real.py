"""Acceptance of the rule library and the DSL on the real PyTorch 2.6.0 tree
(the session-scoped `real_db` fixture indexes it once)."""

from __future__ import annotations

import pytest
from _tree import line_of

from extractors.cpp.names import split_sig
from torchtalk.query.resolve import Ambiguous

pytestmark = pytest.mark.real_tree

LA = "aten/src/ATen/native/LinearAlgebra.cpp"


@pytest.fixture(scope="module")
def con(real_con):
    return real_con


def q(con, text, **kw):
    from torchtalk import api

    return api.query(text, con=con, **kw)


def test_trace_matmul_reaches_its_kernel_definition(con, tree):
    line = line_of(tree, LA, "Tensor matmul(const Tensor & tensor1, const Tensor & tensor2)")
    assert line == 2180
    rows = q(con, "trace(matmul)").rows
    assert ("matmul", "kernel", "at::native::matmul", "CompositeImplicitAutograd", LA, line) in rows
    steps = {r[1] for r in rows}
    assert {"op", "kernel", "derivative"} <= steps


def test_trace_of_python_api_names_the_api(con):
    rows = q(con, "trace(torch.matmul)").rows
    assert any(r[1] == "python" and r[2] == "torch.matmul" for r in rows)
    assert any(r[1] == "kernel" and r[2] == "at::native::matmul" for r in rows)


def test_callees_of_matmul(con):
    rows = q(con, "callees(at::native::matmul)").rows
    assert {r[0] for r in rows} == {"at::native::matmul"}
    assert ("at::native::(static:aten/src/ATen/native/LinearAlgebra.cpp)::_matmul_impl", LA, 2183) in {(r[1], r[3], r[4]) for r in rows}


def test_callees_of_matmul_impl_lists_the_products(con):
    rows = q(con, "callees(_matmul_impl)").rows
    names = {r[1].rsplit("::", 1)[-1].split(".")[0] for r in rows}
    assert {"mm", "mv", "dot", "bmm"} <= names, sorted(names)


def test_gemm_is_ambiguous_and_lists_cpublas(con):
    with pytest.raises(Ambiguous) as exc:
        q(con, "callers(gemm)")
    # the overloads of cpublas::gemm are listed each with its own definition (Note [Overload ids])
    lines = exc.value.render().splitlines()
    assert ("    at::native::cpublas::gemm(TransposeType, TransposeType, int64_t, int64_t, int64_t, double, const double*,"
            " int64_t, const double*, int64_t, double, double*, int64_t)  aten/src/ATen/native/CPUBlas.cpp:139") in lines
    assert sum(1 for line in lines if line.startswith("    at::native::cpublas::gemm(")) == 10


def test_callers_of_cpublas_gemm_with_call_sites(con, tree):
    rows = q(con, "callers(gemm)", all_matches=True).rows
    cpublas = {(r[1], r[3], r[4]) for r in rows if split_sig(r[0])[0] == "at::native::cpublas::gemm"}
    assert ("at::native::(static:aten/src/ATen/native/LinearAlgebra.cpp)::addmm_impl_cpu_", LA, 1533) in cpublas
    # every call site is a real call of gemm at that line
    for _, f, line in cpublas:
        assert "gemm" in (tree / f).read_text().splitlines()[line - 1]
    # a name typed without its parameter list names all its overloads, one packet
    assert q(con, "callers(cpublas::gemm)").rows == tuple(r for r in rows if split_sig(r[0])[0] == "at::native::cpublas::gemm")


TC = "aten/src/ATen/native/TensorCompare.cpp"


def test_where_self_runs_its_own_overload_of_where(con, tree):
    """Issue 13: the five at::native::where are five nodes; where.self's
    kernel is the three-Tensor overload (TensorCompare.cpp:546), not
    `std::vector<Tensor> where(const Tensor&)` (:575), which is where's own."""
    three = "at::native::where(const Tensor&, const Tensor&, const Tensor&)"
    one = "at::native::where(const Tensor&)"
    rows = q(con, "trace(where.self)").rows
    kernels = {(r[2], r[3], r[4], r[5]) for r in rows if r[1] == "kernel"}
    assert {(three, key, TC, 546) for key in ("CPU", "CUDA", "MPS")} <= kernels
    assert not [k for k in kernels if k[0].startswith("at::native::where(") and k[0] != three]
    assert "Tensor where(const Tensor& condition, const Tensor& self, const Tensor& other)" in (
        tree / TC).read_text().splitlines()[545]
    assert {(r[2], r[3], r[4], r[5]) for r in q(con, "trace(where)").rows if r[:2] == ("where", "kernel")} == {
        (one, "CompositeImplicitAutograd", TC, 575)}
    assert {r[5] for r in q(con, "kernels(where.self)").rows if r[1] in ("CPU", "CUDA")} == {three}
    # each dispatch entry naming `where` gets the overload of its schema
    for op, line in (("where.ScalarSelf", 554), ("where.ScalarOther", 561), ("where.Scalar", 568)):
        assert {(r[4], r[5]) for r in q(con, f"trace({op})").rows if r[1] == "kernel"} == {(TC, line)}


def test_cumsum_out_is_its_structured_kernel_not_the_dimname_overload(con, tree):
    """cumsum.out's CPU/CUDA kernel is TORCH_IMPL_FUNC(cumsum_out) (ReduceOps.cpp:491),
    never the Dimname `cumsum_out` at ReduceOps.cpp:2199, which is cumsum.dimname_out's."""
    ro = "aten/src/ATen/native/ReduceOps.cpp"
    kernels = {(r[2], r[3], r[4], r[5]) for r in q(con, "trace(cumsum.out)").rows if r[1] == "kernel"}
    assert ("at::native::structured_cumsum_out::impl", "CPU", ro, 491) in kernels
    assert not [k for k in kernels if k[2:] == (ro, 2199)]
    assert {(r[2], r[4], r[5]) for r in q(con, "trace(cumsum.dimname_out)").rows if r[:2] == ("cumsum.dimname_out", "kernel")} == {
        ("at::native::cumsum_out", ro, 2199)}
    assert "Dimname dim" in (tree / ro).read_text().splitlines()[2198]


def test_impact_of_gemm_reaches_python_apis(con):
    rows = q(con, "impact(cpublas::gemm)").rows
    apis = {r[2] for r in rows if r[1] == "python"}
    assert "torch.mm" in apis, sorted(apis)[:20]
    assert {"op", "function", "python"} <= {r[1] for r in rows}


SMU = "aten/src/ATen/native/cuda/SoftMax.cu"


def test_paths_from_cuda_kernel_up_to_python(con):
    rows = q(con, "paths(cunn_SoftMaxForward -> python)").rows
    assert ("at::native::(anonymous:aten/src/ATen/native/cuda/SoftMax.cu)::cunn_SoftMaxForward", "torch._softmax", "_softmax", 2) in {
        r[:4] for r in rows}


def test_paths_from_python_down_to_cuda_kernels(con, tree):
    rows = q(con, "paths(torch._softmax -> cuda)").rows
    launch = {(r[1], r[4], r[5]) for r in rows}
    assert ("at::native::(anonymous:aten/src/ATen/native/cuda/SoftMax.cu)::cunn_SoftMaxForward", SMU, 876) in launch
    assert "cunn_SoftMaxForward<" in (tree / SMU).read_text().splitlines()[876 - 1]


def test_paths_from_softmax_warp_forward_to_python(con):
    rows = q(con, "paths(softmax_warp_forward -> python)", all_matches=True).rows
    assert any(r[1] == "torch._softmax" for r in rows)


def test_tests_of_matmul_include_test_linalg(con, tree):
    rows = q(con, "tests(matmul)").rows
    hit = {r[2:10] for r in rows if r[1] == "test/test_linalg.py::TestLinalg::test_matmul_45724"}  # the chain apart
    # named for the op, in a core suite: rank 0 (Note [Test ranking])
    assert (0, "named for it", "matmul", "name", "matmul", 0, "test/test_linalg.py", 6411) in hit
    assert "def test_matmul_45724" in (tree / "test/test_linalg.py").read_text().splitlines()[6411 - 1]


def test_tests_of_a_function_go_through_its_ops(con):
    rows = q(con, "tests(cpublas::gemm, depth=3)").rows
    assert {r[4] for r in rows} >= {"mm", "mm.out"}
    # gemm <- addmm_impl_cpu_ <- mm kernel: the shortest chain to op mm is 3 steps
    # (longer ones through at::mm calls exist too)
    assert min(r[7] for r in rows if r[4] == "mm") == 3


NF = "aten/src/ATen/native/native_functions.yaml"
ADD_CPU = ("at::native::(anonymous:UfuncCPUKernel_add.cpp)::add_kernel", "CPU (ufunc codegen)", NF, 579)
ADD_CUDA = ("at::native::add_kernel", "CUDA (ufunc codegen)", NF, 579)


def test_trace_add_reaches_the_stub_registrations_torchgen_generates(con):
    """add is a ufunc: its CPU/CUDA kernels and add_stub's registrations are
    generated from add.out's `ufunc_inner_loop:` (native_functions.yaml:579)."""
    for op in ("add.out", "add.Tensor"):
        rows = q(con, f"trace({op})").rows
        assert (op, "stub", "at::native::add_stub", "", "aten/src/ATen/native/BinaryOps.h", 56) in rows
        impls = {r[2:] for r in rows if r[1] == "stub_impl" and r[2].endswith("::add_kernel")}
        assert impls == {ADD_CPU, ADD_CUDA}
        assert (op, "ufunc_loop", "at::native::ufunc::add(T, T, T)", "Generic", "aten/src/ATen/native/ufunc/add.h", 15) in rows
    assert {r[0] for r in q(con, "trace(torch.add, step=stub_impl)").rows if r[2:] == ADD_CPU} >= {
        "add.Tensor", "add.out"}
    # sub's kernel calls add_stub (with -alpha): the same implementations
    assert {r[2:] for r in q(con, "trace(sub.out, step=stub_impl)").rows if r[3].endswith("codegen)")} == {
        ADD_CPU, ADD_CUDA}


def test_callees_of_add_stub_and_callers_of_its_inner_loop(con):
    assert q(con, "callees(at::native::add_stub)").rows == (
        ("at::native::add_stub", *ADD_CPU), ("at::native::add_stub", *ADD_CUDA))
    rows = q(con, "callers(ufunc::add)").rows
    assert {(r[1], r[2], r[3], r[4]) for r in rows} == {
        (fn, "ufunc_codegen", NF, line) for fn in (ADD_CPU[0], ADD_CUDA[0]) for line in (580, 581)}


def test_impact_of_the_add_inner_loop_goes_through_the_generated_code(con):
    rows = q(con, "impact(ufunc::add, depth=4)").rows
    fns = {r[2:7] for r in rows if r[1] == "function"}
    assert ("at::native::add_kernel", "at::native::ufunc::add(T, T, T)", 1, NF, 580) in fns
    assert ("at::native::add_stub", "at::native::(anonymous:UfuncCPUKernel_add.cpp)::add_kernel", 2, NF, 579) in fns
    assert ("at::native::structured_sub_out::impl", "at::native::add_stub", 3,
            "aten/src/ATen/native/BinaryOps.cpp", 436) in fns
    ops = {(r[2], r[3], r[4]) for r in rows if r[1] == "op"}
    # the generated CUDA kernel calls add_kernel, the CPU one add_stub
    assert {("add.out", "at::native::add_kernel", 2), ("add.out", "at::native::add_stub", 3),
            ("add.Tensor", "at::native::add_kernel", 2), ("sub.out", "at::native::structured_sub_out::impl", 4)} <= ops


def test_anonymous_namespace_name_matches_each_files_definition(con):
    """host_softmax is two nodes (Note [Internal linkage ids]): a name without
    the file lists both, grouped by file; with all=true both answer; the id
    pasted back answers for its own file only."""
    cpu = "at::native::(anonymous:aten/src/ATen/native/SoftMax.cpp)::host_softmax"
    cuda = "at::native::(anonymous:aten/src/ATen/native/cuda/SoftMax.cu)::host_softmax"
    for typed in ("host_softmax", "at::native::(anonymous)::host_softmax"):
        with pytest.raises(Ambiguous) as exc:
            q(con, f"callers({typed})")
        assert exc.value.render().splitlines()[1:] == [
            "  function in at::native::(anonymous:aten/src/ATen/native/SoftMax.cpp):",
            f"    {cpu}  aten/src/ATen/native/SoftMax.cpp:153",
            "  function in at::native::(anonymous:aten/src/ATen/native/cuda/SoftMax.cu):",
            f"    {cuda}  aten/src/ATen/native/cuda/SoftMax.cu:820",
        ]
    both = {(r[0], r[1], r[3], r[4]) for r in q(con, "callers(at::native::(anonymous)::host_softmax, all=true)").rows}
    assert both == {
        (cpu, "at::native::masked_softmax_cpu", "aten/src/ATen/native/SoftMax.cpp", 624),
        (cuda, "at::native::structured_log_softmax_cuda_out::impl", "aten/src/ATen/native/cuda/SoftMax.cu", 1072),
        (cuda, "at::native::structured_softmax_cuda_out::impl", "aten/src/ATen/native/cuda/SoftMax.cu", 1096),
    }
    assert {(r[0], r[1], r[3], r[4]) for r in q(con, f"callers({cuda})").rows} == {r for r in both if r[0] == cuda}
