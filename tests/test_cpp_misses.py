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
        ("at::native::(anonymous)::index_select_out_cuda_impl", (1548, 1560, 1590), "indexSelect"),
    ]:
        got = {(r[1].rpartition("::")[2], r[3]) for r in rows(real, "launches", c0=host, c2=f)}
        assert {(f"{kernels}SmallIndex", lines[0]), (f"{kernels}LargeIndex", lines[1]),
                (f"{kernels}LargeIndex", lines[2])} <= got
        assert {k for k, _n in got} == {f"{kernels}SmallIndex", f"{kernels}LargeIndex"}
