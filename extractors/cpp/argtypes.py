"""Argument types of a call, as far as the source shows them without a compiler,
and the overloads they rule out (Note [Typed overloads]).

Note [Typed overloads]: the fast tier first keeps the overloads of a callee
that take as many arguments as the call passes (Note [Overload ids]). When
several remain, the scanner's argument types choose between them. An
argument's type is known when it is a literal (integer, floating, character,
bool, string, nullptr; `0` is not: it is also a null pointer), a cast
(`static_cast<T>(e)`, `(T)e`), `sizeof`, or a name declared in the calling
function (a parameter or a local, the innermost declaration in scope at the
call: tree-sitter gives declarations); anything else (a call, a member, an
`auto` local, a name declared elsewhere) is unknown. Types are classified,
after Note [Overload ids]'s normalization and without top-level const or
reference, as pointers (with their pointee; an array is a pointer),
arithmetic types (builtins and the fixed-width aliases), Tensors (`Tensor`,
`TensorBase`), nullptr, or unknown (every other name: classes, aliases,
template parameters such as `scalar_t`). An overload stays when every known
argument is compatible with its parameter, conservatively:
  - anything is compatible with an unknown type, either way;
  - arithmetic types convert to one another; a pointer converts to `bool`;
  - a pointer to a known pointee converts to a pointer to the same pointee
    (const aside) or to `void`; a pointee that is not known (`scalar_t*`,
    `Foo*`) is compatible with every pointer;
  - a string literal is a `const char*`; nullptr converts to a pointer;
  - otherwise pointer, arithmetic, Tensor and nullptr are incompatible.
One overload left: the call resolves to it (calls' `via` "typed", Note [Call
resolution]). Several left: the one at least as good as each other for
every argument, if exactly one is, as C++ overload resolution would pick
it: `s` is at least as good as `t` when, at each position where their
parameter types differ, the argument's type is known and `s` takes it
without conversion (the same arithmetic type, pointee or Tensor class, or
the same spelling of a type that names no template parameter: `ScalarType`
for a `ScalarType` local), or `s` is no function template and `t` is one
whose parameter there is computed from its template parameters
(`opmath_type<scalar_t>`, taken to be what the non-template declares there,
which C++ prefers on a tie): `cpublas::gemm(..., const float*, ...)` over
`template <typename scalar_t> gemm(..., const scalar_t*, ...)` for `const
float*` arguments. Otherwise every overload left gets an edge labelled
"overload" (a guess), and when none is left, every overload of that arity
does (the types we read were wrong, or the one called is declared but not
defined in the tree). A call that may also be one of the generated ATen API
(Note [Generated API beside the tree's]: `at::exp(target)` beside
NumericUtils.h's `at::exp(T)`) is not typed: the overloads it may reach are
not all in the tree. In the calling function, the names of its (and its
classes') template parameters and of its local type aliases are unknown
(`?`: `const scalar_t* a` is a pointer to an unknown type).

Example:
    >>> pick_typed([("f(int)", ("int",), (), ()), ("f(float*)", ("float*",), (), ())], ("double",))
    (('f(int)',), True)
    >>> pick_typed([("f(int)", ("int",), (), ()), ("f(float*)", ("float*",), (), ())], ("",))
    (('f(float*)', 'f(int)'), False)
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from extractors.cpp.fields import (
    F_ARGUMENTS,
    F_DECLARATOR,
    F_FUNCTION,
    F_NAME,
    F_PARAMETERS,
    F_TYPE,
)
from extractors.cpp.names import normalize_type

if TYPE_CHECKING:
    from tree_sitter import Node

# Note [Typed overloads]: arithmetic types, by their canonical name on an LP64
# target (two spellings of one type make a pointer to either the same pointer).
_ARITH = {
    "bool": "bool", "char": "char", "signed char": "signed char", "unsigned char": "unsigned char",
    "short": "short", "short int": "short", "unsigned short": "unsigned short", "int": "int",
    "signed": "int", "signed int": "int", "unsigned": "unsigned", "unsigned int": "unsigned",
    "long": "long", "long int": "long", "unsigned long": "unsigned long", "long long": "long long",
    "unsigned long long": "unsigned long long", "float": "float", "double": "double",
    "long double": "long double", "int8_t": "signed char", "uint8_t": "unsigned char", "int16_t": "short",
    "uint16_t": "unsigned short", "int32_t": "int", "uint32_t": "unsigned", "int64_t": "long",
    "uint64_t": "unsigned long", "size_t": "unsigned long", "ssize_t": "long", "ptrdiff_t": "long",
    "intptr_t": "long", "uintptr_t": "unsigned long",
}
# Class types that are element types of known pointers (at::Half* vs at::BFloat16*).
_SCALARS = frozenset({"Half", "BFloat16", "complex<float>", "complex<double>", "complex<Half>",
                      "Float8_e4m3fn", "Float8_e5m2", "Float8_e4m3fnuz", "Float8_e5m2fnuz", "qint8",
                      "quint8", "qint32", "quint4x2", "quint2x4"})
_TENSORS = frozenset({"Tensor", "TensorBase"})
PTR, ARITH, TENSOR, NULL, UNKNOWN = "ptr", "arith", "tensor", "null", "?"


def classify(t: str) -> tuple[str, str]:
    """(kind, core) of a normalized type: kind PTR (core: the canonical
    pointee, "" when not known), ARITH (the canonical name), TENSOR, NULL, or
    UNKNOWN; top-level const and references do not count.

    >>> classify("const float*"), classify("int64_t&"), classify("const Tensor&"), classify("scalar_t*")
    (('ptr', 'float'), ('arith', 'long'), ('tensor', 'Tensor'), ('ptr', ''))
    """
    t = _bare(t)
    if not t:
        return UNKNOWN, ""
    if t.endswith("*"):
        pointee = _bare(t[:-1])
        return PTR, (_ARITH.get(pointee) or (pointee if pointee in _SCALARS or _known_ptr(pointee) else ""))
    if t in _ARITH:
        return ARITH, _ARITH[t]
    if t in _TENSORS:
        return TENSOR, t
    if t == "nullptr_t":
        return NULL, ""
    return UNKNOWN, ""


def _known_ptr(t: str) -> bool:
    """`t` is a pointer whose pointee is known (`float*` as a pointee of `float**`)."""
    kind, core = classify(t) if t.endswith("*") else (UNKNOWN, "")
    return kind == PTR and bool(core)


def _bare(t: str) -> str:
    """`t` without references and top-level const."""
    t = t.strip()
    while t.endswith(("&", " ")):
        t = t.rstrip("& ")
    if t.startswith("const ") and not t.endswith("*"):
        t = t[len("const "):]
    if t.endswith(" const"):
        t = t[: -len(" const")]
    return t


def compatible(arg: str, param: str) -> bool:
    """Whether an argument of (normalized) type `arg` ("" unknown) may be
    passed as a parameter of type `param` (Note [Typed overloads])."""
    (ak, ac), (pk, pc) = classify(arg), classify(param)
    if ak == UNKNOWN or pk == UNKNOWN:
        return True
    if ak == PTR:
        if pk == PTR:
            return not ac or not pc or ac == pc or pc == "void"
        return pk == ARITH and pc == "bool"
    if ak == NULL:
        return pk == PTR
    return ak == pk  # arithmetic to arithmetic, Tensor to Tensor


def exact(arg: str, param: str, tnames: Iterable[str] = ()) -> bool:
    """`arg` is known and `param` takes it without conversion (const,
    references and pointer qualification aside): the same arithmetic type,
    pointee or Tensor class, or the same spelling of a type naming neither
    an unknown (`?`) nor one of the callee's template parameters `tnames`."""
    (ak, ac), (pk, pc) = classify(arg), classify(param)
    if ak in (ARITH, TENSOR) or ak == PTR and ac:
        return ak == pk and ac == pc
    a, p = _bare(arg), _bare(param)
    return bool(a) and a == p and "?" not in a and not _words(p) & set(tnames)


