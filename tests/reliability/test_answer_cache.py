"""Kept answers (Note [Answer cache], torchtalk/mcp/cache.py) on the real
tree's DB, through the SDK's client: the same call answers the same, and
once `torchtalk index` has replaced the file, calls answer from the new one."""

from __future__ import annotations

import os
import shutil

import anyio
import duckdb
import pytest

pytestmark = pytest.mark.real_tree


def test_a_replaced_db_is_answered_from_not_the_kept_answer(real_db, tmp_path):
    from mcp import Client

    from torchtalk.mcp.serve import build_server

    live = tmp_path / "live.duckdb"
    shutil.copy(real_db, live)
    call = ("list_modules", {"category": "optim"})

    async def main():
        async with Client(build_server(None, live, watch=False)) as client:
            first = await client.call_tool(*call)
            again = await client.call_tool(*call)
            new = tmp_path / "new.duckdb"
            shutil.copy(real_db, new)
            con = duckdb.connect(str(new))
            con.execute("DELETE FROM module_class WHERE cls = 'torch.optim.adam.Adam'")
            con.close()
            os.replace(new, live)  # what `torchtalk index` does
            after = await client.call_tool(*call)
            return first, again, after

    first, again, after = anyio.run(main)
    classes = [r["cls"] for r in first.structured_content["rows"]]
    assert "torch.optim.adam.Adam" in classes
    assert again.content[0].text == first.content[0].text
    assert again.structured_content == first.structured_content
    assert [r["cls"] for r in after.structured_content["rows"]] == [c for c in classes if c != "torch.optim.adam.Adam"]
    assert after.structured_content["total"] == first.structured_content["total"] - 1
