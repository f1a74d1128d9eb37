"""Expand a file's own function-like macros, as the preprocessor would.

Note [Local macro expansion]: files such as UnaryOps.cpp define kernels
through local macros:

    #define CREATE_UNARY_TORCH_IMPL_FUNC(func_out, func_stub)          \\
    TORCH_IMPL_FUNC(func_out) (const Tensor& self, const Tensor& result) { \\
      func_stub(device_type(), *this);                                  \\
    }
    CREATE_UNARY_TORCH_IMPL_FUNC(acos_out, acos_stub)

Every function-like `#define` of the same file (these define kernels, as
above, families of functions with pasted names such as
`foreach_tensor_##op##_cuda`, and launch code such as Indexing.cu's
`SMALL_INDEX(scalar_t, index_t, unsigned int, 1, 1, -2)`, whose type
arguments tree-sitter cannot parse as a call) is expanded at each use outside
#define lines (parameters substituted, `##` pasted), on the
use's line, with the use's newlines kept after it, so every later line number
is unchanged and the expanded definition sits at the line of the use.

Note [Macros by position]: a macro is expanded with the definition in force
at its use, as the preprocessor does: a use before the #define, or after its
#undef, is not expanded, and a name defined again (Indexing.cu's SMALL_INDEX
at :1027, :1202, :1500, each #undef'd before the next) expands with the
definition above the use. A macro's body is expanded again for the macros it
uses (TensorTopK.cu's RUN_T -> RUN_DIM -> RUN_MB -> RUN_K), with the
definitions in force at the outer use, up to 8 deep, never re-expanding a
macro inside its own expansion.

Example:
    >>> expand_local_macros(b"#define M(x) TORCH_IMPL_FUNC(x) () { f(); }\\nM(a_out)\\n")
    b'#define M(x) TORCH_IMPL_FUNC(x) () { f(); }\\nTORCH_IMPL_FUNC(a_out) () { f(); }\\n'
"""

from __future__ import annotations

import bisect
import re

from extractors.cpp.preprocess import directives, strip_comments

# Directive patterns start at their `#` (Note [Literal-first patterns]).
_DEFINE_RE = re.compile(rb"#[ \t]*define[ \t]+(\w+)\(([^)]*)\)((?:[^\n]*\\\n)*[^\n]*)")
_DEFINE_SPAN_RE = re.compile(rb"#[ \t]*define\b(?:[^\n]*\\\n)*[^\n]*")
_PASTE_RE = re.compile(rb"\s*##\s*")


def define_spans(src: bytes) -> list[tuple[int, int]]:
    """(start, end) of every #define directive, continuation lines included."""
    return [(start, m.end()) for start, m in directives(_DEFINE_SPAN_RE, src)]


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


_UNDEF_RE = re.compile(rb"#[ \t]*undef[ \t]+(\w+)")


def _macros(src: bytes) -> dict[bytes, list[tuple[int, int, list[bytes], bytes]]]:
    """The file's function-like macros: per name, each definition in file
    order as (start, end of its #undef or of the file, params, body), the
    body joined on one line with comments blanked (Note [Macros by position])."""
    every: dict[bytes, list] = {}
    for start, m in directives(_DEFINE_RE, src):
        params = [p.strip() for p in m.group(2).split(b",") if p.strip()]
        body = strip_comments(m.group(3).replace(b"\\\n", b" ")).replace(b"\n", b" ")
        every.setdefault(m.group(1), []).append([start, len(src), params, body.strip()])
    for start, m in directives(_UNDEF_RE, src):
        for d in reversed(every.get(m.group(1), ())):
            if d[0] < start:
                d[1] = min(d[1], start)
                break
    for defs in every.values():  # a redefinition ends the one before
        for a, b in zip(defs, defs[1:], strict=False):
            a[1] = min(a[1], b[0])
    return {name: [tuple(d) for d in defs] for name, defs in every.items()}


def _in_force(defs: list[tuple], at: int) -> tuple | None:
    """The definition of a macro in force at offset `at`, or None."""
    for d in defs:
        if d[0] < at < d[1]:
            return d
    return None


