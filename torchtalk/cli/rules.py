"""`torchtalk rules check`: parse and check .dl files (Soufflé subset)."""

from __future__ import annotations

import argparse
from pathlib import Path

NAME = "rules"
HELP = "check rule files: syntax, declarations, arity, types, grounding, stratification"


def register(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="rules_cmd", metavar="SUBCOMMAND", required=True)
    c = sub.add_parser("check", help="check .dl files", description="check .dl files")
    c.add_argument("files", type=Path, nargs="+", metavar="FILE.dl")
    c.add_argument("--json", action="store_true", help="one JSON object per file")
    p.add_argument("--json", action="store_true", help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    import json
    import sys

    from torchtalk import api

    reports = api.check_rules(args.files)
    if args.json:
        print(json.dumps(reports, indent=1))
    else:
        for r in reports:
            if r["ok"]:
                warned = f", {len(r['warnings'])} warning{'s' * (len(r['warnings']) != 1)}" if r["warnings"] else ""
                print(f"{r['file']}: ok ({r['relations']} relations, {r['rules']} rules{warned})")
                if r["warnings"]:  # kept apart from errors: the program still runs (exit 0)
                    print("\n".join(w["rendered"] for w in r["warnings"]), file=sys.stderr)
            else:
                print("\n".join(e["rendered"] for e in r["errors"]), file=sys.stderr)
    return 0 if all(r["ok"] for r in reports) else 1
