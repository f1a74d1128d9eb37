"""What every engine shares: the `Engine` protocol and how an output comes
back (`Fetch`, `Page`). The engines import this module, and the package
imports the engines, so neither imports the other (no cycle).
"""

from __future__ import annotations

import functools
import heapq
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from torchtalk.datalog import ast as A
from torchtalk.datalog.analysis.strata import needed_relations
from torchtalk.datalog.ast import Program
from torchtalk.errors import InputError

Rows = list[tuple]


@dataclass(frozen=True)
class Fetch:
    """How an output comes back: its distinct rows whose column i is one of
    `keep`'s values for i, sorted by the columns `order` (`~i`: number
    column i, largest first), at most `limit`.
    With `write_to` (a file path) the rows go to that file instead, in
    Soufflé's output format (io.write_rows), and the Page holds none: its
    total counts them.
    With `per` = (column i or None, n): the first n rows of each value of
    column i (of all rows, when None) instead of `limit`, and the Page says
    how many rows each value has and which columns hold one value
    (Note [Rows per section])."""

    order: tuple[int, ...]
    keep: tuple[tuple[int, frozenset], ...] = ()
    limit: int | None = None
    write_to: str | None = None
    per: tuple[int | None, int] | None = None


class Page(list):
    """The rows of a fetched output; `total` counts them before the limit.
    A page fetched `per` section also has `counts` (section value -> its
    rows; the key None when unsectioned) and `one_value` (the indices of the
    columns with a single value over all `total` rows)."""

    def __init__(self, rows: Iterable[tuple], total: int | None = None,
                 counts: dict | None = None, one_value: frozenset[int] | None = None) -> None:
        super().__init__(rows)
        self.total = len(self) if total is None else total
        self.counts = counts
        self.one_value = one_value


def sort_key(order: tuple[int, ...]):
    """The key that sorts rows in Fetch.order (`~i`: number column i, largest first)."""
    return _sort_key(tuple(order))


@functools.lru_cache(maxsize=64)
def _sort_key(order: tuple[int, ...]):
    # one lambda per order, its columns written out: 3x faster than a
    # generator over `order` per row (20,000 rows of impact sort in 25 ms)
    items = "".join((f"r[{i}], " if i >= 0 else f"-r[{~i}], ") for i in order)
    return eval(f"lambda r: ({items})")  # noqa: S307 - built from ints only


def fetch_rows(rows: Iterable[tuple], spec: Fetch) -> Page:
    """`spec` applied in Python (for an engine that cannot do it itself).
    A page of a few rows out of many is taken by a bounded heap, not a
    sort of them all (affected(cpublas::gemm): 50 of 91,250 rows)."""
    distinct = rows if isinstance(rows, (set, frozenset)) else set(rows)
    kept = [r for r in distinct if all(r[i] in allowed for i, allowed in spec.keep)] if spec.keep else list(distinct)
    key = sort_key(spec.order)
    if spec.per is not None:
        return per_section(kept, *spec.per, key=key)
    if spec.limit is not None and spec.write_to is None and spec.limit < len(kept) // 4:
        return Page(heapq.nsmallest(max(spec.limit, 0), kept, key=key), len(kept))
    kept.sort(key=key)
    page = Page(kept if spec.limit is None else kept[: spec.limit], len(kept))
    if spec.write_to is None:
        return page
    from torchtalk.datalog.io import write_rows

    write_rows(spec.write_to, page)
    return Page([], len(page))


def per_section(rows: list[tuple], column: int | None, n: int, key=None) -> Page:
    """The first `n` of `rows` per value of `column` (of all of them when
    None), in order (by `key`, or as they come when None: sorted already),
    with the counts and single-valued columns of all."""
    sections: dict = {}
    for r in rows:
        sections.setdefault(None if column is None else r[column], []).append(r)
    counts = {v: len(rs) for v, rs in sections.items()}
    if key is None:
        out = [r for rs in sections.values() for r in rs[:n]]
    else:
        out = sorted((r for rs in sections.values() for r in heapq.nsmallest(n, rs, key=key)), key=key)
    width = len(rows[0]) if rows else 0
    one = frozenset(i for i in range(width) if all(r[i] == rows[0][i] for r in rows))
    return Page(out, len(rows), counts, one)


def needed_for(program: Program, outputs: list[str]) -> frozenset:
    """The relations a run of `outputs` needs, once per program and outputs."""
    return program.cached(("needed", tuple(outputs)), lambda: frozenset(needed_relations(program, outputs)))


def check_row(decl: A.Decl, i: int, row) -> tuple:
    """`row` of relation `decl` (the i-th given) as a tuple, checked against its columns."""
    row = tuple(row)
    if len(row) != decl.arity:
        raise InputError(f"row {i} of '{decl.name}' has {len(row)} values, its .decl has {decl.arity} columns")
    for col, v in zip(decl.columns, row, strict=True):
        want = str if col.type is A.ColType.SYMBOL else int
        if not isinstance(v, want) or isinstance(v, bool):
            raise InputError(f"row {i} of '{decl.name}': column '{col.name}' is a {col.type}, got {v!r}")
    return row


class Engine(Protocol):
    name: str

    def run(
        self,
        program: Program,
        con: Any,
        outputs: list[str],
        facts: dict[str, list[tuple]],
        tables: dict[str, str] | None = None,
        fetch: dict[str, Fetch] | None = None,
    ) -> dict[str, Rows]:
        """Evaluate `outputs` of a checked program over the fact DB `con`."""
