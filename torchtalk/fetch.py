"""Fetch the real PyTorch 2.6.0 source tree from Debian's source packages.

No git hosting is reachable from our machines, but Debian's archive is: the
`pytorch` source package carries the upstream tree as `*.orig.tar.xz`.

Example:
    >>> fetch_pytorch(Path("~/.cache/torchtalk/src/pytorch-v2.6.0"))
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import tempfile
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


def fetch_pytorch(dest: Path, log=print) -> Path:
    """Download and unpack PyTorch 2.6.0 into `dest` (no-op when present)."""
    dest = dest.expanduser()
    if (dest / "aten/src/ATen/native/native_functions.yaml").is_file():
        return dest
    if shutil.which("apt-get") is None:
        raise InputError(
            "cannot fetch PyTorch: apt-get not found",
            hint="pass --source PATH to a PyTorch checkout",
        )
    _ensure_deb_src(log)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".fetch-") as tmp:
        log(f"downloading pytorch={PYTORCH_DEB_VERSION} source package ...")
        _run(["apt-get", "source", "--download-only", f"pytorch={PYTORCH_DEB_VERSION}"], tmp)
        (tarball,) = Path(tmp).glob("pytorch_*.orig.tar.xz")
        log(f"unpacking {tarball.name} ...")
        with tarfile.open(tarball) as tf:
            tf.extractall(tmp, filter="tar")
        unpacked = Path(tmp) / f"pytorch-v{PYTORCH_VERSION}"
        if not unpacked.is_dir():
            raise InputError(f"unexpected layout in {tarball.name}: no pytorch-v{PYTORCH_VERSION}/")
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
