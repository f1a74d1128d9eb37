"""Small helpers on C++ names as written in source.

Example:
    >>> name_parts("::at::native::foo<float, 2>")
    ('at', 'native', 'foo')
"""

from __future__ import annotations

import functools
import re

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


def is_macro_name(name: str) -> bool:
    """ALL_CAPS names (`TORCH_CHECK`, `AT_DISPATCH_ALL_TYPES`) are macros by PyTorch convention."""
    return bool(_MACRO_RE.match(name))


def strip_templates(text: str) -> str:
    """`text` without template argument lists: `Foo<T, 2>::bar<U>` -> `Foo::bar`."""
    if "<" not in text:
        return text
    head, sep, op = text.partition("operator")
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
