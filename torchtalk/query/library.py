"""The rule library a query runs against: rules/*.dl plus the user's rules.

Note [Named queries]: a query `q(...)` names relation `q` of the loaded
program; the DSL knows nothing else about it, so adding a `.dl` file adds
queries. How arguments reach `q` is read off the program's declarations:

  q_arg(<ns>: symbol)    .input: the positional arguments, resolved in
                         namespace <ns> (the column's name: fn, op, py, node,
                         subject, test, key, kernel, module_class; any other
                         name takes the text as typed),
                         one row per resolved id.
  q_from / q_to(<ns>)    .input: the two ends of an `a -> b` argument.
  q_<opt>(v: T)          .input: option `opt=v` (resolved when the column is
                         named after a namespace); when the query omits it,
                         the facts of `q_<opt>_default` (if declared) are used.
  q_like, q_like_probe   .input: the text arguments' case-insensitive regexes
                         and probes (Note [Text arguments], query/like.py).
  otherwise              positional arguments and unknown options filter the
                         rows of `q`: argument i matches column i, option
                         `col=v` matches column `col` (resolved names match
                         any of their ids).

Rules start every recursive walk from those seeds (Note [Query seeds] in
rules/graph.dl), so a query never computes a closure over the whole graph.

Loading: the built-in rules/ directory, then `--rules DIR`s, then
`config_dir()/rules`. The parsed program is cached (pickle, keyed by the
paths, sizes and mtimes of every file read), so a query does not re-parse.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import pickle
import threading
from dataclasses import dataclass
from pathlib import Path

from torchtalk.errors import InputError, TorchTalkError

ROOT = Path(__file__).resolve().parents[2]
RULES_DIR = ROOT / "rules"
SCHEMA = ROOT / "facts" / "schema.dl"
CACHE_VERSION = "5"  # 5: with the analyses kept (Note [Analyses kept with the library])

# namespaces of seed columns (Note [Named queries]); others take text as typed
NAMESPACES = ("fn", "op", "py", "node", "subject", "test", "key", "kernel", "module_class")
# column names that denote a namespace's ids (for filters and seeds)
NAMESPACE_OF = {
    **{ns: ns for ns in NAMESPACES},
    "caller": "fn", "callee": "fn", "host": "fn", "entry": "fn",
    "out_op": "op", "impl_op": "op", "api": "py", "src": "node", "dst": "node",
}


@dataclass(frozen=True)
class Param:
    """A seed or option input relation of a named query."""

    relation: str
    column: str  # the column's name: the namespace for seeds
    type: str  # "symbol" | "number"


@dataclass(frozen=True)
class Signature:
    """How a named query takes its arguments (Note [Named queries])."""

    name: str
    columns: tuple[str, ...]
    types: tuple[str, ...]
    arg: Param | None
    src: Param | None
    dst: Param | None
    options: dict[str, Param]
    defaults: dict[str, tuple]

    def __hash__(self) -> int:
        return hash(self.name)


def rule_files(extra_dirs: tuple[Path, ...] = (), *, user: bool = True) -> tuple[Path, ...]:
    """Every .dl file of the library: built-in, then --rules dirs, then the config dir.

    Example:
        >>> [p.name for p in rule_files(user=False)][:2]
        ['affected.dl', 'calls.dl']
    """
    dirs = [RULES_DIR, *extra_dirs]
    if user:
        from torchtalk.paths import config_dir

        dirs.append(config_dir() / "rules")
    files: list[Path] = []
    for d in dirs:
        d = Path(d)
        if d in extra_dirs and not d.is_dir():
            raise InputError(f"rules directory not found: {d}")
        if d.is_dir():
            files.extend(sorted(p.resolve() for p in d.glob("*.dl")))
    return tuple(dict.fromkeys(files))


def load_library(extra_dirs: tuple[Path, ...] = (), *, user: bool = True):
    """The parsed rule library (a `torchtalk.datalog.Program`), cached on disk.

    Example:
        >>> "impact" in load_library(user=False).decls
        True
    """
    return load_library_notes(extra_dirs, user=user)[0]


def load_library_notes(extra_dirs: tuple[Path, ...] = (), *, user: bool = True):
    """(program, notes): notes name the built-in files left out (Note [Library conflicts])."""
    files, key = _files_and_key(tuple(Path(d) for d in extra_dirs), user)
    if key not in _MEMO:
        with _LOADING:  # the textX parser is not thread-safe (the MCP server warms in a thread)
            if key not in _MEMO:
                _load(files, key)
    kept = _MEMO[key]
    if isinstance(kept, TorchTalkError):
        raise kept
    return kept


# Note [Library files looked at once a second]: every query asks for the
# library, and finding its key lists the rule dirs and stats every .dl file
# (pathlib's glob and resolve: 0.3-0.5 ms a query, a tenth of a server's
# quick call, more under its threads' contention). A process that answers
# many queries (a server) takes the files and key again at most every
# KEY_CHECK_S for the same dirs (the built-in one, --rules, the config dir
# as now set): an edited rule file is read by the queries asked a second
# after it was saved. The MCP answer cache keys its answers by the same
# look (`current_key`, Note [Answer cache]): with a clock of its own, it
# could take a new key while the queries still got the old library, and
# keep their answers under the new key. A missing --rules dir is an error
# at once, as before (nothing is kept for it). `library_key` always looks.
KEY_CHECK_S = 1.0
_KEYS: dict[tuple, tuple[float, tuple[Path, ...], str]] = {}


def _files_and_key(extra_dirs: tuple[Path, ...], user: bool) -> tuple[tuple[Path, ...], str]:
    """The library's files and cache key, taken again at most every KEY_CHECK_S."""
    import time

    ident = (RULES_DIR, extra_dirs, user and _config_rules())
    now = time.monotonic()
    kept = _KEYS.get(ident)
    if kept is not None and now - kept[0] < KEY_CHECK_S:
        return kept[1], kept[2]
    files = rule_files(extra_dirs, user=user)
    key = _cache_key(files)
    if len(_KEYS) >= 64:
        _KEYS.clear()
    _KEYS[ident] = (now, files, key)
    return files, key


