"""Calls and launches the C++ fast tier used to miss, on the real PyTorch
2.6.0 tree (issue 13, "Missed answers"): each test asserts the right row with
file:line present and the wrong one absent."""

from __future__ import annotations

from pathlib import Path

import pytest

from extractors import cpp
from extractors.base import ExtractContext

pytestmark = pytest.mark.real_tree

CUDA = "aten/src/ATen/native/cuda"


@pytest.fixture(scope="session")
def real(tree: Path) -> cpp.Run:
    from torchtalk.paths import cache_dir

    return cpp.run(ExtractContext(root=tree, cache_dir=cache_dir() / "tests" / "cpp-fast", jobs=2))


def rows(run: cpp.Run, relation: str, **where) -> set[tuple]:
    """Rows of `relation` whose columns (c0, c1, ...) equal the given values."""
    return {r for r in run.rows.get(relation, []) if all(r[int(k[1:])] == v for k, v in where.items())}


def line(tree: Path, file: str, n: int) -> str:
    return (tree / file).read_text(errors="replace").splitlines()[n - 1]


def test_launches_behind_nested_macros(real: cpp.Run, tree: Path):
    """TensorTopK.cu: RUN_T(uint32_t) (:897) -> RUN_DIM -> RUN_MB -> RUN_K, whose
    `LAUNCH_FUNCTION_NAME<...>(...)` is `mbtopk::launch` / `sbtopk::launch`."""
    f = f"{CUDA}/TensorTopK.cu"
    assert line(tree, f, 897).strip() == "RUN_T(uint32_t);" and line(tree, f, 899).strip() == "RUN_T(uint64_t);"
    host = "at::native::launch_gather_topk_kernel"
    got = {(r[1], r[3]) for r in rows(real, "calls", c0=host, c2=f)}
    assert {(f"at::native::{ns}::launch", n) for ns in ("mbtopk", "sbtopk") for n in (897, 899)} <= got
    # ... which launch the kernels, at their <<<>>> lines
    launched = {(r[0], r[1], r[3]) for r in rows(real, "launches", c2=f)}
    assert {("at::native::sbtopk::launch", "at::native::sbtopk::gatherTopK", 200),
            ("at::native::mbtopk::launch", "at::native::mbtopk::radixFindKthValues", 708),
            ("at::native::mbtopk::launch", "at::native::mbtopk::gatherTopK", 742)} <= launched


def test_a_macro_defined_again_expands_by_position(real: cpp.Run, tree: Path):
    """Indexing.cu defines SMALL_INDEX / LARGE_INDEX at :1027, :1202 and :1500
    (#undef between): index_add's uses (:1077-:1126) launch indexFunc*, not indexSelect*."""
    f = f"{CUDA}/Indexing.cu"
    assert line(tree, f, 1077).strip() == "SMALL_INDEX(scalar_t, index_t, unsigned int, 1, 1, -2);"
    for host, lines, kernels in [
        ("at::native::index_add_cuda_impl", (1077, 1089, 1126), "indexFunc"),
        ("at::native::index_reduce_func_cuda_impl", (1252, 1264, 1301), "indexFunc"),
        ("at::native::(anonymous:aten/src/ATen/native/cuda/Indexing.cu)::index_select_out_cuda_impl", (1548, 1560, 1590), "indexSelect"),
    ]:
        got = {(r[1].rpartition("::")[2], r[3]) for r in rows(real, "launches", c0=host, c2=f)}
        assert {(f"{kernels}SmallIndex", lines[0]), (f"{kernels}LargeIndex", lines[1]),
                (f"{kernels}LargeIndex", lines[2])} <= got
        assert {k for k, _n in got} == {f"{kernels}SmallIndex", f"{kernels}LargeIndex"}


def test_a_stub_passed_as_an_argument_is_called_by_the_caller(real: cpp.Run, tree: Path):
    """ReduceOps.cpp:496 `impl_func_cum_ops(self, dim, result, cumsum_stub)`: the
    callee calls the stub on the caller's behalf."""
    f = "aten/src/ATen/native/ReduceOps.cpp"
    assert "impl_func_cum_ops(self, dim, result, cumsum_stub);" in line(tree, f, 496)
    assert ("at::native::structured_cumsum_out::impl", "at::native::cumsum_stub", f, 496) in real.rows["stub_call"]
    assert ("at::native::structured_cumprod_out::impl", "at::native::cumprod_stub", f, 504) in real.rows["stub_call"]
    # the callee's own call of its parameter `stub` names no stub
    assert not rows(real, "stub_call", c0="at::native::impl_func_cum_ops")


def test_functors_through_templates(real: cpp.Run, tree: Path):
    """Sort.cu:372-378 `sortCommon(SmallBitonicSort{}, ...)`: sortCommon(Sorter sorter)
    calls `sorter.template sort<A>(...)`, so the caller reaches C::sort, which launches."""
    f = f"{CUDA}/Sort.cu"
    assert "sortCommon(SmallBitonicSort{}, key, value, dim, descending);" in line(tree, f, 372)
    got = {(r[1], r[3], r[4]) for r in rows(real, "calls", c0="at::native::sortKeyValueInplace", c2=f)}
    assert {("at::native::SmallBitonicSort::sort", 372, "functor"),
            ("at::native::WarpMergeSort::sort", 375, "functor"),
            ("at::native::MediumRadixSort::sort", 378, "functor")} <= got
    launched = {(r[0], r[1]) for r in rows(real, "launches", c2=f)}
    assert {("at::native::SmallBitonicSort::sort", "at::native::bitonicSortKVInPlace"),
            ("at::native::WarpMergeSort::sort", "at::native::warpMergeSortKVInPlace"),
            ("at::native::MediumRadixSort::fixed_size_sort", "at::native::radixSortKVInPlace")} <= launched
    assert ("at::native::MediumRadixSort::sort", "at::native::MediumRadixSort::fixed_size_sort") in {
        (r[0], r[1]) for r in rows(real, "calls", c2=f)}


