"""Assemble and run the TorchTalk MCP server: `build_server` and `serve`.

The server's parts live in server.py and its tools in tools.py, which
imports server.py's `run_tool`; this module imports both, so neither imports
the other.

Example:
    >>> server = build_server(source=Path("/src/pytorch"), db=None)  # doctest: +SKIP
    >>> server.run("stdio")  # doctest: +SKIP
"""

from __future__ import annotations

import sys
from pathlib import Path

from mcp.server import MCPServer

from torchtalk.mcp.server import INSTRUCTIONS, TorchTalkServer, _lifespan
from torchtalk.mcp.tools import register


def build_server(
    source: Path | None, db: Path | None, reindex: bool = False, rules: tuple[Path, ...] = (), watch: bool = True,
    compiler: bool = False, slow_process: bool = False,
) -> MCPServer:
    """The server with every TorchTalk tool registered (see torchtalk.mcp.tools);
    with a `source` and `watch`, it keeps the index live (Note [Watching]);
    with `compiler`, it runs the compiler tier in the background (Note
    [Compiler tier in the background]); with `slow_process`, its slow lane
    runs in a process of its own (Note [Slow lane process])."""
    from torchtalk import __version__

    server = TorchTalkServer(
        "torchtalk",
        title="TorchTalk",
        version=__version__,
        instructions=INSTRUCTIONS,
        lifespan=_lifespan(source, db, reindex, rules, watch, compiler, slow_process),
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
    from torchtalk.mcp.slowlane import wanted

    server = build_server(source, db, reindex, rules, watch, compiler, slow_process=transport == "http" and wanted())
    if transport == "stdio":
        server.run("stdio")
        return
    import anyio
    import uvicorn

    app = DisconnectCancels(server.streamable_http_app(host=host))
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


# Note [Disconnect cancels]: a client whose HTTP connection drops while its
# tools/call streams (an agent stopped, a crashed editor) will never read the
# answer, but the SDK runs the call on (the MCP spec: a disconnect is not a
# cancellation), holding a pooled connection to its time limit (Note [Stopped
# calls] in server.py). `DisconnectCancels` sees the request's body and the
# ASGI `http.disconnect` before the response ended, and sends the session
# the `notifications/cancelled` the client would have sent: the call stops
# as a cancelled one, its query interrupted, its connection back at once.
class DisconnectCancels:
    """ASGI middleware: a POSTed JSON-RPC request whose client disconnects
    before its response ends is cancelled (Note [Disconnect cancels])."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        body, ended, cancelled = bytearray(), [False], [False]

        async def watched_receive():
            message = await receive()
            if message["type"] == "http.request":
                body.extend(message.get("body", b""))
            elif message["type"] == "http.disconnect" and not ended[0] and not cancelled[0]:
                cancelled[0] = True
                await self._cancel(scope, bytes(body))
            return message

        async def watched_send(message):
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                ended[0] = True
            await send(message)

        await self.app(scope, watched_receive, watched_send)

    async def _cancel(self, scope, body: bytes) -> None:
        """Send the session `notifications/cancelled` for the request in `body`."""
        import json

        try:
            request = json.loads(body)
        except ValueError:
            return
        if not isinstance(request, dict) or "id" not in request or "method" not in request:
            return
        note = json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled",
                           "params": {"requestId": request["id"], "reason": "the client disconnected"}}).encode()
        headers = [(k, v) for k, v in scope.get("headers", ()) if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(note)).encode()))
        sent = [False]

        async def receive():
            if sent[0]:
                return {"type": "http.disconnect"}
            sent[0] = True
            return {"type": "http.request", "body": note, "more_body": False}

        async def send(_message) -> None:
            return None

        try:
            await self.app({**scope, "headers": headers}, receive, send)
        except Exception as err:  # the session may be gone already: nothing to cancel
            print(f"torchtalk mcp: cancelling a disconnected call: {err!r}", file=sys.stderr)
