"""Reading the real tree in tests: where a line is."""

from __future__ import annotations

from pathlib import Path


def line_of(tree: Path, path: str, needle: str) -> int:
    """The 1-based line of the first line of `path` that starts with `needle`."""
    for i, line in enumerate((tree / path).read_text().splitlines(), 1):
        if line.startswith(needle):
            return i
    raise AssertionError(f"{needle!r} not in {path}")
