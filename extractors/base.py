"""The sink protocol every extractor writes to (see Note [Extractor contract])."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol


class Sink(Protocol):
    def add(self, relation: str, *values: str | int) -> None:
        """Record one row of `relation`."""

    def warn(self, file: str, line: int, message: str) -> None:
        """Report a non-fatal problem at file:line (counted in `status`)."""

    def progress(self, advance: int = 1, total: int | None = None, what: str = "") -> None:
        """Advance this layer's progress bar (set `total` once when known)."""


# An extractor layer: reads the tree at `root`, writes rows to `sink`.
ExtractFn = Callable[[Path, Sink], None]
