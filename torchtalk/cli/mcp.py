"""`torchtalk mcp-serve`: serve TorchTalk's tools to coding agents over MCP."""

from __future__ import annotations

import argparse
from pathlib import Path

NAME = "mcp-serve"
HELP = "serve TorchTalk's tools over MCP (stdio, or streamable HTTP on 127.0.0.1 or --host)"
TOKEN_ENV = "TORCHTALK_MCP_TOKEN"


def register(p: argparse.ArgumentParser) -> None:
    where = p.add_mutually_exclusive_group()
    where.add_argument("--source", type=Path, help="the PyTorch tree (its cached index is used)")
    where.add_argument("--db", type=Path, help="a fact database file made by `torchtalk index`")
    p.add_argument("--transport", choices=("stdio", "http"), default="stdio",
                   help="stdio (default) or streamable HTTP on HOST:PORT/mcp")
    p.add_argument("--port", type=int, default=8765, help="HTTP port (default 8765)")
    p.add_argument("--host", default="127.0.0.1",
                   help="HTTP address to listen on (default 127.0.0.1; off loopback a token is required)")
    p.add_argument("--token", default=None,
                   help=f"HTTP bearer token every request must carry (default ${TOKEN_ENV}; "
                        "prefer the variable: arguments show in `ps`)")
    p.add_argument("--reindex", action="store_true",
                   help="refresh the index in the background while serving (always done when none exists)")
    p.add_argument("--no-watch", dest="watch", action="store_false",
                   help="do not watch the tree (by default, changed files update the index while serving)")
    p.add_argument("--no-compiler-tier", dest="compiler", action="store_false",
                   help="do not run the compiler tier (libclang) in the background; by default it follows "
                        "the fast tier and each update, parsing only what changed")
    p.add_argument("--rules", type=Path, action="append", default=[], metavar="DIR",
                   help="more .dl rule files for the `query` tool (repeatable; the config dir's rules/ is always read)")
    p.add_argument("--json", action="store_true",
                   help="print where the server listens as JSON on stderr before serving")


def run(args: argparse.Namespace) -> int:
    import json
    import sys

    from torchtalk.errors import InputError
    from torchtalk.paths import default_source

    if args.db is not None and not args.db.is_file():
        raise InputError(f"no fact database at {args.db}", hint="run `torchtalk index` or pass --source")
    source = None
    if args.db is None:
        source = (args.source or default_source()).resolve()
        if not source.is_dir():
            raise InputError(f"no PyTorch tree at {source}", hint="pass --source PATH or run `torchtalk fetch`")
    for d in args.rules:
        if not d.is_dir():
            raise InputError(f"rules directory not found: {d}", hint="pass a directory of .dl files")
    if not 0 < args.port < 65536:
        raise InputError(f"bad --port {args.port}", hint="a TCP port, 1-65535")
    token = _token(args)
    if args.json:
        where = {"transport": args.transport, "source": str(source) if source else None,
                 "db": str(args.db) if args.db else None}
        if args.transport == "http":
            where["url"] = f"http://{_url_host(args.host)}:{args.port}/mcp"
            where["token_required"] = bool(token)
        print(json.dumps(where), file=sys.stderr)
    from torchtalk.mcp.serve import serve

    serve(source, args.db, transport=args.transport, port=args.port, reindex=args.reindex,
          rules=tuple(d.resolve() for d in args.rules), host=args.host, token=token, watch=args.watch,
          compiler=args.compiler)
    return 0


def _token(args: argparse.Namespace) -> str | None:
    """The bearer token HTTP requests must carry (--token, else $TORCHTALK_MCP_TOKEN);
    InputError off loopback without one (Note [Shared HTTP server], torchtalk/mcp/serve.py)."""
    import os

    from torchtalk.errors import InputError
    from torchtalk.mcp.serve import is_loopback

    token = args.token if args.token is not None else (os.environ.get(TOKEN_ENV) or None)
    if args.transport != "http":
        return None
    if token is not None and not token.strip():
        raise InputError("empty --token", hint="use a long random string")
    if not token and not is_loopback(args.host):
        raise InputError(f"--host {args.host} is not loopback: a bearer token is required",
                         hint=f"set ${TOKEN_ENV} or pass --token, or serve on 127.0.0.1")
    return token or None


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host
