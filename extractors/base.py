"""What every extractor layer implements (see Note [Extractor contract])."""

from __future__ import annotations

import gc
import hashlib
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol


class Sink(Protocol):
    def add(self, relation: str, *values: str | int) -> None:
        """Record one row of `relation`."""

    def warn(self, file: str, line: int, message: str) -> None:
        """Report a non-fatal problem at file:line (counted in `status`)."""

    def progress(self, advance: int = 1, total: int | None = None, what: str = "") -> None:
        """Advance this layer's progress bar (set `total` once when known)."""


class RowLists(dict):
    """Rows by relation (relation -> list of tuples), taken by `add` as a
    Sink takes them: for a layer that writes them by `emit`."""

    def add(self, relation: str, *values: str | int) -> None:
        self.setdefault(relation, []).append(values)

    def distinct(self) -> dict[str, list[tuple]]:
        """Each relation's rows once each, in their first order (as `emit` takes them)."""
        return {relation: list(dict.fromkeys(rows)) for relation, rows in self.items()}


def emit(ctx: ExtractContext, sink: Sink, rows: dict[str, list[tuple]],
         kept: tuple[str | None, dict[str, list[tuple]]] | None) -> str:
    """Write a layer's `rows` (relation -> rows, each relation's rows distinct)
    to `sink`: as deltas from `kept` = (generation, rows of that run) when
    that is the generation the sink's DB has (Note [Layer deltas]), else in
    full. -> the generation of `rows`, for the layer to keep with them."""
    if kept is None or kept[0] is None or kept[0] != ctx.previous or not hasattr(sink, "delta"):
        for relation, rs in rows.items():
            add_rows(sink, relation, rs)
        return ctx.generation
    old = kept[1]
    sink.deltas_from_previous()
    changed = False
    for relation in sorted(rows.keys() | old.keys()):
        new_rows, old_rows = rows.get(relation, []), old.get(relation, [])
        if new_rows == old_rows:
            continue
        removed, added = _changed(old_rows, new_rows)
        if removed or added:
            sink.delta(relation, sorted(removed), sorted(added))
            changed = True
    return ctx.generation if changed else ctx.previous


def _changed(old: list[tuple], new: list[tuple]) -> tuple[set[tuple], set[tuple]]:
    """(rows of `old` not in `new`, rows of `new` not in `old`), each list's
    rows distinct. An edit changes a window of a layer's rows (one file's, in
    the files' order): the rows before and after it are equal in both lists,
    and, the rows being distinct, in neither window; so only the windows are
    compared, not two sets of every row."""
    n, m = len(old), len(new)
    head = _common(lambda i, j: old[i:j] == new[i:j], min(n, m))
    tail = _common(lambda i, j: old[n - j:n - i] == new[m - j:m - i], min(n, m) - head)
    old_mid, new_mid = set(old[head:n - tail]), set(new[head:m - tail])
    return old_mid - new_mid, new_mid - old_mid


