"""Length-preserving source clean-up before tree-sitter parses a file.

Note [Blanking preserves offsets]: every rewrite here replaces bytes by spaces
(newlines kept), so byte offsets and line numbers of the cleaned text are those
of the original file. Tree-sitter then parses macro-heavy PyTorch code without
the ERROR nodes that attribute macros (`TORCH_API`, `C10_HOST_DEVICE`,
`GPU_LAMBDA`, `__global__`, `C10_LAUNCH_BOUNDS_1(...)`) and CUDA launch
configurations (`<<<grid, block>>>`) cause.

Example:
    >>> clean(b"__global__ void k() { k<<<1, 2>>>(x); }").text
    b'           void k() { k           (x); }'
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

# Attribute-like macros that expand to nothing a parser needs.
_ATTR_MACROS = (
    rb"[A-Z][A-Z0-9_]*_API|C10_HOST_DEVICE|C10_DEVICE|C10_HOST|GPU_LAMBDA|"
    rb"CUTLASS_HOST_DEVICE|CUTLASS_DEVICE|C10_ALWAYS_INLINE|C10_NOINLINE|"
    rb"C10_ALWAYS_INLINE_UNLESS_MOBILE|C10_EXPORT|C10_IMPORT|C10_UNUSED|C10_NODISCARD|"
    rb"C10_HIDDEN|C10_HOST_CONSTEXPR_EXCEPT_WIN_CUDA|C10_CONSTEXPR_EXCEPT_WIN_CUDA|"
    rb"RESTRICT|__restrict__|__restrict|__global__|__device__|__host__|__forceinline__|"
    rb"__inline__|__noinline__|__MATH_FUNCTIONS_DECL__|C10_DEPRECATED|__ubsan_ignore_\w+__|"
    rb"HANDLE_TH_ERRORS|END_HANDLE_TH_ERRORS_PYBIND|END_HANDLE_TH_ERRORS"
)
_PAREN = rb"\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)"
_ATTR_CALL_MACROS = (
    rb"C10_LAUNCH_BOUNDS_\d|__launch_bounds__|END_HANDLE_TH_ERRORS_RET|"
    rb"C10_DEPRECATED_MESSAGE|C10_DIAGNOSTIC_PUSH_AND_IGNORED_IF_DEFINED|"
    rb"C10_CLANG_DIAGNOSTIC_IGNORE|C10_CLANG_DIAGNOSTIC_PUSH|C10_CLANG_DIAGNOSTIC_POP|"
    rb"C10_DIAGNOSTIC_POP|__declspec|__attribute__|__align__|alignas"
)
_LAUNCH = rb"<<<(?:[^<>;]|<[^<>;]*>)*?>>>"
# What clean blanks: the macros (not inside a longer name), then the launch
# configurations. _BLANK_RE is this pattern, led by literals (_literal_first).
BLANK_PATTERN = (
    rb"(?<![\w])(?=[A-Z_a])(?:(?:" + _ATTR_CALL_MACROS + rb")\s*" + _PAREN + rb"|(?:" + _ATTR_MACROS + rb")\b)"
    rb"|" + _LAUNCH
)


def _literal_first() -> bytes:
    r"""BLANK_PATTERN as a branch per first character, each led by that
    literal (Note [Literal-first patterns]): `C(?<!\wC)(?:...)` holds the
    macros that start with `C`, in BLANK_PATTERN's order (those taking
    arguments, then `[A-Z][A-Z0-9_]*_API`, then the others), and its
    lookbehind is BLANK_PATTERN's `(?<![\w])` at the `C`. First characters
    differ between branches, so at most one can match at an offset and the
    order of the branches does not matter; where BLANK_PATTERN matches, the
    branch of that first character matches the same text."""
    calls = _ATTR_CALL_MACROS.split(b"|")
    generic, *attrs = _ATTR_MACROS.split(b"|")
    assert generic == rb"[A-Z][A-Z0-9_]*_API"
    firsts = sorted({a[:1] for a in calls + attrs} | {bytes([c]) for c in range(ord("A"), ord("Z") + 1)})
    branches = []
    for c in firsts:
        alts = [a[1:] + rb"\s*" + _PAREN for a in calls if a[:1] == c]
        alts += [generic[5:] + rb"\b"] if c.isupper() else []
        alts += [a[1:] + rb"\b" for a in attrs if a[:1] == c]
        branches.append(re.escape(c) + rb"(?<!\w" + re.escape(c) + rb")(?:" + b"|".join(alts) + rb")")
    return b"|".join(branches) + rb"|" + _LAUNCH


_BLANK_RE = re.compile(_literal_first())

# Note [Blank anchors]: each macro BLANK_PATTERN names holds one of these
# (checked below), and a match is a whole name or the start of one (its
# lookbehind); so a match can only start where the run of name characters
# that holds an anchor starts, or at a `<<<`. blank_matches tries _BLANK_RE
# at those offsets only, found with bytes.find, not at each of [A-Z_a<].
_ANCHORS = (b"_API", b"C10_", b"__", b"HANDLE_TH_ERRORS", b"alignas", b"GPU_LAMBDA", b"CUTLASS_", b"RESTRICT")
if not all(any(a in alt for a in _ANCHORS) for alt in (_ATTR_CALL_MACROS + b"|" + _ATTR_MACROS).split(b"|")):
    raise AssertionError("a macro of BLANK_PATTERN holds none of _ANCHORS (Note [Blank anchors])")
_NAME_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")  # bytes `\w`


def _occurrences(text: bytes, word: bytes) -> Iterator[int]:
    """The offsets of every occurrence of `word` in `text`, overlapping ones too."""
    at = text.find(word)
    while at >= 0:
        yield at
        at = text.find(word, at + 1)


def blank_matches(text: bytes) -> Iterator[re.Match[bytes]]:
    """The matches of BLANK_PATTERN in `text`, in order: those finditer
    gives (Note [Blank anchors]).

    >>> [m.group(0) for m in blank_matches(b"TORCH_API int f<<<1, 2>>>(); MY_TORCH_APIX")]
    [b'TORCH_API', b'<<<1, 2>>>']
    """
    starts = set(_occurrences(text, b"<<<"))
    for anchor in _ANCHORS:
        for at in _occurrences(text, anchor):
            while at and text[at - 1] in _NAME_BYTES:
                at -= 1
            starts.add(at)
    pos = 0
    match = _BLANK_RE.match
    for at in sorted(starts):
        if at >= pos and (m := match(text, at)) is not None:
            yield m
            pos = m.end()
# Strings and comments, so that macro scans skip comments.
_COMMENT_RE = re.compile(rb'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|//[^\n]*|/\*.*?\*/', re.S)
# Blanking tables for bytes.translate: every byte a space but newlines (and
# backslashes); `tok.translate(_SPACES)` is `re.sub(rb"[^\n]", b" ", tok)`
# without a match per byte.
_SPACES = bytes(c if c == 10 else 32 for c in range(256))
_SPACES_BS = bytes(c if c in (10, 92) else 32 for c in range(256))


def blanked(tok: bytes) -> bytes:
    """`tok` with every byte a space but newlines (Note [Blanking preserves offsets]).

    >>> blanked(b"a\\\\\\nb")
    b'  \\n '
    """
    return tok.translate(_SPACES)


# Note [Literal-first patterns]: Python's `re` searches fast for a pattern
# that starts with a literal (or with one of a set of literals) and tries a
# match at every offset for one that starts with an assertion (`\b`, `^`, a
# lookbehind): over the 40 MB of the tree that is most of a regex's cost. So
# the patterns run over whole files start with their first literal and check
# what stood before it after it: `inline(?<!\winline)` is `\binline`, and a
# directive's `#` (`^[ \t]*#`) is checked to open its line by `line_start`.
# Each such pattern matches where the one it replaces did, at the same offsets.


def line_start(text: bytes, at: int) -> int:
    """The offset of the line holding offset `at` when only blanks (spaces,
    tabs) precede `at` on it, else -1 (Note [Literal-first patterns]).

    >>> line_start(b"x\\n  #if", 4), line_start(b"x #if", 2)
    (2, -1)
    """
    start = text.rfind(b"\n", 0, at) + 1
    return start if not text[start:at].strip(b" \t") else -1


def directives(pattern: re.Pattern[bytes], text: bytes) -> Iterator[tuple[int, re.Match[bytes]]]:
    """(line start, match) of each match of `pattern` (a directive pattern
    starting at its `#`) whose `#` opens its line: the matches, in order, that
    `^[ \t]*` + `pattern` finds with re.M, that one's start given apart
    (Note [Literal-first patterns]).

    >>> [(a, m.group(0)) for a, m in directives(re.compile(rb"#if"), b"a #if\\n  #if")]
    [(6, b'#if')]
    """
    pos = 0
    search = pattern.search
    while (m := search(text, pos)) is not None:
        start = line_start(text, m.start())
        if start < pos:  # not at a line's start (-1), or on the line the last match ended in
            pos = m.start() + 1
            continue
        yield start, m
        pos = m.end()


def blank_directives(pattern: re.Pattern[bytes], text: bytes) -> bytes:
    """`text` with each directive `directives(pattern, text)` finds blanked
    from its line's start (Note [Blanking preserves offsets])."""
    out: list[bytes] = []
    pos = 0
    for start, m in directives(pattern, text):
        out.append(text[pos:start])
        out.append(text[start : m.end()].translate(_SPACES))
        pos = m.end()
    if not out:
        return text
    out.append(text[pos:])
    return b"".join(out)


