"""What a tool returns: compact text for the model, the same rows as structured output.

Note [Answer size]: an agent's context is small and expensive, so every
answer fits a token budget (BUDGET tokens by default, `budget=` per call;
tokens are counted as characters / 4). The text is the CLI's sized form
(Note [Sized answers] in torchtalk/query/output.py): overloads grouped,
sections in order (a trace opens with the op's schema and its kernel per
key), and as many rows per section as the budget allows, then "… N more"
with the exact call that shows them. The structured output carries the rows
the text shows, and both say the full count.

Example:
    >>> to_result(Table("callees(matmul)", ("callee", "file", "line"),
    ...                 (("at::native::_matmul_impl", "aten/.../LinearAlgebra.cpp", 2146),), 1))
    CallToolResult(content=[TextContent(text='callees(matmul): 1 row\\n  at::native::_matmul_impl  aten/.../LinearAlgebra.cpp:2146')], ...)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, Field

from torchtalk.lookup import Table
from torchtalk.query.output import render_lines, size

BUDGET = 1200  # tokens of an answer's text, by default
MAX_BUDGET = 20000
CHARS_PER_TOKEN = 4
STRUCT_ROWS = 200  # rows a tool fetches for a capped answer
# rows per section (or in all) tried, largest first, until the text fits
_CAPS = (400, 200, 120, 80, 60, 45, 34, 26, 20, 15, 11, 8, 6, 4, 3, 2, 1)
MOST_ROWS = _CAPS[0]  # the most rows an answer shows, whatever its budget
NOTE_CHARS = 300  # a note is cut to this


class Answer(BaseModel):
    """Structured output of every TorchTalk tool."""

    title: str = Field(description="what was asked, e.g. 'callees(at::native::matmul)'")
    columns: list[str] = Field(description="the keys of each row")
    rows: list[dict[str, Any]] = Field(description="the rows the text shows (overloads grouped), with file and line where known")
    total: int = Field(description="rows of the whole answer")
    truncated: bool = Field(description="true when rows holds fewer than total")
    notes: list[str] = Field(default_factory=list, description="what is missing, how the answer was narrowed, how to see more")


@dataclass(frozen=True)
class More:
    """How to ask for what an answer leaves out (the exact calls an agent makes).

    `section(column, value)`: the call showing one cut section;
    `budget(tokens)`: the same call with a larger budget.
    """

    section: Callable[[str, Any], str] | None = None
    budget: Callable[[int], str] | None = None


def tokens(text: str) -> int:
    """Approximate tokens of `text` (Note [Answer size])."""
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def fit(table: Table, budget: int = BUDGET, more: More | None = None) -> tuple[str, list[tuple]]:
    """The text of `table` within `budget` tokens, and the rows it shows: the
    most rows per section that fit, then cells and notes cut shorter; the
    heading and each section's first rows always come first."""
    more = more or More()
    limit = budget * CHARS_PER_TOKEN
    sized = size(table.columns, table.rows, table.total, table.counts, table.one_value)
    notes = [_short(n, NOTE_CHARS) for n in table.notes]
    rest = more.budget(_bigger(budget)) if more.budget else ""

    def render(cap: int, most: int) -> tuple[str, list[tuple]]:
        lines, kept = render_lines(table.title, sized, cap, more=more.section, rest=rest, most=most)
        return "\n".join(lines + [f"note: {n}" for n in notes]), kept

    caps = [c for c in _CAPS if c <= 2 * max(1, sized.count)] or [1]
    text, kept = "", []
    for most in (160, 100):
        # the text grows with the cap: find the largest cap that fits (binary search)
        lo, hi, best = 0, len(caps) - 1, None
        while lo <= hi:
            mid = (lo + hi) // 2
            text, kept = render(caps[mid], most)
            if len(text) <= limit:
                best, hi = (text, kept), mid - 1
            else:
                lo = mid + 1
        if best is not None:
            return best
        text, kept = render(caps[-1], most)
    # even one row a section is over: keep the first lines that fit
    cut = text[:limit - 60].rsplit("\n", 1)[0]
    hint = more.budget(_bigger(budget)) if more.budget else "a narrower question"
    return cut + f"\n… cut at {budget} tokens: {hint}", kept


def _bigger(budget: int) -> int:
    return min(MAX_BUDGET, budget * 4)


def _short(text: str, most: int) -> str:
    return text if len(text) <= most else text[: most - 3] + "..."


def render_text(table: Table, budget: int = BUDGET, more: More | None = None) -> str:
    """The compact text form of `table` (see Note [Answer size])."""
    return fit(table, budget, more)[0]


def to_result(table: Table, budget: int | None = None, more: More | None = None) -> CallToolResult:
    """The tool result for `table`: compact text within `budget` tokens, plus
    the structured `Answer` holding the rows the text shows."""
    text, kept = fit(table, budget or BUDGET, more)
    rows = [dict(zip(table.columns, r, strict=True)) for r in kept]
    answer = Answer(
        title=table.title,
        columns=list(table.columns),
        rows=rows,
        total=table.total,
        truncated=len(rows) < table.total,
        notes=list(table.notes),
    )
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=answer.model_dump(mode="json"),
    )
