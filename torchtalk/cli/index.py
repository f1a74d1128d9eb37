"""`torchtalk index`: extract facts from a PyTorch tree into its fact DB."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

NAME = "index"
HELP = "extract facts from a PyTorch tree (or installed torch) into its fact database"


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("--source", type=Path, help="PyTorch tree or installed torch package (default: the fetched 2.6.0 tree)")
    p.add_argument("--db", type=Path, help="database file (default: in the user cache dir, keyed by the tree)")
    p.add_argument("--with-torch", type=Path, metavar="PYTORCH_TREE",
                   help="--source is a PyTorch extension (torchvision, ...): index it beside this torch tree, into one DB")
    p.add_argument("--layers", help="comma-separated layers to (re)index: ops,cpp,python,tests,precise")
    p.add_argument("--precise", action="store_true", help="also run the precise (libclang) layer")
    p.add_argument("--jobs", type=int, help="worker processes for the layers that use them")
    p.add_argument("--force", action="store_true", help="re-run every chosen layer even if unchanged")
    p.add_argument("--quiet", action="store_true", help="no progress bar, no per-layer lines")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def run(args: argparse.Namespace) -> int:
    import sys

    from torchtalk import api, cli
    from torchtalk.errors import InputError
    from torchtalk.paths import default_source

    if args.jobs is not None and args.jobs < 1:
        raise InputError(f"--jobs must be at least 1, got {args.jobs}")
    if args.with_torch is not None and args.source is None:
        raise InputError("--with-torch needs --source EXT, the extension's checkout")
    source = args.source or default_source()
    if args.source is None and not source.exists():
        raise InputError(f"no PyTorch tree at {source}", hint="run `torchtalk fetch` or pass --source PATH")
    log = None if args.quiet else (lambda m: print(m, file=sys.stderr, flush=True))
    report = api.index(
        source,
        db=args.db,
        layers=args.layers.split(",") if args.layers else None,
        precise=args.precise,
        jobs=args.jobs,
        force=args.force,
        log=log,
        progress=not args.quiet,
        with_torch=args.with_torch,
        resume_gc=not cli.AS_PROGRAM,  # the program exits next: no GC over the update's objects
    )
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
        return 0
    total = sum(lr.rows for lr in report.layers)
    state = "up to date" if report.up_to_date else f"indexed in {report.seconds:.2f} s"
    print(f"{report.db}: {total:,} rows, {state}")
    return 0
