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
the class's bases.

Example:
    >>> m = build(summaries, load_native(root))
    >>> m.api_ops("torch.nn.functional.gelu")
    {'gelu': ...}
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from extractors.python.names import Index, rename
from extractors.python.native import NativeOps, aten_ref_ops
from extractors.python.summary import META_MAKER, Def, FileSummary

# Tensor methods too generic to say which op a call reaches.
_GUESS_STOP = frozenset(
    "size dim stride numel item to type view contiguous is_contiguous data_ptr "
    "element_size storage_offset is_complex is_floating_point clone copy_ "
    "detach requires_grad_ fill_ zero_ __getitem__ __setitem__ index select "
    "split chunk max min sum mean all any expand reshape set_ sort unique".split()
)
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

    def __init__(self, summaries: list[FileSummary], native: NativeOps, edge_prefix: str = "torch/") -> None:
        self.summaries = [s for s in summaries if s.error is None]
        self.native = native
        self.idx = Index(self.summaries)
        self._classified: dict[str, tuple[str, str] | None] = {}
        self.aliases: dict[str, tuple[list[str], str, int]] = {}  # internal → (raw targets, file, line)
        for s in self.summaries:
            mod = self.idx.modules[s.module]
            for name, (_, line) in mod.aliases.items():
                self.aliases[f"{s.module}.{name}"] = (mod.alias_all[name], s.file, line)
        # Call edges of torch/ functions and aliases, computed on first use
        # (the tests layer needs only the few its tests reach).
        self._edge_src: dict[str, tuple[FileSummary, Def] | None] = {}
        for s in self.summaries:
            if not s.file.startswith(edge_prefix):
                continue  # tests use classify() directly
            for d in s.defs:
                if d.kind != "class":
                    self._edge_src[f"{s.module}.{d.qual}"] = (s, d)
        for name in self.aliases:
            self._edge_src[name] = None
        self._edges: dict[str, list[Edge]] = {}

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
        return None

    def _def_edges(self, s: FileSummary, d: Def) -> Iterator[Edge]:
        caller = f"{s.module}.{d.qual}"
        cls = None
        for callee, line in d.calls:
            head, _, m = callee.partition(".")
            if head in ("self", "super"):
                cls = cls or self.enclosing_class(s, d)
                hit = self.method(cls, m, head == "super") if cls else None
            elif head == "?":
                hit = (f"torch.Tensor.{m}", "guess") if m in self.native.methods and m not in _GUESS_STOP else None
            else:
                hit = self.classify(callee)
            if hit is not None and hit[0] != caller:
                yield Edge(caller, hit[0], hit[1], s.file, line)

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
        if rename(cls) == "torch.Tensor" and f"torch.Tensor.{m}" in self.native.leaves:
            return f"torch.Tensor.{m}", "leaf"
        return None

    # ---------------------------------------------------------------- API → op
    def api_ops(self, api: str) -> dict[str, tuple[str, str, int]]:
        """op → (how, file, line) for a Python API (internal name), up to API_DEPTH hops.

        how: "alias" (an alias straight to a binding), "wrapper" (through Python
        code), "method_guess" (the path uses an untyped Tensor method call).
        """
        out: dict[str, tuple[str, str, int]] = {}
        first = self.edges(api)
        queue = deque((e, 1, e.kind == "guess", e) for e in first)
        seen = {api}
        while queue:
            e, depth, guessed, hop = queue.popleft()
            if e.kind in ("leaf", "guess"):
                how = "method_guess" if guessed else ("alias" if api in self.aliases and depth == 1 else "wrapper")
                for op in self.native.leaves.get(e.callee, ()):
                    if op not in out or (out[op][0] == "method_guess" and how != "method_guess"):
                        out[op] = (how, hop.file, hop.line)
                continue
            if e.callee in seen or depth >= API_DEPTH or e.callee.startswith(_NO_FOLLOW):
                continue
            seen.add(e.callee)
            for nxt in self.edges(e.callee):
                queue.append((nxt, depth + 1, guessed or nxt.kind == "guess", hop))
        return out

    def public_apis(self) -> Iterator[tuple[str, str, int]]:
        """(internal name, file, line) of every public function, method and alias in torch/."""
        for s in self.summaries:
            if not s.file.startswith("torch/"):
                continue
            for d in s.defs:
                if d.kind != "class" and is_public(rename(f"{s.module}.{d.qual}")):
                    yield f"{s.module}.{d.qual}", s.file, d.line
        for name, (_, file, line) in self.aliases.items():
            if file.startswith("torch/") and is_public(rename(name)):
                yield name, file, line

    def public_reexports(self) -> Iterator[tuple[str, str]]:
        """(public name, internal name) for a public package's `__init__.py` importing a
        function defined in a private module: `torch.masked.amax` is torch.masked._ops.amax."""
        for s in self.summaries:
            if not (s.file.startswith("torch/") and s.file.endswith("__init__.py") and is_public(s.module)):
                continue
            for local, target, _line in s.imports:
                if local.startswith("_"):
                    continue
                internal, found = self.idx.resolve(target)
                if found and not is_public(rename(internal)) and internal in self._edge_src:
                    yield f"{s.module}.{local}", internal

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
