"""Walk one parsed translation unit: the calls made by functions of its main file.

Note [Precise naming]: a function is named the way the fast tier names it
(facts/schema.dl Note [Fact identifiers]): its semantic parents joined with
`::` — namespaces, classes and class templates by their bare name (no
template arguments; an unnamed class adds nothing, as in the fast tier), then
the function's own name. A function of internal linkage carries its file
(Note [Internal linkage ids] in extractors/cpp/names.py): an anonymous
namespace is `(anonymous:FILE)`, FILE being where that namespace block is
written, and a `static` function at namespace scope outside one gets the part
`(static:FILE)` before its name, FILE being where it is declared; paths are
relative to the tree root (or to the generated headers' root). Inline namespaces are kept (they are written in source); the
`inline namespace CPU_CAPABILITY` of the per-arch kernels (the macro expands to
DEFAULT, AVX2, ...) is named `CPU_CAPABILITY`, as written. `extern "C"` blocks
add nothing. Template specializations share one name; the ids of the edges
are `Namer.fn_id`s, the name with its parameter list (Note [Overload ids]),
which the layer drops where the name is not overloaded.

Note [Precise edges]: an edge is kept when its caller is a function *defined
in the TU's main file* (calls inside a lambda belong to the enclosing
function, as in the fast tier) and its callee is declared in a file of the
tree (or a header generated from it, e.g. ATen/ops/*.h). A call of ATen's C++
API that reaches an op (Note [Op calls by the compiler] in api.py) is an
`OpCall` instead (the edge is kept too when the API function is the tree's,
e.g. a TensorBase method, unless it is an operator); a temporary object
written with its class's name (`AdvancedIndex(self, indices)`) is an edge to
the constructor the tree declares, as in the fast tier; a call of a CUDA
`__global__` function (`k<<<...>>>(...)`, or `v<<<...>>>` through a variable
whose initializer names the kernel) is a `Launch`. Calls to system and
standard-library functions, other constructions (a variable's, a
conversion, a copy), destructors and other operators are counted, not kept. A call's line is where its callee's name is spelled: inside
a macro argument (AT_DISPATCH lambdas, TORCH_CHECK conditions) that is the
argument's own line; a call written in a macro's body is placed at the line
where the macro is used. A call in a template that depends on a template
parameter has no single callee; when all the candidates it names share one
qualified name it gets that name, and a member call on an object whose type
is a class template of the tree (`params.use_nnpack(...)` with `const
ConvParams<T>& params`), or a call qualified by one (`Vec::loadu(...)` with
`using Vec = Vectorized<scalar_t>`), gets the methods of that name the
template (or a base) declares, and a call of a functor whose type is one
(`maxFunc(a, b)` with `MaxFloat<scalar_t, accscalar_t> maxFunc`) gets its
`operator()`s; otherwise it is counted as unresolved.

Note [Dependent operators and constructions]: in open_calls.py.

Note [Walk cost]: the walk runs in Python over libclang's C API, so what
costs is crossing into libclang per node. Three things kept it slow (0.64 s
of a TU's ~4.5 s, measured on 12 native TUs): asking each of the TU's
top-level declarations (those of every header outside the PCH) for its
`location.file`, which makes libclang compute a line and column and so read
the line table of every header; `get_children` per node (a callback and a
list per node, plus a null-cursor comparison per child); and `kind` per node
(an enum lookup). So the top-level declarations are picked with
clang_Location_isFromMainFile, a declaration's file is asked for without its
line (`file_of`), and each main-file declaration is walked by one recursive
clang_visitChildren that compares raw kind ids and skips SKIP_KINDS
subtrees.
"""

from __future__ import annotations

import ctypes
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from clang import cindex as ci

from extractors.clang.open_calls import (
    RECORD_KINDS,
    fitting,
    is_construction,
    methods,
    name_after,
    names_no_one,
    object_class,
    operator_ref,
    overloaded_decls,
    record_of,
    unwrapped,
)
from extractors.cpp.names import anon_ns, is_operator, sig_text, static_scope

