"""The C++/CUDA fast tier (tree-sitter) over aten/, c10/, torch/csrc/.

Pipeline: `scan` (per file, cached by content hash, parallel) -> `resolve`
(whole tree, Note [Call resolution]) -> rows of facts/schema.dl: func, calls,
call_ambiguous, binds (pybind), lib_def, lib_impl, lib_fallback, impl_func, stub_decl,
stub_define, stub_register, stub_call, kernel, launches.

Example:
    >>> from extractors.base import ExtractContext
    >>> extract(ExtractContext(root, cache_dir, jobs=2), sink)
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from extractors.base import ExtractContext, Sink, emit, file_identity, paused_gc, stats_under

SOURCE_DIRS = ("aten", "c10", "torch/csrc")
EXTENSIONS = (".cpp", ".cc", ".h", ".hpp", ".cu", ".cuh", ".mm")
SKIP_DIRS = frozenset({"third_party", ".git"})
_POOL_MIN = 32  # fewer files to scan than this: scan in-process
STATE = "state.bin"  # the layer's state in its cache dir (Note [cpp cache layout])


def source_files(root: Path, dirs: Iterable[str] = SOURCE_DIRS) -> list[str]:
    """The C++/CUDA files of the tree under `dirs` (POSIX paths relative to `root`), sorted."""
    out: list[str] = []
    for top in dirs:
        base = root / top
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
            rel_dir = Path(dirpath).relative_to(root).as_posix()
            out.extend(f"{rel_dir}/{f}" for f in filenames if f.endswith(EXTENSIONS))
    out.sort()
    return out


def inputs(root: Path, dirs: Iterable[str] = SOURCE_DIRS, torch_root: Path | None = None) -> Iterable[Path]:
    """Every file the layer reads (absolute): the sources under `dirs`,
    native_functions.yaml (of `torch_root` for an extension, Note [Library
    ops]) for the names of ATen ops (Note [ATen API calls]), and the tree's
    `.torchtalk.toml` when it has one (Note [Project macros])."""
    from extractors.cpp.aten import yaml_path
    from extractors.cpp.project import FILE

    yaml = yaml_path(torch_root or root)
    project = [root / FILE] if (root / FILE).is_file() else []  # Note [Project macros]
    return [root / rel for rel in source_files(root, dirs)] + ([yaml] if yaml else []) + project


@dataclass
class Run:
    """What one run of the layer produced: rows per relation, counts, timings."""

    rows: dict[str, list[tuple]]
    stats: dict[str, int]
    timings: dict[str, float] = field(default_factory=dict)
    scanned: int = 0  # files scanned (not in the cache)
    read: int = 0  # files whose FileFacts were read or scanned (Note [Incremental resolution])
    warnings: list[tuple[str, int, str]] = field(default_factory=list)
    # (generation, rows) of the last run, for Note [Layer deltas]
    kept: tuple[str | None, dict[str, list[tuple]]] | None = None


def _scan_job(job: tuple[str, str, str, dict[str, str]]):
    """Worker: read, hash, scan one file (after the project's macros, Note
    [Project macros]) and cache its FileFacts."""
    from extractors.cpp import cache
    from extractors.cpp.project import apply_macros, macros_digest
    from extractors.cpp.scan import scan_file

    root, rel, cache_dir, macros = job
    try:
        data = (Path(root) / rel).read_bytes()
        digest = macros_digest(cache.digest_of(data, rel), macros)
        path = cache.entry_path(Path(cache_dir), digest)
        facts = cache.read(path)
        if facts is None:
            with paused_gc():  # Note [Workers leave the parent's heap alone]
                facts = scan_file(rel, apply_macros(data, macros))
            cache.write_atomic(path, facts)
        return rel, digest, facts, None
    except Exception as exc:  # one bad file must not stop indexing
        return rel, "", None, f"cannot scan: {type(exc).__name__}: {exc}"


def _file_columns(sink) -> dict[str, int] | None:
    """Relation -> the index of its column `file`, by the schema the sink
    checks rows against (Note [Rows of their own file]); None without one."""
    columns = getattr(getattr(sink, "schema", None), "columns", None)
    if columns is None:
        return None
    return {rel: names.index("file") for rel, cols in columns.items() if "file" in (names := [c for c, _ in cols])}


def _library_rows(rows: dict[str, list[tuple]], extension: bool) -> None:
    """lib_op rows, and for an extension its library's `op` rows (Note [Library ops])."""
    from extractors.cpp.library import lib_op_rows, library_op_rows

    rows["lib_op"] = lib_op_rows(rows)
    if extension:
        rows["op"] = library_op_rows(rows)


