"""Calls of ATen ops through PyTorch's generated C++ API.

Note [ATen API calls]: `at::mm(...)`, `at::mm_out(...)`, `at::cpu::mm(...)`,
`at::_ops::mm::call(...)`, `tensor.mm(...)` and `a + b` call functions that
torchgen generates at build time, so no definition of them is in the tree and
the call graph has no edge for them. They are recorded as `calls_op(caller,
name, file, line, via)` with `name` the op's base name ("mm": the `_out`,
`_outf` and `_symint` spellings name the same op; no op of
native_functions.yaml ends in those), and the rules link the name to the op's
kernels. Only names of ops in the tree's native_functions.yaml count.

Note [Op call resolution]: how a call is known to be an op call (`via`):
  "qualified"  spelled through the generated API: at::X, at::_ops::X::call,
               at::cpu::X, ..., or an unqualified X called inside namespace at
               where no function of the tree is named X (C++ finds at::X);
  "typed"      a method or operator (Note [Tensor operators]) whose receiver
               or operand is declared at::Tensor / at::TensorBase (or derives
               from one): a parameter or local (`const Tensor& self`), a field,
               an element of a container of Tensors, `auto x = <expr>` of such
               a type, or an expression whose type is known: the declared
               return type of a tree function, a generated op returning one
               Tensor (`at::empty(...)`, `t.mul(2)`; of an op some overload of
               which returns another type, when every overload taking that
               many arguments returns one: `t.max()`, not `t.max(0)`), a
               Tensor operator. On a
               Tensor, a method torchgen generates (`variants: method`, not
               `manual_cpp_binding`) hides TensorBase's own (TensorBase::fill_)
               unless class Tensor brings it in (`using TensorBase::size;`);
  "guess"      a member call on a receiver of unknown type (a template
               parameter, an `auto` of unknown type) whose name is a Tensor method.
A receiver of a known other type (a tree class, std::, a builtin: SymInt's
max, IntArrayRef's data) is never an op call, nor is anything in a file that
cannot see ATen (Note [Who can call ops]: all of c10/). Types are followed
through aliases (Note [Aliases]).

Example:
    >>> op_of_call(("at", "_ops", "mm", "call"), names)
    'mm'
"""

from __future__ import annotations

import functools
import hashlib
import re
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
    """Op base names of native_functions.yaml, those with a method variant, and
    those every overload of which returns one Tensor (`-> Tensor`, `-> Tensor(a!)`:
    the type of `at::X(...)` / `t.X(...)`, Note [Op call resolution])."""

    ops: frozenset[str]
    methods: frozenset[str]
    tensor_returning: frozenset[str] = frozenset()
    generated: frozenset[str] = frozenset()  # methods torchgen writes into class Tensor (not manual_cpp_binding)
    functions: frozenset[str] = frozenset()  # ops with a function variant: torchgen declares at::X (Functions.h)
    # (op, fewest, most C++ arguments, returns one Tensor) of each overload but
    # the out= ones of the ops not in tensor_returning (Note [Op call resolution])
    arity: frozenset[tuple[str, int, int, bool]] = frozenset()
    # (class, base parts) of the classes torchgen generates for structured
    # kernels (Note [Structured kernel classes])
    structured: frozenset[tuple[str, tuple[str, ...]]] = frozenset()

    @functools.cached_property
    def digest(self) -> str:
        """A hash of the names (computed once: part of every precise TU's cache key)."""
        return hashlib.sha1("\n".join(sorted(self.ops) + ["--"] + sorted(self.methods) + ["--"]
                                      + sorted(self.tensor_returning) + ["--"] + sorted(self.generated)
                                      + ["--"] + sorted(self.functions) + ["--"] + sorted(map(str, self.arity))
                                      + ["--"] + sorted(map(str, self.structured))).encode()).hexdigest()

    @functools.cached_property
    def class_bases(self) -> dict[str, set[tuple[str, ...]]]:
        """{generated structured class: its base classes' parts}."""
        out: dict[str, set[tuple[str, ...]]] = {}
        for cls, base in self.structured:
            out.setdefault(cls, set()).add(base)
        return out

    @functools.cached_property
    def _by_op(self) -> dict[str, list[tuple[int, int, bool]]]:
        out: dict[str, list[tuple[int, int, bool]]] = {}
        for op, lo, hi, one in self.arity:
            out.setdefault(op, []).append((lo, hi, one))
        return out

    def one_tensor(self, name: str, nargs: int | None) -> bool:
        """A C++ call of op `name` (`at::X(...)`, or `t.X(...)` with self
        counted) with `nargs` arguments (None: unknown) returns one Tensor:
        every overload does, or every non-out= overload that takes that many
        arguments does, and one does (`t.max()` is max(Tensor), while
        max.dim returns two)."""
        if name in self.tensor_returning:
            return True
        fits = [one for lo, hi, one in self._by_op.get(name, ()) if nargs is not None and lo <= nargs <= hi]
        return bool(fits) and all(fits)


