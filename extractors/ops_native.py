"""The C++ parameter types of an op's native kernel, as torchgen declares it.

Note [Native kernel parameters]: torchgen's generated registration code calls
a dispatch-table kernel `at::native::<kernel>(...)` with the op's arguments,
typed as torchgen/api/native.py declares them: the schema's arguments in
order, out= arguments last, each mapped to a C++ type (`Tensor` ->
`const Tensor&`, `Tensor(a!)` -> `Tensor&`, `int[]` -> `IntArrayRef`,
`SymInt` -> `int64_t`, or `SymInt` for a kernel whose name contains
`_symint`, `Scalar` -> `const Scalar&`, `T?` -> `optional<T>`, ...). The
types are spelled as overload ids spell them (Note [Overload ids] in
extractors/cpp/names.py), so rules/link.dl can pick, among the overloads
of a kernel name (the five `at::native::where`), the one whose parameters
match: `where.self`'s kernel is `where(const Tensor&, const Tensor&, const
Tensor&)`. tests/test_ops_native.py checks this mapping against torchgen's
own NativeSignature for every dispatch entry of the tree.

Example:
    >>> native_param_types("cumsum.out(Tensor self, int dim, *, ScalarType? dtype=None, Tensor(a!) out) -> Tensor(a!)")
    ('const Tensor&', 'int64_t', 'optional<ScalarType>', 'Tensor&')
"""

from __future__ import annotations

import functools
import re

from extractors.cpp.names import normalize_type
from extractors.ops_yaml import split_top

_BASE = {
    "int": "int64_t", "float": "double", "bool": "bool", "str": "string_view", "Scalar": "Scalar",
    "SymInt": "int64_t", "Tensor": "Tensor", "Dimname": "Dimname", "ScalarType": "ScalarType",
    "Layout": "Layout", "Device": "Device", "MemoryFormat": "MemoryFormat", "QScheme": "QScheme",
    "Generator": "Generator", "Storage": "Storage", "Stream": "Stream", "DeviceIndex": "DeviceIndex",
    "Any": "IValue", "GraphModule": "GraphModule", "DimVector": "DimVector",
}
_LIST = {  # element type -> the list type torchgen uses
    "int": "IntArrayRef", "SymInt": "IntArrayRef", "Tensor": "TensorList", "Dimname": "DimnameList",
    "Tensor?": "const List<optional<Tensor>>&",
}
_TYPE_RE = re.compile(r"^(?P<base>\w+)(?P<ann>\([^)]*\))?(?P<opt1>\?)?(?P<list>\[\d*\])?(?P<opt2>\?)?$")


def _arg_type(text: str, symint: bool, const_mutable: bool = False) -> tuple[str, bool]:
    """(C++ type, is an out= / mutable argument) of schema type `text`."""
    m = _TYPE_RE.match(text)
    if m is None:
        return text, False
    base, mutable = m["base"], "!" in (m["ann"] or "")
    elem_opt, lst, opt = bool(m["opt1"]), m["list"], bool(m["opt2"])
    if symint and base == "SymInt":
        scalar, list_t = "SymInt", "SymIntArrayRef"
    else:
        scalar, list_t = _BASE.get(base, base), _LIST.get(base + ("?" if elem_opt else ""))
    if lst:
        if base == "bool" and lst != "[]":
            t = f"array<bool,{lst[1:-1]}>"
        else:
            t = list_t or f"ArrayRef<{_elem(scalar, elem_opt)}>"
        if opt:
            t = {"IntArrayRef": "OptionalIntArrayRef", "SymIntArrayRef": "OptionalSymIntArrayRef"}.get(t, f"optional<{t}>")
        return t, mutable
    if base == "Tensor":
        t = "optional<Tensor>" if elem_opt else "Tensor"
        return (f"{t}&" if mutable and not const_mutable else f"const {t}&"), mutable
    if base == "Scalar":
        return ("const optional<Scalar>&" if elem_opt else "const Scalar&"), mutable
    return (f"optional<{scalar}>" if elem_opt else scalar), mutable


def _elem(scalar: str, opt: bool) -> str:
    return f"optional<{scalar}>" if opt else scalar


@functools.lru_cache(maxsize=1 << 15)  # as Signature.parse (Note [Schema strings parsed once])
def native_param_types(func: str, symint: bool = False, const_mutable: bool = False) -> tuple[str, ...]:
    """The normalized C++ parameter types of the native kernel of schema
    `func` (Note [Native kernel parameters]); `symint` for a `_symint` kernel,
    `const_mutable` for an entry with `use_const_ref_for_mutable_tensors: True`."""
    params = func[func.index("(") + 1: func.rindex("->")].strip()
    params = params[: params.rindex(")")]
    outs, rest, kw = [], [], False
    for p in split_top(params):
        p = p.strip()
        if p == "*":
            kw = True
            continue
        if not p:
            continue
        t, mutable = _arg_type(p.split("=", 1)[0].rsplit(None, 1)[0].replace(" ", ""), symint, const_mutable)
        (outs if kw and mutable else rest).append(normalize_type(t))
    return tuple(rest + outs)
