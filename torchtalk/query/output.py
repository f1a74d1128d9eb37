"""Render a query `Result` sized for reading: a capped table, or JSON.

Note [Sized answers]: the CLI and the MCP server show an answer the same way
(issue 15, deliverable 5):
  - rows that differ only in their `op` column (the overloads of an op, the
    ops of a Python API) are one row whose `op` names them all
    (`upsample_bilinear2d.vec, .out`): `group_overloads`;
  - an answer with a `step` or `kind` column is cut into sections, in
    SECTION_ORDER (a trace opens with the op's schema and its kernel per
    key, then stubs, CUDA kernels, Python APIs, derivatives, decompositions,
    tests), each section capped so every section shows: `sections`;
  - at most a cap of lines (CLI_ROWS in the CLI; a token budget in MCP,
    torchtalk/mcp/answer.py), then how many more and how to see them
    (`--all` in the CLI, the exact call in MCP).
`--json` is `{columns, rows, total, notes}`: the relation's rows (not
grouped), capped the same way unless `--all`.

Note [Rows per section]: a table shows a few rows of each section but needs
the count of every section and which columns hold one value, so it read
every row (affected(cpublas::gemm): 91,250, whose sort and hand-over to
Python cost more than the relation; MCP read at most 20,000 and counted the
rest as "not read"). Where the rows need no grouping (`section_column`: no
`op` column, at most one section column), the reader asks the engine for
the first N of each section (Fetch.per: N = the CLI's cap, or the most rows
any MCP budget shows) with each section's count and the columns of one
value over all rows (Page.counts, Page.one_value), and `size` sizes from
those: the same text, from the rows shown. An answer with overloads to
group is still read whole.

Example:
    >>> print(to_json(result))
    {"columns": ["fn", "callee", ...], "rows": [{"fn": "at::native::matmul", ...}], "total": 3, "notes": []}
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass

CLI_ROWS = 40  # lines of a table without --all / --limit
SECTION_COLUMNS = ("step", "kind")
# Steps in this order when they occur (a trace's, or a trace_module's when
# it has a "class" step), others after them in first-seen order; other
# section columns (`kind`) keep the rows' order (by rank and depth).
SECTION_ORDER = (
    "op", "kernel", "unlinked", "delegate", "stub", "stub_impl", "ufunc_loop", "cuda_kernel",
    "python", "derivative", "decomp", "tag", "test",
)
MODULE_ORDER = ("class", "base", "method", "calls", "op", "op_guess")
# a trace_node's (it has a "function" or a "stub" step and no "kernel")
NODE_ORDER = ("function", "stub", "host", "caller", "op", "python", "callee", "stub_impl", "ufunc_loop", "cuda_kernel")


@dataclass(frozen=True)
class Section:
    """The rows of one value of the section column (None: an unsectioned answer)."""

    value: object
    rows: tuple[tuple, ...]
    count: int = -1  # the section's rows, read or not (Note [Rows per section]); -1: len(rows)

    def __post_init__(self) -> None:
        if self.count < 0:
            object.__setattr__(self, "count", len(self.rows))


@dataclass(frozen=True)
class Sized:
    """An answer grouped and sectioned (Note [Sized answers]).

    `rows`: the grouped rows in section order; `total`: the relation's rows
    (before grouping and capping); `constant`: the columns with one value.
    """

    columns: tuple[str, ...]
    rows: tuple[tuple, ...]
    total: int
    section: str | None
    constant: dict
    fetched: int  # rows of the relation grouped into `rows` (== total when all were)
    counts: dict | None = None  # rows per section value, of the first rows read per section

    @property
    def count(self) -> int:
        """The answer's rows after grouping, read or not."""
        return self.total if self.counts is not None else len(self.rows)

    def sections(self) -> list[Section]:
        """The rows per value of the section column, in SECTION_ORDER."""
        counts = self.counts or {}
        if self.section is None:
            return [Section(None, self.rows, counts.get(None, -1))]
        i = self.columns.index(self.section)
        groups: dict = {}
        for r in self.rows:
            groups.setdefault(r[i], []).append(r)
        return [Section(v, tuple(rs), counts.get(v, -1)) for v, rs in groups.items()]


def join_ops(ops: list[str], most: int = 4) -> str:
    """Op ids as one cell, an op's further overloads as `.overload`:
    `upsample_bilinear2d.vec, .out; upsample_nearest2d.vec` (at most `most`
    op names, then "+N ops").

    Example:
        >>> join_ops(["add.Tensor", "add.out", "sub.Tensor"])
        'add.Tensor, .out; sub.Tensor'
    """
    by_name: dict[str, list[str]] = {}
    for o in ops:
        by_name.setdefault(o.split(".", 1)[0], []).append(o)
    parts = []
    for name, ids in list(by_name.items())[:most]:
        rest = [i[len(name):] or ".default" for i in ids[1:]]
        parts.append(", ".join([ids[0], *rest]))
    extra = len(by_name) - most
    return "; ".join(parts) + (f"; +{extra} ops" if extra > 0 else "")


