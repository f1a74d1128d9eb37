"""Walks keep their dispatch key (Note [Walks keep their key] in rules/graph.dl),
on the real PyTorch 2.6.0 tree: a walk from an op's kernel for a key reaches
only what can run under it. The checks read the fact tables directly for what
they compare against (which functions are defined only in CUDA source), so
they do not trust the rules' own device table."""

from __future__ import annotations

from collections import defaultdict

import pytest

pytestmark = pytest.mark.real_tree

CUDA_FAMILY = {"CUDA", "SparseCUDA", "SparseCsrCUDA", "QuantizedCUDA", "NestedTensorCUDA"}
COMPOSITE = {"CompositeImplicitAutograd", "CompositeExplicitAutograd",
             "CompositeExplicitAutogradNonFunctional", "CompositeImplicitAutogradNestedTensor", "ZeroTensor"}


@pytest.fixture(scope="module")
def con(real_con):
    return real_con


def q(con, text):
    from torchtalk import api

    return api.query(text, con=con, limit=None)


def _eval(con, text: str, outputs: list[str]) -> dict[str, list[tuple]]:
    """Evaluate a program that includes the rule library on the real DB."""
    from torchtalk.datalog.engines.duckdb import DuckDBEngine
    from torchtalk.datalog.parser import parse_text
    from torchtalk.query.derived import use_derived
    from torchtalk.query.library import RULES_DIR

    program = parse_text(text, "test_keys_real.dl", base=RULES_DIR)
    program, tables = use_derived(program, con)
    return DuckDBEngine().run(program, con, outputs, {}, tables=tables)


@pytest.fixture(scope="module")
def every_kernel(con):
    """kernels(op) for every op of native_functions.yaml, at the default depth."""
    out = _eval(con, '#include "kernels.dl"\nkernels_arg(o) :- op(o, _, _, _, _, _).\nkernels_depth(5).\n',
                ["kernels"])
    return out["kernels"]


def test_no_cuda_kernel_under_a_non_cuda_key(every_kernel):
    keys = defaultdict(int)
    for _op, key, *_ in every_kernel:
        keys[key] += 1
    assert len(every_kernel) > 20_000  # the walks still find the kernels that run
    assert keys["CUDA"] > 10_000
    wrong = sorted({key for key in keys if key not in CUDA_FAMILY | COMPOSITE})
    assert wrong == []


def test_walks_on_cpu_reach_no_cuda_only_function(con):
    """A walk from a CPU-family kernel never enters a function that is defined
    only in CUDA source (.cu/.cuh), nor a __global__ kernel. Functions of
    anonymous namespaces are one node per file (Note [Internal linkage ids]):
    fractional_max_pool3d_backward_out_frame is a CPU function in
    FractionalMaxPool3d.cpp, reached, and a __global__ kernel in
    cuda/FractionalMaxPool3d.cu, not reached."""
    cuda_only = {fn for (fn,) in con.execute(
        "SELECT fn FROM func GROUP BY fn HAVING bool_and(lang = 'cuda')").fetchall()}
    kernels = {k for (k,) in con.execute("SELECT kernel FROM kernel").fetchall()}
    out = _eval(con, '#include "graph.dl"\n'
                '.decl seed(op: symbol)\nseed(o) :- op(o, _, _, _, _, _).\n'
                'entry_need(o) :- seed(o).\n'
                'down_seed(fn, v) :- seed(o), op_entry(o, k, fn, _, _), key_state(k, v), match(".*CPU", k).\n'
                'down_limit(6).\n'
                '.decl cpu_reach(fn: symbol, device: symbol, node: symbol)\n'
                'cpu_reach(fn, v, n) :- down_seed(fn, u), down_dist(fn, u, v, n, _).\n',
                ["cpu_reach"])
    reached = out["cpu_reach"]
    assert len(reached) > 50_000
    bad = sorted({(fn, n) for fn, _v, n in reached if n in cuda_only or n in kernels})
    assert bad == []
    frame = "at::native::(anonymous:aten/src/ATen/native/{})::fractional_max_pool3d_backward_out_frame"
    cpu, cuda = frame.format("FractionalMaxPool3d.cpp"), frame.format("cuda/FractionalMaxPool3d.cu")
    assert con.execute("SELECT file, line FROM func WHERE fn = ?", [cpu]).fetchall() == [
        ("aten/src/ATen/native/FractionalMaxPool3d.cpp", 294)]
    assert con.execute("SELECT kernel, file, line FROM kernel WHERE name = 'fractional_max_pool3d_backward_out_frame'"
                       ).fetchall() == [(cuda, "aten/src/ATen/native/cuda/FractionalMaxPool3d.cu", 121)]
    assert cpu in {n for _fn, _v, n in reached} and cuda not in {n for _fn, _v, n in reached}


