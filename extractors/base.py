"""What every extractor layer implements (see Note [Extractor contract])."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


class Sink(Protocol):
    def add(self, relation: str, *values: str | int) -> None:
        """Record one row of `relation`."""

    def warn(self, file: str, line: int, message: str) -> None:
        """Report a non-fatal problem at file:line (counted in `status`)."""

    def progress(self, advance: int = 1, total: int | None = None, what: str = "") -> None:
        """Advance this layer's progress bar (set `total` once when known)."""


def add_rows(sink: Sink, relation: str, rows) -> None:
    """Record many rows of `relation`: the sink's bulk `add_rows` when it has
    one (the index's LayerSink checks and writes a relation's rows at once),
    else one `add` per row."""
    bulk = getattr(sink, "add_rows", None)
    if bulk is not None:
        bulk(relation, rows)
        return
    for row in rows:
        sink.add(relation, *row)


@dataclass(frozen=True)
class ExtractContext:
    """What a layer gets besides the sink.

    root:      the tree root (for an installed wheel: the dir holding `torch/`
               and `torchgen/`, i.e. site-packages)
    cache_dir: a directory private to this layer and this tree, kept between
               runs (per-file parse caches live here)
    jobs:      worker processes the layer may use
    """

    root: Path
    cache_dir: Path
    jobs: int = 1


class LayerModule(Protocol):
    """An extractor module named in `extractors.layers.LAYERS`."""

    def inputs(self, root: Path) -> Iterable[Path]:
        """Every file the layer reads (absolute); their sizes and mtimes
        fingerprint the layer, so an unchanged tree re-indexes as a no-op."""

    def extract(self, ctx: ExtractContext, sink: Sink) -> None:
        """Write the layer's rows to `sink`."""
