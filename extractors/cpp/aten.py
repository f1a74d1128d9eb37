"""Calls of ATen ops through PyTorch's generated C++ API.

Note [ATen API calls]: `at::mm(...)`, `at::mm_out(...)`, `at::cpu::mm(...)`,
`at::_ops::mm::call(...)` and `tensor.mm(...)` call functions that torchgen
generates at build time, so no definition of them is in the tree and the
call graph has no edge for them. They are recorded as `calls_op(caller, name,
file, line)` with `name` the op's base name ("mm": the `_out`, `_outf` and
`_symint` spellings name the same op; no op of native_functions.yaml ends
in those), and the rules link the name to the op's kernels. Only names of
ops in the tree's native_functions.yaml count; a member call counts when its
receiver is not known to be a non-Tensor class of the tree and the name is a
Tensor method (`variants: method`); it then replaces the "unique method"
guess, which for `t.mm()` would name an unrelated class's `mm`.

Example:
    >>> op_of_call(("at", "_ops", "mm", "call"), names)
    'mm'
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

# namespaces of the generated per-backend / redispatch C++ APIs: at::<ns>::op
BACKEND_NS = frozenset({
    "cpu", "cuda", "meta", "mps", "xpu", "redispatch", "compositeexplicitautograd",
    "compositeimplicitautograd", "compositeexplicitautogradnonfunctional", "compositeimplicitautogradnestedtensor",
})
SUFFIXES = ("_outf", "_out", "_symint")


@dataclass(frozen=True)
class AtenNames:
    """Op base names of native_functions.yaml, and those with a method variant."""

    ops: frozenset[str]
    methods: frozenset[str]

    @property
    def digest(self) -> str:
        return hashlib.sha1("\n".join(sorted(self.ops) + ["--"] + sorted(self.methods)).encode()).hexdigest()


EMPTY = AtenNames(frozenset(), frozenset())


def yaml_path(root: Path) -> Path | None:
    """The tree's native_functions.yaml (None when there is none)."""
    from extractors.ops import find_inputs

    layout = find_inputs(root)
    return root / layout.native if layout else None


def load_names(root: Path, cache_dir: Path | None = None) -> AtenNames:
    """AtenNames of the tree at `root` (EMPTY without native_functions.yaml);
    kept in `cache_dir` by the yaml's size and mtime (parsing it is ~0.4 s of
    an incremental re-index)."""
    path = yaml_path(root)
    if path is None:
        return EMPTY
    if cache_dir is None:
        return _parse_names(root, path)
    from extractors.cpp import cache

    st = path.stat()
    key = (CACHE_VERSION, st.st_size, st.st_mtime_ns)
    hit = cache.read(cache_dir / "aten_names.pkl")
    if isinstance(hit, tuple) and len(hit) == 2 and hit[0] == key:
        return hit[1]
    names = _parse_names(root, path)
    cache.write_atomic(cache_dir / "aten_names.pkl", (key, names))
    return names


CACHE_VERSION = "1"


def _parse_names(root: Path, path: Path) -> AtenNames:
    from extractors.ops_yaml import Signature, entries, load_yaml

    rel = path.relative_to(root).as_posix()
    ops, methods = set(), set()
    for entry in entries(load_yaml(path, rel), rel, "native function"):
        try:
            sig = Signature.parse(str(entry.get("func", "")))
        except ValueError:
            continue
        ops.add(sig.name)
        if "method" in str(entry.get("variants", "function")):
            methods.add(sig.name)
    return AtenNames(frozenset(ops), frozenset(methods))


def base_name(name: str, names: AtenNames) -> str | None:
    """The op base name `name` spells, or None."""
    if name in names.ops:
        return name
    for suffix in SUFFIXES:
        if name.endswith(suffix) and name[: -len(suffix)] in names.ops:
            return name[: -len(suffix)]
    return None


def _ops_struct_op(struct: str, names: AtenNames) -> str | None:
    """`at::_ops::<name>_<overload>` (add_Tensor) -> its op's base name (add)."""
    if struct in names.ops:
        return struct
    cut = struct.rfind("_")
    while cut > 0:
        if struct[:cut] in names.ops:
            return struct[:cut]
        cut = struct.rfind("_", 0, cut)
    return None


def op_of_call(parts: tuple[str, ...], names: AtenNames) -> str | None:
    """The op a qualified call through the generated API names, or None."""
    if len(parts) >= 2 and parts[0] == "at":
        parts = parts[1:]
    elif len(parts) < 3 or parts[0] != "_ops":
        return None
    if len(parts) == 1:
        return base_name(parts[0], names)
    if parts[0] == "_ops" and len(parts) == 3 and parts[2] in ("call", "redispatch"):
        return _ops_struct_op(parts[1], names)
    if len(parts) == 2 and parts[0] in BACKEND_NS:
        return base_name(parts[1], names)
    return None
