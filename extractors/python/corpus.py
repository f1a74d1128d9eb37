"""Summaries of many Python files: worker processes and a content-hash cache.

Note [Per-file summaries]: a file's summary depends only on its bytes and its
path, so it is cached under the hash of both (plus `SUMMARY_VERSION`) and
unchanged files are never re-parsed. The python and tests layers share one
cache directory (`shared_cache_dir`): a summary is the same whichever layer
asks. Everything global (name resolution, API → op) is recomputed from the
summaries, which are kept separable per file for incremental indexing.

Example:
    >>> sums = summarize_tree(root, ["torch/nn/functional.py"], cache, jobs=2)
    >>> sums[0].module
    'torch.nn.functional'
"""

from __future__ import annotations

import hashlib
import os
import pickle
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from extractors.base import file_identity, paused_gc, source_digest, stats_under
from extractors.python.summary import FileSummary, summarize
from extractors.workers import pool_worker
from torchtalk.atomic import atomic_open

# with the summarizer's source in it (Note [Code in the cache key] in extractors/cpp/cache.py)
SUMMARY_VERSION = b"pysum-18-" + source_digest(("summary.py", "localtypes.py", "names.py", "corpus.py"),
                                            Path(__file__).parent).encode()


def shared_cache_dir(layer_cache: Path) -> Path:
    """The summary cache shared by the python and tests layers."""
    return layer_cache.parent / "python-summaries"


def python_files(root: Path, tops: Iterable[str]) -> list[str]:
    """Every `.py` file under `root/top` for each top, relative POSIX paths, sorted."""
    out: list[str] = []
    for top in tops:
        base = root / top
        if not base.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "__pycache__")
            rel_dir = Path(dirpath).relative_to(root).as_posix()
            out.extend(f"{rel_dir}/{f}" for f in filenames if f.endswith(".py"))
    return sorted(out)


def input_files(root: Path, tops: Iterable[str], stats: Sequence[tuple[str, int, int]] | None) -> list[str]:
    """`python_files(root, tops)`, from `stats` (a layer's ExtractContext.stats:
    its inputs, stat'ed for its fingerprint, which are those files) when
    given: an update walks the tree's 5,000 `.py` files no more (40 ms a
    layer)."""
    return python_files(root, tops) if stats is None else sorted(stats_under(stats, root, tops, ".py"))


def summarize_tree(
    root: Path, files: Sequence[str], cache_dir: Path, jobs: int = 1, progress=None
) -> list[FileSummary]:
    """Summaries of `files` (relative to `root`), from this process's last
    ones (Note [Summaries kept in the process]) or the cache where unchanged."""
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
    except OSError:
        pass  # no cache: every file is parsed, nothing is stored (see _store)
    kept, key_of, seen = _kept(str(cache_dir))
    results: dict[str, FileSummary] = {}
    keys: dict[str, str] = {}
    todo: list[tuple[str, str]] = []
    top = str(root)
    for rel in files:
        path = f"{top}/{rel}"
        ident = file_identity(path)
        last = seen.get(rel)
        if ident is not None and last is not None and last[:2] == (top, ident):
            key = keys[rel] = last[2]  # Note [Files stat'ed, not read]
        else:
            key = keys[rel] = _key(rel, Path(path).read_bytes())
            seen[rel] = (top, ident, key)
        hit = kept.get(key) or _load(cache_dir, key)
        if hit is not None:
            results[rel] = hit
            if progress:
                progress(1)
        else:
            todo.append((rel, key))
    for rel, summary in _run(root, cache_dir, todo, jobs):
        results[rel] = summary
        if progress:
            progress(1)
    for rel in files:  # the current version of each file only
        old = key_of.get(rel)
        if old != keys[rel]:
            kept.pop(old, None)
            key_of[rel] = keys[rel]
            kept[keys[rel]] = results[rel]
    return [results[rel] for rel in files]


