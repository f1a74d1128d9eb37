"""YAML loading with line numbers, and the bits of JIT schema syntax the ops layer needs.

Note [YAML line numbers]: every mapping loaded by `load_yaml` is a `LineMap`:
a dict that also knows the 1-based line of the mapping (`.line`) and of each
of its keys (`.key_lines`). Parsing uses PyYAML's C parser (CSafeLoader);
only the construction of mappings runs in Python.

Example:
    >>> data = load_yaml(Path("native_functions.yaml"), "aten/src/ATen/native/native_functions.yaml")
    >>> data[0].line, data[0].key_lines["func"]
    (7, 7)
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

import yaml

from torchtalk.connmemo import remember
from torchtalk.errors import ExtractError, ParseError, SrcLoc, did_you_mean, source_line


class LineMap(dict):
    """A YAML mapping that remembers where it and each of its keys start."""

    line: int = 0
    key_lines: dict

    def key_line(self, key: object) -> int:
        return self.key_lines.get(key, self.line)


class _LineLoader(yaml.CSafeLoader):
    """CSafeLoader whose mappings are LineMaps (see Note [YAML line numbers])."""


def _construct_map(loader: _LineLoader, node: yaml.MappingNode) -> Iterator[LineMap]:
    data = LineMap()
    data.line = node.start_mark.line + 1
    data.key_lines = {}
    yield data
    data.update(loader.construct_mapping(node))
    for key_node, _ in node.value:
        data.key_lines[loader.construct_object(key_node)] = key_node.start_mark.line + 1


_LineLoader.add_constructor("tag:yaml.org,2002:map", _construct_map)


# Note [One parse of a YAML per process]: native_functions.yaml is read by the
# ops layer, the cpp layer's ATen names, and the python and tests layers' op
# model: four parses of 0.15-0.25 s each in one `torchtalk index` after an
# edit of it. `load_yaml` keeps the last parse of each path with the digest
# of the text it parsed, and returns it while the file's text is the same
# (read and hashed again on every call: ~3 ms). Callers must not modify
# what it returns (none does: they read entries into their own structures).
# The last KEPT_PARSES paths only: a process indexing many trees (a test
# run) holds no more than one indexing a tree.
_PARSED: dict[str, tuple[bytes, object]] = {}
KEPT_PARSES = 4


def load_yaml(path: Path, rel: str) -> object:
    """Load `path` (shown as `rel` in errors) keeping line numbers; malformed YAML
    raises ParseError at file:line:col. The same object for the same text
    (Note [One parse of a YAML per process]): read it, never modify it."""
    import hashlib

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ExtractError(f"cannot read {rel}: {exc.strerror}") from None
    key, digest = str(path), hashlib.sha1(text.encode("utf-8", "surrogatepass")).digest()
    hit = _PARSED.get(key)
    if hit is not None and hit[0] == digest:
        return hit[1]
    try:
        data = yaml.load(text, Loader=_LineLoader)
        remember(_PARSED, key, (digest, data), KEPT_PARSES)
        return data
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (0, 0)
        what = exc.problem or exc.context or "malformed YAML"
        raise ParseError(
            f"malformed YAML: {what}", SrcLoc(rel, line, col), source_line=source_line(path, line)
        ) from None
    except yaml.YAMLError as exc:
        raise ParseError(f"malformed YAML: {exc}", SrcLoc(rel, 1)) from None


def entries(data: object, rel: str, what: str) -> list[LineMap]:
    """The top-level list of mappings of a YAML file, or ExtractError."""
    if data is None:
        return []
    if not isinstance(data, list):
        raise ExtractError(f"expected a list of {what} entries at top level", SrcLoc(rel, 1))
    for item in data:
        if not isinstance(item, LineMap):
            raise ExtractError(f"expected a mapping ({what} entry), got {item!r}", SrcLoc(rel, 1))
    return data


def reject_unknown(entry: LineMap, known: frozenset[str], rel: str, owner: str) -> None:
    """Strict ingestion (STYLE 5): any key of `entry` not in `known` is an error."""
    for key in entry:
        if key not in known:
            hint = did_you_mean(str(key), known)
            raise ExtractError(
                f"unknown key {key!r} in entry {owner!r}", SrcLoc(rel, entry.key_line(key)), hint=hint
            )


# ------------------------------------------------------------------ schemas


@dataclass(frozen=True)
class Signature:
    """The parts of a JIT schema string the ops layer uses.

    Example:
        >>> s = Signature.parse("add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)")
        >>> s.op, s.name, s.overload, s.is_out_fn, s.args
        ('add.out', 'add', 'out', True, ('self', 'other', 'alpha', 'out'))
    """

    op: str
    name: str  # base name without namespace and overload ("add_", "__iand__")
    overload: str
    args: tuple[str, ...]
    returns: tuple[str, ...]  # names of named returns ("values", "indices")
    is_out_fn: bool

    @staticmethod
    def parse(text: str) -> Signature:
        """The Signature of schema string `text` (ValueError if it is none);
        the same object for the same text (Note [Schema strings parsed once])."""
        return _parse_signature(text)


# Note [Schema strings parsed once]: native_functions.yaml's ~2,600 schema
# strings are parsed by the ops layer (twice: an entry's rows, the view_copy
# codegen rows), the cpp layer's ATen names and the python and tests
# layers' op model: 11,000 parses, 0.3 s profiled, in each update after an
# edit of the YAML, where all but the edited entry's are strings parsed
# before. A Signature is a frozen function of its string, so parses are
# kept by string for the process (bounded: a test run indexes many trees).
@functools.lru_cache(maxsize=1 << 15)
def _parse_signature(text: str) -> Signature:
    m = re.fullmatch(r"\s*([\w:.]+)\s*\((.*)\)\s*->\s*(.*?)\s*", text, re.S)
    if not m:
        raise ValueError(f"not a function schema: {text!r}")
    full, params, rets = m.groups()
    op = full[len("aten::"):] if full.startswith("aten::") else full
    qual, _, overload = op.partition(".")
    name = qual.rsplit("::", 1)[-1]
    args, is_out, kw = [], False, False
    for param in split_top(params):
        if param == "*":
            kw = True
            continue
        args.append(_param_name(param))
        if kw and re.search(r"\([a-z0-9|]*!", param.split()[0]):
            is_out = True
    ret_items = split_top(rets[1:-1]) if rets.startswith("(") else [rets]
    returns = tuple(r.split()[1] for r in ret_items if len(r.split()) == 2)
    return Signature(op, name, overload, tuple(args), returns, is_out)


def _param_name(param: str) -> str:
    decl = param.split("=", 1)[0].split()
    if len(decl) < 2:
        raise ValueError(f"argument without a name: {param!r}")
    return decl[-1]


def split_top(text: str) -> list[str]:
    """Split at commas not nested in (), [] or {}: "int[2] k=[1, 1], int d" -> 2 parts."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    tail = text[start:].strip()
    if tail:
        parts.append(tail)
    return parts


def parse_member(cls: type[Enum], text: object, loc: SrcLoc, what: str):
    """`cls(text)`, or an error at `loc` naming the unknown `what` (with a
    did-you-mean over the members)."""
    try:
        return cls(text)
    except ValueError:
        hint = did_you_mean(str(text), [k.value for k in cls])
        raise ExtractError(f"unknown {what} {text!r}", loc, hint=hint) from None


def entry_signature(entry: LineMap, key: str, rel: str, missing: str) -> Signature:
    """The Signature of the schema string under `key` of a YAML entry; an
    ExtractError `missing` at the entry, or naming the key's line when it
    does not parse."""
    text = entry.get(key)
    if not isinstance(text, str):
        raise ExtractError(missing, SrcLoc(rel, entry.line))
    try:
        return Signature.parse(text)
    except ValueError as exc:
        raise ExtractError(f"cannot parse {key}: {exc}", SrcLoc(rel, entry.key_line(key))) from None
