"""Reading a call the compiler left open: in a template, a call whose callee
depends on a template parameter has no declaration yet; these helpers read
what its callee expression does say (the Walker in visit.py uses them).

Note [Dependent operators and constructions]: in a template, `a + b` with an
operand whose type depends on a template parameter, and `T(x)`, `fVec(1)`,
`std::tuple<T, T>(a, b)`, are call expressions without a callee: clang
leaves them to instantiation (an operator call whose callee is the set of
operators found by name, a construction of a dependent type). Neither is a
call of a function the graph walks: once instantiated, such an operator is
built in (`opmath_t * x`, a pointer plus an offset) or an overloaded operator,
and operators other than the Tensor's are counted, not kept; a construction
is counted like any constructor. So they are counted as
`dependent_operator` and `dependent_construction`, not as unresolved
(`bench/precise.py` prints both). Where an operand is a class of the tree,
the candidates whose parameters take the operands' classes one by one are
walked as a resolved call would be: `norm / theta` in a template over
`scalar_t`, `norm` a Tensor, is at::operator/ of (Tensor, Tensor) and of
(Tensor, Scalar), the op call `div`. An immediately called lambda
(`[&] { ... }()`, AT_DISPATCH's) is counted as `lambda`: its calls are the
enclosing function's already. A member call on an object of a dependent
class outside the tree (`v.size()` with `std::vector<T> v`) is counted as
`dependent_external`: it would be "external" once resolved. The three
`dependent_*` counts are sites the compiler tells apart but binds to no
declaration (OPEN_KINDS in extractors/clang/__init__.py). Over the whole
scope, aten/src/ATen/native's unresolved call sites went from 15,413 to
1,693 of 255,996 (bench/precise.py). What stays open is mostly a call
through an object of a template parameter's type (`epilogue(x)` with
`Epilogue<scalar_t, ...>`, Epilogue a template template parameter;
`params.matmul_ih(x)` with `const cell_params& params`), which the fast
tier's functor edges cover (Note [Functors beside the compiler]).
"""

from __future__ import annotations

from clang import cindex as ci

from extractors.cpp.names import is_operator

K = ci.CursorKind
RECORD_KINDS = frozenset({K.CLASS_TEMPLATE, K.CLASS_TEMPLATE_PARTIAL_SPECIALIZATION, K.STRUCT_DECL, K.CLASS_DECL})
METHOD_KINDS = frozenset({K.CXX_METHOD, K.FUNCTION_TEMPLATE})
INDIRECT = frozenset({ci.TypeKind.POINTER, ci.TypeKind.LVALUEREFERENCE, ci.TypeKind.RVALUEREFERENCE})


def record_of(t: ci.Type) -> ci.Cursor:
    """The declaration of the class `t` is or refers to, through aliases
    (`fVec` with `using fVec = Vectorized<T>`, an alias template's
    specialization); a cursor of another kind when `t` is no class."""
    if t.kind in INDIRECT:
        t = t.get_pointee()
    decl = t.get_declaration()
    return decl if decl.kind in RECORD_KINDS else t.get_canonical().get_declaration()


def object_class(head: ci.Cursor | None) -> ci.Cursor | None:
    """The class of the object of `x.f` / `p->f` (`head`: a dependent call's
    callee expression, a member the compiler bound to nothing); None for
    any other callee or object."""
    if head is None or head.kind != K.MEMBER_REF_EXPR or head.referenced is not None:
        return None
    base = next(iter(head.get_children()), None)
    cls = record_of(base.type) if base is not None else None
    return cls if cls is not None and cls.kind in RECORD_KINDS else None


def overloaded_decls(ref: ci.Cursor) -> list[ci.Cursor]:
    """The declarations an OVERLOADED_DECL_REF names (the candidates of a
    lookup the compiler left to instantiation)."""
    lib = ci.conf.lib
    return [lib.clang_getOverloadedDecl(ref, i) for i in range(lib.clang_getNumOverloadedDecls(ref))]


def operator_ref(kids: list) -> ci.Cursor | None:
    """The operator a dependent call is (`kids`: its unwrapped children): a
    child naming no one (`+` in `a + b`) whose lookup found operators; None
    for any other call."""
    for k in kids:
        if k is not None and names_no_one(k):
            decls = overloaded_decls(k.referenced)
            if decls and is_operator(decls[0].spelling):
                return k.referenced
    return None


def names_no_one(expr: ci.Cursor) -> bool:
    """Is `expr` a lookup the compiler left open, spelled without a name
    (the operator of a dependent `a + b`)?"""
    if expr.kind != K.DECL_REF_EXPR or expr.spelling:
        return False
    ref = expr.referenced
    return ref is not None and ref.kind == K.OVERLOADED_DECL_REF


def is_construction(kids: list) -> bool:
    """Is a dependent call a construction (`kids`: its unwrapped children):
    `T(x)`, `Vec(1)`, `vec::Vectorized<T>(x)`, `std::tuple<T, T>(a, b)`,
    its first child naming a type (after the namespaces that qualify it)?"""
    for k in kids:
        if k is None or k.kind != K.NAMESPACE_REF:
            return k is not None and k.kind in (K.TYPE_REF, K.TEMPLATE_REF)
    return False


def unwrapped(cur: ci.Cursor | None) -> ci.Cursor | None:
    """`cur` without the UNEXPOSED_EXPR wrappers (implicit casts) around it."""
    while cur is not None and cur.kind == K.UNEXPOSED_EXPR:
        cur = next(iter(cur.get_children()), None)
    return cur


def name_after(expr: ci.Cursor, seps: tuple[str, ...]) -> str | None:
    """The name written after the last of `seps` in `expr` (`template`
    skipped): `.`/`->` of a member expression, `::` of a qualified name."""
    toks = [t.spelling for t in expr.get_tokens()]
    if "::" in seps and "(" in toks:  # a qualified name has no call in it; inside a macro the extent runs on
        toks = toks[:toks.index("(")]
    at = max((i for i, t in enumerate(toks) if t in seps), default=-1)
    rest = [t for t in toks[at + 1:] if t != "template"] if at >= 0 else []
    return rest[0] if rest and rest[0].isidentifier() else None


def fitting(methods: list[ci.Cursor], call: ci.Cursor) -> list[ci.Cursor]:
    """Those of `methods` that take as many arguments as `call` passes
    (parameters with a default may be left out); all when none does."""
    n = ci.conf.lib.clang_Cursor_getNumArguments(call)
    if n < 0:
        return methods

    def fits(m: ci.Cursor) -> bool:
        params = [c for c in m.get_children() if c.kind == K.PARM_DECL]
        required = sum(1 for p in params if not any(c.kind.is_expression() for c in p.get_children()))
        return required <= n <= len(params)

    return [m for m in methods if fits(m)] or methods


def methods(cls: ci.Cursor, name: str, depth: int = 0) -> list[ci.Cursor]:
    """The methods named `name` of class (template) `cls`, else of its bases."""
    found = [c for c in cls.get_children() if c.kind in METHOD_KINDS and c.spelling == name]
    if found or depth >= 3:
        return found
    for base in cls.get_children():
        if base.kind == K.CXX_BASE_SPECIFIER:
            decl = base.type.get_declaration()
            if decl.kind in RECORD_KINDS:
                found.extend(methods(decl, name, depth + 1))
    return found
