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
import os
import sys

from torchtalk.errors import TorchTalkError

# command name -> its module under torchtalk.cli, in --help order
COMMANDS = {
    "index": "index",
    "watch": "watch",
    "status": "status",
    "query": "query",
    "eval": "eval",
    "rules": "rules",
    "report": "report",
    "affected": "affected",
    "snapshot": "snapshot",
    "mcp-serve": "mcp",
    "cursor-add": "cursor",
    "fetch": "fetch",
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or of command `only` alone: a run of one
    command imports one command module (Note [Cheap command modules])."""
    parser = argparse.ArgumentParser(
        prog="torchtalk",
        description="Datalog code intelligence for the PyTorch source tree.",
    )
    from torchtalk import __version__

    parser.add_argument("--version", action="version", version=f"torchtalk {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, modname in COMMANDS.items():
        if only is not None and name != only:
            continue
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
    first = _command(sys.argv[1:] if argv is None else argv)
    parser = build_parser(first if first in COMMANDS else None)
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        code = args._run(args)
    except TorchTalkError as err:
        return report_error(err, sys.stderr)
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


def _command(words: list[str]) -> str | None:
    """The command word of a command line (its first word not an option)."""
    return next((w for w in words if not w.startswith("-")), None)


def report_error(err: TorchTalkError, file) -> int:
    """Say `err` as every command does (one line, its hint and caret after)
    on `file`; the exit code."""
    print(f"torchtalk: {err.render()}", file=file)
    return 1


# True in the `torchtalk` program (`run`), which exits once `main` returns;
# False when `main` is called in a process that goes on (a test)
AS_PROGRAM = False


def run() -> None:
    """The `torchtalk` program: `main`, then a quick exit (Note [Quick exit])."""
    global AS_PROGRAM
    AS_PROGRAM = True
    if _command(sys.argv[1:]) in SHORT:
        import gc

        gc.disable()  # Note [No collector in a short command]
    code = main()
    if not _all_done():
        sys.exit(code)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, OSError):  # the reader left: nothing more to say
            pass
    os._exit(code)


def _all_done() -> bool:
    """No thread but this one and no child process is alive: the normal exit
    would only tear down (it joins children and runs their atexit handlers)."""
    mp, threading = sys.modules.get("multiprocessing"), sys.modules.get("threading")
    return not (mp is not None and mp.active_children()) and not (threading is not None and threading.active_count() > 1)


# the commands that answer from the fact DB and leave (Note [No collector in a short command])
SHORT = frozenset({"query", "status"})

# Note [No collector in a short command]: `torchtalk query` unpickles the
# rule library (44,000 objects, none of them garbage), and the cyclic
# garbage collector's passes over them cost 10-25 ms of a 250 ms process
# (the pickle alone loads in 13 ms with the collector off, 23-49 ms with it
# on). A command in SHORT runs as the program with the collector off:
# reference counting still frees every object not in a cycle, and the
# process is short. The in-memory engine run in the process (`--engine
# memory`), the most it allocates, peaked at 456 MB instead of 421 MB for
# `affected(cpublas::gemm) --all`. Only the program (`run`) turns it off;
# `main`, called in-process by the tests and the servers, leaves the
# collector as it finds it.

# Note [Quick exit]: a process that imported DuckDB spends 15-30 ms after its
# work is done tearing down the interpreter and DuckDB's instances, as long as
# a Soufflé run of a small program takes in all. The program (`run`, behind
# `python -m torchtalk` and the console script) leaves by os._exit once main
# has returned and no other thread or child process is alive (else it exits
# normally, which joins them): every command closes its connections, writes
# its files by rename (torchtalk/atomic.py) and joins its workers before it
# returns, so the teardown has nothing left to save. `main` itself returns
# normally, for the tests and callers in the same process.

if __name__ == "__main__":
    run()