K = ci.CursorKind
_FREE_KINDS = frozenset({K.FUNCTION_DECL, K.FUNCTION_TEMPLATE})

FUNC_KINDS = frozenset({
    K.FUNCTION_DECL, K.CXX_METHOD, K.CONSTRUCTOR, K.DESTRUCTOR,
    K.FUNCTION_TEMPLATE, K.CONVERSION_FUNCTION,
})
CALLEE_KINDS = frozenset({K.FUNCTION_DECL, K.CXX_METHOD, K.FUNCTION_TEMPLATE})
SCOPE_KINDS = frozenset({
    K.NAMESPACE, K.CLASS_DECL, K.STRUCT_DECL, K.UNION_DECL, K.CLASS_TEMPLATE,
    K.CLASS_TEMPLATE_PARTIAL_SPECIALIZATION, K.ENUM_DECL,
})
# A call through one of these is a call of the function (pointer) it holds.
VAR_KINDS = frozenset({K.VAR_DECL, K.PARM_DECL, K.FIELD_DECL})
# The callee expression of a call whose location is the callee's name.
NAME_KINDS = frozenset({K.MEMBER_REF_EXPR, K.DECL_REF_EXPR, K.OVERLOADED_DECL_REF})
# Cursors whose subtree cannot contain a call made by a function body we keep.
SKIP_KINDS = frozenset({
    K.TYPE_REF, K.TEMPLATE_REF, K.NAMESPACE_REF, K.TYPEDEF_DECL, K.TYPE_ALIAS_DECL,
    K.TEMPLATE_TYPE_PARAMETER, K.USING_DIRECTIVE, K.USING_DECLARATION,
    K.INTEGER_LITERAL, K.FLOATING_LITERAL, K.STRING_LITERAL, K.CHARACTER_LITERAL,
})


@dataclass(frozen=True, order=True)
class Edge:
    """One `calls_precise` row: `caller` calls `callee` at file:line."""

    caller: str
    callee: str
    file: str
    line: int


@dataclass(frozen=True, order=True)
class OpCall:
    """One `calls_op(caller, name, file, line, "compiler")` row."""

    caller: str
    name: str
    file: str
    line: int


@dataclass(frozen=True, order=True)
class Launch:
    """`host` launches __global__ `kernel` at file:line (`<<<>>>`)."""

    host: str
    kernel: str
    file: str
    line: int


@dataclass
class TuFacts:
    """What the walk of one TU found (edges deduplicated, the rest counted).

    `sites`: the call expressions inside functions of the main file; those
    the compiler left without a callee are counted in dropped["unresolved"].
    """

    edges: set[Edge] = field(default_factory=set)
    ops: set[OpCall] = field(default_factory=set)
    launches: set[Launch] = field(default_factory=set)
    dropped: Counter = field(default_factory=Counter)  # reason -> calls not kept
    unresolved: set[tuple[str, str, int]] = field(default_factory=set)  # (caller, name, line)
    sites: int = 0


def _bind(name: str, argtypes: list, restype=None):
    fn = getattr(ci.conf.lib, name)
    fn.argtypes = argtypes
    fn.restype = restype
    return fn


_BREAK, _CONTINUE, _RECURSE = 0, 1, 2  # CXChildVisitResult
_SKIP_IDS = frozenset(k.value for k in SKIP_KINDS)
_FUNC_IDS = frozenset(k.value for k in FUNC_KINDS)
_bound: dict[str, object] = {}


def libclang_fn(name: str, argtypes: list, restype=None):
    """libclang's C function `name`, its argument and result types bound once."""
    fn = _bound.get(name)
    if fn is None:
        fn = _bound[name] = _bind(name, argtypes, restype)
    return fn


def _node(cur: ci.Cursor) -> tuple:
    """What identifies the AST node of a cursor the visit passes (as a node,
    or later as its children's parent): a statement's or expression's Stmt
    pointer, a declaration's Decl pointer, else the kind and data. A cursor's
    other fields differ between the two (the enclosing declaration libclang
    records in a statement cursor, the decl-group flag of a declaration), as
    clang_equalCursors knows."""
    kid = cur._kind_id
    if 100 <= kid < 300:  # CXCursor_FirstExpr .. CXCursor_LastStmt: {parent decl, Stmt, TU}
        return ("stmt", cur.data[1])
    if 1 <= kid < 100 or 600 <= kid < 700:  # declarations: {Decl, flag, TU}
        return _decl_node(cur.data[0])
    return (kid, cur.data[0], cur.data[1], cur.data[2], cur.xdata)


