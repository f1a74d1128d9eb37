"""Render a query `Result`: a rich table with file:line, or JSON.

Example:
    >>> print(to_json(result))
    [{"fn": "at::native::matmul", "callee": "at::native::_matmul_impl", ...}]
"""

from __future__ import annotations

import json
import sys


def to_json(result) -> str:
    """A JSON array with one object per row, keyed by the relation's columns
    (`file` and `line` included where the row has evidence)."""
    records = result.records()
    if getattr(result, "explanations", None):
        for rec, tree in zip(records, result.explanations, strict=False):
            rec["explain"] = tree
    return json.dumps(records, indent=1)


def _cells(result, row) -> list[str]:
    cols = result.columns
    out = []
    for c, v in zip(cols, row, strict=True):
        if c == "line" and "file" in cols:
            continue
        if c == "file" and "line" in cols:
            line = row[cols.index("line")]
            out.append(f"{v}:{line}" if v else "")
        else:
            out.append(str(v))
    return out


def headers(result) -> list[str]:
    cols = result.columns
    return [
        ("file:line" if c == "file" and "line" in cols else c)
        for c in cols
        if not (c == "line" and "file" in cols)
    ]


def print_table(result, file=None) -> None:
    """Print the rows as a table (rich on a terminal, tab-separated otherwise),
    then the notes and explanations on stderr/stdout."""
    file = file or sys.stdout
    err = sys.stderr
    for note in result.notes:
        print(f"note: {note}", file=err)
    if file.isatty():
        from rich.console import Console
        from rich.table import Table

        table = Table(show_lines=False, header_style="bold")
        for h in headers(result):
            table.add_column(h, overflow="fold")
        for row in result.rows:
            table.add_row(*_cells(result, row))
        Console(file=file).print(table)
    else:
        print("\t".join(headers(result)), file=file)
        for row in result.rows:
            print("\t".join(_cells(result, row)), file=file)
    shown, total = len(result.rows), result.total
    if shown < total:
        print(f"({shown} of {total} rows; --limit to see more)", file=err)
    elif total == 0:
        print(f"no rows ({result.name})", file=err)
    for i, tree in enumerate(getattr(result, "explanations", ()) or ()):
        print(f"\nwhy row {i + 1}:", file=file)
        print(render_explanation(tree), file=file)


def render_explanation(tree: dict, indent: int = 0) -> str:
    """An explanation tree (torchtalk.query.explain) as indented text."""
    pad = "  " * indent
    where = f"  [{tree['where']}]" if tree.get("where") else ""
    rule = f"  by {tree['rule']}" if tree.get("rule") else ""
    lines = [f"{pad}{tree['fact']}{where}{rule}"]
    for child in tree.get("because", ()):
        lines.append(render_explanation(child, indent + 1))
    return "\n".join(lines)
