"""rules/link.dl: ops linked to their C++ kernels, stubs, stub implementations
and CUDA kernels, on facts extracted from a small hand-written tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from extractors.cpp.resolve import resolve
from extractors.cpp.scan import scan_file

LINK = Path(__file__).resolve().parents[1] / "rules" / "link.dl"
YAML = "aten/src/ATen/native/native_functions.yaml"

TREE = {
    "aten/src/ATen/native/UnaryOps.h": (
        "namespace at::native {\nDECLARE_DISPATCH(unary_fn, exp_stub)\n}\n"
    ),
    "aten/src/ATen/native/UnaryOps.cpp": (
        "namespace at::native {\n"
        "DEFINE_DISPATCH(exp_stub);\n"
        "TORCH_IMPL_FUNC(exp_out) (const Tensor& self, const Tensor& result) {\n"
        "  exp_stub(device_type(), *this);\n"
        "}\n"
        "Tensor exp_sparse(const Tensor& self) { return helper(self); }\n"
        "Tensor helper(const Tensor& self) { return self; }\n"
        "}\n"
    ),
    "aten/src/ATen/native/cpu/UnaryOpsKernel.cpp": (
        "namespace at::native {\nnamespace {\nvoid exp_kernel(TensorIteratorBase& iter) {}\n}\n"
        "REGISTER_DISPATCH(exp_stub, &exp_kernel)\n}\n"
    ),
    "aten/src/ATen/native/cuda/UnaryOpsKernel.cu": (
        "namespace at::native {\n"
        "__global__ void exp_cuda_kernel(float* x) {}\n"
        "void launch_exp(TensorIteratorBase& iter) { exp_cuda_kernel<<<1, 1>>>(p); }\n"
        "void exp_kernel_cuda(TensorIteratorBase& iter) { launch_exp(iter); }\n"
        "REGISTER_DISPATCH(exp_stub, &exp_kernel_cuda);\n"
        "}\n"
    ),
}


def link_rows(tree: dict[str, str], given: dict[str, list[tuple]], wanted: list[str]) -> dict[str, list[tuple]]:
    """rules/link.dl's `wanted` relations, sorted, on the facts the C++ fast
    tier extracts from `tree` plus the `given` rows (the ops layer's)."""
    from torchtalk.datalog.parser import parse_file
    from torchtalk.datalog.runner import evaluate

    rows, _, _ = resolve([scan_file(rel, text.encode()) for rel, text in sorted(tree.items())])
    rows.update(given)
    return {k: sorted(v) for k, v in evaluate(parse_file(LINK), None, outputs=wanted, facts=rows).items()}


@pytest.fixture(scope="module")
def results():
    rows = {}
    rows["dispatch"] = [
        ("exp.out", "CPU", "exp_out", YAML, 10),
        ("exp.out", "CUDA", "exp_out", YAML, 10),
        ("exp.out", "SparseCPU", "exp_sparse", YAML, 11),
        ("exp.out", "MPS", "exp_out_mps", YAML, 12),
    ]
    rows["structured_delegate"] = [("exp", "exp.out", YAML, 5)]
    rows["structured"] = [("exp.out", YAML, 9)]  # CPU/CUDA name TORCH_IMPL_FUNC(exp_out) (Note [Kernel overloads])
    wanted = ["op_kernel_fn", "kernel_unlinked", "stub_impl", "op_stub", "op_stub_impl", "op_cuda_kernel"]
    return link_rows(TREE, rows, wanted)


def test_op_kernels_resolve_to_definitions_including_structured_delegates(results):
    impl = ("at::native::structured_exp_out::impl", "aten/src/ATen/native/UnaryOps.cpp", 3)
    sparse = ("at::native::exp_sparse", "aten/src/ATen/native/UnaryOps.cpp", 6)
    assert results["op_kernel_fn"] == [
        ("exp", "CPU", *impl), ("exp", "CUDA", *impl), ("exp", "SparseCPU", *sparse),
        ("exp.out", "CPU", *impl), ("exp.out", "CUDA", *impl), ("exp.out", "SparseCPU", *sparse),
    ]
    assert results["kernel_unlinked"] == [("exp.out", "MPS", "exp_out_mps", YAML, 12)]


def test_stubs_and_their_backend_implementations(results):
    cpu = ("at::native::exp_stub", "CPU", "at::native::(anonymous:aten/src/ATen/native/cpu/UnaryOpsKernel.cpp)::exp_kernel",
           "aten/src/ATen/native/cpu/UnaryOpsKernel.cpp", 5)
    cuda = ("at::native::exp_stub", "CUDA", "at::native::exp_kernel_cuda",
            "aten/src/ATen/native/cuda/UnaryOpsKernel.cu", 5)
    assert results["stub_impl"] == [cpu, cuda]
    assert results["op_stub"] == [
        ("exp", "CPU", "at::native::exp_stub"), ("exp", "CUDA", "at::native::exp_stub"),
        ("exp.out", "CPU", "at::native::exp_stub"), ("exp.out", "CUDA", "at::native::exp_stub"),
    ]
    assert [r for r in results["op_stub_impl"] if r[0] == "exp"] == [("exp", *cpu), ("exp", *cuda)]


def test_ops_reach_the_cuda_kernels_launched_below_their_stub_implementations(results):
    launch = ("at::native::exp_cuda_kernel", "aten/src/ATen/native/cuda/UnaryOpsKernel.cu", 3)
    assert results["op_cuda_kernel"] == [("exp", *launch), ("exp.out", *launch)]


UFUNC_TREE = {
    "aten/src/ATen/native/BinaryOps.h": (
        "namespace at::native {\nDECLARE_DISPATCH(structured_binary_fn_alpha, add_stub)\n}\n"
    ),
    "aten/src/ATen/native/ufunc/add.h": (
        "namespace at {\nnamespace native {\nnamespace ufunc {\n"
        "template <typename T> T add(T self, T other, T alpha) { return self + alpha * other; }\n"
        "}}}\n"
    ),
    "aten/src/ATen/native/BinaryOps.cpp": (
        "namespace at::native {\n"
        "TORCH_IMPL_FUNC(sub_out) (const Tensor& self, const Tensor& result) {\n"
        "  add_stub(device_type(), *this, -alpha);\n"
        "}\n"
        "}\n"
    ),
}


@pytest.fixture(scope="module")
def ufunc_results():
    """add.out as in 2.6: a ufunc whose stub registrations torchgen generates."""
    rows = {}
    rows["ufunc_inner_loop"] = [("add.out", "Generic", "add", "All", YAML, 20),
                                ("add.out", "CUDAFunctor", "AddFunctor", "Float", YAML, 21)]
    rows["ufunc_stub_register"] = [
        ("at::native::add_stub", "CPU", "at::native::(anonymous:UfuncCPUKernel_add.cpp)::add_kernel", "add.out", "UfuncCPUKernel_add.cpp", YAML, 19),
        ("at::native::add_stub", "CUDA", "at::native::add_kernel", "add.out", "UfuncCUDA_add.cu", YAML, 19),
    ]
    rows["dispatch"] = [("add.out", "CPU", "ufunc_add_CPU", YAML, 19), ("add.out", "CUDA", "ufunc_add_CUDA", YAML, 19),
                        ("sub.out", "CPU", "sub_out", YAML, 30)]
    rows["structured_delegate"] = [("add.Tensor", "add.out", YAML, 5)]
    rows["structured"] = [("add.out", YAML, 18), ("sub.out", YAML, 29)]
    wanted = ["stub_impl_via", "ufunc_loop_call", "ufunc_entry", "op_stub", "op_stub_impl", "kernel_unlinked"]
    return link_rows(UFUNC_TREE, rows, wanted)


def test_ufunc_stub_registrations_are_generated_code(ufunc_results):
    cpu = ("at::native::add_stub", "CPU", "at::native::(anonymous:UfuncCPUKernel_add.cpp)::add_kernel", YAML, 19)
    cuda = ("at::native::add_stub", "CUDA", "at::native::add_kernel", YAML, 19)
    assert ufunc_results["stub_impl_via"] == [(*cpu, "ufunc_codegen"), (*cuda, "ufunc_codegen")]
    # the generated CPU kernel calls the stub (the CUDA one calls add_kernel directly);
    # so does a kernel written in the tree (sub's)
    assert ufunc_results["op_stub"] == [
        ("add.Tensor", "CPU", "at::native::add_stub"), ("add.out", "CPU", "at::native::add_stub"),
        ("sub.out", "CPU", "at::native::add_stub"),
    ]
    assert [r[1:] for r in ufunc_results["op_stub_impl"] if r[0] == "sub.out"] == [
        ("at::native::add_stub", *cpu[1:]), ("at::native::add_stub", *cuda[1:])]
    # where the generated kernels enter the graph: the stub for CPU, its CUDA implementation for CUDA
    assert ufunc_results["ufunc_entry"] == [
        ("add.Tensor", "CPU", "at::native::add_stub", YAML, 19), ("add.Tensor", "CUDA", "at::native::add_kernel", YAML, 19),
        ("add.out", "CPU", "at::native::add_stub", YAML, 19), ("add.out", "CUDA", "at::native::add_kernel", YAML, 19),
    ]
    # the generated kernels themselves are not in the tree
    assert [r[2] for r in ufunc_results["kernel_unlinked"]] == ["ufunc_add_CPU", "ufunc_add_CUDA"]


def test_generated_kernels_run_the_inner_loops_of_their_keys(ufunc_results):
    # Generic runs on both backends; CUDAFunctor names a hand-written functor, not a ufunc:: loop
    assert ufunc_results["ufunc_loop_call"] == [
        ("at::native::(anonymous:UfuncCPUKernel_add.cpp)::add_kernel", "at::native::ufunc::add", "Generic", YAML, 20),
        ("at::native::add_kernel", "at::native::ufunc::add", "Generic", YAML, 20),
    ]
