"""Readers while `index` replaces the DB (issue 18): a loop of `torchtalk
query` processes and a loop of MCP calls over HTTP (a real server process)
run while the index swaps in a new DB three times, each with one more C++
function. Every answer is that of one of the DB's versions (never an error,
never a mix), and each kind of reader sees more than one version."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time

import anyio
import pytest

from tests.reliability._http import client, http_server
from tests.reliability._index import LAYERS, ROOT, env
from torchtalk import api

NAME = "tt_swap_"
SWAPS = 3


def _ids(rows: list[dict]) -> frozenset[str]:
    return frozenset(r["id"] for r in rows if NAME in r["id"])


def _cli_reader(db, stop, seen: list) -> None:
    while not stop.is_set():
        got = subprocess.run([sys.executable, "-m", "torchtalk", "query", "--db", str(db), "--json", "--all",
                              f"search({NAME})"], env=env(), cwd=ROOT, capture_output=True, text=True, timeout=60)
        seen.append(_ids(json.loads(got.stdout)["rows"]) if got.returncode == 0 else f"exit {got.returncode}: "
                    f"{got.stderr.strip()}")


async def _mcp_reader(url, stop, seen: list) -> None:
    async with client(url) as c:
        while not stop.is_set():
            r = await c.call_tool("search", {"query": NAME})
            seen.append(r.content[0].text if r.is_error else _ids(r.structured_content["rows"]))
            await anyio.sleep(0.05)


@pytest.mark.real_tree
def test_readers_see_the_old_db_or_the_new_one(small_template, tmp_path):
    src0, db0 = small_template
    src = tmp_path / "pytorch"
    subprocess.run(["cp", "-al", str(src0), str(src)], check=True)
    db = tmp_path / "db" / db0.name
    shutil.copytree(db0.with_name(db0.stem + ".cache"), db.with_name(db.stem + ".cache"))  # parses kept
    assert api.index(src, db, layers=list(LAYERS), jobs=2).mode == "built"
    edited = max(src.glob("aten/src/ATen/native/*.cpp"), key=lambda p: p.stat().st_size)
    versions = [frozenset()]
    stop, cli, mcp = threading.Event(), [], []
    with http_server(db) as url:
        readers = [threading.Thread(target=_cli_reader, args=(db, stop, cli)),
                   threading.Thread(target=anyio.run, args=(_mcp_reader, url, stop, mcp))]
        for t in readers:
            t.start()
        try:
            for i in range(1, SWAPS + 1):
                time.sleep(0.5)  # readers on this version
                text = edited.read_text()
                edited.unlink()  # a new file: the hard link to the real tree breaks
                edited.write_text(text + f"\nnamespace at::native {{ void {NAME}{i}() {{}} }}\n")
                assert api.index(src, db, layers=list(LAYERS), jobs=2).mode == "updated"
                versions.append(versions[-1] | {f"at::native::{NAME}{i}"})
            time.sleep(0.5)
        finally:
            stop.set()
            for t in readers:
                t.join(60)
    for seen in (cli, mcp):
        assert [s for s in seen if s not in versions] == []
        assert len(set(seen)) >= 2, seen
    assert mcp[-1] == versions[-1]
