"""`torchtalk eval`: run a Datalog program (Soufflé subset) over facts."""

from __future__ import annotations

import argparse
from pathlib import Path

from torchtalk.datalog.engines import ENGINES

NAME = "eval"
HELP = "evaluate a Datalog program over a fact DB or a directory of .facts files"


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("program", type=Path, help="the .dl file")
    p.add_argument("--facts", type=Path, metavar="DIR",
                   help="read <relation>.facts files (TSV) from DIR; with --db, their rows are added to the DB's")
    p.add_argument("--db", type=Path, metavar="FILE", help="the fact DB (default: the indexed default tree's, if any)")
    p.add_argument("--out", type=Path, metavar="DIR", help="write <relation>.csv per output relation into DIR")
    p.add_argument("--output", action="append", default=None, metavar="REL",
                   help="compute REL instead of the program's .output relations (repeatable)")
    p.add_argument("--engine", choices=ENGINES, default="duckdb",
                   help="souffle-compiled: Soufflé's compiled mode, each program compiled once (needs its headers)")
    p.add_argument("--sql", action="store_true", help="print the SQL plan of the embedded engine instead of running it")
    p.add_argument("--json", action="store_true", help="print {relation: [rows]} as JSON")


def run(args: argparse.Namespace) -> int:
    import json

    from torchtalk import api

    if args.sql:
        sql = api.compile_program(args.program, outputs=args.output)
        print(json.dumps({"sql": sql}) if args.json else sql, end="\n" if args.json else "")
        return 0
    results = api.eval_program(
        args.program, facts_dir=args.facts, db=args.db, outputs=args.output, engine=args.engine, out_dir=args.out
    )
    if args.out is not None:  # the rows are in the files
        written = {rel: {"file": str(args.out / (rel + ".csv")), "rows": getattr(rows, "total", len(rows))}
                   for rel, rows in results.items()}
        lines = [json.dumps(written)] if args.json else [f"{w['file']}\t{w['rows']} rows" for w in written.values()]
        print("\n".join(lines))
    elif args.json:
        print(json.dumps({rel: sorted(rows) for rel, rows in results.items()}))
    else:
        for rel, rows in results.items():
            print(f"{rel} ({len(rows)} rows)")
            for row in sorted(rows):
                print("\t" + "\t".join(str(v) for v in row))
    return 0
