"""Scan one C++/CUDA file with tree-sitter into unresolved per-file facts.

Note [Per-file facts]: `scan_file` sees one file only, so names stay as
written (`("cpublas", "gemm")`); `extractors.cpp.resolve` later resolves them
against the definitions of the whole tree. A `FileFacts` depends on the file's
bytes and path alone, which is what makes the content-hash cache
(`extractors.cpp.cache`) and incremental re-indexing (issue 9) sound.

Example:
    >>> facts = scan_file("aten/x.cpp", b"namespace at { void f() { g(); } }")
    >>> facts.defs
    (('at::f', 'f', 1, 0),)
"""

from __future__ import annotations

import bisect
import operator
import pickle
import re
from bisect import bisect_right
from dataclasses import dataclass

import tree_sitter as ts
import tree_sitter_cpp as tsc

from extractors.cpp import argtypes, constructs
from extractors.cpp.aten import BINARY_OPS, COMPOUND_OPS, UNARY_OPS
from extractors.cpp.fields import (
    F_ALTERNATIVE,
    F_ARGUMENT,
    F_ARGUMENTS,
    F_BODY,
    F_CONSEQUENCE,
    F_DECLARATOR,
    F_DEFAULT_VALUE,
    F_FIELD,
    F_FUNCTION,
    F_INDICES,
    F_LEFT,
    F_NAME,
    F_OPERATOR,
    F_PARAMETERS,
    F_RIGHT,
    F_TYPE,
    F_VALUE,
)
from extractors.cpp.macros import expand_local_macros
from extractors.cpp.names import (
    ANON,
    anon_ns,
    is_internal_part,
    is_macro_name,
    member_name,
    name_parts,
    sig_text,
    static_scope,
    strip_templates,
)
from extractors.cpp.preprocess import Cleaned, blank_directives, blanked, clean, directives, mask

KERNEL = 2  # FileFacts.defs flag: a CUDA __global__ function
STATIC = 4  # FileFacts.defs flag: a `static` function at namespace scope (internal linkage)

# FileFacts.calls member codes: f(), x.f() on an unknown type, this->f(),
# x.f() where x is a parameter or local declared with class type T (parts T..., f),
# e.f() on a receiver expression (Note [Receiver expressions]), and an operator
# (`a + b`: parts ("+",), receiver (lhs enc, rhs enc); Note [Tensor operators])
FREE, MEMBER, THIS, TYPED, RECV, OPER = 0, 1, 2, 3, 4, 5
# ... and the arguments of a call f(...) that name something: an identifier
# that is no local (ARG: a dispatch stub passed on, `impl(self, cumsum_stub)`),
# an object constructed in place (OBJ: `sortCommon(SmallBitonicSort{}, ...)`,
# parts: f's, receiver: (argument index, the object's type parts, braced))
ARG, OBJ = 6, 7
# Note [Receiver expressions]: a RECV call `e.f()` carries (arrow, enc) where enc
# describes the receiver `e` for the resolver to type:
#   ("v", type parts, pointee parts)    a variable declared with that type
#   ("c", callee parts, code, sub, n)   the result of a call with n arguments
#                                       (None: unknown; code FREE, or RECV with
#                                       sub = (arrow, enc) of its receiver)
#   ("this",)                           the caller's own class
#   ("m", enc, name)                    field `name` of enc's class (a bare
#                                       name: ("m", ("this",), name))
#   ("i", enc)                          an element enc[i] of a container
#                                       (or t[i] of a Tensor)
#   ("d", enc)                          *enc (a smart pointer's pointee)
#   ("o", op, lhs enc, rhs enc)         `lhs op rhs` / `op lhs` (Tensor operators)
# and the resolver types it through the callees' declared return types.
# FileFacts.calls flag bits; above NARGS_SHIFT, 1 + the number of arguments
# of a call f(...) (0: not counted), which picks an overload (Note [Overload ids]);
# GLOBAL: a free call written `::f(...)`, looked up in the global namespace only
IN_MACRO, LAUNCH, GLOBAL = 1, 2, 4
NARGS_SHIFT = 4

_LANG = ts.Language(tsc.language())
_QUERY = ts.Query(
    _LANG,
    "(function_definition body: (_)) @def (call_expression) @call (ERROR) @err"
    " (parameter_declaration) @var (optional_parameter_declaration) @var (declaration) @var"
    " (for_range_loop) @var"
    " (alias_declaration) @alias (type_definition) @alias (using_declaration) @alias"
    " (namespace_alias_definition) @alias"
    " (binary_expression) @op (unary_expression) @op (subscript_expression) @op (assignment_expression) @op"
    " (argument_list (identifier) @arg) (argument_list (qualified_identifier) @arg)"
    " (argument_list (compound_literal_expression) @obj)"
    " (class_specifier body: (_)) @cls (struct_specifier body: (_)) @cls (union_specifier body: (_)) @cls",
)
# Smart pointers whose `->` reaches their first template argument.
_POINTERS = frozenset({"shared_ptr", "unique_ptr", "intrusive_ptr", "weak_intrusive_ptr", "MaybeOwned", "optional"})
# Containers whose `[i]` gives their first template argument.
_CONTAINERS = frozenset({"vector", "SmallVector", "ArrayRef", "array", "List", "IListRef", "deque", "OptionalArrayRef"})
_PARSER = ts.Parser(_LANG)

_LIB_RE = re.compile(r"^(TORCH_LIBRARY(?:_FRAGMENT|_IMPL)?)\s*\(([^)]*)\)")
_STRUCTURED_RE = re.compile(
    r"^(TORCH_IMPL_FUNC|TORCH_META_FUNC2?|TORCH_PRECOMPUTE_META_FUNC2?)\s*\(\s*(\w+)\s*(?:,\s*(\w+)\s*)?\)"
)
_STRUCTURED_KIND = {
    "TORCH_IMPL_FUNC": ("impl", "impl"),
    "TORCH_META_FUNC": ("meta", "meta"),
    "TORCH_META_FUNC2": ("meta", "meta"),
    "TORCH_PRECOMPUTE_META_FUNC": ("precompute_meta", "meta"),
    "TORCH_PRECOMPUTE_META_FUNC2": ("precompute_meta", "meta"),
}
_GTEST_RE = re.compile(r"^(TEST|TEST_F|TEST_P|TYPED_TEST|TYPED_TEST_P)\s*\(\s*(\w+)\s*,\s*(\w+)\s*\)")
_DECLARATOR_WRAPPERS = frozenset(
    {"pointer_declarator", "reference_declarator", "attributed_declarator", "parenthesized_declarator"}
)


