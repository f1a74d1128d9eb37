"""`torchtalk report coverage`: backend coverage per dispatch key (rules/coverage.dl)."""

from __future__ import annotations

import argparse
from pathlib import Path

NAME = "report"
HELP = "batch reports: `report coverage` (which ops each backend implements, what is missing)"


def register(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="report", metavar="REPORT")
    c = sub.add_parser("coverage", help="per dispatch key: ops with a kernel, share by tag, missing ops")
    where = c.add_mutually_exclusive_group()
    where.add_argument("--source", type=Path, help="the indexed PyTorch tree (default: the fetched one)")
    where.add_argument("--db", type=Path, help="the fact DB file")
    c.add_argument("--keys", help="comma-separated dispatch keys (default: every backend key)")
    c.add_argument("--tag", help="only ops with this tag (core, pointwise, ...; '*' = every op; "
                   "default: every op, or core with --backend-package)")
    c.add_argument("--format", default=None, help="md (default), html, csv or json")
    c.add_argument("-o", "--output", type=Path, help="write to FILE (atomically) instead of stdout")
    c.add_argument("--backend-package", type=Path, metavar="DIR",
                   help="an out-of-tree backend package (or file): report the ops its Python op table "
                   "maps and its C++ TORCH_LIBRARY_IMPL(aten, KEY, m) blocks register, what KEY inherits "
                   "through composite kernels or runs through its m.fallback, and what is missing")
    c.add_argument("--rules", type=Path, help="coverage rules to use instead of rules/coverage.dl")
    c.add_argument("--json", action="store_true", help="same as --format json")
    c.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(_parser=p)


def run(args: argparse.Namespace) -> int:
    if getattr(args, "report", None) != "coverage":
        args._parser.print_help()
        return 2
    import sys

    from torchtalk import api
    from torchtalk.reports.model import Format

    fmt = Format.JSON if args.json else Format.parse(args.format or _format_of(args.output))
    keys = tuple(k.strip() for k in args.keys.split(",") if k.strip()) if args.keys else None
    if args.output is not None:
        _check_writable(args.output)
    with _progress(quiet=args.quiet or not sys.stderr.isatty()) as step:
        report = api.coverage(
            source=args.source, db=args.db, keys=keys, tag=args.tag,
            backend_package=args.backend_package, rules=args.rules, progress=step,
        )
        step("rendering " + fmt.value)
        text = api.render_coverage(report, fmt.value)
    if args.output is None:
        sys.stdout.write(text)
    else:
        _write_atomic(args.output, text)
        print(f"wrote {args.output} ({fmt.value}, {len(report.keys)} keys, {report.total} ops)", file=sys.stderr)
    return 0


def _format_of(path: Path | None) -> str:
    """The format named by an output file's suffix (`-o cov.html`), else md."""
    if path is not None and path.suffix.lstrip(".").lower() in ("md", "html", "csv", "json"):
        return path.suffix.lstrip(".").lower()
    return "md"


def _check_writable(path: Path) -> None:
    """Fail before the work, not after it, when the output cannot be written."""
    import os

    from torchtalk.errors import InputError

    parent = path.resolve().parent
    if not parent.is_dir():
        raise InputError(f"cannot write {path}: directory {parent} does not exist")
    if path.is_dir():
        raise InputError(f"cannot write {path}: it is a directory")
    if not os.access(parent, os.W_OK):
        raise InputError(f"cannot write {path}: directory {parent} is not writable")


def _write_atomic(path: Path, text: str) -> None:
    import os

    from torchtalk.atomic import atomic_open
    from torchtalk.errors import InputError

    try:
        with atomic_open(path.resolve(), "w") as fh:
            fh.write(text)
            umask = os.umask(0)
            os.umask(umask)
            os.fchmod(fh.fileno(), 0o666 & ~umask)  # mkstemp makes 0600; a report is an ordinary file
    except OSError as err:
        raise InputError(f"cannot write {path}: {err.strerror}") from None


class _progress:
    """A rich progress bar on stderr over the report's steps (a no-op when quiet)."""

    STEPS = 4  # facts, rules, report, rendering

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet

    def __enter__(self):
        if self.quiet:
            return lambda _msg: None
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self.bar = Progress(TextColumn("coverage: {task.description}"), BarColumn(), TimeElapsedColumn(),
                            console=Console(stderr=True), transient=True)
        self.bar.start()
        task = self.bar.add_task("opening the fact DB", total=self.STEPS)

        def step(msg: str) -> None:
            self.bar.update(task, description=msg, advance=1)

        return step

    def __exit__(self, *exc) -> None:
        if not self.quiet:
            self.bar.stop()