@dataclass(frozen=True)
class Cleaned:
    """The cleaned text, where `<<<...>>>` launch configs were, and `__global__` offsets."""

    text: bytes
    launches: tuple[int, ...]  # start offsets of blanked `<<<...>>>`
    globals_: tuple[int, ...]  # offsets of `__global__`


def _blank(m: re.Match[bytes]) -> bytes:
    return m.group(0).translate(_SPACES)


def clean(src: bytes) -> Cleaned:
    """Blank attribute macros and launch configs (see Note [Blanking preserves offsets])."""
    launches: list[int] = []
    globals_: list[int] = []

    out: list[bytes] = []
    pos = 0
    for m in blank_matches(src):
        tok = m.group(0)
        out.append(src[pos : m.start()])
        if tok.startswith(b"<<<"):
            launches.append(m.start())
            out.append(tok.translate(_SPACES_BS))  # keep `\` line continuations of #defines
        else:
            if tok == b"__global__":
                globals_.append(m.start())
            out.append(tok.translate(_SPACES))
        pos = m.end()
    text = b"".join(out) + src[pos:] if out else src
    if b"#" in text:
        text = blank_directives(_EMPTY_IF_RE, text)  # `__global__ void #if .. LAUNCH_BOUNDS #endif name(`
        text = balance_conditionals(text)
    return Cleaned(text, tuple(launches), tuple(globals_))


