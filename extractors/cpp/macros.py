"""Expand a file's own function-like macros that define PyTorch constructs.

Note [Local macro expansion]: files such as UnaryOps.cpp define kernels
through local macros:

    #define CREATE_UNARY_TORCH_IMPL_FUNC(func_out, func_stub)          \\
    TORCH_IMPL_FUNC(func_out) (const Tensor& self, const Tensor& result) { \\
      func_stub(device_type(), *this);                                  \\
    }
    CREATE_UNARY_TORCH_IMPL_FUNC(acos_out, acos_stub)

A function-like `#define` of the same file whose body uses TORCH_IMPL_FUNC /
TORCH_META_FUNC* / TORCH_PRECOMPUTE_META_FUNC* / REGISTER_*DISPATCH, or pastes
tokens (`##`) into something with a body (`foreach_tensor_##op##_cuda(...) {`),
is expanded at each use outside #define lines (parameters substituted, `##` pasted), on the
use's line, with the use's newlines kept after it, so every later line number
is unchanged and the expanded definition sits at the line of the use.

Example:
    >>> expand_local_macros(b"#define M(x) TORCH_IMPL_FUNC(x) () { f(); }\\nM(a_out)\\n")
    b'#define M(x) TORCH_IMPL_FUNC(x) () { f(); }\\nTORCH_IMPL_FUNC(a_out) () { f(); }\\n'
"""

from __future__ import annotations

import bisect
import re

_KEYWORDS = re.compile(
    rb"\b(?:TORCH_IMPL_FUNC|TORCH_META_FUNC2?|TORCH_PRECOMPUTE_META_FUNC2?|REGISTER_\w*DISPATCH)\s*\("
)
_DEFINE_RE = re.compile(
    rb"^[ \t]*#[ \t]*define[ \t]+(\w+)\(([^)]*)\)((?:[^\n]*\\\n)*[^\n]*)", re.M
)
_PASTE_RE = re.compile(rb"\s*##\s*")


def define_spans(src: bytes) -> list[tuple[int, int]]:
    """(start, end) of every #define directive, continuation lines included."""
    return [(m.start(), m.end()) for m in re.finditer(rb"^[ \t]*#[ \t]*define\b(?:[^\n]*\\\n)*[^\n]*", src, re.M)]


def balanced_args(text: bytes, open_at: int) -> tuple[list[bytes], int] | None:
    """Top-level arguments of the call whose `(` is at `open_at`, and the end offset."""
    depth, args, start = 0, [], open_at + 1
    for i in range(open_at, min(len(text), open_at + 8000)):
        c = text[i]
        if c in (40, 91, 123):  # ( [ {
            depth += 1
        elif c in (41, 93, 125):  # ) ] }
            depth -= 1
            if depth == 0:
                args.append(text[start:i].strip())
                return args, i + 1
        elif c == 44 and depth == 1:  # ,
            args.append(text[start:i].strip())
            start = i + 1
    return None


def _macros(src: bytes) -> dict[bytes, tuple[list[bytes], bytes]]:
    """The file's function-like macros worth expanding: those defining
    constructs or pasting names into bodies, and those using such macros."""
    every = {}
    for m in _DEFINE_RE.finditer(src):
        params = [p.strip() for p in m.group(2).split(b",") if p.strip()]
        every[m.group(1)] = (params, m.group(3).replace(b"\\\n", b" ").strip())
    chosen = {n for n, (_p, body) in every.items() if _KEYWORDS.search(body) or (b"##" in body and b"{" in body)}
    for _ in range(3):
        if not chosen:
            break
        uses = re.compile(rb"\b(?:" + b"|".join(re.escape(n) for n in chosen) + rb")\s*\(")
        more = {n for n, (_p, body) in every.items() if n not in chosen and uses.search(body)}
        if not more:
            break
        chosen |= more
    return {n: every[n] for n in chosen}


def _substitute(params: list[bytes], body: bytes, args: list[bytes]) -> bytes:
    if params:
        table = dict(zip(params, args, strict=False))
        alt = b"|".join(re.escape(p) for p in params)
        # `#param` stringifies the argument; `a ## b` pastes
        body = re.sub(rb"(?<!#)#\s*(" + alt + rb")\b", lambda m: b'"' + table.get(m.group(1), b"") + b'"', body)
        pat = re.compile(rb"\b(" + alt + rb")\b")
        body = pat.sub(lambda m: table.get(m.group(1), b""), body)
    return _PASTE_RE.sub(b"", body)


def expand_local_macros(src: bytes) -> bytes:
    """`src` with its construct-defining local macros expanded (Note [Local macro expansion])."""
    if b"#" not in src or not (_KEYWORDS.search(src) or b"##" in src):
        return src
    for _ in range(2):  # a macro using another local macro
        macros = _macros(src)
        if not macros:
            return src
        use_re = re.compile(rb"\b(" + b"|".join(re.escape(n) for n in macros) + rb")[ \t]*\(")
        defines = define_spans(src)
        starts = [d[0] for d in defines]
        out, pos, changed = [], 0, False
        for m in use_re.finditer(src):
            i = bisect.bisect_right(starts, m.start()) - 1
            if m.start() < pos or (i >= 0 and m.start() < defines[i][1]):
                continue
            got = balanced_args(src, m.end() - 1)
            if got is None:
                continue
            args, end = got
            params, body = macros[m.group(1)]
            newlines = src.count(b"\n", m.start(), end)
            out.append(src[pos : m.start()])
            expansion = _substitute(params, body, args).replace(b"\n", b" ")
            out.append(expansion + b"\n" * newlines)
            pos, changed = end, True
        if not changed:
            return src
        out.append(src[pos:])
        expanded = b"".join(out)
        if expanded.count(b"\n") != src.count(b"\n"):  # never shift a line number
            return src
        src = expanded
    return src
