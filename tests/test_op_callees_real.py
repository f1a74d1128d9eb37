"""The op-level callees (issue 15, deliverable 5; issue 19, deliverable 3) on the
real PyTorch 2.6.0 tree: `callees(OP)` is the ops OP's kernels call, per
dispatch key, through the helpers in between, each row with its chain (Note
[Op-level callees] in torchtalk/query/__init__.py, rules/calls.dl)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.real_tree

LA = "aten/src/ATen/native/LinearAlgebra.cpp"
IMPL = "at::native::(static:aten/src/ATen/native/LinearAlgebra.cpp)::_matmul_impl"
COLUMNS = ("op", "key", "steps", "calls", "caller", "res", "entry", "on", "file", "line", "chain")


@pytest.fixture(scope="module")
def con(real_con):
    return real_con


def q(con, text, **kw):
    from torchtalk import api

    return api.query(text, con=con, **kw)


def records(con, text):
    return [dict(zip(COLUMNS, r, strict=True)) for r in q(con, text, all_matches=True).rows]


def source(tree, file, line) -> str:
    return (tree / file).read_text().splitlines()[line - 1]


def test_callees_of_matmul_go_through_matmul_impl_to_the_products(con, tree):
    r = q(con, "callees(matmul)")
    assert r.name == "op_callees" and r.columns == COLUMNS
    assert r.notes[0] == ("'matmul' names an ATen op: the ops its kernels call, per key (op_callees(matmul)); "
                          "the C++ function's own callees: callees(at::native::matmul)")
    rows = {(x["op"], x["key"], x["calls"]): x for x in records(con, "callees(matmul)")}
    want = {"dot": 2028, "mv": 2030, "mm": 2032, "bmm": 2161}
    for name, line in want.items():
        row = rows[("matmul", "CompositeImplicitAutograd", name)]
        assert (row["entry"], row["on"], row["caller"], row["res"], row["steps"], row["file"], row["line"]) == (
            "at::native::matmul", "*", IMPL, "resolved", 2, LA, line)
        assert f"{name}(" in source(tree, LA, line) or f"at::{name}_out(" in source(tree, LA, line)  # op names, as calls_op
        chain = [(s.src, s.kind, s.dst, s.file, s.line) for s in row["chain"]]
        assert chain == [
            ("matmul", "CompositeImplicitAutograd", "at::native::matmul", "aten/src/ATen/native/native_functions.yaml", 3778),
            ("at::native::matmul", "call", IMPL, LA, 2183),
            (IMPL, "aten", name, LA, line)]
    assert "_matmul_impl(" in source(tree, LA, 2183)
    # matmul.out's kernel reaches the same calls through matmul_out
    assert rows[("matmul.out", "CompositeImplicitAutograd", "mm")]["caller"] == IMPL


def test_a_kernel_name_or_function_id_keeps_the_one_step_callees(con):
    r = q(con, "callees(at::native::matmul)")
    assert r.name == "callees"
    assert {x[1] for x in r.rows} >= {IMPL}


def test_callees_keep_the_dispatch_key(con, tree):
    """sort.stable's CPU and CUDA kernel is one function (structured_sort_stable_out),
    whose sort_stub call dispatches on the device: the ops the CUDA implementation
    calls are listed under CUDA only, and the CPU ones under CPU only."""
    rows = records(con, "callees(sort.stable)")
    cuda = "aten/src/ATen/native/cuda/Sort.cpp"
    strided = [(x["key"], x["on"], x["caller"]) for x in rows if (x["calls"], x["file"], x["line"]) == ("empty_strided", cuda, 89)]
    assert strided == [("CUDA", "CUDA", "at::native::sort_cuda_kernel")]
    assert "empty_strided(" in source(tree, cuda, 89)
    fill = [(x["key"], x["caller"]) for x in rows if (x["calls"], x["file"], x["line"]) == ("arange", "aten/src/ATen/native/Sorting.cpp", 99)]
    assert fill == [("CPU", "at::native::_fill_indices")]
    assert not [x for x in rows if x["key"] == "CPU" and "/cuda/" in x["file"]]
    assert not [x for x in rows if x["key"] == "CUDA" and "/cpu/" in x["file"]]
    # the chain goes through the stub to the CUDA implementation
    row = next(x for x in rows if x["calls"] == "empty_strided")
    kinds = [(s.kind, s.dst) for s in row["chain"]]
    assert ("stub_call", "at::native::sort_stub") in kinds and ("stub_register", "at::native::sort_cuda_kernel") in kinds


def test_a_cuda_only_op_is_answered_under_cuda_keys_only(con):
    keys = {k for (k,) in con.execute("SELECT DISTINCT key FROM dispatch WHERE op = '_cudnn_rnn'").fetchall()}
    assert keys == {"CUDA"}
    rows = records(con, "callees(_cudnn_rnn)")
    assert rows and all(x["key"] == "CUDA" and x["on"] == "CUDA" for x in rows)


def test_the_wrong_answer_is_absent(con, tree):
    """`tensor1.sizes().slice(...)` is c10::ArrayRef::slice, not aten::slice;
    `.data()` on sizes is ArrayRef's; a call the fast tier could only guess is labelled."""
    rows = records(con, "callees(matmul)")
    assert ".sizes().slice(" in source(tree, LA, 2107) and ".sizes().data()" in source(tree, LA, 2110)
    assert not [x for x in rows if x["file"] == LA and x["line"] in (2107, 2110)]
    assert not [x for x in rows if x["calls"] == "slice" and x["caller"] == IMPL]
    guessed = [x for x in rows if (x["file"], x["line"]) == ("aten/src/ATen/ExpandUtils.cpp", 19)]
    assert guessed and all(x["res"] == "guess" for x in guessed)
    assert "a.size()" in source(tree, "aten/src/ATen/ExpandUtils.cpp", 19)
    assert [s.res for s in guessed[0]["chain"]][-1] == "guess"


