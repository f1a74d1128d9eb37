"""The integration files name exactly the server's tools; `torchtalk cursor-add` merges atomically."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from torchtalk.cli import main
from torchtalk.mcp.tools import TOOL_NAMES

ROOT = Path(__file__).resolve().parents[1]
MCP_TOOL = re.compile(r"mcp__torchtalk__(\w+)")


def _server_tools() -> set[str]:
    from torchtalk.mcp.serve import build_server

    async def names() -> set[str]:
        return {t.name for t in await build_server(None, None).list_tools()}

    return anyio.run(names)


def test_registered_tools_are_tool_names():
    assert _server_tools() == set(TOOL_NAMES)
    assert len(TOOL_NAMES) == 15


def test_skill_allows_and_documents_exactly_the_tools():
    text = (ROOT / ".claude/skills/torchtalk-analyzer/SKILL.md").read_text()
    front = text.split("---")[1]
    allowed = re.search(r"^allowed-tools: (.*)$", front, re.M).group(1)
    assert [t.strip() for t in allowed.split(",")] == [f"mcp__torchtalk__{n}" for n in TOOL_NAMES]
    documented = set(re.findall(r"`(\w+)\(", text.split("---", 2)[2]))
    assert documented == set(TOOL_NAMES)


def test_trace_command_names_only_server_tools():
    text = (ROOT / ".claude/commands/trace.md").read_text()
    used = set(MCP_TOOL.findall(text))
    assert "trace" in used
    assert used <= set(TOOL_NAMES)


def test_mcp_json_runs_mcp_serve():
    cfg = json.loads((ROOT / ".mcp.json").read_text())
    server = cfg["mcpServers"]["torchtalk"]
    assert server["command"] == "torchtalk"
    assert server["args"][0] == "mcp-serve"
    from torchtalk.cli import mcp as cli_mcp

    assert cli_mcp.NAME == "mcp-serve"


def test_readme_shows_claude_and_cursor_setup():
    text = (ROOT / "README.md").read_text()
    assert "claude mcp add torchtalk -s user -- torchtalk mcp-serve --source /path/to/pytorch" in text
    assert "torchtalk cursor-add" in text


def test_cursor_add_creates_and_merges(tmp_path, capsys):
    cfg = tmp_path / ".cursor" / "mcp.json"
    cfg.parent.mkdir()
    cfg.write_text(json.dumps({"mcpServers": {"other": {"command": "x"}}, "keep": 1}))
    src = tmp_path / "pytorch"
    src.mkdir()
    code = main(["cursor-add", "--project", str(tmp_path), "--source", str(src), "--json"])
    assert code == 0
    data = json.loads(cfg.read_text())
    assert data["keep"] == 1 and data["mcpServers"]["other"] == {"command": "x"}
    entry = data["mcpServers"]["torchtalk"]
    assert entry["args"] == ["mcp-serve", "--source", str(src.resolve())]
    assert Path(entry["command"]).name == "torchtalk"
    out = json.loads(capsys.readouterr().out)
    assert out == {"file": str(cfg), "server": "torchtalk", "args": entry["args"]}
    # a second run replaces our entry, leaves one file and no temp files behind
    assert main(["cursor-add", "--project", str(tmp_path), "--db", str(src / "x.duckdb")]) == 0
    assert json.loads(cfg.read_text())["mcpServers"]["torchtalk"]["args"][1] == "--db"
    assert sorted(p.name for p in cfg.parent.iterdir()) == ["mcp.json"]


def test_cursor_add_bad_json_is_one_line_and_untouched(tmp_path):
    cfg = tmp_path / ".cursor" / "mcp.json"
    cfg.parent.mkdir()
    cfg.write_text('{\n  "mcpServers": {,\n}\n')
    proc = subprocess.run(
        [sys.executable, "-m", "torchtalk", "cursor-add", "--project", str(tmp_path)],
        capture_output=True, text=True,
    )
    assert proc.returncode == 1
    assert proc.stderr == (
        f"torchtalk: {cfg}:2:18: error: {cfg} is not valid JSON: Expecting property name "
        "enclosed in double quotes (fix or remove it, then run cursor-add again)\n"
    )
    assert cfg.read_text() == '{\n  "mcpServers": {,\n}\n'


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--db", "/nonexistent/x.duckdb"],
         "error: no fact database at /nonexistent/x.duckdb (run `torchtalk index` or pass --source)"),
        (["--source", "/nonexistent/pytorch"],
         "error: no PyTorch tree at /nonexistent/pytorch (pass --source PATH or run `torchtalk fetch`)"),
        (["--db", __file__, "--port", "0", "--transport", "http"],
         "error: bad --port 0 (a TCP port, 1-65535)"),
    ],
)
def test_mcp_serve_bad_arguments_one_line(argv, message):
    proc = subprocess.run(
        [sys.executable, "-m", "torchtalk", "mcp-serve", *argv], capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 1
    assert proc.stderr == f"torchtalk: {message}\n"