def _common(same, most: int) -> int:
    """The greatest k <= `most` with same(0, k), where same(i, j) says whether
    the lists agree on their items i..j (counted from one end): a binary
    search of slice comparisons (C loops), each over the part not yet known."""
    lo, hi = 0, most
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if same(lo, mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def add_rows(sink: Sink, relation: str, rows) -> None:
    """Record many rows of `relation`: the sink's bulk `add_rows` when it has
    one (the index's LayerSink checks and writes a relation's rows at once),
    else one `add` per row."""
    bulk = getattr(sink, "add_rows", None)
    if bulk is not None:
        bulk(relation, rows)
        return
    for row in rows:
        sink.add(relation, *row)


@dataclass(frozen=True)
class ExtractContext:
    """What a layer gets besides the sink.

    root:      the tree root (for an installed wheel: the dir holding `torch/`
               and `torchgen/`, i.e. site-packages)
    cache_dir: a directory private to this layer and this tree, kept between
               runs (per-file parse caches live here)
    jobs:      worker processes the layer may use
    previous:  the generation of the layer's rows as the fact DB has them
               (None: none, or unknown), which `sink.delta` edits
    generation: the generation of the rows this run writes, if they change
    memo:      a dict kept for this layer between runs by a long-running
               caller (`torchtalk watch`), or None (Note [Layer memo])
    dirs:      the dirs of `root` to read (an extension's packages), or None
               for the layer's own (aten, c10, torch/csrc; torch)
    torch_root: for an extension indexed beside its torch tree, that tree
               (its native_functions.yaml names the ATen ops), else None
               (Note [Extensions] in torchtalk/extension.py)
    stats:     the layer's input files with their size and mtime, as its
               fingerprint read them (None: not stat'ed): a layer may take
               them instead of walking and stat'ing the tree again
    cached_only: a layer that parses slowly (the compiler tier) writes what
               its per-file cache holds for the current inputs and names the
               rest as pending instead of parsing them (Note [Compiler tier
               catching up] in torchtalk/index.py)

    Note [Layer deltas]: a layer that keeps its last run's rows (the C++
    layer's resolved cache) may write, instead of all its rows, what changed
    since: `sink.delta(relation, removed, added)`, when the rows it kept are
    those of generation `previous`. A generation names a layer's rows: a run
    that changes none keeps the previous one, any other run is `generation`
    (the layer records the one its kept rows belong to by the same rule).
    The index applies the deltas to the fact DB in place (torchtalk/update.py).
    """

    root: Path
    cache_dir: Path
    jobs: int = 1
    previous: str | None = None
    generation: str = ""
    memo: dict | None = field(default=None, compare=False, repr=False)
    dirs: tuple[str, ...] | None = None
    torch_root: Path | None = None
    cached_only: bool = False
    later: Callable[[Callable[[], None]], None] | None = field(default=None, compare=False, repr=False)
    # (path, size, mtime_ns) of every input file (`inputs`), as the index
    # stat'ed them for the layer's fingerprint just before the run, or None
    stats: tuple[tuple[str, int, int], ...] | None = field(default=None, compare=False, repr=False)

    def write_later(self, write: Callable[[], None]) -> None:
        """Run `write`, a write of the layer's own cache that the fact DB does
        not wait for, once the DB is out (Note [Cache written after the
        update]); now when the caller takes none."""
        if self.later is None:
            write()
        else:
            self.later(write)

    # Note [Cache written after the update]: the C++ layer's state (its rows
    # and per-file results, 20 MB: 0.25 s to write) is what its next run
    # starts from, not what the fact DB is made of. It is written once the
    # index has put the DB in place: by `torchtalk index` before it returns,
    # by `torchtalk watch` after it says the update is out. A state that is
    # not written (the process killed first, a write failing) leaves the
    # last one, whose rows are of an older generation than the DB's: the
    # next run then writes its rows in full (Note [Layer deltas]), as right
    # as ever, if slower.

    # Note [Layer memo]: what a layer reads from its cache dir it may keep in
    # `memo` for its next run in the same process, keyed so that a stale
    # entry cannot be taken for a current one (by content digest, or by the
    # cache file's identity and mtime): a watcher's second update then reads
    # only what changed. A one-shot `torchtalk index` passes a fresh dict.


class LayerModule(Protocol):
    """An extractor module named in `extractors.layers.LAYERS`."""

    def inputs(self, root: Path) -> Iterable[Path]:
        """Every file the layer reads (absolute); their sizes and mtimes
        fingerprint the layer, so an unchanged tree re-indexes as a no-op."""

    def extract(self, ctx: ExtractContext, sink: Sink) -> None:
        """Write the layer's rows to `sink`."""


@contextmanager
def paused_gc(resume: bool = True) -> Iterator[None]:
    """Note [No GC in an update]: the cyclic GC paused while a layer builds
    its (acyclic) rows, or an update in place reads and writes the cpp
    layer's state (tens of MB of tuples, extractors/cpp/incremental.py). Run
    every 700 new objects, it would re-scan the growing heap again and again
    (a third of the time of either). Reference counting still frees
    everything, and the GC runs again on exit, unless `resume` is False:
    its first collection walks every object the update made (0.27 s of a
    .py edit's 3.3 s), to free nothing in a process that exits right after
    (`torchtalk index`), and after the answers are out in `torchtalk watch`,
    which resumes it once the update is published."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was and resume:
            gc.enable()


def stats_under(stats: Iterable[tuple[str, int, int]], root: Path, dirs: Iterable[str],
                suffixes: str | tuple[str, ...]) -> dict[str, tuple[int, int]]:
    """rel -> (size, mtime_ns) of the files of `stats` (a layer's
    ExtractContext.stats: its inputs, as the index stat'ed them for its
    fingerprint) under `root`/`dirs` whose names end with `suffixes`: what
    an update takes instead of walking and stat'ing the tree again."""
    heads = tuple(f"{root}/{top}/" for top in dirs)
    cut = len(str(root)) + 1
    return {p[cut:]: (size, mtime) for p, size, mtime in stats if p.startswith(heads) and p.endswith(suffixes)}


def file_identity(path: Path) -> tuple[int, int, int] | None:
    """(inode, size, mtime) of the file at `path`, None when it is not there:
    what a cache kept in memory checks to be of the file it was read from
    or written as."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def source_digest(modules: tuple[str, ...], where: Path) -> str:
    """A digest of the source of `modules`, files of the package at `where`
    (Note [Code in the cache key] in extractors/cpp/cache.py)."""
    h = hashlib.sha1()
    for name in modules:
        h.update(name.encode() + b"\0" + (where / name).read_bytes())
    return h.hexdigest()[:12]