def current_key(extra_dirs: tuple[Path, ...] = (), *, user: bool = True) -> str:
    """The key of the library `load_library_notes` gives now (looked at as
    it looks, Note [Library files looked at once a second])."""
    return _files_and_key(tuple(Path(d) for d in extra_dirs), user)[1]


def _config_rules() -> Path:
    from torchtalk.paths import config_dir

    return config_dir() / "rules"


def library_key(extra_dirs: tuple[Path, ...] = (), *, user: bool = True) -> str:
    """The key `load_library` keeps the library under: it changes when a rule
    file is added, removed or edited (the MCP server's answers are kept by it)."""
    return _cache_key(rule_files(tuple(Path(d) for d in extra_dirs), user=user))


def _load(files: tuple[Path, ...], key: str):
    cached = _cache_path(key)
    if cached is not None and cached.is_file():
        try:
            with open(cached, "rb") as fh:
                program, notes, kept = pickle.load(fh)
            program.memo.update(kept)  # Note [Analyses kept with the library]
            _MEMO[key] = (program, notes)
            return _MEMO[key]
        except Exception:  # a stale or broken cache entry: parse again
            pass
    try:
        program, notes = _parse_library(files)
    except TorchTalkError as exc:
        _MEMO[key] = exc  # Note [A broken library parsed once]
        raise
    if cached is not None:
        _write_atomic(cached, pickle.dumps((program, notes, _analyses(program))))
    _MEMO[key] = (program, notes)
    return program, notes


# Note [Analyses kept with the library]: a query process spent ~50 ms of its
# ~300 on two analyses of the library alone, made anew in each process:
# which stored relation a query may read (derived.fingerprints, over every
# relation's closure) and the relation dependency map under it. They are
# computed once when the library is parsed and pickled with it; the cache
# key has a digest of the code that computes them (Note [Code in the cache
# key] in extractors/cpp/cache.py), so a change to that code parses the
# library anew rather than keep analyses it would not make.
KEPT_ANALYSES = ("fingerprints", "dependency_map")
_ANALYSES_CODE = ("query/derived.py", "datalog/analysis/strata.py")