def _substitute(params: list[bytes], body: bytes, args: list[bytes]) -> bytes:
    if params:
        if params[-1].endswith(b"..."):  # variadic: __VA_ARGS__ (or the named pack)
            named = params[-1][:-3].strip() or b"__VA_ARGS__"
            fixed = len(params) - 1
            args = [*args[:fixed], b", ".join(args[fixed:])]
            params = [*params[:-1], named]
        table = dict(zip(params, args, strict=False))
        alt = b"|".join(re.escape(p) for p in params)
        # `#param` stringifies the argument; `a ## b` pastes
        body = re.sub(rb"(?<!#)#\s*(" + alt + rb")\b",
                      lambda m: b'"' + table.get(m.group(1), b"").replace(b"\n", b" ") + b'"', body)
        used: set[bytes] = set()

        def arg(m: re.Match[bytes]) -> bytes:
            # the first use keeps the argument's newlines (so a multi-line
            # lambda's calls stay on their lines), later uses are joined
            value = table.get(m.group(1), b"")
            if m.group(1) in used:
                return value.replace(b"\n", b" ")
            used.add(m.group(1))
            return value

        body = re.sub(rb"\b(" + alt + rb")\b", arg, body)
    return _PASTE_RE.sub(b"", body)


def expand_local_macros(src: bytes) -> bytes:
    """`src` with its construct-defining local macros expanded (Note [Local macro expansion])."""
    if b"define" not in src or next(directives(_DEFINE_RE, src), None) is None:
        return src
    src = strip_comments(src)  # arguments are joined onto lines: no `//` may swallow the rest
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
        got = _expand_use(src, m, macros, m.start(), frozenset(), 0)
        if got is None:
            continue
        expansion, end = got
        out.append(src[pos : m.start()])
        out.append(expansion)
        pos, changed = end, True
    if not changed:
        return src
    out.append(src[pos:])
    expanded = b"".join(out)
    return expanded if expanded.count(b"\n") == src.count(b"\n") else src  # never shift a line number


_MAX_NESTING = 8
_MAX_GROWTH = 64 * 1024


def _expand_use(text: bytes, m: re.Match, macros: dict, at: int, active: frozenset, depth: int):
    """(expansion, end offset) of the macro use `m` in `text`, with the
    definition in force at file offset `at`, the macros its body uses
    expanded in turn (not those being expanded: the preprocessor does not
    re-expand them); the expansion has the use's newlines, or None."""
    name = m.group(1)
    d = _in_force(macros[name], at)
    if d is None:
        return None
    got = balanced_args(text, m.end() - 1)
    if got is None:
        return None
    args, end = got
    newlines = text.count(b"\n", m.start(), end)
    expansion = _substitute(d[2], d[3], args)
    if depth < _MAX_NESTING:
        expansion = _expand_nested(expansion, macros, at, active | {name}, depth + 1)
    extra = newlines - expansion.count(b"\n")
    if extra < 0:
        expansion, extra = expansion.replace(b"\n", b" "), newlines
    return expansion + b"\n" * extra, end


def _expand_nested(body: bytes, macros: dict, at: int, active: frozenset, depth: int) -> bytes:
    """`body` (a macro's expansion at file offset `at`) with the uses of the
    file's other function-like macros in it expanded."""
    names = [n for n in macros if n not in active and n in body]
    if not names:
        return body
    use_re = re.compile(rb"\b(" + b"|".join(re.escape(n) for n in names) + rb")[ \t]*\(")
    out, pos = [], 0
    for m in use_re.finditer(body):
        if m.start() < pos:
            continue
        got = _expand_use(body, m, macros, at, active, depth)
        if got is None:
            continue
        out.append(body[pos : m.start()])
        out.append(got[0])
        pos = got[1]
    if not out:
        return body
    out.append(body[pos:])
    expanded = b"".join(out)
    return expanded if len(expanded) < _MAX_GROWTH else body
