"""Parse the query DSL (grammar.tx, via textX) into a typed `Query`.

Example:
    >>> q = parse_query("impact(cpublas::gemm, depth=3)")
    >>> q.name, q.args[0].text, q.options["depth"].value
    ('impact', 'cpublas::gemm', 3)
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

from torchtalk.errors import ParseError, SrcLoc

GRAMMAR = Path(__file__).with_name("grammar.tx")
QUERY_FILE = "<query>"


@dataclass(frozen=True)
class Value:
    """An argument value: `text` for names and strings, `value` for numbers.

    `quoted` values are taken as typed (never resolved to a definition).
    """

    text: str
    value: str | int
    quoted: bool = False
    col: int = 0

    @property
    def is_number(self) -> bool:
        return isinstance(self.value, int)


@dataclass(frozen=True)
class PathArg:
    """`src -> dst`: the two ends of a path query."""

    src: Value
    dst: Value


@dataclass(frozen=True)
class Query:
    """`name(args..., key=value...)` as typed.

    args:    positional values, in order
    path:    the `a -> b` argument, if any
    options: `key=value` arguments by key
    """

    name: str
    args: tuple[Value, ...] = ()
    path: PathArg | None = None
    options: dict[str, Value] = field(default_factory=dict)
    text: str = ""

    def __str__(self) -> str:
        return self.text or self.name

    def __hash__(self) -> int:
        return hash((self.name, self.args, self.path, tuple(self.options.items())))


@functools.cache
def _metamodel():
    from textx import metamodel_from_file

    from torchtalk.datalog.parser import TEXTX_LOCK

    with TEXTX_LOCK:  # textX builds one metamodel at a time (see TEXTX_LOCK)
        return metamodel_from_file(str(GRAMMAR), autokwd=False, use_regexp_group=False)


def parse_query(text: str) -> Query:
    """Parse one DSL query; a syntax error is a ParseError at its column.

    Example:
        >>> parse_query("paths(softmax_warp_forward -> python)").path.dst.text
        'python'
    """
    from textx.exceptions import TextXSyntaxError

    text = text.strip()
    try:
        model = _metamodel().model_from_str(text)
    except TextXSyntaxError as exc:
        raise ParseError(
            _syntax_message(exc, text),
            SrcLoc(QUERY_FILE, 1, exc.col or 0),
            hint="a query looks like impact(gemm) or paths(kernel -> python)",
            source_line=text,
        ) from None
    return _build(model, text)


def _syntax_message(exc, text: str) -> str:
    col = (exc.col or 1) - 1
    if col >= len(text):
        return "unexpected end of query"
    return f"unexpected {text[col:col + 12].split()[0]!r}" if text[col:].strip() else "unexpected end"


def _build(model, text: str) -> Query:
    args: list[Value] = []
    options: dict[str, Value] = {}
    path: PathArg | None = None
    for arg in model.args:
        kind = type(arg).__name__
        if kind == "Option":
            if arg.key in options:
                raise _dup(text, arg, f"option {arg.key!r} given twice")
            options[arg.key] = _value(arg.value, text)
        elif kind == "Path":
            if path is not None:
                raise _dup(text, arg, "only one `a -> b` argument is allowed")
            path = PathArg(_value(arg.src, text), _value(arg.dst, text))
        else:
            args.append(_value(arg, text))
    return Query(model.name, tuple(args), path, options, text)


def _col(node, text: str) -> int:
    pos = getattr(node, "_tx_position", 0)
    return pos + 1


def _dup(text: str, node, message: str) -> ParseError:
    return ParseError(message, SrcLoc(QUERY_FILE, 1, _col(node, text)), source_line=text)


def _value(node, text: str) -> Value:
    kind = type(node).__name__
    col = _col(node, text)
    if kind == "Num":
        return Value(str(node.value), int(node.value), col=col)
    if kind == "Str":
        raw = node.text[1:-1] if node.text[:1] in "\"'" else node.text
        return Value(raw, raw, quoted=True, col=col)
    return Value(node.text, node.text, col=col)


def value_text(name: str) -> str:
    """`name` as a DSL argument: bare when the grammar reads it as one name (then
    resolved as people type it), else quoted (taken as the exact id). The API
    and the MCP tools build their queries with it, so they accept what the DSL
    accepts. An empty name or one holding a double quote is a QueryError.

    Example:
        >>> value_text("at::native::(anonymous)::host_softmax"), value_text("a b")
        ('at::native::(anonymous)::host_softmax', '"a b"')
    """
    from torchtalk.errors import QueryError

    n = (name or "").strip()
    if not n or '"' in n:
        raise QueryError(f"not a name: {n[:60]!r}", hint="e.g. 'torch.matmul', 'add.Tensor', 'cpublas::gemm'")
    return n if _name_re().fullmatch(n) else f'"{n}"'


@functools.cache
def _name_re() -> re.Pattern:
    """The grammar's `Name` regex, read off grammar.tx (one definition; a
    regex, unlike the textX parser, may be used from several threads)."""
    m = re.search(r"^Name: text=/(.*)/;$", GRAMMAR.read_text(), re.M)
    if m is None:
        raise AssertionError(f"{GRAMMAR} has no `Name: text=/.../;` rule")
    return re.compile(m.group(1))