# Note [Summaries kept in the process]: the summaries of the last calls with
# a cache dir, by content key, for every later call in this process with
# that cache dir (the python and tests layers share one): the tests layer
# reads those of torch/ the python layer just read (2,000 files of 5,000),
# and a watcher's next update reads only the changed files (Note [Layer
# memo]). Another cache dir (another DB) reads and fills its own. One
# summary per path: a file's older version is dropped. Summaries are
# frozen: sharing them is safe.
# Those of the last KEPT_DIRS cache dirs only: a process indexing many trees
# (a test run) holds no more than a watcher.
# Note [Files stat'ed, not read]: finding a file's summary keys it by its
# bytes, and reading and hashing the 5,000 files of torch/ and test/ took
# 0.1 s of each layer run, in a watcher's update after a one-file edit as
# in a first run. A file whose identity (inode, size, mtime: the rule by
# which the C++ layer reuses a digest) is the one it had when last read, in
# the same tree, takes the key it had then, unread.
# cache dir -> (key -> summary, rel -> the key of its summary,
#               rel -> (root, identity, key) when last read)
_KEPT: dict[str, tuple[dict[str, FileSummary], dict[str, str], dict[str, tuple]]] = {}
KEPT_DIRS = 2


def _kept(cache_dir: str) -> tuple[dict[str, FileSummary], dict[str, str], dict[str, tuple]]:
    """(key -> summary, rel -> key, rel -> (root, identity, key)) kept for `cache_dir`."""
    from torchtalk.connmemo import remember

    hit = _KEPT.get(cache_dir)
    return hit if hit is not None else remember(_KEPT, cache_dir, ({}, {}, {}), KEPT_DIRS)


def _run(root: Path, cache_dir: Path, todo: list[tuple[str, str]], jobs: int):
    if not todo:
        return
    args = [(str(root), str(cache_dir), rel, key) for rel, key in todo]
    if jobs <= 1 or len(todo) < 8:
        for a in args:
            yield a[2], _work(a)
        return
    # Biggest files first so no worker is left with a huge file at the end.
    args.sort(key=lambda a: -(Path(a[0]) / a[2]).stat().st_size)
    done = 0
    try:
        # Note [Workers die with their parent], Note [Workers leave the parent's heap alone]
        with ProcessPoolExecutor(max_workers=jobs, initializer=pool_worker, initargs=(os.getpid(),)) as pool:
            for a, summary in zip(args, pool.map(_work, args, chunksize=4), strict=True):
                done += 1
                yield a[2], summary
    except (OSError, AssertionError, BrokenProcessPool):
        # no worker processes here (e.g. inside a daemonic process): go on in this one
        for a in args[done:]:
            yield a[2], _work(a)


def prefetch_summaries(root: Path, files: Sequence[str], cache_dir: Path) -> None:
    """Summarize into `cache_dir` each of `files` whose summary it lacks,
    for a layer run later to read (Note [Parsed ahead] in torchtalk/index.py)."""
    for rel in files:
        try:
            data = (root / rel).read_bytes()
        except OSError:
            continue  # the layer's own run says so
        key = _key(rel, data)
        if _entry(cache_dir, key).is_file():
            continue
        with paused_gc():
            summary = summarize(data, rel)
        _store(cache_dir, key, summary)


def _work(arg: tuple[str, str, str, str]) -> FileSummary:
    root, cache_dir, rel, key = arg
    with paused_gc():  # Note [Workers leave the parent's heap alone]
        summary = summarize((Path(root) / rel).read_bytes(), rel)
    _store(Path(cache_dir), key, summary)
    return summary


def _key(rel: str, data: bytes) -> str:
    h = hashlib.blake2b(SUMMARY_VERSION, digest_size=20)
    h.update(rel.encode())
    h.update(b"\0")
    h.update(data)
    return h.hexdigest()


def _entry(cache_dir: Path, key: str) -> Path:
    """Where the summary of content key `key` is cached."""
    return cache_dir / key[:2] / f"{key}.pkl"


def _load(cache_dir: Path, key: str) -> FileSummary | None:
    path = _entry(cache_dir, key)
    try:
        with open(path, "rb") as fh:
            return pickle.load(fh)
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, TypeError):
        return None


def _store(cache_dir: Path, key: str, summary: FileSummary) -> None:
    """Write atomically (temp file, then os.replace); a cache failure is not fatal."""
    try:
        with atomic_open(_entry(cache_dir, key)) as fh:
            pickle.dump(summary, fh, protocol=pickle.HIGHEST_PROTOCOL)
    except OSError:
        pass