@dataclass(frozen=True, slots=True)
class FileFacts:
    """Everything one file says, names unresolved (see Note [Per-file facts]).

    defs:     (fn, name, line, flags)              flags: KERNEL, STATIC
    classes:  (qualified name, (base classes as written, fields (name, type, template arg)))
              of classes/structs with a body
    returns:  per def, its declared return type (parts, pointee parts) or ()
    calls:    (def index, name parts, member code, line, flag bits, receiver,
              argument types: "" where unknown, None when none is known,
              Note [Typed overloads]),
              kept pickled (packed_calls) and unpacked on use: an incremental
              run resolves only the changed files' calls, and reads the others'
              FileFacts (from the cache) for their definitions alone
    binds:    (py, target parts | ("<lambda>",), line, scope)
    lib_defs: (ns, op, schema, line)
    lib_impls:(ns, op, key, fn parts | ("<lambda>",), line, scope)
    impl_funcs:(name, kind, fn, line)
    stub_decls / stub_defines: (stub, line)
    stub_regs: (stub parts, key, fn parts, line, scope)
    errors:   tree-sitter ERROR nodes in the file
    inline_ns: names of the inline namespaces the file declares (CPU_CAPABILITY)
    aliases:  (kind, scope, name, target parts, template arg parts, in a body)
              of the aliases (Note [Aliases]): kind "type" (`using N = T;`,
              `typedef T N;`), "using" (`using a::b::f;`), "namespace"
              (`namespace n = a::b;`), "using-namespace" (`using namespace
              a::b;`, name ""); type aliases in a body only type its locals
    includes: the `#include` targets as written ("ATen/core/Tensor.h")
    mentions: every name component the calls and constructs write (what
              resolving them may look up: Note [Incremental resolution])
    tparam_uses: (def index, parameter index, method names) of a function
              template's parameters of a template parameter's type and what
              its body calls on them (`sorter.sort(...)`; "operator()" for
              `f(...)`): Note [Functor arguments]
    sigs:     per def, (id suffix, fewest arguments, most or -1 if variadic,
              the names of its template type parameters: () for a non-template,
              ("",) for a template of none) of its parameter list (Note
              [Overload ids], Note [Typed overloads]), or () unknown
    """

    file: str
    lang: str
    defs: tuple[tuple[str, str, int, int], ...]
    returns: tuple[tuple, ...]
    classes: tuple[tuple[str, tuple], ...]
    packed_calls: bytes  # the calls, pickled: see `calls`
    binds: tuple[tuple[str, tuple[str, ...], int, str], ...]
    lib_defs: tuple[tuple[str, str, str, int], ...]
    lib_impls: tuple[tuple[str, str, str, tuple[str, ...], int, str], ...]
    impl_funcs: tuple[tuple[str, str, str, int], ...]
    stub_decls: tuple[tuple[str, int], ...]
    stub_defines: tuple[tuple[str, int], ...]
    stub_regs: tuple[tuple[tuple[str, ...], str, tuple[str, ...], int, str], ...]
    errors: int
    inline_ns: tuple[str, ...] = ()
    aliases: tuple[tuple[str, str, str, tuple[str, ...], tuple[str, ...], bool], ...] = ()
    includes: tuple[str, ...] = ()
    mentions: frozenset[str] = frozenset()
    tparam_uses: tuple[tuple[int, int, tuple[str, ...]], ...] = ()
    sigs: tuple[tuple, ...] = ()

    @property
    def calls(self) -> tuple[tuple[int, tuple[str, ...], int, int, int, tuple | None, tuple | None], ...]:
        """The calls (see the class docstring), unpacked."""
        return pickle.loads(self.packed_calls)


def lang_of(rel: str) -> str:
    """"cuda" for .cu/.cuh files, else "cpp"."""
    return "cuda" if rel.endswith((".cu", ".cuh")) else "cpp"


def scope_of(node: ts.Node, classes: bool = True, namespaces: bool = True,
             anon: str = ANON) -> tuple[list[str], bool]:
    """The enclosing namespaces (and classes) of `node`, outermost first, and
    whether `node` sits inside a function body. Inline namespaces are kept
    (CPU_CAPABILITY, as written; lookup skips them); anonymous ones are `anon`
    (the scanner passes the file's, Note [Internal linkage ids])."""
    out: list[str] = []
    nested = False
    p = node.parent
    while p is not None:
        t = p.type
        if t == "namespace_definition" and namespaces:
            name = p.child_by_field_id(F_NAME)
            if name is None:
                out.append(anon)
            else:  # inline namespaces too: the resolver treats them as transparent
                out.extend(reversed(name.text.decode(errors="replace").replace(" ", "").split("::")))
        elif classes and t in ("class_specifier", "struct_specifier", "union_specifier"):
            name = p.child_by_field_id(F_NAME)
            if name is not None:
                out.append(strip_templates(name.text.decode(errors="replace")))
        elif t in ("function_definition", "lambda_expression"):
            nested = True
        p = p.parent
    out.reverse()
    return out, nested


def _declarator_name(defn: ts.Node) -> ts.Node | None:
    """The node naming a function definition (identifier, qualified id, macro call...)."""
    d = defn.child_by_field_id(F_DECLARATOR)
    while d is not None:
        if d.type == "function_declarator":
            return d.child_by_field_id(F_DECLARATOR)
        if d.type == "operator_cast":
            return d
        if d.type in _DECLARATOR_WRAPPERS:
            d = d.child_by_field_id(F_DECLARATOR) or (d.named_children[-1] if d.named_children else None)
        else:
            return None
    return None


def _qualify(scope: list[str], parts: tuple[str, ...]) -> tuple[str, ...]:
    """Qualified name of `parts` written inside `scope`: `native::f` inside
    namespace `at` is `at::native::f`; `at::native::f` inside `at::native`
    is `at::native::f` (a qualifier naming an enclosing scope restarts there)."""
    if len(parts) > 1 and parts[0] in scope:
        i = len(scope) - 1 - scope[::-1].index(parts[0])
        return tuple(scope[:i]) + parts
    return tuple(scope) + parts