def _decl_node(decl: int | None) -> tuple:
    return ("decl", decl)


_UNSEEN = object()


def file_of(cur: ci.Cursor) -> str | None:
    """The file `cur` is in (where its macro use expands, like
    `cur.location.file`), without the line and column: libclang computes
    those only when asked, and computing them reads a header's line table
    (Note [Walk cost])."""
    f = ci.c_object_p()
    libclang_fn("clang_getExpansionLocation", [ci.SourceLocation, ctypes.POINTER(ci.c_object_p),
                                         ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p])(
        cur.location, ctypes.byref(f), None, None, None)
    return ci.File(f).name if f else None


_UINT_P = ctypes.POINTER(ctypes.c_uint)
_SPELLING_ARGS = [ci.SourceLocation, ctypes.POINTER(ci.c_object_p), _UINT_P, _UINT_P, _UINT_P]


def spelling_line(loc: ci.SourceLocation) -> tuple[str | None, int]:
    """The file and line where the text at `loc` is written (macro arguments
    resolve to their own line; a macro body to the macro's definition)."""
    spelling_loc = libclang_fn("clang_getSpellingLocation", _SPELLING_ARGS)
    f, line, col, off = ci.c_object_p(), ctypes.c_uint(), ctypes.c_uint(), ctypes.c_uint()
    spelling_loc(loc, ctypes.byref(f), ctypes.byref(line), ctypes.byref(col), ctypes.byref(off))
    name = ci.File(f).name if f else None
    return name, int(line.value)


class Namer:
    """Qualified names of declarations (Note [Precise naming]), memoized.

    `roots`: absolute directories (with a trailing "/") that file paths in
    internal-linkage parts are made relative to, the tree's first.
    """

    def __init__(self, cpu_capability: str = "DEFAULT", roots: tuple[str, ...] = ()) -> None:
        self.cpu_capability = cpu_capability
        self.roots = roots
        self._memo: dict[str, str] = {}

    def rel(self, cur: ci.Cursor) -> str:
        """The file `cur` is written in, relative to the first root holding it."""
        path = file_of(cur) or ""
        for r in self.roots:
            if path.startswith(r):
                return path[len(r):]
        return path

    def scope(self, cur: ci.Cursor | None) -> str:
        """`ns::Class` of a scope cursor ('' at the top level)."""
        parts: list[str] = []
        while cur is not None and cur.kind != K.TRANSLATION_UNIT:
            if cur.kind in SCOPE_KINDS:
                name = cur.spelling
                if cur.kind == K.NAMESPACE and (not name or name.startswith("(anonymous")):
                    parts.append(anon_ns(self.rel(cur)))
                elif not name or name.startswith(("(anonymous", "(unnamed")):
                    pass  # an unnamed class or enum: no part (the fast tier's scope_of)
                elif cur.kind == K.NAMESPACE and name == self.cpu_capability:
                    parts.append("CPU_CAPABILITY")
                else:
                    parts.append(name)
            elif cur.kind in FUNC_KINDS:  # a local class inside a function
                parts.append(cur.spelling)
            cur = cur.semantic_parent
        return "::".join(reversed(parts))

    def qualname(self, fn: ci.Cursor) -> str:
        """`at::native::matmul` for the function cursor `fn`.

        Example:
            >>> Namer().qualname(cursor_of_matmul)
            'at::native::matmul'
        """
        usr = fn.get_usr()
        got = self._memo.get(usr)
        if got is None:
            parent = fn.semantic_parent
            scope = self.scope(parent)
            if (fn.kind in _FREE_KINDS and fn.linkage == ci.LinkageKind.INTERNAL and parent is not None
                    and parent.kind in (K.NAMESPACE, K.TRANSLATION_UNIT) and "(anonymous" not in scope):
                where = fn.get_definition() or fn
                scope = f"{scope}::{static_scope(self.rel(where))}" if scope else static_scope(self.rel(where))
            got = f"{scope}::{fn.spelling}" if scope else fn.spelling
            self._memo[usr] = got
        return got

    def fn_id(self, fn: ci.Cursor) -> str:
        """qualname(fn) followed by its parameter list (Note [Overload ids]),
        as the fast tier spells it: from the definition when the TU has it,
        else the declaration, and from the template of a specialization the
        compiler instantiated. The layer drops the list of a name that is
        not overloaded (extractors/cpp/overloads.py Overloads.final).

        Example:
            >>> Namer().fn_id(cursor_of_where)
            'at::native::where(const Tensor&, const Tensor&, const Tensor&)'
        """
        key = "sig:" + fn.get_usr()
        got = self._memo.get(key)
        if got is None:
            target = fn
            tmpl = ci.conf.lib.clang_getSpecializedCursorTemplate(fn)
            if tmpl is not None and not tmpl.kind.is_invalid() and tmpl.kind in FUNC_KINDS and (
                    tmpl.location == fn.location):
                target = tmpl  # an implicit instantiation (where its template is): the template's parameters
            target = target.get_definition() or target
            types = [c.type.spelling for c in target.get_children() if c.kind == K.PARM_DECL]
            if target.type.kind == ci.TypeKind.FUNCTIONPROTO and target.type.is_function_variadic():
                types.append("...")
            got = self._memo[key] = self.qualname(fn) + sig_text(types)
        return got


