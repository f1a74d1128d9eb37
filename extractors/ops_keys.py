"""Every dispatch key c10 defines: c10/core/DispatchKey.h, read as the
preprocessor would expand it (issue 17).

native_functions.yaml names only the keys torchgen generates kernels for;
`c10::DispatchKey` has them all, including the per-backend functionality keys
that PyTorch spells with two X-macros:

    #define C10_FORALL_BACKEND_COMPONENTS(_, extra) _(CPU, extra) _(CUDA, extra) ...
    #define C10_FORALL_FUNCTIONALITY_KEYS(_) _(Dense, ) _(Sparse, Sparse) ...
    enum class DispatchKey : uint16_t {
      Undefined = 0, ..., Dense, ..., EndOfFunctionalityKeys,
      C10_FORALL_FUNCTIONALITY_KEYS(DEFINE_PER_BACKEND_KEYS)   // CPU, SparseCPU, AutogradPrivateUse1, ...
      EndOfRuntimeBackendKeys = ...,
      Autograd, CompositeImplicitAutograd, ...,
      StartOfAliasKeys = Autograd, EndOfAliasKeys = CompositeExplicitAutogradNonFunctional,
      CPUTensorId = CPU, ...   // synonyms
    };

Note [Dispatch key kinds]: each `dispatch_key_def` row has a kind:
  "backend"        a BackendComponent's dense key (CPU, CUDA, PrivateUse1, Meta);
  "per_backend"    a per-backend instance of a customizable functionality
                   (SparseCPU, QuantizedCUDA, AutogradPrivateUse1), at its
                   backend's line in C10_FORALL_BACKEND_COMPONENTS;
  "functionality"  a key with its own bit (FPGA, Python, Functionalize,
                   AutocastCUDA, and the customizable Dense, Sparse,
                   AutogradFunctionality ...);
  "alias"          an alias key (Autograd, CompositeImplicitAutograd, ...),
                   the enumerators from StartOfAliasKeys to EndOfAliasKeys.
Markers (StartOf*/EndOf*) and synonyms (`CPUTensorId = CPU`, `Undefined = 0`)
are not keys. rules/graph.dl and rules/coverage.dl read the kinds.

Example:
    >>> [r[:4] for r in parse_keys(text, "c10/core/DispatchKey.h") if r[0] == "AutogradPrivateUse1"]
    [('AutogradPrivateUse1', 'per_backend', 'AutogradFunctionality', 'PrivateUse1')]
"""

from __future__ import annotations

import re
from pathlib import Path

from extractors.base import Sink, add_rows
from torchtalk.errors import ExtractError, SrcLoc

# where the header is: a source tree, an installed wheel (site-packages)
HEADERS = ("c10/core/DispatchKey.h", "torch/include/c10/core/DispatchKey.h")

_COMMENT_RE = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_ENTRY_RE = re.compile(r"_\(\s*(\w+)\s*,\s*(\w*)\s*\)")
_ENUM_RE = re.compile(r"enum\s+class\s+DispatchKey\s*:\s*\w+\s*\{")
_DIRECTIVE_RE = re.compile(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", re.M)
_ITEM_RE = re.compile(r"\s*(\w+)\s*(?:=\s*(\w+)|(\([^()]*\)))?\s*")
_MARKER_RE = re.compile(r"(StartOf|EndOf)\w*")


def header(root: Path) -> str | None:
    """DispatchKey.h relative to `root`, or None when the tree has none."""
    return next((h for h in HEADERS if (root / h).is_file()), None)


def extract_keys(root: Path, sink: Sink) -> None:
    """dispatch_key_def rows for the tree at `root`; none when it has no header
    (a yaml-only fixture): then the keys the yaml names are all that is known."""
    rel = header(root)
    if rel is None:
        return
    add_rows(sink, "dispatch_key_def", parse_keys((root / rel).read_text(errors="replace"), rel))


def _blank(m: re.Match) -> str:
    return re.sub(r"[^\n]", " ", m.group(0))


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _macro(text: str, name: str, rel: str) -> list[tuple[str, str, int]]:
    """The `_(A, B)` entries of `#define name(...)`, each with its line."""
    m = re.search(r"#define\s+" + name + r"\s*\([^)]*\)((?:[^\n]*\\\n)*[^\n]*)", text)
    if m is None:
        raise ExtractError(f"no #define {name} in DispatchKey.h", SrcLoc(rel, 1))
    return [(e.group(1), e.group(2), _line(text, m.start(1) + e.start()))
            for e in _ENTRY_RE.finditer(m.group(1))]


def _enum_items(text: str, rel: str) -> list[tuple[str, str, str, int]]:
    """(name, value after `=`, macro arguments, line) of each enumerator of
    DispatchKey; a macro call (`C10_FORALL_FUNCTIONALITY_KEYS(...)`) ends
    without a comma, its expansion brings its own."""
    m = _ENUM_RE.search(text)
    if m is None:
        raise ExtractError("no `enum class DispatchKey` in DispatchKey.h", SrcLoc(rel, 1))
    end = text.index("};", m.end())
    body = _DIRECTIVE_RE.sub(_blank, text[m.end():end])
    items, pos = [], 0
    while True:
        it = _ITEM_RE.match(body, pos)
        if it is None or it.end() == pos:
            break
        line = _line(text, m.end() + it.start(1))
        items.append((it.group(1), it.group(2) or "", it.group(3) or "", line))
        pos = it.end()
        if it.group(3) is None:
            if pos < len(body) and body[pos] != ",":
                break
            pos += 1
    if body[pos:].strip():
        line = _line(text, m.end() + pos + len(body[pos:]) - len(body[pos:].lstrip()))
        raise ExtractError(f"cannot read DispatchKey enumerator {body[pos:].split(',')[0].strip()!r}",
                           SrcLoc(rel, line))
    return items


def parse_keys(text: str, rel: str) -> list[tuple[str, str, str, str, str, int]]:
    """(key, kind, functionality, backend, file, line) for every key of the
    header text (Note [Dispatch key kinds])."""
    text = _COMMENT_RE.sub(_blank, text)
    backends = _macro(text, "C10_FORALL_BACKEND_COMPONENTS", rel)
    functionalities = _macro(text, "C10_FORALL_FUNCTIONALITY_KEYS", rel)
    items = _enum_items(text, rel)
    synonyms = {name: value for name, value, _, _ in items if value}
    order = [name for name, value, args, _ in items if not value and not args]
    first, last = synonyms.get("StartOfAliasKeys"), synonyms.get("EndOfAliasKeys")
    aliases = set(order[order.index(first):order.index(last) + 1]) if first in order and last in order else set()
    rows = []
    for name, value, args, line in items:
        if args and name == "C10_FORALL_FUNCTIONALITY_KEYS":
            rows += _per_backend(backends, functionalities, rel)
        elif not value and not args and not _MARKER_RE.fullmatch(name):
            rows.append((name, "alias" if name in aliases else "functionality", "", "", rel, line))
    return rows


def _per_backend(backends, functionalities, rel: str) -> list[tuple[str, str, str, str, str, int]]:
    """The keys DEFINE_PER_BACKEND_KEYS makes: prefix##backend for every
    customizable functionality and backend component."""
    rows = []
    for func, prefix, _ in functionalities:
        for backend, _, line in backends:
            kind = "backend" if not prefix else "per_backend"
            rows.append((prefix + backend, kind, func, backend, rel, line))
    return rows
