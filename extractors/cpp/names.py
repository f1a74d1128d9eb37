"""Small helpers on C++ names as written in source.

Example:
    >>> name_parts("::at::native::foo<float, 2>")
    ('at', 'native', 'foo')
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

ANON = "(anonymous)"  # an anonymous namespace as the compiler prints it; ids use anon_ns(file)
_MACRO_RE = re.compile(r"^[A-Z][A-Z0-9_]*[A-Z0-9]$")
_WS_RE = re.compile(r"\s+")
_TEMPLATE_KW = re.compile(r"\btemplate\b\s*")  # `x.template f<T>()`, `a::template b<T>`
_PART_RE = re.compile(r"^(?:~?[A-Za-z_]\w*|operator.+)$")


# Note [Internal linkage ids]: a function of internal linkage belongs to the
# file that defines it, and its id says which. An anonymous namespace is the
# scope part `(anonymous:FILE)` and a `static` function at namespace scope (not
# already inside an anonymous namespace) gets the part `(static:FILE)` before
# its name, FILE being the defining file relative to the tree root:
#   at::native::(anonymous:aten/src/ATen/native/SoftMax.cpp)::host_softmax
#   at::native::(static:aten/src/ATen/native/Foo.cpp)::helper
# A header's internal functions belong to the header (one node however many
# files include it). Both tiers name them so (extractors/cpp/scan.py,
# extractors/clang/visit.py Namer), and so do the generated ufunc kernels
# (extractors/ops_ufunc.py). Lookup treats these parts as transparent
# (extractors/cpp/resolve.py LookupKey); the query resolver matches a name
# typed with `(anonymous)`, or without the part, against them (torchtalk/query/resolve.py).


def anon_ns(file: str) -> str:
    """The id part of an anonymous namespace in `file` (Note [Internal linkage ids])."""
    return f"(anonymous:{file})"


def static_scope(file: str) -> str:
    """The id part before a `static` function's name in `file` (Note [Internal linkage ids])."""
    return f"(static:{file})"


def is_internal_part(part: str) -> bool:
    """Is `part` (one `::` component of an id) an internal-linkage part?

    >>> is_internal_part("(anonymous:a.cpp)"), is_internal_part("native")
    (True, False)
    """
    return part.startswith(("(anonymous", "(static:"))


@functools.lru_cache(maxsize=1 << 14)
def is_macro_name(name: str) -> bool:
    """ALL_CAPS names (`TORCH_CHECK`, `AT_DISPATCH_ALL_TYPES`) are macros by PyTorch convention."""
    return bool(_MACRO_RE.match(name))


_OPERATOR = re.compile(r"\boperator\b")


def is_operator(name: str) -> bool:
    """Is `name` an operator function's (`operator+`, `operator()`, `operator bool`),
    not an identifier that starts with the word (`operator_1_norm`)?

    Example:
        >>> is_operator("operator()"), is_operator("operator_1_norm")
        (True, False)
    """
    return _OPERATOR.match(name) is not None


def strip_templates(text: str) -> str:
    """`text` without template argument lists: `Foo<T, 2>::bar<U>` -> `Foo::bar`."""
    if "<" not in text:
        return text
    m = _OPERATOR.search(text)
    head, sep, op = (text[: m.start()], "operator", text[m.end():]) if m else (text, "", "")
    out: list[str] = []
    depth = 0
    for ch in head:
        if ch == "<":
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif not depth:
            out.append(ch)
    return "".join(out) + sep + op


@functools.lru_cache(maxsize=1 << 14)
def member_name(text: str) -> str:
    """The name of a member access's field: `template f<T>` -> `f`."""
    return strip_templates(_TEMPLATE_KW.sub("", text)).strip()


@functools.lru_cache(maxsize=1 << 16)
def name_parts(text: str) -> tuple[str, ...]:
    """The `::`-separated parts of a (possibly templated, global-qualified)
    name, or () when `text` is not a plain name (a lambda call, a cast...)."""
    text = _WS_RE.sub("", strip_templates(_TEMPLATE_KW.sub("", text)))
    parts = tuple(p for p in text.split("::") if p)
    if not parts or not all(_PART_RE.match(p) for p in parts):
        return ()
    return parts


# Note [Overload ids]: C++ overloads are distinct nodes. When the definitions
# of one qualified name have more than one parameter list, each definition's
# id is that name followed by its parameter types, normalized so that the
# fast tier (tree-sitter, from the definition's text) and the compiler tier
# (libclang, from the declaration's types) spell them alike:
#   at::native::where(const Tensor&, const Tensor&, const Tensor&)
#   at::native::where(const Tensor&)
#   c10::TensorImpl::size(int64_t)
# Each type is as written, without parameter name, default value, namespace
# or class qualifiers (`at::`, `std::`, `c10::`: the suffix holds no `::`),
# attributes and `__restrict__`, top-level `const` (`const int64_t n` is an
# `int64_t` parameter), and spaces but between two words; an array parameter
# is a pointer; `(void)` is `()`. A method and its const twin (`data()` and
# `data() const`, alike but for `this`) share one id, as no call in the fast
# tier could tell them apart. A name
# defined with one parameter list keeps its plain id (most functions: ids stay
# short, and a name typed by a user is still an id); adding an overload renames
# the existing definition. Definitions of one name with the same parameter
# list (an #ifdef'd pair, a header's CPU_CAPABILITY copies) share their id.
# A name without its suffix (`at::native::where`) names every overload: lookup
# (extractors/cpp/resolve.py), kernel linking (rules/link.dl kernel_pick) and
# the query resolver (torchtalk/query/resolve.py) strip it with `split_sig`.
# Which names are overloaded is decided over the whole tree by
# extractors/cpp/overloads.py, for both tiers.

