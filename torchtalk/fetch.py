"""Fetch the real PyTorch 2.6.0 source tree, and extensions built against it,
from Debian's source packages.

No git hosting is reachable from our machines, but Debian's archive is: the
`pytorch` source package carries the upstream tree as `*.orig.tar.xz`, and
`pytorch-vision` and `pytorch-audio` torchvision 0.21.0's and torchaudio
2.6.0's (the versions built against torch 2.6) as `*.orig.tar.gz`. Only the upstream tarball is downloaded (`--tar-only`):
some mirrors serve it without the package's `.dsc`.

Example:
    >>> fetch_pytorch(Path("~/.cache/torchtalk/src/pytorch-v2.6.0"))
    >>> fetch_tree("torchvision", Path("~/.cache/torchtalk/src/vision-0.21.0"))
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from torchtalk.errors import InputError
from torchtalk.paths import PYTORCH_DEB_VERSION, PYTORCH_VERSION

SOURCES_FILE = Path("/etc/apt/sources.list.d/torchtalk-pytorch-src.sources")
SOURCES_TEXT = (
    "Types: deb-src\n"
    "URIs: http://deb.debian.org/debian\n"
    "Suites: trixie\n"
    "Components: main\n"
    "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
)


@dataclass(frozen=True)
class Tree:
    """A source tree Debian packages: `package=version` (a source package),
    its upstream tarball unpacking to `top/`, which holds `marker`."""

    name: str
    package: str
    version: str
    top: str
    marker: str


TREES = {
    "pytorch": Tree("pytorch", "pytorch", PYTORCH_DEB_VERSION, f"pytorch-v{PYTORCH_VERSION}",
                    "aten/src/ATen/native/native_functions.yaml"),
    "torchvision": Tree("torchvision", "pytorch-vision", "0.21.0-3", "vision-0.21.0", "torchvision/csrc/vision.cpp"),
    "torchaudio": Tree("torchaudio", "pytorch-audio", "2.6.0-1", "audio-2.6.0", "src/libtorchaudio/lfilter.cpp"),
}


def default_dest(name: str) -> Path:
    """Where `torchtalk fetch NAME` unpacks a tree: the user cache dir's src/."""
    from torchtalk.paths import cache_dir, default_source

    return default_source() if name == "pytorch" else cache_dir() / "src" / TREES[name].top


def fetch_pytorch(dest: Path, log=print) -> Path:
    """Download and unpack PyTorch 2.6.0 into `dest` (no-op when present)."""
    return fetch_tree("pytorch", dest, log)


def fetch_tree(name: str, dest: Path, log=print) -> Path:
    """Download and unpack tree `name` of TREES into `dest` (no-op when present)."""
    tree = TREES[name]
    dest = dest.expanduser()
    if (dest / tree.marker).is_file():
        return dest
    if shutil.which("apt-get") is None:
        raise InputError(
            f"cannot fetch {name}: apt-get not found",
            hint="pass --source PATH to a checkout",
        )
    _ensure_deb_src(log)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".fetch-") as tmp:
        log(f"downloading {tree.package}={tree.version} source package ...")
        _run(["apt-get", "source", "--download-only", "--tar-only", f"{tree.package}={tree.version}"], tmp)
        tarballs = sorted(Path(tmp).glob(f"{tree.package}_*.orig.tar.*"))
        if len(tarballs) != 1:
            raise InputError(f"`apt-get source {tree.package}` gave {len(tarballs)} upstream tarballs, not one")
        log(f"unpacking {tarballs[0].name} ...")
        with tarfile.open(tarballs[0]) as tf:
            tf.extractall(tmp, filter="tar")
        unpacked = Path(tmp) / tree.top
        if not (unpacked / tree.marker).is_file():
            raise InputError(f"unexpected layout in {tarballs[0].name}: no {tree.top}/{tree.marker}")
        os.replace(unpacked, dest)
    return dest


def _ensure_deb_src(log) -> None:
    if not SOURCES_FILE.exists():
        try:
            SOURCES_FILE.write_text(SOURCES_TEXT)
        except PermissionError as exc:
            raise InputError(
                f"cannot write {SOURCES_FILE}: need root to add Debian source packages",
                hint="run as root, or pass --source PATH",
            ) from exc
    log("apt-get update ...")
    _run(["apt-get", "update", "-qq"], None)


def _run(cmd: list[str], cwd: str | None) -> None:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["?"]
        raise InputError(f"`{' '.join(cmd)}` failed: {tail[0]}")
