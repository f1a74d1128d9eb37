"""Register TorchTalk as an MCP server of a Cursor project (.cursor/mcp.json).

The file is merged, never clobbered: other servers and keys are kept, our
entry (`mcpServers.torchtalk`) is added or replaced, and the file is written
to a temp file then renamed, so a failure leaves the old file intact.

Example:
    >>> add_to_cursor(Path("~/proj"), ["mcp-serve", "--source", "/src/pytorch"])
    PosixPath('/home/me/proj/.cursor/mcp.json')
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

from torchtalk.atomic import atomic_open
from torchtalk.errors import InputError, SrcLoc

SERVER_NAME = "torchtalk"


def torchtalk_command() -> str:
    """The `torchtalk` executable to write into client configs (absolute when found)."""
    beside = Path(sys.executable).with_name("torchtalk")
    if beside.is_file():
        return str(beside)
    return shutil.which("torchtalk") or "torchtalk"


def _load(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    text = path.read_text(encoding="utf-8")
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        loc = SrcLoc(str(path), err.lineno, err.colno)
        raise InputError(f"{path} is not valid JSON: {err.msg}", loc,
                         hint="fix or remove it, then run cursor-add again") from None
    if not isinstance(data, dict) or not isinstance(data.get("mcpServers", {}), dict):
        raise InputError(f"{path}: expected an object with an object 'mcpServers'")
    return data


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write `data` as JSON to `path` atomically (torchtalk/atomic.py)."""
    with atomic_open(path, "w") as out:
        json.dump(data, out, indent=2)
        out.write("\n")


def add_to_cursor(project: Path, args: list[str], command: str | None = None) -> Path:
    """Add (or replace) the torchtalk server in `project`/.cursor/mcp.json; returns the file."""
    if not project.is_dir():
        raise InputError(f"no project directory {project}", hint="pass --project DIR")
    path = project / ".cursor" / "mcp.json"
    data = _load(path)
    servers = dict(data.get("mcpServers", {}))
    servers[SERVER_NAME] = {"command": command or torchtalk_command(), "args": list(args)}
    data["mcpServers"] = servers
    write_json_atomic(path, data)
    return path
