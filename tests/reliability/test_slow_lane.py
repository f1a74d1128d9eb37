"""The HTTP server's slow lane in a process of its own (Note [Slow lane
process] in torchtalk/mcp/slowlane.py), on the real tree's DB: its calls
answer exactly as the server's own lane does, and the process never
outlives the server, stopped or killed."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import anyio
import pytest

from tests.reliability._index import alive, parent_of

from ._http import client, http_server

pytestmark = pytest.mark.real_tree

CALLS = (
    ("impact", {"name": "at::native::cpublas::gemm", "depth": 2}),
    ("affected", {"functions": ["at::native::cpublas::gemm"]}),
    ("query", {"dsl": "callers(add_stub)"}),
    ("trace", {"name": "torch.matmul"}),
    ("cuda_kernels", {"name": "softmax_warp_forward"}),
    ("impact", {"name": "no_such_function_qqq"}),  # a tool error, with its did-you-mean
    ("called_by", {"name": "at::native::cpublas::gemm"}),  # a quick tool: served in the server itself
)


async def lane_pid(url: str, timeout: float = 30) -> int:
    """The slow lane process's pid, once get_status says it serves."""
    async with client(url) as c:
        t0 = time.monotonic()
        while not (m := re.search(r"in its own process \(pid (\d+)\): serving",
                                  text := (await c.call_tool("get_status", {})).content[0].text)):
            assert time.monotonic() - t0 < timeout, text
            await anyio.sleep(0.1)
    return int(m.group(1))


async def status(url: str) -> str:
    async with client(url) as c:
        return (await c.call_tool("get_status", {})).content[0].text


def until_gone(pid: int, timeout: float) -> None:
    t0 = time.monotonic()
    while alive(pid):
        assert time.monotonic() - t0 < timeout, f"the slow lane process {pid} outlived its server"
        time.sleep(0.05)


async def answers(url: str) -> list[tuple]:
    async with client(url) as c:
        got = []
        for name, args in CALLS:
            r = await c.call_tool(name, args)
            got.append((r.is_error, [x.text for x in r.content], r.structured_content))
        return got


def test_the_slow_lane_process_answers_as_the_server_does(real_db):
    with http_server(real_db, env={"TORCHTALK_MCP_SLOW_PROCESS": "0"}) as url:
        own = anyio.run(answers, url)
        assert "slow lane" not in anyio.run(status, url)  # the lane is the server's own
    with http_server(real_db, env={"TORCHTALK_MCP_SLOW_PROCESS": "1"}) as url:
        pid = anyio.run(lane_pid, url)
        assert "mcp-serve" in Path(f"/proc/{pid}/cmdline").read_text()
        child = anyio.run(answers, url)
    assert child == own
    errors = [e for e, _, _ in own]
    assert errors == [False, False, False, False, False, True, False]
    assert "no C++ function named 'no_such_function_qqq'" in own[5][1][0]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["stopped", "killed"])
def test_the_slow_lane_process_ends_with_its_server(real_db, sig):
    with http_server(real_db, env={"TORCHTALK_MCP_SLOW_PROCESS": "1"}) as url:
        pid = anyio.run(lane_pid, url)
        server = parent_of(pid)
        os.kill(server, sig)
        until_gone(pid, 10)
