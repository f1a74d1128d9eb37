"""The ops layer: native_functions.yaml, tags.yaml, derivatives.yaml.

Writes the ops section of facts/schema.dl. Entries are ingested strictly, as
torchgen does (`NativeFunction.from_yaml`): each known key is popped and any
leftover key is an ExtractError at file:line, so a new PyTorch field is
noticed rather than silently dropped.

Note [Default dispatch]: an entry with no `dispatch:` section that is neither
`structured` nor a `structured_delegate` gets a CompositeImplicitAutograd
kernel named by torchgen's `cpp.name(func)`: the base name, plus "_out" for an
out= overload. It is a `dispatch` row (at the entry's `func:` line) and a
`dispatch_default` row. An entry with `ufunc_inner_loop:` gets CPU and CUDA
kernels "ufunc_<name>_<key>" (torchgen `ufunc.schema_kernel_name`), at the line
of that key; its loops and the stub registrations torchgen generates for it
are read by extractors/ops_ufunc.py (Note [Ufunc codegen names]).

Two layouts are understood (see `find_inputs`): a source tree, and an
installed wheel (site-packages holding `torchgen/packaged/...`).

Example:
    >>> extract(ExtractContext(root=Path("pytorch")), sink)   # rows into sink
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from extractors.base import ExtractContext, Sink
from extractors.ops_native import native_param_types
from extractors.ops_ufunc import UFUNC_DISPATCH_KEYS, ufunc_rows
from extractors.ops_yaml import (
    LineMap,
    Signature,
    entries,
    entry_signature,
    load_yaml,
    parse_member,
    reject_unknown,
)
from torchtalk.errors import ExtractError, SrcLoc, TorchTalkError, did_you_mean


@dataclass(frozen=True)
class OpsInputs:
    """Where the ops YAML files of a tree (or wheel) are, relative to its root."""

    native: str
    tags: str
    derivatives: str


TREE = OpsInputs(
    "aten/src/ATen/native/native_functions.yaml",
    "aten/src/ATen/native/tags.yaml",
    "tools/autograd/derivatives.yaml",
)
WHEEL = OpsInputs(
    "torchgen/packaged/ATen/native/native_functions.yaml",
    "torchgen/packaged/ATen/native/tags.yaml",
    "torchgen/packaged/autograd/derivatives.yaml",
)


def find_inputs(root: Path) -> OpsInputs | None:
    """The layout of `root`: TREE, WHEEL, or None when it has no native_functions.yaml."""
    for layout in (TREE, WHEEL):
        if (root / layout.native).is_file():
            return layout
    return None


class DispatchKey(Enum):
    """Dispatch keys native_functions.yaml may name (torchgen's `dispatch_keys`, 2.6-2.13)."""

    CPU = "CPU"
    SparseCPU = "SparseCPU"
    SparseCsrCPU = "SparseCsrCPU"
    MkldnnCPU = "MkldnnCPU"
    CUDA = "CUDA"
    MPS = "MPS"
    XPU = "XPU"
    SparseXPU = "SparseXPU"
    SparseCsrXPU = "SparseCsrXPU"
    SparseCUDA = "SparseCUDA"
    SparseCsrCUDA = "SparseCsrCUDA"
    SparseMPS = "SparseMPS"
    SparseCsrMPS = "SparseCsrMPS"
    QuantizedCPU = "QuantizedCPU"
    QuantizedCUDA = "QuantizedCUDA"
    CompositeImplicitAutograd = "CompositeImplicitAutograd"
    CompositeImplicitAutogradNestedTensor = "CompositeImplicitAutogradNestedTensor"
    CompositeExplicitAutograd = "CompositeExplicitAutograd"
    CompositeExplicitAutogradNonFunctional = "CompositeExplicitAutogradNonFunctional"
    NestedTensorCPU = "NestedTensorCPU"
    NestedTensorCUDA = "NestedTensorCUDA"
    NestedTensorXPU = "NestedTensorXPU"
    NestedTensorHPU = "NestedTensorHPU"
    Meta = "Meta"
    SparseMeta = "SparseMeta"
    SparseCsrMeta = "SparseCsrMeta"
    QuantizedMeta = "QuantizedMeta"
    NestedTensorMeta = "NestedTensorMeta"
    ZeroTensor = "ZeroTensor"
    MTIA = "MTIA"

    @staticmethod
    def parse(text: str, loc: SrcLoc) -> DispatchKey:
        return parse_member(DispatchKey, text, loc, "dispatch key")


class Variant(Enum):
    function = "function"
    method = "method"

    @staticmethod
    def parse(text: str, loc: SrcLoc) -> Variant:
        try:
            return Variant(text)
        except ValueError:
            raise ExtractError(f"illegal variant {text!r} (function or method)", loc) from None


# keys written as op_attr rows (value as text); the rest have their own relation
ATTR_KEYS = frozenset({
    "cpp_no_default_args", "use_const_ref_for_mutable_tensors", "manual_kernel_registration",
    "manual_cpp_binding", "device_guard", "device_check", "category_override", "precomputed",
})
NATIVE_KEYS = ATTR_KEYS | frozenset({
    "func", "variants", "structured", "structured_delegate", "structured_inherits",
    "python_module", "tags", "dispatch", "autogen", "ufunc_inner_loop",
})
# value types torchgen asserts (NativeFunction.from_yaml)
BOOL_KEYS = frozenset({
    "structured", "manual_kernel_registration", "manual_cpp_binding", "device_guard",
    "use_const_ref_for_mutable_tensors",
})
STR_KEYS = frozenset({
    "variants", "structured_delegate", "structured_inherits", "python_module", "autogen",
    "category_override", "device_check",
})
DEVICE_CHECKS = frozenset({"NoCheck", "ExactSame"})


def inputs(root: Path) -> list[Path]:
    """The YAML files the ops layer reads (those that exist)."""
    layout = find_inputs(root) or TREE
    from extractors.ops_keys import HEADERS

    paths = (root / layout.native, root / layout.tags, root / layout.derivatives, *(root / h for h in HEADERS))
    return [p for p in paths if p.is_file()]


def extract(ctx: ExtractContext, sink: Sink) -> None:
    """Write op, dispatch, ... and derivative rows for the tree at `ctx.root`."""
    from extractors.ops_derivatives import extract_derivatives
    from extractors.ops_keys import extract_keys

    layout = find_inputs(ctx.root)
    if layout is None:
        raise ExtractError(f"{ctx.root} has no {TREE.native} (nor {WHEEL.native})")
    valid_tags = extract_tags(ctx.root, layout.tags, sink)
    native = entries(load_yaml(ctx.root / layout.native, layout.native), layout.native, "native function")
    sink.progress(0, total=len(native), what="native_functions.yaml")
    for entry in native:
        extract_native(entry, layout.native, valid_tags, sink)
        sink.progress()
    view_copy_rows(native, layout.native, sink)
    if (ctx.root / layout.derivatives).is_file():
        extract_derivatives(ctx.root, layout.derivatives, sink)
    else:
        sink.warn(layout.derivatives, 0, "derivatives.yaml not found; no derivative facts")
    extract_keys(ctx.root, sink)


def extract_tags(root: Path, rel: str, sink: Sink) -> frozenset[str] | None:
    """tag rows from tags.yaml; the set of valid tags (None if the file is missing)."""
    if not (root / rel).is_file():
        sink.warn(rel, 0, "tags.yaml not found; tags are not checked")
        return None
    names = set()
    for entry in entries(load_yaml(root / rel, rel), rel, "tag"):
        tag = entry.get("tag")
        if not isinstance(tag, str):
            raise ExtractError("tag entry without a `tag:` name", SrcLoc(rel, entry.line))
        reject_unknown(entry, frozenset({"tag", "desc"}), rel, tag)
        sink.add("tag", tag, " ".join(str(entry.get("desc", "")).split()), rel, entry.line)
        names.add(tag)
    return frozenset(names)


def extract_native(entry: LineMap, rel: str, valid_tags: frozenset[str] | None, sink: Sink) -> None:
    """All rows of one native_functions.yaml entry (STYLE 7: errors name the entry)."""
    sig = entry_signature(entry, "func", rel, "entry without a `func:` schema string")
    try:
        _native_rows(entry, sig, rel, valid_tags, sink)
    except TorchTalkError:
        raise
    except Exception as exc:  # noqa: BLE001 - context on failure (STYLE 7)
        raise ExtractError(f"in entry {sig.op!r}: {type(exc).__name__}: {exc}", SrcLoc(rel, entry.line)) from exc


def _native_rows(entry: LineMap, sig: Signature, rel: str, valid_tags, sink: Sink) -> None:
    op = sig.op
    reject_unknown(entry, NATIVE_KEYS, rel, op)
    loc = lambda key: SrcLoc(rel, entry.key_line(key))  # noqa: E731
    check_values(entry, op, rel)
    sink.add("op", op, sig.name, sig.overload, " ".join(entry["func"].split()), rel, entry.line)
    for v in str(entry.get("variants", "function")).split(","):
        sink.add("op_variant", op, Variant.parse(v.strip(), loc("variants")).value)
    if "python_module" in entry:
        sink.add("op_python_module", op, str(entry["python_module"]))
    tags = entry.get("tags", [])
    for tag in [tags] if isinstance(tags, str) else tags:
        if valid_tags is not None and tag not in valid_tags:
            raise ExtractError(f"illegal tag {tag!r} in entry {op!r}", loc("tags"), hint=did_you_mean(tag, valid_tags))
        sink.add("op_tag", op, tag)
    if entry.get("structured") is True:
        sink.add("structured", op, rel, entry.key_line("structured"))
    if "structured_delegate" in entry:
        sink.add("structured_delegate", op, str(entry["structured_delegate"]), rel, entry.key_line("structured_delegate"))
    if "structured_inherits" in entry:
        sink.add("structured_inherits", op, str(entry["structured_inherits"]), rel, entry.key_line("structured_inherits"))
    for gen in filter(None, (g.strip() for g in str(entry.get("autogen", "")).split(","))):
        sink.add("autogen", op, gen, rel, entry.key_line("autogen"))
    for key in sorted(ATTR_KEYS & entry.keys()):
        sink.add("op_attr", op, key, attr_text(entry[key]), rel, entry.key_line(key))
    _dispatch_rows(entry, sig, rel, sink)


def _kernel_params(entry: LineMap, op: str, kernel: str, sink: Sink) -> None:
    """native_kernel_param rows of `op`'s kernel `kernel` (Note [Native kernel parameters])."""
    types = native_param_types(str(entry["func"]), "_symint" in kernel,
                               entry.get("use_const_ref_for_mutable_tensors") is True)
    for pos, t in enumerate(types):
        sink.add("native_kernel_param", op, kernel, len(types), pos, t)


def check_values(entry: LineMap, op: str, rel: str) -> None:
    """The value types torchgen asserts, as ExtractErrors at the key's line."""
    for key, value in entry.items():
        want = "True or False" if key in BOOL_KEYS and not isinstance(value, bool) else (
            "a string" if key in STR_KEYS and not isinstance(value, str) else None)
        if key == "device_check" and want is None and value not in DEVICE_CHECKS:
            want = " or ".join(sorted(DEVICE_CHECKS))
        if want:
            raise ExtractError(f"`{key}:` of {op!r} must be {want}, got {value!r}", SrcLoc(rel, entry.key_line(key)))


def _dispatch_rows(entry: LineMap, sig: Signature, rel: str, sink: Sink) -> None:
    op, table = sig.op, entry.get("dispatch")
    if table is not None:
        if not isinstance(table, LineMap):
            raise ExtractError(f"`dispatch:` of {op!r} is not a mapping", SrcLoc(rel, entry.key_line("dispatch")))
        for keys, kernel in table.items():
            line = table.key_line(keys)
            for k in str(keys).split(","):
                key = DispatchKey.parse(k.strip(), SrcLoc(rel, line))
                sink.add("dispatch", op, key.value, str(kernel), rel, line)
        for kernel in sorted({str(k) for k in table.values()}):
            _kernel_params(entry, op, kernel, sink)
    elif not entry.get("structured") and "structured_delegate" not in entry:
        kernel = sig.name + ("_out" if sig.is_out_fn else "")  # Note [Default dispatch]
        sink.add("dispatch", op, DispatchKey.CompositeImplicitAutograd.value, kernel, rel, entry.line)
        sink.add("dispatch_default", op, kernel)
        _kernel_params(entry, op, kernel, sink)
    if "ufunc_inner_loop" in entry:
        ufunc_rows(entry, sig, rel, sink)
        line = entry.key_line("ufunc_inner_loop")
        for key in UFUNC_DISPATCH_KEYS:
            sink.add("dispatch", op, key, f"ufunc_{sig.name}_{key}", rel, line)


def attr_text(value: object) -> str:
    """An op_attr value as text: scalars as YAML writes them, lists joined by ', '."""
    if isinstance(value, list):
        return ", ".join(attr_text(v) for v in value)
    if isinstance(value, dict):
        return "; ".join(f"{k}: {attr_text(v)}" for k, v in value.items())
    return " ".join(str(value).split())


VIEW_COPY_KEY = "CompositeExplicitAutogradNonFunctional"
# torchgen writes one view_copy kernel by hand (GenCompositeViewCopyKernel:
# `if str(g.view_copy.func.name) == "view_copy"`): it falls back to
# self.reshape_symint(size) when the strides do not allow a view.
VIEW_COPY_EXTRA = {"view_copy": ("reshape",)}


def view_copy_rows(native: list[LineMap], rel: str, sink: Sink) -> None:
    """Note [View copy codegen]: torchgen generates the composite kernel of a
    `{view}_copy` op tagged `view_copy` (gen_functionalization_type.py,
    GenCompositeViewCopyKernel) when its base name is the view op's plus
    `_copy`: `at::native::<kernel>` runs `at::_ops::<view>::call(...)` and
    clones the result. Rows: codegen_kernel for the kernel the yaml names
    (the rules use it only where the tree does not define that name), and
    its two op calls (codegen_call), at the entry's dispatch line."""
    ops: dict[tuple[str, str], str] = {}
    copies = []
    for entry in native:
        sig = entry_signature(entry, "func", rel, "entry without a `func:` schema string")
        ops[(sig.name, sig.overload)] = sig.op
        tags = entry.get("tags", [])
        table = entry.get("dispatch")
        if "view_copy" in ([tags] if isinstance(tags, str) else tags) and isinstance(table, LineMap):
            for keys, kernel in table.items():
                if VIEW_COPY_KEY in (k.strip() for k in str(keys).split(",")):
                    copies.append((sig, str(kernel), table.key_line(keys)))
    for sig, kernel, line in copies:
        view = sig.name.removesuffix("_copy")
        if view == sig.name or (view, sig.overload) not in ops:
            continue
        fn = f"at::native::{kernel}"
        sink.add("codegen_kernel", sig.op, VIEW_COPY_KEY, kernel, fn, rel, line)
        for name in (view, "clone", *VIEW_COPY_EXTRA.get(sig.op, ())):
            sink.add("codegen_call", fn, name, rel, line)
