"""Shared use is safe to offer (issue 18, deliverable 4): the HTTP server binds
to loopback unless `--host` says otherwise, and off loopback every request
needs the bearer token, checked before the SDK's app (so before any tool)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import httpx2
import pytest

from ._http import ROOT, client, free_port, http_server

pytestmark = pytest.mark.real_tree

TOKEN = "s3cret-token-for-the-test"
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
CALL = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "search", "arguments": {"query": "gelu"}}}


def post(url: str, body: dict, auth: str | None) -> httpx2.Response:
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    if auth is not None:
        headers["Authorization"] = auth
    return httpx2.post(url, json=body, headers=headers, timeout=30)


async def search(url: str, token: str | None) -> dict:
    async with client(url, token) as c:
        r = await c.call_tool("search", {"query": "gelu"})
        assert not r.is_error, r.content[0].text
        return r.structured_content


@pytest.fixture(scope="module")
def shared_url(real_db):
    """Listening on every address, token from the environment."""
    with http_server(real_db, "--host", "0.0.0.0", env={"TORCHTALK_MCP_TOKEN": TOKEN}) as url:
        yield url


@pytest.mark.parametrize("auth", [None, "Bearer wrong-token", f"Basic {TOKEN}", "Bearer", TOKEN, f"Bearer {TOKEN}x"])
@pytest.mark.parametrize("body", [INIT, CALL], ids=["initialize", "tools/call"])
def test_a_request_without_the_token_is_refused(shared_url, auth, body):
    r = post(shared_url, body, auth)
    assert r.status_code == 401
    assert r.headers["www-authenticate"].startswith("Bearer")
    assert r.json()["error"] == "unauthorized"  # the middleware's answer, not the SDK's


def test_the_right_token_is_answered(shared_url):
    r = post(shared_url, INIT, f"Bearer {TOKEN}")
    assert r.status_code == 200, r.text
    rows = anyio.run(search, shared_url, TOKEN)["rows"]
    assert ("op", "gelu") in {(row["kind"], row["id"]) for row in rows}


def test_the_sdk_client_with_a_wrong_token_gets_no_session(shared_url):
    with pytest.raises(Exception) as exc:  # noqa: B017 - the SDK's wording is its own
        anyio.run(search, shared_url, "wrong-token")
    assert "Server returned an error response" in repr(exc.value)  # the 401, as the SDK words it


def test_off_loopback_without_a_token_refuses_to_start(real_db):
    env = {k: v for k, v in os.environ.items() if k != "TORCHTALK_MCP_TOKEN"}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run(
        [sys.executable, "-m", "torchtalk", "mcp-serve", "--db", str(real_db), "--transport", "http",
         "--host", "0.0.0.0", "--port", str(free_port())],
        capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode != 0
    assert proc.stderr.splitlines() == [
        "torchtalk: error: --host 0.0.0.0 is not loopback: a bearer token is required "
        "(set $TORCHTALK_MCP_TOKEN or pass --token, or serve on 127.0.0.1)"]


def test_loopback_is_the_default_and_needs_no_token(real_db):
    with http_server(real_db, env={"TORCHTALK_MCP_TOKEN": ""}) as url:
        assert ("op", "gelu") in {(r["kind"], r["id"]) for r in anyio.run(search, url, None)["rows"]}
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        listening = {line.split()[1] for line in Path("/proc/net/tcp").read_text().splitlines()[1:]
                     if line.split()[3] == "0A"}  # state LISTEN
        assert f"0100007F:{port:04X}" in listening  # 127.0.0.1 only, not 0.0.0.0
        assert f"00000000:{port:04X}" not in listening


def test_a_token_on_loopback_is_required_too(real_db):
    with http_server(real_db, "--token", TOKEN) as url:
        assert post(url, INIT, None).status_code == 401
        assert post(url, INIT, f"bearer {TOKEN}").status_code == 200  # the scheme is case-insensitive
