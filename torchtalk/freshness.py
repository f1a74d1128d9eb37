"""Noticing, without a watcher, that the tree changed since it was indexed.

Note [Stale index]: each layer's dir in the facts dir keeps `inputs.tsv`:
the path, size and mtime of every file the layer read at its last run, and
the mtime of each directory down to one with a digest of its subdirs' and
source files' names (a file added or deleted changes its directory's mtime;
an edit, the file's, and an editor's save by rename the dir's mtime but not
its names). `changed_inputs` stats them again (some 10K stats, tens of ms;
no file read, no DB opened) and lists a directory only when its mtime
moved. `status` and `query` print `notice` as one line when something
differs, naming the way to bring the index up to date; `index` fingerprints
a layer from the record while no directory's names changed (`quick_stats`).

Example:
    >>> notice(resolve_db(source="~/pytorch"))  # doctest: +SKIP
    'the tree changed since it was indexed: aten/src/ATen/native/CPUBlas.cpp (1 file); ...'
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

INPUTS = "inputs.tsv"


def write_inputs(layer_dir: Path, root: Path, code: str, stats: list[tuple[str, int, int]]) -> None:
    """Write a layer's `inputs.tsv`: a `#code` line (the layer's code digest),
    its files, then every directory from `root` down to them (size -1)."""
    lines = [f"#code\t{code}\n", f"#root\t{os.fspath(root)}\n"] + [f"{p}\t{size}\t{mtime}\n" for p, size, mtime in stats]
    dirs = set()
    top = os.fspath(root)
    for p, _s, _m in stats:
        d = os.path.dirname(p)
        while d not in dirs and d.startswith(top):
            dirs.add(d)
            d = os.path.dirname(d)
    listed = {}
    for d in sorted(dirs):
        try:
            mtime = os.stat(d).st_mtime_ns
            known = _LISTED.get(d)
            listed[d] = (mtime, known[1] if known and known[0] == mtime else listing(d))
            lines.append(f"{d}\t-1\t{mtime}\t{listed[d][1]}\n")
        except OSError:
            continue
    with open(layer_dir / INPUTS, "w", encoding="utf-8") as fh:
        fh.writelines(lines)
    _keep_read(layer_dir / INPUTS, (code, {p: (size, mtime) for p, size, mtime in stats}, listed))


# Note [Listings known]: dir -> (mtime, listing) of the dirs `quick_stats`
# found as recorded in this process, for `write_inputs` to take while a dir's
# mtime is the same (a name that came or went moves it, Note [Stale index])
# instead of listing each again: 3 layers' 600 dirs, 20 ms of each update
_LISTED: dict[str, tuple[int, str]] = {}


def listing(d: str) -> str:
    """A digest of the names in dir `d` a layer could read: its subdirs and
    its source files (torchtalk.watch.SUFFIXES; not an editor's swap file).
    A file rewritten under its own name (by an editor's rename) keeps it."""
    from torchtalk.watch import SUFFIXES

    with os.scandir(d) as it:
        names = sorted(e.name for e in it if e.name.endswith(SUFFIXES) or e.is_dir(follow_symlinks=False))
    return hashlib.sha1("\0".join(names).encode()).hexdigest()[:16]


# Note [Records read once]: a watcher's update reads every layer's
# inputs.tsv (10,000 lines) to stamp it, and most are the ones the last
# update read or wrote: linked into the new facts dir (a layer that did not
# run) or written by this process. So a record is kept by its file's
# identity (device, inode, size, mtime: a link or a rename keeps them, a
# rewrite does not), as read or written, for the next read of the same file.
# The record is never changed by its readers. A query server's threads read
# records (the stale note) while the watcher's update writes them: a lock.
_RECORDS: dict[tuple, tuple] = {}
_RECORDS_KEPT = 16
_RECORDS_LOCK = threading.Lock()


def _identity(path: Path) -> tuple | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def _keep_read(path: Path, record: tuple) -> None:
    ident = _identity(path)
    if ident is not None:
        with _RECORDS_LOCK:
            if len(_RECORDS) >= _RECORDS_KEPT:
                _RECORDS.pop(next(iter(_RECORDS)))
            _RECORDS[ident] = record


def _read(layer_dir: Path) -> tuple[str, dict[str, tuple[int, int]], dict[str, tuple[int, str]]] | None:
    """(code digest, files -> (size, mtime), dirs -> (mtime, listing)) of a
    layer's inputs.tsv, None without one (Note [Records read once])."""
    ident = _identity(layer_dir / INPUTS)
    if ident is None:
        return None
    with _RECORDS_LOCK:
        hit = _RECORDS.get(ident)
    if hit is not None:
        return hit
    try:
        text = (layer_dir / INPUTS).read_text(encoding="utf-8")
    except OSError:
        return None
    code, files, dirs = "", {}, {}
    for line in text.splitlines():
        if line.startswith("#"):
            code = line[6:] if line.startswith("#code\t") else code
            continue
        path, size, mtime, *names = line.split("\t")
        if size == "-1":
            dirs[path] = (int(mtime), names[0] if names else "")
        else:
            files[path] = (int(size), int(mtime))
    _keep_read(layer_dir / INPUTS, (code, files, dirs))
    return code, files, dirs


def quick_stats(layer_dir: Path, code: str, seen: dict[str, tuple[int, int]] | None = None,
                ) -> list[tuple[str, int, int]] | None:
    """The layer's input_stats (torchtalk/index.py) without walking the tree:
    its recorded files stat'ed again, when the layer's code is as recorded
    and no directory down to them has other subdirs or source files than
    then (no file can have come or gone: a layer's inputs are source files
    its walk of those directories finds). None when that cannot be known.
    `seen`: path -> (size, mtime) of files stat'ed already in this run (the
    layers of one index share their .py files), filled as they are."""
    found = _read(layer_dir)
    if found is None or found[0] != code:
        return None
    _code, files, dirs = found
    for d, (mtime, names) in dirs.items():
        try:
            now = os.stat(d).st_mtime_ns
            if now != mtime and listing(d) != names:
                return None
        except OSError:
            return None
        if names:  # an inputs.tsv of before listings has none
            _LISTED[d] = (now, names)
    out = []
    seen = {} if seen is None else seen
    for p in files:
        got = seen.get(p)
        if got is None:
            try:
                st = os.stat(p)
            except OSError:
                return None
            got = seen[p] = (st.st_size, st.st_mtime_ns)
        out.append((p, *got))
    return out


def changed_inputs(facts: Path) -> list[str] | None:
    """The input files that changed, appeared or went since the last run of
    each layer of the facts dir `facts`; None when no layer recorded its inputs.
    A directory whose mtime moved is listed: a new file counts when it is a
    source file (torchtalk.watch.SUFFIXES, not an editor's swap file)
    written since (`_newer`)."""
    from torchtalk.watch import SUFFIXES

    files: dict[str, tuple[int, int]] = {}
    dirs: dict[str, tuple[int, str]] = {}
    seen = False
    layers = facts / "layers"
    for d in sorted(layers.iterdir()) if layers.is_dir() else []:
        found = _read(d)
        if found is not None:
            seen = True
            files.update(found[1])
            dirs.update(found[2])
    if not seen:
        return None
    changed = []
    for path, (size, mtime) in files.items():
        try:
            st = os.stat(path)
        except OSError:
            changed.append(path)
            continue
        if st.st_mtime_ns != mtime or st.st_size != size:
            changed.append(path)
    for path, (mtime, names) in dirs.items():
        try:
            if os.stat(path).st_mtime_ns == mtime or listing(path) == names:
                continue
            entries = list(os.scandir(path))
        except OSError:
            continue
        changed.extend(e.path for e in entries if e.name.endswith(SUFFIXES) and e.path not in files
                       and e.is_file() and _newer(e, mtime))
    return sorted(set(changed))


def _newer(entry: os.DirEntry, than: int) -> bool:
    """A file written since its dir's recorded mtime (a file new to the dir;
    a guess: one copied in with an old mtime is missed, and a file the
    layers do not read, such as setup.py in the root, is not new)."""
    try:
        return entry.stat().st_mtime_ns > than
    except OSError:
        return False


def recorded_root(facts: Path) -> str | None:
    """The tree root the layers of facts dir `facts` recorded their inputs under."""
    layers = facts / "layers"
    for d in sorted(layers.iterdir()) if layers.is_dir() else []:
        try:
            with open(d / INPUTS, encoding="utf-8") as fh:
                for line in (fh.readline(), fh.readline()):
                    if line.startswith("#root\t"):
                        return line[6:].rstrip("\n")
        except OSError:
            continue
    return None


def notice(db: Path, source: str | None = None) -> str | None:
    """One line saying the tree changed since `db` was indexed, or None;
    `source` (default: the root the index recorded) is what paths are shown
    relative to, and what the suggested commands name."""
    from torchtalk.paths import facts_dir

    found = changed_inputs(facts_dir(db))
    if not found:
        return None
    source = source or recorded_root(facts_dir(db))
    first = os.path.relpath(found[0], source) if source else found[0]
    what = first + (f" and {len(found) - 1} more files" if len(found) > 1 else "")
    where = f" --source {source}" if source else ""
    return (f"the tree changed since it was indexed ({what}): run `torchtalk index{where}`, "
            f"or keep `torchtalk watch{where}` running")