def _current_digests(root: Path, rels: list[str], index: dict, dirs: Iterable[str] = SOURCE_DIRS,
                     macros: dict[str, str] | None = None,
                     stats: dict[str, tuple[int, int]] | None = None) -> tuple[dict, dict]:
    """(rel -> content digest, new index): files git reports unmodified take
    their blob id from git (Note [Git-aware digests]); otherwise an unchanged
    size and mtime reuse the last digest; anything else is read and hashed.
    `stats`: rel -> (size, mtime_ns) of every file of `rels`, when known."""
    from extractors.cpp import cache
    from extractors.cpp.gitinfo import clean_blobs
    from extractors.cpp.project import macros_digest

    git = clean_blobs(root, dirs) or {}
    digests, new_index = {}, {}
    top = str(root)
    for rel in rels:
        if stats is not None:
            size, mtime = stats[rel]
        else:
            try:
                st = os.stat(f"{top}/{rel}")  # not root / rel: a Path per file was a third of this loop
            except OSError:
                continue
            size, mtime = st.st_size, st.st_mtime_ns
        old = index.get(rel)
        if rel in git:
            digest = cache.digest_of_blob(git[rel], rel)
        elif old and old[0] == size and old[1] == mtime:
            digest = old[2]
        else:
            try:
                digest = cache.digest_of((root / rel).read_bytes(), rel)
            except OSError:
                continue
        digests[rel] = macros_digest(digest, macros or {})  # Note [Project macros]
        new_index[rel] = (size, mtime, digest)
    return digests, new_index


def _stat_of_sources(ctx: ExtractContext, root: Path, dirs: Iterable[str]) -> dict[str, tuple[int, int]] | None:
    """rel -> (size, mtime_ns) of the layer's source files under `dirs`, from
    the stats the index took of its inputs for its fingerprint (`ctx.stats`:
    `inputs`, the same walk), or None without them. An update takes them
    instead of walking and stat'ing the tree's 4,000 files again (30 ms); a
    file written in between is one the next run's fingerprint sees moved."""
    return None if ctx.stats is None else stats_under(ctx.stats, root, dirs, EXTENSIONS)


def _combined(digests: dict[str, str]) -> str:
    from extractors.cpp.resolve import RESOLVE_VERSION

    h = hashlib.sha1(RESOLVE_VERSION.encode())
    for rel in sorted(digests):
        h.update(f"{rel}\0{digests[rel]}\n".encode())
    return h.hexdigest()


def run(ctx: ExtractContext, sink: Sink | None = None) -> Run:
    """Scan (cached) and resolve the tree; the rows are not yet emitted."""
    from extractors.cpp import cache

    t0 = time.perf_counter()
    root, cdir = Path(ctx.root), Path(ctx.cache_dir)
    dirs, names_root = ctx.dirs or SOURCE_DIRS, ctx.torch_root or root
    memo = ctx.memo if ctx.memo is not None else {}
    stats = _stat_of_sources(ctx, root, dirs)
    rels = sorted(stats) if stats is not None else source_files(root, dirs)
    stored = cache.read(cdir / "index.pkl")
    # the index maps stat -> digest; digests depend on the scanner VERSION
    index = stored[1] if isinstance(stored, tuple) and stored[0] == cache.VERSION else {}
    from extractors.cpp.project import load_macros

    macros, macro_warnings = load_macros(root)
    digests, new_index = _current_digests(root, rels, index, dirs, macros, stats)
    combined = _combined({**digests, **_yaml_stamp(names_root), "<library ops>": str(ctx.torch_root is not None)})
    timings = {"stat": time.perf_counter() - t0}
    resolved = _read_memo(memo, cdir / STATE, ctx.torch_root is not None)
    kept = (resolved[4] if len(resolved) > 4 else None, resolved[1]) if resolved else None
    if resolved and resolved[0] == combined:
        if kept[0] != ctx.previous:  # rows the DB has not: a new generation (Note [Layer deltas])
            state = (*resolved[:4], ctx.generation)
            ctx.write_later(lambda: _write_memo(memo, cdir / STATE, state))
        if new_index != index:
            ctx.write_later(lambda: cache.write_atomic(cdir / "index.pkl", (cache.VERSION, new_index)))
        timings["total"] = time.perf_counter() - t0
        return Run(resolved[1], resolved[2], timings, warnings=macro_warnings, kept=kept)
    tree, loaded = _tree_facts(root, cdir, digests, ctx.jobs, sink, memo, macros)
    from extractors.cpp.aten import load_names
    from extractors.cpp.incremental import resolve_tree

    t1 = time.perf_counter()
    previous = resolved[3] if resolved and len(resolved) > 3 else None
    rows, stats, per_file = resolve_tree(tree, digests, previous, load_names(names_root, cdir), memo, cdir,
                                         ctx.write_later, _file_columns(sink))
    _library_rows(rows, ctx.torch_root is not None)
    timings["resolve"] = time.perf_counter() - t1 - loaded["seconds"]
    timings["scan"] = loaded["seconds"]
    scanned, warnings = loaded["scanned"], macro_warnings + loaded["warnings"]
    if "facts" in memo:  # only the current files' (Note [Layer memo])
        live = set(digests.values())
        memo["facts"] = {d: f for d, f in memo["facts"].items() if d in live}
    same = kept is not None and kept[0] is not None and kept[0] == ctx.previous and rows == kept[1]
    state = (combined, rows, stats, per_file, ctx.previous if same else ctx.generation)
    started = time.time() - (time.perf_counter() - t0)

    def persist() -> None:  # Note [Cache written after the update]
        _write_memo(memo, cdir / STATE, state)
        cache.write_atomic(cdir / "index.pkl", (cache.VERSION, new_index))
        cache.drop_unused(cdir, set(digests.values()), older_than=started - 60)
        (cdir / "resolved.pkl").unlink(missing_ok=True)  # the state as pickled before state.bin

    ctx.write_later(persist)
    timings["total"] = time.perf_counter() - t0
    return Run(rows, stats, timings, scanned, loaded["read"], warnings, kept)


