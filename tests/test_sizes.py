"""Answers sized for reading (issue 15, deliverable 5; issue 19, deliverables 2 and 4).

- the CLI: no answer prints more than its cap without --all; --json is
  {columns, rows, total, notes}; trace(torch.nn.functional.interpolate)
  fits one screen, grouped, with totals;
- MCP: every call of the skill's workflows (SKILL.md's "Common Workflows" and
  the /trace command's example, parsed by bench/answer_sizes.py) runs through
  the SDK's stdio client, fits the default token budget and opens with the
  facts it promises.
On the real PyTorch 2.6.0 tree's fact DB.
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from torchtalk.query.output import CLI_ROWS, size

pytestmark = pytest.mark.real_tree
ROOT = Path(__file__).resolve().parents[1]
SCREEN = 50  # lines


def _bench():
    spec = importlib.util.spec_from_file_location("answer_sizes", ROOT / "bench/answer_sizes.py")
    mod = importlib.util.module_from_spec(spec)
    path = list(sys.path)
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path[:] = path  # the module keeps bench/ off sys.path for itself
    return mod


WORKFLOWS = _bench().WORKFLOWS
# the queries of bench/query.py: big and small answers of every named query
QUERIES = ("callers(cpublas::gemm)", "callees(matmul)", "impact(cpublas::gemm)", "trace(matmul)",
           "trace(add.Tensor)", "kernels(add)", "paths(torch.softmax -> cuda)", "tests(softmax)",
           "affected(cpublas::gemm)", "search(gemm)", "trace_module(torch.nn.Linear)")


def cli(*argv: str) -> tuple[int, str, str]:
    p = subprocess.run([sys.executable, "-m", "torchtalk", "query", *argv], capture_output=True, text=True,
                       env=os.environ, timeout=120)
    return p.returncode, p.stdout, p.stderr


@pytest.fixture(scope="module")
def db(real_db) -> str:
    return str(real_db)


@pytest.fixture(scope="module")
def con(db):
    from torchtalk import api

    c = api.open_db(db=db)
    yield c
    c.close()


# ---------------------------------------------------------------- CLI


@pytest.mark.parametrize("query", QUERIES)
def test_no_cli_answer_prints_more_than_its_cap_without_all(con, db, query):
    from torchtalk import api

    whole = api.query(query, con=con)
    grouped = size(whole.columns, whole.rows, whole.total)
    code, out, err = cli(query, "--db", db)
    assert code == 0, err
    rows = out.splitlines()[1:]  # after the header line
    assert len(rows) <= CLI_ROWS
    if len(grouped.rows) > CLI_ROWS:  # cut: stderr says how many and how to see all
        assert f"of {len(grouped.rows)} rows" in err and "--all for all" in err
    code, out, err = cli(query, "--db", db, "--all")
    assert code == 0 and len(out.splitlines()) - 1 == len(grouped.rows), err


def test_limit_and_json_say_the_total_and_the_notes(con, db):
    from torchtalk import api

    whole = api.query("impact(cpublas::gemm)", con=con)
    code, out, err = cli("impact(cpublas::gemm)", "--db", db, "--json", "--limit", "2")
    data = json.loads(out)
    assert code == 0 and list(data) == ["columns", "rows", "total", "notes"]
    assert data["columns"] == list(whole.columns) and data["total"] == whole.total
    assert data["rows"] == whole.records()[:2]
    assert data["notes"][-1] == f"2 of {whole.total} rows; --all for all"
    code, out, err = cli("impact(cpublas::gemm)", "--db", db, "--json")
    assert len(json.loads(out)["rows"]) == CLI_ROWS
    code, out, err = cli("impact(cpublas::gemm)", "--db", db, "--json", "--all")
    assert json.loads(out)["rows"] == whole.records()


def test_trace_of_interpolate_fits_one_screen_grouped_with_totals(con):
    from torchtalk import api
    from torchtalk.query.output import print_table

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    text = "trace(torch.nn.functional.interpolate)"
    whole = api.query(text, con=con)
    grouped = size(whole.columns, whole.rows, whole.total)
    assert len(grouped.rows) * 5 < whole.total  # overloads multiplied the rows
    screen = Terminal()
    print_table(whole, file=screen, text=text)
    lines = screen.getvalue().splitlines()
    assert len(lines) <= SCREEN
    assert lines[0] == f"{text}: {whole.total:,} rows, {len(grouped.rows):,} after grouping overloads"
    steps = [m.group(1) for ln in lines if (m := re.match(r"  step (\w+): [\d,]+$", ln))]
    assert steps[:2] == ["op", "kernel"] and {"cuda_kernel", "python", "test"} <= set(steps)
    for s in steps:  # every section says its total and, when cut, how to see the rest
        n = sum(1 for r in grouped.rows if r[1] == s)
        assert f"  step {s}: {n:,}" in lines


# ---------------------------------------------------------------- MCP workflows


@pytest.fixture(scope="module")
def mcp(db):
    from test_mcp_server import open_session

    with open_session(["--db", db]) as session:
        yield session


def _first_facts(tree: Path, tool: str, args: dict, reply, mcp_call) -> None:
    """What each workflow promises in its first lines (issue 19's table)."""
    lines = reply.text.splitlines()
    if tool == "trace" and args.get("focus") == "CUDA":  # the CUDA key's kernels, stub implementations, CUDA kernels
        assert "focus=CUDA" in lines[0] and lines[1].startswith("  step kernel:"), reply.text
        assert {r["step"] for r in reply.rows} <= {"kernel", "unlinked", "stub_impl", "ufunc_loop", "cuda_kernel"}
        assert all(r["detail"] == "CUDA" for r in reply.rows if r["step"] == "kernel")
    elif tool == "trace" and args.get("focus") == "dispatch":  # conv2d's kernel per key, at its definition
        assert "step=kernel" in lines[0]
        for row in reply.rows:
            src = (tree / row["file"]).read_text(errors="replace").splitlines()[row["line"] - 1]
            assert row["name"].rsplit("::", 1)[-1] in src and row["detail"]
        assert {r["op"] for r in reply.rows} >= {"conv2d"}
    elif tool == "trace":  # the schema, then the kernel per key
        assert lines[1] == "  step op: " + lines[1].rsplit(": ", 1)[1]
        kernel = lines.index(next(ln for ln in lines if ln.startswith("  step kernel:")))
        assert kernel < 8 and all(not ln.startswith("  step ") for ln in lines[2:kernel])
    elif tool == "trace_module":  # torch.nn.Linear → F.linear → aten::linear → addmm / matmul
        assert "module=torch.nn.modules.linear.Linear" in lines[0]
        steps = {(r["step"], r["name"], r["detail"]) for r in reply.rows}
        assert ("calls", "torch.nn.functional.linear", "torch.nn.modules.linear.Linear.forward") in steps
        assert ("op", "linear", "torch.nn.functional.linear") in steps
        assert {("op_calls", "addmm", "linear"), ("op_calls", "matmul", "linear")} <= steps, reply.text
    elif tool == "calls":  # the ops the op's kernels call, per key, each with its chain to the call
        assert all(r["chain"][0]["src"] == r["op"] and r["chain"][-1]["dst"] == r["calls"] for r in reply.rows)
        if args["name"] == "matmul":  # through _matmul_impl: mm, mv, dot, bmm
            first = [r for r in reply.rows if r["key"] == "CompositeImplicitAutograd"]
            assert {"mm", "mv", "dot", "bmm"} <= {r["calls"] for r in first}, reply.text
            assert all(r["caller"].endswith("::_matmul_impl") for r in first if r["calls"] in ("mm", "mv", "dot", "bmm"))
    elif tool == "called_by" and args["name"] == "mm":  # the ops built on mm: matmul through _matmul_impl
        assert lines[0].startswith("callers(mm): ") and all(r["op"] == "mm" for r in reply.rows)
        assert reply.rows[0]["steps"] == 1 and [r["steps"] for r in reply.rows] == sorted(r["steps"] for r in reply.rows)
        assert {"cov", "tensordot"} <= {r["by"] for r in reply.rows if r["steps"] == 1}, reply.text
        more = re.search(r"… \d+ more: (called_by\(name='mm', budget=(\d+)\))$", reply.text, re.M)
        rows = mcp_call("called_by", name="mm", budget=int(more.group(2))).rows
        assert any(r["by"] == "matmul" and r["caller"].endswith("::_matmul_impl") for r in rows)
    elif tool == "called_by":  # each gemm, cpublas::gemm first, with its callers
        assert lines[2].startswith("[1] at::native::cpublas::gemm ") and lines[3].startswith("callers(")
    elif tool == "impact":  # callers first; the documented Python APIs reached, in the first answer itself
        assert any(ln.strip().startswith("kind function:") for ln in lines[:6]), reply.text
        assert any(ln.strip().startswith("kind python:") for ln in lines), reply.text
        python = [r for r in reply.rows if r["kind"] == "python"]
        # at equal rank documented APIs first (Note [API tiers] in rules/ranking.dl)
        assert python and python[0]["api"] == "documented", reply.text
        assert {"torch.matmul", "torch.mm"} & {r["name"] for r in python}, reply.text
    elif tool == "cuda_kernels":  # softmax's own kernels; interpolate's are the upsample kernels
        want = {"softmax": "softmax", "interpolate": "upsample"}[args["name"]]
        assert any(want in r["kernel"].lower() for r in reply.rows), reply.text
    elif tool == "list_modules":
        assert "torch.optim.adam.Adam" in {r[reply.data["columns"][0]] for r in reply.rows}
    elif tool == "get_status":
        assert {"ops", "cpp", "python", "tests"} <= {r["layer"] for r in reply.rows}
    elif tool == "test_file_info":
        assert reply.rows[0]["file"] == "test/test_linalg.py"
    elif tool == "search":
        assert all("conv2d" in r["id"].lower() for r in reply.rows)


def test_the_workflows_are_those_the_skill_and_the_trace_command_teach():
    """WORKFLOWS is parsed from SKILL.md's "Common Workflows" and trace.md's example
    (bench/answer_sizes.py): issue 19's acceptance calls are among them."""
    calls = {(tool, tuple(sorted(args.items()))) for _, tool, args in WORKFLOWS}
    assert {("impact", (("depth", 4), ("name", "gemm"))), ("trace", (("focus", "dispatch"), ("name", "conv2d"))),
            ("trace_module", (("name", "Linear"),)), ("calls", (("name", "matmul"),))} <= calls
    assert len(WORKFLOWS) >= 12 and any(q.startswith("/trace ") for q, _, _ in WORKFLOWS)


@pytest.mark.parametrize(("question", "tool", "args"), WORKFLOWS, ids=[w[0] for w in WORKFLOWS])
def test_each_workflow_answer_fits_the_budget_and_opens_with_its_facts(mcp, tree, question, tool, args):
    from torchtalk.mcp.answer import BUDGET, tokens

    reply = mcp.call(tool, **args)
    assert not reply.is_error, reply.text
    assert tokens(reply.text) <= BUDGET, (tokens(reply.text), reply.text)
    assert len(reply.rows) <= reply.total
    _first_facts(tree, tool, args, reply, mcp.call)


def test_a_budget_is_settable_per_call(mcp):
    small = mcp.call("trace", name="matmul", budget=300)
    big = mcp.call("trace", name="matmul", budget=4000)
    from torchtalk.mcp.answer import tokens

    assert tokens(small.text) <= 300 < tokens(big.text) <= 4000
    assert len(small.rows) < len(big.rows)
    # the small answer still opens with the schema and the kernels
    assert small.text.splitlines()[1].startswith("  step op:")
    assert any(ln.startswith("  step kernel:") for ln in small.text.splitlines())
    more = [ln for ln in small.text.splitlines() if ln.lstrip().startswith("… ")]
    assert more and all(re.search(r": (trace|query)\(", ln) for ln in more)