EMPTY = AtenNames(frozenset(), frozenset())


def changed_ops(old: AtenNames, new: AtenNames) -> frozenset[str] | None:
    """The op names whose entries differ between `old` and `new` (an op
    added or removed, its variants, returns or arities changed), for Note
    [Incremental resolution]; None when the change reaches calls that spell
    no op name: a structured kernel class (a kernel's own class derives
    from it), or an op a C++ operator calls (`a + b` is add)."""
    if old.digest == new.digest:
        return frozenset()
    if old.structured != new.structured:
        return None
    names: set[str] = set()
    for a, b in ((old.ops, new.ops), (old.methods, new.methods), (old.tensor_returning, new.tensor_returning),
                 (old.generated, new.generated), (old.functions, new.functions)):
        names |= a ^ b
    names |= {entry[0] for entry in old.arity ^ new.arity}
    return None if names & OPERATOR_OPS else frozenset(names)


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


CACHE_VERSION = "6"


def _parse_names(root: Path, path: Path) -> AtenNames:
    from extractors.ops_yaml import Signature, entries, load_yaml

    rel = path.relative_to(root).as_posix()
    ops, methods, not_tensor, generated, functions = set(), set(), set(), set(), set()
    arity: set[tuple[str, int, int, bool]] = set()
    structured: dict[str, tuple[str, set[str]]] = {}  # out op -> (structured_inherits, its impl kernels)
    functional: dict[str, str] = {}  # out op -> the functional op delegating to it
    for entry in entries(load_yaml(path, rel), rel, "native function"):
        func = str(entry.get("func", ""))
        try:
            sig = Signature.parse(func)
        except ValueError:
            continue
        ops.add(sig.name)
        variants = str(entry.get("variants", "function"))
        if "function" in variants:
            functions.add(sig.name)
        if "method" in variants:
            methods.add(sig.name)
            if not entry.get("manual_cpp_binding"):
                generated.add(sig.name)
        one = bool(_ONE_TENSOR_RE.fullmatch(func.rpartition("->")[2].strip()))
        if not one:
            not_tensor.add(sig.name)
        if not sig.is_out_fn:
            arity.add((sig.name, *_arg_counts(func), one))
        _structured_entry(entry, sig, structured, functional)
    classes = frozenset(pair for out, (base, kernels) in structured.items() if out in functional
                        for pair in _structured_classes(functional[out], base, kernels))
    return AtenNames(frozenset(ops), frozenset(methods), frozenset(ops - not_tensor), frozenset(generated),
                     frozenset(functions), frozenset(a for a in arity if a[0] in not_tensor), classes)


# Note [Structured kernel classes]: torchgen generates, for a structured out=
# op (`structured: True`), the class of its meta function,
# at::meta::structured_<functional op, "." as "_"> (TORCH_META_FUNC2(eq,
# Tensor)), deriving from the op's `structured_inherits` (TensorIteratorBase)
# or at::impl::MetaBase, and per kernel name of a structured dispatch key
# (CPU, CUDA, MPS, XPU, MTIA) the class of its TORCH_IMPL_FUNC,
# at::native::structured_<kernel>, deriving from the meta class. No
# definition of them is in the tree; the resolver looks up an unqualified
# call in a meta or impl body (`build_borrowing_comparison_op(...)`,
# `maybe_get_output()`) in their bases as in any class's.
_STRUCTURED_KEYS = frozenset({"CPU", "CUDA", "MPS", "XPU", "MTIA"})