def test_cli_api_and_mcp_give_the_same_rows(con, real_db):
    """One query surface: `torchtalk query "callees(matmul)" --json`, api.query and
    MCP's calls("matmul") answer the same named query with the same rows (MCP the
    first of them, within its budget)."""
    import json
    import subprocess
    import sys

    from test_mcp_server import open_session

    api_rows = q(con, "callees(matmul)").records()
    out = subprocess.run([sys.executable, "-m", "torchtalk", "query", "callees(matmul)", "--db", str(real_db),
                          "--json", "--all"], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout)["rows"] == json.loads(json.dumps(api_rows))
    with open_session(["--db", str(real_db)]) as mcp:
        reply = mcp.call("calls", name="matmul")
    assert not reply.is_error and reply.total == len(api_rows)
    shown = [{k: v for k, v in r.items() if k != "chain"} for r in reply.rows]
    assert shown and all(r in [{k: v for k, v in a.items() if k != "chain"} for a in api_rows] for r in shown)
    assert all(r["chain"] == next(a["chain"] for a in json.loads(json.dumps(api_rows))
                                  if (a["op"], a["key"], a["calls"], a["caller"], a["line"]) ==
                                  (r["op"], r["key"], r["calls"], r["caller"], r["line"])) for r in reply.rows)


CALLER_COLUMNS = ("op", "steps", "by", "key", "caller", "res", "entry", "on", "file", "line", "chain")


def test_callers_of_an_op_are_the_ops_whose_kernels_call_it(con):
    """`callers(mm)` is op_callers: matmul's composite kernel calls mm through
    _matmul_impl, the chain from matmul's dispatch entry down to the call."""
    r = q(con, "callers(mm)")
    assert r.name == "op_callers" and r.columns == CALLER_COLUMNS
    assert r.notes[0].startswith("'mm' names an ATen op: the ops whose kernels call it, per key (op_callers(mm))")
    rows = [dict(zip(CALLER_COLUMNS, x, strict=True)) for x in r.rows]
    row = next(x for x in rows if (x["by"], x["key"]) == ("matmul", "CompositeImplicitAutograd"))
    assert (row["steps"], row["caller"], row["res"], row["entry"], row["file"], row["line"]) == (
        2, IMPL, "resolved", "at::native::matmul", LA, 2032)
    assert [(s.src, s.kind, s.dst, s.line) for s in row["chain"]] == [
        ("matmul", "CompositeImplicitAutograd", "at::native::matmul", 3778),
        ("at::native::matmul", "call", IMPL, 2183), (IMPL, "aten", "mm", 2032)]


def test_callers_are_callees_reversed(con):
    """Each op matmul's composite kernel calls (resolved) has matmul among its
    callers, at the same call site: the two walks take the same own steps."""
    for callee in records(con, "callees(matmul)"):
        if callee["key"] != "CompositeImplicitAutograd" or callee["res"] != "resolved" or callee["op"] != "matmul":
            continue
        back = q(con, f"op_callers({callee['calls']}, by=matmul, key=CompositeImplicitAutograd)").rows
        sites = {(x[4], x[8], x[9]) for x in back}
        assert (callee["caller"], callee["file"], callee["line"]) in sites, callee


def test_callers_keep_the_dispatch_key(con):
    """empty_strided is called by sort_cuda_kernel, a CUDA implementation of
    sort_stub: sort.stable calls it under CUDA only, not under CPU."""
    rows = [dict(zip(CALLER_COLUMNS, x, strict=True)) for x in q(con, "callers(empty_strided, by=sort.stable)").rows]
    cuda = [(x["key"], x["on"], x["line"]) for x in rows if x["caller"] == "at::native::sort_cuda_kernel"]
    assert cuda == [("CUDA", "CUDA", 89)]
    assert not [x for x in rows if x["key"] == "CPU" and "/cuda/" in x["file"]]