def group_overloads(columns: tuple[str, ...], rows) -> tuple[tuple, ...]:
    """Rows equal but for their `op` column, merged into one (first-seen
    order) whose `op` is `join_ops` of theirs; rows unchanged without an
    `op` column or with one op only."""
    if "op" not in columns or len(columns) < 2:
        return tuple(rows)
    i = columns.index("op")
    merged: dict[tuple, list[str]] = {}
    for r in rows:
        merged.setdefault(r[:i] + r[i + 1:], []).append(r[i])
    if len(merged) == len(rows):
        return tuple(rows)
    joined: dict[tuple, str] = {}  # many rows share their ops (a trace's tests: every overload's)

    def cell(ops: list[str]) -> str:
        if len(ops) == 1:
            return ops[0]
        k = tuple(ops)
        text = joined.get(k)
        if text is None:
            text = joined[k] = join_ops(ops)
        return text

    return tuple(key[:i] + (cell(ops),) + key[i:] for key, ops in merged.items())


def constant_columns(columns: tuple[str, ...], rows) -> dict:
    """Columns with one value on every row (said once, not per row); file and
    line are never constant here."""
    if len(rows) < 2:
        return {}
    return {c: rows[0][i] for i, c in enumerate(columns)
            if c not in ("file", "line") and len({r[i] for r in rows}) == 1}


def size(columns: tuple[str, ...], rows, total: int, counts: dict | None = None,
         one_value: frozenset[int] | None = None) -> Sized:
    """`rows` (of `total`) grouped by overload and put in section order;
    with `counts` and `one_value`, `rows` are the first of each section
    (Note [Rows per section])."""
    fetched = len(rows)
    rows = group_overloads(tuple(columns), rows)
    if counts is not None:
        const = _one_valued(tuple(columns), rows, total, one_value or frozenset())
        fetched = total
    else:
        const = constant_columns(tuple(columns), rows)
    # a ranked search keeps its order, best first; a ranked walk answer (with
    # a depth: impact, affected) keeps its kind sections, each in rank order
    # (Note [Chain ranking] in rules/ranking.dl)
    section = None if "rank" in columns and "depth" not in columns else next(
        (c for c in SECTION_COLUMNS if c in columns and c not in const), None)
    if section == "step":  # a trace's or trace_module's steps in SECTION_ORDER; kinds as they come (by depth)
        i = columns.index(section)
        first: dict = {}
        for r in rows:
            first.setdefault(r[i], len(first))
        order = (MODULE_ORDER if "class" in first else NODE_ORDER if {"function", "caller", "callee"} & first.keys()
                 else SECTION_ORDER)
        rank = {v: order.index(v) if v in order else len(order) for v in first}
        rows = tuple(sorted(rows, key=lambda r: (rank[r[i]], first[r[i]])))
    return Sized(tuple(columns), tuple(rows), total, section, const, fetched, counts)


def _one_valued(columns: tuple[str, ...], rows, total: int, one_value: frozenset[int]) -> dict:
    """`constant_columns` of an answer whose first rows per section were
    read: the engine said which of the relation's columns hold one value;
    a column after them (the chain) holds one only if every row was read."""
    if total < 2 or not rows:
        return {}
    width = max(one_value, default=-1) + 1
    return {c: rows[0][i] for i, c in enumerate(columns)
            if c not in ("file", "line") and (i in one_value or (
                i >= width and len(rows) == total and len({r[i] for r in rows}) == 1))}


def section_column(columns: tuple[str, ...]) -> int | None | bool:
    """The index of the column an answer of `columns` may be cut into
    sections by (None: it is not cut), or False when its rows can only be
    sized once all are read: an `op` column (overloads grouped) or two
    section columns (Note [Rows per section])."""
    if "op" in columns or sum(c in columns for c in SECTION_COLUMNS) > 1:
        return False
    if "rank" in columns and "depth" not in columns:
        return None
    return next((columns.index(c) for c in SECTION_COLUMNS if c in columns), None)


