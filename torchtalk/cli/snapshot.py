"""`torchtalk snapshot save|load|list|diff|export|import`: frozen fact DBs."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

NAME = "snapshot"
HELP = "save, load, list, diff, export and import snapshots of a tree's fact DB"


def register(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)

    def add(name: str, help_: str, db: bool = True) -> argparse.ArgumentParser:
        q = sub.add_parser(name, help=help_, description=help_)
        if db:
            q.add_argument("--source", type=Path, help="PyTorch tree whose DB to use (default: the fetched tree)")
            q.add_argument("--db", type=Path, help="database file to use")
        q.add_argument("--json", action="store_true", help="print the result as JSON")
        return q

    add("save", "save the tree's fact DB as a snapshot").add_argument("name", nargs="?")
    q = add("load", "make a snapshot the tree's fact DB")
    q.add_argument("name", nargs="?")
    q.add_argument("--nearest", action="store_true", help="pick the snapshot closest to the tree")
    add("list", "list the snapshots", db=False)
    q = add("diff", "what changed between two snapshots (or DB files)", db=False)
    q.add_argument("a")
    q.add_argument("b")
    q.add_argument("--limit", type=int, default=20, help="items shown per list in text output")
    q = add("export", "pack a snapshot into a .tar.gz", db=False)
    q.add_argument("name")
    q.add_argument("file", type=Path)
    q = add("import", "unpack a snapshot exported elsewhere", db=False)
    q.add_argument("file", type=Path)
    q.add_argument("--name", help="import under this name")


def run(args: argparse.Namespace) -> int:
    from torchtalk import api

    action = args.action
    if action == "save":
        out = api.snapshot_save(args.name, source=args.source, db=args.db).to_json()
        text = f"saved snapshot {out['name']} ({out['version'] or '?'}, {sum(out['relations'].values()):,} rows)"
    elif action == "load":
        if not args.name and not args.nearest:
            from torchtalk.errors import InputError

            raise InputError("snapshot load needs a NAME or --nearest")
        info, db = api.snapshot_load(args.name, source=args.source, db=args.db, nearest=args.nearest)
        out = {**info.to_json(), "db": str(db)}
        text = f"loaded snapshot {info.name} into {db}"
    elif action == "list":
        out = [s.to_json() for s in api.snapshot_list()]
        text = "\n".join(f"{s['name']:<40} {s['created']}  {s['version'] or '?':<10} "
                         f"{(s['git_commit'] or '-')[:10]:<10} {s['source']}" for s in out) or "no snapshots"
    elif action == "diff":
        out = api.snapshot_diff(args.a, args.b)
        text = _diff_text(out, args.limit)
    elif action == "export":
        path = api.snapshot_export(args.name, args.file)
        out, text = {"file": str(path)}, f"exported {args.name} to {path}"
    else:
        info = api.snapshot_import(args.file, args.name)
        out, text = info.to_json(), f"imported snapshot {info.name}"
    print(json.dumps(out, indent=1) if args.json else text)
    return 0


def _diff_text(diff: dict, limit: int) -> str:
    lines = []
    for cat, parts in diff.items():
        counts = ", ".join(f"{len(v)} {k}" for k, v in parts.items())
        lines.append(f"{cat}: {counts}")
        for what, items in parts.items():
            sign = {"added": "+", "removed": "-", "changed": "~"}[what]
            lines += [f"  {sign} {item}" for item in items[:limit]]
            if len(items) > limit:
                lines.append(f"  {sign} ... and {len(items) - limit} more")
    return "\n".join(lines)
