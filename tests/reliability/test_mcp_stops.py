"""MCP over HTTP (a real server process on the real tree's DB): a call the
client cancels (the SDK sends notifications/cancelled) and a client that
disconnects mid-call. The server goes on answering the others at once, and
the slow call's pooled connection is given back at once, whether cancelled
or its client gone (Note [Stopped calls], Note [Disconnect cancels]).
get_status counts the connections in use: the server's own when its slow
lane runs in it, the slow lane process's when it has one (Note [Slow lane
process] in torchtalk/mcp/slowlane.py); each test runs both ways."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

import anyio
import httpx2
import pytest

from ._http import client, http_server

pytestmark = pytest.mark.real_tree

SLOW = ("query", {"dsl": "impact(empty, depth=10, all=true)"})  # ~20 s of DuckDB on one thread
QUICK = ("called_by", {"name": "at::native::cpublas::gemm"})
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


# the slow lane's place ($TORCHTALK_MCP_SLOW_PROCESS) -> get_status's count of the connections it uses
LANES = {"0": r"note: connections: (\d+) in use", "1": r"its connections: (\d+) in use"}


@dataclass(frozen=True)
class Server:
    url: str
    in_use: str  # the pattern of the slow lane's connections in use in get_status


@pytest.fixture(params=list(LANES), ids=["slow lane in process", "slow lane process"])
def server(request, real_db):
    with http_server(real_db, env={"TORCHTALK_MCP_SLOW_PROCESS": request.param}) as url:
        if request.param == "1":
            anyio.run(serving, url)
        yield Server(url, LANES[request.param])


async def serving(url: str) -> None:
    """Wait until the slow lane's process serves (it starts with the server)."""
    async with client(url) as c:
        t0 = time.monotonic()
        while "in its own process (pid" not in (text := (await c.call_tool("get_status", {})).content[0].text):
            assert time.monotonic() - t0 < 30, text
            await anyio.sleep(0.1)


async def in_use(c, server: Server) -> int:
    """The connections in use where the slow call runs, get_status's own included."""
    r = await c.call_tool("get_status", {})
    assert not r.is_error, r.content[0].text
    return int(re.search(server.in_use, r.content[0].text).group(1))


async def until_in_use(c, server: Server, n: int, timeout: float) -> float:
    """Poll get_status until `n` connections are in use; -> the seconds it took."""
    t0 = time.monotonic()
    while (got := await in_use(c, server)) != n:
        assert time.monotonic() - t0 < timeout, f"{got} connections in use after {timeout} s, not {n}"
        await anyio.sleep(0.1)
    return time.monotonic() - t0


async def answered(c) -> None:
    r = await c.call_tool(*QUICK)
    assert not r.is_error and r.structured_content["rows"], r.content[0].text


def test_a_cancelled_call_gives_its_connection_back(server):
    url = server.url

    async def main():
        async with client(url) as slow, client(url) as other:
            async with anyio.create_task_group() as tg:
                tg.start_soon(slow.call_tool, *SLOW)
                await until_in_use(other, server, 2, 20)  # the slow call holds one
                await answered(other)
                tg.cancel_scope.cancel()  # the SDK sends notifications/cancelled
            assert await until_in_use(other, server, 1, 3) < 3  # at once, not after the call's 30 s limit
            await answered(other)
            await answered(slow)  # the cancelling client is served too
    anyio.run(main)


def test_a_client_gone_mid_call_is_cancelled(server):
    """A client whose connection drops mid-call cancels it (Note [Disconnect
    cancels] in torchtalk/mcp/serve.py): its connection is back at once, not
    at the call's 30 s limit, and the others are answered meanwhile."""
    url = server.url
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
    with httpx2.Client(timeout=30) as http:
        r = http.post(url, json=init, headers=HEADERS)
        session = {**HEADERS, "mcp-session-id": r.headers["mcp-session-id"]}
        http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": SLOW[0], "arguments": SLOW[1]}}
        with http.stream("POST", url, json=call, headers=session) as resp:
            assert resp.status_code == 200

            async def held():
                async with client(url) as other:
                    await until_in_use(other, server, 2, 20)
            anyio.run(held)
        # the stream closed unread, then the client itself: gone mid-call

    async def after():
        async with client(url) as other:
            assert await until_in_use(other, server, 1, 5) < 5
            await answered(other)
    anyio.run(after)