def test_mps_topk_reaches_no_cuda_kernel(con):
    rows = q(con, "kernels(topk)").rows
    assert rows, "topk's CUDA kernel launches something"
    assert {r[1] for r in rows} == {"CUDA"}


def test_hardsigmoid_on_cpu_runs_its_cpu_stub_implementation_only(con):
    """hardsigmoid_ delegates to hardsigmoid.out, whose structured kernel for
    CPU and CUDA calls hardsigmoid_stub: the CPU walk reaches the CPU
    registration (aten/src/ATen/native/cpu/Activation.cpp), never the CUDA one."""
    out = _eval(con, '#include "graph.dl"\n'
                'entry_need("hardsigmoid_").\n'
                'down_seed(fn, v) :- op_entry("hardsigmoid_", k, fn, _, _), key_state(k, v).\n'
                'down_limit(4).\n'
                '.decl hs(key: symbol, node: symbol)\n'
                'hs(k, n) :- op_entry("hardsigmoid_", k, fn, _, _), key_state(k, u), down_dist(fn, u, _, n, _).\n',
                ["hs"])
    by_key = defaultdict(set)
    for key, node in out["hs"]:
        by_key[key].add(node)
    stub = "at::native::hardsigmoid_stub"
    assert stub in by_key["CPU"] and stub in by_key["CUDA"]
    cpu_impl = "at::native::(anonymous:aten/src/ATen/native/cpu/Activation.cpp)::hardsigmoid_kernel"
    regs = dict(con.execute(
        "SELECT key, file FROM stub_register WHERE stub = ? AND fn = ?", [stub, cpu_impl]).fetchall())
    assert regs.get("CPU", "").endswith("native/cpu/Activation.cpp")
    cuda_file = "aten/src/ATen/native/cuda/ActivationHardsigmoidKernel.cu"
    cuda_fns = {fn for (fn,) in con.execute("SELECT fn FROM func WHERE file = ?", [cuda_file]).fetchall()}
    assert cuda_fns
    assert not (by_key["CPU"] & {n for n in cuda_fns if n != cpu_impl} - _shared(con, cuda_fns))
    assert "at::native::vectorized_elementwise_kernel" not in by_key["CPU"]
    assert "at::native::vectorized_elementwise_kernel" in by_key["CUDA"]


def _shared(con, fns) -> set[str]:
    """Those of `fns` that also have a definition outside CUDA source (one
    node for several definitions: not CUDA-only)."""
    return {fn for (fn,) in con.execute(
        "SELECT fn FROM func WHERE lang <> 'cuda' AND fn IN (SELECT unnest(?))", [sorted(fns)]).fetchall()}


def test_bmm_on_cuda_stays_on_cuda(con):
    """The CUDA kernel of bmm (structured_bmm_out_cuda) reaches no CPU
    per-capability kernel (aten/src/ATen/native/cpu/), e.g. the CPU gelu."""
    out = _eval(con, '#include "graph.dl"\n'
                'down_seed("at::native::structured_bmm_out_cuda::impl", "CUDA").\n'
                'down_limit(6).\n'
                '.decl r(node: symbol)\n'
                'r(n) :- down_dist("at::native::structured_bmm_out_cuda::impl", "CUDA", _, n, _).\n',
                ["r"])
    reached = {n for (n,) in out["r"]}
    assert "at::native::structured_bmm_out_cuda::impl" in reached and len(reached) > 20
    cpu_only = {fn for (fn,) in con.execute(
        "SELECT fn FROM func GROUP BY fn HAVING bool_and(file LIKE 'aten/src/ATen/native/cpu/%')").fetchall()}
    assert sorted(reached & cpu_only) == []


def _kernels(con, text: str) -> set[tuple]:
    """(op, key, kernel's last name, host, file, line) of a kernels(...) query."""
    return {(r["op"], r["key"], r["kernel"].rpartition("::")[2], r["host"], r["file"], r["line"])
            for r in q(con, text).records()}