class _Scanner:
    """Holds the state of one file's scan; `run` returns its FileFacts."""

    def __init__(self, rel: str, src: bytes) -> None:
        self.rel = rel
        self.anon = anon_ns(rel)  # Note [Internal linkage ids]
        self.src = src = expand_local_macros(src)
        self.cleaned: Cleaned = clean(src)
        self.tree = _PARSER.parse(self.cleaned.text)
        self.trees = [self.tree]
        if rel.endswith(".mm") and self.tree.root_node.has_error:
            self.trees = [self.tree, *_chunk_trees(self.cleaned.text)]
        # Note [Textual namespaces]: where tree-sitter met ERROR nodes, a
        # namespace's braces may not survive in the tree; then namespaces come
        # from brace matching on the text, classes still from the tree.
        self.text_ns = _text_namespaces(self.cleaned.text, self.anon) if self.tree.root_node.has_error else None
        self.defs: list[tuple[str, str, int, int]] = []
        self.returns: list[tuple] = []
        self.sigs: list[tuple] = []  # FileFacts.sigs
        self.classes: dict[str, tuple[tuple[str, ...], ...]] = {}
        self.var_types: dict[int, dict[str, tuple]] = {}  # def idx -> var -> ("v", ...) | ("e", enc)
        self.locals: dict[int, set[str]] = {}  # def idx -> every parameter and local it declares
        self.local_types: dict[int, dict[str, tuple]] = {}  # def idx -> `using Vec = ...` in its body
        self.tparams: dict[int, dict[str, int]] = {}  # def idx -> its parameters of a template parameter's type
        self.ttypes: dict[int, dict[str, int]] = {}  # def idx -> its template type parameters (Note [Functor arguments])
        self.tparam_uses: dict[tuple[int, int], set[str]] = {}
        self.names: set[str] = set()  # the names of the receivers built (FileFacts.mentions)
        self.obj_callees: dict[int, tuple[str, ...]] = {}
        self.pointers: dict[int, set[str]] = {}  # def idx -> its locals declared `T* p` / `T a[n]`
        self.free_defs: set[int] = set()  # defs that are free functions (unqualified, not in a class)
        self.gtest_defs: set[int] = set()  # TEST(...) bodies (their library objects live for one test)
        self.aliases: list[tuple] = []
        self.calls: list[tuple[int, tuple[str, ...], int, int, int, tuple | None, tuple | None]] = []
        self.types = argtypes.DeclaredTypes()  # Note [Typed overloads]
        self.unknown: dict[int, set[str]] = {}  # def idx -> its _unknown_names
        # (start, end, kind) -> _param_type of the defs' parameters; not kept for a
        # file of several trees (.mm chunks), whose nodes of a range may differ
        self.param_types: dict[tuple[int, int, str], str] | None = {} if len(self.trees) == 1 else None
        self.blocks: list[tuple[int, int, int, tuple]] = []  # (start, end, def idx, block info)
        self.out = constructs.Constructs()

    def run(self) -> FileFacts:
        caps = _captures(self.trees)
        self._collect_defs(caps.get("def", []), caps.get("cls", []))
        self.blocks.sort()
        self.block_starts = [b[0] for b in self.blocks]
        self._collect_aliases(_in_order(caps.get("alias", [])))
        self._collect_vars(_in_order(caps.get("var", [])))
        ops = caps.get("op", [])
        self._collect_fn_assignments(ops)
        self._collect_calls(_in_order(caps.get("call", [])))
        self._collect_operators(ops)
        self._collect_args(caps.get("arg", []))
        self._collect_objs(caps.get("obj", []))
        constructs.scan_stub_macros(self.src, self.rel, self.out, self.scope_text_at)
        o = self.out
        calls = tuple(self.calls)
        return FileFacts(
            self.rel, lang_of(self.rel), tuple(self.defs), tuple(self.returns),
            tuple(sorted(self.classes.items())),
            pickle.dumps(calls, 5), tuple(o.binds), tuple(o.lib_defs), tuple(o.lib_impls),
            tuple(o.impl_funcs), tuple(o.stub_decls), tuple(o.stub_defines), tuple(o.stub_regs),
            len(caps.get("err", [])),
            tuple(sorted(set(_INLINE_NS_RE.findall(self.cleaned.text.decode(errors="replace"))))),
            tuple(self.aliases),
            _includes(self.src),
            self._mentions(calls),
            tuple(sorted((i, p, tuple(sorted(n))) for (i, p), n in self.tparam_uses.items())),
            tuple(self.sigs),
        )

    def _mentions(self, calls: tuple) -> frozenset[str]:
        """FileFacts.mentions: the names of the calls and of their receivers
        (collected by _recv as it builds them) and of the constructs."""
        names = self.names
        for c in calls:
            names.update(c[1])
            if c[2] == OBJ:
                names.update(c[5][1])
        o = self.out
        return frozenset("::".join(names).split("::")) | _names_in((o.binds, o.lib_impls, o.impl_funcs, o.stub_regs))

    def spans(self) -> list[tuple[str, int, int]]:
        """(fn, line of its name, last line of its body) of each function definition."""
        caps = _captures(self.trees)
        self._collect_defs(caps.get("def", []), caps.get("cls", []))
        text = self.cleaned.text
        return [(self.defs[idx][0], self.defs[idx][2], text.count(b"\n", 0, end) + 1)
                for _start, end, idx, _info in self.blocks if idx >= 0]

    def _collect_defs(self, defs: list[ts.Node], classes: list[ts.Node]) -> None:
        kernel_defs: list[tuple[int, int, int]] = []  # (start, declarator start, def idx)
        for defn in _in_order(defs):
            scope, nested = self.scope(defn)
            if nested:
                continue
            name_node = _declarator_name(defn)
            if name_node is None:
                continue
            idx = self._add_def(defn, name_node, scope)
            if idx is not None and idx >= 0:
                kernel_defs.append((defn.start_byte, name_node.start_byte, idx))
        self._mark_kernels(kernel_defs)
        self._collect_classes(classes)

    def _add_def(self, defn: ts.Node, name_node: ts.Node, scope: list[str]) -> int | None:
        text = name_node.text.decode(errors="replace")
        if name_node.type == "operator_cast":
            text = text.split("(", 1)[0]
        line = name_node.start_point[0] + 1
        body = defn.child_by_field_id(F_BODY)
        info: tuple = ("fn",)
        m = _STRUCTURED_RE.match(text) if name_node.type == "function_declarator" else None
        if m:
            macro, name, overload = m.groups()
            kind, method = _STRUCTURED_KIND[macro]
            cls = f"structured_{name}" + (f"_{overload}" if overload else "")
            qual = "::".join([*scope, cls, method])
            self.out.impl_funcs.append((name + (f".{overload}" if overload else ""), kind, qual, line))
            self.classes.setdefault("::".join([*scope, cls]), ((), ()))
            short = method
        elif name_node.type == "function_declarator" or is_macro_name(text):
            decl = name_node.parent.text.decode(errors="replace") if name_node.parent else text
            gtest = _GTEST_RE.match(decl)
            if gtest:  # gtest's TEST(Suite, Name) defines Suite_Name_Test::TestBody
                qual = "::".join([*scope, f"{gtest.group(2)}_{gtest.group(3)}_Test", "TestBody"])
                idx = self._push_def(qual, "TestBody", line, defn, body, info)
                self.gtest_defs.add(idx)
                return idx
            lib = _LIB_RE.match(decl)
            info = ("lib",) + tuple(a.strip() for a in lib.group(2).split(",")) if lib else ("macro",)
            self.blocks.append((defn.start_byte, body.end_byte, -1, info + (lib.group(1) if lib else "",)))
            return None
        else:
            parts = name_parts(text)
            if not parts:
                return None
            qual = "::".join(_qualify(scope, parts))
            short = parts[-1]
            if len(parts) == 1 and not _in_class_body(defn):  # a free function: no `this`, no fields
                static = any(c.type == "storage_class_specifier" and c.text == b"static" for c in defn.children)
                if static and not any(is_internal_part(p) for p in scope):  # Note [Internal linkage ids]
                    qual = "::".join([*_qualify(scope, parts)[:-1], static_scope(self.rel), short])
                idx = self._push_def(qual, short, line, defn, body, info, STATIC if static else 0)
                self.free_defs.add(idx)
                return idx
        return self._push_def(qual, short, line, defn, body, info)

    def _push_def(self, qual: str, short: str, line: int, defn: ts.Node, body: ts.Node, info: tuple,
                  flags: int = 0) -> int:
        """Add def `qual` of definition `defn` (`body`'s parent) and its block."""
        self.defs.append((qual, short, line, flags))
        tnode = defn.child_by_field_id(F_TYPE)
        ret = _var_type(tnode) if tnode is not None and tnode.type in _TYPE_NODES else None
        self.returns.append(ret or ())
        outer = defn.parent
        self.sigs.append(_signature(defn, outer, self.param_types))
        idx = len(self.defs) - 1
        if outer is not None and outer.type == "template_declaration":
            tlist = outer.child_by_field_id(F_PARAMETERS)
            params = _template_params(defn, tlist)
            if params:
                self.tparams[idx] = params
            ttypes = _template_type_params(tlist)
            if ttypes:
                self.ttypes[idx] = ttypes
        self.blocks.append((defn.start_byte, body.end_byte, idx, info))  # from the def: its parameters are in it
        return idx

    def _mark_kernels(self, kernel_defs: list[tuple[int, int, int]]) -> None:
        if not self.cleaned.globals_:
            return
        starts = [k[0] for k in kernel_defs]
        text = self.cleaned.text
        for g in self.cleaned.globals_:
            i = bisect.bisect_left(starts, g)
            hit = None
            if i > 0 and kernel_defs[i - 1][1] > g:
                hit = kernel_defs[i - 1][2]
            elif i < len(starts) and not text[g : starts[i]].strip():
                hit = kernel_defs[i][2]
            if hit is not None:
                q, n, line, flags = self.defs[hit]
                self.defs[hit] = (q, n, line, flags | KERNEL)

    def _collect_classes(self, nodes: list[ts.Node]) -> None:
        for node in _in_order(nodes):
            name = node.child_by_field_id(F_NAME)
            if name is None:
                continue
            scope, nested = self.scope(node)
            if nested:
                continue
            parts = name_parts(name.text.decode(errors="replace"))
            if not parts:
                continue
            bases = []
            for child in node.named_children:
                if child.type == "base_class_clause":
                    for b in child.named_children:
                        bp = name_parts(b.text.decode(errors="replace"))
                        if bp and b.type != "access_specifier":
                            bases.append(bp)
            qual = "::".join(_qualify(scope, parts))
            old = self.classes.get(qual, ((), ()))
            self.classes[qual] = (tuple(bases) or old[0], _fields(node) or old[1])

    def _in_defs(self, nodes: list[ts.Node]):
        """(node, index of the def whose body holds it) for the nodes inside a def's body."""
        starts = self.block_starts
        for node in nodes:
            i = bisect.bisect_right(starts, node.start_byte) - 1
            if i < 0 or node.end_byte > self.blocks[i][1] or self.blocks[i][2] < 0:
                continue
            yield node, self.blocks[i][2]

    def _collect_vars(self, nodes: list[ts.Node]) -> None:
        """Declared class types of parameters and locals, per def (for x.f()),
        and the names of all of them (a name declared in the function is no
        field, function or stub)."""
        for node, idx in self._in_defs(nodes):
            names = []
            local = self.locals.get(idx)
            if local is None:
                local = self.locals[idx] = set()
            for d in node.children_by_field_id(F_DECLARATOR):
                n = _declared_name(d)
                if n is None:
                    continue
                name = n.text.decode(errors="replace")
                names.append(name)
                local.add(name)
                if _is_pointer(d):
                    self.pointers.setdefault(idx, set()).add(name)
                self._declare(node, d, name, idx)
            tnode = node.child_by_field_id(F_TYPE)
            if tnode is None:
                continue
            ttype = tnode.type
            if ttype == "placeholder_type_specifier":
                self._auto_vars(node, idx)
                continue
            if ttype not in _TYPE_NODES:
                continue
            vtype = _var_type(tnode)
            if vtype is None:
                continue
            local = self.local_types.get(idx, {}).get(vtype[0][0]) if len(vtype[0]) == 1 else None
            vtype = ("v", *(local or vtype))
            table = self.var_types.setdefault(idx, {})
            for name in names:
                table[name] = vtype

    def _declare(self, node: ts.Node, d: ts.Node, name: str, idx: int) -> None:
        """Record the type declarator `d` of declaration `node` gives `name`
        in def `idx` (Note [Typed overloads])."""
        param = None
        kind = node.type
        if kind in ("parameter_declaration", "optional_parameter_declaration"):
            seen = self.param_types
            param = seen.get((node.start_byte, node.end_byte, kind)) if seen is not None else None
            if param is None:
                param = _param_type(node)
        self.types.declare(node, d, name, idx, param, self._unknown_names(idx))

    def _unknown_names(self, idx: int) -> set[str]:
        """The names def `idx` writes that are no type of the tree as written
        there: its and its classes' template parameters, its local type aliases.
        Asked once per def: its sig and local aliases are known by then (the
        defs and aliases are collected before the vars and calls)."""
        names = self.unknown.get(idx)
        if names is None:
            sig = self.sigs[idx] if idx < len(self.sigs) else ()
            names = {*(sig[3] if len(sig) > 3 else ()), *(sig[4] if len(sig) > 4 else ()),
                     *self.local_types.get(idx, ())}
            names.discard("")
            self.unknown[idx] = names
        return names

    def _arg_types(self, argv: list[ts.Node] | None, idx: int) -> tuple[str, ...] | None:
        """The types of a call's arguments `argv` (`_args`; Note [Typed overloads])."""
        if argv is None:
            return None
        unknown = self.unknown.get(idx)
        return self.types.arg_types(argv, idx, unknown if unknown is not None else self._unknown_names(idx))

    def _auto_vars(self, node: ts.Node, idx: int) -> None:
        """`auto x = <expr>;` (`auto& x`, `const auto* x` too): x has the
        expression's type, found later by the resolver; `for (auto& x : e)`:
        an element of e."""
        if node.type == "for_range_loop":
            var, value = _declared_name(node.child_by_field_id(F_DECLARATOR)), node.child_by_field_id(F_RIGHT)
            enc = self._recv(value, idx, 0) if var is not None else None
            if enc is not None:
                self.var_types.setdefault(idx, {})[var.text.decode(errors="replace")] = ("e", ("i", enc))
            return
        for d in node.children_by_field_id(F_DECLARATOR):
            if d.type != "init_declarator":
                continue
            var, value = _declared_name(d.child_by_field_id(F_DECLARATOR)), d.child_by_field_id(F_VALUE)
            if var is None or value is None:
                continue
            refs = _fn_refs(value)
            if refs is not None:  # `auto kernel = &flash_fwd_kernel<...>;` (Note [Calls through locals])
                self.var_types.setdefault(idx, {})[var.text.decode(errors="replace")] = ("f", refs)
                continue
            enc = self._recv(value, idx, 0)
            if enc is not None:
                self.var_types.setdefault(idx, {})[var.text.decode(errors="replace")] = ("e", enc)

    def _collect_aliases(self, nodes: list[ts.Node]) -> None:
        """Namespace- and class-scope aliases (FileFacts.aliases, Note [Aliases]);
        type aliases in a function body type that function's locals."""
        starts = [b[0] for b in self.blocks]
        for node in nodes:
            scope, nested = self.scope(node)
            row = _alias_row(node)
            if row is None:
                continue
            if not nested:
                self.aliases.append((row[0], "::".join(scope), *row[1:], False))
                continue
            if row[0] != "type":  # `using namespace at;` in a body: for this file only
                self.aliases.append((row[0], "::".join(self.scope(node, classes=False)[0]), *row[1:], True))
                continue
            i = bisect.bisect_right(starts, node.start_byte) - 1
            if i >= 0 and node.end_byte <= self.blocks[i][1] and self.blocks[i][2] >= 0:
                self.local_types.setdefault(self.blocks[i][2], {})[row[1]] = row[2:]

    def _recv(self, node: ts.Node | None, idx: int, depth: int) -> tuple | None:
        """The receiver encoding of expression `node` (Note [Receiver expressions])."""
        if node is None or depth > 5:
            return None
        t = node.type
        if t == "identifier":  # the kinds by how often they come
            return self._recv_name(node.text.decode(errors="replace"), idx)
        if t == "field_expression":
            field = node.child_by_field_id(F_FIELD)
            sub = self._recv(node.child_by_field_id(F_ARGUMENT), idx, depth + 1)
            if field is None or sub is None:
                return None
            name = field.text.decode(errors="replace")
            self.names.add(name)
            return ("m", sub, name)
        if t == "call_expression":
            return self._recv_call(node, idx, depth)
        if t in _NO_RECV:
            return None
        if t == "conditional_expression":
            return (self._recv(node.child_by_field_id(F_CONSEQUENCE), idx, depth + 1)
                    or self._recv(node.child_by_field_id(F_ALTERNATIVE), idx, depth + 1))
        if t == "pointer_expression":
            op = node.child_by_field_id(F_OPERATOR)
            sub = self._recv(node.child_by_field_id(F_ARGUMENT), idx, depth + 1) if op and op.type == "*" else None
            return ("d", sub) if sub is not None else None
        if t == "binary_expression":
            op = node.child_by_field_id(F_OPERATOR)
            if op is None or op.type not in BINARY_OPS:
                return None
            lhs = self._recv(node.child_by_field_id(F_LEFT), idx, depth + 1)
            rhs = self._recv(node.child_by_field_id(F_RIGHT), idx, depth + 1)
            return ("o", op.type, lhs, rhs) if lhs is not None or rhs is not None else None
        if t == "unary_expression":
            op = node.child_by_field_id(F_OPERATOR)
            sub = self._recv(node.child_by_field_id(F_ARGUMENT), idx, depth + 1) if op and op.type == "-" else None
            return ("o", "u-", sub, None) if sub is not None else None
        if t == "subscript_expression":
            sub = self._recv(node.child_by_field_id(F_ARGUMENT), idx, depth + 1)
            return ("i", sub) if sub is not None else None
        if t == "this":
            return ("this",)
        if t == "parenthesized_expression" and node.named_child_count == 1:
            return self._recv(node.named_children[0], idx, depth + 1)
        return None

    def _recv_name(self, name: str, idx: int) -> tuple | None:
        """_recv of identifier `name` in def `idx`."""
        v = self.var_types.get(idx, {}).get(name)
        if v is None:
            if idx in self.free_defs or name in self.locals.get(idx, ()):
                return None  # a local of no known type, or no field: a free function's
            self.names.add(name)
            return ("m", ("this",), name)  # a field of the caller's class, if any
        if v[0] == "v":
            self.names.update(v[1])
            self.names.update(v[2])
            return v
        return v[1] if v[0] == "e" else None

    def _recv_call(self, node: ts.Node, idx: int, depth: int) -> tuple | None:
        """_recv of call expression `node`."""
        fn = node.child_by_field_id(F_FUNCTION)
        if fn is None:
            return None
        ftype = fn.type
        if ftype == "field_expression":
            field = fn.child_by_field_id(F_FIELD)
            sub = self._recv(fn.child_by_field_id(F_ARGUMENT), idx, depth + 1)
            if field is None or sub is None:
                return None
            name = member_name(field.text.decode(errors="replace"))
            if not name.isidentifier():
                return None
            self.names.add(name)
            return ("c", (name,), RECV, (_is_arrow(fn), sub), _nargs(node))
        if ftype in _NAME_NODES:
            text = fn.text.decode(errors="replace")
            parts = name_parts(text)
            if not parts or is_macro_name(parts[-1]):
                return None
            if parts[-1] in _MAKERS and "<" in text:  # make_shared<T>(...) and friends
                inner = name_parts(text[text.index("<") + 1 : text.rindex(">")].split(",")[0]) if ">" in text else ()
                self.names.update((*inner, _MAKERS[parts[-1]]))
                return ("v", (_MAKERS[parts[-1]],), inner) if inner else None
            self.names.update(parts)
            return ("c", parts, FREE, None, _nargs(node))
        return None

    def _collect_calls(self, calls: list[ts.Node]) -> None:
        starts, blocks = self.block_starts, self.blocks
        macro_ends: list[int] = []
        objs: list[ts.Node] = []  # free calls that are arguments: objects constructed in place?
        for call in calls:
            start = call.start_byte
            while macro_ends and macro_ends[-1] <= start:
                macro_ends.pop()
            fn = call.child_by_field_id(F_FUNCTION)
            if fn is None:
                continue
            i = bisect_right(starts, start) - 1
            block = blocks[i] if i >= 0 and call.end_byte <= blocks[i][1] else None
            ftype = fn.type
            if ftype == "field_expression":
                self._member_call(call, fn, block, bool(macro_ends))
                continue
            if ftype not in _NAME_NODES:
                continue
            ftext = fn.text
            parts = name_parts(ftext.decode(errors="replace"))
            if not parts:
                continue
            if is_macro_name(parts[-1]):
                macro_ends.append(call.end_byte)
                continue
            if block is not None and block[2] >= 0:
                self._free_call(call, fn, ftext, parts, block[2], bool(macro_ends), objs)
        self._collect_objs(objs, idx_known=True)

    def _free_call(self, call: ts.Node, fn: ts.Node, ftext: bytes, parts: tuple[str, ...], idx: int,
                   in_macro: bool, objs: list) -> None:
        """Record call `call` of `fn` (written `ftext`, `parts`) in def `idx`;
        an argument of another call joins `objs` (an object constructed in place?)."""
        flags = (IN_MACRO if in_macro else 0) | (GLOBAL if ftext.startswith(b"::") else 0)
        args = call.child_by_field_id(F_ARGUMENTS)
        argv = _args(args)
        if argv is not None:
            flags |= (1 + len(argv)) << NARGS_SHIFT
        launches = self.cleaned.launches
        if launches:
            j = bisect.bisect_left(launches, fn.end_byte)
            if args is not None and j < len(launches) and launches[j] < args.start_byte:
                flags |= LAUNCH
        line = fn.start_point[0] + 1
        if len(parts) == 1 and not flags & GLOBAL and parts[0] in self.locals.get(idx, ()):
            self._local_call(idx, parts[0], line, flags)
            return
        parent = call.parent
        if len(parts) <= 2 and parts[0] in self.ttypes.get(idx, ()):  # K is a template parameter: no function
            use = parts[1] if len(parts) == 2 else "operator()"  # `F::compute(...)`, `K<RNG>()(...)`
            if len(parts) == 2 or (parent is not None and parent.type == "call_expression" and (
                    parent.child_by_field_id(F_FUNCTION) == call)):
                self.tparam_uses.setdefault((idx, _TARG - self.ttypes[idx][parts[0]]), set()).add(use)
            return
        self.calls.append((idx, parts, FREE, line, flags, None, self._arg_types(argv, idx)))
        self._template_args(idx, parts, fn, line)
        if parent is not None and parent.type == "argument_list":
            objs.append((call, parts, idx))

    def _template_args(self, idx: int, parts: tuple[str, ...], fn: ts.Node, line: int) -> None:
        """`f<C, RNG>(...)`: OBJ calls for the explicit template arguments that
        name a type, at index _TARG - k (Note [Functor arguments])."""
        while fn is not None and fn.type == "qualified_identifier":  # a::b::f<C>: the name's template_function
            fn = fn.child_by_field_id(F_NAME)
        targs = fn.child_by_field_id(F_ARGUMENTS) if fn is not None and fn.type == "template_function" else None
        for k, a in enumerate(targs.named_children if targs is not None else ()):
            tparts = name_parts(a.text.decode(errors="replace")) if a.type == "type_descriptor" else ()
            if tparts and not any(_builtin_type(p) for p in tparts):
                self.names.update(tparts)
                self.calls.append((idx, parts, OBJ, line, 0, (_TARG - k, tparts, True), None))

    def _local_call(self, idx: int, name: str, line: int, flags: int) -> None:
        """Note [Calls through locals]: `kernel<<<...>>>(...)` / `fn(...)` where
        `kernel` is a local or parameter is never a call of a function so named:
        a local holding functions (`auto kernel = &flash_fwd_kernel<...>;`,
        `c ? &k1 : &k2`, later `kernel = &k3;`) calls each of them; a local of
        class type calls its operator(); anything else (a lambda, a function
        parameter) nothing known."""
        v = self.var_types.get(idx, {}).get(name)
        if v is not None and v[0] == "f":
            for target in v[1]:
                self.calls.append((idx, target, FREE, line, flags, None, None))
        elif v is not None and v[0] == "v":
            self.calls.append((idx, (*v[1], "operator()"), TYPED, line, flags & IN_MACRO, None, None))
        pidx = self.tparams.get(idx, {}).get(name)
        if pidx is not None:
            self.tparam_uses.setdefault((idx, pidx), set()).add("operator()")

    def _collect_fn_assignments(self, nodes: list[ts.Node]) -> None:
        """`kernel = &k3;` adds k3 to what local `kernel` holds (Note [Calls through locals])."""
        starts = [b[0] for b in self.blocks]
        for node in nodes:
            if node.type != "assignment_expression":
                continue
            left, refs = node.child_by_field_id(F_LEFT), _fn_refs(node.child_by_field_id(F_RIGHT))
            if refs is None or left is None or left.type != "identifier":
                continue
            i = bisect.bisect_right(starts, node.start_byte) - 1
            if i < 0 or node.end_byte > self.blocks[i][1] or self.blocks[i][2] < 0:
                continue
            idx, name = self.blocks[i][2], left.text.decode(errors="replace")
            if name in self.locals.get(idx, ()):
                table = self.var_types.setdefault(idx, {})
                old = table.get(name)
                table[name] = ("f", tuple(dict.fromkeys((*(old[1] if old and old[0] == "f" else ()), *refs))))

    def _def_of(self, node: ts.Node) -> int:
        """The def whose block holds `node`, or -1."""
        i = bisect.bisect_right(self.block_starts, node.start_byte) - 1
        return self.blocks[i][2] if i >= 0 and node.end_byte <= self.blocks[i][1] else -1

    def _collect_args(self, args: list[ts.Node]) -> None:
        """ARG calls (see the code) of the calls' identifier arguments."""
        def_of = self._def_of
        for node in args:
            text = node.text.decode(errors="replace")
            if node.type == "identifier":
                if is_macro_name(text):
                    continue
                idx = def_of(node)
                if idx < 0 or text in self.locals.get(idx, ()):
                    continue
                parts = (text,)
            else:
                parts = name_parts(text)
                idx = def_of(node) if parts and not is_macro_name(parts[-1]) else -1
                if idx < 0:
                    continue
            self.calls.append((idx, parts, ARG, node.start_point[0] + 1, 0, None, None))

    def _collect_objs(self, objs: list, idx_known: bool = False) -> None:
        """OBJ calls (see the code): arguments that may construct an object in
        place; `objs` are nodes, or (call node, its parts, its def) when `idx_known`."""
        def_of = self._def_of
        callees = self.obj_callees
        for item in objs:
            if idx_known:
                node, parts, idx = item
                obj = (parts, False)
            else:
                node, obj, idx = item, None, -1
            call = node.parent.parent
            fn = call.child_by_field_id(F_FUNCTION) if call is not None and call.type == "call_expression" else None
            if fn is None or fn.type not in _NAME_NODES:
                continue
            callee = callees.get(fn.start_byte)
            if callee is None:
                callee = callees[fn.start_byte] = name_parts(fn.text.decode(errors="replace"))
            if not callee or is_macro_name(callee[-1]):
                continue
            if not idx_known:
                obj = _constructed(node)
                idx = def_of(node) if obj is not None else -1
                if idx < 0:
                    continue
            index = 0
            sib = node.prev_named_sibling
            while sib is not None:
                index += 1
                sib = sib.prev_named_sibling
            self.calls.append((idx, callee, OBJ, node.start_point[0] + 1, 0, (index, *obj), None))

    def _collect_operators(self, nodes: list[ts.Node]) -> None:
        """Operator expressions with an operand of a known or knowable type
        (Note [Tensor operators]): one OPER call per operator, at its line."""
        for node, idx in self._in_defs(nodes):
            got = self._operator(node, idx)
            if got is not None and (got[1] is not None or got[2] is not None):
                sym, lhs, rhs, at = got
                self.calls.append((idx, (sym,), OPER, at.start_point[0] + 1, 0, (lhs, rhs), None))

    def _operator(self, node: ts.Node, idx: int) -> tuple | None:
        """(symbol, lhs enc, rhs enc, node whose line it is) of an operator
        expression Tensors define, or None."""
        t = node.type
        op = node.child_by_field_id(F_OPERATOR)
        operand = self._operand
        if t == "subscript_expression":
            obj, ind = node.child_by_field_id(F_ARGUMENT), node.child_by_field_id(F_INDICES)
            first = ind.named_children[0] if ind is not None and ind.named_child_count == 1 else None
            return "[]", operand(obj, idx), operand(first, idx), node
        if op is None:
            return None
        sym = op.type
        if t == "binary_expression":
            if sym not in BINARY_OPS:
                return None
            return sym, operand(node.child_by_field_id(F_LEFT), idx), \
                operand(node.child_by_field_id(F_RIGHT), idx), op
        if t == "unary_expression":
            if sym not in UNARY_OPS:
                return None
            return "u" + sym, operand(node.child_by_field_id(F_ARGUMENT), idx), None, op
        left = node.child_by_field_id(F_LEFT)  # assignment_expression
        if sym in COMPOUND_OPS:
            return sym, operand(left, idx), operand(node.child_by_field_id(F_RIGHT), idx), op
        if sym == "=" and left is not None and left.type == "subscript_expression":  # `t[i] = v`
            return "=[]", operand(left.child_by_field_id(F_ARGUMENT), idx), \
                operand(node.child_by_field_id(F_RIGHT), idx), op
        return None

    def _operand(self, node: ts.Node | None, idx: int) -> tuple | None:
        """_recv of an operator's operand; a local pointer or array is no Tensor."""
        if node is not None and node.type == "identifier":  # _recv's first case, its name read once
            name = node.text.decode(errors="replace")
            pointers = self.pointers.get(idx)
            return None if pointers is not None and name in pointers else self._recv_name(name, idx)
        return self._recv(node, idx, 0)

    def _member_call(self, call: ts.Node, fn: ts.Node, block, in_macro: bool) -> None:
        field = fn.child_by_field_id(F_FIELD)
        if field is None:
            return
        name = member_name(field.text.decode(errors="replace"))
        if name in ("def", "def_static", "impl", "fallback"):
            scope = self._scope_text(call) if block is None or block[2] < 0 else None
            constructs.member_construct(self, call, fn, name, block, scope)
        if block is None or block[2] < 0 or not name.isidentifier():
            return
        obj = fn.child_by_field_id(F_ARGUMENT)
        member, parts, recv = (THIS if obj is not None and obj.type == "this" else MEMBER), (name,), None
        if obj is not None and obj.type == "identifier" and block[2] in self.tparams:
            pidx = self.tparams[block[2]].get(obj.text.decode(errors="replace"))
            if pidx is not None:
                self.tparam_uses.setdefault((block[2], pidx), set()).add(name)
        if member == MEMBER and obj is not None:
            enc = self._recv(obj, block[2], 0)
            arrow = _is_arrow(fn)
            if enc is not None and enc[0] == "v" and (not arrow or enc[1][-1] in _POINTERS):
                tparts = enc[2] if arrow and enc[2] else enc[1]
                member, parts = TYPED, (*tparts, name)
            elif enc is not None:  # `p->f()` on a class type: its operator-> (TensorArg) or a raw pointer
                member, recv = RECV, (arrow, enc)
        line = field.start_point[0] + 1
        argv = _args(call.child_by_field_id(F_ARGUMENTS))
        nargs = (1 + len(argv)) << NARGS_SHIFT if argv is not None else 0
        self.calls.append((block[2], parts, member, line, (IN_MACRO if in_macro else 0) | nargs, recv,
                           self._arg_types(argv, block[2])))

    def scope(self, node: ts.Node, classes: bool = True) -> tuple[list[str], bool]:
        """scope_of(node), with namespaces from the text where the tree has errors."""
        if self.text_ns is None:
            return scope_of(node, classes=classes, anon=self.anon)
        inner, nested = scope_of(node, classes=classes, namespaces=False, anon=self.anon)
        return self._text_scope(node.start_byte) + inner, nested

    def _text_scope(self, offset: int) -> list[str]:
        out: list[str] = []
        for start, end, parts in self.text_ns or ():
            if start > offset:
                break
            if offset < end:
                out.extend(parts)
        return out

    def scope_text_at(self, offset: int) -> str:
        """The namespace path at byte `offset`, as "at::native"."""
        if self.text_ns is not None:
            return "::".join(self._text_scope(offset))
        node = self.tree.root_node.descendant_for_byte_range(offset, offset)
        return "::".join(scope_of(node, classes=False, anon=self.anon)[0]) if node is not None else ""

    def _scope_text(self, node: ts.Node) -> str:
        scope, _ = self.scope(node, classes=False)
        return "::".join(scope)

    def scope_of_def(self, idx: int) -> str:
        """The enclosing scope of def `idx` (its qualified name minus the last part)."""
        return self.defs[idx][0].rpartition("::")[0]