def warm(cache_dir: Path, memo: dict) -> None:
    """What a run after an edit reads besides the state its run just kept
    in `memo`: the last Index, kept there too (Note [Warmed memo] in
    torchtalk/warm.py)."""
    from extractors.cpp.incremental import keep_last_index

    resolved = _read_memo(memo, Path(cache_dir) / STATE)  # the memo's, while the file is the one it kept
    if resolved:
        keep_last_index(resolved[3], memo, Path(cache_dir))


def tree_overloads(root: Path, cache_dir: Path, jobs: int = 1):
    """The tree's overloaded names (extractors/cpp/overloads.py) as the fast
    tier decides them, for the compiler tier to spell its ids alike (Note
    [Overload ids]); the files' FileFacts are cached in `cache_dir`."""
    from extractors.cpp.overloads import Overloads

    root, cdir = Path(root), Path(cache_dir)
    rels = source_files(root) or sorted(  # a tree without aten/, c10/, torch/csrc/ (a fixture): all of it
        p.relative_to(root).as_posix() for p in root.rglob("*") if p.suffix in EXTENSIONS and p.is_file())
    digests, _index = _current_digests(root, rels, {})
    facts, _scanned, _warnings = _load_facts(root, cdir, digests, jobs, None)
    return Overloads.of(facts)


def _yaml_stamp(root: Path) -> dict[str, str]:
    """native_functions.yaml's size and mtime, so an edit re-resolves (calls_op)."""
    from extractors.cpp.aten import yaml_path

    yaml = yaml_path(root)
    if yaml is None:
        return {}
    st = yaml.stat()
    return {"<native_functions.yaml>": f"{st.st_size}-{st.st_mtime_ns}"}


def _read_memo(memo: dict, path: Path, extension: bool = False):
    """The layer's state at `path`, from `memo` while the file is the one it
    was read from or written as (Note [Layer memo]): (combined, rows, stats,
    resolve_tree's state, generation), its rows as `run` made them for a
    tree that is an `extension` or not. Its per-file entries' blobs are kept
    in `memo` for the next write (Note [State by file] in cache.py)."""
    import marshal

    from extractors.cpp import cache
    from extractors.cpp.incremental import rows_of, state_from_plain

    key = file_identity(path)
    hit = memo.get(path)
    if hit is not None and key is not None and hit[0] == key:
        return hit[1]
    got = cache.read_parts(path)
    if got is None:
        return None
    try:
        (combined, stats, generation, plain), blobs = got
        files = {rel: marshal.loads(blob) for rel, blob in blobs.items()}
        state = state_from_plain({**plain, "files": files}) if plain else {}
        if not state:  # another FILES_FORMAT's: its rows cannot be made again
            return None
        rows = rows_of(files, state)
        _library_rows(rows, extension)
    except (TypeError, ValueError, KeyError, IndexError, EOFError):  # another shape: a state of no use
        return None
    obj = (combined, rows, stats, state, generation)
    memo[(BLOBS, path)] = {rel: (files[rel], blob) for rel, blob in blobs.items()}
    if key is not None:
        memo[path] = (key, obj)
    return obj


