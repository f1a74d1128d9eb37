"""`torchtalk fetch`: download the real PyTorch 2.6.0 source tree, an
extension's built against it (torchvision 0.21.0, torchaudio 2.6.0), or an SDK's headers for the precise tier (Note [SDK headers] in extractors/clang/sdk.py)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

NAME = "fetch"
HELP = ("download the PyTorch 2.6.0 (or torchvision 0.21.0, torchaudio 2.6.0) source tree (Debian source package), "
        "or an SDK's headers (CUDA, XPU, cuDNN, CUTLASS, pybind11, MKL, nlohmann/json)")
TREES = ("pytorch", "torchvision", "torchaudio")
SDK_NAMES = ("cuda", "xpu", "cudnn", "cutlass", "pybind11", "mkl", "nlohmann")  # extractors.clang.sdk.SDKS
WHAT = TREES + SDK_NAMES


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("what", nargs="?", default="pytorch", choices=WHAT,
                   help="pytorch (default): the source tree; torchvision, torchaudio: torchvision 0.21.0's, torchaudio 2.6.0's, "
                        "for `index --source EXT --with-torch`; cuda, xpu, cudnn, cutlass, pybind11, mkl, nlohmann: those headers, "
                        "for `index --precise` (pinned pip wheels, headers only, into the user cache dir)")
    p.add_argument("--dest", type=Path, help="where to unpack the tree (default: the user cache dir)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def run(args: argparse.Namespace) -> int:
    import sys

    def log(msg: str) -> None:
        print(msg, file=sys.stderr)

    if args.what in TREES:
        from torchtalk.fetch import default_dest, fetch_tree

        path = fetch_tree(args.what, args.dest or default_dest(args.what), log=log)
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
