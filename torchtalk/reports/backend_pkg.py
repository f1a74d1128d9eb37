"""Read an out-of-tree backend's ATen op table without importing it.

C++ sources (`TORCH_LIBRARY_IMPL(aten, KEY, m)` blocks) are read by
reports/backend_cpp.py with the C++ extractor; this module reads Python.

A `torch.compile` backend (or a PrivateUse1 backend written in Python) names
the ATen ops it implements in a few recognisable places; this module finds
them with Python's `ast`, never running the package's code:

- dict keys:             ``{aten.add.Tensor: lower_add, "aten::mm": lower_mm}``
- table assignments:     ``lowerings[aten.relu.default] = lower_relu``
- decorator arguments:   ``@register_lowering(aten.add)``,
                         ``@register_lowering([aten.sub.Tensor, aten.rsub])``,
                         ``@torch.library.impl("aten::mul.Tensor", "PrivateUse1")``
- torch.library calls:   ``torch.library.impl(lib, "div.Tensor", ...)``,
                         ``lib.impl("neg", fn)`` where ``lib = Library("aten", "IMPL")``
- fallbacks:             ``Library("_", "IMPL").fallback(fn, dispatch_key="PrivateUse1")``

A torch.library registration carries its dispatch key, as a C++ m.impl does
(Note [Package keys]), read per torch 2.6's signatures:
``torch.library.impl(qualname, types, func=None, *, lib=None)`` (a key name, or a
device type: "cpu" -> CPU, "default" -> CompositeExplicitAutograd),
``torch.library.register_kernel(op, device_types, ...)`` (None -> CompositeExplicitAutograd),
the legacy ``torch.library.impl(lib, name, dispatch_key="")`` and
``Library.impl(op_name, fn, dispatch_key="", *, with_keyset=False)``, where ""
is the Library's own key (``Library(ns, kind, dispatch_key="")``). A registration
that names no key at all (torch would register it as CompositeImplicitAutograd)
counts, like a table entry, for the package's own backend (key "").

An op is spelled ``aten.add.Tensor``, ``torch.ops.aten.add.Tensor`` or
``"aten::add.Tensor"``; ``.default`` is the empty overload, and a bare packet
(``aten.add``) names every overload of ``add``. Calls of ops inside function
bodies (``aten.add.Tensor(x, y)``) are uses, not table entries, and are ignored.

Example:
    >>> refs = read_backend_package(Path("tests/fixtures/backend_pkg"))
    >>> refs[0]
    BackendRef(name='add', overload='*', file='tinyback/lowering.py', line=12)
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from torchtalk.errors import InputError
from torchtalk.reports.backend_refs import PACKET, BackendRef, parse_op_string  # noqa: F401 (re-exported)

_ATEN = "torch.ops.aten"
# torch.library.impl's device types -> the key torch._C._dispatch_key_for_device
# names (c10 computeDispatchKey on the device type's dense backend)
DEVICE_KEYS = {
    "default": "CompositeExplicitAutograd", "cpu": "CPU", "cuda": "CUDA", "hip": "HIP",
    "xla": "XLA", "mps": "MPS", "meta": "Meta", "xpu": "XPU", "hpu": "HPU", "ve": "VE",
    "lazy": "Lazy", "ipu": "IPU", "mtia": "MTIA", "maia": "MAIA", "privateuseone": "PrivateUse1",
}
_IMPL_FUNCS = ("torch.library.impl", "torch.library.register_kernel")


@dataclass(frozen=True)
class PackageScan:
    """The refs found in a package, and files that could not be parsed."""

    root: Path
    refs: tuple[BackendRef, ...]
    files: int
    unparsed: tuple[str, ...]  # "file:line: message"
    fallbacks: tuple = ()  # BackendFallback rows (C++ m.fallback)
    notes: tuple[str, ...] = ()  # registrations that are no ATen op table entry

    @property
    def keys(self) -> tuple[str, ...]:
        """The dispatch keys the package registers kernels or fallbacks for (C++ or torch.library)."""
        return tuple(sorted({r.key for r in self.refs if r.key} | {f.key for f in self.fallbacks}))


def read_backend_package(root: Path) -> tuple[BackendRef, ...]:
    """The sorted, de-duplicated ATen op refs of the package at `root`.

    Example:
        >>> [r.spelled for r in read_backend_package(Path("pkg"))][:2]
        ['aten.add', 'aten.mm.default']
    """
    return scan_backend_package(root).refs


def scan_backend_package(root: Path) -> PackageScan:
    """Scan every `.py` file under `root` (a package dir or a single file) with
    `ast`, and every C++ source with the C++ extractor (reports/backend_cpp.py)."""
    from torchtalk.reports.backend_cpp import CPP_SUFFIXES, scan_cpp_files

    root = Path(root)
    if not root.exists():
        raise InputError(f"backend package not found: {root}")
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    py_files = [p for p in files if p.suffix == ".py"]
    cpp_files = [p for p in files if p.suffix in CPP_SUFFIXES]
    if not py_files and not cpp_files:
        raise InputError(f"no Python or C++ files in backend package {root}")
    base = root.parent if root.is_file() else root
    refs: set[BackendRef] = set()
    unparsed: list[str] = []
    py_fallbacks: list = []
    py_notes: list[str] = []
    for path in py_files:
        rel = path.relative_to(base).as_posix()
        try:
            tree = ast.parse(path.read_bytes(), filename=rel)
        except SyntaxError as err:
            unparsed.append(f"{rel}:{err.lineno or 0}: {err.msg}")
            continue
        scanner = _FileScanner(rel)
        refs.update(scanner.scan(tree))
        py_fallbacks += scanner.fallbacks
        py_notes += scanner.notes
    cpp_refs, fallbacks, notes = scan_cpp_files(base, cpp_files)
    refs.update(cpp_refs)
    return PackageScan(root, tuple(sorted(refs)), len(py_files) + len(cpp_files), tuple(unparsed),
                       tuple(sorted(set(fallbacks + py_fallbacks))), tuple(py_notes + notes))


class _FileScanner:
    """Walks one module: tracks aliases of torch.ops.aten and torch.library Library objects."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.aliases: dict[str, str] = {"aten": _ATEN}  # local name → dotted target
        self.libraries: dict[str, tuple[str, str]] = {}  # name bound to Library(ns, ...) → (ns, its key)
        self.refs: list[BackendRef] = []
        self.fallbacks: list = []  # BackendFallback rows (Library("_" or "aten").fallback)
        self.notes: list[str] = []

    def scan(self, tree: ast.Module) -> list[BackendRef]:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                self._note_import(node)
            elif isinstance(node, ast.Assign):
                self._note_assign(node)
        for node in ast.walk(tree):
            if isinstance(node, ast.Dict):
                for key in node.keys:
                    if key is not None:
                        self._ref_expr(key)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    if isinstance(t, ast.Subscript):
                        self._ref_expr(t.slice)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                for deco in node.decorator_list:
                    if isinstance(deco, ast.Call):
                        self._ref_call_args(deco)
            elif isinstance(node, ast.Call) and self._is_library_impl(node.func):
                self._ref_library_impl(node)
            elif isinstance(node, ast.Call) and self._library_method(node.func, "fallback"):
                self._fallback(node)
        return self.refs

    # -- aliases ---------------------------------------------------------
    def _note_import(self, node: ast.Import | ast.ImportFrom) -> None:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    self.aliases[a.asname] = a.name
            return
        for a in node.names:
            if node.module and not node.level:
                self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"

    def _note_assign(self, node: ast.Assign) -> None:
        if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
            return
        name = node.targets[0].id
        value = node.value
        dotted = self._dotted(value)
        if dotted is not None and dotted == _ATEN:
            self.aliases[name] = dotted
        elif isinstance(value, ast.Call) and self._tail(value.func) == "Library":
            ns = _const_str(value.args[0]) if value.args else None
            if ns in ("aten", "_"):  # Library(ns, kind, dispatch_key="")
                self.libraries[name] = (ns, self._key_arg(value, 2, "dispatch_key") or "")

    def _dotted(self, node: ast.expr) -> str | None:
        """`aten.add.Tensor` → "torch.ops.aten.add.Tensor" after alias expansion."""
        from extractors.python.summary import name_chain

        chain = name_chain(node)
        if chain is None:
            return None
        dotted = ".".join([self.aliases.get(chain[0], chain[0]), *chain[1]])
        if dotted == "torch._ops.ops" or dotted.startswith("torch._ops.ops."):
            dotted = "torch.ops" + dotted[len("torch._ops.ops") :]  # the same object
        return dotted

    @staticmethod
    def _tail(node: ast.expr) -> str:
        if isinstance(node, ast.Attribute):
            return node.attr
        return node.id if isinstance(node, ast.Name) else ""

    # -- keys ------------------------------------------------------------
    def _key_arg(self, call: ast.Call, pos: int, kw: str) -> str | None:
        """The string at positional `pos` or keyword `kw` of `call`; None when absent.

        A key that is no string literal is "" (the package's backend) with a note.
        """
        node = call.args[pos] if len(call.args) > pos else None
        node = next((k.value for k in call.keywords if k.arg == kw), node)
        if node is None:
            return None
        text = _const_str(node)
        if text is None:
            self.notes.append(f"{self.file}:{node.lineno}: the dispatch key is no string literal; "
                              "its registrations count for the package's backend")
            return ""
        return text

    def _device_keys(self, call: ast.Call, kw: str, default: str | None) -> list[str]:
        """The keys of torch.library.impl's `types` / register_kernel's `device_types`."""
        node = call.args[1] if len(call.args) > 1 else None
        node = next((k.value for k in call.keywords if k.arg == kw), node)
        if node is None or (isinstance(node, ast.Constant) and node.value is None):
            return [default or ""]
        elts = node.elts if isinstance(node, ast.List | ast.Tuple | ast.Set) else [node]
        keys = []
        for elt in elts:
            text = _const_str(elt)
            if text is None:
                self.notes.append(f"{self.file}:{elt.lineno}: the device type is no string literal; "
                                  "its registrations count for the package's backend")
                keys.append("")
            elif text in DEVICE_KEYS:
                keys.append(DEVICE_KEYS[text])
            elif text.islower():  # guess: torch.utils.rename_privateuse1_backend's name
                self.notes.append(f"{self.file}:{elt.lineno}: device type {text!r} read as PrivateUse1 "
                                  "(a renamed privateuse1 backend, a guess)")
                keys.append("PrivateUse1")
            else:
                keys.append(text)  # a dispatch key name (torch._C._parse_dispatch_key)
        return keys

    # -- refs ------------------------------------------------------------
    def _add(self, name: str, overload: str, node: ast.AST, key: str = "") -> None:
        self.refs.append(BackendRef(name, overload, self.file, node.lineno, key))

    def _ref_expr(self, node: ast.expr, keys: tuple[str, ...] = ("",)) -> None:
        """A table key / decorator argument: an op, a string, or a list of them."""
        if isinstance(node, ast.List | ast.Tuple | ast.Set):
            for elt in node.elts:
                self._ref_expr(elt, keys)
            return
        text = _const_str(node)
        parsed = None
        if text is not None:
            parsed = parse_op_string(text) if "::" in text else None
        else:
            dotted = self._dotted(node)
            if dotted is None or not dotted.startswith(_ATEN + "."):
                return
            rest = dotted[len(_ATEN) + 1 :].split(".")
            if len(rest) == 1:
                parsed = (rest[0], PACKET)
            elif len(rest) == 2:
                parsed = (rest[0], "" if rest[1] == "default" else rest[1])
        for key in keys if parsed else ():
            self._add(*parsed, node, key)

    def _ref_call_args(self, call: ast.Call) -> None:
        if self._is_library_impl(call.func):
            self._ref_library_impl(call)
            return
        for arg in call.args:
            self._ref_expr(arg)

    def _library_method(self, func: ast.expr, method: str) -> tuple[str, str] | None:
        """(ns, key) of the Library whose `method` `func` names."""
        if isinstance(func, ast.Attribute) and func.attr == method and isinstance(func.value, ast.Name):
            return self.libraries.get(func.value.id)
        return None

    def _is_library_impl(self, func: ast.expr) -> bool:
        if self._dotted(func) in _IMPL_FUNCS:
            return True
        return (self._library_method(func, "impl") or ("",))[0] == "aten"

    def _aten_lib(self, node: ast.expr) -> tuple[str, str] | None:
        lib = self.libraries.get(node.id) if isinstance(node, ast.Name) else None
        return lib if lib and lib[0] == "aten" else None

    def _ref_library_impl(self, call: ast.Call) -> None:
        """`torch.library.impl("aten::x", types)`, `torch.library.impl(lib, "x", key)`, `lib.impl("x", fn, key)`."""
        args = list(call.args)
        if not args:
            return
        ns, lib = None, self._library_method(call.func, "impl")
        if lib is not None:  # Library.impl(op_name, fn, dispatch_key="")
            ns, keys = "aten", [self._key_arg(call, 2, "dispatch_key") or lib[1]]
        elif (lib := self._aten_lib(args[0])) is not None:  # legacy impl(lib, name, dispatch_key="")
            ns, keys, args = "aten", [self._key_arg(call, 2, "dispatch_key") or lib[1]], args[1:]
        elif self._dotted(call.func) == "torch.library.register_kernel":
            keys = self._device_keys(call, "device_types", "CompositeExplicitAutograd")
        else:  # impl(qualname, types, func=None, *, lib=None)
            keys = self._device_keys(call, "types", None)
        if not args:
            return
        targets = args[0].elts if isinstance(args[0], ast.List | ast.Tuple) else [args[0]]
        for t in targets:
            text = _const_str(t)
            if text is None:
                self._ref_expr(t, tuple(keys))
                continue
            parsed = parse_op_string(text, ns)
            for key in keys if parsed else ():
                self._add(*parsed, t, key)

    def _fallback(self, call: ast.Call) -> None:
        """`lib.fallback(fn, dispatch_key="", *, with_keyset=False)` on a Library("_" or "aten", ...)."""
        from torchtalk.reports.backend_cpp import BackendFallback

        _ns, lib_key = self._library_method(call.func, "fallback")
        key = self._key_arg(call, 1, "dispatch_key") or lib_key
        fn = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "fn"), None)
        if key and fn is not None:  # torch asserts a key
            name = self._dotted(fn) or ("<lambda>" if isinstance(fn, ast.Lambda) else "?")
            self.fallbacks.append(BackendFallback(key, name, self.file, call.lineno))


def _const_str(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None
