"""Git-aware change detection for the per-file caches.

Note [Git-aware digests]: a file's cache key is derived from its git blob id
(sha1 of "blob <size>\\0<bytes>"), which we compute ourselves for any tree. In
a git checkout, git already knows the blob id of every tracked file whose
work-tree copy matches the index, so those files are not read at all: only
the files git reports as modified (and untracked ones) are read and hashed.
This makes re-indexing after `git checkout`/`git pull` cost one `git status`
plus the changed files, whatever the files' mtimes.

Example:
    >>> clean_blobs(root, ("aten", "c10", "torch/csrc"))["aten/src/ATen/native/CPUBlas.cpp"]
    '3b18e512dba79e4c8300dd08f1b38d5e7b94d7d1'
"""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Iterable
from pathlib import Path


def blob_id(data: bytes) -> str:
    """Git's blob id of `data` (what `git hash-object` prints)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def clean_blobs(root: Path, tops: Iterable[str]) -> dict[str, str] | None:
    """{path: blob id} of the tracked files under `tops` whose work-tree copy
    git reports unmodified; None when `root` is not a git checkout (or git fails)."""
    if not (root / ".git").exists():
        return None
    tops = list(tops)
    try:
        staged = _git(root, ["ls-files", "-s", "-z", "--", *tops])
        dirty = _git(root, ["status", "--porcelain", "-z", "--untracked-files=no", "--", *tops])
    except (OSError, subprocess.SubprocessError):
        return None
    if staged is None or dirty is None:
        return None
    blobs = {}
    for entry in staged.split(b"\0"):
        if not entry:
            continue
        meta, _, path = entry.partition(b"\t")
        parts = meta.split()
        if len(parts) == 3 and parts[2] == b"0":  # stage 0: not in a merge conflict
            blobs[path.decode(errors="surrogateescape")] = parts[1].decode()
    for entry in dirty.split(b"\0"):
        if len(entry) > 3:  # "XY path"; a rename's source follows as its own entry
            blobs.pop(entry[3:].decode(errors="surrogateescape"), None)
    return blobs


def _git(root: Path, args: list[str]) -> bytes | None:
    proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, timeout=120)
    return proc.stdout if proc.returncode == 0 else None
