"""Types of a function's local names, as the code states or implies them.

Note [Receiver types]: a method call `x.m(...)` is an ATen op only when `x`
may be a Tensor. The file summarizer types receivers from what the code says,
flow-insensitively, per function:

    a parameter's annotation     def f(memo: Optional[Set[str]] = None)
    a local annotation           seen: Dict[str, int] = {}
    an assigned literal          memo = set(); names = []; s = f"{x}"; d = {}
    an assigned constructor      self.linear = Linear(...)   → "()Linear" (a call result)
    *args / **kwargs             tuple / dict

Every binding of a name adds its types (a union); a binding we cannot type
(`for x in ...`, `x = foo().bar`, an unannotated parameter) adds the unknown
type "", and `None` adds nothing. A type is a string: "" (unknown), a dotted
name as resolved through the file's imports ("builtins.set", "typing.Dict",
"torch.Tensor", "torch.nn.modules.linear.Linear"), or "()" + the dotted name
of a callable (the result of calling it: an instance when it is a class, see
`extractors.python.model`). `is_plain` says which types are known not to be
Tensors (builtins, typing containers, the standard library): a call on such a
receiver is no edge. A receiver with an unknown type stays a guess ("?.m").

Example:
    >>> value_types(ast.parse("set()", mode="eval").body, resolve, scope)
    ('builtins.set',)
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable

UNKNOWN = ""
NONE = "None"
CALL = "()"  # prefix: the result of calling a dotted name

# Builtins whose result is never a Tensor, by the name a call uses.
_BUILTIN_VALUES = frozenset(
    "set frozenset dict list tuple str repr bytes bytearray int float bool complex len range "
    "enumerate zip map filter reversed sorted id hash ord chr format isinstance issubclass "
    "callable hasattr iter object".split()
)
# Builtin names an annotation may use.
_BUILTIN_TYPES = _BUILTIN_VALUES | {"type", "slice", "memoryview"}
# Annotations that say nothing about the value.
_OPAQUE = frozenset(
    {"typing.Any", "typing_extensions.Any", "builtins.object", "typing.Self", "typing_extensions.Self",
     "typing.TypeVar", "typing.AnyStr"}
)
# Modules none of whose classes or functions make a Tensor (not functools: reduce).
_PLAIN_MODULES = (
    "builtins.", "typing.", "typing_extensions.", "collections.", "weakref.", "queue.", "threading.",
    "re.", "pathlib.", "numpy.", "logging.", "io.", "os.", "enum.", "types.", "string.", "itertools.", "abc.",
    "inspect.", "dataclasses.", "argparse.", "json.", "math.", "datetime.", "socket.", "subprocess.",
    "contextlib.", "warnings.", "traceback.", "tempfile.", "shutil.", "time.",
)
_CASTS = frozenset({"typing.cast", "typing_extensions.cast"})
_NUMBERS = frozenset({"builtins.int", "builtins.float", "builtins.bool", "builtins.complex"})
_LITERALS = {
    ast.List: "builtins.list", ast.ListComp: "builtins.list", ast.Tuple: "builtins.tuple",
    ast.Set: "builtins.set", ast.SetComp: "builtins.set", ast.Dict: "builtins.dict",
    ast.DictComp: "builtins.dict", ast.GeneratorExp: "builtins.generator", ast.JoinedStr: "builtins.str",
}

Resolve = Callable[[ast.expr], "str | None"]


def is_plain(t: str) -> bool:
    """A type known not to be a Tensor (Note [Receiver types]).

    Example:
        >>> is_plain("typing.Set"), is_plain("torch.Tensor"), is_plain("")
        (True, False, False)
    """
    return t.startswith(_PLAIN_MODULES) and t not in _OPAQUE


def _constant(value: object) -> str:
    if value is None:
        return NONE
    if isinstance(value, bool | int | float | complex | str | bytes):
        return f"builtins.{type(value).__name__}"
    return UNKNOWN


def _builtin(node: ast.expr, names: frozenset[str], scope: dict[str, str]) -> str | None:
    if isinstance(node, ast.Name) and node.id in names and node.id not in scope:
        return f"builtins.{node.id}"
    return None


def ann_types(node: ast.expr | None, resolve: Resolve, scope: dict[str, str], depth: int = 0) -> tuple[str, ...]:
    """The types an annotation states: `Optional[Set[str]]` → ("typing.Set", "None")."""
    if node is None or depth > 8:
        return (UNKNOWN,)
    if isinstance(node, ast.Constant):
        if isinstance(node.value, str):  # a forward reference: "Module", "Optional[Tensor]"
            try:
                inner = ast.parse(node.value.strip(), mode="eval").body
            except SyntaxError:
                return (UNKNOWN,)
            return ann_types(inner, resolve, scope, depth + 1)
        return (NONE,) if node.value is None else (UNKNOWN,)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return ann_types(node.left, resolve, scope, depth + 1) + ann_types(node.right, resolve, scope, depth + 1)
    if isinstance(node, ast.Subscript):
        base = _ann_name(node.value, resolve, scope)
        last = base.rpartition(".")[2]
        if base.startswith(("typing.", "typing_extensions.")) or not base:
            args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if last == "Optional":
                return ann_types(args[0], resolve, scope, depth + 1) + (NONE,)
            if last == "Union":
                return tuple(t for a in args for t in ann_types(a, resolve, scope, depth + 1))
            if last in ("Annotated", "Final", "ClassVar"):
                return ann_types(args[0], resolve, scope, depth + 1)
        return (base,)
    if isinstance(node, ast.Name | ast.Attribute):
        return (_ann_name(node, resolve, scope),)
    return (UNKNOWN,)


def _ann_name(node: ast.expr, resolve: Resolve, scope: dict[str, str]) -> str:
    got = _builtin(node, _BUILTIN_TYPES, scope) or resolve(node) or UNKNOWN
    return UNKNOWN if got in _OPAQUE else got


def value_types(node: ast.expr, resolve: Resolve, scope: dict[str, str], depth: int = 0) -> tuple[str, ...]:
    """The types an assigned value implies; "=name" for another local name's types."""
    cls = type(node)
    lit = _LITERALS.get(cls)
    if lit is not None:
        return (lit,)
    if cls is ast.Constant:
        return (_constant(node.value),)
    if cls is ast.Name:
        return ("=" + node.id,)
    if depth > 4:
        return (UNKNOWN,)
    if cls is ast.IfExp:
        return value_types(node.body, resolve, scope, depth + 1) + value_types(node.orelse, resolve, scope, depth + 1)
    if cls is ast.BoolOp:
        return tuple(t for v in node.values for t in value_types(v, resolve, scope, depth + 1))
    if cls is ast.Call:
        got = _builtin(node.func, _BUILTIN_VALUES, scope)
        if got:
            return (got,)
        dotted = resolve(node.func) if isinstance(node.func, ast.Name | ast.Attribute) else None
        if dotted is None:
            return (UNKNOWN,)
        if dotted in _CASTS:  # cast(Tensor, x): the stated type
            return ann_types(node.args[0], resolve, scope) if node.args else (UNKNOWN,)
        return (dotted if is_plain(dotted) else CALL + dotted,)
    if cls is ast.BinOp and isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant | ast.JoinedStr):
        return value_types(node.left, resolve, scope, depth + 1)  # "%s" % x
    return (UNKNOWN,)