def mask(t: str, names: Iterable[str]) -> str:
    """Type `t` with each of `names` (types we do not know) as `?`.

    >>> mask("const scalar_t*", {"scalar_t"}), mask("Vectorized<T>", {"T"})
    ('const ?*', 'Vectorized<?>')
    """
    if not names:  # the common case: a def of no template parameters or local aliases
        return t
    names = set(names)
    if not _words(t) & names:
        return t
    return _WORD_RE.sub(lambda m: "?" if m.group(0) in names else m.group(0), t)


_WORD_RE = re.compile(r"[A-Za-z_]\w*")


def _words(t: str) -> set[str]:
    return set(_WORD_RE.findall(t))


def pick_typed(cands: Sequence[tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...]]],
               args: Sequence[str]) -> tuple[tuple[str, ...], bool]:
    """(the overloads a call with argument types `args` ("" unknown) may reach,
    whether that is one by the types): `cands` are (id, parameter types, its
    template type parameters, its classes' template type parameters) of the
    overloads that take that many arguments (Note [Typed overloads])."""
    ids = tuple(sorted(c[0] for c in cands))
    if not any(args):
        return ids, False
    fit = [c for c in cands if all(not a or compatible(a, p) for a, p in zip(args, c[1], strict=False))]
    if len(fit) == 1:
        return (fit[0][0],), True
    if not fit:
        return ids, False
    best = [s for s in fit if all(_dominates(s, t, args) for t in fit if t is not s)]
    if len(best) == 1:
        return (best[0][0],), True
    return tuple(sorted(c[0] for c in fit)), False


