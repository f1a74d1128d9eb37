"""Writing files and directories so that readers see the old one or the new
one, never a half-written one: build under a temporary name beside the
target, then `os.replace`.

Temporary files are named `.tmp-*` in the target's directory (cache cleanups
skip that prefix: another process may be writing it).

Example:
    >>> with atomic_open(Path("out/report.md"), "w") as fh:  # doctest: +SKIP
    ...     fh.write(text)
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any


@contextlib.contextmanager
def atomic_open(path: Path, mode: str = "wb") -> Iterator[IO[Any]]:
    """A file opened for writing (`mode` "wb" or "w", UTF-8) that replaces
    `path` when the block ends without an exception; on one, the temporary
    file is removed and nothing changes. Creates the parent directory."""
    with atomic_path(path) as tmp, open(tmp, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as fh:
        yield fh


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A temporary path beside `path`, for a writer that opens the file
    itself (DuckDB's COPY): it replaces `path` when the block ends without
    an exception; on one, it is removed and nothing changes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def replace_dir(new: Path, final: Path, aside: list[Path] | None = None) -> None:
    """Put directory `new` in place of `final` (which may not exist): the old
    one is renamed aside first and removed after, so `final` is never a mix.
    `aside`: a list that takes the old one, for the caller to remove later."""
    trash = final.with_name(f".{final.name}.old-{os.getpid()}")
    if final.exists():
        os.replace(final, trash)
    os.replace(new, final)
    if aside is not None and trash.exists():
        aside.append(trash)
    else:
        shutil.rmtree(trash, ignore_errors=True)


def link_tree(src: Path, dst: Path) -> None:
    """Copy the files below `src` into `dst`, hard-linking where possible (an
    empty `dst` when `src` does not exist)."""
    if not src.is_dir():
        dst.mkdir(parents=True, exist_ok=True)
        return
    shutil.copytree(src, dst, copy_function=_link_or_copy, dirs_exist_ok=True)


def _link_or_copy(s: str, d: str) -> None:
    try:
        os.link(s, d)
    except OSError:
        shutil.copy2(s, d)