def _analyses(program) -> dict:
    """The library's KEPT_ANALYSES, computed (the program's memo entries)."""
    from torchtalk.query.derived import fingerprints

    fingerprints(program)
    return {k: program.memo[k] for k in KEPT_ANALYSES if k in program.memo}


@functools.cache
def _analyses_code() -> str:
    """The digest of KEPT_ANALYSES' code: once per process (every query
    computes the library's cache key)."""
    from extractors.base import source_digest

    return source_digest(_ANALYSES_CODE, Path(__file__).resolve().parents[1])


# Note [A broken library parsed once]: a library that does not parse or
# check is kept as its error, under its key, so a process does not parse it
# again to say the same error (a query process loads the library while its
# DB opens, drops the error and loads it again to raise it: Note [DB opened
# meanwhile] in torchtalk/api.py). An edit to a rule file changes the key.

# parsed libraries (or their error) of this process, by cache key
_MEMO: dict[str, tuple | TorchTalkError] = {}
_LOADING = threading.Lock()


def _parse_library(files: tuple[Path, ...]):
    """Parse and check the files together; built-in files that break the
    library are left out (Note [Library conflicts]). The result is checked
    (torchtalk.datalog.analysis.checks), so queries evaluate with checked=True."""
    from torchtalk.datalog import parse_text
    from torchtalk.datalog.analysis.checks import check

    def parse(chosen):
        text = "".join(f'#include "{p}"\n' for p in chosen)
        program = parse_text(text, "<library>", base=RULES_DIR)
        check(program)
        return program

    builtin = [f for f in files if f.parent == RULES_DIR.resolve()]
    try:
        return parse(files), ()
    except TorchTalkError:
        if len(builtin) < len(files) and _builtin_whole():
            raise  # Note [Library conflicts]: the user's files' error
    accepted, notes = _compatible(builtin)
    return parse([f for f in files if f in accepted or f not in builtin]), tuple(notes)


# Note [Library conflicts]: every built-in rules/*.dl shares one namespace of
# relations. A built-in file that does not parse, or declares a relation that
# an earlier file (graph.dl and what it includes come first) also declares,
# is left out of the query library with a note, so one file's problem does
# not take every query down; user files are never left out (their errors are
# the user's to see). Finding which built-in file to leave out parses the
# files accepted so far once per file, quadratic in the files (47 s on a
# 2-core machine for 40 files); so when a user's files break the library
# and the built-in library alone loads whole (cached, as any library is),
# the user's error is raised at once: no built-in file is to blame.
CORE_FIRST = ("graph.dl",)


def _builtin_whole() -> bool:
    """Whether every built-in file loads together (the built-in library,
    cached on disk as any library is, has no notes). Called under _LOADING."""
    files, key = _files_and_key((), False)
    if key not in _MEMO:
        with contextlib.suppress(TorchTalkError):  # kept as its error
            _load(files, key)
    kept = _MEMO[key]
    return not isinstance(kept, TorchTalkError) and not kept[1]


def _compatible(files: list[Path]) -> tuple[set[Path], list[str]]:
    """The built-in files that load together, in order (graph.dl first), and a
    note for each one left out (it does not parse or check together with the
    files accepted before it)."""
    from torchtalk.datalog import parse_text
    from torchtalk.datalog.analysis.checks import check

    order = sorted(files, key=lambda p: (p.name not in CORE_FIRST, p.name))
    accepted: list[Path] = []
    notes: list[str] = []
    for f in order:
        text = "".join(f'#include "{p}"\n' for p in [*accepted, f])
        try:
            check(parse_text(text, "<library>", base=RULES_DIR))
        except TorchTalkError as exc:
            notes.append(f"rules/{f.name} left out: {exc.headline()}")
            continue
        accepted.append(f)
    return set(accepted), notes


def _short(where: str) -> str:
    try:
        return str(Path(where).relative_to(ROOT))
    except ValueError:
        return where


