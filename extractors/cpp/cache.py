"""Per-file content-hash cache of FileFacts, and of the resolved rows.

Note [cpp cache layout] (in the layer's `ctx.cache_dir`):
  files/<sha1 of path + content + scanner version>.pkl   one FileFacts per file
               (its ids depend on its path, Note [Internal linkage ids])
  index.pkl    (VERSION, {rel path: (size, mtime_ns, digest)}) of the last run
  state.bin    (digest of RESOLVE_VERSION and all file digests, stats,
               the Parts of Note [Incremental resolution], generation) of
               the last run, then each file's resolved rows apart: the
               layer's state, one read (marshal, write_parts: plain values
               only; Note [State by file])
  index-<key>.pkl the Index of the last run (extractors/cpp/incremental.py)
Every write goes to a temp file first and is renamed into place, so a killed
run never leaves a half-written entry. Entries are per file content, so a
changed file costs one re-scan and an unchanged tree costs stats only.

Example:
    >>> digest_of(b"int f();", "aten/x.cpp")
    '...'
"""

from __future__ import annotations

import hashlib
import marshal
import os
import pickle
import sys
from pathlib import Path
from typing import Any

from extractors.base import source_digest
from torchtalk.atomic import atomic_open

# Note [Code in the cache key]: a per-file entry holds what the scanner made
# of a file, so its key carries the scanner's own source as well as a version
# bumped by hand: an edit to scan.py or a module it uses (names.py's
# strip_templates changed how `operator_brackets_proxy<self_type>(...)` is
# named, and entries written before it kept the old name) makes new keys, and
# no run mixes FileFacts of two scanners. The same holds for the resolved
# rows the layer's state keeps (resolve.RESOLVE_VERSION). Reading the few
# modules costs well under a millisecond.
SCANNER_MODULES = ("scan.py", "argtypes.py", "constructs.py", "fields.py", "macros.py", "names.py", "preprocess.py",
                   "aten.py", "library.py")


VERSION = f"cpp-fast-54-{source_digest(SCANNER_MODULES, Path(__file__).parent)}"  # bump the number when FileFacts' shape changes


def digest_of(data: bytes, rel: str) -> str:
    """Digest of tree file `rel` with bytes `data` (scanner version included),
    built on its git blob id (Note [Git-aware digests]). The path is part of
    it: a file's FileFacts name its internal functions by it (Note [Internal
    linkage ids]), so two files of equal content are two entries."""
    from extractors.cpp.gitinfo import blob_id

    return digest_of_blob(blob_id(data), rel)


def digest_of_blob(blob: str, rel: str) -> str:
    """The digest of tree file `rel` whose git blob id is `blob`."""
    return hashlib.sha1(VERSION.encode() + b"\0" + rel.encode() + b"\0" + blob.encode()).hexdigest()


def write_atomic(path: Path, obj: Any) -> None:
    """Pickle `obj` to `path` atomically (torchtalk/atomic.py)."""
    with atomic_open(path) as fh:
        pickle.dump(obj, fh, protocol=pickle.HIGHEST_PROTOCOL)


def read(path: Path) -> Any | None:
    """The pickled object at `path`, or None when missing or unreadable."""
    try:
        with open(path, "rb") as fh:
            return pickle.load(fh)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, ValueError):
        return None


# marshal's format is the interpreter's: a state another Python wrote is not read
# Note [State by file]: the layer's state is 20 MB of marshal, mostly each
# file's resolved rows, and an edit changes one file's. Written whole, it
# took 0.28-0.30 s of every `.cpp` update (marshal's dumps: in a watcher, a
# C call holding the GIL from the query server's threads too), and its load
# 0.2-0.3 s. So each file's entry is its own marshal blob after a head: a
# run keeps the blobs it read (or wrote) beside the entries they are of,
# and dumps again only those of entries it made anew: a body edit's
# dumps take ~10 ms. The 20 MB are still written (48-63 ms alone; 0.2 s
# in a `torchtalk index` process, whose write of the DB just before leaves
# the disk's writeback behind). Dumped apart, the 4,210 blobs also load
# faster (0.20 s) than one dump of them (0.32 s): marshal's table of shared
# objects stays small. The tree's rows, the files' rows merged, are not
# written at all: the reader merges them again (incremental.rows_of, 22-29 ms).
_PARTS_MAGIC = f"torchtalk-cpp-parts {VERSION} {sys.version_info[0]}.{sys.version_info[1]}\n".encode()


def write_parts(path: Path, head: Any, blobs: dict[str, bytes]) -> None:
    """Write `head` (plain values) and the marshal `blobs` by name to `path`
    atomically (Note [State by file])."""
    names = list(blobs)
    top = marshal.dumps((head, [(n, len(blobs[n])) for n in names]), 4)
    with atomic_open(path) as fh:
        fh.write(_PARTS_MAGIC)
        fh.write(len(top).to_bytes(8, "little"))
        fh.write(top)
        fh.writelines(blobs[n] for n in names)


def read_parts(path: Path) -> tuple[Any, dict[str, bytes]] | None:
    """(head, blobs by name) of a file `write_parts` wrote, or None when
    missing, unreadable or written by another scanner or Python version."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
        if not data.startswith(_PARTS_MAGIC):
            return None
        at = len(_PARTS_MAGIC)
        size = int.from_bytes(data[at:at + 8], "little")
        head, lengths = marshal.loads(memoryview(data)[at + 8:at + 8 + size])
        at += 8 + size
        blobs = {}
        for name, n in lengths:
            blobs[name] = data[at:at + n]
            at += n
        if at != len(data):
            return None
        return head, blobs
    except (OSError, EOFError, ValueError, TypeError):
        return None


def entry_path(cache_dir: Path, digest: str) -> Path:
    return cache_dir / "files" / f"{digest}.pkl"


def drop_unused(cache_dir: Path, keep: set[str], older_than: float) -> int:
    """Delete per-file entries whose digest is not in `keep` (old versions of
    files, old scanner versions) and that predate this run; returns how many."""
    dropped = 0
    try:
        entries = list(os.scandir(cache_dir / "files"))
    except OSError:
        return 0
    for entry in entries:
        digest = entry.name.removesuffix(".pkl")
        if digest in keep or entry.name.startswith(".tmp-"):
            continue
        try:
            if entry.stat().st_mtime < older_than:
                os.unlink(entry.path)
                dropped += 1
        except OSError:
            pass
    return dropped
