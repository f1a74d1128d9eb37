"""Precise tier (layer "precise", `torchtalk index --precise`): call edges
resolved by libclang, so overloads, methods and templates land on the right
definition.

Writes `calls_precise(caller, callee, file, line)` for every call made by a
function defined in a TU's main file to a function declared in the tree
(Note [Precise edges] in visit.py), `calls_op(caller, name, file, line,
"compiler")` for every call the compiler resolves to ATen's C++ API that
reaches an op (Note [Op calls by the compiler] in api.py), and
`precise_file(file)` for every TU that parsed without a fatal error (the
fast tier's calls there are superseded). The headers under HEADER_DIRS are
parsed too, each as its own main file (Note [Header jobs]). Kernel launches that the compiler
resolves in `.cu` TUs are counted in `Stats.launches` (bench/precise.py
compares them with the fast tier's), not written. Flags come from the tree's
compile_commands.json, else are synthesized without a build (Note
[Synthesized flags] in flags.py). TUs are parsed in parallel, one process per
TU with a timeout (Note [One process per TU] in worker.py), and cached by the
content hash of the TU, its flags and everything it includes (Note [Precise
cache] in cache.py). A TU that does not parse is reported with the file:line
of its first fatal diagnostic and counted, never fatal; when the missing
header belongs to a GPU SDK the warning names the SDK and `torchtalk fetch`
command that provides it (Note [SDK headers] in sdk.py).

Scope: the `.cpp`/`.cc`/`.cu` files under DEFAULT_DIRS (tests and benchmarks
left out, and what no CUDA/CPU build compiles: Note [Not a TU of the build])
and the headers under HEADER_DIRS (Note [Header jobs]),
or the `:`-separated dirs or files (relative to the tree) in TORCHTALK_PRECISE_DIRS. A `.cu` file is parsed as CUDA host code with the
headers `torchtalk fetch cuda` provides (Note [CUDA host parse] in flags.py);
without them it is counted as `skipped_cuda` and left to the fast tier. The
`.cpp` files of the CUDA and XPU backends are parsed with the SDK headers
`torchtalk fetch cuda|xpu` provides.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from extractors.base import ExtractContext, Sink

DEFAULT_DIRS = ("aten", "c10", "torch/csrc")
TU_SUFFIXES = (".cpp", ".cc", ".cu")
CUDA_SUFFIXES = (".cu",)
HEADER_SUFFIXES = (".h", ".hpp", ".cuh", ".in", ".yaml")
EXCLUDED_PARTS = frozenset({"test", "tests", "bench", "benchmark", "benchmarks"})
# Note [Not a TU of the build]: some `.cpp`/`.cu` files under the scope are
# never compiled by a CUDA or CPU build, so they are left out of the scope and
# counted as `excluded`, not as failures: `templates` (aten/src/ATen/templates:
# torchgen's templates, with `${name}` placeholders, that it instantiates into
# the build dir) and the ROCm-only dirs `hip` and `miopen` (aten/src/ATen/hip,
# ATen/miopen, native/hip, native/miopen, native/transformers/hip, c10/hip:
# compiled only by a ROCm build, after hipify, against ROCm's headers). A dir
# of one of these names anywhere under the scope is left out.
NOT_BUILT_PARTS = frozenset({"templates", "hip", "miopen"})
# Note [Header jobs]: a TU skips the bodies of the headers it includes (Note
# [Preamble] in worker.py) and the walk keeps the calls of its main file
# (Note [Precise edges] in visit.py), so the calls written in a header
# (native/cpu/Loops.h, cuda/Reduce.cuh, ...: 7% of the fast tier's call
# sites under aten/src/ATen/native) would stay the fast tier's. So each
# header under HEADER_DIRS (inside the scope) is a job of its own, parsed
# as the main file with the flags a TU of its dir gets: the common PCH, and
# as CUDA host code when it is CUDA code (`.cuh`, or a header under a `cuda`
# dir) (Note [CUDA host parse] in flags.py). Its rows are written at its own
# file:line and it gets `precise_file` when it parses without a fatal
# error, so the contract for a header is a TU's: where the compiler covers a
# file its edges win. One job per header, cached by its own content and
# what it includes (Note [Precise cache]) as a TU is: deterministic, and an
# update re-parses exactly the headers an edit reaches. A template's body is
# walked as written (no instantiation happens: the header's own functions
# use nothing), which is what the walk of a TU sees of a template it
# defines. Parsing the header once costs ~1 s (its includes outside the PCH
# skipped as a TU's are), against parsing every header's bodies in every
# TU that includes it (and instantiating the templates the TU uses). A
# header that needs what the including file defined before it
# (cuda/CUDALoops.cuh, which Loops.cuh includes after its own definitions)
# or that the PCH holds (DispatchStub.h: parsed without it) has errors in
# its own text: its status is "incomplete", its rows are written as a fatal
# TU's are, and it gets no `precise_file`, so the fast tier's calls there
# stand. Apple-only dirs (mps, metal: Objective-C++) are left out, as the
# `.mm` files are.
HEADER_DIRS = ("aten/src/ATen/native",)
HEADER_JOB_SUFFIXES = (".h", ".cuh", ".hpp")
APPLE_ONLY_PARTS = frozenset({"mps", "metal"})
TIMEOUT_S = 300.0
# The dropped kinds of the call sites the compiler tells apart without binding
# them to a declaration (Note [Dependent operators and constructions] in visit.py).
OPEN_KINDS = ("dependent_operator", "dependent_construction", "dependent_external")


@dataclass
class Stats:
    """What a precise run did (bench/precise.py prints it)."""

    tus: int = 0  # parse jobs: TUs and headers (Note [Header jobs])
    headers: int = 0  # of them, headers
    ok: int = 0
    fatal: int = 0
    timeout: int = 0
    crash: int = 0
    cached: int = 0
    pending: list[str] = field(default_factory=list)  # TUs not parsed (cached_only): precise_pending rows
    skipped_cuda: int = 0  # .cu TUs (and CUDA headers) not parsed: the CUDA headers are not fetched
    incomplete: int = 0  # headers with errors in their own text: not self-contained (Note [Header jobs])
    excluded: int = 0  # files of the scope no CUDA/CPU build compiles (Note [Not a TU of the build])
    edges: int = 0
    ops: int = 0  # calls_op rows
    sites: int = 0  # call expressions in the TUs' functions (dropped["unresolved"]: no callee)
    launches: list[tuple[str, str, str, int]] = field(default_factory=list)  # (host, kernel, file, line)
    parsed: list[str] = field(default_factory=list)  # precise_file rows
    # rel -> (status, sites, unresolved, open: told apart but bound to no declaration, visit.OPEN_KINDS)
    per_tu: dict[str, tuple[str, int, int, int]] = field(default_factory=dict)
    errors: int = 0  # error diagnostics over all TUs
    dropped: Counter = field(default_factory=Counter)
    parse_seconds: float = 0.0  # summed over TUs (CPU-ish time)
    wall_seconds: float = 0.0
    failed: list[tuple[str, str]] = field(default_factory=list)  # (rel, first fatal as file:line: msg)
    unresolved: list[tuple[str, str, str, int]] = field(default_factory=list)  # (caller, name, file, line)

    @property
    def parsed_share(self) -> float:
        """Share of TUs parsed without a fatal error."""
        return self.ok / self.tus if self.tus else 1.0


def _scope_dirs() -> tuple[str, ...]:
    env = os.environ.get("TORCHTALK_PRECISE_DIRS")
    return tuple(d for d in env.split(":") if d) if env else DEFAULT_DIRS


def _walk(root: Path, dirs: Iterable[str], suffixes: tuple[str, ...],
          skip: frozenset[str] = EXCLUDED_PARTS) -> list[Path]:
    out: list[Path] = []
    for d in dirs:
        base = root / d
        if base.is_file():  # one TU named on its own (TORCHTALK_PRECISE_DIRS may name files)
            out.extend([base] if base.name.endswith(suffixes) else [])
            continue
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(n for n in dirnames if n not in skip)
            out.extend(Path(dirpath, f) for f in sorted(filenames) if f.endswith(suffixes))
    return out


def tu_files(root: Path, dirs: Iterable[str] | None = None) -> list[Path]:
    """The TUs the layer parses (absolute paths, sorted): gtest files
    (`*_test.cpp` beside the code, as in ATen/core) are tests, left out like
    the test dirs; so are the files no CUDA/CPU build compiles (Note [Not a
    TU of the build]).

    Example:
        >>> len(tu_files(tree, ["aten/src/ATen/native"]))
        452
    """
    files = _walk(root, dirs or _scope_dirs(), TU_SUFFIXES, EXCLUDED_PARTS | NOT_BUILT_PARTS)
    return [f for f in files if not f.stem.endswith("_test")]


def header_files(root: Path, dirs: Iterable[str] | None = None) -> list[Path]:
    """The headers the layer parses as their own main file (Note [Header
    jobs]): those under HEADER_DIRS inside the scope `dirs`, sorted; test,
    benchmark, not-built and Apple-only dirs left out.

    Example:
        >>> [f.name for f in header_files(tree, ["aten/src/ATen/native/cpu/Loops.h"])]
        ['Loops.h']
    """
    picked = set()
    for d in (x.rstrip("/") for x in (dirs or _scope_dirs())):
        for h in HEADER_DIRS:
            if h == d or h.startswith(d + "/"):
                picked.add(h)  # the scope holds all of h
            elif d.startswith(h + "/"):
                picked.add(d)  # a dir (or header) inside h
    skip = EXCLUDED_PARTS | NOT_BUILT_PARTS | APPLE_ONLY_PARTS
    return sorted({f for f in _walk(root, sorted(picked), HEADER_JOB_SUFFIXES, skip)
                   if not skip.intersection(f.relative_to(root).parts)})


def is_header_job(path: Path) -> bool:
    """Is `path` a header parsed as its own main file (Note [Header jobs])?"""
    return path.suffix in HEADER_JOB_SUFFIXES


def cuda_job(root: Path, path: Path) -> bool:
    """Is `path` parsed as CUDA host code: a `.cu` TU, or a header of CUDA
    code (a `.cuh`, or a header under a `cuda` dir) (Note [Header jobs])?"""
    if path.suffix in CUDA_SUFFIXES or path.suffix == ".cuh":
        return True
    return is_header_job(path) and "cuda" in path.relative_to(root).parts


def excluded_tus(root: Path, dirs: Iterable[str] | None = None) -> list[Path]:
    """The files of the scope left out as no TU of a CUDA/CPU build (Note
    [Not a TU of the build]), sorted.

    Example:
        >>> [f.relative_to(tree).as_posix() for f in excluded_tus(tree, ["aten/src/ATen/native"])]
        ['aten/src/ATen/native/miopen/BatchNorm_miopen.cpp', ...]
    """
    dirs = tuple(dirs or _scope_dirs())
    kept = set(tu_files(root, dirs))
    return [f for f in _walk(root, dirs, TU_SUFFIXES) if f not in kept and not f.stem.endswith("_test")]


def inputs(root: Path) -> Iterable[Path]:
    """The TUs, the headers they may include, the generators' inputs (torchgen,
    torch/csrc's tools/autograd) and the fetched SDKs' pins (fetching an SDK
    re-runs the layer)."""
    from extractors.clang.sdk import SDKS, sdk_root

    dirs = _scope_dirs()
    header_dirs = sorted(set(dirs) | {"aten/src/ATen", "c10", "torchgen", "tools/autograd", "tools/setup_helpers"})
    yield from tu_files(root, dirs)
    yield from _walk(root, header_dirs, HEADER_SUFFIXES + (".py",))
    for place in ("compile_commands.json", "build/compile_commands.json"):
        if (root / place).is_file():
            yield root / place
    for name in SDKS:
        yield sdk_root() / name / "pins.txt"


def extract(ctx: ExtractContext, sink: Sink) -> None:
    """Write `calls_precise` for the tree at ctx.root (see the module doc);
    with ctx.cached_only, only what the cache holds (the rest pending)."""
    run(ctx, sink, parse=not ctx.cached_only)


def run(ctx: ExtractContext, sink: Sink, files: Iterable[Path] | None = None,
        *, skip_header_bodies: bool = True, use_cache: bool = True, use_pch: bool = True,
        timeout: float = TIMEOUT_S, parse: bool = True) -> Stats:
    """Parse `files` (default: tu_files(ctx.root) and header_files(ctx.root),
    Note [Header jobs]), write their edges to
    `sink`, and say what happened. Without `parse`, a TU whose cache entry
    is not current is not parsed but written as `precise_pending`.

    Example:
        >>> run(ExtractContext(tree, cache, jobs=2), sink,
        ...     [tree / "aten/src/ATen/native/Activation.cpp"]).ok
        1
    """
    from extractors.clang.cache import FileHashes, TuCache
    from extractors.clang.sdk import cuda_path
    from extractors.clang.worker import parse_options, run_jobs

    start = time.perf_counter()
    root = ctx.root.resolve()
    todo = [Path(f).resolve() for f in (files if files is not None else tu_files(root) + header_files(root))]
    if cuda_path() is None:
        stats = Stats(skipped_cuda=sum(1 for f in todo if cuda_job(root, f)))
        todo = [f for f in todo if not cuda_job(root, f)]
    else:
        stats = Stats()
    if files is None:
        stats.excluded = len(excluded_tus(root))
    stats.tus = len(todo)
    stats.headers = sum(1 for f in todo if is_header_job(f))
    from extractors.cpp import tree_overloads

    ov = tree_overloads(root, ctx.cache_dir / "fast", ctx.jobs)  # Note [Overload ids]
    final = functools.lru_cache(maxsize=None)(ov.final)  # ids repeat across TUs
    hashes = FileHashes()
    tmpdir = tempfile.mkdtemp(prefix="precise-", dir=_ensure(ctx.cache_dir))
    try:
        plan, shared_deps = _plan(root, ctx.cache_dir, todo, parse_options(skip_header_bodies),
                                  hashes, use_pch, tmpdir)
        own = (plan[0].keep_roots + plan[0].gen_roots) if plan else ()
        cache = TuCache(ctx.cache_dir / "tu", hashes, own)  # Note [Shared dependency sets]

        def shared(job) -> list[dict[str, str]]:
            return [shared_deps["api"], shared_deps[job.pch] if job.pch else {}]

        sink.progress(0, total=len(todo), what="precise: parsing TUs")
        jobs = []
        for job in plan:
            hit = cache.get(job.path, job.cache_key(), shared(job)) if use_cache else None
            if hit is None and not parse:
                sink.add("precise_pending", job.rel)
                stats.pending.append(job.rel)
                sink.progress(1)
            elif hit is None:
                jobs.append(job)
            else:
                stats.cached += 1
                _record(root, hit, stats, sink, final)
        by_rel = {job.rel: job for job in jobs}
        for res in run_jobs(jobs, ctx.jobs, timeout, tmpdir):
            job = by_rel[res.rel]
            cache.put(job.path, job.cache_key(), res, shared(job))
            _record(root, res, stats, sink, final)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    stats.wall_seconds = time.perf_counter() - start
    return stats


def _ensure(d: Path) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    return d


def _plan(root: Path, cache_dir: Path, todo: list[Path], options: int, hashes, use_pch: bool, tmpdir: str):
    """A Job per TU or header: flags from compile_commands.json (a header's:
    its nearest TU's, `_donor`), else synthesized (C++ ones with the common
    PCH when `use_pch`, torch/csrc's with a larger one; CUDA host ones, with
    their own PCH, for a `.cu` or a CUDA header), each with the tree's op
    map (api.py); and the files the PCHs and the op map were made from
    ({"pch": deps, "csrc_pch": deps, "cuda_pch": deps, "api": deps})."""
    from extractors.clang import api, sdk
    from extractors.clang.flags import (
        Command,
        cuda_host,
        find_resource_dir,
        generated_dir,
        load_compile_db,
        synthesized,
    )
    from extractors.clang.pch import CSRC_COMMON_HEADERS, CUDA_COMMON_HEADERS, with_pch
    from extractors.clang.worker import Job
    from extractors.cpp.aten import load_names

    db = load_compile_db(root)
    keep = (str(root) + "/",)
    gen_roots: tuple[str, ...] = ()
    default = cuda = plain = csrc = cuda_plain = None
    deps: dict[str, dict[str, str]] = {"pch": {}, "csrc_pch": {}, "cuda_pch": {}, "api": {}}
    if not db or any(str(f) not in db for f in todo if not is_header_job(f)):
        gen = generated_dir(root, _ensure(cache_dir))
        gen_roots = (str(gen) + "/",)
        plain = synthesized(root, gen, find_resource_dir(), sdk.include_dirs())
        default = plain
        if use_pch and any(not cuda_job(root, f) and not _in_csrc(root, f) for f in todo):
            default, deps["pch"] = with_pch(plain, cache_dir, hashes, tmpdir)
        csrc = default
        if use_pch and any(not cuda_job(root, f) and _in_csrc(root, f) for f in todo):
            csrc, deps["csrc_pch"] = with_pch(plain, cache_dir, hashes, tmpdir, headers=CSRC_COMMON_HEADERS)
        where = sdk.cuda_path()
        if where is not None:
            cuda = cuda_plain = cuda_host(plain, where, cache_dir / "cuda")
            if use_pch and any(cuda_job(root, f) for f in todo):
                cuda, deps["cuda_pch"] = with_pch(cuda, cache_dir, hashes, tmpdir, headers=CUDA_COMMON_HEADERS)
    resource = None
    commands = []
    for f in todo:
        cmd = (_donor(db, f) if is_header_job(f) else db.get(str(f))) if db else None
        if cmd is not None and "-resource-dir" not in cmd.args:
            resource = resource or find_resource_dir()  # the pip wheel has no stddef.h
            cmd = Command((*cmd.args, "-resource-dir", resource), cmd.directory)
        commands.append(cmd)
    names = load_names(root, cache_dir)
    ops_map = api.ApiOps(names)
    if todo and names.ops:
        base = next((c for c in commands if c is not None), None) or plain
        ops_map, deps["api"] = api.load(base.args, gen_roots, keep, names, cache_dir, hashes, tmpdir)
    jobs = []
    for f, cmd in zip(todo, commands, strict=True):
        is_cuda = cuda_job(root, f)
        kind = "cuda_pch" if is_cuda else "csrc_pch" if _in_csrc(root, f) else "pch"
        pch = kind if cmd is None and deps[kind] else ""
        rel = f.relative_to(root).as_posix()
        synth = cuda if is_cuda else csrc if kind == "csrc_pch" else default
        if pch and str(f) in deps[pch]:  # a header the PCH holds: as its main file, each declaration a redefinition
            pch, synth = "", cuda_plain if is_cuda else plain
        jobs.append(Job(str(f), rel, cmd or synth, keep, gen_roots, options, pch, ops_map, is_cuda,
                        is_header_job(f)))
    return jobs, deps


def _donor(db: dict, header: Path):
    """A header's flags from a compile database (Note [Header jobs]): those
    of the TU nearest to it (the deepest common dir, then the first path),
    parsed as C++ or CUDA as that TU is; None if the database has no TU."""
    from extractors.clang.flags import Command

    if not db:
        return None
    near = min(db, key=lambda tu: (-len(os.path.commonpath([tu, str(header)])), tu))
    cmd = db[near]
    lang = () if "-x" in cmd.args else ("-x", "cuda" if near.endswith(CUDA_SUFFIXES) else "c++")
    return Command((*lang, *cmd.args), cmd.directory)


def _in_csrc(root: Path, tu: Path) -> bool:
    """Is `tu` a TU of torch/csrc (parsed with CSRC_COMMON_HEADERS' PCH)?"""
    return tu.is_relative_to(root / "torch" / "csrc")


def _record(root: Path, res, stats: Stats, sink: Sink, final) -> None:
    """Write one TU's rows, its ids as the fast tier spells them (`final`:
    the tree's Overloads.final, Note [Overload ids]), and count it in `stats`."""
    for caller, callee, file, line in res.edges:
        sink.add("calls_precise", final(caller), final(callee), file, line)
    for caller, name, file, line in res.ops:
        sink.add("calls_op", final(caller), name, file, line, "compiler")
    if res.status == "ok":
        sink.add("precise_file", res.rel)
        stats.parsed.append(res.rel)
        for first, last in res.skipped:  # Note [Configured out here, on in the wheel]
            sink.add("precise_skipped", res.rel, first, last)
    stats.edges += len(res.edges)
    stats.ops += len(res.ops)
    stats.sites += res.sites
    stats.launches.extend((final(h), final(k), f, ln) for h, k, f, ln in res.launches)
    stats.per_tu[res.rel] = (res.status, res.sites, res.dropped.get("unresolved", 0),
                             sum(res.dropped.get(k, 0) for k in OPEN_KINDS))
    stats.errors += res.errors
    stats.parse_seconds += res.seconds
    stats.dropped.update(res.dropped)
    stats.unresolved.extend((final(caller), name, res.rel, line) for caller, name, line in res.unresolved)
    setattr(stats, res.status, getattr(stats, res.status) + 1)
    if res.fatal is not None:
        from extractors.clang.sdk import hint

        path, line, msg = res.fatal
        missing = hint(msg)
        msg = f"{msg} ({missing})" if missing else msg
        where = path[len(str(root)) + 1:] if path.startswith(str(root) + "/") else path
        sink.warn(where or res.rel, int(line), f"precise: {res.rel} does not parse: {msg}")
        stats.failed.append((res.rel, f"{where}:{line}: {msg}"))
    sink.progress(1)
