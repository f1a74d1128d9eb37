"""`torchtalk fetch`: download the real PyTorch 2.6.0 source tree."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

NAME = "fetch"
HELP = "download the PyTorch 2.6.0 source tree (Debian source package)"


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dest", type=Path, help="where to unpack (default: the user cache dir)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def run(args: argparse.Namespace) -> int:
    import sys

    from torchtalk.fetch import fetch_pytorch
    from torchtalk.paths import default_source

    dest = args.dest or default_source()
    path = fetch_pytorch(dest, log=lambda m: print(m, file=sys.stderr))
    if args.json:
        print(json.dumps({"source": str(path)}))
    else:
        print(path)
    return 0
