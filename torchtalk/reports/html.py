"""The coverage report as one self-contained HTML page (no external assets).

A summary table (every number carries `data-key`/`data-field` so a test can
read it back), a bar chart per tag (inline SVG: share of the tag's ops covered
per key) and a heatmap of ops × keys (inline SVG; ops missing somewhere first).

Example:
    >>> Path("coverage.html").write_text(render_html(report))
"""

from __future__ import annotations

from html import escape

from torchtalk.reports.model import CoverageReport, KeyCoverage, package_path, pct, scope_text

COLORS = {
    "direct": "#1a7f37",
    "delegate": "#2da44e",
    "structured_meta": "#1b7c83",
    "composite": "#8fd19e",
    "registered": "#4ac26b",
    "autograd": "#6fdd8b",
    "catchall": "#57ab5a",
    "fallback": "#d4a72c",
    "missing+decomp": "#f0883e",
    "missing": "#cf222e",
}
HEATMAP_ROWS = 400
CELL_W, CELL_H, LABEL_W = 64, 12, 260

STYLE = """
body{font:14px system-ui,sans-serif;margin:24px;color:#1f2328;background:#fff}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #d0d7de;padding:3px 8px;text-align:right}
th{background:#f6f8fa}td:first-child,th:first-child{text-align:left}
.legend span{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px;vertical-align:middle}
svg text{font:11px system-ui,sans-serif}.charts{display:flex;flex-wrap:wrap;gap:16px}
"""


def render_html(report: CoverageReport) -> str:
    """The whole page as a string.

    Example:
        >>> "<svg" in render_html(report)
        True
    """
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>Backend coverage: {escape(report.source)}</title><style>{STYLE}</style></head><body>",
        f"<h1>Backend coverage</h1><p>{escape(report.source)}: {escape(scope_text(report))}; "
        f"computed by rules/coverage.dl in {report.seconds:.2f} s.</p>",
    ]
    parts += [f"<p>Not indexed: {escape(m)}</p>" for m in report.layers_missing]
    parts += ["<h2>Per dispatch key</h2>", _summary(report)]
    parts += ["<h2>Share by tag</h2><div class='charts'>", *_tag_charts(report), "</div>"]
    parts += ["<h2>Ops × keys</h2>", _legend(), _heatmap(report)]
    if report.package is not None:
        parts.append(_package(report))
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _cell(key: str, field: str, value: object) -> str:
    return f"<td data-key='{escape(key)}' data-field='{field}'>{escape(str(value))}</td>"


def _summary(report: CoverageReport) -> str:
    head = ("key", "covered", "total", "share", "core covered", "core total", "direct", "delegate",
            "structured meta", "composite", "fallback", "missing", "missing with decomp")
    rows = ["<table id='summary'><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"]
    for kc in report.keys:
        core = kc.tag("core")
        cells = [
            f"<td>{escape(kc.key)}</td>",
            _cell(kc.key, "covered", kc.covered),
            _cell(kc.key, "total", kc.total),
            _cell(kc.key, "share", pct(kc.covered, kc.total)),
            _cell(kc.key, "core_covered", core.covered if core else "n/a"),
            _cell(kc.key, "core_total", core.total if core else "n/a"),
            *(_cell(kc.key, p, kc.by_path.get(p, 0)) for p in ("direct", "delegate", "structured_meta", "composite")),
            _cell(kc.key, "fallback", len(kc.fallback)),
            _cell(kc.key, "missing", len(kc.missing)),
            _cell(kc.key, "missing_with_decomp", kc.missing_with_decomp),
        ]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return "\n".join(rows) + "</table>"


def _tag_charts(report: CoverageReport) -> list[str]:
    if not report.keys:
        return []
    return [_tag_chart(report.keys, share.tag, share.total) for share in report.keys[0].tags]


