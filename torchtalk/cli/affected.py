"""`torchtalk affected`: the tests to run for a diff (git revision or stdin)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

NAME = "affected"
HELP = "rank the tests to run for a diff: changed functions -> ops -> Python APIs -> tests"


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("--diff", metavar="REV", help="compare REV with the working tree (git checkouts)")
    p.add_argument("--patch", type=Path, metavar="FILE", help="a unified diff file ('-' or none: stdin)")
    p.add_argument("--source", type=Path, help="the PyTorch tree (default: the fetched 2.6.0 tree)")
    p.add_argument("--db", type=Path, help="database file to use")
    p.add_argument("--depth", type=int, default=6, help="call-graph steps to walk up (default 6)")
    p.add_argument("--limit", type=int, default=30, help="tests shown in text output (default 30)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def run(args: argparse.Namespace) -> int:
    import sys

    from torchtalk import api
    from torchtalk.errors import InputError

    if args.diff and args.patch:
        raise InputError("give --diff REV or --patch FILE, not both")
    if args.diff:
        text, origin = None, f"git diff {args.diff}"
    elif args.patch and str(args.patch) != "-":
        if not args.patch.is_file():
            raise InputError(f"no such file: {args.patch}")
        text, origin = args.patch.read_text(errors="replace"), str(args.patch)
    else:
        if sys.stdin.isatty():
            raise InputError("no diff given", hint="use --diff REV, --patch FILE, or pipe a diff on stdin")
        text, origin = sys.stdin.read(), "<stdin>"
    report = api.affected(diff=text, rev=args.diff, source=args.source, db=args.db,
                          depth=args.depth, origin=origin)
    if args.json:
        print(json.dumps(report.to_json(), indent=1))
        return 0
    _print(report, args.limit)
    return 0


def _print(report, limit: int) -> None:
    ch = report.changes
    for label, items in (("functions", ch.fns), ("python", ch.pys), ("tests", ch.tests), ("ops", ch.ops)):
        for name, (f, ln) in sorted(items.items()):
            print(f"changed {label[:-1] if label.endswith('s') else label}: {name}  {f}:{ln}")
    if ch.unmapped:
        print(f"no known entity in: {', '.join(ch.unmapped)}")
    print(f"{len(report.tests)} test(s) to run")
    for t in report.tests[:limit]:
        print(f"  {t.test}  (rank {t.rank}: {t.why}; depth {t.depth}, reached by {t.reached_by})")
        print("      " + " -> ".join(str(s) for s in t.chain))
    if len(report.tests) > limit:
        print(f"  ... and {len(report.tests) - limit} more (--limit, --json)")