_INLINE_NS_RE = re.compile(r"inline(?<!\winline)\s+namespace\s+(\w+)")  # Note [Literal-first patterns]
_INCLUDE_RE = re.compile(rb'#[ \t]*include[ \t]*[<"]([^>"\n]+)[>"]')


def _includes(src: bytes) -> tuple[str, ...]:
    """FileFacts.includes: the targets of `src`'s `#include` lines, first use first."""
    found = (m.group(1) for _start, m in directives(_INCLUDE_RE, src))
    return tuple(dict.fromkeys(t.decode(errors="replace") for t in found))
_RAW_STRING_RE = re.compile(rb'R"([^(\s]*)\((.*?)\)\1"', re.S)
# A line starting a top-level declaration (not a brace, directive, comment, ObjC @).
_CHUNK_START_RE = re.compile(rb"^(?=[A-Za-z_~])", re.M)


def _names_in(x) -> frozenset[str]:
    """The `::`-separated components of every string in the nesting `x`."""
    return frozenset("::".join(_STR_RE.findall(repr(x))).split("::"))  # repr: a C-speed walk


_STR_RE = re.compile(r"'([^'\\]*)'")  # names hold no quotes; a string that does is no name


_START, _END = operator.attrgetter("start_byte"), operator.attrgetter("end_byte")