class Walker:
    """Collects the edges of one TU (Note [Precise edges]).

    `classify(path)` says where a declaration lives: "tree", "generated", or
    None (system, standard library, anything outside the tree).
    """

    def __init__(self, tu: ci.TranslationUnit, rel: str, classify, namer: Namer, api=None,
                 cuda: bool = False) -> None:
        self.tu = tu
        self.main = tu.spelling
        self.rel = rel
        self.classify = classify
        self.namer = namer
        self.api = api  # api.ApiOps, or None: no op calls
        self.cuda = cuda  # a CUDA TU: calls of __global__ functions are launches
        self.facts = TuFacts()
        self._where: dict[str, str | None] = {}
        self._global: dict[str, bool] = {}

    def run(self) -> TuFacts:
        """Walk every top-level declaration written in the main file
        (Note [Walk cost])."""
        tops: list[ci.Cursor] = []
        in_main = libclang_fn("clang_Location_isFromMainFile", [ci.SourceLocation], ctypes.c_int)
        get_loc = ci.conf.lib.clang_getCursorLocation

        def pick(child, _parent, _data) -> int:
            # preprocessing cursors (macro uses, #includes: the detailed record) hold no calls
            if not 500 <= child._kind_id < 600 and in_main(get_loc(child)):
                child._tu = self.tu
                tops.append(child)
            return _CONTINUE

        ci.conf.lib.clang_visitChildren(self.tu.cursor, ci.callbacks["cursor_visit"](pick), None)
        for top in tops:
            self._walk(top)
        return self.facts

    def _walk(self, top: ci.Cursor) -> None:
        """Every call in `top`'s subtree, with the function defined around it:
        one libclang visit that recurses (a node's caller is its parent's,
        unless the node is itself a function definition; `_node` tells the
        nodes apart), skipping SKIP_KINDS subtrees."""
        tu, namer, call_kind = self.tu, self.namer, K.CALL_EXPR.value
        caller_of: dict[tuple, str | None] = {}
        failed: list[BaseException] = []
        top_caller = namer.fn_id(top) if top.kind in FUNC_KINDS and top.is_definition() else None
        caller_of[_node(top)] = top_caller
        last = [top_caller]

        def visit(cur, parent, _data) -> int:
            try:
                kid = cur._kind_id
                if kid in _SKIP_IDS:
                    return _CONTINUE
                caller = caller_of.get(_node(parent), _UNSEEN)
                if caller is _UNSEEN:
                    caller = self._unseen_parent(parent, caller_of, last[0])
                cur._tu = tu
                if kid in _FUNC_IDS and cur.is_definition():
                    caller = namer.fn_id(cur)
                elif kid == call_kind:
                    self._call(cur, caller)
                caller_of[_node(cur)] = last[0] = caller
                return _RECURSE
            except BaseException as exc:  # an exception cannot cross libclang: stop, raise it below
                failed.append(exc)
                return _BREAK

        ci.conf.lib.clang_visitChildren(top, ci.callbacks["cursor_visit"](visit), None)
        if failed:
            raise failed[0]

    def _unseen_parent(self, parent: ci.Cursor, caller_of: dict, last: str | None) -> str | None:
        """The caller for the children of a node the visit did not report
        (an implicit expression, e.g. in a lambda's capture): that of the
        declaration libclang records as the statement's parent; failing that
        the last node's, counted in dropped["parent_unseen"]."""
        if 100 <= parent._kind_id < 300:
            got = caller_of.get(_decl_node(parent.data[0]), _UNSEEN)
            if got is not _UNSEEN:
                return got
        self.facts.dropped["parent_unseen"] += 1
        return last

    def _where_is(self, decl: ci.Cursor) -> str | None:
        name = file_of(decl)
        if name is None:
            return None
        got = self._where.get(name, "?")
        if got == "?":
            got = self._where[name] = self.classify(name)
        return got

    def _call(self, call: ci.Cursor, caller: str | None) -> None:
        drop = self.facts.dropped
        if caller is not None:
            self.facts.sites += 1
        ref = call.referenced
        if ref is not None and ref.kind in CALLEE_KINDS:
            self._callee(call, caller, ref)
        elif ref is not None and ref.kind == K.CONSTRUCTOR and self._written_construction(call, ref):
            self._callee(call, caller, ref)
        elif ref is not None and ref.kind in (K.CONSTRUCTOR, K.DESTRUCTOR, K.CONVERSION_FUNCTION):
            drop["constructor"] += 1
        elif self.cuda and ref is not None and ref.kind in VAR_KINDS and self._launch_through(call, ref, caller):
            pass
        elif (ref is None or ref.kind in VAR_KINDS) and self._open_call(call, caller):
            pass
        else:
            drop["unresolved"] += 1
            name = call.spelling or (ref.spelling if ref is not None else "")
            if caller is not None and name:
                self.facts.unresolved.add((caller, name, self._line(call)))

    def _written_construction(self, call: ci.Cursor, ctor: ci.Cursor) -> bool:
        """Is `call` a construction the source writes with the class's name
        (`T(a, b)`, `T{a, b}`, `T<U>(a, b)`: a temporary object) by a
        constructor the tree declares (Note [Precise edges])? Not a
        variable's initialization, a conversion, a copy or move, nor a
        constructor the compiler declares (at the class's own location)."""
        head = next(iter(call.get_children()), None)
        if head is None or head.kind not in (K.TYPE_REF, K.TEMPLATE_REF) or self._where_is(ctor) != "tree":
            return False
        if ctor.is_copy_constructor() or ctor.is_move_constructor():
            return False
        cls = ctor.semantic_parent
        return cls is None or ctor.location != cls.location

    def _open_call(self, call: ci.Cursor, caller: str | None) -> bool:
        """A call the compiler left open (in a template, on a type that
        depends on a template parameter, or through a variable): its callee
        expression tells what it may reach (Note [Precise edges], Note
        [Dependent operators and constructions]); -> False if it does not."""
        drop = self.facts.dropped
        kids = [unwrapped(c) for c in call.get_children()]
        operator = operator_ref(kids)
        if operator is not None:
            self._dependent_operator(call, caller, kids, operator)
            return True
        head = kids[0] if kids else None
        if is_construction(kids):
            drop["dependent_construction"] += 1
            return True
        if head is not None and head.kind == K.LAMBDA_EXPR:  # `[&] {...}()`: its calls are the caller's
            drop["lambda"] += 1
            return True
        if self._external_member(head):
            drop["dependent_external"] += 1
            return True
        refs = (self._overload_set(head) or self._dependent_member(call, head)
                or self._dependent_static(call, head) or self._dependent_functor(call, head))
        for r in refs or ():  # each overload of the one name it can reach
            self._callee(call, caller, r)
        return bool(refs)

    def _callee(self, call: ci.Cursor, caller: str | None, ref: ci.Cursor) -> None:
        """The edge, op call or launch of `call` from `caller` to function `ref`."""
        drop = self.facts.dropped
        if caller is None:
            drop["outside_function"] += 1
            return
        where = self._where_is(ref)
        got = self.api.call_of(ref, where, self.namer) if self.api is not None else None
        operator = is_operator(ref.spelling)
        if got is not None:
            line = self._line(call, operator)
            self.facts.ops.update(OpCall(caller, op, self.rel, line) for op in got.ops)
            self.facts.edges.update(Edge(caller, fn, self.rel, line) for fn in got.exits)
            if got.replace:
                drop["op_call" if got.ops else "operator" if operator else "api_exit"] += 1
                return
        if operator:
            drop["operator"] += 1
            return
        if ref.spelling.startswith("__builtin") or where is None:
            drop["external"] += 1
            return
        if self.cuda and self._is_global(ref):
            self.facts.launches.add(Launch(caller, self.namer.fn_id(ref), self.rel, self._line(call)))
            return
        self.facts.edges.add(Edge(caller, self.namer.fn_id(ref), self.rel, self._line(call)))

    def _is_global(self, fn: ci.Cursor) -> bool:
        """Is `fn` a CUDA `__global__` function (a kernel)?"""
        usr = fn.get_usr()
        got = self._global.get(usr)
        if got is None:
            got = self._global[usr] = any(c.kind == K.CUDAGLOBAL_ATTR for c in fn.get_children())
        return got

    def _launch_through(self, call: ci.Cursor, var: ci.Cursor, caller: str | None) -> bool:
        """`v<<<...>>>(...)` / `v(...)` through a variable: a launch of each
        __global__ function its initializer names (`auto v = &k<T>;`,
        `c ? k1 : k2`); -> False for a variable with none (a parameter, a
        pointer set later, a functor)."""
        found = set()
        for node in var.walk_preorder():
            ref = node.referenced if node.kind in NAME_KINDS else None
            if ref is not None and ref.kind in CALLEE_KINDS and self._where_is(ref) and self._is_global(ref):
                found.add(self.namer.fn_id(ref))
        if not found:
            return False
        if caller is None:
            self.facts.dropped["outside_function"] += 1
            return True
        line = self._line(call)
        self.facts.launches.update(Launch(caller, k, self.rel, line) for k in found)
        return True

    def _line(self, call: ci.Cursor, operator: bool = False) -> int:
        """The line of the callee's name: `.set_dim(` in a chain that starts
        lines above, `f` of `ns::f(`, the operator of `a\n + b`; its own
        line inside a macro argument."""
        loc = call.location
        if operator:  # children in source order: `a`, `+` (a reference to operator+), `b`
            for child in map(unwrapped, call.get_children()):
                if child is not None and child.kind == K.DECL_REF_EXPR and (is_operator(child.spelling)
                                                                            or names_no_one(child)):
                    loc = child.location
                    break
            head = None
        else:
            head = unwrapped(next(iter(call.get_children()), None))
        if head is not None and head.kind in NAME_KINDS:
            loc = head.location
        name, line = spelling_line(loc)
        if name == self.main:
            return line
        return loc.line

    def _dependent_operator(self, call: ci.Cursor, caller: str | None, kids: list, operator: ci.Cursor) -> None:
        """`a + b` with an operand whose type depends on a template parameter
        (`operator`: the candidates the compiler found by name): those
        candidates whose parameters take, one by one, the operands whose type
        is a class of the tree (`t / x` with `const Tensor& t`: at::operator/
        of (Tensor, Tensor) and (Tensor, Scalar), an op call), else an
        operator of types known only at instantiation (Note [Dependent
        operators and constructions])."""
        classes = [self._class_of(k.type) for k in kids if k is not None and not names_no_one(k)]

        def fits(decl: ci.Cursor) -> bool:
            params = [self._class_of(c.type) for c in decl.get_children() if c.kind == K.PARM_DECL]
            if decl.kind == K.CXX_METHOD:  # the object is the first operand
                params.insert(0, self._class_of(decl.semantic_parent.type))
            return len(params) == len(classes) and all(c is None or c == p for c, p in zip(classes, params, strict=True))

        picked = [d for d in overloaded_decls(operator) if d.kind in CALLEE_KINDS and fits(d)] \
            if any(classes) else []
        if not picked:
            self.facts.dropped["dependent_operator"] += 1
            return
        for decl in picked:
            self._callee(call, caller, decl)

    def _class_of(self, t: ci.Type) -> str | None:
        """The USR of the class of the tree that `t` is, or refers to; None for
        any other type (a dependent one included)."""
        decl = record_of(t)
        if decl.kind not in RECORD_KINDS or self._where_is(decl) is None:
            return None
        return decl.get_usr() or None

    def _external_member(self, head: ci.Cursor | None) -> bool:
        """Is `head` (a dependent call's callee expression) a member of an
        object whose class is outside the tree (`v.size()` with
        `std::vector<T> v`), as a resolved call of it would be "external"?"""
        cls = object_class(head)
        return cls is not None and self._where_is(cls) is None

    def _dependent_member(self, call: ci.Cursor, head: ci.Cursor | None) -> list[ci.Cursor] | None:
        """`x.f(...)` / `p->f(...)` (`head`: the call's callee expression)
        whose object's type depends on a template parameter but is a class
        template of the tree (`const ConvParams<T>&`): each method named f of
        that template as it declares it, or of its bases (Note [Precise edges])."""
        cls = object_class(head)
        if cls is None or self._where_is(cls) is None:
            return None
        name = name_after(head, (".", "->"))
        return fitting(methods(cls, name), call) or None if name else None

    def _dependent_functor(self, call: ci.Cursor, head: ci.Cursor | None) -> list[ci.Cursor] | None:
        """`f(...)` through a variable or temporary whose type depends on a
        template parameter but is a class template of the tree (`maxFunc(a, b)`
        with `MaxFloat<scalar_t, accscalar_t> maxFunc`, `Max<T>()(a, b)`): its
        `operator()`s that fit the call; through a field too (`layer_(x)`)."""
        if head is None or head.kind not in (K.DECL_REF_EXPR, K.MEMBER_REF_EXPR, K.CALL_EXPR):
            return None
        if head.kind != K.CALL_EXPR and (head.referenced is None or head.referenced.kind not in VAR_KINDS):
            return None
        cls = record_of(head.type)
        if cls.kind not in RECORD_KINDS or self._where_is(cls) is None:
            return None
        return fitting(methods(cls.get_definition() or cls, "operator()"), call) or None

    def _dependent_static(self, call: ci.Cursor, head: ci.Cursor | None) -> list[ci.Cursor] | None:
        """`C<T>::f(...)` / `Vec::f(...)` (`head`: the call's callee
        expression; Vec an alias of a class template of the tree, its
        arguments dependent): each method named f of that template as it
        declares it, or of its bases (Note [Precise edges])."""
        if head is None or head.kind not in (K.DECL_REF_EXPR, K.MEMBER_REF_EXPR) or head.referenced is not None:
            return None  # (`Vec::size()` in a member of a class template: a member through an implicit this)
        quals = [c for c in head.get_children() if c.kind in (K.TEMPLATE_REF, K.TYPE_REF, K.OVERLOADED_DECL_REF)]
        if not quals or quals[0].kind == K.OVERLOADED_DECL_REF:  # a function's name, not a class's member
            return None
        cls = quals[0].referenced
        if cls is not None and cls.kind in (K.TYPEDEF_DECL, K.TYPE_ALIAS_DECL):
            cls = cls.underlying_typedef_type.get_declaration()
        if cls is None or cls.kind not in RECORD_KINDS or self._where_is(cls) is None:
            return None
        name = name_after(head, ("::",))
        return fitting(methods(cls.get_definition() or cls, name), call) or None if name else None

    def _overload_set(self, head: ci.Cursor | None) -> list[ci.Cursor] | None:
        """The functions a dependent call names (`head`: its callee
        expression), when all its candidates share one qualified name (Note
        [Precise edges]): each overload."""
        if head is None:
            return None
        if head.kind == K.DECL_REF_EXPR:  # an unresolved lookup: `f` or `ns::f`
            head = next((c for c in head.get_children() if c.kind == K.OVERLOADED_DECL_REF), head)
        elif head.kind == K.MEMBER_REF_EXPR and head.referenced is not None:  # `t.data_ptr<T>()`: its members
            head = head.referenced
        if head.kind != K.OVERLOADED_DECL_REF:
            return None
        found: dict[str, ci.Cursor] = {}
        names: set[str] = set()
        cands = overloaded_decls(head)
        direct = [d for d in cands if d.kind != K.UNEXPOSED_DECL]  # `using Base::f;` in a class adds no name
        for decl in direct or [d for c in cands for d in self._through_using(c)]:
            if decl.kind in CALLEE_KINDS:
                names.add(self.namer.qualname(decl))
                found.setdefault(self.namer.fn_id(decl), decl)
        return list(found.values()) if len(names) == 1 else None

    def _through_using(self, decl: ci.Cursor) -> list[ci.Cursor]:
        """`decl`, a candidate of a dependent call; for one a using-declaration
        brings in (`using at::cuda::detail::getTensorInfo;`, which libclang
        shows as an unexposed declaration), the functions it names. Used
        only when every candidate is one: beside candidates of its own, a
        using-declaration re-exports what is already there (`using
        TensorBase::size;` in at::Tensor)."""
        if decl.kind != K.UNEXPOSED_DECL:
            return [decl]
        ref = ci.Cursor.from_location(self.tu, decl.location)  # the name in the using-declaration
        return overloaded_decls(ref) if ref is not None and ref.kind == K.OVERLOADED_DECL_REF else []


