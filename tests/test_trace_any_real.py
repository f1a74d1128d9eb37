"""`trace(X)` of anything (Note [Trace of anything]): a CUDA kernel, a
dispatch stub, a C++ function and an nn module on the real 2.6.0 tree, each
step checked against the source line it names."""

from __future__ import annotations

import pytest

from torchtalk.errors import QueryError

pytestmark = pytest.mark.real_tree

SOFTMAX_CUH = "aten/src/ATen/native/cuda/PersistentSoftmax.cuh"


@pytest.fixture(scope="module")
def con(real_con):
    return real_con


def _trace(con, text):
    from torchtalk.query import query

    return query(text, con, all_matches=True)


def _line(tree, file, line) -> str:
    return (tree / file).read_text(encoding="utf-8", errors="replace").splitlines()[line - 1]


def _steps(result, step):
    return [r for r in result.rows if r[1] == step]


def test_a_cuda_kernel_is_traced_up_to_its_hosts_ops_and_apis(con, tree):
    r = _trace(con, "trace(softmax_warp_forward)")
    assert r.name == "trace_node"
    assert r.notes[0] == ("'softmax_warp_forward' names no ATen op but a C++ function, CUDA kernel or "
                          "dispatch stub: trace_node(softmax_warp_forward)")
    (fn,) = _steps(r, "function")
    assert fn[2:] == (f"(anonymous:{SOFTMAX_CUH})::softmax_warp_forward", "cuda", SOFTMAX_CUH, 68)
    assert "__global__ void softmax_warp_forward(" in _line(tree, SOFTMAX_CUH, 68)
    hosts = _steps(r, "host")
    assert len(hosts) >= 11 and {h[4] for h in hosts} == {SOFTMAX_CUH}
    assert all("LAUNCH_SOFTMAX_WARP_FORWARD" in _line(tree, h[4], h[5]) for h in hosts)
    assert not {(c[2], c[5]) for c in _steps(r, "caller")} & {(h[2], h[5]) for h in hosts}  # a launch is a host
    ops = {(o[2], o[3]) for o in _steps(r, "op")}
    assert {("_softmax", "CUDA"), ("_log_softmax", "CUDA"), ("softmax.int", "CompositeImplicitAutograd")} <= ops
    assert not {k for _, k in ops if k in ("CPU", "MPS", "Meta", "SparseCPU", "XPU")}  # a CUDA kernel: no other key
    apis = {p[2] for p in _steps(r, "python")}
    assert {"torch.softmax", "torch.nn.functional.softmax", "torch.Tensor.log_softmax"} <= apis


def test_a_stub_is_traced_to_its_implementations_and_callers(con, tree):
    r = _trace(con, "trace(at::native::add_stub)")
    assert r.name == "trace_node"
    assert _steps(r, "stub") == [("at::native::add_stub", "stub", "at::native::add_stub", "",
                                  "aten/src/ATen/native/BinaryOps.h", 56)]
    assert "add_stub)" in _line(tree, "aten/src/ATen/native/BinaryOps.h", 56)
    impls = {(s[3], s[4], s[5]) for s in _steps(r, "stub_impl")}
    assert impls == {("CPU (ufunc codegen)", "aten/src/ATen/native/native_functions.yaml", 579),
                     ("CUDA (ufunc codegen)", "aten/src/ATen/native/native_functions.yaml", 579)}
    callers = {(c[2], c[4], c[5]) for c in _steps(r, "caller")}
    assert ("at::native::structured_sub_out::impl", "aten/src/ATen/native/BinaryOps.cpp", 436) in callers
    assert all("add_stub(" in _line(tree, f, ln) for _, f, ln in callers)
    ops = {(o[2], o[3]) for o in _steps(r, "op")}
    assert ("add.Tensor", "CPU") in ops and ("add.Tensor", "MPS") not in ops


def test_a_function_that_is_no_kernel_reaches_its_ops_and_apis(con):
    r = _trace(con, "trace(at::native::_matmul_impl)")
    assert r.name == "trace_node"
    assert ("matmul", "CompositeImplicitAutograd") in {(o[2], o[3]) for o in _steps(r, "op")}
    assert "torch.matmul" in {p[2] for p in _steps(r, "python")}
    assert {"at::native::matmul", "at::native::matmul_out"} <= {c[2] for c in _steps(r, "caller")}


def test_a_module_is_traced_as_a_module_and_an_op_as_an_op(con):
    r = _trace(con, "trace(torch.nn.Linear)")
    assert r.name == "trace_module"
    assert r.notes[0].endswith("an nn module, optimizer or scheduler: trace_module(torch.nn.Linear)")
    assert _trace(con, "trace(softmax)").name == "trace"


def test_a_name_of_nothing_says_what_trace_takes(con):
    with pytest.raises(QueryError) as ei:
        _trace(con, "trace(no_such_thing_anywhere)")
    assert ei.value.message == "no ATen op named 'no_such_thing_anywhere'"
    assert ei.value.hint == "trace takes an op, a Python API, an nn module, a C++ function, a CUDA kernel or a stub"
