"""`torchtalk status`: what is indexed (tree, version, rows, timings)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

NAME = "status"
HELP = "show what is indexed: tree, PyTorch version, rows per relation, layer timings"


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("--source", type=Path, help="PyTorch tree whose DB to show (default: the fetched 2.6.0 tree)")
    p.add_argument("--db", type=Path, help="database file to show")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def run(args: argparse.Namespace) -> int:
    from torchtalk.freshness import notice
    from torchtalk.store import db_status, resolve_db, tier_note

    path = resolve_db(source=args.source, db=args.db)
    st = db_status(path)
    st["stale"] = notice(path, st["meta"].get("source") or None)
    st["compiler_tier"] = tier_note(st["relations"])
    from torchtalk.qclient import ping

    st["server"] = ping(path)  # the process answering `torchtalk query` for the DB (Note [Query server])
    if args.json:
        print(json.dumps(st, indent=2))
        return 0
    meta = st["meta"]
    print(f"database  {st['db']}")
    print(f"source    {meta.get('source', '')} ({meta.get('kind', '')})")
    if meta.get("with_torch"):  # an extension indexed beside its torch (torchtalk/extension.py)
        print(f"beside    {meta['with_torch']} (its DB {meta.get('torch_db', '?')})")
    print(f"version   {meta.get('version', '') or '?'}   git {meta.get('git_commit', '') or '-'}")
    print(f"indexed   {meta.get('indexed_at', '')}")
    if st["stale"]:
        print(f"changed   {st['stale']}")
    if st["compiler_tier"]:
        print(f"tiers     {st['compiler_tier']}")
    if st["server"]:
        srv = st["server"]
        print(f"server    pid {srv['pid']} answers `torchtalk query` ({'warm' if srv['warm'] else 'warming'}; "
              f"{srv['served']} answered) at {srv['socket']}")
    if meta.get("derived"):
        print(f"stored    {meta['derived']} (rules computed once per index)")
    print("layers")
    for lr in st["layers"]:
        print(f"  {lr['layer']:<10} {lr['rows']:>10,} rows  {lr['seconds']:>7.2f} s  "
              f"{lr['warnings']:>5} warnings  at {lr['indexed_at']}")
    print("relations")
    for name, n in st["relations"].items():
        if n:
            print(f"  {name:<22} {n:>10,}")
    empty = [name for name, n in st["relations"].items() if not n]
    if empty:
        print(f"  (empty: {', '.join(empty)})")
    return 0