def _in_order(nodes: list[ts.Node]) -> list[ts.Node]:
    """`nodes` in document order, outer node first: `a().b()` and its `a()`
    start at the same byte, and the captures' own order is not reliably the
    same run to run. That is sorted by (start_byte, -end_byte), done as two
    stable sorts keyed in C (the first by end, descending)."""
    out = sorted(nodes, key=_END, reverse=True)
    out.sort(key=_START)
    return out


def _captures(trees: list[ts.Tree]) -> dict[str, list[ts.Node]]:
    """The query's captures over `trees` (the whole file, then its chunks):
    one node per (capture, start offset), the shortest (a chunk's def ends
    where it should, the whole file's may have swallowed what followed)."""
    if len(trees) == 1:
        return ts.QueryCursor(_QUERY).captures(trees[0].root_node)
    best: dict[tuple[str, int], ts.Node] = {}
    for tree in reversed(trees):  # chunks first: on a tie their node (not nested in a swallowing def) wins
        for name, nodes in ts.QueryCursor(_QUERY).captures(tree.root_node).items():
            for n in nodes:
                key = (name, n.start_byte)
                if key not in best or n.end_byte < best[key].end_byte:
                    best[key] = n
    caps: dict[str, list[ts.Node]] = {}
    for (name, _start), n in best.items():
        caps.setdefault(name, []).append(n)
    return caps


