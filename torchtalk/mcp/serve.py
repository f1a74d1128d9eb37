"""Assemble and run the TorchTalk MCP server: `build_server` and `serve`.

The server's parts live in server.py and its tools in tools.py, which
imports server.py's `run_tool`; this module imports both, so neither imports
the other.

Example:
    >>> server = build_server(source=Path("/src/pytorch"), db=None)  # doctest: +SKIP
    >>> server.run("stdio")  # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path

from mcp.server import MCPServer

from torchtalk.mcp.server import INSTRUCTIONS, TorchTalkServer, _lifespan
from torchtalk.mcp.tools import register


def build_server(
    source: Path | None, db: Path | None, reindex: bool = False, rules: tuple[Path, ...] = ()
) -> MCPServer:
    """The server with every TorchTalk tool registered (see torchtalk.mcp.tools)."""
    from torchtalk import __version__

    server = TorchTalkServer(
        "torchtalk",
        title="TorchTalk",
        version=__version__,
        instructions=INSTRUCTIONS,
        lifespan=_lifespan(source, db, reindex, rules),
        log_level="WARNING",
    )
    register(server)
    return server


def serve(
    source: Path | None,
    db: Path | None,
    transport: str = "stdio",
    port: int = 8765,
    reindex: bool = False,
    rules: tuple[Path, ...] = (),
) -> None:
    """Serve on stdio, or streamable HTTP on 127.0.0.1:`port` (path /mcp)."""
    server = build_server(source, db, reindex, rules)
    if transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=port)
