"""Precise tier on the real 2.6.0 tree: TUs that need headers from outside
the tree (Note [SDK headers] in extractors/clang/sdk.py) or a configured
header (torch/version.h, flags.TEMPLATES) parse, and the compiler's edges
are there at file:line. One TU per missing header of the whole-scope run:
Python.h and pybind11 (torch/csrc), cuDNN, MKL, NVTX, nlohmann/json, the
tree's miniz, torch/version.h, CUTLASS and CuTe (the attention kernels, parsed as CUDA host code); and ITT
and Kineto, which have no pinned headers, stay reported failures. The TUs
are parsed once."""

from __future__ import annotations

from pathlib import Path

import pytest

from extractors.base import ExtractContext
from tests.test_clang_real import Rows

pytestmark = pytest.mark.real_tree

DEVICE = "torch/csrc/Device.cpp"  # Python.h
STREAM = "torch/csrc/Stream.cpp"  # pybind11/pybind11.h
SIZE = "torch/csrc/Size.cpp"  # pybind11/pytypes.h
CUDNN = "aten/src/ATen/cudnn/Types.cpp"  # cudnn.h
TUNABLE = "aten/src/ATen/cuda/tunable/Tunable.cpp"  # torch/version.h (generated)
MKL = "aten/src/ATen/mkl/SparseBlas.cpp"  # mkl_spblas.h
FFT = "aten/src/ATen/native/mkl/SpectralOps.cpp"  # the wheel's `#elif AT_MKL_ENABLED()` branch
FLASH = "aten/src/ATen/native/transformers/cuda/flash_attn/kernels/flash_bwd_hdim192_fp16_sm80.cu"  # cute/
MEM_EFF_B = "aten/src/ATen/native/transformers/cuda/mem_eff_attention/kernels/cutlassB_bf16_aligned_k32_dropout.cu"
MEM_EFF_F = "aten/src/ATen/native/transformers/cuda/mem_eff_attention/kernels/cutlassF_f32_notaligned.cu"
NESTED_MM = "aten/src/ATen/native/nested/cuda/NestedTensorMatmul.cu"  # cutlass/gemm/device/...
ROWWISE = "aten/src/ATen/native/cuda/RowwiseScaledMM.cu"  # cutlass/core_io.h, cutlass/util/host_tensor.h
NVTX = "torch/csrc/cuda/shared/nvtx.cpp"  # nvToolsExt.h
AOTI = "torch/csrc/inductor/aoti_package/model_package_loader.cpp"  # miniz.h (third_party/miniz-3.0.2), nlohmann/json.hpp
ITT = "torch/csrc/itt_wrapper.cpp"  # ittnotify.h: no pinned headers
MODULE = "torch/csrc/Module.cpp"  # libshm.h (torch/lib/libshm), then Kineto's ActivityType.h: no pinned headers
PARSE = (DEVICE, STREAM, SIZE, CUDNN, TUNABLE, MKL, FFT, NVTX, AOTI, FLASH, MEM_EFF_B, MEM_EFF_F, NESTED_MM, ROWWISE)
FAIL = (ITT, MODULE)


@pytest.fixture(scope="module")
def parsed(tree: Path, sdk_headers: dict[str, Path], tmp_path_factory):
    from extractors.clang import run

    rows = Rows()
    stats = run(ExtractContext(tree, tmp_path_factory.mktemp("precise-sdk"), jobs=2), rows,
                [tree / f for f in (*PARSE, *FAIL)])
    return rows, stats


def test_each_parses(parsed) -> None:
    rows, stats = parsed
    assert {rel: v[0] for rel, v in stats.per_tu.items()} == {**{rel: "ok" for rel in PARSE},
                                                               **{rel: "fatal" for rel in FAIL}}
    assert rows.rel["precise_file"] == {(rel,) for rel in PARSE}


def test_itt_and_kineto_stay_reported_failures(parsed) -> None:
    """No wheel or release tarball pins ITT's or Kineto's headers (Note [SDK
    headers]). Module.cpp gets past libshm.h (its line 33) to Kineto's header."""
    rows, _ = parsed
    assert sorted(rows.warnings) == [
        (ITT, 1, f"precise: {ITT} does not parse: 'ittnotify.h' file not found"),
        ("torch/csrc/profiler/kineto_shim.h", 15, f"precise: {MODULE} does not parse: 'ActivityType.h' file not found"),
    ]


def test_python_bindings(parsed) -> None:
    """torch/csrc with Python.h and pybind11: the bindings' calls into the tree."""
    rows, _ = parsed
    # Device.cpp:102 `return THPUtils_packInt64(self->device.index());`
    index = "(static:torch/csrc/Device.cpp)::THPDevice_index"
    assert rows.at("calls_precise", DEVICE, 102) == {
        (index, "THPUtils_packInt64", DEVICE, 102), (index, "c10::Device::index", DEVICE, 102)}
    # Stream.cpp:125 `return THPDevice_New(c10::Device(...`
    assert rows.at("calls_precise", STREAM, 125) == {
        ("(static:torch/csrc/Stream.cpp)::THPStream_get_device", "THPDevice_New", STREAM, 125)}
    # Size.cpp:108 `if (torch::jit::tracer::isTracing() && isTracedZeroDimVar(item))`
    pynew = "(static:torch/csrc/Size.cpp)::THPSize_pynew"
    assert rows.at("calls_precise", SIZE, 108) == {
        (pynew, "(static:torch/csrc/Size.cpp)::isTracedZeroDimVar", SIZE, 108),
        (pynew, "torch::jit::tracer::isTracing", SIZE, 108)}


