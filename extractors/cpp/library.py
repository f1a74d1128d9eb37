"""TORCH_LIBRARY operators as op ids (Note [Library ops]).

Note [Library ops]: `m.def("ns::name.overload(...) -> ...")` in a
TORCH_LIBRARY(ns, m) block declares operator `ns::name.overload`; the
`lib_def` and `lib_impl` rows keep the namespace and the name apart, as
written. `lib_op` names the op id of each (Note [Fact identifiers]: an aten
op has no prefix, another namespace keeps its own), so rules join a
registration of any namespace with `op` (rules/dispatch.dl's lib_kernel).
A tree without native_functions.yaml, an extension indexed beside its torch
(torchtalk/extension.py), has no other ops: there the `m.def`s of every
namespace but aten are the `op` relation (`torchvision::nms`), named with
their namespace so that no `at::X` call of the same base name joins them.

Example:
    >>> op_id("torchvision", "nms"), op_id("aten", "add.Tensor")
    ('torchvision::nms', 'add.Tensor')
"""

from __future__ import annotations


def op_id(ns: str, name: str) -> str:
    """The op id of operator `name` ("x" or "x.overload") of namespace `ns`."""
    return name if ns in ("aten", "") else f"{ns}::{name}"


def lib_op_rows(rows: dict[str, list[tuple]]) -> list[tuple[str, str, str]]:
    """(ns, name, op) for every operator a lib_def or lib_impl row names, sorted."""
    seen = {(r[0], r[1]) for r in rows.get("lib_def", ())} | {(r[0], r[1]) for r in rows.get("lib_impl", ())}
    return sorted((ns, name, op_id(ns, name)) for ns, name in seen)


def library_op_rows(rows: dict[str, list[tuple]]) -> list[tuple[str, str, str, str, str, int]]:
    """`op` rows (op, name, overload, schema, file, line) of the `m.def`s of
    every namespace but aten (Note [Library ops]), sorted and distinct."""
    out = set()
    for ns, name, schema, file, line in rows.get("lib_def", ()):
        if ns in ("aten", ""):
            continue
        base, _, overload = name.partition(".")
        out.add((op_id(ns, name), op_id(ns, base), overload, schema, file, line))
    return sorted(out)
