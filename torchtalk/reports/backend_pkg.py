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
        """The dispatch keys the package registers kernels or fallbacks for (C++)."""
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
    for path in py_files:
        rel = path.relative_to(base).as_posix()
        try:
            tree = ast.parse(path.read_bytes(), filename=rel)
        except SyntaxError as err:
            unparsed.append(f"{rel}:{err.lineno or 0}: {err.msg}")
            continue
        refs.update(_FileScanner(rel).scan(tree))
    cpp_refs, fallbacks, notes = scan_cpp_files(base, cpp_files)
    refs.update(cpp_refs)
    return PackageScan(root, tuple(sorted(refs)), len(py_files) + len(cpp_files), tuple(unparsed),
                       tuple(sorted(set(fallbacks))), tuple(notes))


class _FileScanner:
    """Walks one module: tracks aliases of torch.ops.aten and aten Library objects."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.aliases: dict[str, str] = {"aten": _ATEN}  # local name → dotted target
        self.libraries: set[str] = set()  # names bound to Library("aten", ...)
        self.refs: list[BackendRef] = []

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
            if value.args and _const_str(value.args[0]) == "aten":
                self.libraries.add(name)

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

    # -- refs ------------------------------------------------------------
    def _add(self, name: str, overload: str, node: ast.AST) -> None:
        self.refs.append(BackendRef(name, overload, self.file, node.lineno))

    def _ref_expr(self, node: ast.expr) -> None:
        """A table key / decorator argument: an op, a string, or a list of them."""
        if isinstance(node, ast.List | ast.Tuple | ast.Set):
            for elt in node.elts:
                self._ref_expr(elt)
            return
        text = _const_str(node)
        if text is not None:
            parsed = parse_op_string(text) if "::" in text else None
            if parsed:
                self._add(*parsed, node)
            return
        dotted = self._dotted(node)
        if dotted is None or not dotted.startswith(_ATEN + "."):
            return
        rest = dotted[len(_ATEN) + 1 :].split(".")
        if len(rest) == 1:
            self._add(rest[0], PACKET, node)
        elif len(rest) == 2:
            self._add(rest[0], "" if rest[1] == "default" else rest[1], node)

    def _ref_call_args(self, call: ast.Call) -> None:
        if self._is_library_impl(call.func):
            self._ref_library_impl(call)
            return
        for arg in call.args:
            self._ref_expr(arg)

    def _is_library_impl(self, func: ast.expr) -> bool:
        dotted = self._dotted(func)
        if dotted in ("torch.library.impl", "torch.library.register_kernel"):
            return True
        return (
            isinstance(func, ast.Attribute)
            and func.attr == "impl"
            and isinstance(func.value, ast.Name)
            and func.value.id in self.libraries
        )

    def _ref_library_impl(self, call: ast.Call) -> None:
        """`torch.library.impl("aten::x", ...)`, `torch.library.impl(lib, "x", ...)`, `lib.impl("x", fn)`."""
        args = list(call.args)
        ns = None
        if args and isinstance(args[0], ast.Name) and args[0].id in self.libraries:
            ns, args = "aten", args[1:]
        elif isinstance(call.func, ast.Attribute) and call.func.attr == "impl":
            ns = "aten" if self._dotted(call.func) not in ("torch.library.impl",) else None
        if not args:
            return
        targets = args[0].elts if isinstance(args[0], ast.List | ast.Tuple) else [args[0]]
        for t in targets:
            text = _const_str(t)
            if text is None:
                self._ref_expr(t)
                continue
            parsed = parse_op_string(text, ns)
            if parsed:
                self._add(*parsed, t)


def _const_str(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None