def test_cudnn_mkl_and_version_header(parsed) -> None:
    rows, _ = parsed
    # cudnn/Types.cpp:29 `return getCudnnDataTypeFromScalarType(tensor.scalar_type());`
    assert rows.at("calls_precise", CUDNN, 29) == {
        ("at::native::getCudnnDataType", "at::native::getCudnnDataTypeFromScalarType", CUDNN, 29),
        ("at::native::getCudnnDataType", "at::TensorBase::scalar_type", CUDNN, 29)}
    # mkl/SparseBlas.cpp:168, in add<c10::complex<double>>: `to_mkl_complex<double, MKL_Complex16>(alpha)`
    add = "at::mkl::sparse::add(sparse_operation_t, sparse_matrix_t, complex<double>, sparse_matrix_t, sparse_matrix_t*)"
    assert rows.at("calls_precise", MKL, 168) == {
        (add, "at::mkl::sparse::(anonymous:aten/src/ATen/mkl/SparseBlas.cpp)::to_mkl_complex", MKL, 168)}
    # tunable/Tunable.cpp:371 `if (value == GetPyTorchVersion())`; GetPyTorchVersion returns torch/version.h's TORCH_VERSION
    v = "at::cuda::tunable::TuningResultsValidator::"
    assert rows.at("calls_precise", TUNABLE, 371) == {
        (v + "ValidatePyTorchVersion", v + "GetPyTorchVersion", TUNABLE, 371)}


def test_nlohmann_and_miniz(parsed) -> None:
    rows, _ = parsed
    anon = "torch::inductor::(anonymous:torch/csrc/inductor/aoti_package/model_package_loader.cpp)::"
    # :261 `const nlohmann::json compile_flags = load_json_file(compile_flags_path);`
    assert rows.at("calls_precise", AOTI, 261) == {(anon + "compile_so", anon + "load_json_file", AOTI, 261)}
    # :339 `if (!mz_zip_reader_init_file(&zip_archive, model_package_path.c_str(), 0))`: miniz is in the tree
    loader = "torch::inductor::AOTIModelPackageLoader::AOTIModelPackageLoader(const string&, const string&)"
    assert rows.at("calls_precise", AOTI, 339) == {(loader, "mz_zip_reader_init_file", AOTI, 339)}


def test_cutlass_tus(parsed) -> None:
    """The CUTLASS/CuTe TUs, as CUDA host code (Note [CUDA host parse] in
    flags.py). The mem-efficient attention kernels' bodies are all under
    `#ifdef __CUDA_ARCH__`, which host code leaves out: they parse, with no
    call in them."""
    rows, stats = parsed
    # flash_bwd_hdim192_fp16_sm80.cu:12 `run_mha_bwd_hdim192<cutlass::half_t>(params, stream);`
    assert rows.at("calls_precise", FLASH, 12) == {
        ("pytorch_flash::run_mha_bwd_", "pytorch_flash::run_mha_bwd_hdim192", FLASH, 12)}
    assert stats.per_tu[MEM_EFF_B][1:] == stats.per_tu[MEM_EFF_F][1:] == (0, 0, 0)
    # RowwiseScaledMM.cu:598 `check_inputs(...)`, :600 `dispatch_fp8_rowwise_kernel_on_bias_dtype(...)`
    anon = "(anonymous:aten/src/ATen/native/cuda/RowwiseScaledMM.cu)::"
    assert rows.at("calls_precise", ROWWISE, 598) == {
        ("at::cuda::detail::f8f8bf16_rowwise", anon + "check_inputs", ROWWISE, 598)}
    assert rows.at("calls_precise", ROWWISE, 600) == {
        ("at::cuda::detail::f8f8bf16_rowwise", anon + "dispatch_fp8_rowwise_kernel_on_bias_dtype", ROWWISE, 600)}
    # NestedTensorMatmul.cu:448 `group_gemm_dispatch<scalar_t>(...)` inside AT_DISPATCH over
    # float, Half, BFloat16: the three overloads of the file's anonymous namespace and the template
    anon = "at::native::(anonymous:aten/src/ATen/native/nested/cuda/NestedTensorMatmul.cu)::group_gemm_dispatch"
    rest = ("*>&, const vector<{t}*>&, const vector<{t}*>&, const vector<int64_t>&, const vector<int64_t>&, "
            "const vector<int64_t>&, const vector<GemmCoord>&, int64_t)")
    assert rows.at("calls_precise", NESTED_MM, 448) == {
        ("at::native::bmm_nested_cuda", f"{anon}(Device, const vector<{t}" + rest.format(t=t), NESTED_MM, 448)
        for t in ("float", "Half", "BFloat16", "scalar_t")}
    # :468 `at::mm_out(output_unbind[i], ...)`: the op call the compiler names
    assert ("at::native::bmm_nested_cuda", "mm", NESTED_MM, 468, "compiler") in rows.rel["calls_op"]


def test_the_wheels_mkl_branch(parsed) -> None:
    """Note [Build configuration]: the configured headers say MKL is on, as
    in torch 2.6.0's wheel, so mkl/SpectralOps.cpp's MKL branch is the one
    parsed: `_exec_fft` calls permute at :452 (the runtime's `_fft_c2c ->
    permute`), and the pocketfft branch's at::empty (:266) is not compiled."""
    rows, _ = parsed
    exec_fft = "at::native::(static:aten/src/ATen/native/mkl/SpectralOps.cpp)::_exec_fft"
    assert (exec_fft, "permute", FFT, 452, "compiler") in rows.at("calls_op", FFT, 452)
    assert rows.at("calls_op", FFT, 266) == set()