# An #if group left empty by the blanking (it only held attribute macros).
# Directive patterns start at their `#`: see Note [Literal-first patterns].
_EMPTY_IF_RE = re.compile(
    rb"#[ \t]*if[^\n]*\n(?:[ \t]*\n)*(?:[ \t]*#[ \t]*else[^\n]*\n(?:[ \t]*\n)*)?[ \t]*#[ \t]*endif[^\n]*"
)
_DIRECTIVE_RE = re.compile(rb"#[ \t]*(if|ifdef|ifndef|elif|else|endif)\b[^\n]*")


def _unbalanced(text: bytes) -> bool:
    """Quick check on the raw text: does any #if branch open or close braces?"""
    prev, depth = 0, 0
    for start, m in directives(_DIRECTIVE_RE, text):
        if depth:
            seg = text[prev:start]
            if seg.count(b"{") != seg.count(b"}"):
                return True
        prev = m.end()
        kind = m.group(1)
        depth += 1 if kind.startswith(b"if") else -1 if kind == b"endif" else 0
    return False


def balance_conditionals(text: bytes) -> bytes:
    """Flatten #if groups whose branches do not each balance their braces
    (`#ifdef X if (a) { #else if (b) { #endif`): keep the first branch's code
    and blank the directives and the other branches. Tree-sitter cannot parse a
    brace opened inside a conditional and closed outside it, and would nest
    every later function inside the current one. Balanced groups are kept."""
    if not _unbalanced(text):
        return text
    masked = _COMMENT_RE.sub(_blank, text)
    spans: list[tuple[int, int]] = []
    # group -> (branches [start, delta], directive spans)
    stack: list[tuple[list[list[int]], list[tuple[int, int]]]] = []
    prev = 0
    for start, m in directives(_DIRECTIVE_RE, masked):
        if stack:
            seg = masked[prev:start]
            stack[-1][0][-1][1] += seg.count(b"{") - seg.count(b"}")
        prev = m.end()
        kind = m.group(1)
        if kind.startswith(b"if"):
            stack.append(([[start, 0]], [(start, m.end())]))
        elif kind in (b"elif", b"else"):
            if stack:
                stack[-1][0].append([start, 0])
                stack[-1][1].append((start, m.end()))
        elif stack:
            branches, dspans = stack.pop()
            if any(b[1] for b in branches):
                spans.extend(dspans)
                spans.append((start, m.end()))
                if len(branches) > 1:
                    spans.append((branches[1][0], start))
            if stack:
                stack[-1][0][-1][1] += branches[0][1]
    if not spans:
        return text
    out = bytearray(text)
    for a, b in spans:
        out[a:b] = bytes(out[a:b]).translate(_SPACES)
    return bytes(out)


def strip_comments(src: bytes) -> bytes:
    """`src` with comments blanked (strings kept), for regex scans of macros."""

    def sub(m: re.Match[bytes]) -> bytes:
        tok = m.group(0)
        if tok.startswith((b"//", b"/*")):
            return tok.translate(_SPACES)
        return tok

    return _COMMENT_RE.sub(sub, src)


def mask(src: bytes) -> bytes:
    """`src` with comments and string/char literals blanked (offsets kept)."""
    return _COMMENT_RE.sub(_blank, src)
