"""What every engine shares: the `Engine` protocol and how an output comes
back (`Fetch`, `Page`). The engines import this module, and the package
imports the engines, so neither imports the other (no cycle).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from torchtalk.datalog.ast import Program

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
    return lambda r: tuple(r[i] if i >= 0 else -r[~i] for i in order)


def fetch_rows(rows: Iterable[tuple], spec: Fetch) -> Page:
    """`spec` applied in Python (for an engine that cannot do it itself)."""
    kept = [r for r in set(rows) if all(r[i] in allowed for i, allowed in spec.keep)]
    kept.sort(key=sort_key(spec.order))
    if spec.per is not None:
        return per_section(kept, *spec.per)
    page = Page(kept if spec.limit is None else kept[: spec.limit], len(kept))
    if spec.write_to is None:
        return page
    from torchtalk.datalog.io import write_rows

    write_rows(spec.write_to, page)
    return Page([], len(page))


def per_section(rows: list[tuple], column: int | None, n: int) -> Page:
    """The first `n` of the sorted `rows` per value of `column` (of all of
    them when None), with the counts and single-valued columns of all."""
    counts: dict = {}
    out = []
    for r in rows:
        v = None if column is None else r[column]
        counts[v] = counts.get(v, 0) + 1
        if counts[v] <= n:
            out.append(r)
    width = len(rows[0]) if rows else 0
    one = frozenset(i for i in range(width) if len({r[i] for r in rows}) == 1)
    return Page(out, len(rows), counts, one)


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