def _dominates(s: tuple, t: tuple, args: Sequence[str]) -> bool:
    """Overload `s` is at least as good as `t` for every argument: where
    their parameters differ, `s` takes the argument without conversion, or
    `s` is no template and `t`'s parameter is computed from its template
    parameters (Note [Typed overloads])."""
    tnames = (*s[2], *s[3])
    computed = not s[2] and t[2]
    return all(ps == pt or (a and exact(a, ps, tnames)) or (computed and _computed(pt, t[2]))
               for a, ps, pt in zip(args, s[1], t[1], strict=False))


def _computed(param: str, tnames: tuple[str, ...]) -> bool:
    """`param` names a template parameter only inside a template's arguments
    (`opmath_type<scalar_t>`): a type computed from the deduced ones."""
    if not _words(param) & set(tnames):
        return False
    return not _words(re.sub(r"<.*>", "", param)) & set(tnames)


def param_types(suffix: str) -> tuple[str, ...]:
    """The parameter types of an overload id's suffix, split at the commas
    outside any <...> or (...).

    >>> param_types("(map<int, int>, const float*)"), param_types("()")
    (('map<int, int>', 'const float*'), ())
    """
    inner = suffix[1:-1]
    out, depth, start = [], 0, 0
    for i, ch in enumerate(inner):
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(inner[start:i].strip())
            start = i + 1
    if inner.strip():
        out.append(inner[start:].strip())
    return tuple(out)


def literal_type(kind: str, text: str) -> str:
    """The type of a literal node of tree-sitter type `kind` ("" for `0`,
    which is also a null pointer constant, and for anything else)."""
    if kind == "number_literal":
        return _number_type(text.lower().replace("'", "").lstrip("-+ "))
    return {"true": "bool", "false": "bool", "nullptr": "nullptr_t", "char_literal": "char",
            "string_literal": "const char*", "concatenated_string": "const char*",
            "raw_string_literal": "const char*", "sizeof_expression": "size_t"}.get(kind, "")


def _number_type(t: str) -> str:
    """The type of a numeric literal (lower case, unsigned): `1` int, `1ul`
    unsigned long, `1.0` double, `1.f` float; "" for `0`."""
    body = t.rstrip("ul")
    if body in ("0", "0x0", "00", "0b0"):
        return ""
    if not t.startswith(("0x", "0b")) and ("." in t or "e" in t or t.endswith("f")):
        return "float" if t.endswith("f") else "long double" if t.endswith("l") else "double"
    suffix = t[len(body):]
    longs = "long long" if "ll" in suffix else "long" if "l" in suffix else ""
    try:
        big = int(body, 0) > 0x7FFFFFFF if not body.startswith("0") or body[:2] in ("0x", "0b") else False
    except ValueError:
        return ""
    base = longs or ("long" if big else "int")
    return ("unsigned " + base if "u" in suffix else base).replace("unsigned int", "unsigned")


