"""A real `torchtalk mcp-serve --transport http` subprocess on a free port, and
the SDK's HTTP client for it (with a bearer token or none)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def http_server(db: Path, *args: str, env: dict | None = None, port: int | None = None) -> Iterator[str]:
    """Start the server on `port` (a free one by default), wait until it
    listens, yield its /mcp URL; terminated (and reaped) on exit."""
    port = port or free_port()
    cmd = [sys.executable, "-m", "torchtalk", "mcp-serve", "--db", str(db), "--transport", "http",
           "--port", str(port), *args]
    log = tempfile.TemporaryFile("w+")  # not a pipe: nobody reads it while serving
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise RuntimeError(f"HTTP server did not start: {log.read()[-2000:]}") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def client(url: str, token: str | None = None):
    """The SDK's MCP client over streamable HTTP, sending `token` as a bearer token."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    headers = {"Authorization": f"Bearer {token}"} if token is not None else None
    return Client(streamable_http_client(url, http_client=create_mcp_http_client(headers=headers)))
