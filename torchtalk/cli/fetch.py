"""`torchtalk fetch`: download the real PyTorch 2.6.0 source tree, or a GPU
SDK's headers for the precise tier (Note [SDK headers] in extractors/clang/sdk.py)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

NAME = "fetch"
HELP = "download the PyTorch 2.6.0 source tree (Debian source package), or the CUDA/XPU SDK headers"
WHAT = ("pytorch", "cuda", "xpu")


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("what", nargs="?", default="pytorch", choices=WHAT,
                   help="pytorch (default): the source tree; cuda, xpu: that SDK's headers, "
                        "for `index --precise` (pinned pip wheels, headers only, into the user cache dir)")
    p.add_argument("--dest", type=Path, help="where to unpack the tree (default: the user cache dir)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def run(args: argparse.Namespace) -> int:
    import sys

    def log(msg: str) -> None:
        print(msg, file=sys.stderr)

    if args.what == "pytorch":
        from torchtalk.fetch import fetch_pytorch
        from torchtalk.paths import default_source

        path = fetch_pytorch(args.dest or default_source(), log=log)
        out = {"source": str(path)}
    else:
        from extractors.clang.sdk import fetch
        from torchtalk.errors import InputError

        if args.dest is not None:
            raise InputError("--dest is for the source tree; SDK headers go to the user cache dir",
                             hint="set TORCHTALK_CACHE_DIR to move it")
        path = fetch(args.what, log=log)
        out = {"sdk": args.what, "include": str(path)}
    print(json.dumps(out) if args.json else path)
    return 0