def _cache_key(files: tuple[Path, ...]) -> str:
    h = hashlib.sha256(CACHE_VERSION.encode() + _analyses_code().encode())
    # the schema and any file a rule file may #include live beside them
    watched = {SCHEMA, *files}
    for d in {f.parent for f in files}:
        watched.update(d.glob("*.dl"))
    for p in sorted(watched):
        try:
            st = p.stat()
        except OSError:
            continue
        h.update(f"{p}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    h.update("|".join(map(str, files)).encode())
    return h.hexdigest()[:24]


def _cache_path(key: str) -> Path | None:
    try:
        from torchtalk.paths import cache_dir

        d = cache_dir() / "rules"
        d.mkdir(parents=True, exist_ok=True)
        return d / f"library-{key}.pickle"
    except OSError:
        return None


KEEP_CACHED = 8  # parsed libraries kept (one per set of rule files and mtimes)


def _write_atomic(path: Path, data: bytes) -> None:
    """Cache `data` at `path` (atomically; a cache failure is not fatal) and
    drop all but the newest KEEP_CACHED libraries."""
    from torchtalk.atomic import atomic_open

    try:
        with atomic_open(path) as fh:
            fh.write(data)
        old = sorted(path.parent.glob("library-*.pickle"), key=lambda p: p.stat().st_mtime)
        for stale in old[:-KEEP_CACHED]:
            stale.unlink(missing_ok=True)
    except OSError:
        pass


def signature(program, name: str) -> Signature:
    """How query `name` takes its arguments; a QueryError if no such relation.

    Example:
        >>> signature(load_library(user=False), "impact").arg.column
        'fn'
    """
    from torchtalk.errors import QueryError, did_you_mean

    decl = program.decls.get(name)
    if decl is None:
        raise QueryError(
            f"no query or relation named {name!r}",
            hint=did_you_mean(name, query_names(program)) or "see `torchtalk query --list`",
        )
    inputs = set(program.inputs)

    def param(rel: str) -> Param | None:
        d = program.decls.get(rel)
        if d is None or rel not in inputs or len(d.columns) != 1:
            return None
        col = d.columns[0]
        return Param(rel, col.name, str(col.type))

    options: dict[str, Param] = {}
    defaults: dict[str, tuple] = {}
    prefix = name + "_"
    for rel in program.decls:
        if not rel.startswith(prefix) or rel in (f"{name}_arg", f"{name}_from", f"{name}_to"):
            continue
        opt = rel[len(prefix):]
        p = param(rel)
        if p is not None and not opt.endswith("_default"):
            options[opt] = p
            facts = [r.head.args for r in program.rules_for(f"{rel}_default") if not r.body]
            if facts:
                defaults[opt] = tuple(_const(a[0]) for a in facts if len(a) == 1)
    return Signature(
        name,
        tuple(c.name for c in decl.columns),
        tuple(str(c.type) for c in decl.columns),
        param(f"{name}_arg"),
        param(f"{name}_from"),
        param(f"{name}_to"),
        options,
        defaults,
    )


def _const(term):
    return getattr(term, "value", str(term))


def query_names(program) -> list[str]:
    """The relations a query can name: every derived relation plus the inputs
    that are not seeds or options of another query."""
    heads = {r.head.name for r in program.rules if r.body}
    return sorted(n for n in program.decls if n in heads or n in program.inputs)


def seeded_queries(program) -> list[str]:
    """The named queries that take resolved arguments (have a `q_arg` or `q_from`)."""
    return sorted(
        n
        for n in program.decls
        if f"{n}_arg" in program.decls or f"{n}_from" in program.decls
    )


def describe_queries(program) -> list[dict]:
    """One dict per seeded named query (those taking resolved arguments):
    name, columns, arg namespace, options with defaults, usage, file, line."""
    out = []
    for name in seeded_queries(program):
        sig = signature(program, name)
        decl = program.decls[name]
        opts = {k: (sig.defaults.get(k, (None,)) or (None,))[0] for k in sig.options}
        if sig.arg is not None:
            usage = f"{name}({sig.arg.column.upper()}"
        else:
            src, dst = (sig.src.column if sig.src else "a"), (sig.dst.column if sig.dst else "b")
            usage = f"{name}({src.upper()} -> {dst.upper()}"
        usage += "".join(f", {k}={v}" for k, v in opts.items()) + ")"
        out.append({
            "name": name, "columns": list(sig.columns),
            "arg": sig.arg.column if sig.arg else None, "options": opts, "usage": usage,
            "file": _short(decl.loc.file), "line": decl.loc.line,
        })
    return out