_TOKEN_RE = re.compile(r"[A-Za-z_]\w*|\d\w*|::|\.\.\.|&&|\S")
_DROP = frozenset({"typename", "struct", "class", "enum", "__restrict__", "__restrict", "restrict", "register"})
_ATTR_MACRO_RE = re.compile(r"^(?:[A-Z][A-Z0-9]*_[A-Z0-9_]+|__\w+__)$")


def _strip_qualifiers(toks: list[str]) -> list[str]:
    """Tokens without `X::` / `X<...>::` qualifiers and a leading `::`."""
    out: list[str] = []
    for t in toks:
        if t != "::":
            out.append(t)
            continue
        if out and out[-1] == ">":  # X<...>:: : drop the argument list and X
            depth = 0
            while out:
                u = out.pop()
                depth += u == ">"
                depth -= u == "<"
                if depth == 0:
                    break
            if out and re.match(r"[A-Za-z_]", out[-1]):
                out.pop()
        elif out and re.match(r"[A-Za-z_]", out[-1]) and out[-1] != "const":
            out.pop()
    return out


def _depth0(toks: list[str]) -> list[int]:
    """The indexes of `toks` outside any <...>, (...) or [...]."""
    depth, out = 0, []
    for i, t in enumerate(toks):
        if t in "<([":
            depth += 1
        elif t in ">)]" and depth:
            depth -= 1
        elif depth == 0:
            out.append(i)
    return out


@functools.lru_cache(maxsize=1 << 14)
def normalize_type(text: str) -> str:
    """A parameter type as Note [Overload ids] spells it.

    >>> normalize_type("const at::Tensor &"), normalize_type("std::optional<c10::ScalarType>")
    ('const Tensor&', 'optional<ScalarType>')
    >>> normalize_type("const int64_t"), normalize_type("float *__restrict"), normalize_type("int[3]")
    ('int64_t', 'float*', 'int*')
    """
    raw = _TOKEN_RE.findall(text)  # an attribute macro is dropped, a macro call kept: GEMM_ARGTYPES(Half)
    toks = [t for i, t in enumerate(raw) if t not in _DROP and not (
        _ATTR_MACRO_RE.match(t) and raw[i + 1: i + 2] != ["("])]
    toks = _strip_qualifiers(toks)
    if toks and toks[-1] == "]" and "[" in toks:  # an array parameter is a pointer
        toks = toks[: len(toks) - 1 - toks[::-1].index("[")] + ["*"]
    while len(toks) > 1 and toks[-1] == "const":  # `T* const`: top-level
        toks.pop()
    refs = [i for i in _depth0(toks) if toks[i] in ("*", "&", "&&")]
    if refs and refs[0] > 0 and toks[refs[0] - 1] == "const" and toks[0] != "const":
        toks.pop(refs[0] - 1)  # east const: `Tensor const&` is `const Tensor&`
        toks.insert(0, "const")
    elif not refs and toks[:1] == ["const"] and len(toks) > 1:
        toks.pop(0)  # `const int64_t n`: a top-level const
    out = ""
    for t in toks:
        if out and (out[-1].isalnum() or out[-1] == "_") and (t[0].isalnum() or t[0] == "_"):
            out += " "
        out += t
    return out


def sig_text(types: Iterable[str]) -> str:
    """The id suffix of a parameter list (Note [Overload ids]).

    >>> sig_text(["const at::Tensor &", "std::optional<int64_t>"]), sig_text(["void"])
    ('(const Tensor&, optional<int64_t>)', '()')
    """
    norm = [normalize_type(t) for t in types]
    if norm == ["void"]:
        norm = []
    return "(" + ", ".join(norm) + ")"


def split_sig(fn: str) -> tuple[str, str]:
    """(id without its overload suffix, the suffix or "") (Note [Overload ids]).

    >>> split_sig("at::native::where(const Tensor&)"), split_sig("a::operator()(int)")
    (('at::native::where', '(const Tensor&)'), ('a::operator()', '(int)'))
    >>> split_sig("ns::(anonymous:a.cpp)::f")
    ('ns::(anonymous:a.cpp)::f', '')
    """
    if not fn.endswith(")"):
        return fn, ""
    head, sep, last = fn.rpartition("::")
    start = len("operator()") if last.startswith("operator()") else 0
    i = last.find("(", start)
    if i <= 0:
        return fn, ""
    return head + sep + last[:i], last[i:]
