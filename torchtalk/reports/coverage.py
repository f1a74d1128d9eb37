"""Compute the backend coverage report from the fact DB with rules/coverage.dl.

The driver gives the rules their parameters as small input relations
(`report_key`, `report_scope`, `op_kind`, `module_forward`, `backend_ref`),
evaluates the `.output` relations the report needs with the embedded engine,
and folds the rows into a `CoverageReport`. What counts as covered is decided
by the rules alone (Note [Coverage model] in rules/coverage.dl); pass
`rules=` to use your own copy.

Example:
    >>> con = duckdb.connect("pytorch.duckdb", read_only=True)
    >>> r = compute_coverage(con, CoverageOptions(keys=("CPU", "MPS")))
    >>> r.key("MPS").tag("core")
    TagShare(tag='core', covered=181, total=189)
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from torchtalk.errors import InputError, StoreError, did_you_mean
from torchtalk.reports.model import (
    PATH_ORDER,
    CoverageReport,
    KernelPath,
    KeyCoverage,
    MissingOp,
    OpRow,
    PackageOp,
    PackageReport,
    TagShare,
)

RULES = Path(__file__).resolve().parents[2] / "rules" / "coverage.dl"

# the keys shown first, in this order, when --keys is not given
FIRST_KEYS = ("CPU", "CUDA", "MPS", "Meta", "XPU")

# relation → (layer, needed for) for the "layers missing" note
LAYER_NEEDS = (
    ("op", "ops", "every count"),
    ("dispatch", "ops", "kernels"),
    ("derivative", "ops", "derivative coverage"),
    ("decomp", "python", "decompositions of missing ops"),
    ("py_api", "python", "Python API → op (tests, modules, decompositions)"),
    ("py_calls", "python", "what decompositions and nn modules call"),
    ("module_class", "python", "nn modules reaching an op"),
    ("tests_cover", "tests", "test coverage"),
)

Progress = Callable[[str], None]


@dataclass(frozen=True)
class CoverageOptions:
    """What to report: keys (None = every backend key in the DB), a tag scope, a package."""

    keys: tuple[str, ...] | None = None
    tag: str | None = None
    backend_package: Path | None = None
    rules: Path = RULES
    heatmap_limit: int | None = None  # heatmap rows, ops missing somewhere first (None: all)


def compute_coverage(
    con, options: CoverageOptions = CoverageOptions(), progress: Progress | None = None
) -> CoverageReport:
    """Evaluate rules/coverage.dl on the fact DB `con` and build the report.

    Example:
        >>> compute_coverage(con, CoverageOptions(tag="core")).key("CPU").covered
        189
    """
    step = progress or (lambda _msg: None)
    t0 = time.perf_counter()
    counts = _table_counts(con)
    if not counts.get("op"):
        raise StoreError(
            "the fact DB has no ops (relation `op` is empty)",
            hint="run `torchtalk index --source PATH --layers ops`",
        )
    keys = _resolve_keys(con, options.keys)
    scan = None
    if options.backend_package is not None:
        from torchtalk.reports.backend_pkg import scan_backend_package

        step("reading backend package")  # the first of the bar's steps (cli/report.py _progress)
        scan = scan_backend_package(options.backend_package)
        _check_package_keys(con, scan)
        keys += tuple(k for k in scan.keys if k not in keys and not k.startswith("Composite"))
    else:
        step("preparing facts")
    tag = scope_tag(options, keyed=bool(scan and scan.keys))
    if tag is not None:
        _check_tag(con, tag)
    facts = _driver_facts(con, keys, tag)
    if scan is not None:
        facts["backend_ref"] = [(r.name, r.overload, r.file, r.line) for r in scan.refs if not r.key]
        facts["backend_impl"] = [(r.name, r.overload, r.key, r.file, r.line) for r in scan.refs if r.key]
        facts["backend_fallback"] = [(f.key, f.fn, f.file, f.line) for f in scan.fallbacks]
    step("evaluating rules/coverage.dl")
    rows = _evaluate(con, options.rules, facts, package=scan is not None)
    step("building the report")
    locs = {op: (f, line) for op, f, line in con.execute("SELECT op, file, line FROM op").fetchall()}
    fallback_fns = _fallback_fns(con, keys)
    key_cov = tuple(_key_coverage(k, rows, locs, fallback_fns.get(k, ())) for k in keys)
    total = rows["scope_total"][0][0] if rows["scope_total"] else 0
    package = _package_report(scan, rows, counts, total) if scan is not None else None
    return CoverageReport(
        source=_source_of(con),
        scope=tag or "*",
        total=total,
        keys=key_cov,
        heatmap=_heatmap(keys, rows, options.heatmap_limit),
        no_derivative=_ops(rows["no_derivative"]),
        untested=_ops(rows["untested"]) if counts.get("tests_cover") else (),
        layers_missing=_layers_missing(counts),
        seconds=round(time.perf_counter() - t0, 3),
        package=package,
        library_ops=sum(1 for o in locs if "::" in o) if tag is None else 0,  # Note [Library ops]
    )


# ----------------------------------------------------------------- inputs


def scope_tag(options: CoverageOptions, keyed: bool = False) -> str | None:
    """The tag the report is restricted to: --tag ("*" = every op); with a
    backend package and no --tag, the core ATen opset a torch.compile backend
    sees, unless the package registers kernels for a dispatch key (`keyed`:
    C++ TORCH_LIBRARY_IMPL or a keyed torch.library registration), which the
    eager dispatcher calls for every op.

    Example:
        >>> scope_tag(CoverageOptions(backend_package=Path("pkg")))
        'core'
    """
    if options.tag == "*":
        return None
    if options.tag is None and options.backend_package is not None and not keyed:
        return "core"
    return options.tag


def _table_counts(con) -> dict[str, int]:
    """Rows of the relations the report reads (absent tables are left out)."""
    names = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    wanted = [rel for rel, _, _ in LAYER_NEEDS] + ["py_def"]
    return {rel: con.execute(f'SELECT count(*) FROM "{rel}"').fetchone()[0] for rel in wanted if rel in names}


def _layers_missing(counts: dict[str, int]) -> tuple[str, ...]:
    by_layer: dict[str, list[str]] = defaultdict(list)
    for rel, layer, why in LAYER_NEEDS:
        if not counts.get(rel):
            by_layer[layer].append(f"{rel}: {why}")
    return tuple(f"{layer} layer ({'; '.join(v)})" for layer, v in by_layer.items())


def _backend_keys(con) -> list[str]:
    rows = con.execute("SELECT DISTINCT key FROM dispatch").fetchall()
    keys = sorted(r[0] for r in rows if not r[0].startswith("Composite"))
    first = [k for k in FIRST_KEYS if k in keys]
    if "Meta" not in first:
        first.append("Meta")  # structured kernels give Meta kernels even with no Meta entry
    return first + [k for k in keys if k not in first]


def _c10_keys(con) -> list[str]:
    """Every non-alias key of c10::DispatchKey (dispatch_key_def), for --keys."""
    names = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    if "dispatch_key_def" not in names:
        return []
    return [r[0] for r in con.execute(
        "SELECT key FROM dispatch_key_def WHERE kind != 'alias' ORDER BY key").fetchall()]


def _resolve_keys(con, wanted: tuple[str, ...] | None) -> tuple[str, ...]:
    known = _backend_keys(con)
    if not wanted:
        return tuple(known)
    known += [k for k in _c10_keys(con) if k not in known]
    for k in wanted:
        if k.startswith("Composite"):
            raise InputError(
                f"{k} is a composite alias key, not a backend: its kernels count for every key",
                hint="pick backend keys, e.g. --keys CPU,MPS",
            )
        if k not in known:
            raise InputError(
                f"unknown dispatch key {k!r} (neither a dispatch entry nor c10's DispatchKey names it)",
                hint=did_you_mean(k, known) or "keys: " + ", ".join(known[:12]) + ", ...",
            )
    return tuple(dict.fromkeys(wanted))


def _check_package_keys(con, scan) -> None:
    """A registration's key (C++ or torch.library) must be one of c10's DispatchKeys (when the DB has them)."""
    c10 = _c10_keys(con)
    if not c10:
        return
    aliases = {r[0] for r in con.execute("SELECT key FROM dispatch_key_def WHERE kind = 'alias'").fetchall()}
    known = set(c10) | set(_backend_keys(con)) | aliases  # alias keys: m.impl for CompositeExplicitAutograd
    for where, key in [(f"{r.file}:{r.line}", r.key) for r in scan.refs if r.key] + [
        (f"{f.file}:{f.line}", f.key) for f in scan.fallbacks
    ]:
        if key not in known:
            block = "torch.library registration" if where.split(":")[0].endswith(".py") else "TORCH_LIBRARY_IMPL block"
            raise InputError(f"{where}: unknown dispatch key {key!r} in a {block}",
                             hint=did_you_mean(key, sorted(known)) or "see c10/core/DispatchKey.h")


def _check_tag(con, tag: str) -> None:
    tags = [r[0] for r in con.execute("SELECT DISTINCT tag FROM op_tag").fetchall()]
    if tag not in tags:
        raise InputError(f"unknown op tag {tag!r}", hint=did_you_mean(tag, tags) or "tags: " + ", ".join(sorted(tags)))


def _driver_facts(con, keys: tuple[str, ...], tag: str | None) -> dict[str, list[tuple]]:
    facts: dict[str, list[tuple]] = {
        "report_key": [(k,) for k in keys],
        "report_scope": [(tag or "*",)],
        "module_forward": _module_forwards(con),
        "backend_ref": [],
        "backend_impl": [],
        "backend_fallback": [],
    }
    return facts


def _module_forwards(con) -> list[tuple[str, str]]:
    names = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    if not {"module_class", "py_def"} <= names:
        return []
    return con.execute(
        "SELECT DISTINCT m.cls, d.py FROM module_class m JOIN py_def d ON d.py = m.cls || '.forward' "
        "WHERE m.category = 'nn'"
    ).fetchall()


# ----------------------------------------------------------------- evaluation

KEY_OUTPUTS = (
    "scope_total", "kernel_via", "covered", "missing", "missing_decomp", "key_covered",
    "key_via", "tag_total", "tag_covered", "no_derivative", "untested", "fallback_covered",
)
PACKAGE_OUTPUTS = (
    "pkg_op", "pkg_unknown", "pkg_missing", "pkg_missing_composite", "pkg_missing_decomp",
    "pkg_decomposes", "pkg_inherited", "pkg_fallback", "pkg_autograd",
    "decomp_unmet", "pkg_missing_weight",
)


def _evaluate(con, rules: Path, facts: dict, *, package: bool) -> dict[str, list[tuple]]:
    from torchtalk.datalog import evaluate, parse_file

    if not Path(rules).is_file():
        raise InputError(f"coverage rules not found: {rules}")
    program = parse_file(str(rules))
    outputs = list(KEY_OUTPUTS) + (list(PACKAGE_OUTPUTS) if package else [])
    missing = [o for o in outputs if o not in program.decls]
    if missing:
        raise InputError(f"{rules}: the coverage rules must define {', '.join(missing)}")
    result = evaluate(program, con, outputs=outputs, facts=facts)
    return {o: list(result.get(o, ())) for o in outputs}


def _source_of(con) -> str:
    try:
        row = con.execute("SELECT value FROM torchtalk_meta WHERE key = 'source'").fetchone()
        return str(row[0]) if row else ""
    except Exception:  # noqa: BLE001 - metadata is optional for the report
        return ""


# ----------------------------------------------------------------- folding


def _fallback_fns(con, keys: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """Per key, "fn (file:line)" of its m.fallback registrations (for display)."""
    names = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    if "lib_fallback" not in names:
        return {}
    out: dict[str, list[str]] = defaultdict(list)
    for k, fn, f, line in con.execute(
        "SELECT key, fn, file, line FROM lib_fallback WHERE ns IN ('_', 'aten') ORDER BY file, line"
    ).fetchall():
        if k in keys:
            out[k].append(f"{fn} ({f}:{line})")
    return {k: tuple(v) for k, v in out.items()}


def _key_coverage(
    key: str, rows: dict[str, list[tuple]], locs: dict[str, tuple[str, int]], fallback_fns: tuple[str, ...] = ()
) -> KeyCoverage:
    total = rows["scope_total"][0][0] if rows["scope_total"] else 0
    covered = dict(rows["key_covered"]).get(key, 0)
    by_path = {KernelPath.parse(h).value: n for k, h, n in rows["key_via"] if k == key}
    tag_totals = dict(rows["tag_total"])
    tag_cov = {t: n for k, t, n in rows["tag_covered"] if k == key}
    tags = tuple(
        TagShare(t, tag_cov.get(t, 0), n) for t, n in sorted(tag_totals.items(), key=lambda x: (-x[1], x[0]))
    )
    decomps: dict[str, list[str]] = defaultdict(list)
    for op, k, py, f, line in rows["missing_decomp"]:
        if k == key:
            decomps[op].append(f"{py} ({f}:{line})")
    by_fallback = {op for op, k in rows["fallback_covered"] if k == key}

    def located(ops) -> tuple[MissingOp, ...]:
        return tuple(MissingOp(op, *locs.get(op, ("", 0)), tuple(sorted(decomps.get(op, ())))) for op in sorted(ops))

    missing = {op for op, k in rows["missing"] if k == key}
    return KeyCoverage(key, covered, total, by_path, tags, located(missing - by_fallback),
                       located(missing & by_fallback), fallback_fns)


def _ops(rows: list[tuple]) -> tuple[MissingOp, ...]:
    return tuple(MissingOp(op, f, line) for op, f, line in sorted(rows))


def _heatmap(keys: tuple[str, ...], rows: dict[str, list[tuple]], limit: int) -> tuple[OpRow, ...]:
    best: dict[str, dict[str, str]] = defaultdict(dict)
    rank = {p.value: i for i, p in enumerate(PATH_ORDER)}
    scope = {op for op, _ in rows["covered"]} | {op for op, _ in rows["missing"]}
    for op, k, how in rows["kernel_via"]:
        if op in scope and (k not in best[op] or rank[how] < rank[best[op][k]]):
            best[op][k] = how
    with_decomp = {r[0] for r in rows["missing_decomp"]}
    missing_n: dict[str, int] = defaultdict(int)
    for op, _ in rows["missing"]:
        missing_n[op] += 1
    by_fallback: dict[str, list[str]] = defaultdict(list)
    for op, k in rows["fallback_covered"]:
        by_fallback[op].append(k)
    order = sorted(scope, key=lambda op: (-missing_n[op], op))[:limit]
    return tuple(
        OpRow(op, {k: best[op].get(k, "") for k in keys}, op in with_decomp, tuple(sorted(by_fallback[op])))
        for op in order
    )


def _package_report(scan, rows: dict[str, list[tuple]], counts: dict[str, int], total: int) -> PackageReport:
    in_scope = {op for op, _ in rows["covered"]} | {op for op, _ in rows["missing"]}
    mapped: dict[str, tuple[str, int]] = {}
    for op, f, line in sorted(rows["pkg_op"]):
        mapped.setdefault(op, (f, line))
    covered = tuple(PackageOp(op, *mapped[op]) for op in sorted(mapped) if op in in_scope)
    inherited: dict[str, list[str]] = defaultdict(list)
    for op, ckey in rows["pkg_inherited"]:
        inherited[op].append(ckey)
    fallback: dict[str, list[str]] = defaultdict(list)
    for op, key, fn, f, line in rows["pkg_fallback"]:
        fallback[op].append(f"{key}: {fn} ({f}:{line})")
    left = {op for (op,) in rows["pkg_missing"]} - set(inherited) - set(fallback)
    missing = sorted(_missing_ops(left, rows), key=lambda p: (-(p.modules + p.tests), p.op))
    unknown = tuple(
        f"aten.{n}{'' if o == '*' else '.' + (o or 'default')} at {f}:{line}"
        for n, o, f, line in sorted(rows["pkg_unknown"], key=lambda r: (r[2], r[3], r[0]))
    )
    return PackageReport(
        root=str(scan.root), files=scan.files, refs=len(scan.refs), scope_total=total,
        covered=covered, missing=tuple(missing), unknown=unknown, unparsed=scan.unparsed,
        decomp_calls_known=bool(counts.get("py_calls") and counts.get("py_api")),
        decomps_known=bool(counts.get("decomp")), keys=scan.keys,
        inherited=tuple(PackageOp(op, via=", ".join(sorted(v))) for op, v in sorted(inherited.items())),
        fallback=tuple(PackageOp(op, via="; ".join(sorted(v))) for op, v in sorted(fallback.items())),
        notes=scan.notes,
        autograd=tuple(PackageOp(op, f, line, via=k) for op, k, f, line in sorted(rows["pkg_autograd"])),
    )


def _missing_ops(ops: set[str], rows: dict[str, list[tuple]]) -> list[PackageOp]:
    """The package's missing ops, with what could still run them (decompositions, CIA) and their weight."""
    composite = {r[0] for r in rows["pkg_missing_composite"]}
    decomposes: dict[str, list[str]] = defaultdict(list)
    for op, py in rows["pkg_decomposes"]:
        decomposes[op].append(py)
    unmet: dict[str, list[str]] = defaultdict(list)
    for op, _py, api in rows["decomp_unmet"]:
        if api not in unmet[op]:
            unmet[op].append(api)
    weight = {op: (m, t) for op, m, t in rows["pkg_missing_weight"]}
    with_decomp = {r[0] for r in rows["pkg_missing_decomp"]}
    return [
        PackageOp(
            op, modules=weight.get(op, (0, 0))[0], tests=weight.get(op, (0, 0))[1],
            composite=op in composite, decomposes=tuple(sorted(decomposes[op])),
            unmet=tuple(sorted(unmet[op])), has_decomp=op in with_decomp,
        )
        for op in ops
    ]