def test_kernels_held_in_local_variables(real: cpp.Run, tree: Path):
    """flash_fwd_launch_template.h:93 `kernel<<<...>>>(params)` where `auto kernel =
    &flash_fwd_kernel<...>;`: the launch is of flash_fwd_kernel, never of "kernel"."""
    f = "aten/src/ATen/native/transformers/cuda/flash_attn/flash_fwd_launch_template.h"
    assert line(tree, f, 93).strip().startswith("kernel<<<")
    assert rows(real, "launches", c2=f, c3=93) == {
        ("pytorch_flash::run_flash_fwd", "pytorch_flash::flash_fwd_kernel", f, 93, "<<<>>>")}
    assert rows(real, "launches", c2=f, c3=128) == {
        ("pytorch_flash::run_flash_splitkv_fwd", "pytorch_flash::flash_fwd_splitkv_kernel", f, 128, "<<<>>>")}
    # DistanceKernel.cu: `auto impl_fptr = cdist_kernel_cuda_impl<...>;` then reassigned; launched at :234
    d = f"{CUDA}/DistanceKernel.cu"
    assert {r[1] for r in rows(real, "launches", c2=d, c3=234)} == {
        "at::native::(anonymous:aten/src/ATen/native/cuda/DistanceKernel.cu)::cdist_kernel_cuda_impl"}
    # no launch anywhere is of a local variable's bare name
    kernels = {r[0] for r in real.rows["kernel"]}
    assert not [r for r in real.rows["launches"] if r[1] not in kernels]


def test_using_declarations_reach_their_target(real: cpp.Run, tree: Path):
    """aten/src/ATen/cuda/detail/IndexUtils.cuh:10 `using at::native::canUse32BitIndexMath;`:
    `cuda::detail::canUse32BitIndexMath(x)` (Normalization.cu, Sorting.cu, ...) is
    at::native::canUse32BitIndexMath; every call written in native/cuda is found."""
    import re

    assert line(tree, "aten/src/ATen/cuda/detail/IndexUtils.cuh", 10) == "using at::native::canUse32BitIndexMath;"
    written = set()
    for path in sorted((tree / CUDA).rglob("*")):
        if path.suffix in (".cu", ".cuh", ".cpp", ".h"):
            for n, text in enumerate(path.read_text(errors="replace").splitlines(), 1):
                if re.search(r"\bcanUse32BitIndexMath\(", text) and not text.lstrip().startswith("//"):
                    written.add((path.relative_to(tree).as_posix(), n))
    found = {(r[2], r[3]) for r in real.rows["calls"]
             if r[1] == "at::native::canUse32BitIndexMath" and r[2].startswith(CUDA + "/")}
    assert len(written) >= 70 and found == written
    assert {f"{CUDA}/{f}" for f in ("Normalization.cu", "Indexing.cu", "Sorting.cu", "ReplicationPadding.cu")} <= {
        f for f, _n in found}


def test_namespace_aliases(real: cpp.Run, tree: Path):
    """torch/csrc/api/src/nn/modules/activation.cpp: `namespace F = torch::nn::functional;`
    then `F::prelu(input, weight)` (:192) is torch::nn::functional::prelu."""
    f = "torch/csrc/api/src/nn/modules/activation.cpp"
    assert line(tree, f, 192).strip() == "return F::prelu(input, weight);"
    assert rows(real, "calls", c2=f, c3=192) == {
        ("torch::nn::PReLUImpl::forward", "torch::nn::functional::prelu", f, 192, "qualified")}


def test_internal_linkage_functions_belong_to_their_file(real: cpp.Run, tree: Path):
    """Note [Internal linkage]: Copy.cpp:83 `empty({BLOCK_SZ, BLOCK_SZ}, self.options())`
    was taken as MetalAten.mm's static at::native::metal::empty; RNN.cu:273's
    DEVICE_LINEAR_GET -> `IndexToOffset<...>::get` as IndexKernel.cpp's anonymous
    IndexToOffset, not the one RNN.cu's `using at::cuda::detail::IndexToOffset;` names."""
    copy = "aten/src/ATen/native/Copy.cpp"
    assert "empty({BLOCK_SZ, BLOCK_SZ}, self.options())" in line(tree, copy, 83)
    assert not [r for r in real.rows["calls"] if r[1] == "at::native::metal::(static:aten/src/ATen/native/metal/MetalAten.mm)::empty" and r[2] != (
        "aten/src/ATen/native/metal/MetalAten.mm")]
    rnn = f"{CUDA}/RNN.cu"
    got = {r[1] for r in rows(real, "calls", c2=rnn) if r[1].endswith("IndexToOffset::get")}
    assert got == {"at::cuda::detail::IndexToOffset::get"}
