"""`torchtalk query`: run a DSL query (a named relation of the rule library).

A `torchtalk watch` or `mcp-serve` of the same DB answers it when one runs,
with the bytes this process would write (Note [Query server] in
torchtalk/qserver.py); else, or with TORCHTALK_SERVER=0, it runs here.
"""

from __future__ import annotations

import argparse
from pathlib import Path

NAME = "query"
HELP = "answer a query: impact(gemm), trace(torch.matmul), callees(matmul), ..."


class _Engines:
    """The engines' names (torchtalk.datalog.engines.ENGINES) as argparse's
    choices, imported when argparse reads them (an --engine given, --help):
    the Datalog package is a fifth of a served query's process time."""

    def __contains__(self, name: object) -> bool:
        return name in self._names()

    def __iter__(self):
        return iter(self._names())

    @staticmethod
    def _names() -> tuple[str, ...]:
        from torchtalk.datalog.engines import ENGINES

        return ENGINES


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("query", nargs="?", help='e.g. "impact(cpublas::gemm, depth=3)"')
    where = p.add_mutually_exclusive_group()
    where.add_argument("--source", type=Path, help="the PyTorch tree whose fact DB to use")
    where.add_argument("--db", type=Path, help="the fact DB file")
    p.add_argument("--json", action="store_true",
                   help="{columns, rows, total, notes}: rows as objects keyed by column")
    p.add_argument("--limit", type=int, default=None, metavar="N",
                   help="show about N rows (default 40; sections and overloads grouped, see docs/queries.md)")
    p.add_argument("--engine", choices=_Engines(), default=None, metavar="ENGINE",  # a metavar: not read at once
                   help="%(choices)s; default: a running server's (in memory), else duckdb; given, the query "
                        "runs in this process; souffle-compiled: Soufflé's compiled mode, each program compiled "
                        "once (needs its headers)")
    p.add_argument("--rules", type=Path, action="append", default=[], metavar="DIR",
                   help="add the .dl files of DIR (repeatable)")
    p.add_argument("--all", action="store_true", dest="all_matches",
                   help="show every row, and answer for every match of an ambiguous name")
    p.add_argument("--explain", action="store_true",
                   help="show how the first row was derived (rules and facts, with file:line)")
    p.add_argument("--explain-rows", type=int, default=1, metavar="N",
                   help="with --explain: how many rows to explain (default 1)")
    p.add_argument("--list", action="store_true", help="list the named queries and exit")
    p.add_argument("--dump-passes", type=Path, metavar="DIR",
                   help="write the program after each pass (prune, use_stored, presolve) as DIR/NN-<pass>.dl")


def run(args: argparse.Namespace) -> int:
    import sys

    code = _served(args)
    if code is not None:
        return code
    return answer(args, sys.stdout, sys.stderr)


def answer(args: argparse.Namespace, out, err, con=None, note: bool = True) -> int:
    """Answer `args`' query: the table or JSON on `out`, notes and what was
    left out on `err`, then the stale-index note (unless not `note`: a query
    server's client says it, Note [Query server]); the exit code (a
    TorchTalkError is raised). `con`: a connection to the DB to read (a
    query server's), else the DB of --source / --db is opened."""
    from torchtalk.errors import InputError

    if args.limit is not None and args.limit < 0:
        raise InputError(f"--limit must be >= 0, got {args.limit}")
    if args.list:
        return _list(args, out)
    if not args.query:
        raise InputError("no query given", hint='e.g. torchtalk query "impact(gemm)"')
    stale = None
    if note:  # Note [Stale note meanwhile]
        note_imports()
        from torchtalk.meanwhile import Meanwhile

        stale = Meanwhile(lambda: stale_note(args), name="torchtalk-stale-note")
    try:
        _write_answer(args, out, err, con)
    except BaseException:
        if stale is not None:
            stale.join()  # not said after an error; joined, so the process leaves by the quick exit
        raise
    said = stale.result() if stale is not None else None
    if said:
        err.write(said)
    return 0


def _write_answer(args: argparse.Namespace, out, err, con) -> None:
    """The answer to `args`' query, as a table or JSON, on `out` (its notes on `err`)."""
    from torchtalk import api
    from torchtalk.query import output

    # Note [Sized answers]: a table groups every row, so it fetches them all;
    # JSON rows are the relation's, fetched up to the cap
    cap = None if args.all_matches and args.limit is None else (
        args.limit if args.limit is not None else output.CLI_ROWS)
    # a table's rows get their chains only where it shows them (Note [Chains for the rows read])
    pick = None if args.json or cap is None else (lambda columns, rows: output.table_rows(columns, rows, cap))
    result = api.query(
        args.query, source=args.source, db=args.db, con=con, limit=cap if args.json else None, rules=args.rules,
        engine=args.engine, all_matches=args.all_matches,
        explain=max(1, args.explain_rows) if args.explain else None, dump_passes=args.dump_passes,
        chains_for=pick, per_section=None if pick is None else cap,
    )
    if args.json:
        print(output.to_json(result, cap), file=out)
    else:
        output.print_table(result, file=out, cap=cap, text=args.query.strip(), err=err)


