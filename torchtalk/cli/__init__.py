"""`torchtalk` command line: one module per subcommand.

Note [Cheap command modules]: each module in COMMANDS is imported on every
start to register its arguments, so it must import nothing heavy at module
level (no duckdb, textX, tree-sitter, mcp); heavy imports go inside `run`.
`torchtalk status` must answer in 0.3 s and `torchtalk query` in 0.5 s.

Each command module defines:
    NAME: str                      the subcommand name
    HELP: str                      one line for `torchtalk --help`
    def register(p: argparse.ArgumentParser) -> None
    def run(args: argparse.Namespace) -> int   exit code
"""

from __future__ import annotations

import argparse
import importlib
import sys

from torchtalk.errors import TorchTalkError

# module names under torchtalk.cli, in --help order
COMMANDS = (
    "index",
    "watch",
    "status",
    "query",
    "eval",
    "rules",
    "report",
    "affected",
    "snapshot",
    "mcp",
    "cursor",
    "fetch",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="torchtalk",
        description="Datalog code intelligence for the PyTorch source tree.",
    )
    from torchtalk import __version__

    parser.add_argument("--version", action="version", version=f"torchtalk {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for modname in COMMANDS:
        try:
            mod = importlib.import_module(f"torchtalk.cli.{modname}")
        except ModuleNotFoundError as exc:
            if exc.name == f"torchtalk.cli.{modname}":
                continue  # command not built yet
            raise
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.HELP)
        mod.register(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `torchtalk` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        code = args._run(args)
    except TorchTalkError as err:
        print(f"torchtalk: {err.render()}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("torchtalk: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # a DuckDB error escaping a layer: the DB file is bad
        from torchtalk.store import database_error

        err = database_error(exc, getattr(args, "db", None))
        if err is None:
            raise  # a bug: keep its traceback
        print(f"torchtalk: {err.render()}", file=sys.stderr)
        return 1
    return int(code or 0)


if __name__ == "__main__":
    sys.exit(main())