def _tag_chart(keys: tuple[KeyCoverage, ...], tag: str, total: int) -> str:
    """One horizontal bar per key: the share of `tag`'s ops it covers."""
    bar_w, row_h, label_w = 220, 16, 130
    height = 24 + row_h * len(keys)
    out = [
        f"<svg class='tagchart' data-tag='{escape(tag)}' width='{label_w + bar_w + 70}' height='{height}' "
        f"xmlns='http://www.w3.org/2000/svg'><text x='0' y='14' font-weight='bold'>{escape(tag)} "
        f"({total} ops)</text>"
    ]
    for i, kc in enumerate(keys):
        t = kc.tag(tag)
        covered = t.covered if t else 0
        y = 22 + i * row_h
        w = round(bar_w * covered / total) if total else 0
        out.append(
            f"<text x='0' y='{y + 11}'>{escape(kc.key)}</text>"
            f"<rect x='{label_w}' y='{y}' width='{bar_w}' height='{row_h - 3}' fill='#eaeef2'/>"
            f"<rect x='{label_w}' y='{y}' width='{w}' height='{row_h - 3}' fill='#2da44e'/>"
            f"<text x='{label_w + bar_w + 4}' y='{y + 11}' data-key='{escape(kc.key)}' "
            f"data-tag='{escape(tag)}' data-covered='{covered}'>{pct(covered, total)}</text>"
        )
    out.append("</svg>")
    return "".join(out)


def _legend() -> str:
    items = "".join(f"<span style='background:{c}'></span>{escape(k)}" for k, c in COLORS.items())
    return f"<p class='legend'>{items}</p>"


def _heatmap(report: CoverageReport) -> str:
    rows = report.heatmap[:HEATMAP_ROWS]
    keys = [kc.key for kc in report.keys]
    width = LABEL_W + CELL_W * len(keys)
    height = 20 + CELL_H * len(rows)
    out = [f"<svg id='heatmap' width='{width}' height='{height}' xmlns='http://www.w3.org/2000/svg'>"]
    for j, k in enumerate(keys):
        out.append(f"<text x='{LABEL_W + j * CELL_W + 2}' y='14'>{escape(k[:10])}</text>")
    for i, row in enumerate(rows):
        y = 20 + i * CELL_H
        out.append(f"<text x='0' y='{y + 10}'>{escape(row.op[:42])}</text>")
        for j, k in enumerate(keys):
            status = row.status(k)
            out.append(
                f"<rect x='{LABEL_W + j * CELL_W}' y='{y}' width='{CELL_W - 1}' height='{CELL_H - 1}' "
                f"fill='{COLORS[status]}'><title>{escape(row.op)} {escape(k)}: {status}</title></rect>"
            )
    out.append("</svg>")
    more = len(report.heatmap) - len(rows)
    if more > 0:
        out.append(f"<p>… and {more} more ops (fewer keys missing; see the CSV or JSON report).</p>")
    return "\n".join(out)


def _package(report: CoverageReport) -> str:
    pkg = report.package
    assert pkg is not None
    out = [
        f"<h2>Backend package {escape(pkg.root)}</h2>",
        f"<p id='package'>covers <b data-field='pkg_covered'>{len(pkg.covered)}</b> of "
        f"<b data-field='pkg_total'>{pkg.scope_total}</b> ops; inherits "
        f"<b data-field='pkg_inherited'>{len(pkg.inherited)}</b> through composites; fallback "
        f"<b data-field='pkg_fallback'>{len(pkg.fallback)}</b>; missing "
        f"<b data-field='pkg_missing'>{len(pkg.missing)}</b>.</p>",
        "<table><tr><th>missing op</th><th>nn modules</th><th>tests</th><th>path</th></tr>",
    ]
    for p in pkg.missing:
        out.append(
            f"<tr><td>{escape(p.op)}</td><td>{p.modules}</td><td>{p.tests}</td>"
            f"<td style='text-align:left'>{escape(package_path(p, pkg))}</td></tr>"
        )
    out.append("</table>")
    return "\n".join(out)