def _write_memo(memo: dict, path: Path, obj) -> None:
    """Write the layer's state `obj` (as `_read_memo` gives it) to `path`:
    the blobs of the per-file entries it read or wrote as they are, the
    others dumped (Note [State by file] in cache.py)."""
    import marshal

    from extractors.cpp import cache
    from extractors.cpp.incremental import state_to_plain

    combined, _rows, stats, state, generation = obj
    plain = state_to_plain(state)
    files = plain.pop("files", {})
    kept = memo.get((BLOBS, path)) or {}
    blobs = {}
    for rel, entry in files.items():
        hit = kept.get(rel)
        blobs[rel] = hit[1] if hit is not None and hit[0] is entry else marshal.dumps(entry, 4)
    cache.write_parts(path, (combined, stats, generation, plain), blobs)
    memo[(BLOBS, path)] = {rel: (files[rel], blobs[rel]) for rel in files}
    key = file_identity(path)
    if key is not None:
        memo[path] = (key, obj)


# the key in a layer memo of a state's per-file blobs, beside its path's (Note [State by file])
BLOBS = "cpp-state-blobs"


def _load_facts(root: Path, cdir: Path, digests: dict[str, str], jobs: int, sink: Sink | None,
                memo: dict | None = None, macros: dict[str, str] | None = None):
    """FileFacts of every file: cached entries (kept in `memo` by digest,
    Note [Layer memo]), the rest scanned in parallel."""
    from extractors.cpp import cache

    known = memo.get("facts", {}) if memo is not None else {}
    facts, todo, warnings = [], [], []
    for rel in sorted(digests):
        f = known.get(digests[rel]) or cache.read(cache.entry_path(cdir, digests[rel]))
        if f is None:
            todo.append(rel)
        else:
            facts.append(f)
    if sink is not None:
        sink.progress(0, total=len(todo), what="C++/CUDA files")
    jobs_in = [(str(root), rel, str(cdir), macros or {}) for rel in todo]
    if jobs > 1 and len(todo) >= _POOL_MIN:
        import multiprocessing as mp

        from extractors.workers import pool_worker

        # Note [Workers die with their parent], Note [Workers leave the parent's heap alone]
        with mp.get_context("fork").Pool(jobs, initializer=pool_worker, initargs=(os.getpid(),)) as pool:
            results = pool.imap_unordered(_scan_job, jobs_in, chunksize=16)
            facts.extend(_collect(results, warnings, sink))
    else:
        facts.extend(_collect(map(_scan_job, jobs_in), warnings, sink))
    facts.sort(key=lambda f: f.file)
    if memo is not None:
        memo.setdefault("facts", {}).update((digests[f.file], f) for f in facts if f.file in digests)
    return facts, len(todo), warnings


def _tree_facts(root: Path, cdir: Path, digests: dict[str, str], jobs: int, sink: Sink | None, memo: dict,
                macros: dict[str, str]):
    """(TreeFacts of the files of `digests`, read or scanned on first use by
    `_load_facts`; {"scanned", "read", "warnings", "seconds"} of those loads)."""
    from extractors.cpp.incremental import TreeFacts

    loaded = {"scanned": 0, "read": 0, "warnings": [], "seconds": 0.0}

    def load(rels: list[str]) -> dict:
        t = time.perf_counter()
        facts, scanned, warnings = _load_facts(root, cdir, {r: digests[r] for r in rels}, jobs, sink, memo, macros)
        loaded["scanned"] += scanned
        loaded["read"] += len(rels)
        loaded["warnings"] += warnings
        loaded["seconds"] += time.perf_counter() - t
        return {f.file: f for f in facts}

    def cached(digest: str):  # a file's FileFacts as the last run read them (Note [Incremental resolution])
        from extractors.cpp import cache

        return memo.get("facts", {}).get(digest) or cache.read(cache.entry_path(cdir, digest))

    return TreeFacts(sorted(digests), load, cached=cached), loaded


def _collect(results, warnings, sink):
    for rel, _digest, f, err in results:
        if sink is not None:
            sink.progress(1)
        if err:
            warnings.append((rel, 1, err))
            continue
        yield f


def extract(ctx: ExtractContext, sink: Sink) -> None:
    """Write the cpp layer's rows to `sink` (see the module docstring)."""
    with paused_gc():  # Note [No GC in an update]: the resolved rows, the Index, the state are acyclic
        result = run(ctx, sink)
        for rel, line, message in result.warnings:
            sink.warn(rel, line, message)
        emit(ctx, sink, result.rows, result.kept)
