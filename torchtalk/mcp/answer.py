"""What a tool returns: compact text for the model, the same rows as structured output.

Note [Answer size]: an agent's context is small and expensive, so the text of
an answer shows at most `TEXT_ROWS` rows, one per line, evidence last as
`file:line`, then "… N more" with how to narrow; the structured output carries
up to `STRUCT_ROWS` rows for programs. Both say the full count.

Example:
    >>> to_result(Table("callees(matmul)", ("callee", "file", "line"),
    ...                 (("at::native::_matmul_impl", "aten/.../LinearAlgebra.cpp", 2146),), 1))
    CallToolResult(content=[TextContent(text='callees(matmul): 1 row\\n  at::native::_matmul_impl  aten/.../LinearAlgebra.cpp:2146')], ...)
"""

from __future__ import annotations

from typing import Any

from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, Field

from torchtalk.lookup import Table

TEXT_ROWS = 30
STRUCT_ROWS = 200


class Answer(BaseModel):
    """Structured output of every TorchTalk tool."""

    title: str = Field(description="what was asked, e.g. 'callees(at::native::matmul)'")
    columns: list[str] = Field(description="the keys of each row")
    rows: list[dict[str, Any]] = Field(description="the rows (capped), with file and line where known")
    total: int = Field(description="rows before the cap")
    truncated: bool = Field(description="true when rows holds fewer than total")
    notes: list[str] = Field(default_factory=list, description="what is missing, how the answer was narrowed")


def _cell(value: Any) -> str:
    text = "" if value is None else str(value)
    return text if len(text) <= 160 else text[:157] + "..."


def format_row(columns: tuple[str, ...], row: tuple[Any, ...], skip: frozenset[str] = frozenset()) -> str:
    """One row as `a  b  file:line` (evidence last; columns in `skip` left out)."""
    values = {c: v for c, v in zip(columns, row, strict=True) if c not in skip}
    file, line = values.pop("file", None), values.pop("line", None)
    parts = [_cell(v) for v in values.values() if v not in (None, "")]
    if file:
        parts.append(f"{file}:{line}" if line else str(file))
    return "  ".join(parts)


GROUP_COLUMNS = ("step", "kind")


def _constant_columns(table: Table) -> dict[str, Any]:
    """Columns with one value on every row (said once in the header, not per row)."""
    if len(table.rows) < 2:
        return {}
    out = {}
    for i, c in enumerate(table.columns):
        if c not in ("file", "line") and len({r[i] for r in table.rows}) == 1:
            out[c] = table.rows[0][i]
    return out


def _grouped(table: Table, col: str, skip: frozenset[str], text_rows: int) -> list[str]:
    """Rows grouped by `col` (first-seen order), each group capped so every group shows."""
    i = table.columns.index(col)
    groups: dict[Any, list[tuple[Any, ...]]] = {}
    for r in table.rows:
        groups.setdefault(r[i], []).append(r)
    cap = max(3, text_rows // len(groups))
    lines = []
    for value, rows in groups.items():
        lines.append(f"  {col} {value}: {len(rows)}{'+' if table.total > len(table.rows) else ''}")
        lines += ["    " + format_row(table.columns, r, skip | {col}) for r in rows[:cap]]
        if len(rows) > cap:
            lines.append(f"    … {len(rows) - cap} more {value}")
    return lines


def render_text(table: Table, text_rows: int = TEXT_ROWS) -> str:
    """The compact text form of `table` (see Note [Answer size]).

    Columns constant over the rows are said once in the header; a long answer
    with a `step`/`kind` column is grouped by it so every kind of row shows.
    """
    n = table.total
    const = _constant_columns(table)
    head = f"{table.title}: {n} row{'s' if n != 1 else ''}" if n else f"{table.title}: no results"
    if const:
        said = [f"{c}={_cell(v)}" for c, v in const.items() if v not in (None, "")]
        head += f" ({', '.join(said)})" if said else ""
    skip = frozenset(const)
    group = next((c for c in GROUP_COLUMNS if c in table.columns and c not in const), None)
    lines = [head]
    if group and len(table.rows) > text_rows:
        lines += _grouped(table, group, skip, text_rows)
        more = n - len(table.rows)
    else:
        lines += ["  " + format_row(table.columns, r, skip) for r in table.rows[:text_rows]]
        more = n - min(len(table.rows), text_rows)
    if more > 0:
        lines.append(f"… {more} more (narrow the question, or use `query` with a filter)")
    lines += [f"note: {note}" for note in table.notes]
    return "\n".join(lines)


def to_result(table: Table) -> CallToolResult:
    """The tool result for `table`: compact text plus the structured `Answer`."""
    rows = table.dicts()[:STRUCT_ROWS]
    answer = Answer(
        title=table.title,
        columns=list(table.columns),
        rows=rows,
        total=table.total,
        truncated=len(rows) < table.total,
        notes=list(table.notes),
    )
    return CallToolResult(
        content=[TextContent(type="text", text=render_text(table))],
        structured_content=answer.model_dump(mode="json"),
    )
