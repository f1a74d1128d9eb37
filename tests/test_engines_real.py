"""The rule library gives identical answers on the embedded engine (DuckDB,
with the relations stored at index time) and on the real Soufflé (which
computes everything from the fact tables), on the real PyTorch 2.6.0 tree."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.real_tree, pytest.mark.souffle]

# Every named query of the library (`torchtalk query --list`), on five
# arguments or more each: ops with CPU and CUDA kernels, C++ functions, CUDA
# kernels, Python APIs, modules, keys.
QUERIES = [
    "kernels(_softmax)",
    "kernels(topk)",
    "kernels(cumsum)",
    "kernels(index_add)",
    "kernels(embedding_bag, depth=3)",
    "impact(cpublas::gemm, depth=3)",
    "impact(at::native::matmul)",
    "impact(at::native::structured_topk_out_cpu::impl)",
    "impact(at::native::CPU_CAPABILITY::cpu_kernel_vec, depth=2)",
    "impact(at::native::layer_norm_cpu)",
    "trace(add.Tensor)",
    "trace(softmax)",
    "trace(matmul)",
    "trace(conv2d, depth=2)",
    "trace(topk)",
    "trace_node(softmax_warp_forward)",
    "trace_node(at::native::add_stub)",
    "trace_node(at::native::_matmul_impl)",
    "trace_node(gatherTopK)",
    "trace_node(at::native::layer_norm_cpu, depth=2)",
    "paths(softmax_warp_forward -> python)",
    "paths(torch.softmax -> cuda)",
    "paths(gatherTopK -> python)",
    "paths(torch.cumsum -> cuda)",
    "paths(cpublas::gemm -> python, depth=6)",
    "affected(cpublas::gemm)",
    "affected(softmax_warp_forward)",
    "affected(at::native::matmul, depth=3)",
    "affected(at::native::layer_norm_cpu)",
    "affected(gatherTopK)",
    "callers(gemm)",
    "callers(at::native::matmul)",
    "callers(at::native::_matmul_impl)",
    "callers(softmax_warp_forward)",
    "callers(at::native::CPU_CAPABILITY::cpu_kernel_vec)",
    "callees(matmul)",
    "callees(at::native::layer_norm_cpu)",
    "callees(at::native::structured_topk_out_cpu::impl)",
    "callees(at::native::matmul)",
    "callees(cpublas::gemm)",
    "callees(sort.stable)",
    "callers(mm)",
    "op_callees(matmul)",
    "op_callees(sort.stable)",
    "op_callees(addmm)",
    "op_callees(layer_norm)",
    "op_callees(linear)",
    "op_callers(mm)",
    "op_callers(bmm)",
    "op_callers(dot)",
    "op_callers(mv)",
    "op_callers(addmv)",
    "tests(softmax)",
    "tests(matmul)",
    "tests(topk)",
    "tests(cumsum, depth=2)",
    "tests(layer_norm)",
    "tests(embedding_bag)",
    "search(softmax)",
    "search(gemm)",
    "search(LayerNorm)",
    "search(topk)",
    'search("conv2d", backend=CUDA)',
    "coverage(MPS)",
    "coverage(CPU)",
    "coverage(CUDA)",
    "coverage(Meta)",
    "coverage(SparseCPU)",
    "coverage(PrivateUse1)",
    "coverage(AutogradPrivateUse1)",
    "coverage(XPU, compare=CUDA)",
    "trace(convolution_overrideable)",
    "kernels(embedding_bag, key=CUDA)",
    "trace_module(torch.nn.Linear)",
    "trace_module(torch.nn.LSTM)",
    "trace_module(torch.nn.Conv2d)",
    "trace_module(torch.nn.LayerNorm)",
    "trace_module(torch.optim.Adam)",
    "kernel_launches(softmax_warp_forward)",
    "kernel_launches(gatherTopK)",
    "kernel_launches(vectorized_layer_norm_kernel)",
    "kernel_launches(indexFuncSmallIndex)",
    "kernel_launches(elementwise_kernel)",
    'test_file_subjects("test/test_linalg.py")',
    'test_file_subjects("test/test_nn.py")',
    'test_file_subjects("test/test_ops.py")',
    'test_file_subjects("test/nn/test_embedding.py")',
    'test_file_subjects("test/test_optim.py")',
    "module_category()",
    "test_util_category()",
    "kernel_files()",
]


@pytest.fixture(scope="module")
def con(real_con):
    return real_con


@pytest.mark.parametrize("text", QUERIES)
def test_souffle_gives_the_same_rows(con, text, souffle_bin):
    from torchtalk import api

    embedded = api.query(text, con=con, all_matches=True, limit=None)
    souffle = api.query(text, con=con, all_matches=True, limit=None, engine="souffle")
    assert embedded.total > 0
    assert souffle.rows == embedded.rows


def test_every_named_query_has_five_arguments_here():
    from collections import Counter

    from torchtalk import api

    names = {q["name"] for q in api.list_queries()}
    assert len(names) >= 11
    per = Counter(text.split("(")[0].strip('"') for text in QUERIES)
    assert {name: per[name] for name in names if per[name] < 5} == {}


# Note [Chains for the page]: a page's chains come from a second run, given
# the rows shown; both engines give the same page and the same chains.
PAGED = ["impact(cpublas::gemm, depth=3)", "impact(at::native::layer_norm_cpu)",
         "affected(at::native::layer_norm_cpu)", "affected(softmax_warp_forward)"]


@pytest.mark.parametrize("text", PAGED)
def test_souffle_gives_the_same_page_and_chains(con, text, souffle_bin):
    from torchtalk import api

    embedded = api.query(text, con=con, all_matches=True, limit=7)
    souffle = api.query(text, con=con, all_matches=True, limit=7, engine="souffle")
    assert embedded.total > 7 and len(embedded.rows) == 7
    assert souffle.rows == embedded.rows and souffle.total == embedded.total
    assert all(len(r[-1]) > 0 for r in embedded.rows)  # every row has its chain
