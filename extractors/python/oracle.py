"""Differential check of the python layer against a running torch.

Index the *installed* torch package with the python layer (its site-packages
is a valid source: torch/ plus torchgen/packaged/.../native_functions.yaml),
then ask the same torch at run time: which ops have a Python decomposition,
which nn.Module subclasses exist, and whether each `binds(..., "alias")` row
names the very object its target is. Same version on both sides, so every
difference is an extractor miss or a false row. Used by bench/python_layer.py
(`--oracle`) and tests/test_python_oracle.py.

Example:
    >>> report = compare(rows)   # rows: relation → set of tuples from the layer
    >>> report["decomp"]["recall"]
    0.9...
"""

from __future__ import annotations

import importlib
from typing import Any

_DECOMP_MODULES = (
    "torch._decomp", "torch._decomp.decompositions", "torch._refs", "torch._refs.nn.functional",
    "torch._refs.special", "torch._refs.linalg", "torch._refs.fft", "torch._inductor.decomposition",
)
_NN_MODULES = ("torch.nn", "torch.nn.parallel", "torch.nn.utils.parametrize", "torch.ao.nn.quantized", "torch.ao.nn.qat")


def runtime_decomp_ops() -> set[str]:
    """Op ids ("add.Tensor", "gelu") with a Python decomposition registered at run time."""
    for name in _DECOMP_MODULES:
        importlib.import_module(name)
    from torch._decomp import global_decomposition_table
    from torch._inductor.decomposition import decompositions as inductor

    # the "meta" table holds meta kernels (register_meta), not decompositions
    tables = [t for kind, t in global_decomposition_table.items() if kind != "meta"] + [inductor]
    ops = {op for table in tables for op, fn in table.items() if not _computed(fn)}
    return {_op_id(str(op)) for op in ops if str(op).startswith("aten.")}


def _computed(fn: Any) -> bool:
    """Entries inductor derives at run time from CompositeImplicitAutograd kernels
    (functools.partial of torch._export.utils._get_decomp_for_cia), not written in source."""
    inner = getattr(fn, "func", None)
    return "_get_decomp_for_cia" in getattr(inner, "__qualname__", "")


def _op_id(text: str) -> str:
    name = text[len("aten."):]
    return name[: -len(".default")] if name.endswith(".default") else name


def runtime_nn_modules() -> set[str]:
    """`module.qualname` of every nn.Module subclass defined under torch.nn."""
    for name in _NN_MODULES:
        importlib.import_module(name)
    import torch

    out, todo = set(), [torch.nn.Module]
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            todo.append(sub)
            if sub.__module__.startswith("torch.nn.") and "<locals>" not in sub.__qualname__:
                out.add(f"{sub.__module__}.{sub.__qualname__}")
    return out


def _lookup(dotted: str) -> Any:
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)


def alias_agreement(binds: set[tuple]) -> tuple[int, int, list[str]]:
    """(agreeing, checked, disagreements) over binds rows of kind "alias" to torch._C.*."""
    ok, checked, bad = 0, 0, []
    for py, target, kind, file, line in sorted(binds):
        if kind != "alias" or not target.startswith("torch._C."):
            continue
        try:
            a, b = _lookup(py), _lookup(target)
        except (ImportError, AttributeError):
            continue  # not importable here (optional dependency); not counted
        checked += 1
        if a is b or getattr(a, "__wrapped__", None) is b:
            ok += 1
        else:
            bad.append(f"{py} -> {target} ({file}:{line})")
    return ok, checked, bad


def _pr(ours: set[str], truth: set[str]) -> dict[str, Any]:
    both = ours & truth
    return {
        "ours": len(ours), "runtime": len(truth), "both": len(both),
        "precision": len(both) / len(ours) if ours else 0.0,
        "recall": len(both) / len(truth) if truth else 0.0,
        "missed": sorted(truth - ours)[:15], "extra": sorted(ours - truth)[:15],
    }


def compare(rows: dict[str, set[tuple]]) -> dict[str, Any]:
    """Precision / recall of decomp and module_class (torch.nn), alias agreement."""
    decomp = _pr({r[0] for r in rows.get("decomp", ())}, runtime_decomp_ops())
    nn_ours = {r[0] for r in rows.get("module_class", ()) if r[0].startswith("torch.nn.")}
    modules = _pr(nn_ours, runtime_nn_modules())
    ok, checked, bad = alias_agreement(set(rows.get("binds", ())))
    return {"decomp": decomp, "nn_modules": modules, "alias": {"ok": ok, "checked": checked, "bad": bad[:15]}}
