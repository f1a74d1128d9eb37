"""One error hierarchy for everything a user can get wrong.

Every error a user can cause (a wrong path, a malformed `.dl`, an unknown
symbol, a corrupt database) is a `TorchTalkError`. The CLI prints
`err.render()` on one line (plus the source line and a caret when there is
one) and exits non-zero; it never shows a traceback for these.

Example:
    >>> raise ParseError("unexpected ')'", SrcLoc("rules/impact.dl", 3, 14))
    rules/impact.dl:3:14: parse error: unexpected ')'
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, order=True)
class SrcLoc:
    """A place in a file: 1-based line, 1-based column (0 = unknown)."""

    file: str
    line: int
    col: int = 0

    def __str__(self) -> str:
        if self.col:
            return f"{self.file}:{self.line}:{self.col}"
        return f"{self.file}:{self.line}"


class TorchTalkError(Exception):
    """Root of every error TorchTalk reports to a user.

    `message` says what went wrong; `loc` says where; `hint` suggests a fix
    ("did you mean ..."); `source_line` is the offending line of text, shown
    with a caret under `loc.col`.
    """

    kind = "error"

    def __init__(
        self,
        message: str,
        loc: SrcLoc | None = None,
        *,
        hint: str | None = None,
        source_line: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.loc = loc
        self.hint = hint
        self.source_line = source_line

    def headline(self) -> str:
        """The one-line form: `file:line:col: kind: message (hint)`."""
        text = f"{self.kind}: {self.message}"
        if self.loc is not None:
            text = f"{self.loc}: {text}"
        if self.hint:
            text += f" ({self.hint})"
        return text

    def render(self) -> str:
        """Headline, then the source line and a caret when known."""
        lines = [self.headline()]
        if self.source_line is not None and self.loc is not None:
            src = self.source_line.rstrip("\n")
            lines.append(f"    {src}")
            if self.loc.col:
                lines.append("    " + " " * (self.loc.col - 1) + "^")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.headline()


class InputError(TorchTalkError):
    """Bad input from the user: a missing path, a bad option value."""

    kind = "error"


class ParseError(TorchTalkError):
    """A file (Datalog, YAML, query) that does not parse."""

    kind = "parse error"


class SemanticError(TorchTalkError):
    """A program that parses but is wrong: arity, ungrounded variable, ..."""

    kind = "semantic error"


class SemanticWarning(TorchTalkError):
    """Not an error: something a program most likely did not mean (a
    variable that occurs once, a relation nothing fills), as Soufflé warns.
    Reported, never raised."""

    kind = "warning"


class ExtractError(TorchTalkError):
    """An extractor met input it cannot handle (unknown YAML key, ...)."""

    kind = "extract error"


class StoreError(TorchTalkError):
    """The fact database or cache: corrupt, unwritable, missing."""

    kind = "store error"


class EngineError(TorchTalkError):
    """An engine failed to run a program (souffle missing, SQL failure)."""

    kind = "engine error"


class QueryError(TorchTalkError):
    """A query names something unknown or is malformed."""

    kind = "query error"


class ErrorList(TorchTalkError):
    """Several errors at once, sorted by location and capped.

    Example:
        >>> raise ErrorList([SemanticError("x", SrcLoc("a.dl", 2)), ...])
    """

    CAP = 20

    def __init__(self, errors: Iterable[TorchTalkError]) -> None:
        self.errors = sorted(errors, key=_sort_key)
        first = self.errors[0]
        super().__init__(first.message, first.loc, hint=first.hint)
        self.kind = first.kind

    def render(self) -> str:
        shown = [e.render() for e in self.errors[: self.CAP]]
        extra = len(self.errors) - self.CAP
        if extra > 0:
            shown.append(f"... and {extra} more")
        return "\n".join(shown)

    def headline(self) -> str:
        head = self.errors[0].headline()
        if len(self.errors) > 1:
            head += f" (and {len(self.errors) - 1} more)"
        return head


def _sort_key(err: TorchTalkError) -> tuple[str, int, int]:
    if err.loc is None:
        return ("", 0, 0)
    return (err.loc.file, err.loc.line, err.loc.col)


def source_line(path: str | Path, line: int) -> str | None:
    """The text of `line` (1-based) in `path`, or None if unreadable."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for i, text in enumerate(fh, 1):
                if i == line:
                    return text.rstrip("\n")
    except OSError:
        return None
    return None


def did_you_mean(word: str, candidates: Iterable[str], n: int = 3) -> str | None:
    """A 'did you mean ...?' hint naming the closest candidates, or None."""
    import difflib

    close = difflib.get_close_matches(word, list(candidates), n=n, cutoff=0.6)
    if not close:
        return None
    return "did you mean " + ", ".join(repr(c) for c in close) + "?"