# Note [Stale note meanwhile]: the stale-index note (Note [Stale index] in
# torchtalk/freshness.py) stats the ~7,400 files the index read: 30-40 ms of
# a 250 ms `torchtalk query` process. The stats wait on the kernel, not on
# the interpreter, and most of the query's own time is DuckDB's, which
# releases the GIL. So the note is computed in a thread while the query runs
# (as a query server's client computes it while the server answers,
# torchtalk/qclient.py) and said after the answer, as before. An error in it
# is raised after the answer is written, where it came before. Every module
# it reads is imported first, in the main thread (`note_imports`; why, in
# torchtalk/meanwhile.py: platformdirs, which both threads resolve paths
# with, was the package seen imported twice at once).


def note_imports() -> None:
    """Import what `stale_note` reads, so that its thread imports nothing
    (Note [Stale note meanwhile])."""
    import hashlib  # noqa: F401 - torchtalk.paths' digest of a tree's path

    import platformdirs  # noqa: F401

    import torchtalk.errors  # noqa: F401
    import torchtalk.freshness  # noqa: F401
    import torchtalk.paths  # noqa: F401
    import torchtalk.watch  # noqa: F401


# what a query server needs of the arguments besides the DB (Note [Query server])
SERVED = {"query": str, "json": bool, "limit": (int, type(None)), "all_matches": bool, "explain": bool,
          "explain_rows": int}


def _served(args: argparse.Namespace) -> int | None:
    """The exit code of the query answered by a server of its DB, its output
    written; None when none answered (Note [Query server])."""
    if not args.query or args.list or args.rules or args.dump_passes or args.engine:
        return None
    from torchtalk import qclient

    if not qclient.enabled():
        return None
    import sys

    from torchtalk.errors import TorchTalkError
    from torchtalk.paths import resolve_db

    try:
        db = resolve_db(source=args.source, db=args.db)
    except TorchTalkError:  # said properly by the run here
        return None
    return qclient.ask_query(to_request(args, sys.stdout.isatty()), db, sys.stdout, sys.stderr,
                             note=lambda: stale_note(args))


def to_request(args: argparse.Namespace, tty: bool) -> dict:
    """`args` as a query server reads them (`from_request`): the DB named by
    an absolute path, the tree by its resolved one (the stale-index note
    names it), and whether stdout is a terminal (a table is drawn then)."""
    from torchtalk.paths import default_source

    where = ({"db": str(Path(args.db).expanduser().absolute()), "source": None} if args.db is not None else
             {"db": None, "source": str(Path(args.source or default_source()).expanduser().resolve())})
    return {**{k: getattr(args, k) for k in SERVED}, **where, "stdout_tty": tty}


def from_request(message: dict) -> argparse.Namespace:
    """The arguments of a query a client sent (`to_request`); ValueError when malformed."""
    for key, kind in SERVED.items():
        value = message.get(key)
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            raise ValueError(f"{key}: {value!r}")
    where = {k: None if message.get(k) is None else Path(str(message[k])) for k in ("db", "source")}
    return argparse.Namespace(**{k: message[k] for k in SERVED}, **where, rules=[], engine=None, list=False,
                              dump_passes=None)


def stale_note(args: argparse.Namespace) -> str | None:
    """The line said on stderr after the answer when the tree changed since
    its index (Note [Stale index]), or None. Cheap to import: a query
    server's client says it while the server answers."""
    from torchtalk.freshness import notice
    from torchtalk.paths import default_source, resolve_db

    if args.db is not None:
        note = notice(Path(args.db))
    else:
        source = args.source or default_source()
        note = notice(resolve_db(source=source), str(Path(source).expanduser().resolve()))
    return f"torchtalk: note: {note}\n" if note else None


def _list(args: argparse.Namespace, out) -> int:
    import json

    from torchtalk import api

    queries = api.list_queries(rules=args.rules)
    if args.json:
        print(json.dumps(queries, indent=1), file=out)
        return 0
    for q in queries:
        print(f"{q['usage']:<44} {q['file']}:{q['line']}", file=out)
    return 0