def collect_edges(tu: ci.TranslationUnit, rel: str, classify, namer: Namer | None = None, api=None,
                  cuda: bool = False) -> TuFacts:
    """The `calls_precise` edges, op calls (with `api`, an api.ApiOps) and,
    in a CUDA TU, kernel launches of a parsed TU whose main file is `rel`.

    Example:
        >>> facts = collect_edges(tu, "aten/src/ATen/native/LinearAlgebra.cpp", classify)
        >>> Edge("at::native::matmul", "at::native::_matmul_impl", ..., 2108) in facts.edges
        True
    """
    return Walker(tu, rel, classify, namer or Namer(), api, cuda).run()


def included_files(tu: ci.TranslationUnit) -> list[str]:
    """Every file the TU includes (absolute paths, each once, in order)."""
    seen: dict[str, None] = {}
    for inc in tu.get_includes():
        seen.setdefault(inc.include.name, None)
    return list(seen)


def first_fatal(tu: ci.TranslationUnit) -> tuple[str, int, str] | None:
    """(file, line, message) of the TU's first fatal diagnostic, if any."""
    for d in tu.diagnostics:
        if d.severity >= ci.Diagnostic.Fatal:
            f = d.location.file
            return (f.name if f else "", d.location.line, d.spelling)
    return None


def error_count(tu: ci.TranslationUnit, in_file: str | None = None) -> int:
    """How many error (or fatal) diagnostics the TU has (those located in
    file `in_file`, an absolute path, if given)."""
    return sum(1 for d in tu.diagnostics if d.severity >= ci.Diagnostic.Error and (
        in_file is None or (d.location.file is not None and d.location.file.name == in_file)))


def is_under(path: str, roots: tuple[str, ...]) -> bool:
    """Is `path` inside one of the directories `roots` (absolute, with a trailing /)?"""
    return path.startswith(roots)


def rel_to(path: str, root: Path) -> str:
    """`path` relative to `root`, POSIX separators."""
    return Path(path).resolve().relative_to(root.resolve()).as_posix()