def declared(type_text: str) -> str:
    """A declared type as an argument type: normalized, "" for `auto`."""
    t = normalize_type(type_text)
    return "" if ("auto" in t or "decltype" in t) and _AUTO_RE.search(t) else t


_AUTO_RE = re.compile(r"\bauto\b|\bdecltype\b")


class DeclaredTypes:
    """The declared types of one file's parameters and locals, by def, with
    where each is in scope, and the argument types of its calls (Note [Typed
    overloads]); the scanner (extractors/cpp/scan.py) fills and asks it."""

    def __init__(self) -> None:
        # (def idx, name) -> its declarations, in the order declared: each
        # read (_scoped) when the name is first asked for; most never are
        self.pending: dict[tuple[int, str], list[tuple[Node, Node, str | None, set[str]]]] = {}
        self.decls: dict[tuple[int, str], list[tuple[int, int, str]]] = {}  # ... read: (scope start, end, type)

    def declare(self, node: Node, d: Node, name: str, idx: int, param: str | None, unknown: set[str]) -> None:
        """Record the type declarator `d` of declaration `node` gives `name`
        in def `idx` (`param`: the type of a parameter declaration as written),
        the names in `unknown` as `?`; read when `name` is first asked for."""
        key = (idx, name)
        decl = (node, d, param, unknown)
        read = self.decls.get(key)
        if read is None:
            self.pending.setdefault(key, []).append(decl)
        elif (row := _scoped(decl)) is not None:  # asked for already (the scanner asks after declaring all)
            read.append(row)

    def type_at(self, idx: int, name: str, pos: int) -> str:
        """The declared type of `name` at byte `pos` of def `idx`: its
        innermost declaration in scope there, or ""."""
        key = (idx, name)
        decls = self.decls.get(key)
        if decls is None:
            decls = self.decls[key] = [e for e in map(_scoped, self.pending.pop(key, ())) if e is not None]
        best, out = -1, ""
        for start, end, t in decls:
            if start <= pos < end and start > best:
                best, out = start, t
        return out

    def arg_types(self, argv: list[Node], idx: int, unknown: set[str]) -> tuple[str, ...] | None:
        """The types of the arguments `argv` (an argument_list's named
        children but comments) of a call in def `idx`, "" where unknown; None
        when none is known."""
        out = tuple([self.expr_type(a, idx, unknown) for a in argv])
        return out if any(out) else None

    def expr_type(self, node: Node, idx: int, unknown: set[str], depth: int = 0) -> str:
        """The type of expression `node` where the source shows it, else ""."""
        t = node.type
        if t == "identifier":
            return self.type_at(idx, node.text.decode(errors="replace"), node.start_byte)
        if t == "null":  # nullptr, or NULL (also an integer)
            return "nullptr_t" if node.text == b"nullptr" else ""
        if t in ("true", "false", "sizeof_expression") or t.endswith(("_literal", "_string")):
            return literal_type(t, node.text.decode(errors="replace"))
        if t == "parenthesized_expression" and node.named_child_count == 1 and depth < 4:
            return self.expr_type(node.named_children[0], idx, unknown, depth + 1)
        if t == "cast_expression":
            tnode = node.child_by_field_id(F_TYPE)
            return mask(declared(tnode.text.decode(errors="replace")), unknown) if tnode is not None else ""
        if t == "call_expression":  # static_cast<T>(e) and friends
            fn = node.child_by_field_id(F_FUNCTION)
            name = fn.child_by_field_id(F_NAME) if fn is not None and fn.type == "template_function" else None
            targs = fn.child_by_field_id(F_ARGUMENTS) if name is not None else None
            if name is not None and name.text in _CASTS and targs is not None and targs.named_child_count == 1:
                return mask(declared(targs.named_children[0].text.decode(errors="replace")), unknown)
        return ""


