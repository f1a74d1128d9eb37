"""The global pass of the python layer: call edges, Python API → ATen op,
modules and optimizers, decompositions. Pure functions of the summaries and
native_functions.yaml; `extractors.python.extract` writes what they return.

Note [Python call edges]: a call in a function body is an edge when its
callee resolves (extractors.python.names) to a Python definition of the tree
("def"), to a C binding that reaches an op ("leaf": `torch._C._nn.gelu`,
`torch.add`, `torch.Tensor.add_`, `torch.ops.aten.add.Tensor`), or when it is
a method call on an untyped receiver whose name is an ATen Tensor method
(`x.softmax(dim)` → `torch.Tensor.softmax`, "guess"; metadata methods such as
`size`/`dim`/`to` are left out). `self.m()` / `super().m()` resolve through
the class's bases. A "?.m" whose receiver has types (Def.receivers, Note
[Receiver types]) resolves by them: a Tensor (or subclass; `x = torch.zeros()`,
`def f() -> Tensor`) to the Tensor method ("leaf", or the Python "def"), a class
of the tree to its method ("def"), an unknown type to the guess, anything else
to no edge. Calling an
instance of an nn.Module subclass (`self.linear(x)` with `self.linear =
Linear(...)`) calls its `forward` (Module.__call__ → forward); of another class,
its `__call__`. An attribute's type is the union over the class and its bases
of the `self.attr = ...` bindings and `attr: T` annotations.

Example:
    >>> m = build(summaries, load_native(root))
    >>> m.api_ops("torch.nn.functional.gelu")
    {'gelu': ...}
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from extractors.python.localtypes import CALL, NONE, UNKNOWN, is_plain
from extractors.python.names import Index, edge_rows, rename
from extractors.python.native import NativeOps, aten_ref_ops, library_ref_op
from extractors.python.summary import META_MAKER, Def, FileSummary

# Tensor methods that read metadata: no op edge even on a typed Tensor.
_META = frozenset(
    "size dim stride numel item type data_ptr element_size storage_offset is_complex "
    "is_floating_point is_contiguous requires_grad_ __getitem__ __setitem__".split()
)
# Tensor methods too generic to say which op a call on an untyped receiver reaches.
_GUESS_STOP = _META | frozenset(
    "to view contiguous clone copy_ detach fill_ zero_ index select "
    "split chunk max min sum mean all any expand reshape set_ sort unique".split()
)
_TENSOR = "torch._tensor.Tensor"
_TENSOR_C = frozenset({"torch.Tensor", "torch._C.TensorBase", "torch._C._TensorBase"})
_MODULE = "torch.nn.modules.module.Module"
DECOMP_REGISTRARS = frozenset(
    {
        "register_decomposition", "register_decomposition_for_jvp",
        "maybe_register_decomposition", "register_rng_decomposition",
        "register_noop_decomp", "register_inplace", "_make_inplace", "_make_copy_from_view",
    }
)
REF_MAKERS = frozenset({"_make_elementwise_unary_reference", "_make_elementwise_binary_reference"})
MODULE_ROOTS = {
    "torch.nn.modules.module.Module": "nn",
    "torch.optim.optimizer.Optimizer": "optim",
    "torch.optim.lr_scheduler.LRScheduler": "lr_scheduler",
    "torch.optim.lr_scheduler._LRScheduler": "lr_scheduler",
    "torch.optim.lr_scheduler.ReduceLROnPlateau": "lr_scheduler",
}
API_DEPTH = 4
# Python plumbing that never reaches an op by itself (__torch_function__
# dispatch, scripting checks, warnings): the API closure does not enter it.
_NO_FOLLOW = (
    "torch.overrides.", "torch._jit_internal.", "torch.jit.", "torch._C._",
    "torch.utils._python_dispatch.", "torch._dynamo.", "torch.compiler.",
    "torch.fx.", "torch._logging.", "torch.utils._pytree.", "torch.autograd.profiler.",
)


@dataclass(frozen=True)
class Edge:
    caller: str  # internal name
    callee: str  # internal name ("def"/"alias") or leaf name ("leaf"/"guess")
    kind: str  # "def" | "alias" | "leaf" | "guess"
    file: str
    line: int


class Model:
    """Everything the python layer derives globally."""

    def __init__(self, summaries: list[FileSummary], native: NativeOps, edge_prefix: str | tuple[str, ...] = "torch/",
                 extension: bool = False, kept: Index | None = None) -> None:
        """`edge_prefix`: the files whose functions are APIs with call edges;
        `extension`: the model of an extension indexed beside its torch (Note
        [Extensions] in torchtalk/extension.py), where a `torch.ops.NS.X` call
        of another namespace than aten is an op call (Note [Library ops]);
        `kept`: the last model's Index, whose modules of the same summaries
        this one's takes (Note [Modules kept] in names.py)."""
        self.summaries = [s for s in summaries if s.error is None]
        self.native = native
        self.edge_prefix, self.extension = edge_prefix, extension
        # the files whose summaries changed, when this model took the last
        # one's work (Note [A model kept across a body edit]), whether or not
        # the YAML moved; None when it took none
        self.adopted: frozenset[str] | None = None
        self.idx = Index(self.summaries, kept)
        self._classified: dict[str, tuple[str, str] | None] = {}
        self.aliases: dict[str, tuple[list[str], str, int]] = {}  # internal → (raw targets, file, line)
        modules = self.idx.modules
        for s in self.summaries:  # the module's rows (of the last summary of its name: Note [Modules kept])
            self.aliases.update(modules[s.module].alias_rows)
        # Call edges of torch/ functions and aliases, computed on first use
        # (the tests layer needs only the few its tests reach).
        self._edge_src: dict[str, tuple[FileSummary, Def] | None] = {}
        for s in self.summaries:
            if not s.file.startswith(edge_prefix):
                continue  # tests use classify() directly
            mod = modules[s.module]
            self._edge_src.update(mod.edge_rows if mod.summary is s else edge_rows(s))
        for name in self.aliases:
            self._edge_src[name] = None
        self._edges: dict[str, list[Edge]] = {}
        # api_ops's answers: API -> (op -> (how, file, line), the callers whose edges its walk read)
        self._api_ops: dict[str, tuple[dict[str, tuple[str, str, int]], frozenset[str]]] = {}
        self._roots: dict[str, str] | None = None
        self._subclasses: dict[tuple[str, ...], dict[str, str]] = {}  # `subclasses_of`'s answers
        self._typed: dict[tuple[str, str], list[tuple[str, str]]] = {}
        self._attr_types: dict[tuple[str, str], frozenset[str] | None] = {}

    def adopt(self, last: Model, unchanged: Callable[[str], bool]) -> None:
        """Take what `last` (a model of the same interface, Note [A model
        kept across a body edit]) computed and this one would compute the
        same: every cache but the edges of callers of a file for which
        `unchanged(file)` is False. When `last` read another NativeOps, the
        edges its change may move are computed again too (Note [A model
        kept across a YAML edit])."""
        self._classified.update(last._classified)
        self._typed.update(last._typed)
        self._attr_types.update(last._attr_types)
        self._roots = last._roots
        self._subclasses = last._subclasses  # read only: a function of the interface, as the roots
        edited = set()
        for caller, src in self._edge_src.items():
            if not unchanged(src[0].file if src is not None else self.aliases[caller][1]):
                edited.add(caller)
        if last.native is not self.native:
            edited |= self._native_moved(last.native)
        for caller, edges in last._edges.items():
            if caller in self._edge_src and caller not in edited:
                self._edges[caller] = edges
        # an API's ops, when no edge its walk read is an edited caller's, nor
        # leads to a leaf whose ops the YAML moved (Note [API answers kept
        # across a YAML edit])
        if last.native is not self.native:
            edited |= self._leaf_readers(last, last.native)
        for api, hit in last._api_ops.items():
            if hit[1].isdisjoint(edited):
                self._api_ops[api] = hit

    # Note [API answers kept across a YAML edit]: `api_ops` walks an API's
    # edges and reads, at each leaf or guess edge, the leaf's ops in the
    # YAML; `seen`, kept with its answer, holds every caller whose edges it
    # read, and it read every leaf edge of each. So after a YAML edit the
    # answer stands when no caller of `seen` had its edges computed again
    # (`edited`) nor has a leaf edge to a leaf whose ops the edit changed:
    # those callers are added to `edited` for the answers only. Before,
    # every answer was computed again (the python layer's API rows, 0.26 s
    # of its YAML update, profiled).
    def _leaf_readers(self, last: Model, was: NativeOps) -> set[str]:
        """The callers of `last` with a leaf or guess edge to a leaf whose
        ops NativeOps `was` and this model's give otherwise."""
        now = self.native.leaves
        moved = {leaf for leaf in was.leaves.keys() | now.keys() if was.leaves.get(leaf) != now.get(leaf)}
        if not moved:
            return set()
        return {caller for caller, edges in last._edges.items()
                if any(e.kind in ("leaf", "guess") and e.callee in moved for e in edges)}

    def _native_moved(self, was: NativeOps) -> set[str]:
        """The callers whose edges may read what NativeOps `was` and this
        model's answer otherwise: a classification or receiver type the
        adopted caches hold (made right here), or a method's guess or
        Tensor leaf (Note [A model kept across a YAML edit])."""
        leaves = was.leaves.keys() ^ self.native.leaves.keys()
        methods = set(was.methods ^ self.native.methods)
        methods.update(leaf[len("torch.Tensor."):] for leaf in leaves if leaf.startswith("torch.Tensor."))
        moved_names: set[str] = set()
        for dotted, hit in list(self._classified.items()):
            if hit is None or hit[1] == "leaf":  # a def or alias is found before the YAML is asked
                now = self._classify(dotted)
                if now != hit:
                    self._classified[dotted] = now
                    moved_names.add(dotted)
        for key, hit in list(self._typed.items()):
            now = self._typed_call(*key)
            if now != hit:
                self._typed[key] = now
                methods.add(key[1])
        if not moved_names and not methods:
            return set()
        moved: set[str] = set()
        for caller, src in self._edge_src.items():
            if src is None:
                if any(t in moved_names for t in self.aliases[caller][0]):
                    moved.add(caller)
                continue
            for callee, _line in src[1].calls:
                head = callee.partition(".")[0]
                if head in ("self", "super", "?") or head[:1] == "@":
                    hit = "__call__" in methods or callee.rpartition(".")[2] in methods
                else:
                    hit = callee in moved_names
                if hit:
                    moved.add(caller)
                    break
        return moved

    def edges(self, caller: str) -> list[Edge]:
        """The call edges of a function or alias (internal name); [] for others."""
        hit = self._edges.get(caller)
        if hit is None:
            hit = self._edges[caller] = self._compute_edges(caller)
        return hit

    def callers(self) -> list[str]:
        """Every function and alias with edges, in source order."""
        return list(self._edge_src)

    def _compute_edges(self, caller: str) -> list[Edge]:
        if caller not in self._edge_src:
            return []
        src = self._edge_src[caller]
        if src is not None:
            return list(self._def_edges(*src))
        targets, file, line = self.aliases[caller]
        hits = [h for h in map(self.classify, targets) if h is not None]
        return [Edge(caller, h[0], h[1], file, line) for h in hits]

    # ---------------------------------------------------------------- edges
    def classify(self, dotted: str) -> tuple[str, str] | None:
        """(target, kind) of a resolved dotted callee, None when it is no edge."""
        try:
            return self._classified[dotted]
        except KeyError:
            hit = self._classified[dotted] = self._classify(dotted)
            return hit

    def _classify(self, dotted: str) -> tuple[str, str] | None:
        internal, found = self.idx.resolve(dotted)
        if found:
            if internal in self.aliases:
                return internal, "alias"
            if self.idx.def_of(internal) is not None:
                return internal, "def"
        out = rename(internal)
        if out in self.native.leaves:
            return out, "leaf"
        if aten_ref_ops(self.native, out):
            return "torch.ops.aten." + out.split(".aten.", 1)[1], "leaf"
        if self.extension and library_ref_op(out):
            return out, "leaf"
        return None

    def _def_edges(self, s: FileSummary, d: Def) -> Iterator[Edge]:
        caller = f"{s.module}.{d.qual}"
        cls: str | None = ""  # "" until needed
        receivers = {(line, m): types for line, m, types in d.receivers}
        if len(receivers) < len(d.receivers):  # two receivers of one method on a line: both
            for line, m, types in d.receivers:
                receivers[line, m] = tuple(sorted({*receivers[line, m], *types}))
        for callee, line in d.calls:
            head, _, m = callee.partition(".")
            if head in ("self", "super"):
                cls = self.enclosing_class(s, d) if cls == "" else cls
                hits = self._self_call(cls, m, head == "super") if cls else ()
            elif head == "?":
                types = receivers.get((line, m)) if receivers else None
                if types is None:
                    hits = self._guess(m)
                else:
                    cls = self.enclosing_class(s, d) if cls == "" else cls
                    hits = self._method(cls, types, m)
            elif head[:1] == "@":  # a local holding an instance: "@T.__call__"
                t, _, m = callee[1:].rpartition(".")
                hits = self.typed(t, m)
            else:
                hit = self.classify(callee)
                hits = (hit,) if hit is not None else ()
            for hit in hits:
                if hit[0] != caller:
                    yield Edge(caller, hit[0], hit[1], s.file, line)

    def _guess(self, m: str) -> tuple[tuple[str, str], ...]:
        if m in self.native.methods and m not in _GUESS_STOP:
            return ((f"torch.Tensor.{m}", "guess"),)
        return ()

    def _self_call(self, cls: str, m: str, sup: bool) -> list[tuple[str, str]] | tuple:
        """`self.m()`, `super().m()`, or `self.a()` (an instance held in attribute a)."""
        hit = self.method(cls, m, sup)
        if hit is not None or sup:
            return (hit,) if hit else ()
        types = self.attr_types(cls, m) or ()
        return [hit for t in sorted(types) if t for hit in self.typed(t, "__call__")]

    def _method(self, cls: str | None, types: tuple[str, ...], m: str) -> list[tuple[str, str]]:
        """The callees of `x.m()` with `x` of `types`; "#a" is self's attribute a."""
        if len(types) == 1 and types[0][:1] != "#":
            return self.typed(types[0], m)
        out: list[tuple[str, str]] = []
        for t in types:
            if t[:1] == "#":
                attr = self.attr_types(cls, t[1:]) if cls else None
                for u in sorted(attr) if attr is not None else (UNKNOWN,):  # unbound: untyped
                    out.extend(self.typed(u, m))
            else:
                out.extend(self.typed(t, m))
        return list(dict.fromkeys(out))

    def attr_types(self, cls: str, a: str) -> frozenset[str] | None:
        """The types of attribute `a` of instances of `cls` (and its bases); None when unbound."""
        key = (cls, a)
        if key not in self._attr_types:
            self._attr_types[key] = None  # cycle guard
            found: set[str] = set()
            todo, seen = [cls], set()
            while todo:
                c = todo.pop()
                hit = self.idx.def_of(c) if c not in seen else None
                seen.add(c)
                if hit is None:
                    continue
                found.update(t for name, t, _stated in hit[1].attrs if name == a)
                todo.extend(self.idx.bases(c))
            self._attr_types[key] = frozenset(found) if found else None
        return self._attr_types[key]

    def typed(self, t: str, m: str) -> list[tuple[str, str]]:
        """The callees of method `m` of a receiver of type `t` (Note [Receiver types]):
        [] for a type known not to be a Tensor, the guess for an unknown one."""
        key = (t, m)
        hit = self._typed.get(key)
        if hit is None:
            hit = self._typed[key] = self._typed_call(t, m)
        return hit

    def _typed_call(self, t: str, m: str) -> list[tuple[str, str]]:
        kind, cls = self.instance(t)
        if kind == "none":
            return []
        if kind == "unknown":
            return list(self._guess(m))
        if m == "__call__" and self.roots().get(cls) == _MODULE:
            m = "forward"  # Module.__call__ runs the hooks and self.forward
        hit = self.idx.lookup_method(cls, m)
        if hit:
            return [(hit, "def")]
        if kind == "tensor":
            if m not in _META and f"torch.Tensor.{m}" in self.native.leaves:
                return [(f"torch.Tensor.{m}", "leaf")]
            return []
        if self._opaque(cls):  # a base we cannot see (a C type): maybe a Tensor after all
            return list(self._guess(m))
        return []

    def _opaque(self, cls: str) -> bool:
        """Whether a base of `cls` (transitively) is neither a class of the tree nor plain."""
        todo, seen = [cls], set()
        while todo:
            c = todo.pop()
            if c in seen:
                continue
            seen.add(c)
            hit = self.idx.def_of(c)
            if hit is None or hit[1].kind != "class":
                if not is_plain(c):
                    return True
                continue
            todo.extend(self.idx.bases(c))
        return False

    def instance(self, t: str) -> tuple[str, str]:
        """("tensor" | "class", class) for a Tensor (subclass) or a class of the tree;
        ("none", "") for a type known not to be a Tensor; ("unknown", "") otherwise."""
        if t == UNKNOWN:
            return "unknown", ""
        if is_plain(t):
            return "none", ""
        call = t.startswith(CALL)
        internal, found = self.idx.resolve(t[len(CALL):] if call else t)
        if internal in self.aliases and len(self.aliases[internal][0]) == 1:
            internal, found = self.idx.resolve(self.aliases[internal][0][0])  # TensorLike = torch.Tensor
        if rename(internal) in _TENSOR_C:
            return "tensor", _TENSOR
        hit = self.idx.def_of(internal) if found else None
        if hit is not None and hit[1].kind == "class":
            return ("tensor" if self.roots().get(internal) == _TENSOR else "class"), internal
        returns = [r for r in hit[1].returns if r != NONE] if call and hit is not None else []
        if len(returns) == 1:
            return self.instance(returns[0])  # def f(...) -> Optional[Tensor]
        if call and self.native.returns_tensor(rename(internal)):
            return "tensor", _TENSOR  # x = torch.zeros(...)
        if found or call or self.idx.in_tree(internal):
            return "unknown", ""  # a function's result, a Union alias, a TypeVar, a C type of torch
        return "none", ""  # a stated type from outside the tree (numpy.ndarray, sympy.Expr)

    def roots(self) -> dict[str, str]:
        """Every class deriving from a MODULE_ROOTS class or from Tensor → that root."""
        if self._roots is None:
            self._roots = self.idx.subclasses_of([*MODULE_ROOTS, _TENSOR])
        return self._roots

    def enclosing_class(self, s: FileSummary, d: Def) -> str | None:
        defs = self.idx.modules[s.module].defs
        parts = d.qual.split(".")
        for k in range(len(parts) - 1, 0, -1):
            q = ".".join(parts[:k])
            if q in defs and defs[q].kind == "class":
                return f"{s.module}.{q}"
        return None

    def method(self, cls: str, m: str, sup: bool) -> tuple[str, str] | None:
        starts = self.idx.bases(cls) if sup else [cls]
        for c in starts:
            hit = self.idx.lookup_method(c, m)
            if hit:
                return hit, "def"
        if self.roots().get(cls) == _TENSOR and m not in _META and f"torch.Tensor.{m}" in self.native.leaves:
            return f"torch.Tensor.{m}", "leaf"
        return None

    # ---------------------------------------------------------------- API → op
    def api_ops(self, api: str) -> dict[str, tuple[str, str, int]]:
        """op → (how, file, line) for a Python API (internal name), up to API_DEPTH hops.

        how: "alias" (an alias straight to a binding), "wrapper" (through Python
        code), "method_guess" (the path uses an untyped Tensor method call).
        """
        hit = self._api_ops.get(api)
        if hit is not None:
            return hit[0]
        out: dict[str, tuple[str, str, int]] = {}
        first = self.edges(api)
        queue = deque((e, 1, e.kind == "guess", e) for e in first)
        seen = {api}
        while queue:
            e, depth, guessed, hop = queue.popleft()
            if e.kind in ("leaf", "guess"):
                how = "method_guess" if guessed else ("alias" if api in self.aliases and depth == 1 else "wrapper")
                for op in self.native.leaves.get(e.callee, ()) or self._library_ops(e.callee):
                    if op not in out or (out[op][0] == "method_guess" and how != "method_guess"):
                        out[op] = (how, hop.file, hop.line)
                continue
            if e.callee in seen or depth >= API_DEPTH or e.callee.startswith(_NO_FOLLOW):
                continue
            seen.add(e.callee)
            for nxt in self.edges(e.callee):
                queue.append((nxt, depth + 1, guessed or nxt.kind == "guess", hop))
        self._api_ops[api] = (out, frozenset(seen))  # `seen`: every caller whose edges were read
        return out

    def _library_ops(self, leaf: str) -> tuple[str, ...]:
        op = library_ref_op(leaf) if self.extension else None
        return (op,) if op else ()

    def public_apis(self) -> Iterator[str]:
        """The internal name of every public function, method and alias in
        torch/ (or the files of `edge_prefix`)."""
        for s in self.summaries:
            yield from self.public_defs(s)
        yield from self.public_aliases()

    def public_defs(self, s: FileSummary) -> list[str]:
        """The internal names of summary `s`'s public functions and methods,
        when its file is one of `edge_prefix`."""
        if not s.file.startswith(self.edge_prefix):
            return []
        return [f"{s.module}.{d.qual}" for d in s.defs if d.kind != "class" and is_public(rename(f"{s.module}.{d.qual}"))]

    def public_aliases(self) -> list[str]:
        """The internal names of the public aliases of `edge_prefix`'s files."""
        return [name for name, (_, file, _line) in self.aliases.items()
                if file.startswith(self.edge_prefix) and is_public(rename(name))]

    def public_reexports(self) -> Iterator[tuple[str, str]]:
        """(public name, internal name) for a public package's `__init__.py` importing a
        function defined in a private module: `torch.masked.amax` is torch.masked._ops.amax;
        in an extension any function it defines (`torchvision.ops.nms` is
        torchvision.ops.boxes.nms: the name its docs give)."""
        for s in self.summaries:
            if not (s.file.startswith(self.edge_prefix) and s.file.endswith("__init__.py") and is_public(s.module)):
                continue
            for local, target, _line in s.imports:
                if local.startswith("_"):
                    continue
                internal, found = self.idx.resolve(target)
                if found and (self.extension or not is_public(rename(internal))) and internal in self._edge_src:
                    yield f"{s.module}.{local}", internal

    def subclasses_of(self, roots: Iterable[str]) -> dict[str, str]:
        """`idx.subclasses_of(roots)` (read only), kept with the model's
        caches: a model that adopts the last one's takes its answers too
        (Note [A model kept across a body edit])."""
        key = tuple(roots)
        hit = self._subclasses.get(key)
        if hit is None:
            hit = self._subclasses[key] = self.idx.subclasses_of(key)
        return hit

    # ---------------------------------------------------------------- registrations
    def registrations(self) -> Iterator[tuple[str, str, str, str, int]]:
        """(registry, op, py, file, line) for decorators naming ATen ops."""
        for s in self.summaries:
            for d in s.defs:
                for deco in d.decorators:
                    for op in self._deco_ops(s, d, deco):
                        yield deco.target.rpartition(".")[2], op, rename(f"{s.module}.{d.qual}"), s.file, deco.line
            for name, line, ir in s.assigns:
                if ir[0] == "call" and ir[1].rpartition(".")[2] == "_make_inplace" and ir[2] and ir[2][0][0] == "ref":
                    # sin_ = _make_inplace(sin): registers a decomposition of the aten.sin_ packet
                    inplace = ir[2][0][1].rpartition(".")[2] + "_"
                    for op in self.native.by_name.get(inplace, ()):
                        yield "_make_inplace", op, rename(f"{s.module}.{name}"), s.file, line
                if ir[0] == "call" and ir[1].rpartition(".")[2] == "_make_copy_from_view" and ir[2] \
                        and ir[2][0][0] == "ref" and ".aten." in ir[2][0][1]:
                    # alias_copy = _make_copy_from_view(aten.alias): registers a decomposition
                    # of the aten.alias_copy packet (torch/_refs)
                    copy = ir[2][0][1].rpartition(".")[2] + "_copy"
                    for op in self.native.by_name.get(copy, ()):
                        yield "_make_copy_from_view", op, rename(f"{s.module}.{name}"), s.file, line
            for deco in s.module_registrations:
                if META_MAKER.fullmatch(deco.target.rpartition(".")[2]) and deco.args:
                    # _create_binary_float_meta_func(aten.x): its body does @register_meta(x)
                    for op in self._ir_ops(deco.args[:1]):
                        yield "register_meta", op, rename(self.idx.resolve(deco.target)[0]), s.file, deco.line
                    continue
                if deco.target.rpartition(".")[2] == "register_inplace" and deco.args:
                    # register_inplace(aten.addmm_, aten.addmm): a decomposition made by that function
                    py = rename(self.idx.resolve(deco.target)[0])
                    if not py.startswith("torch._decomp."):
                        continue  # torch._inductor.lowering.register_inplace makes lowerings
                    for op in self._ir_ops(deco.args[:1]):
                        yield "register_inplace", op, py, s.file, deco.line
            for deco, fn in s.decorated_calls:
                if fn[0] != "ref":
                    continue
                py = rename(self.idx.resolve(fn[1])[0])
                for op in self._ir_ops(deco.args):
                    yield deco.target.rpartition(".")[2], op, py, s.file, deco.line

    def _deco_ops(self, s: FileSummary, d: Def, deco) -> list[str]:
        if not deco.called:
            return []
        last = deco.target.rpartition(".")[2]
        if last in REF_MAKERS:
            kw = dict(deco.kwargs)
            if "aten_op" in kw:
                return self._ir_ops((kw["aten_op"],))
            return list(self.native.by_name.get(d.qual.rpartition(".")[2], ()))
        return self._ir_ops(deco.args + tuple(v for _, v in deco.kwargs))

    def _ir_ops(self, irs: Iterable[tuple]) -> list[str]:
        out: list[str] = []
        for ir in irs:
            if ir[0] == "ref":
                internal, _ = self.idx.resolve(ir[1])
                out.extend(aten_ref_ops(self.native, internal))
            elif ir[0] == "seq":
                out.extend(self._ir_ops(x[1] if x[0] == "star" else x for x in ir[1]))
        return out


def is_public(name: str) -> bool:
    """No component starts with "_" (dunder methods such as `__add__` allowed).

    Example:
        >>> is_public("torch.nn.functional.gelu"), is_public("torch._refs.abs")
        (True, False)
    """
    for part in name.split("."):
        if part.startswith("_") and not (part.startswith("__") and part.endswith("__")):
            return False
    return True


def build(summaries: list[FileSummary], native: NativeOps) -> Model:
    """Run the global pass."""
    return Model(summaries, native)
