"""`torchtalk cursor-add`: set up a Cursor project to use TorchTalk's MCP server."""

from __future__ import annotations

import argparse
from pathlib import Path

NAME = "cursor-add"
HELP = "add TorchTalk's MCP server to a Cursor project's .cursor/mcp.json (merged, atomic)"


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("--project", type=Path, default=Path("."), help="the Cursor project (default: .)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--source", type=Path, help="the PyTorch tree the server answers about")
    where.add_argument("--db", type=Path, help="a fact database file made by `torchtalk index`")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def run(args: argparse.Namespace) -> int:
    import json

    from torchtalk.mcp.cursor import add_to_cursor
    from torchtalk.paths import default_source

    if args.db is not None:
        serve_args = ["mcp-serve", "--db", str(args.db.resolve())]
    else:
        serve_args = ["mcp-serve", "--source", str((args.source or default_source()).resolve())]
    path = add_to_cursor(args.project.resolve(), serve_args)
    if args.json:
        print(json.dumps({"file": str(path), "server": "torchtalk", "args": serve_args}))
    else:
        print(f"{path}: torchtalk -> torchtalk {' '.join(serve_args)}")
    return 0