def _chunk_trees(text: bytes) -> list[ts.Tree]:
    """Note [Objective-C++ chunks]: the C++ grammar cannot parse Objective-C
    message sends and blocks, and in a .mm file one error swallows the rest of
    the file. Each top-level chunk (from one line starting at column 0 with a
    name to the next) is parsed on its own (tree-sitter's included ranges), so
    offsets and lines stay those of the file."""
    masked = _RAW_STRING_RE.sub(lambda m: blanked(m.group(0)), mask(text))
    starts = [m.start() for m in _CHUNK_START_RE.finditer(masked)] + [len(text)]
    trees = []
    line = 0
    prev = 0
    parser = ts.Parser(_LANG)
    for a, b in zip(starts, starts[1:], strict=False):
        if b <= a:
            continue
        line += text.count(b"\n", prev, a)
        prev = a
        end_line = line + text.count(b"\n", a, b)
        end_col = b - (text.rfind(b"\n", 0, b) + 1)
        parser.included_ranges = [ts.Range((line, 0), (end_line, end_col), a, b)]
        trees.append(parser.parse(text))
    return trees or [_PARSER.parse(text)]


_DIRECTIVE_LINES = re.compile(rb"#(?:[^\n]*\\\n)*[^\n]*")  # Note [Literal-first patterns]
# `\b(inline\s+)?namespace\s+([\w:]*)\s*\{|[{}]`, each branch led by a literal (Note
# [Literal-first patterns]); the name is group 1 after `inline`, else group 2
_NS_RE = re.compile(rb"\{|\}|i(?<!\wi)nline\s+namespace\s+([\w:]*)\s*\{|n(?<!\wn)amespace\s+([\w:]*)\s*\{")