def _names(target: ast.expr) -> Iterable[str]:
    """The names a target binds: `a`, `(a, *b)`, `[a, b]`."""
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, ast.Tuple | ast.List):
        for e in target.elts:
            yield from _names(e)
    elif isinstance(target, ast.Starred):
        yield from _names(target.value)


class FnTypes:
    """The bindings of one function's local names and of its `self.x` attributes."""

    __slots__ = ("resolve", "scope", "self_name", "vals", "aug", "attrs", "refs", "globals", "_memo")

    def __init__(self, node: ast.FunctionDef | ast.AsyncFunctionDef, resolve: Resolve,
                 scope: dict[str, str], is_method: bool) -> None:
        self.resolve = resolve
        self.scope = scope
        self.vals: dict[str, list[str]] = {}
        self.aug: set[str] = set()
        self.attrs: list[tuple[str, tuple[str, ...], bool]] = []  # (attr, types, stated)
        self.refs: dict[str, list[str]] = {}  # local name → functions assigned to it
        self.globals: set[str] = set()  # `global x` / `nonlocal x`: not local
        self._memo: dict[str, frozenset[str]] = {}
        a = node.args
        params = [*a.posonlyargs, *a.args]
        self.self_name = params[0].arg if is_method and params else None
        for p in params[1:] if self.self_name else params:
            self._param(p)
        for p in a.kwonlyargs:
            self._param(p)
        defaults = zip(params[len(params) - len(a.defaults):], a.defaults, strict=True)
        for p, default in [*defaults, *zip(a.kwonlyargs, a.kw_defaults, strict=True)]:
            for ref in self._refs_of(default) if default is not None else ():
                self.refs.setdefault(p.arg, []).append(ref)  # def f(dump=dump_state): dump(...)
        if a.vararg:
            self.vals[a.vararg.arg] = ["builtins.tuple"]
        if a.kwarg:
            self.vals[a.kwarg.arg] = ["builtins.dict"]

    def _param(self, p: ast.arg) -> None:
        types = ann_types(p.annotation, self.resolve, self.scope) if p.annotation is not None else (UNKNOWN,)
        self.vals.setdefault(p.arg, []).extend(types)

    def _add(self, name: str, types: Iterable[str]) -> None:
        self.vals.setdefault(name, []).extend(types)

    def _unknown(self, target: ast.expr) -> None:
        for n in _names(target):
            self._add(n, (UNKNOWN,))

    def note(self, node: ast.AST) -> None:
        """Record what a binding node (assignment, loop, with, ...) says."""
        cls = type(node)
        if cls is ast.Assign:
            for t in node.targets:
                self._assign(t, node.value)
        elif cls is ast.AnnAssign:
            types = ann_types(node.annotation, self.resolve, self.scope)
            if isinstance(node.target, ast.Name):
                self._add(node.target.id, types)
            elif self._is_self_attr(node.target):
                self.attrs.append((node.target.attr, types, True))
        elif cls is ast.AugAssign:
            if isinstance(node.target, ast.Name):
                self.aug.add(node.target.id)
        elif cls is ast.For or cls is ast.AsyncFor or cls is ast.comprehension:
            self._unknown(node.target)
        elif cls is ast.withitem:
            if node.optional_vars is not None:
                self._unknown(node.optional_vars)
        elif cls is ast.NamedExpr:
            self._add(node.target.id, value_types(node.value, self.resolve, self.scope))
        elif cls is ast.ExceptHandler:
            if node.name:
                self._add(node.name, (UNKNOWN,))
        elif cls is ast.Lambda:
            a = node.args
            for p in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg):
                if p is not None:
                    self._add(p.arg, (UNKNOWN,))
        elif cls is ast.Global or cls is ast.Nonlocal:
            self.globals.update(node.names)

    def _is_self_attr(self, target: ast.expr) -> bool:
        return (
            self.self_name is not None and isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name) and target.value.id == self.self_name
        )

    def _assign(self, target: ast.expr, value: ast.expr) -> None:
        if isinstance(target, ast.Name):
            self._add(target.id, value_types(value, self.resolve, self.scope))
            for ref in self._refs_of(value):
                self.refs.setdefault(target.id, []).append(ref)
        elif self._is_self_attr(target):
            self.attrs.append((target.attr, value_types(value, self.resolve, self.scope), False))
        else:
            self._unknown(target)

    def _refs_of(self, value: ast.expr) -> list[str]:
        """`func = _multi_tensor_adam` (or `a if c else b`): the functions a later `func()` calls."""
        if isinstance(value, ast.Name | ast.Attribute):
            got = self.resolve(value)
            return [got] if got else []
        if isinstance(value, ast.IfExp):
            return self._refs_of(value.body) + self._refs_of(value.orelse)
        return []

    def is_local(self, name: str) -> bool:
        return (name in self.vals or name in self.aug) and name not in self.globals

    def types(self, name: str) -> frozenset[str]:
        """The union of the types of `name`'s bindings, without None; {""} when untyped."""
        hit = self._memo.get(name)
        if hit is None:
            self._memo[name] = frozenset((UNKNOWN,))  # cycle guard: x = y; y = x
            hit = self._memo[name] = self._types(name)
        return hit

    def _types(self, name: str) -> frozenset[str]:
        out: set[str] = set()
        for t in self.vals.get(name, (UNKNOWN,)):
            if t.startswith("="):
                out |= self.types(t[1:]) if self.is_local(t[1:]) else {UNKNOWN}
            else:
                out.add(t)
        if name in self.aug and out & _NUMBERS:
            out.add(UNKNOWN)  # total = 0; total += t.sum()
        out.discard(NONE)
        return frozenset(out) if out else frozenset((UNKNOWN,))

    def resolved_attrs(self) -> list[tuple[str, str, bool]]:
        """The `self.x` bindings with local names resolved: (attr, type, stated)."""
        out = []
        for attr, types, stated in self.attrs:
            for t in types:
                if t.startswith("="):
                    out.extend((attr, u, stated) for u in sorted(self.types(t[1:]) if self.is_local(t[1:]) else {UNKNOWN}))
                elif t != NONE:
                    out.append((attr, t, stated))
        return out


def class_attr(stmt: ast.stmt, resolve: Resolve, scope: dict[str, str]) -> list[tuple[str, str, bool]]:
    """A class body's `x: T` / `x = v`: (attr, type, stated) rows."""
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        return [(stmt.target.id, t, True) for t in ann_types(stmt.annotation, resolve, scope) if t != NONE]
    if isinstance(stmt, ast.Assign):
        out = []
        for target in stmt.targets:
            if isinstance(target, ast.Name):
                types = value_types(stmt.value, resolve, scope)
                out.extend((target.id, UNKNOWN if t.startswith("=") else t, False) for t in types if t != NONE)
        return out
    return []
