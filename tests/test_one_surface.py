"""One question, one answer: `search` and `trace_module` asked through the API,
the command line (`torchtalk query ... --json`, a subprocess) and the MCP tools
(a stdio session) give the same rows, in the same order, with the same
defaults; and Soufflé gives the rows the embedded engine gives (issue 14,
deliverable 5). On the real PyTorch 2.6.0 tree's fact DB."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from test_mcp_server import open_session

pytestmark = pytest.mark.real_tree

# the questions: search TEXT (with and without backend=CUDA), trace_module MODULE
SEARCHES = [(text, backend) for text in ("Gemm", "softmax", "layer_norm") for backend in (None, "CUDA")]
MODULES = ["torch.nn.Linear", "Adam"]


@pytest.fixture(scope="module")
def con(real_con):
    return real_con


@pytest.fixture(scope="module")
def mcp(real_db):
    with open_session(["--db", str(real_db)]) as session:
        yield session


def _cli(db, dsl: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "torchtalk", "query", dsl, "--db", str(db), "--json", "--all"],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def _asked(con, tool: str, arg: str, backend: str | None):
    """The API's answer and the DSL text the CLI is given for the same question."""
    from torchtalk import api

    if tool == "search":
        return api.search(arg, backend=backend, con=con), api.search_dsl(arg, backend)
    return api.trace_module(arg, con=con), f"trace_module({arg})"


QUESTIONS = [("search", t, b) for t, b in SEARCHES] + [("trace_module", m, None) for m in MODULES]


@pytest.mark.parametrize(("tool", "arg", "backend"), QUESTIONS, ids=lambda v: str(v))
def test_api_cli_and_mcp_give_the_same_rows(con, mcp, real_db, tool, arg, backend):
    api_result, dsl = _asked(con, tool, arg, backend)
    records = api_result.records()
    assert records, dsl
    cli = _cli(real_db, dsl)
    assert (cli["rows"], cli["total"], cli["columns"]) == (records, api_result.total, list(api_result.columns))
    args = {"query": arg, "backend": backend} if tool == "search" else {"name": arg}
    reply = mcp.call(tool, **{k: v for k, v in args.items() if v is not None})
    assert not reply.is_error, reply.text
    # the structured answer holds the rows its text shows (Note [Answer size]):
    # per section, the section's first rows in the API's order; and says how many there are
    assert reply.total == api_result.total and reply.rows
    assert reply.data["columns"] == list(api_result.columns)
    key = "step" if tool == "trace_module" else None
    for part in {r.get(key) for r in reply.rows}:
        shown = [r for r in reply.rows if r.get(key) == part]
        assert shown == [r for r in records if r.get(key) == part][:len(shown)]


def test_search_is_case_insensitive_and_ranks_exact_names_first(con):
    from torchtalk import api

    upper = api.search("SOFTMAX", con=con).records()
    lower = api.search("softmax", con=con).records()
    assert [r | {"text": ""} for r in upper] == [r | {"text": ""} for r in lower]
    ranks = [r["rank"] for r in lower]
    assert ranks == sorted(ranks) and ranks[0] == 0
    exact = {(r["kind"], r["id"]) for r in lower if r["rank"] == 0}
    assert {("op", "softmax.int"), ("python", "torch.softmax"),
            ("module", "torch.nn.modules.activation.Softmax")} <= exact
    # the DSL's own spelling answers the same
    assert api.query("search(softmax)", con=con).records() == lower


def test_search_backend_keeps_what_serves_it(con):
    from torchtalk import api

    rows = api.search("layer_norm", backend="cuda", con=con).records()
    kinds = {r["kind"] for r in rows}
    assert kinds <= {"op", "function", "kernel", "stub"}
    ops = {r["id"] for r in rows if r["kind"] == "op"}
    assert "native_layer_norm" in ops and "layer_norm" not in ops  # CompositeImplicit: no CUDA kernel of its own
    assert "at::native::layer_norm_cuda" in {r["id"] for r in rows if r["kind"] == "function"}


@pytest.mark.souffle
@pytest.mark.parametrize(("tool", "arg", "backend"), QUESTIONS, ids=lambda v: str(v))
def test_souffle_gives_the_same_rows(con, souffle_bin, tool, arg, backend):
    from torchtalk import api

    _, dsl = _asked(con, tool, arg, backend)
    embedded = api.query(dsl, con=con)
    souffle = api.query(dsl, con=con, engine="souffle")
    assert embedded.total > 0
    assert souffle.rows == embedded.rows