def _text_namespaces(text: bytes, anon: str = ANON) -> list[tuple[int, int, list[str]]]:
    """(start, end, parts) of each namespace block, by brace matching on the
    masked text (see Note [Textual namespaces]); an anonymous one is `anon`."""
    masked = blank_directives(_DIRECTIVE_LINES, mask(text))  # braces in #defines
    stack: list[tuple[int, list[str]] | None] = []
    spans: list[tuple[int, int, list[str]]] = []
    for m in _NS_RE.finditer(masked):
        tok = m.group(0)
        if tok == b"}":
            if stack:
                top = stack.pop()
                if top is not None:
                    spans.append((top[0], m.end(), top[1]))
        elif tok == b"{":
            stack.append(None)
        else:
            name = (m.group(1) if m.group(1) is not None else m.group(2)).decode(errors="replace")
            parts = [p for p in name.split("::") if p] or [anon]
            stack.append((m.start(), parts))
    for top in stack:  # unclosed at end of file
        if top is not None:
            spans.append((top[0], len(text), top[1]))
    spans.sort()
    return spans


_TYPE_NODES = frozenset({"type_identifier", "qualified_identifier", "template_type"})
# Factories whose first template argument is the pointee: make_shared<T>(...)
_MAKERS = {"make_shared": "shared_ptr", "make_unique": "unique_ptr", "make_intrusive": "intrusive_ptr"}


def _fields(cls: ts.Node) -> tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...]:
    """(name, type parts, template arg parts) of a class body's data members."""
    body = cls.child_by_field_id(F_BODY)
    out = []
    for fd in body.named_children if body is not None else ():
        if fd.type != "field_declaration":
            continue
        tnode = fd.child_by_field_id(F_TYPE)
        if tnode is None or tnode.type not in _TYPE_NODES:
            continue
        vtype = _var_type(tnode)
        if vtype is None:
            continue
        for d in fd.children_by_field_id(F_DECLARATOR):
            while d is not None and d.type not in ("field_identifier", "identifier"):
                if d.type in ("function_declarator",):
                    d = None
                    break
                d = d.child_by_field_id(F_DECLARATOR) or (
                    d.named_children[-1] if d.type in _DECLARATOR_WRAPPERS and d.named_children else None)
            if d is not None:
                out.append((d.text.decode(errors="replace"), *vtype))
    return tuple(out)


def _declared_name(d: ts.Node | None) -> ts.Node | None:
    """The identifier a declarator declares (`x`, `&x`, `*x`, `x = 1`, `x[4]`), or None."""
    if d is not None and d.type == "init_declarator":  # the common cases first
        d = d.child_by_field_id(F_DECLARATOR)
    while d is not None and d.type != "identifier":
        if d.type == "function_declarator":  # `void (*fp)(int)` declares fp; `void f(int)` a function
            d = d.child_by_field_id(F_DECLARATOR)
            if d is None or d.type != "parenthesized_declarator":
                return None
        if d.type == "field_identifier":
            return None
        d = d.child_by_field_id(F_DECLARATOR) or (
            d.named_children[-1] if d.type in _DECLARATOR_WRAPPERS and d.named_children else None)
    return d


_PARAM_NAME_HOLDERS = frozenset({
    "reference_declarator", "pointer_declarator", "array_declarator", "function_declarator",
    "parenthesized_declarator", "variadic_declarator", "attributed_declarator",
})


def _args(args: ts.Node | None) -> list[ts.Node] | None:
    """The arguments in argument list `args` (its named children but comments), None for None."""
    if args is None:
        return None
    argv = args.named_children
    for a in argv:
        if a.type == "comment":
            return [a for a in argv if a.type != "comment"]
    return argv


def _nargs(call: ts.Node) -> int | None:
    """The number of arguments of call expression `call`, None when unknown."""
    args = call.child_by_field_id(F_ARGUMENTS)
    return sum(1 for a in args.named_children if a.type != "comment") if args is not None else None


def _signature(defn: ts.Node, outer: ts.Node | None, seen: dict[tuple[int, int, str], str] | None) -> tuple:
    """FileFacts.sigs of function definition `defn` (`outer` its parent):
    (suffix, fewest arguments, most or -1), or () when no parameter list is
    written. Each parameter's _param_type goes into `seen` (unless None) by
    its (start, end, kind), for the scanner's declarations to reuse."""
    d = defn.child_by_field_id(F_DECLARATOR)
    while d is not None and d.type != "function_declarator":
        if d.type not in _DECLARATOR_WRAPPERS:
            return ()
        d = d.child_by_field_id(F_DECLARATOR) or (d.named_children[-1] if d.named_children else None)
    params = d.child_by_field_id(F_PARAMETERS) if d is not None else None
    if params is None:
        return ()
    types, least, most = [], 0, 0
    for p in params.named_children:
        if p.type == "comment":
            continue
        ptype = _param_type(p)
        types.append(ptype)
        if seen is not None:
            seen[(p.start_byte, p.end_byte, p.type)] = ptype
        if p.type == "variadic_parameter_declaration" or p.type == "...":
            most = -1
        elif p.type != "optional_parameter_declaration":
            least += 1
    if any(c.type == "..." for c in params.children):
        types.append("...")
        most = -1
    if types == ["void"]:
        types = []
        least = 0
    return (sig_text(types), least, (len(types) if most == 0 else -1), argtypes.template_names(defn, outer),
            argtypes.class_template_names(defn, outer))


def _param_type(p: ts.Node) -> str:
    """The type of parameter declaration `p` as written: its text without
    the parameter's name and default value."""
    text, base = p.text, p.start_byte
    end = len(text)
    default = p.child_by_field_id(F_DEFAULT_VALUE)
    if default is not None:
        eq = next((c for c in p.children if c.type == "="), default)
        end = eq.start_byte - base
    name = p.child_by_field_id(F_DECLARATOR)
    while name is not None and name.type in _PARAM_NAME_HOLDERS:
        inner = name.child_by_field_id(F_DECLARATOR)
        name = inner if inner is not None else (name.named_children[-1] if name.named_children else None)
    if name is not None and name.type == "identifier":
        a, b = name.start_byte - base, name.end_byte - base
        return (text[:a] + text[b:end]).decode(errors="replace")
    return text[:end].decode(errors="replace")


def _in_class_body(node: ts.Node) -> bool:
    """`node` (a definition) sits in a class body, not in a namespace."""
    p = node.parent
    while p is not None and p.type not in ("namespace_definition", "translation_unit"):
        if p.type == "field_declaration_list":
            return True
        p = p.parent
    return False


