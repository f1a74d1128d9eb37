"""The ATen operators as Python sees them: which Python names reach which op.

Uses `func:`, `variants:` and `python_module:` of each entry of
native_functions.yaml, loaded by the ops layer's loader (extractors/ops_yaml.py). A Python *leaf* is a name bound in C++ by the generated bindings:

    variants: function, no python_module  → torch.X, torch._C._VariableFunctions.X
    variants: method                      → torch.Tensor.X, torch._C.TensorBase.X
    python_module: nn                     → torch._C._nn.X
    python_module: linalg / fft / special / sparse / nested
                                          → torch._C._linalg.X, torch._C._fft.X, ...
    any op                                → torch.ops.aten.X (all overloads),
                                            torch.ops.aten.X.overload (one)
    an `autogen:` op (add.Scalar_out)     → torch.ops.aten.X and .overload only

Note [Overloads of a leaf]: a leaf such as `torch.add` reaches every overload
of `add` that has its variant (`add.Tensor`, `add.Scalar`, `add.out`, ...);
we give one py_api row per overload and do not guess the overload from the
call's arguments.

Example:
    >>> ops = load_native(root)
    >>> sorted(ops.leaves["torch._C._nn.gelu"])
    ['gelu']
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

NATIVE_YAML = "aten/src/ATen/native/native_functions.yaml"

# Python module of the generated bindings, by `python_module:`.
_PY_MODULE = {
    "nn": "torch._C._nn",
    "linalg": "torch._C._linalg",
    "fft": "torch._C._fft",
    "special": "torch._C._special",
    "sparse": "torch._C._sparse",
    "nested": "torch._C._nested",
}


_ONE_TENSOR = re.compile(r"Tensor(\([a-z]!?\))?( \w+)?")


@dataclass(frozen=True)
class NativeOp:
    op: str  # "add.Tensor"
    name: str  # "add"
    line: int
    variants: tuple[str, ...]
    python_module: str


@dataclass
class NativeOps:
    """Leaves (Python name → op ids) and every op, from native_functions.yaml."""

    file: str
    ops: dict[str, NativeOp] = field(default_factory=dict)
    by_name: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    leaves: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    methods: frozenset[str] = frozenset()
    tensor_ops: set[str] = field(default_factory=set)  # ops whose schema returns one Tensor

    def returns_tensor(self, leaf: str) -> bool:
        """Whether every op a leaf reaches returns one Tensor (`torch.zeros`, not `torch.max`)."""
        ops = self.leaves.get(leaf)
        return bool(ops) and all(op in self.tensor_ops for op in ops)

    def leaf_how(self, py: str) -> str:
        """"variant" for torch.X / Tensor.X, "python_module" for torch._C._nn.X, "aten" for torch.ops.aten."""
        if py.startswith("torch.ops.aten."):
            return "aten"
        if py.startswith("torch._C._") and not py.startswith("torch._C._VariableFunctions"):
            return "python_module"
        return "variant"


def load_native(root: Path) -> NativeOps:
    """The ops of the tree's (or wheel's) native_functions.yaml, through the ops
    layer's loader (extractors.ops_yaml); empty when the file is missing."""
    from extractors.ops import find_inputs
    from extractors.ops_yaml import Signature, entries, load_yaml

    layout = find_inputs(root)
    if layout is None:
        return NativeOps(NATIVE_YAML)
    out = NativeOps(layout.native)
    for entry in entries(load_yaml(root / layout.native, layout.native), layout.native, "native function"):
        try:
            sig = Signature.parse(str(entry.get("func", "")))
        except ValueError:
            continue  # the ops layer reports it
        variants = tuple(v.strip() for v in str(entry.get("variants", "function")).split(",") if v.strip())
        n = NativeOp(sig.op, sig.name, entry.key_line("func"), variants, str(entry.get("python_module", "")))
        out.ops[n.op] = n
        out.by_name[n.name].append(n.op)
        if _ONE_TENSOR.fullmatch(str(entry.get("func", "")).rpartition("->")[2].strip()):
            out.tensor_ops.add(n.op)
        _add_leaves(out, n)
        for gen in str(entry.get("autogen", "")).split(","):
            _add_autogen(out, gen.strip(), n.line)
    out.methods = frozenset(n.name for n in out.ops.values() if "method" in n.variants)
    return out


def _add_autogen(out: NativeOps, op: str, line: int) -> None:
    """An op made by `autogen:` (e.g. "add.Scalar_out"): an overload of its packet
    (torch.ops.aten.add) with no Python binding of its own."""
    if not op or op in out.ops:
        return
    name, _, overload = op.partition(".")
    out.ops[op] = NativeOp(op, name, line, (), "")
    out.by_name[name].append(op)
    out.leaves[f"torch.ops.aten.{name}"].append(op)
    out.leaves[f"torch.ops.aten.{name}.{overload or 'default'}"].append(op)


def _add_leaves(out: NativeOps, n: NativeOp) -> None:
    name = n.name
    if "function" in n.variants:
        if n.python_module:
            mod = _PY_MODULE.get(n.python_module, f"torch._C._{n.python_module}")
            out.leaves[f"{mod}.{name}"].append(n.op)
        else:
            out.leaves[f"torch.{name}"].append(n.op)
            out.leaves[f"torch._C._VariableFunctions.{name}"].append(n.op)
    if "method" in n.variants:
        out.leaves[f"torch.Tensor.{name}"].append(n.op)
        out.leaves[f"torch._C.TensorBase.{name}"].append(n.op)
    out.leaves[f"torch.ops.aten.{name}"].append(n.op)
    overload = n.op.split(".", 1)[1] if "." in n.op else "default"
    out.leaves[f"torch.ops.aten.{name}.{overload}"].append(n.op)


def aten_ref_ops(native: NativeOps, dotted: str) -> list[str]:
    """The op ids an `aten.X` / `aten.X.overload` / `torch.ops.aten.X` reference names.

    Example:
        >>> aten_ref_ops(ops, "torch.ops.aten.add.Tensor")
        ['add.Tensor']
    """
    for prefix in ("torch.ops.aten.", "torch._ops.ops.aten."):
        if dotted.startswith(prefix):
            return list(native.leaves.get("torch.ops.aten." + dotted[len(prefix):], ()))
    return []


def library_ref_op(dotted: str) -> str | None:
    """The op id a `torch.ops.NS.X` / `torch.ops.NS.X.overload` reference of a
    namespace other than aten names (Note [Library ops] in
    extractors/cpp/library.py): the op the dispatcher registered under that
    name; a packet means its default overload. None for any other name.

    Example:
        >>> library_ref_op("torch.ops.torchvision.nms"), library_ref_op("torch.ops.ns.f.out")
        ('torchvision::nms', 'ns::f.out')
    """
    parts = dotted.split(".")
    if parts[:2] != ["torch", "ops"] or len(parts) not in (4, 5) or parts[2] == "aten" or not all(parts):
        return None
    overload = parts[4] if len(parts) == 5 and parts[4] != "default" else ""
    return f"{parts[2]}::{parts[3]}" + (f".{overload}" if overload else "")
