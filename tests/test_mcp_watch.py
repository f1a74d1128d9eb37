"""`mcp-serve --source` keeps the index live while serving (issue 16,
Note [Watching]): an edit to the tree shows in get_status as pending, then
in the answers, without a command to re-index."""

from __future__ import annotations

import os
import time

import pytest

from tests.test_mcp_server import _mini_tree, open_session

pytestmark = pytest.mark.real_tree

ENTRY = "- func: tt_watched_op(Tensor self) -> Tensor\n  variants: function\n\n"


def _ops(s, name: str) -> list[dict]:
    return [r for r in s.call("search", query=name).rows if r["kind"] == "op" and r["id"] == name]


def test_an_edit_while_serving_is_pending_then_answered(tree, tmp_path):
    src = _mini_tree(tree, tmp_path / "mini")
    env = {**os.environ, "TORCHTALK_CACHE_DIR": str(tmp_path / "cache")}
    with open_session(["--source", str(src)], env=env) as s:
        deadline = time.monotonic() + 180
        while True:  # the first index has landed, and nothing is running
            text = s.call("get_status").text
            if "ops  indexed" in text and "indexing in the background" not in text:
                break
            assert time.monotonic() < deadline, text
            time.sleep(0.5)
        assert f"watching {src} for changes: nothing pending" in text
        assert _ops(s, "tt_watched_op") == []

        yaml = src / "aten/src/ATen/native/native_functions.yaml"
        lines = yaml.read_text()
        yaml.write_text(lines + ENTRY)
        rel = "aten/src/ATen/native/native_functions.yaml"
        seen = set()
        deadline = time.monotonic() + 180
        while not _ops(s, "tt_watched_op"):
            text = s.call("get_status").text
            if f"1 changed files pending ({rel}" in text:
                seen.add("pending")
            if f"indexing in the background: update after changes to {rel}" in text:
                seen.add("updating")
            assert time.monotonic() < deadline, text
            time.sleep(0.05)
        assert seen, "get_status never said what was pending"
        row = _ops(s, "tt_watched_op")[0]
        assert (row["file"], row["line"]) == (rel, len(lines.splitlines()) + 1)
        # Note [Update worker]: one process ran that update, and runs the next, with what it kept
        workers = _workers(src)
        assert len(workers) == 1, workers
        yaml.write_text(lines + ENTRY.replace("tt_watched_op", "tt_watched_again"))
        deadline = time.monotonic() + 180
        while not _ops(s, "tt_watched_again"):
            assert time.monotonic() < deadline, s.call("get_status").text
            time.sleep(0.05)
        assert _ops(s, "tt_watched_op") == [] and _workers(src) == workers
    deadline = time.monotonic() + 30
    while _workers(src):  # it ends with the server
        assert time.monotonic() < deadline, _workers(src)
        time.sleep(0.1)


def _workers(src) -> list[int]:
    """The pids of the update workers of the tree `src` (Note [Update worker])."""
    out = []
    for d in os.listdir("/proc"):
        try:
            cmd = open(f"/proc/{d}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if b"torchtalk.updater" in cmd and str(src).encode() in cmd:
            out.append(int(d))
    return sorted(out)