def _is_pointer(d: ts.Node) -> bool:
    """A declarator of a pointer or array (`*p`, `p[4]`, `*p = q`), not of a reference."""
    if d.type == "init_declarator":
        d = d.child_by_field_id(F_DECLARATOR)
    return d is not None and d.type in ("pointer_declarator", "array_declarator")


def _fn_refs(node: ts.Node | None) -> tuple[tuple[str, ...], ...] | None:
    """The functions an initializer names: `&f`, `&ns::f<T>`, `f<T>` (not a
    bare `f`, which may be any value), `c ? &f : &g`; None for anything else."""
    if node is None:
        return None
    t = node.type
    if t == "conditional_expression":
        a, b = _fn_refs(node.child_by_field_id(F_CONSEQUENCE)), _fn_refs(node.child_by_field_id(F_ALTERNATIVE))
        return a + b if a is not None and b is not None else None
    if t == "parenthesized_expression" and node.named_child_count == 1:
        return _fn_refs(node.named_children[0])
    if t == "pointer_expression":
        op, arg = node.child_by_field_id(F_OPERATOR), node.child_by_field_id(F_ARGUMENT)
        if op is None or op.type != "&" or arg is None or arg.type not in ("identifier", "qualified_identifier",
                                                                             "template_function"):
            return None
        node, t = arg, arg.type
    elif t != "template_function":
        return None
    parts = name_parts(node.text.decode(errors="replace"))
    return (parts,) if parts and not is_macro_name(parts[-1]) else None


def _constructed(node: ts.Node) -> tuple[tuple[str, ...], bool] | None:
    """(type parts, braced) of an argument that may construct an object in
    place: `C{...}` (a type for sure), `C(...)` / `C<T>(...)` (a type or a
    function: the resolver tells)."""
    if node.type == "compound_literal_expression":
        tnode = node.child_by_field_id(F_TYPE)
        parts = name_parts(tnode.text.decode(errors="replace")) if tnode is not None else ()
        return (parts, True) if parts else None
    fn = node.child_by_field_id(F_FUNCTION)
    if fn is None or fn.type not in _NAME_NODES:
        return None
    parts = name_parts(fn.text.decode(errors="replace"))
    return (parts, False) if parts and not is_macro_name(parts[-1]) else None


_NAME_NODES = frozenset({"identifier", "qualified_identifier", "template_function"})
# expressions that are never a receiver of a class type
_NO_RECV = frozenset({"number_literal", "string_literal", "char_literal", "true", "false", "nullptr",
                      "sizeof_expression", "concatenated_string", "raw_string_literal", "initializer_list",
                      "lambda_expression", "update_expression"})


# Note [Functor arguments], template arguments: the index of a function
# template's k-th template parameter in tparam_uses / OBJ calls is _TARG - k
# (its function parameters' are 0, 1, ...).
_TARG = -1


def _builtin_type(name: str) -> bool:
    return name in ("int", "long", "short", "char", "bool", "float", "double", "unsigned", "signed", "void",
                    "size_t", "auto") or (name.endswith("_t") and name.lstrip("u").startswith("int"))


def _template_type_params(tlist: ts.Node | None) -> dict[str, int]:
    """{name: index in the template parameter list} of a function template's
    type and template template parameters (`template <template <typename>
    class K, typename RNG>`: {"K": 0, "RNG": 1}); `tlist` is its template's
    parameter list."""
    out = {}
    for k, p in enumerate(tlist.named_children if tlist is not None else ()):
        if p.type in ("type_parameter_declaration", "template_template_parameter_declaration"):
            decl = next((c for c in p.named_children if c.type == "type_parameter_declaration"), p) \
                if p.type == "template_template_parameter_declaration" else p
            n = decl.child_by_field_id(F_NAME) or next(
                (c for c in decl.named_children if c.type == "type_identifier"), None)
            if n is not None:
                out[n.text.decode(errors="replace")] = k
    return out


def _template_params(defn: ts.Node, tlist: ts.Node | None) -> dict[str, int]:
    """{parameter name: index} of a function template's parameters whose type
    is one of its template type parameters (`template <typename Sorter> void
    sortCommon(Sorter sorter, ...)`: {"sorter": 0}); `tlist` is its template's
    parameter list."""
    names = set()
    for p in tlist.named_children if tlist is not None else ():
        if p.type in ("type_parameter_declaration", "variadic_type_parameter_declaration",
                      "optional_type_parameter_declaration"):
            n = p.child_by_field_id(F_NAME) or next((c for c in p.named_children if c.type == "type_identifier"), None)
            if n is not None:
                names.add(n.text.decode(errors="replace"))
    d = defn.child_by_field_id(F_DECLARATOR)
    while d is not None and d.type != "function_declarator":
        d = d.child_by_field_id(F_DECLARATOR) or (
            d.named_children[-1] if d.type in _DECLARATOR_WRAPPERS and d.named_children else None)
    plist = d.child_by_field_id(F_PARAMETERS) if d is not None else None
    out = {}
    for k, p in enumerate(plist.named_children if plist is not None and names else ()):
        tnode, name = p.child_by_field_id(F_TYPE), _declared_name(p.child_by_field_id(F_DECLARATOR))
        if tnode is not None and name is not None and tnode.text.decode(errors="replace") in names:
            out[name.text.decode(errors="replace")] = k
    return out


def _alias_row(node: ts.Node) -> tuple | None:
    """(kind, name, target parts, template arg parts) of an alias node (FileFacts.aliases)."""
    t = node.type
    if t == "using_declaration":
        target = node.named_children[-1] if node.named_children else None
        parts = name_parts(target.text.decode(errors="replace")) if target is not None else ()
        if not parts:
            return None
        if any(c.type == "namespace" for c in node.children):
            return ("using-namespace", "", parts, ())
        return ("using", parts[-1], parts, ()) if len(parts) > 1 else None
    if t == "namespace_alias_definition":
        name = node.child_by_field_id(F_NAME)
        target = node.named_children[-1] if node.named_children else None
        parts = name_parts(target.text.decode(errors="replace")) if target is not None else ()
        return ("namespace", name.text.decode(errors="replace"), parts, ()) if name is not None and parts else None
    if t == "alias_declaration":
        name, tnode = node.child_by_field_id(F_NAME), node.child_by_field_id(F_TYPE)
        if tnode is not None and tnode.type == "type_descriptor":
            tnode = tnode.child_by_field_id(F_TYPE)
    else:  # type_definition: `typedef T N;`
        tnode, name = node.child_by_field_id(F_TYPE), node.child_by_field_id(F_DECLARATOR)
        if name is not None and name.type != "type_identifier":
            return None
    if name is None or tnode is None or tnode.type not in _TYPE_NODES:
        return None
    vtype = _var_type(tnode)
    return ("type", name.text.decode(errors="replace"), *vtype) if vtype else None


def _is_arrow(field_expr: ts.Node) -> bool:
    op = field_expr.child_by_field_id(F_OPERATOR)
    return op is not None and op.type == "->"


def _var_type(tnode: ts.Node) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(type parts, first template argument for smart pointers and containers)
    of a declared type node."""
    text = tnode.text.decode(errors="replace")
    parts = name_parts(text)
    if not parts:
        return None
    inner: tuple[str, ...] = ()
    if (parts[-1] in _POINTERS or parts[-1] in _CONTAINERS) and "<" in text:
        arg = text[text.index("<") + 1 : text.rindex(">")] if ">" in text else ""
        inner = name_parts(arg.split(",")[0].replace("const", "").strip())
    return parts, inner




def scan_file(rel: str, src: bytes) -> FileFacts:
    """Scan `src` (the bytes of tree file `rel`) into its FileFacts."""
    return _Scanner(rel, src).run()


def def_spans(rel: str, src: bytes) -> list[tuple[str, int, int]]:
    """Extents of the functions `scan_file` finds, named as in its `func` facts
    but for an overload's suffix (Note [Overload ids]: that needs the whole
    tree; the line tells overloads apart), for mapping changed lines to
    functions (torchtalk affected).

    Example:
        >>> def_spans("aten/src/ATen/native/CPUBlas.cpp", src)[4]
        ('at::native::cpublas::gemm', 139, 180)
    """
    return _Scanner(rel, src).spans()