def _scoped(decl: tuple[Node, Node, str | None, set[str]]) -> tuple[int, int, str] | None:
    """(scope start, end, type) of a declaration DeclaredTypes.declare kept,
    or None when its type is unknown or it is in no scope."""
    node, d, param, unknown = decl
    vtype = mask(declared(param) if param is not None else declared_type(node, d), unknown)
    if not vtype:
        return None
    scope = node.parent
    while scope is not None and scope.type not in _SCOPES:
        scope = scope.parent
    if scope is None:
        return None
    return (scope.start_byte if param is not None else node.start_byte), scope.end_byte, vtype


_WRAPPERS = frozenset({"pointer_declarator", "reference_declarator", "attributed_declarator",
                       "parenthesized_declarator"})


# Where a declaration's name is in scope (Note [Typed overloads]).
_SCOPES = frozenset({"compound_statement", "for_statement", "for_range_loop", "if_statement", "while_statement",
                     "switch_statement", "catch_clause", "lambda_expression", "function_definition"})
_CASTS = frozenset({b"static_cast", b"reinterpret_cast", b"const_cast", b"bit_cast", b"c10::bit_cast",
                    b"std::bit_cast"})


def declared_type(node: Node, d: Node) -> str:
    """The type declaration `node` gives its declarator `d` (Note [Typed
    overloads]): the written type, `const`, and a `*` per pointer or array
    declarator, `&` for a reference; "" for `auto` or a function."""
    tnode = node.child_by_field_id(F_TYPE)
    if tnode is None or tnode.type == "placeholder_type_specifier":
        return ""
    const = any(c.type == "type_qualifier" and c.text == b"const" for c in node.children)
    suffix = ""
    while d is not None and d.type not in ("identifier", "field_identifier"):
        if d.type in ("pointer_declarator", "array_declarator"):
            suffix += "*"
        elif d.type == "reference_declarator":
            suffix += "&"
        elif d.type not in ("init_declarator", "attributed_declarator", "parenthesized_declarator"):
            return ""
        d = d.child_by_field_id(F_DECLARATOR) or (d.named_children[-1] if d.type in _WRAPPERS
                                                    and d.named_children else None)
    return declared(("const " if const else "") + tnode.text.decode(errors="replace") + suffix)


def template_names(defn: Node, outer: Node | None) -> tuple[str, ...]:
    """The names of the template type parameters of function template
    `defn` (each enclosing `template <...>`; `outer` is `defn`'s parent):
    () when it is no template, ("",) for a template of none."""
    out: list[str] = []
    t = outer
    templ = False
    while t is not None and t.type == "template_declaration":
        templ = True
        out.extend(_type_params(t))
        t = t.parent
    return tuple(out) or (("",) if templ else ())


def class_template_names(defn: Node, outer: Node | None) -> tuple[str, ...]:
    """The names of the template type parameters of the class templates
    whose bodies hold `defn` (`outer` is `defn`'s parent), and those of
    `defn`'s own template: this read `p is not defn.parent`, which always
    held (each `.parent` is a new Node object), and the output is kept."""
    out: list[str] = []
    p = outer
    while p is not None and (t := p.type) not in ("translation_unit", "namespace_definition"):
        if t == "template_declaration":
            out.extend(_type_params(p))
        p = p.parent
    return tuple(out)


def _type_params(t: Node) -> list[str]:
    """The names of the type parameters of template declaration `t`."""
    params = t.child_by_field_id(F_PARAMETERS)
    out = []
    for p in params.named_children if params is not None else ():
        if p.type in ("type_parameter_declaration", "variadic_type_parameter_declaration",
                      "optional_type_parameter_declaration"):
            n = p.child_by_field_id(F_NAME) or next((c for c in p.named_children if c.type == "type_identifier"), None)
            if n is not None:
                out.append(n.text.decode(errors="replace"))
    return out
