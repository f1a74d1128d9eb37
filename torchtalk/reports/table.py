"""The coverage report as a `lookup.Table` (what the MCP `coverage` tool shows).

Example:
    >>> coverage_table(report, "MPS").title
    'coverage of MPS: 2123/2633 ops (80.6%), core 181/189 (95.8%)'
"""

from __future__ import annotations

from torchtalk.lookup import Table
from torchtalk.reports.model import CoverageReport
from torchtalk.reports.render import pct


def coverage_table(report: CoverageReport, key: str | None = None) -> Table:
    """Without `key`: a row per key (covered, total, share, core); with it: the key's missing ops."""
    notes = tuple(f"not indexed: {m}" for m in report.layers_missing)
    if key is None:
        rows = []
        for kc in report.keys:
            core = kc.tag("core")
            rows.append((
                kc.key, kc.covered, kc.total, pct(kc.covered, kc.total),
                f"{core.covered}/{core.total}" if core else "n/a", len(kc.fallback), len(kc.missing),
                kc.missing_with_decomp,
            ))
        cols = ("key", "covered", "total", "share", "core", "fallback", "missing", "missing_with_decomp")
        return Table("coverage per dispatch key", cols, tuple(rows), len(rows), notes)
    kc = report.key(key)
    core = kc.tag("core")
    title = f"coverage of {kc.key}: {kc.covered}/{kc.total} ops ({pct(kc.covered, kc.total)})"
    if core:
        title += f", core {core.covered}/{core.total} ({pct(core.covered, core.total)})"
    rows = tuple(
        (m.op, f"{m.file}:{m.line}", "; ".join(m.decomps) or "-") for m in kc.missing
    )
    paths = ", ".join(f"{p} {n}" for p, n in sorted(kc.by_path.items()))
    notes += (f"kernels by path: {paths}",)
    if kc.fallback:
        notes += (f"{len(kc.fallback)} more ops have no kernel and run through the backend fallback "
                  + "; ".join(kc.fallback_fns),)
    return Table(title, ("missing_op", "where", "decomposition"), rows, len(rows), notes)
