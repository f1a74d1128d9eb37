"""One Python file → a `FileSummary`: what the layers need from it, nothing more.

A summary is a pure function of the file's bytes and its path (the module
name), so it is cached by content hash (see `extractors.python.corpus`) and
kept per file (Note [Per-file summaries]): issue 9 can re-summarize one
changed file and redo only the global pass.

Names are resolved *through the file's own imports* here (`F.gelu` →
`torch.nn.functional.gelu`); resolving them across modules (re-exports, star
imports, aliases) is the global pass in `extractors.python.names`.

Example:
    >>> s = summarize(b"import torch.nn.functional as F\\ndef f(x):\\n    return F.gelu(x)\\n",
    ...               "torch/demo.py")
    >>> s.defs[0].calls
    (('torch.nn.functional.gelu', 3),)
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field

from extractors.python.localtypes import (
    UNKNOWN,
    FnTypes,
    ann_types,
    class_attr,
    is_plain,
    value_types,
)

# Expression IR (Note [Expression IR]): a tiny tuple language for the module-level
# values and decorator arguments the layers evaluate statically:
#   ("ref", dotted)            a name resolved through the file's imports
#   ("str", text)              a string literal
#   ("seq", (ir, ...))         list / tuple / set literal
#   ("star", ir)               *x inside a literal
#   ("add", ir, ir)            a + b
#   ("comp", src_ir, conds)    [x for x in src if ...] / filter(lambda x: ..., src)
#   ("entry", index)           an OpInfo-like call, index into FileSummary.entries
#   ("call", dotted, (ir, ...), ((kw, ("ref", d)), ...))  any other call (first
#                              positional args; keyword args that are names)
#   ("other",)                 anything else
# conds: ("isinstance", dotted) | ("name_in", names) | ("name_not_in", names) | ("unknown",)

OTHER = ("other",)
_MAX_IR_ITEMS = 5000


# _meta_registrations.py's `_create_unary_float_meta_func(aten.x)` and friends:
# functions whose body applies `@register_meta(func)` to their argument.
META_MAKER = re.compile(r"_create_\w*_meta_func")


@dataclass(frozen=True)
class Deco:
    """A decorator: `target` resolved dotted name, its call arguments as IR."""

    target: str
    line: int
    args: tuple = ()
    kwargs: tuple = ()  # ((name, ir), ...)
    called: bool = False


@dataclass(frozen=True)
class Def:
    """A function, method or class. `qual` is relative to the module ("Linear.forward").

    calls: ((callee, line), ...) in source order, where callee is a resolved
    dotted name, "self.m" (a call of self.m, or of an attribute m of self),
    "super.m", "?.m" (a method call on a receiver that may be a Tensor, e.g.
    `x.add_(y)`), or "@T.__call__" (a call of a local holding an instance of
    type T, Note [Receiver types]). A method call on a receiver known not to be
    a Tensor (`memo = set(); memo.add(x)`) is left out. A call of a local
    variable gives one row per function assigned to it (`func = _fused_adam`
    ... `func(...)`).
    receivers: ((line, m, types), ...): the types of the receiver of the "?.m"
    call at `line` when the code states or implies them ("" for unknown,
    "#a" for self's attribute a); a "?.m" call without one is untyped.
    attrs (classes): ((attr, type, stated), ...), the types of `self.attr = v`
    in its methods and `attr: T` / `attr = v` in its body; `stated` for annotations.
    returns (functions): the types its return annotation states.
    """

    qual: str
    kind: str  # "function" | "class" | "method"
    line: int
    end_line: int
    bases: tuple[str, ...] = ()
    decorators: tuple[Deco, ...] = ()
    calls: tuple[tuple[str, int], ...] = ()
    attrs: tuple[tuple[str, str, bool], ...] = ()
    returns: tuple[str, ...] = ()
    receivers: tuple[tuple[int, str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True)
class Entry:
    """An OpInfo-like constructor call (`OpInfo('softmax', aten_name=...)`, `ModuleInfo(torch.nn.Linear)`)."""

    line: int
    cls: str  # resolved dotted name of the constructor
    name: str  # first positional string (or the module ref for ModuleInfo)
    variant: str = ""
    aten_name: str = ""
    torch_opinfo_name: str = ""
    torch_opinfo_variant: str = ""
    aliases: tuple[str, ...] = ()  # `aliases=('absolute',)`: other names of the op it tests


@dataclass(frozen=True)
class FileSummary:
    file: str  # relative POSIX path
    module: str  # dotted module name
    lines: int = 0
    error: tuple[int, str] | None = None  # (line, message) when it does not parse
    imports: tuple[tuple[str, str, int], ...] = ()  # (local name, dotted target, line)
    star_imports: tuple[str, ...] = ()
    assigns: tuple[tuple[str, int, tuple], ...] = ()  # module level: (name, line, ir)
    defs: tuple[Def, ...] = ()
    entries: tuple[Entry, ...] = ()
    module_calls: tuple[tuple[str, int], ...] = ()  # calls in module-level expression statements
    decorated_calls: tuple[tuple[Deco, tuple], ...] = field(default=())  # f(args)(fn): (deco, fn ir)
    module_registrations: tuple[Deco, ...] = ()  # module-level register*(args) calls


def module_name(rel: str) -> str:
    """`torch/nn/functional.py` → `torch.nn.functional`; `torch/nn/__init__.py` → `torch.nn`."""
    parts = rel[:-3].split("/") if rel.endswith(".py") else rel.split("/")
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def summarize(source: bytes, rel: str) -> FileSummary:
    """Summarize one file; a syntax error gives a summary with `error` set."""
    mod = module_name(rel)
    lines = source.count(b"\n") + 1
    try:
        tree = ast.parse(source, filename=rel)
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None) or 1
        return FileSummary(rel, mod, lines, (int(line), str(getattr(exc, "msg", exc))))
    return _Summarizer(rel, mod, rel.endswith("__init__.py")).run(tree, lines)


class _Summarizer:
    def __init__(self, rel: str, mod: str, is_pkg: bool) -> None:
        self.rel = rel
        self.mod = mod
        self.pkg = mod if is_pkg else mod.rpartition(".")[0]
        self.scope: dict[str, str] = {}  # file-level name → dotted
        self.imports: list[tuple[str, str, int]] = []
        self.stars: list[str] = []
        self.assigns: list[tuple[str, int, tuple]] = []
        self.defs: list[Def] = []
        self.entries: list[Entry] = []
        self.module_calls: list[tuple[str, int]] = []
        self.decorated_calls: list[tuple[Deco, tuple]] = []
        self.module_registrations: list[Deco] = []
        self._fn: FnTypes | None = None  # the function whose body is being read
        self._attrs: list[list[tuple[str, str, bool]]] = []  # per enclosing class

    def run(self, tree: ast.Module, lines: int) -> FileSummary:
        self._collect_names(tree)
        for stmt in tree.body:
            self._module_stmt(stmt)
        return FileSummary(
            self.rel, self.mod, lines, None, tuple(self.imports), tuple(self.stars),
            tuple(self.assigns), tuple(self.defs), tuple(self.entries),
            tuple(self.module_calls), tuple(self.decorated_calls), tuple(self.module_registrations),
        )

    # ---------------------------------------------------------------- names
    def _collect_names(self, tree: ast.Module) -> None:
        """Module-level definitions and every import (function-level ones too)."""
        for stmt in tree.body:
            self._top_names(stmt)
        self._scan_imports(tree.body)

    def _scan_imports(self, body: list[ast.stmt]) -> None:
        """Imports among `body` and its if/try blocks (not inside defs)."""
        for stmt in body:
            if isinstance(stmt, ast.Import | ast.ImportFrom):
                self._import(stmt)
            elif isinstance(stmt, ast.If | ast.Try | ast.With):
                self._scan_imports(_nested_bodies(stmt))

    def _top_names(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            self.scope.setdefault(stmt.name, f"{self.mod}.{stmt.name}")
        elif isinstance(stmt, ast.Assign | ast.AnnAssign):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    self.scope.setdefault(t.id, f"{self.mod}.{t.id}")
        elif isinstance(stmt, ast.If | ast.Try):
            for sub in _nested_bodies(stmt):
                self._top_names(sub)

    def _import(self, node: ast.Import | ast.ImportFrom) -> None:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    self._bind(a.asname, a.name, node.lineno)
                else:
                    head = a.name.split(".")[0]
                    self._bind(head, head, node.lineno)
            return
        base = self._from_base(node)
        if base is None:
            return
        for a in node.names:
            if a.name == "*":
                if base not in self.stars:
                    self.stars.append(base)
                continue
            self._bind(a.asname or a.name, f"{base}.{a.name}" if base else a.name, node.lineno)

    def _from_base(self, node: ast.ImportFrom) -> str | None:
        if not node.level:
            return node.module or ""
        parts = self.pkg.split(".") if self.pkg else []
        up = node.level - 1
        if up > len(parts):
            return None
        parts = parts[: len(parts) - up] if up else parts
        if node.module:
            parts = parts + node.module.split(".")
        return ".".join(parts)

    def _bind(self, local: str, target: str, line: int) -> None:
        # An import wins over a same-named module-level def only when none exists.
        self.imports.append((local, target, line))
        if local not in self.scope or self.scope[local] == f"{self.mod}.{local}":
            self.scope[local] = target

    def resolve(self, expr: ast.expr) -> str | None:
        """A Name/Attribute chain → dotted name through the file scope, or None."""
        chain = name_chain(expr)
        head = self.scope.get(chain[0]) if chain else None
        if head is None:
            return None
        return ".".join([head, *chain[1]])

    def callee(self, func: ast.expr) -> str | tuple | None:
        """The callee of a call: resolved dotted, "self.m", "super.m" or "?.m";
        ("typed", m, types) for a method of a receiver typed by its expression."""
        if isinstance(func, ast.Name):
            return self.scope.get(func.id)
        if not isinstance(func, ast.Attribute):
            return None
        value = func.value
        if isinstance(value, ast.Name) and value.id in ("self", "cls") and value.id not in self.scope:
            return f"self.{func.attr}"
        if (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id == "super"
        ):
            return f"super.{func.attr}"
        if (
            isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name)
            and value.value.id in ("self", "cls") and value.value.id not in self.scope
        ):
            return ("typed", func.attr, (f"#{value.attr}",))  # self.a.m(): typed by attribute a
        dotted = self.resolve(func)
        if dotted is not None:
            return dotted
        if type(value) in _TYPED_RECEIVERS:  # "".join(...), set().add(...), Linear(...).forward(...)
            return ("typed", func.attr, value_types(value, self.resolve, self.scope))
        return f"?.{func.attr}"

    # ---------------------------------------------------------------- statements
    def _module_stmt(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            self._def(stmt, "", in_class=False)
            return
        if isinstance(stmt, ast.If | ast.Try):
            for sub in _nested_bodies(stmt):
                self._module_stmt(sub)
            return
        if isinstance(stmt, ast.Assign | ast.AnnAssign | ast.AugAssign):
            self._assign(stmt)
        elif isinstance(stmt, ast.Expr):  # e.g. register_decomposition(aten.x)(fn)
            self._calls_in(stmt, self.module_calls, module_level=True)
            call = stmt.value
            if isinstance(call, ast.Call) and call.args and not isinstance(call.func, ast.Call):
                deco = self._deco(call)
                last = deco.target.rpartition(".")[2]
                if last.startswith("register") or META_MAKER.fullmatch(last):
                    # register_inplace(aten.addmm_, aten.addmm); _create_unary_float_meta_func(aten.x)
                    self.module_registrations.append(deco)
        self.module_calls = [c for c in self.module_calls if type(c[0]) is str]

    def _assign(self, stmt: ast.Assign | ast.AnnAssign | ast.AugAssign) -> None:
        if stmt.value is None:
            return
        if isinstance(stmt, ast.Assign):
            names = [t.id for t in stmt.targets if isinstance(t, ast.Name)]
            if not names:
                return
            value = self.ir(stmt.value)
        else:
            if not isinstance(stmt.target, ast.Name):
                return
            names = [stmt.target.id]
            value = self.ir(stmt.value)
            if isinstance(stmt, ast.AugAssign):
                if not isinstance(stmt.op, ast.Add):
                    return
                value = ("add", ("ref", f"{self.mod}.{names[0]}"), value)
        for name in names:
            self.assigns.append((name, stmt.lineno, value))

    def _def(self, node: ast.AST, prefix: str, in_class: bool) -> None:
        qual = f"{prefix}{node.name}"
        decos = tuple(self._deco(d) for d in node.decorator_list)
        if isinstance(node, ast.ClassDef):
            bases = tuple(b for b in (self.resolve(x) for x in node.bases) if b)
            calls: list[tuple[str, int]] = []
            attrs: list[tuple[str, str, bool]] = []
            self._attrs.append(attrs)
            for stmt in node.body:
                if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    self._def(stmt, f"{qual}.", in_class=True)
                else:
                    self._calls_in(stmt, calls)
                    attrs.extend(class_attr(stmt, self.resolve, self.scope))
            self._attrs.pop()
            calls, receivers = self._finish(calls, None)
            self.defs.append(
                Def(qual, "class", node.lineno, node.end_lineno or node.lineno, bases, decos, calls,
                    tuple(dict.fromkeys(attrs)), (), receivers)
            )
            return
        calls = []
        nested: list[ast.AST] = []
        self._scan_imports(node.body)
        is_method = in_class and not any(d.target.endswith("staticmethod") for d in decos)
        fn = self._fn = FnTypes(node, self.resolve, self.scope, is_method)
        for stmt in node.body:
            self._calls_in(stmt, calls, nested=nested)
        for arg in node.args.defaults + node.args.kw_defaults:
            if arg is not None:
                self._calls_in(arg, calls)
        self._fn = None
        calls, receivers = self._finish(calls, fn)
        if in_class and self._attrs:
            self._attrs[-1].extend(fn.resolved_attrs())
        kind = "method" if in_class else "function"
        returns = ann_types(node.returns, self.resolve, self.scope) if node.returns is not None else ()
        self.defs.append(Def(qual, kind, node.lineno, node.end_lineno or node.lineno, (), decos, calls,
                             (), returns, receivers))
        for sub in nested:
            self._def(sub, f"{qual}.", in_class=False)

    def _deco(self, node: ast.expr) -> Deco:
        if isinstance(node, ast.Call):
            target = self.resolve(node.func) or _tail(node.func)
            args = tuple(self.ir(a) for a in node.args[:4])
            kwargs = tuple((k.arg, self.ir(k.value)) for k in node.keywords if k.arg)
            return Deco(target, node.lineno, args, kwargs, True)
        return Deco(self.resolve(node) or _tail(node), node.lineno)

    def _calls_in(self, root: ast.AST, out: list, module_level: bool = False, nested: list | None = None) -> None:
        """Every call under `root`, not descending into nested defs (collected in `nested`).

        The hot loop of the layer: it skips leaf nodes (names, constants) and
        annotations instead of using ast.iter_child_nodes.
        """
        stack = [root]
        fields_of = _CHILD_FIELDS
        while stack:
            node = stack.pop()
            cls = type(node)
            if cls in _DEFS and node is not root:
                if nested is not None:
                    nested.append(node)
                continue
            if cls is ast.Call:
                self._call(node, out, module_level)
            elif cls in _BINDERS and self._fn is not None:
                self._fn.note(node)
            fields = fields_of.get(cls)
            if fields is None:
                fields = fields_of[cls] = tuple(f for f in cls._fields if f not in _SKIP_FIELDS)
            for f in fields:
                v = getattr(node, f, None)
                if type(v) is list:
                    stack.extend(x for x in v if type(x) not in _LEAVES and isinstance(x, ast.AST))
                elif v is not None and type(v) not in _LEAVES and isinstance(v, ast.AST):
                    stack.append(v)

    def _call(self, node: ast.Call, out: list, module_level: bool) -> None:
        func = node.func
        if self._fn is not None and (target := _deferred(func)) is not None:
            # x(...) / x.m(...) with x maybe a local name: bound after the body is read
            out.append((target, node.lineno))
            return
        target = self.callee(func)
        if target is not None:
            out.append((target, node.lineno))
        if module_level and isinstance(func, ast.Call) and func.args:
            # register_decomposition(aten.x)(fn): a decorator applied by hand
            deco = self._deco(func)
            self.decorated_calls.append((deco, self.ir(node.args[0]) if node.args else OTHER))

    def _finish(self, calls: list, fn: FnTypes | None) -> tuple[tuple, tuple]:
        """(calls, receivers) of a body, its deferred callees bound now that its local
        names are known (`fn`; None for a class body), in source order (the first call of
        a callee first); one string object per callee, so a summary pickles each once."""
        out: list[tuple[str, int]] = []
        receivers: list[tuple[int, str, tuple[str, ...]]] = []
        for callee, line in calls:
            if type(callee) is str:
                out.append((callee, line))
                continue
            kind = callee[0]
            if kind == "name":
                name = callee[1]
                if fn is not None and fn.is_local(name):
                    out.extend((t, line) for t in fn.refs.get(name, ()))
                    out.extend((f"@{t}.__call__", line) for t in sorted(fn.types(name)) if t and not is_plain(t))
                elif name in self.scope:
                    out.append((self.scope[name], line))
            elif kind == "recv":
                _, name, m, func = callee
                if fn is not None and fn.is_local(name):
                    _method(fn.types(name), m, line, out, receivers)
                else:
                    target = self.callee(func)  # a dotted name or "?.m"
                    if target is not None:
                        out.append((target, line))
            else:  # "typed"
                _method(callee[2], callee[1], line, out, receivers)
        out.sort(key=_line)
        return tuple((sys.intern(c), line) for c, line in out), tuple(receivers)

    # ---------------------------------------------------------------- IR
    def ir(self, node: ast.expr, depth: int = 0) -> tuple:
        """Convert an expression to the IR (Note [Expression IR])."""
        if depth > 12:
            return OTHER
        if isinstance(node, ast.Constant):
            return ("str", node.value) if isinstance(node.value, str) else OTHER
        if isinstance(node, ast.Name | ast.Attribute):
            dotted = self.resolve(node)
            return ("ref", dotted) if dotted else OTHER
        if isinstance(node, ast.List | ast.Tuple | ast.Set):
            return ("seq", tuple(self.ir(e, depth + 1) for e in node.elts[:_MAX_IR_ITEMS]))
        if isinstance(node, ast.Starred):
            return ("star", self.ir(node.value, depth + 1))
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return ("add", self.ir(node.left, depth + 1), self.ir(node.right, depth + 1))
        if isinstance(node, ast.ListComp | ast.GeneratorExp | ast.SetComp) and len(node.generators) == 1:
            gen = node.generators[0]
            conds = tuple(c for cond in gen.ifs for c in _conds(cond, self))
            return ("comp", self.ir(gen.iter, depth + 1), conds)
        if isinstance(node, ast.Call):
            return self._call_ir(node, depth)
        return OTHER

    def _call_ir(self, node: ast.Call, depth: int) -> tuple:
        fn = self.resolve(node.func) or _tail(node.func)
        last = fn.rpartition(".")[2]
        if (last.endswith("Info") or (last.startswith("make_") and last.endswith("opinfo"))) and last not in _NOT_ENTRIES:
            self.entries.append(self._entry(node, fn))
            return ("entry", len(self.entries) - 1)
        if last == "filter" and len(node.args) == 2:
            f = node.args[0]
            conds = tuple(_conds(f.body, self)) if isinstance(f, ast.Lambda) else (("unknown",),)
            return ("comp", self.ir(node.args[1], depth + 1), conds)
        if last in ("list", "tuple", "set", "sorted") and len(node.args) == 1:
            return self.ir(node.args[0], depth + 1)
        kwargs = tuple(
            (k.arg, ("ref", r)) for k in node.keywords[:8]
            if k.arg and isinstance(k.value, ast.Name | ast.Attribute) and (r := self.resolve(k.value))
        )
        return ("call", fn, tuple(self.ir(a, depth + 1) for a in node.args[:3]), kwargs)

    def _entry(self, node: ast.Call, fn: str) -> Entry:
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        first = node.args[0] if node.args else kw.get("name") or kw.get("module_cls")
        name = ""
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            name = first.value
        elif first is not None:
            name = self.resolve(first) or ""
        last = fn.rpartition(".")[2]
        if not name and last.startswith("make_") and last.endswith("_opinfo"):
            name = last[len("make_"):-len("_opinfo")]  # make_mvlgamma_opinfo(...) → "mvlgamma"
        return Entry(
            node.lineno, fn, name,
            _str(kw.get("variant_test_name")), _str(kw.get("aten_name")),
            _str(kw.get("torch_opinfo_name")), _str(kw.get("torch_opinfo_variant_name")),
            _strs(kw.get("aliases")),
        )


_DEFS = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef})
_LEAVES = frozenset({ast.Name, ast.Constant, ast.Load, ast.Store, ast.Del, ast.Pass, ast.Break, ast.Continue})
_SKIP_FIELDS = frozenset({"ctx", "annotation", "returns", "type_comment", "type_params", "id", "arg", "attr", "name", "names", "module", "level", "op", "ops", "kind", "is_async", "conversion"})
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}

_NOT_ENTRIES = frozenset({"DecorateInfo", "ErrorInputs", "SampleInfo", "TypeInfo", "FunctionInfo"})


_BINDERS = frozenset({
    ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor, ast.comprehension, ast.withitem,
    ast.NamedExpr, ast.ExceptHandler, ast.Lambda, ast.Global, ast.Nonlocal,
})
_TYPED_RECEIVERS = frozenset({
    ast.Constant, ast.JoinedStr, ast.List, ast.ListComp, ast.Tuple, ast.Set, ast.SetComp, ast.Dict,
    ast.DictComp, ast.Call,
})


def _line(call: tuple[str, int]) -> int:
    return call[1]


def _deferred(func: ast.expr) -> tuple | None:
    """("name", x) for `x(...)`, ("recv", x, m, func) for `x.m(...)`; None for other callees."""
    if type(func) is ast.Name:
        return ("name", func.id)
    if type(func) is ast.Attribute and type(func.value) is ast.Name and func.value.id not in ("self", "cls"):
        return ("recv", func.value.id, func.attr, func)
    return None


def _method(types: Iterable[str], m: str, line: int, out: list, receivers: list) -> None:
    """`x.m(...)` with `x` of `types` (Note [Receiver types]): no call when every type
    is known not to be a Tensor, else "?.m", with the types unless all are unknown."""
    typed = tuple(sorted({t for t in types if not is_plain(t)}))
    if not typed:
        return
    out.append((f"?.{m}", line))
    if typed != (UNKNOWN,):
        receivers.append((line, m, typed))


def _strs(node: ast.expr | None) -> tuple[str, ...]:
    """The string constants of a tuple or list literal (`aliases=('absolute',)`)."""
    if isinstance(node, ast.Tuple | ast.List):
        return tuple(e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str))
    return ()


def _str(node: ast.expr | None) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return ""


def name_chain(node: ast.expr) -> tuple[str, tuple[str, ...]] | None:
    """`a.b.c` → ("a", ("b", "c")); None unless `node` is a Name/Attribute chain."""
    attrs: list[str] = []
    while isinstance(node, ast.Attribute):
        attrs.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return node.id, tuple(reversed(attrs))


def _tail(node: ast.expr) -> str:
    """The unresolved dotted text of a Name/Attribute chain ("" otherwise)."""
    attrs: list[str] = []
    while isinstance(node, ast.Attribute):
        attrs.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        attrs.append(node.id)
    elif isinstance(node, ast.Call):
        return _tail(node.func)
    return ".".join(reversed(attrs))


def _conds(node: ast.expr, s: _Summarizer) -> list[tuple]:
    """Filter conditions on an OpInfo list (`isinstance(op, X)`, `op.name in (...)`)."""
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
        return [c for v in node.values for c in _conds(v, s)]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "isinstance"
        and len(node.args) == 2
    ):
        cls = s.resolve(node.args[1]) or _tail(node.args[1])
        return [("isinstance", cls)]
    if (
        isinstance(node, ast.Compare)
        and len(node.ops) == 1
        and isinstance(node.left, ast.Attribute)
        and node.left.attr == "name"
    ):
        op, right = node.ops[0], node.comparators[0]
        names = _literal_strs(right)
        if names is not None:
            if isinstance(op, ast.Eq | ast.In):
                return [("name_in", names)]
            if isinstance(op, ast.NotEq | ast.NotIn):
                return [("name_not_in", names)]
    return [("unknown",)]


def _literal_strs(node: ast.expr) -> tuple[str, ...] | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return (node.value,)
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        out = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        return tuple(out) if len(out) == len(node.elts) else None
    return None


def _nested_bodies(stmt: ast.If | ast.Try | ast.With) -> list[ast.stmt]:
    out = list(stmt.body) + list(getattr(stmt, "orelse", ()))
    if isinstance(stmt, ast.Try):
        for h in stmt.handlers:
            out.extend(h.body)
        out.extend(stmt.finalbody)
    return out