TOPK = "aten/src/ATen/native/cuda/TensorTopK.cu"
SORT = "aten/src/ATen/native/cuda/Sort.cu"
IDX = "aten/src/ATen/native/cuda/Indexing.cu"


def test_topk_launches_through_nested_macros_and_functors(con):
    """TensorTopK.cu:820-899 RUN_T -> RUN_DIM -> RUN_MB -> RUN_K reach
    mbtopk::launch / sbtopk::launch; sortCommon(SmallBitonicSort{}, ...) reaches
    the sort kernels (SortUtils.cuh), each at its <<<>>> line; nothing under MPS."""
    got = _kernels(con, "kernels(topk, key=CUDA)")
    assert {("topk", "CUDA", "gatherTopK", "at::native::mbtopk::launch", TOPK, 742),
            ("topk", "CUDA", "gatherTopK", "at::native::sbtopk::launch", TOPK, 200),
            ("topk", "CUDA", "radixFindKthValues", "at::native::mbtopk::launch", TOPK, 708),
            ("topk", "CUDA", "bitonicSortKVInPlace", "at::native::SmallBitonicSort::sort", SORT, 82),
            ("topk", "CUDA", "warpMergeSortKVInPlace", "at::native::WarpMergeSort::sort", SORT, 147),
            ("topk", "CUDA", "radixSortKVInPlace", "at::native::MediumRadixSort::fixed_size_sort", SORT, 265),
            } <= got
    assert not [r for r in q(con, "kernels(topk)").rows if r[1] == "MPS"]


def test_index_add_launches_its_own_kernels_not_index_selects(con):
    """Indexing.cu defines SMALL_INDEX three times: index_add's expands to indexFunc*."""
    got = _kernels(con, "kernels(index_add, key=CUDA)")
    assert ("index_add", "CUDA", "indexFuncSmallIndex", "at::native::index_add_cuda_impl", IDX, 1077) in got
    assert {k for _o, _k, k, *_ in got} >= {"indexFuncSmallIndex", "indexFuncLargeIndex"}
    assert not [k for _o, _k, k, *_ in got if k.startswith("indexSelect")]


def test_cumsum_reaches_its_scan_kernels_through_a_stub_passed_as_argument(con):
    """impl_func_cum_ops(self, dim, result, cumsum_stub) (ReduceOps.cpp:496)."""
    got = _kernels(con, "kernels(cumsum, key=CUDA)")
    assert ("cumsum", "CUDA", "tensor_kernel_scan_innermost_dim", "at::native::scan_innermost_dim",
            "aten/src/ATen/native/cuda/ScanUtils.cuh", 435) in got


def test_flash_attention_launches_the_kernel_held_in_a_local(con):
    got = _kernels(con, "kernels(_flash_attention_forward, key=CUDA)")
    kernels = {k for _o, _k, k, *_ in got}
    assert {"flash_fwd_kernel", "flash_fwd_splitkv_kernel"} <= kernels and "kernel" not in kernels


def test_walks_read_at_the_launches_keep_every_launch(con):
    """down_host_dist and down_host_res (Note [Walks read at the launches] in
    rules/graph.dl) are down_dist's and down_res's rows at the hosts of
    launches, none missing and none more, for the ops of every name
    starting with "a" (each kernel's walk toward the cards, as kernels(op)'s)."""
    out = _eval(con, '#include "kernels.dl"\nkernels_arg(o) :- op(o, _, _, _, _, _), match("a.*", o).\n'
                'kernels_depth(5).\n'
                '.decl host(h: symbol)\nhost(h) :- launches(h, _, _, _, _).\n'
                '.decl dist(s: symbol, u: symbol, v: symbol, c: symbol, d: number)\n'
                'dist(s, u, v, c, d) :- down_dist(s, u, v, c, d), host(c).\n'
                '.decl res(s: symbol, u: symbol, v: symbol, c: symbol, r: symbol)\n'
                'res(s, u, v, c, r) :- down_res(s, u, v, c, r), host(c).\n',
                ["dist", "res", "down_host_dist", "down_host_res", "down_dist"])
    assert len(out["down_dist"]) > 10 * len(out["dist"])  # most nodes a walk reaches launch nothing
    assert len(out["dist"]) > 500
    assert sorted(out["down_host_dist"]) == sorted(out["dist"])
    assert sorted(out["down_host_res"]) == sorted(out["res"])
    assert {r for *_, r in out["res"]} == {"resolved", "guess"}
