"""The MCP server as an agent sees it: a subprocess driven by the SDK's stdio client.

One server and one client session per module (a blocking portal runs the
client's event loop in a background thread). Every tool is called on the real
PyTorch 2.6.0 tree's fact DB; answers are checked row by row with file:line,
and each file:line is checked against the source line it points to.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.from_thread import start_blocking_portal

from torchtalk.mcp.tools import TOOL_NAMES

pytestmark = pytest.mark.real_tree
CALL_TIMEOUT_S = 60


@dataclass
class Reply:
    text: str
    data: dict[str, Any] | None
    is_error: bool

    @property
    def rows(self) -> list[dict[str, Any]]:
        return self.data["rows"]

    @property
    def total(self) -> int:
        return self.data["total"]


class Session:
    """A client session to one server subprocess, callable from sync tests."""

    def __init__(self, portal, client) -> None:
        self.portal, self.client = portal, client

    def call(self, tool: str, **args: Any) -> Reply:
        async def go():
            with anyio.fail_after(CALL_TIMEOUT_S):
                return await self.client.call_tool(tool, args)

        r = self.portal.call(go)
        text = "\n".join(c.text for c in r.content if c.type == "text")
        return Reply(text, r.structured_content, bool(r.is_error))

    def list_tools(self):
        return self.portal.call(self.client.list_tools).tools


def open_session(args: list[str], env: dict[str, str] | None = None):
    """A context manager yielding a Session to `torchtalk mcp-serve ARGS`."""
    from contextlib import contextmanager

    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    @contextmanager
    def cm():
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "torchtalk", "mcp-serve", *args], env=env
        )
        with start_blocking_portal() as portal:
            with portal.wrap_async_context_manager(Client(params)) as client:
                yield Session(portal, client)

    return cm()


@pytest.fixture(scope="module")
def db(real_db) -> Path:
    """The real tree's fact DB (conftest's session `real_db`, or $TORCHTALK_TEST_DB)."""
    return real_db


@pytest.fixture(scope="module")
def mcp(db):
    with open_session(["--db", str(db)]) as session:
        yield session


@pytest.fixture(scope="module")
def layers(mcp) -> set[str]:
    status = mcp.call("get_status")
    return {r["layer"] for r in status.rows if r["state"] == "indexed"}


def need(layers: set[str], *names: str) -> None:
    """Skip (fail in CI) when a layer the test reads is not in the DB."""
    missing = [n for n in names if n not in layers]
    if missing:
        reason = f"layers not indexed in the test DB: {', '.join(missing)}"
        if os.environ.get("CI"):
            pytest.fail(f"{reason} (required in CI)")
        pytest.skip(reason)


def source_line(tree: Path, row: dict[str, Any]) -> str:
    lines = (tree / row["file"]).read_text(encoding="utf-8", errors="replace").splitlines()
    return lines[row["line"] - 1]


def row_where(reply: Reply, **match: Any) -> dict[str, Any]:
    found = [r for r in reply.rows if all(r.get(k) == v for k, v in match.items())]
    assert found, f"no row {match} in:\n{reply.text}"
    return found[0]


# ------------------------------------------------------------------ protocol


def test_lists_exactly_the_tools_with_descriptions_and_schemas(mcp):
    tools = {t.name: t for t in mcp.list_tools()}
    assert set(tools) == set(TOOL_NAMES)
    for t in tools.values():
        assert len(t.description) > 60, t.name
        assert t.output_schema["properties"].keys() >= {"title", "rows", "total", "truncated"}
        assert t.annotations.read_only_hint is True
    # impact's depth defaults to the named query's own, as on the command line
    assert tools["impact"].input_schema["properties"]["depth"].get("default") is None
    assert tools["affected"].input_schema["required"] == ["functions"]
    assert tools["query"].input_schema["required"] == ["dsl"]


def test_bad_arguments_are_tool_errors_and_the_server_lives_on(mcp):
    r = mcp.call("impact", name="gemm", depth=99)
    assert r.is_error and "depth" in r.text
    r = mcp.call("calls")
    assert r.is_error and "name" in r.text
    r = mcp.call("trace", name="x; DROP TABLE op")
    assert r.is_error
    assert r.text.endswith("query error: name 'x; DROP TABLE op' is not a symbol name "
                           "(e.g. 'torch.matmul' or 'add.Tensor')")
    r = mcp.call("query", dsl="   ")
    assert r.is_error and r.text.endswith("query error: empty query (e.g. 'callers(gemm)')")
    r = mcp.call("no_such_tool")
    assert r.is_error and "no_such_tool" in r.text
    assert len(mcp.list_tools()) == len(TOOL_NAMES)
    assert not mcp.call("get_status").is_error


# ------------------------------------------------------------------ status, search


def test_get_status_counts_the_ops_of_native_functions(mcp, tree, layers):
    need(layers, "ops")
    funcs = sum(1 for line in (tree / "aten/src/ATen/native/native_functions.yaml").open()
                if line.startswith("- func:"))
    r = mcp.call("get_status")
    ops = row_where(r, layer="ops")
    assert ops["state"] == "indexed"
    assert f"op={funcs}," in ops["relations"]
    # a state every layer shares is said once, in the heading (all five
    # indexed once the compiler tier has run), else on each row
    if {row["state"] for row in r.rows} == {"indexed"}:
        assert r.text.splitlines()[0] == "TorchTalk index: 5 rows (state=indexed)"
        assert re.search(r"^  ops  \d+  op=" + str(funcs), r.text, re.M)
    else:
        assert r.text.splitlines()[0] == "TorchTalk index: 5 rows"
        assert re.search(r"^  ops  indexed  \d+  op=" + str(funcs), r.text, re.M)


def test_search_ranks_exact_names_first_with_the_op_at_its_yaml_line(mcp, tree, layers):
    need(layers, "ops")
    r = mcp.call("search", query="GELU")
    assert r.rows == sorted(r.rows, key=lambda row: row["rank"])  # 0 the name, 1 its start, 2 elsewhere
    op = row_where(r, kind="op", id="gelu")
    assert op["rank"] == 0 and op["file"] == "aten/src/ATen/native/native_functions.yaml"
    assert source_line(tree, op).startswith("- func: gelu(Tensor self")
    assert row_where(r, kind="module", id="torch.nn.modules.activation.GELU")["rank"] == 0
    # the text says the searched text once, then rank, (kind,) id and file:line per row
    assert r.text.splitlines()[0] == f"search(\"GELU\"): {r.total} rows (text=GELU)"
    shown = [line.strip() for line in r.text.splitlines()]
    assert f"0  op  gelu  aten/src/ATen/native/native_functions.yaml:{op['line']}" in shown


def test_search_by_backend_keeps_ops_served_on_it(mcp, layers):
    need(layers, "ops")
    cuda = {r["id"] for r in mcp.call("search", query="gelu", backend="CUDA").rows if r["kind"] == "op"}
    # gelu.out has a CUDA kernel; gelu and gelu_ reach it as its structured delegates
    assert {"gelu", "gelu_", "gelu.out", "gelu_backward.grad_input"} <= cuda
    r = mcp.call("search", query="gelu", backend="CUDAX")
    assert r.is_error and "query error: no dispatch key named 'CUDAX' (did you mean 'CUDA'?)" in r.text


# ------------------------------------------------------------------ python and tests layers


def test_list_modules_optim_has_adam_at_its_class_line(mcp, tree, layers):
    need(layers, "python")
    r = mcp.call("list_modules", category="optim")
    adam = next(row for row in r.rows if row["cls"].endswith(".Adam"))
    assert adam["file"] == "torch/optim/adam.py"
    assert source_line(tree, adam).startswith("class Adam(")
    cats = mcp.call("list_modules", category="all")
    assert {"nn", "optim"} <= {row["category"] for row in cats.rows}
    bad = mcp.call("list_modules", category="nnn")
    assert bad.is_error and "unknown module category 'nnn'" in bad.text and "'nn'" in bad.text


def test_trace_module_linear_reaches_the_linear_op(mcp, tree, layers):
    need(layers, "python")
    r = mcp.call("trace_module", name="torch.nn.Linear")
    cls = row_where(r, step="class")
    assert cls["name"] == "torch.nn.modules.linear.Linear" and source_line(tree, cls).startswith("class Linear(")
    forward = row_where(r, step="method", name="torch.nn.modules.linear.Linear.forward")
    assert source_line(tree, forward).strip().startswith("def forward(")
    assert row_where(r, step="calls", name="torch.nn.functional.linear")["detail"] == forward["name"]
    assert row_where(r, step="op", name="linear", detail="torch.nn.functional.linear")
    bad = mcp.call("trace_module", name="Linaer")
    assert bad.is_error and "no nn module or optimizer named 'Linaer'" in bad.text and "Linear" in bad.text


def test_test_file_info_finds_test_linalg_classes(mcp, tree, layers):
    need(layers, "tests")
    r = mcp.call("test_file_info", path="test_linalg.py")  # test/test_linalg.py before numpy_tests/'s
    assert r.data["title"] == "tests in test/test_linalg.py"
    cls = row_where(r, test="test/test_linalg.py::TestLinalg")
    assert cls["kind"] == "class" and source_line(tree, cls).startswith("class TestLinalg(")
    bad = mcp.call("test_file_info", path="test/test_linalgg.py")
    assert bad.is_error and "(did you mean 'test/test_linalg.py', " in bad.text


def test_list_test_utils_decorators_include_dtypes(mcp, tree, layers):
    need(layers, "tests")
    r = mcp.call("list_test_utils", category="all")
    cats = {row["category"] for row in r.rows}
    assert cats
    dec = mcp.call("list_test_utils", category="decorator")
    dtypes = row_where(dec, name="torch.testing._internal.common_device_type.dtypes")
    assert dtypes["file"] == "torch/testing/_internal/common_device_type.py"
    assert re.match(r"(class|def) dtypes\b", source_line(tree, dtypes).strip())


def test_find_similar_tests_for_matmul(mcp, tree, layers):
    need(layers, "tests")
    r = mcp.call("find_similar_tests", query="matmul out")
    top = r.rows[0]
    assert top["test"].rsplit("::", 1)[-1] == "test_matmul_out"  # whole words, shortest name first
    assert all("dropout" not in row["test"] for row in r.rows[:10])
    assert source_line(tree, top).strip().startswith("def " + top["test"].rsplit("::", 1)[-1])


# ------------------------------------------------------------------ cpp layer and queries


def test_cuda_kernels_softmax_warp_forward(mcp, tree, layers):
    need(layers, "cpp")
    r = mcp.call("cuda_kernels", name="softmax_warp_forward")
    defined = row_where(r, how="defined")
    assert defined["file"] == "aten/src/ATen/native/cuda/PersistentSoftmax.cuh"
    assert "softmax_warp_forward" in source_line(tree, defined) or "__global__" in source_line(tree, defined)
    launch = row_where(r, how="<<<>>>")  # launched from the LAUNCH_SOFTMAX_WARP_FORWARD macro
    assert launch["launched_by"].endswith("dispatch_softmax_forward")
    assert "LAUNCH_SOFTMAX_WARP_FORWARD(" in source_line(tree, launch)  # the macro use that launches it
    per_file = mcp.call("cuda_kernels")
    assert per_file.data["columns"] == ["file", "kernels"] and per_file.total > 50


def test_calls_matmul_lists_matmul_impl(mcp, layers):
    need(layers, "cpp")
    r = mcp.call("calls", name="at::native::matmul")
    assert not r.is_error, r.text
    assert any("_matmul_impl" in str(v) for row in r.rows for v in row.values()), r.text


def test_called_by_and_impact_of_gemm(mcp, db, layers):
    need(layers, "cpp")
    r = mcp.call("called_by", name="at::native::cpublas::gemm")
    assert not r.is_error and r.total > 0, r.text
    assert all(row.get("file") and row.get("line") for row in r.rows)
    imp = mcp.call("impact", name="at::native::cpublas::gemm", depth=3)
    assert not imp.is_error and imp.total > 0, imp.text
    # with no depth, the same answer as the command line's `impact(...)` (one default)
    from torchtalk import api

    default = mcp.call("impact", name="at::native::cpublas::gemm")
    assert default.total == api.query("impact(at::native::cpublas::gemm)", db=db, limit=None).total > imp.total


def test_unknown_name_is_a_tool_error_with_candidates(mcp, layers):
    need(layers, "cpp")
    r = mcp.call("calls", name="at::native::matmull")
    assert r.is_error and "did you mean" in r.text


def test_trace_matmul_reaches_the_native_kernel(mcp, tree, layers):
    need(layers, "ops", "cpp")
    r = mcp.call("trace", name="matmul")
    assert not r.is_error, r.text
    hits = [row for row in r.rows if row.get("file") == "aten/src/ATen/native/LinearAlgebra.cpp"]
    assert hits, r.text
    cuda = mcp.call("trace", name="matmul", focus="CUDA")
    assert cuda.total <= r.total and any("focus 'CUDA'" in n for n in cuda.data["notes"])


def test_trace_focus_is_a_part_of_the_answer_found_among_every_row(mcp, db, layers):
    # add.Tensor's trace has 3K+ rows, its tests sorted after the first 200:
    # focus="tests" keeps the test rows among all rows, not among the first 200
    need(layers, "ops", "cpp", "tests")
    from torchtalk import api

    con = api.open_db(db=db)
    every = api.query("trace(add.Tensor)", con=con)
    con.close()
    want = [dict(zip(every.columns, row, strict=True)) for row in every.rows if row[1] == "test"]
    assert every.total > 200 and len(want) > 10
    r = mcp.call("trace", name="add.Tensor", focus="tests")
    assert not r.is_error, r.text
    assert r.total == len(want) and r.rows == want[:len(r.rows)]
    assert f"focus 'tests': the test rows, {len(want)} of {every.total}" in r.data["notes"]
    # a substring is not a part: an error listing the parts and keys
    bad = mcp.call("trace", name="add.Tensor", focus="test_binary_ufuncs")
    assert bad.is_error and "query error: focus 'test_binary_ufuncs' is not a part of a trace" in bad.text
    assert "(parts: dispatch, kernels, cuda, stubs, python, derivatives, decomp, tests, schema; " \
           "or a dispatch key: CPU, CUDA," in bad.text


def test_query_and_affected(mcp, layers):
    need(layers, "cpp")
    r = mcp.call("query", dsl="callers(at::native::cpublas::gemm)")
    assert not r.is_error and r.total > 0, r.text
    a = mcp.call("affected", functions=["at::native::cpublas::gemm"])
    assert not a.is_error, a.text


def test_coverage_per_key(mcp, tree, layers):
    need(layers, "ops")
    funcs = sum(1 for line in (tree / "aten/src/ATen/native/native_functions.yaml").open()
                if line.startswith("- func:"))
    r = mcp.call("coverage", key="CPU")
    assert not r.is_error, r.text
    m = re.match(rf"coverage of CPU: (\d+)/{funcs} ops \([\d.]+%\)", r.data["title"])
    assert m, r.data["title"]
    assert int(m.group(1)) + r.total == funcs  # covered + missing = all ops
    missing = r.rows[0]
    file, line = missing["where"].rsplit(":", 1)
    assert source_line(tree, {"file": file, "line": int(line)}).startswith(f"- func: {missing['missing_op'].split('.')[0]}")
    per_key = mcp.call("coverage")
    assert {"CPU", "CUDA", "MPS", "Meta"} <= {row["key"] for row in per_key.rows}
    bad = mcp.call("coverage", key="CPUX")
    assert bad.is_error and bad.text.endswith("(did you mean 'CPU'?)")


# ------------------------------------------------------------------ serving while the DB changes


def test_reopens_the_db_when_index_replaces_it(db, tmp_path, layers):
    need(layers, "ops")
    import duckdb

    from torchtalk.index import _refresh_derived, load_schema

    live = tmp_path / "live.duckdb"
    shutil.copy(db, live)
    with open_session(["--db", str(live)]) as s:
        assert "gelu" in {r["id"] for r in s.call("search", query="gelu").rows if r["kind"] == "op"}
        new = tmp_path / "new.duckdb"
        shutil.copy(db, new)
        con = duckdb.connect(str(new))
        con.execute("DELETE FROM op WHERE op = 'gelu'")
        con.close()
        # The stored rule relations are recomputed from the changed facts, as
        # `torchtalk index` does (Note [Derived at index time]).
        _refresh_derived(new, load_schema())
        os.replace(new, live)  # what `torchtalk index` does
        assert "gelu" not in {r["id"] for r in s.call("search", query="gelu").rows if r["kind"] == "op"}


def test_no_index_yet_answers_status_and_says_so(tmp_path):
    src = tmp_path / "pytorch"
    src.mkdir()
    env = {**os.environ, "TORCHTALK_CACHE_DIR": str(tmp_path / "cache")}
    with open_session(["--source", str(src)], env=env) as s:
        status = s.call("get_status")
        assert not status.is_error
        assert f"note: no fact database yet for {src}" in status.text
        r = s.call("calls", name="gemm")
        assert r.is_error
        assert r.text.endswith(
            f"store error: no fact database yet for {src} (run `torchtalk index --source {src}` "
            "(get_status shows a running index))"
        )


def _mini_tree(tree: Path, dest: Path, lines: int = 20) -> Path:
    """The real tree cut down: the first `lines` lines of native_functions.yaml, tags, version."""
    native = dest / "aten/src/ATen/native"
    native.mkdir(parents=True)
    shutil.copy(tree / "aten/src/ATen/native/tags.yaml", native)
    shutil.copy(tree / "version.txt", dest)
    head = (tree / "aten/src/ATen/native/native_functions.yaml").read_text().splitlines(True)[:lines]
    (native / "native_functions.yaml").write_text("".join(head))
    (dest / "tools/autograd").mkdir(parents=True)
    (dest / "tools/autograd/derivatives.yaml").write_text("[]\n")
    return dest


def test_indexes_in_the_background_and_answers_as_layers_land(tree, tmp_path):
    src = _mini_tree(tree, tmp_path / "mini")
    env = {**os.environ, "TORCHTALK_CACHE_DIR": str(tmp_path / "cache")}
    with open_session(["--source", str(src)], env=env) as s:
        first = s.call("get_status")  # answers at once, while the index runs
        assert not first.is_error
        assert "indexing in the background" in first.text or "ops  indexed" in first.text
        deadline = time.monotonic() + 120
        while "ops  indexed" not in s.call("get_status").text:
            assert time.monotonic() < deadline, s.call("get_status").text
            time.sleep(0.5)
        r = s.call("search", query="_cast_Byte")
        row = r.rows[0]
        assert (row["id"], row["file"], row["line"]) == ("_cast_Byte", "aten/src/ATen/native/native_functions.yaml", 9)
        assert source_line(src, row).startswith("- func: _cast_Byte(Tensor self")


def test_query_runs_a_user_rule_from_rules_dir(db, tree, tmp_path, layers):
    need(layers, "ops")
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "delegates.dl").write_text(
        "// Seed: the ops (resolved as op names).\n"
        ".decl my_delegates_arg(op: symbol)\n.input my_delegates_arg\n"
        "// `op` is computed by the structured kernel of `out_op`.\n"
        ".decl my_delegates(op: symbol, out_op: symbol, file: symbol, line: number)\n"
        "my_delegates(o, d, f, l) :- my_delegates_arg(o), structured_delegate(o, d, f, l).\n"
    )
    with open_session(["--db", str(db), "--rules", str(rules)]) as s:
        r = s.call("query", dsl="my_delegates(gelu)")
        assert not r.is_error, r.text
        row = row_where(r, op="gelu")
        assert row["out_op"] == "gelu.out"
        assert source_line(tree, row).strip() == "structured_delegate: gelu.out"
        bad = s.call("query", dsl="my_delegatez(gelu)")
        assert bad.is_error and "did you mean 'my_delegates'" in bad.text