def section_caps(sizes: list[int], lines: int) -> list[int]:
    """How many rows of each section to show in about `lines` lines, a cut
    section taking one more line for its "… N more": a section that fits its
    share keeps all its rows, the others share what is left, at least 1 row
    each.

    Example:
        >>> section_caps([1, 72, 300], 20)
        [1, 8, 8]
    """
    caps = [0] * len(sizes)
    left = lines
    todo = sorted(range(len(sizes)), key=lambda k: sizes[k])
    while todo:
        share = max(2, left // len(todo))
        if sizes[todo[0]] <= share:
            k = todo.pop(0)
            caps[k] = sizes[k]
            left -= sizes[k]
            continue
        for k in todo:
            caps[k] = share - 1
        break
    return caps


# ---------------------------------------------------------------- JSON


def to_json(result, cap: int | None = None) -> str:
    """`{columns, rows, total, notes}`: at most `cap` rows of the relation (all
    when None), each an object keyed by column (`file` and `line` included
    where the row has evidence, `explain` with --explain); `total` counts them
    all; a note says how many more and how to see them."""
    records = result.records()
    if getattr(result, "explanations", None):
        for rec, tree in zip(records, result.explanations, strict=False):
            rec["explain"] = tree
    notes = list(result.notes)
    if cap is not None and len(records) > cap:
        records = records[:cap]
    if len(records) < result.total:
        notes.append(f"{len(records)} of {result.total} rows; --all for all")
    return json.dumps({"columns": list(result.columns), "rows": records, "total": result.total,
                       "notes": notes}, indent=1)


# ---------------------------------------------------------------- tables


def _cells(columns, row, skip=frozenset()) -> list[str]:
    out = []
    for c, v in zip(columns, row, strict=True):
        if c in skip or (c == "line" and "file" in columns):
            continue
        if c == "file" and "line" in columns:
            line = row[columns.index("line")]
            out.append(f"{v}:{line}" if v else "")
        else:
            out.append(str(v))
    return out


def headers(columns, skip=frozenset()) -> list[str]:
    """The table's column headings: `file` and `line` as one `file:line`."""
    return [("file:line" if c == "file" and "line" in columns else c)
            for c in columns if c not in skip and not (c == "line" and "file" in columns)]


def shown_indices(columns: tuple[str, ...], rows, kept) -> list[int]:
    """The indices in `rows` of the rows `kept` (shown rows, as `size` left
    them); every index when a kept row is a group of overloads, which is
    no row of `rows` (Note [Chains for the rows read] in torchtalk/query/run.py)."""
    at = {tuple(r): i for i, r in enumerate(rows)}
    found = [at.get(tuple(r)) for r in kept]
    return list(range(len(rows))) if None in found else found


def table_rows(columns: tuple[str, ...], rows, cap: int | None) -> list[int]:
    """The indices of the rows a table of `rows` (all of the relation's, or
    the first of each section: a Page with its counts) shows in about `cap`
    lines: `chains_for` of the CLI's table."""
    sized = size(tuple(columns), rows, getattr(rows, "total", len(rows)), getattr(rows, "counts", None),
                 getattr(rows, "one_value", None))
    kept = [r for sec, n in shown(sized, cap) for r in sec.rows[:n]]
    return shown_indices(columns, rows, kept)


def shown(sized: Sized, cap: int | None) -> list[tuple[Section, int]]:
    """(section, rows to show) for at most about `cap` lines (None: all)."""
    secs = sized.sections()
    if cap is None or sized.count <= cap:
        return [(s, s.count) for s in secs]
    if sized.section is None:
        return [(secs[0], cap)]
    # a section's heading takes a line
    return list(zip(secs, section_caps([s.count for s in secs], cap - len(secs)), strict=True))


def _cell(value, most: int = 160) -> str:
    text = "" if value is None else str(value)
    return text if len(text) <= most else text[: most - 3] + "..."


def format_row(columns, row, skip=frozenset(), most: int = 160) -> str:
    """One row as `a  b  file:line` (evidence last; columns in `skip` and
    empty cells left out; cells cut at `most` characters).

    Example:
        >>> format_row(("fn", "callee", "file", "line"), ("f", "g", "a.cpp", 3))
        'f  g  a.cpp:3'
    """
    values = {c: v for c, v in zip(columns, row, strict=True) if c not in skip}
    file, line = values.pop("file", None), values.pop("line", None)
    parts = [_cell(v, most) for v in values.values() if v not in (None, "")]
    if file:
        parts.append(f"{file}:{line}" if line else str(file))
    return "  ".join(parts)


def render_lines(title: str, sized: Sized, cap: int | None, *, more=None, rest: str = "",
                 most: int = 160) -> tuple[list[str], list[tuple]]:
    """The compact text of an answer in about `cap` lines of rows (None: all),
    and the rows it shows (Note [Sized answers]).

    `more(column, value)` says how to see the rest of a cut section; `rest`
    how to see the rest of an unsectioned answer.

    Example (a trace cut to 2 rows a section):
        trace(conv2d): 1,064 rows (op=conv2d)
          step op: 1
            conv2d  conv2d(Tensor input, ...) -> Tensor  aten/src/ATen/native/native_functions.yaml:1703
          step kernel: 1
            ...
    """
    n = sized.total
    head = f"{title}: {n:,} row{'s' if n != 1 else ''}" if n else f"{title}: no results"
    if sized.count < n and sized.count and _grouped_all(sized):
        head += f", {sized.count:,} after grouping overloads"
    said = [f"{c}={_cell(v, most)}" for c, v in sized.constant.items() if v not in (None, "")]
    if said:
        head += f" ({', '.join(said)})"
    skip = frozenset(sized.constant)
    lines, kept = [head], []
    for sec, k in shown(sized, cap):
        pad = "  "
        if sized.section is not None:
            lines.append(f"  {sized.section} {sec.value}: {sec.count:,}")
            pad = "    "
            skip_here = skip | {sized.section}
        else:
            skip_here = skip
        lines += [pad + format_row(sized.columns, r, skip_here, most) for r in sec.rows[:k]]
        kept += sec.rows[:k]
        if k < sec.count:
            what = f" {sec.value}" if sized.section is not None else ""
            how = more(sized.section, sec.value) if (more and sized.section is not None) else rest
            lines.append(f"{pad}… {sec.count - k:,} more{what}" + (f": {how}" if how else ""))
    if not _grouped_all(sized):  # more rows than were read: a larger budget would not show them
        lines.append(f"… {n - sized.fetched:,} more rows not read (narrow the question)")
    return lines, kept


def _grouped_all(sized: Sized) -> bool:
    """Every row of the relation was fetched (and grouped)."""
    return sized.fetched == sized.total


def print_table(result, file=None, cap: int | None = CLI_ROWS, text: str | None = None, err=None) -> None:
    """Print the answer sized for reading (Note [Sized answers]): at most
    about `cap` lines of rows (None: all) as compact text when `file` (default
    stdout) is a terminal, tab-separated rows otherwise; notes, what was left
    out and how to see it on `err` (default stderr); explanations last.
    `text`: the query, for "how to see more"."""
    file = file or sys.stdout
    err = err or sys.stderr
    for note in result.notes:
        print(f"note: {note}", file=err)
    sized = sized_result(result)
    plan = shown(sized, cap)
    if file.isatty():
        def more(col, value):
            return f'torchtalk query "{text[:-1]}, {col}={value})" --all' if text else "--all"
        lines, _ = render_lines(text or result.name, sized, cap, more=more, rest="--all")
        print("\n".join(lines), file=file)
    else:
        print("\t".join(headers(sized.columns)), file=file)
        for sec, n in plan:
            for row in sec.rows[:n]:
                print("\t".join(_cells(sized.columns, row)), file=file)
            if n < sec.count:
                what = f" {sized.section} {sec.value}" if sized.section else ""
                print(f"… {sec.count - n} more{what}", file=err)
    _footer(result, sized, sum(n for _, n in plan), err)
    for i, tree in enumerate(getattr(result, "explanations", ()) or ()):
        print(f"\nwhy row {i + 1}:", file=file)
        print(render_explanation(tree), file=file)


def sized_result(result) -> Sized:
    """`size` of a query's result, with its counts when the first rows of
    each section were read (Note [Rows per section])."""
    return size(result.columns, result.rows, result.total, getattr(result, "counts", None),
                getattr(result, "one_value", None))


def _footer(result, sized: Sized, n_shown: int, err) -> None:
    total, grouped = result.total, sized.count
    complete = sized.fetched == total
    if total == 0:
        print(f"no rows ({result.name})", file=err)
        return
    merged = f" ({total} before grouping overloads)" if complete and grouped < total else ""
    if n_shown < grouped:
        print(f"({n_shown} of {grouped} rows{merged}; --all for all)", file=err)
    elif not complete:
        print(f"({len(result.rows)} of {total} rows; --all for all)", file=err)
    elif merged:
        print(f"({grouped} rows{merged})", file=err)


def render_explanation(tree: dict, indent: int = 0) -> str:
    """An explanation tree (torchtalk.query.explain) as indented text."""
    pad = "  " * indent
    where = f"  [{tree['where']}]" if tree.get("where") else ""
    rule = f"  by {tree['rule']}" if tree.get("rule") else ""
    lines = [f"{pad}{tree['fact']}{where}{rule}"]
    for child in tree.get("because", ()):
        lines.append(render_explanation(child, indent + 1))
    return "\n".join(lines)
