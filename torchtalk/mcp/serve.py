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
    source: Path | None, db: Path | None, reindex: bool = False, rules: tuple[Path, ...] = (), watch: bool = True,
    compiler: bool = False,
) -> MCPServer:
    """The server with every TorchTalk tool registered (see torchtalk.mcp.tools);
    with a `source` and `watch`, it keeps the index live (Note [Watching]);
    with `compiler`, it runs the compiler tier in the background (Note
    [Compiler tier in the background])."""
    from torchtalk import __version__

    server = TorchTalkServer(
        "torchtalk",
        title="TorchTalk",
        version=__version__,
        instructions=INSTRUCTIONS,
        lifespan=_lifespan(source, db, reindex, rules, watch, compiler),
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
    host: str = "127.0.0.1",
    token: str | None = None,
    watch: bool = True,
    compiler: bool = False,
) -> None:
    """Serve on stdio, or streamable HTTP on `host`:`port` (path /mcp); with
    `token`, every HTTP request must carry `Authorization: Bearer <token>`
    (Note [Shared HTTP server]); with a `source` and `watch`, the index is
    kept live (Note [Watching])."""
    server = build_server(source, db, reindex, rules, watch, compiler)
    if transport == "stdio":
        server.run("stdio")
        return
    import anyio
    import uvicorn

    app = server.streamable_http_app(host=host)
    if token:
        app = BearerToken(app, token)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning")
    anyio.run(uvicorn.Server(config).serve)


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address) is this machine only.

    Example:
        >>> is_loopback("127.0.0.1"), is_loopback("localhost"), is_loopback("0.0.0.0")
        (True, True, False)
    """
    import ipaddress

    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: it may resolve anywhere
        return False


# Note [Shared HTTP server]: `mcp-serve --transport http` listens on loopback
# unless `--host` says otherwise; off loopback it refuses to start without a
# token (`--token` or $TORCHTALK_MCP_TOKEN, torchtalk/cli/mcp.py), and
# `BearerToken` checks it on every HTTP request before the SDK's app sees it,
# so no tool runs, and no session is made, for a caller without it. The
# SDK's own auth (`token_verifier`) needs an OAuth issuer URL and serves
# OAuth metadata, which a shared secret has no use for.
class BearerToken:
    """ASGI middleware: an HTTP request without `Authorization: Bearer <token>`
    is answered 401 (compared in constant time); lifespan events pass through."""

    def __init__(self, app, token: str) -> None:
        self.app, self._want = app, token.encode()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or self._allowed(scope):
            await self.app(scope, receive, send)
            return
        body = b'{"error": "unauthorized", "error_description": "a bearer token is required"}'
        await send({"type": "http.response.start", "status": 401, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", b'Bearer realm="torchtalk"')]})
        await send({"type": "http.response.body", "body": body})

    def _allowed(self, scope) -> bool:
        import hmac

        got = next((v for k, v in scope.get("headers", ()) if k.lower() == b"authorization"), b"")
        scheme, _, given = got.partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), self._want)
