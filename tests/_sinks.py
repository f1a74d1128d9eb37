"""A Sink (extractors.base) that keeps every row, for extractor tests."""

from __future__ import annotations

import collections


class ListSink:
    def __init__(self) -> None:
        self.rows: dict[str, list[tuple]] = collections.defaultdict(list)
        self.warnings: list[tuple] = []

    def add(self, relation, *values):
        self.rows[relation].append(values)

    def warn(self, file, line, message):
        self.warnings.append((file, line, message))

    def progress(self, advance=1, total=None, what=""):
        pass
