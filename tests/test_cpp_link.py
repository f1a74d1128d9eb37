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


@pytest.fixture(scope="module")
def results():
    from torchtalk.datalog.parser import parse_file
    from torchtalk.datalog.runner import evaluate

    facts = [scan_file(rel, text.encode()) for rel, text in sorted(TREE.items())]
    rows, _, _ = resolve(facts)
    rows["dispatch"] = [
        ("exp.out", "CPU", "exp_out", YAML, 10),
        ("exp.out", "CUDA", "exp_out", YAML, 10),
        ("exp.out", "SparseCPU", "exp_sparse", YAML, 11),
        ("exp.out", "MPS", "exp_out_mps", YAML, 12),
    ]
    rows["structured_delegate"] = [("exp", "exp.out", YAML, 5)]
    program = parse_file(LINK)
    wanted = ["op_kernel_fn", "kernel_unlinked", "stub_impl", "op_stub", "op_stub_impl", "op_cuda_kernel"]
    return {k: sorted(v) for k, v in evaluate(program, None, outputs=wanted, facts=rows).items()}


def test_op_kernels_resolve_to_definitions_including_structured_delegates(results):
    impl = ("at::native::structured_exp_out::impl", "aten/src/ATen/native/UnaryOps.cpp", 3)
    sparse = ("at::native::exp_sparse", "aten/src/ATen/native/UnaryOps.cpp", 6)
    assert results["op_kernel_fn"] == [
        ("exp", "CPU", *impl), ("exp", "CUDA", *impl), ("exp", "SparseCPU", *sparse),
        ("exp.out", "CPU", *impl), ("exp.out", "CUDA", *impl), ("exp.out", "SparseCPU", *sparse),
    ]
    assert results["kernel_unlinked"] == [("exp.out", "MPS", "exp_out_mps", YAML, 12)]


def test_stubs_and_their_backend_implementations(results):
    cpu = ("at::native::exp_stub", "CPU", "at::native::(anonymous)::exp_kernel",
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
