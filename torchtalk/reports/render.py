"""Render a `CoverageReport` as Markdown, CSV or JSON (HTML: reports/html.py).

Example:
    >>> print(render(report, Format.MD)[:40])
    # Backend coverage: /src/pytorch-v2.6.0
"""

from __future__ import annotations

import csv
import io
import json

from torchtalk.reports.model import (
    CoverageReport,
    Format,
    KeyCoverage,
    PackageReport,
    package_path,
    pct,
    scope_text,
)


def render(report: CoverageReport, fmt: Format) -> str:
    """The report as text in `fmt`.

    Example:
        >>> json.loads(render(report, Format.JSON))["keys"][0]["key"]
        'CPU'
    """
    if fmt is Format.JSON:
        return json.dumps(report.to_json(), indent=1) + "\n"
    if fmt is Format.CSV:
        return render_csv(report)
    if fmt is Format.HTML:
        from torchtalk.reports.html import render_html

        return render_html(report)
    return render_md(report)


# ----------------------------------------------------------------- markdown


def render_md(report: CoverageReport) -> str:
    """Markdown: summary per key, share by tag, missing ops, autograd, tests, package."""
    out = [f"# Backend coverage: {report.source or 'fact DB'}", ""]
    out.append(f"Scope: {scope_text(report)}. Computed by rules/coverage.dl in {report.seconds:.2f} s.")
    for layer in report.layers_missing:
        out.append(f"- not indexed: {layer}")
    out += ["", "## Per dispatch key", ""]
    out += _md_keys(report)
    out += ["", "Paths (an op may have several): direct = its dispatch table names the key; delegate = "
            "the structured out= op it delegates to does; structured meta = torchgen's generated Meta "
            "kernel; composite = a CompositeImplicitAutograd/CompositeExplicitAutograd(NonFunctional) "
            "kernel serves every key, so no missing op has a composite path; fallback = no kernel, the key's "
            "backend fallback (m.fallback) runs the op (MPS's on the CPU; Meta's raises). See rules/coverage.dl."]
    out += ["", "## Share by tag", ""]
    out += _md_tags(report)
    for kc in report.keys:
        if kc.fallback:
            out += ["", f"## Run by {kc.key}'s backend fallback: {len(kc.fallback)} ops (no kernel of their own)", ""]
            out += [f"- fallback {fn}" for fn in kc.fallback_fns]
            out += [f"- `{m.op}` ({m.file}:{m.line})" for m in kc.fallback]
        out += ["", f"## Missing for {kc.key}: {len(kc.missing)} ops ({kc.missing_with_decomp} with a decomposition)", ""]
        out += [
            f"- `{m.op}` ({m.file}:{m.line})" + (f": decomposes via {', '.join(m.decomps)}" if m.decomps else "")
            for m in kc.missing
        ]
    out += ["", f"## Functional ops without a derivative formula: {len(report.no_derivative)}", ""]
    out.append("(not CompositeImplicitAutograd, so autograd cannot differentiate through a decomposition)")
    out += [f"- `{m.op}` ({m.file}:{m.line})" for m in report.no_derivative]
    out += ["", "## Ops without test coverage", ""]
    if any(layer.startswith("tests ") for layer in report.layers_missing):
        out.append("(the tests layer is not indexed: run `torchtalk index --layers tests`)")
    else:
        out.append(f"{len(report.untested)} ops no test reaches:")
        out += [f"- `{m.op}` ({m.file}:{m.line})" for m in report.untested]
    if report.package is not None:
        out += ["", *_md_package(report.package)]
    return "\n".join(out) + "\n"


def _md_keys(report: CoverageReport) -> list[str]:
    rows = [
        "| key | covered | share | core | direct | delegate | structured meta | composite | fallback | missing "
        "| missing with decomp |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for kc in report.keys:
        rows.append(
            f"| {kc.key} | {kc.covered}/{kc.total} | {pct(kc.covered, kc.total)} | {_core(kc)} | "
            + " | ".join(str(kc.by_path.get(p, 0)) for p in ("direct", "delegate", "structured_meta", "composite"))
            + f" | {len(kc.fallback)} | {len(kc.missing)} | {kc.missing_with_decomp} |"
        )
    return rows


def _core(kc: KeyCoverage) -> str:
    core = kc.tag("core")
    return f"{core.covered}/{core.total} ({pct(core.covered, core.total)})" if core else "n/a"


def _md_tags(report: CoverageReport) -> list[str]:
    if not report.keys:
        return ["(no keys)"]
    keys = [kc.key for kc in report.keys]
    rows = ["| tag | ops | " + " | ".join(keys) + " |", "|---|---:|" + "---:|" * len(keys)]
    for share in report.keys[0].tags:
        cells = []
        for kc in report.keys:
            t = kc.tag(share.tag)
            cells.append(pct(t.covered, t.total) if t else "n/a")
        rows.append(f"| {share.tag} | {share.total} | " + " | ".join(cells) + " |")
    return rows


def _md_package(pkg: PackageReport) -> list[str]:
    out = [f"## Backend package {pkg.root}", ""]
    keys = f" for {', '.join(pkg.keys)}" if pkg.keys else ""
    out.append(
        f"{pkg.files} files, {pkg.refs} op references{keys}; covers {len(pkg.covered)}/{pkg.scope_total} "
        f"in-scope ops ({pct(len(pkg.covered), pkg.scope_total)}), inherits {len(pkg.inherited)} through "
        f"composite kernels, runs {len(pkg.fallback)} through its fallback, misses {len(pkg.missing)} "
        f"({pkg.missing_decomposable} decomposable)."
    )
    if not pkg.decomp_calls_known:
        out.append("- what decompositions call is not indexed (python layer: py_calls, py_api): "
                   "whether a missing op decomposes into the package's ops is unknown")
    for u in pkg.unknown:
        out.append(f"- unknown op {u}")
    for u in pkg.unparsed:
        out.append(f"- could not parse {u}")
    out += [f"- {n}" for n in pkg.notes]
    out += ["", "### Covered", ""]
    out += [f"- `{p.op}` ({p.file}:{p.line})" for p in pkg.covered]
    if pkg.autograd:
        out += ["", "### Autograd kernels (they redispatch to the backend key's kernel)", ""]
        out += [f"- `{p.op}` for {p.via} ({p.file}:{p.line})" for p in pkg.autograd]
    if pkg.inherited:
        out += ["", "### Inherited through composite kernels", ""]
        out += [f"- `{p.op}` ({p.via})" for p in pkg.inherited]
    if pkg.fallback:
        out += ["", "### Run by the package's fallback", ""]
        out += [f"- `{p.op}` ({p.via})" for p in pkg.fallback]
    out += ["", "### Missing (most used first)", "", "| op | nn modules | tests | path |", "|---|---:|---:|---|"]
    out += [f"| `{p.op}` | {p.modules} | {p.tests} | {package_path(p, pkg)} |" for p in pkg.missing]
    return out


# ----------------------------------------------------------------- csv


def render_csv(report: CoverageReport) -> str:
    """One row per op: its kernel path per key, "fallback", "missing" or "missing+decomp"."""
    keys = [kc.key for kc in report.keys]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["op", *keys])
    for row in sorted(report.heatmap, key=lambda r: r.op):
        w.writerow([row.op, *(row.status(k) for k in keys)])
    return buf.getvalue()
