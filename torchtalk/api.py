"""The TorchTalk facade (STYLE 13): the CLI, the MCP server and the reports call
these functions and nothing deeper. Each area adds its functions here; keep
module-level imports cheap (import inside the function).

Example:
    >>> from torchtalk import api
    >>> api.index("/work/src/pytorch-v2.6.0", layers=["ops"])
    >>> api.status()["relations"]["op"]
    2633
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path


def index(
    source: str | Path,
    db: str | Path | None = None,
    layers: Iterable[str] | None = None,
    *,
    precise: bool = False,
    jobs: int | None = None,
    force: bool = False,
    log: Callable[[str], None] | None = None,
    progress: bool = False,
    memo: dict | None = None,
    with_torch: str | Path | None = None,
    torch_db: str | Path | None = None,
    resume_gc: bool = True,
    later: list | None = None,
):
    """Index the tree (or installed torch) at `source`; an `IndexReport`.
    `memo`: a dict a long-running caller keeps between calls (`torchtalk
    watch`), where layers keep what they read (Note [Layer memo]).
    `resume_gc`: False leaves the cyclic GC paused after an update (Note
    [No GC in an update]), for a caller that exits next (`torchtalk index`)
    or resumes it once the update is out (`torchtalk watch`). `later`: a
    list to append the call that writes the layers' own caches to, for the
    caller to make once it has said the update is out (Note [Cache written
    after the update] in extractors/base.py); default: written before this
    returns.
    `with_torch`: `source` is an extension, indexed beside that torch tree
    into one DB (Note [Extensions] in torchtalk/extension.py), reusing that
    tree's DB `torch_db` (default: its default DB); an extension indexed so
    before is re-indexed beside the torch tree and DB its DB records.

    Example:
        >>> index("~/pytorch", layers=["ops"]).db
        PosixPath('/root/.cache/torchtalk/db/pytorch-1a2b3c4d5e6f.duckdb')
    """
    if with_torch is None and layers is None and not precise:
        from torchtalk.extension import recorded_torch

        recorded = recorded_torch(source, db)  # an extension's DB: beside the torch it names
        if recorded is not None:
            with_torch, torch_db = recorded[0], torch_db or recorded[1] or None
    if with_torch is not None:
        from torchtalk.errors import InputError
        from torchtalk.extension import index_extension

        if layers is not None or precise:
            raise InputError("--with-torch indexes the extension's C++ and Python layers: no --layers or --precise")
        return index_extension(source, with_torch, db, jobs=jobs, force=force, log=log, progress=progress,
                               torch_db=torch_db)
    from torchtalk.index import index as _index

    return _index(source, db, layers, precise=precise, jobs=jobs, force=force, log=log, progress=progress,
                  memo=memo, resume_gc=resume_gc, later=later)


def warm(source: str | Path, db: str | Path | None = None, layers: Iterable[str] | None = None, *,
         jobs: int | None = None, memo: dict) -> list[str]:
    """Fill a watcher's `memo` with what its layers' next updates read, for
    an indexed tree whose layers did not run yet in this process (Note
    [Warmed memo] in torchtalk/warm.py); -> the layers warmed (none for an
    extension's DB, whose layers run beside its torch tree).

    Example:
        >>> memo = {}
        >>> index("~/pytorch", memo=memo).up_to_date
        True
        >>> warm("~/pytorch", memo=memo)
        ['ops', 'cpp', 'python', 'tests']
    """
    from torchtalk.extension import recorded_torch

    if recorded_torch(source, db) is not None:
        return []
    from torchtalk.warm import warm as warm_layers

    return warm_layers(source, db, layers, jobs=jobs, memo=memo)


def status(source: str | Path | None = None, db: str | Path | None = None) -> dict:
    """What is indexed: meta (source, version, git commit), layers, rows per relation.

    Example:
        >>> status(source="~/pytorch")["meta"]["version"]
        '2.6.0a0'
    """
    from torchtalk.store import db_status, resolve_db

    return db_status(resolve_db(source=source, db=db))


def open_db(source: str | Path | None = None, db: str | Path | None = None, read_only: bool = True):
    """A duckdb connection to the fact DB of `source` (or the file `db`).

    Example:
        >>> open_db(source="~/pytorch").execute("select count(*) from dispatch").fetchone()
        (4609,)
    """
    from torchtalk.store import open_db as _open_db
    from torchtalk.store import resolve_db

    return _open_db(resolve_db(source=source, db=db), read_only=read_only)


def resolve_db(source: str | Path | None = None, db: str | Path | None = None) -> Path:
    """The fact DB file of `source` (or `db` itself); StoreError when none is indexed.

    Example:
        >>> resolve_db(source="~/pytorch").suffix
        '.duckdb'
    """
    from torchtalk.store import resolve_db as _resolve_db

    return _resolve_db(source=source, db=db)


# ---------------------------------------------------------------- fact lookups
# (torchtalk.lookup; used by the MCP tools). Each takes an open connection
# `con`, or opens the DB of `source`/`db` for the call. Returns a lookup.Table.


def _lookup(fn_name: str, *args, source=None, db=None, con=None, **kw):
    from torchtalk import lookup

    if con is not None:
        return getattr(lookup, fn_name)(con, *args, **kw)
    own = open_db(source=source, db=db)
    try:
        return getattr(lookup, fn_name)(own, *args, **kw)
    finally:
        own.close()


# Note [Listings are queries]: the listings below are named queries of the
# rule library (rules/lookups.dl, or a fact relation filtered by a column), so
# the CLI (`torchtalk query`), this API and the MCP tools give the same rows;
# what stays here is argument checking (a category that exists, a test file's
# path) and the notes. They return a query Result, as `query` does.


def list_modules(category: str, *, source=None, db=None, con=None):
    """nn modules / optimizers of `category` ("all": categories): the query
    `module_class(category="optim")` or `module_category()`. Example: `list_modules("optim")`."""
    return _with_db(lambda c: _by_category(c, "module_class", "module_category", "module", category), source, db, con)


def list_test_utils(category: str, *, source=None, db=None, con=None):
    """Test utilities of `category` ("all": categories): `test_util(category="decorator")`
    or `test_util_category()`. Example: `list_test_utils("decorator")`."""
    return _with_db(lambda c: _by_category(c, "test_util", "test_util_category", "test utility", category),
                    source, db, con)


def test_file_info(path: str, *, source=None, db=None, con=None):
    """The tests of one test file (`test(file="...")`), with its counts and the
    subjects it covers most (`test_file_subjects`) as notes. Example: `test_file_info("test/test_linalg.py")`."""
    return _with_db(lambda c: _test_file(c, path), source, db, con)


def _with_db(work, source, db, con):
    if con is not None:
        return work(con)
    own = open_db(source=source, db=db)
    try:
        return work(own)
    finally:
        own.close()


def _by_category(con, relation: str, categories: str, what: str, category: str):
    from torchtalk.errors import QueryError, did_you_mean

    cats = query(f"{categories}()", con=con, limit=None)
    if category in ("", "all", "*"):
        return cats
    names = [row[0] for row in cats.rows]
    if names and category not in names:
        hint = did_you_mean(category, names) or "categories: " + ", ".join(names)
        raise QueryError(f"unknown {what} category {category!r}", hint=hint)
    return query(f'{relation}(category="{category}")', con=con, limit=None)


def _test_file(con, path: str):
    import dataclasses

    from torchtalk.lookup import normalize_test_path

    file = normalize_test_path(con, path)
    result = query(f'test(file="{file}")', con=con, limit=None)
    kinds = [row[1] for row in result.rows]
    n_cls, n_fn = kinds.count("class"), kinds.count("function")
    summary = f"{file}: {n_cls} test class{'es' if n_cls != 1 else ''}, {n_fn} test function{'s' if n_fn != 1 else ''}"
    uses = query(f'test_file_uses("{file}")', con=con, limit=None).rows
    if uses:
        first = sorted({u for _, u, _ in uses}, key=lambda u: min(line for _, v, line in uses if v == u))[:25]
        summary += "; imports test utilities: " + ", ".join(u.rsplit(".", 1)[-1] for u in first)
    covered = sorted(query(f'test_file_subjects("{file}")', con=con, limit=None).rows, key=lambda r: (-r[2], r[1]))
    extra = (f"most covered subjects: {', '.join(f'{s} ({n})' for _, s, n in covered[:10])}",) if covered else ()
    rows = tuple(sorted(result.rows, key=lambda r: r[3]))  # in the file's order
    return dataclasses.replace(result, rows=rows, notes=(summary, *extra, *result.notes))


def find_similar_tests(query: str, *, source=None, db=None, con=None):
    """Tests matching the words of `query`. Example: `find_similar_tests("softmax backward")`."""
    return _lookup("find_similar_tests", query, source=source, db=db, con=con)


def cuda_kernels(name: str | None = None, *, source=None, db=None, con=None):
    """A CUDA kernel where it is defined and each launch (`kernel_launches(NAME)`,
    every kernel of that name); no name: the files with the most kernels
    (`kernel_files()`). Example: `cuda_kernels("softmax_warp_forward")`."""
    import dataclasses

    def work(c):
        if not name:
            files = query("kernel_files()", con=c, limit=None)
            return dataclasses.replace(files, rows=tuple(sorted(files.rows, key=lambda r: (-r[1], r[0]))))
        return query(f"kernel_launches({_dsl_name(name)})", con=c, limit=None, all_matches=True)

    return _with_db(work, source, db, con)


# ---------------------------------------------------------------- reports (torchtalk.reports)


def coverage(
    source=None, db=None, *, keys=None, tag=None, backend_package=None, rules=None, progress=None, con=None
):
    """Backend coverage per dispatch key (rules/coverage.dl); a `CoverageReport`.

    Example:
        >>> coverage(keys=("CPU", "MPS"), tag="core").key("MPS").covered
        181
    """
    from torchtalk.reports.coverage import RULES, CoverageOptions, compute_coverage

    opts = CoverageOptions(
        keys=tuple(keys) if keys else None, tag=tag,
        backend_package=Path(backend_package) if backend_package else None, rules=Path(rules) if rules else RULES,
    )
    if con is not None:
        return compute_coverage(con, opts, progress)
    own = open_db(source=source, db=db)
    try:
        return compute_coverage(own, opts, progress)
    finally:
        own.close()


def render_coverage(report, fmt: str = "md") -> str:
    """A `CoverageReport` as md, html, csv or json text. Example: `render_coverage(r, "json")`."""
    from torchtalk.reports.model import Format
    from torchtalk.reports.render import render

    return render(report, Format.parse(fmt))


def coverage_table(key: str | None = None, *, source=None, db=None, con=None):
    """Coverage as a lookup.Table: one row per key, or one key's missing ops. Example: `coverage_table("MPS")`."""
    from torchtalk.reports.table import coverage_table as _coverage_table

    report = coverage(source=source, db=db, keys=(key,) if key else None, con=con)
    return _coverage_table(report, key)


# ---------------------------------------------------------------- queries
# (torchtalk.query; issue 6). `query` runs any DSL query; `resolve` tells what a
# name denotes; `list_queries` names the relations a query can call.


def query(
    dsl: str,
    *,
    source=None,
    db=None,
    con=None,
    limit: int | None = None,
    rules=(),
    engine: str | None = None,
    all_matches: bool = False,
    explain: int | None = None,
    dump_passes=None,
    chains_for=None,
    per_section: int | None = None,
):
    """Run a DSL query; a `torchtalk.query.run.Result` (columns, rows, total, notes).
    `dump_passes=DIR`: the program after each pass, as `DIR/NN-<pass>.dl`.
    `chains_for(columns, rows)`: the indices of the rows whose chains a
    reader will show; the others' chain is None (Note [Chains for the rows
    read] in torchtalk/query/run.py). `per_section=N`: the first N rows of
    each section, with the counts of all (Note [Rows per section] in
    torchtalk/query/output.py), where the answer's rows can be sized so.

    Example:
        >>> query("callees(matmul)", source="~/pytorch").records()[0]["callee"]
        'at::native::_matmul_impl'
    """
    from torchtalk.query import query as _query

    kw = dict(rules=tuple(Path(r) for r in rules), limit=limit, engine=engine,
              all_matches=all_matches, explain=explain, dump_passes=dump_passes, chains_for=chains_for,
              per_section=per_section)
    if con is not None:
        return _query(dsl, con, **kw)
    own = _open_meanwhile(source, db, lambda: _ready_query(dsl, kw["rules"]))
    try:
        return _query(dsl, own, **kw)
    finally:
        own.close()


# Note [DB opened meanwhile]: a query process opens its fact DB (DuckDB's
# connect reads the catalog of ~130 tables: 20-35 ms), loads the rule
# library (unpickling it: ~20 ms) and imports textX and parses the query
# text (~20 ms), one after the other: a fifth of a 300 ms `torchtalk
# query`. DuckDB releases the GIL while it connects, so the DB is opened in
# a thread while this one loads the library and parses the query; the query
# then finds both done (the library is kept per process, Note [Library files
# looked at once a second]). What the DB's opening imports is imported
# before the thread starts (torchtalk/meanwhile.py says why). An error is
# said in the order it was before: a DB that cannot be opened first, then a
# library or query text that cannot be parsed, raised again by the query
# itself (the loading here drops it).


def _open_meanwhile(source, db, meanwhile):
    """`open_db(source=source, db=db)`, the connecting done in a thread while
    `meanwhile()` runs here (Note [DB opened meanwhile])."""
    from torchtalk.meanwhile import Meanwhile
    from torchtalk.store import open_db as _open_db
    from torchtalk.store import open_db_imports

    path = resolve_db(source=source, db=db)
    open_db_imports()
    opening = Meanwhile(lambda: _open_db(path), name="torchtalk-open-db")
    try:
        meanwhile()
    except BaseException:
        _close_when_open(opening)
        raise
    return opening.result()


def _close_when_open(opening) -> None:
    """Close the DB `opening` gives, once it is open (or failed to open)."""
    try:
        opening.result().close()
    except Exception:  # noqa: BLE001 - what failed first is what is said
        pass


def _ready_query(dsl: str, rules: tuple[Path, ...]) -> None:
    """Load the rule library and parse `dsl` as the query will, dropping
    their errors: the query raises them again, after the DB's (Note [DB
    opened meanwhile])."""
    from torchtalk.errors import TorchTalkError
    from torchtalk.query.dsl import parse_query
    from torchtalk.query.library import load_library_notes

    try:
        load_library_notes(rules)
        parse_query(dsl)
    except TorchTalkError:
        pass


def trace_module(name: str, *, source=None, db=None, con=None, limit: int | None = None, rules=()):
    """An nn module / optimizer down to ATen ops: the named query
    `trace_module(NAME)` (rules/modules.dl), as the CLI and MCP run it; a
    `torchtalk.query.run.Result`.

    Example:
        >>> trace_module("torch.nn.Linear", source="~/pytorch").records()[0]["step"]
        'base'
    """
    return query(f"trace_module({_dsl_name(name)})", source=source, db=db, con=con, limit=limit, rules=rules)


def search(query_text: str, backend: str | None = None, *, source=None, db=None, con=None,
           limit: int | None = None, rules=()):
    """Ops, C++ functions, CUDA kernels, stubs, Python names, nn modules, tests and
    test utilities whose name holds `query_text`, in any case, best first: the
    named query `search(TEXT, backend=KEY)` (rules/search.dl), as the CLI and MCP
    run it; a `torchtalk.query.run.Result`.

    Example:
        >>> search("gelu", backend="CUDA", source="~/pytorch").records()[0]["id"]
        'gelu'
    """
    return query(search_dsl(query_text, backend), source=source, db=db, con=con, limit=limit, rules=rules)


def search_dsl(text: str, backend: str | None = None) -> str:
    """The DSL text of a search: `search_dsl("layer norm", "CUDA")` is
    'search("layer norm", backend=CUDA)'. An empty text is a QueryError."""
    from torchtalk.errors import QueryError

    t = (text or "").strip()
    if not t:
        raise QueryError("empty search", hint="e.g. search('softmax')")
    if '"' not in t:
        quoted = f'"{t}"'
    elif "'" not in t:
        quoted = f"'{t}'"
    else:
        raise QueryError(f"search text {t[:60]!r} holds both kinds of quotes", hint="search for a part of it")
    return f"search({quoted}" + (f", backend={_dsl_name(backend)}" if backend else "") + ")"


def _dsl_name(name: str) -> str:
    """`name` as a DSL value (torchtalk.query.dsl.value_text): bare when the
    grammar reads it as a name, else quoted (taken as the exact id)."""
    from torchtalk.query.dsl import value_text

    return value_text(name)


def resolve(name: str, ns: str = "node", *, source=None, db=None, con=None):
    """What `name` denotes in namespace `ns` (fn, op, py, node, test, key, kernel):
    a `torchtalk.query.resolve.Resolution` (.ids, .matches with file:line,
    .ambiguous); QueryError with "did you mean" when nothing matches.

    Example:
        >>> resolve("cpublas::gemm", "fn", source="~/pytorch").ids
        ('at::native::cpublas::gemm',)
    """
    from torchtalk.query.resolve import Resolver

    if con is not None:
        return Resolver(con).resolve(name, ns)
    own = open_db(source=source, db=db)
    try:
        return Resolver(own).resolve(name, ns)
    finally:
        own.close()


def list_queries(rules=()) -> list[dict]:
    """The named queries of the rule library (built-in + `rules` dirs + user
    config): name, columns, argument namespace, options, usage, file:line.

    Example:
        >>> [q["name"] for q in list_queries()][:3]
        ['affected', 'callees', 'callers']
    """
    from torchtalk.query.library import describe_queries, load_library

    return describe_queries(load_library(tuple(Path(r) for r in rules)))


def eval_program(
    program: str | Path,
    *,
    facts_dir: str | Path | None = None,
    db: str | Path | None = None,
    outputs: Iterable[str] | None = None,
    engine: str = "duckdb",
    out_dir: str | Path | None = None,
) -> dict[str, list[tuple]]:
    """Evaluate a .dl file over `.facts` files (`facts_dir`) or a fact DB (`db`;
    default: the default tree's DB if indexed, else no DB). With `out_dir`,
    writes `<rel>.csv` there (sorted, Soufflé's format) instead of returning
    the rows: each relation's value is then an empty Page whose `total`
    counts them.

    Example:
        >>> eval_program("rules/impact.dl", outputs=["impact"])["impact"][:1]
        [('at::native::gemm', 'at::native::addmm_out', 1)]
    """
    from torchtalk.datalog.runner import eval_file

    def open_fact_db(prog):
        return _eval_connection(prog, facts_dir, db)

    return eval_file(program, facts_dir=facts_dir, open_db=open_fact_db if facts_dir is None or db is not None else None,
                     outputs=outputs, engine=engine, out_dir=out_dir)


def _eval_connection(program, facts_dir, db):
    """The fact DB `eval` reads: `db`, else the default tree's DB when the
    program reads input relations (no DB for a program without inputs)."""
    from torchtalk.errors import InputError, StoreError
    from torchtalk.store import open_db, resolve_db

    if db is not None:
        return open_db(resolve_db(db=db))
    if not program.inputs:
        return None
    try:
        path = resolve_db()
    except StoreError as err:
        raise InputError(
            f"{program.files[0] if program.files else 'the program'} reads input relations, but no facts were given "
            f"and {err.message}",
            hint="pass --facts DIR or --db FILE",
        ) from None
    return open_db(path)


def compile_program(program: str | Path, outputs: Iterable[str] | None = None) -> str:
    """The SQL plan the embedded engine runs for a .dl file (input relations
    read from fact DB tables of the same name).

    Example:
        >>> print(compile_program("rules/impact.dl", ["impact"]))  # doctest: +SKIP
    """
    from torchtalk.datalog.runner import compile_file

    return compile_file(program, outputs)


def check_rules(files: Iterable[str | Path]) -> list[dict]:
    """Parse and check each .dl file: [{file, ok, relations, rules, errors}].

    Example:
        >>> check_rules(["rules/impact.dl"])[0]["ok"]
        True
    """
    from torchtalk.datalog.runner import check_files

    return check_files(files)


# ------------------------------------------------------------------ snapshots (issue 9)


def snapshot_save(name: str | None = None, source: str | Path | None = None, db: str | Path | None = None):
    """Save the fact DB of `source` (or `db`) as a snapshot; its `SnapshotInfo`.

    Example:
        >>> snapshot_save("before-my-change", source="~/pytorch").name
        'before-my-change'
    """
    from torchtalk.snapshot import save
    from torchtalk.store import resolve_db

    return save(resolve_db(source=source, db=db), name)


def snapshot_load(name: str | None, source: str | Path | None = None, db: str | Path | None = None,
                  nearest: bool = False):
    """Make snapshot `name` (or the nearest to `source`) the tree's DB: (info, db path)."""
    from torchtalk.paths import default_source
    from torchtalk.snapshot import load
    from torchtalk.store import default_db, resolve_source

    src = Path(source or default_source()).expanduser()
    target = Path(db).expanduser() if db else default_db(resolve_source(src).root)
    return load(name, target, source=src, nearest=nearest), target


def snapshot_list():
    """Every saved snapshot, oldest first."""
    from torchtalk.snapshot import list_snapshots

    return list_snapshots()


def snapshot_diff(a: str, b: str) -> dict:
    """Added, removed and changed ops, kernels, registrations and call edges
    from snapshot (or DB file) `a` to `b`.

    Example:
        >>> snapshot_diff("v2.6.0", "v2.13.0")["ops"]["added"][:1]
        ['_addmm_activation.out']
    """
    from torchtalk.snapshot import resolve_ref
    from torchtalk.snapshot_diff import diff_dbs

    return diff_dbs(resolve_ref(a), resolve_ref(b))


def snapshot_export(name: str, file: str | Path) -> Path:
    """Pack snapshot `name` into a .tar.gz."""
    from torchtalk.snapshot import export

    return export(name, Path(file))


def snapshot_import(file: str | Path, name: str | None = None):
    """Unpack a snapshot archive (optionally renamed)."""
    from torchtalk.snapshot import import_

    return import_(Path(file), name)


# ------------------------------------------------------------------ affected (issue 9)


def affected(diff: str | None = None, rev: str | None = None, *, source: str | Path | None = None,
             db: str | Path | None = None, depth: int = 6, origin: str = "<diff>"):
    """The tests to run for a unified diff (`diff`) or `git diff REV` (`rev`) of the tree.

    Example:
        >>> affected(rev="HEAD~1", source="~/pytorch").tests[0].test
        'test/test_linalg.py::TestLinalg::test_addmm'
    """
    from torchtalk.affected import affected as _affected
    from torchtalk.changes import diff_from_git
    from torchtalk.store import open_db as _open_db
    from torchtalk.store import read_meta
    from torchtalk.store import resolve_db as _resolve_db

    path = _resolve_db(source=source, db=db)
    con = _open_db(path)
    try:
        root = Path(read_meta(con).get("source") or source or ".")
        if diff is None:
            diff = diff_from_git(root, rev or "HEAD")
        return _affected(con, root, diff, depth=depth, origin=origin)
    finally:
        con.close()