def _structured_entry(entry: dict, sig, structured: dict, functional: dict) -> None:
    """Record a structured out= op's base and impl kernels, or the functional
    op of a structured_delegate."""
    if entry.get("structured") is True:
        kernels = {str(k).strip() for keys, k in (entry.get("dispatch") or {}).items()
                   if _STRUCTURED_KEYS & {x.strip() for x in str(keys).split(",")}}
        structured[sig.op] = (str(entry.get("structured_inherits") or "at::impl::MetaBase"), kernels)
    delegate = entry.get("structured_delegate")
    if delegate and not sig.name.endswith("_"):
        functional[str(delegate)] = sig.op


def _structured_classes(op: str, base: str, kernels: set[str]) -> list[tuple[str, tuple[str, ...]]]:
    """(class, base parts) of the meta class of functional op `op` and of its impl kernels' classes."""
    meta = "at::meta::structured_" + op.replace(".", "_")
    parts = tuple(base.split("::")) if "::" in base else ("at", base)
    return [(meta, parts), *((f"at::native::structured_{k}", tuple(meta.split("::"))) for k in sorted(kernels))]


def _arg_counts(func: str) -> tuple[int, int]:
    """(fewest, most) arguments of a C++ call of schema `func`: those without
    a default, all of them (the TensorOptions form of a factory takes fewer)."""
    from extractors.ops_yaml import split_top

    m = _SCHEMA_RE.fullmatch(func)
    params = [p for p in split_top(m.group(1)) if p != "*"] if m else []
    return sum(1 for p in params if "=" not in p), len(params)


_SCHEMA_RE = re.compile(r"\s*[\w:.]+\s*\((.*)\)\s*->.*", re.S)


_ONE_TENSOR_RE = re.compile(r"Tensor(?:\([a-z]!?\))?")


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


# Note [Tensor operators]: what a C++ operator on an at::Tensor calls, as the
# tree defines them: aten/src/ATen/TensorOperators.h (AT_FORALL_BINARY_OPS:
# the body for a Tensor left operand, then the one for `Scalar op Tensor`)
# and the member operators of aten/src/ATen/templates/TensorBody.h
# (`-t` is neg(), `t += x` add_(x), `t[i]` select(0, i), `t[i] = v` on the
# temporary fill_(v) / copy_(v)). tests/test_cpp_typed_real.py checks this
# table against those headers.
BINARY_OPS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "+": (("add",), ("add",)),
    "*": (("mul",), ("mul",)),
    "-": (("sub",), ("empty_like", "fill_", "sub_")),
    "/": (("div",), ("empty_like", "fill_", "div_")),
    "%": (("remainder",), ("empty_like", "fill_", "remainder_")),
    "&": (("bitwise_and",), ("bitwise_and",)),
    "|": (("bitwise_or",), ("bitwise_or",)),
    "^": (("bitwise_xor",), ("bitwise_xor",)),
    "<": (("lt",), ("gt",)),
    "<=": (("le",), ("ge",)),
    ">": (("gt",), ("lt",)),
    ">=": (("ge",), ("le",)),
    "==": (("eq",), ("eq",)),
    "!=": (("ne",), ("ne",)),
}
UNARY_OPS: dict[str, tuple[str, ...]] = {"-": ("neg",), "~": ("bitwise_not",)}
COMPOUND_OPS: dict[str, tuple[str, ...]] = {
    "+=": ("add_",), "-=": ("sub_",), "*=": ("mul_",), "/=": ("div_",),
    "&=": ("bitwise_and_",), "|=": ("bitwise_or_",), "^=": ("bitwise_xor_",),
}
INDEX_OPS = ("select",)  # t[i]; t[tensor] is t[tensor.item()]
INDEX_BY_TENSOR_OPS = ("item", "select")
ASSIGN_OPS = {"scalar": ("fill_",), "tensor": ("copy_",)}  # `t[i] = v` (Tensor::operator= &&)
# every op a C++ operator may call (changed_ops)
OPERATOR_OPS = frozenset(op for table in (BINARY_OPS, UNARY_OPS, COMPOUND_OPS, ASSIGN_OPS) for v in table.values()
                         for ops in (v if isinstance(v[0], tuple) else (v,)) for op in ops) | {
                             *INDEX_OPS, *INDEX_BY_TENSOR_OPS}
