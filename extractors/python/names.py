"""Cross-module name resolution over file summaries (the global pass).

`Index.canon("torch.nn.Linear")` follows re-exports, star imports and
module-level aliases to where a name is defined:
`torch.nn.modules.linear.Linear`. Names that are not defined in Python (the
C bindings `torch._C._nn.gelu`, `torch.add`) come back as they are.

Note [Canonical Python names]: a definition is named by its module and
qualified name (`torch.nn.modules.linear.Linear.forward`), except that
`torch._tensor.Tensor` is named `torch.Tensor` (its public name, the one the
generated Tensor methods use) and `torch._VF.X` is
`torch._C._VariableFunctions.X`. A module-level alias
(`gelu = _add_docstr(torch._C._nn.gelu, ...)`, `aten = torch.ops.aten`) is a
name of its own module; a longer name through it continues at its target
(`aten.add.Tensor` → `torch._ops.ops.aten.add.Tensor`).

Example:
    >>> idx = Index(summaries)
    >>> idx.canon("torch.nn.Linear")
    'torch.nn.modules.linear.Linear'
"""

from __future__ import annotations

from collections.abc import Iterable

from extractors.python.summary import Def, FileSummary

_ALIAS_WRAPPERS = frozenset({"_add_docstr", "_make_alias", "add_docstr"})


def rename(name: str) -> str:
    """An internal (definition-site) name → its output name (Note [Canonical Python names])."""
    if name == "torch._tensor.Tensor" or name.startswith("torch._tensor.Tensor."):
        return "torch.Tensor" + name[len("torch._tensor.Tensor"):]
    return name


def _unvf(name: str) -> str:
    if name.startswith("torch._VF."):
        return "torch._C._VariableFunctions." + name[len("torch._VF."):]
    return name


def alias_targets(ir: tuple) -> list[str]:
    """The dotted targets of `X = a.b`, `X = _add_docstr(a.b, ...)` or
    `X = boolean_dispatch(if_true=a, if_false=b, ...)` (both), else []."""
    if ir[0] == "ref":
        return [ir[1]]
    if ir[0] != "call":
        return []
    last = ir[1].rpartition(".")[2]
    if last in _ALIAS_WRAPPERS and ir[2] and ir[2][0][0] == "ref":
        return [ir[2][0][1]]
    if last == "boolean_dispatch" and len(ir) > 3:
        return [v[1] for k, v in ir[3] if k in ("if_true", "if_false")]
    return []


# Note [Modules kept]: a module's tables (_Module) are a function of its
# summary alone and never change once made; a summary is kept as the same
# object while its file is (Note [Summaries kept in the process] in
# corpus.py). So a watcher's next model takes the last one's module of each
# summary kept: of the 5,000 modules of torch/ and test/, an edit of one
# makes one again; and a module holds the rows a Model takes of it (its
# aliases, its functions with call edges), made once with it. The tests
# layer's model (torch/ and test/) took 109 ms to build, 12 ms now (best of
# 7), and an update builds two models.
class _Module:
    __slots__ = ("summary", "defs", "top", "imports", "aliases", "alias_all", "stars", "alias_rows", "edge_rows")

    def __init__(self, s: FileSummary) -> None:
        self.summary = s
        self.defs: dict[str, Def] = {d.qual: d for d in s.defs}
        self.top = {d.qual for d in s.defs if "." not in d.qual}
        self.imports = {local: target for local, target, _ in s.imports}
        self.aliases: dict[str, tuple[str, int]] = {}  # name → (first target, line)
        self.alias_all: dict[str, list[str]] = {}  # name → every target
        for name, line, ir in s.assigns:
            ts = alias_targets(ir)
            if ts and name not in self.aliases:
                self.aliases[name] = (ts[0], line)
                self.alias_all[name] = ts
        self.stars = s.star_imports
        # what a Model takes of it: its aliases (internal name -> (raw
        # targets, file, line)) and its functions with call edges
        self.alias_rows = [(f"{s.module}.{name}", (self.alias_all[name], s.file, line))
                           for name, (_target, line) in self.aliases.items()]
        self.edge_rows = edge_rows(s)


def edge_rows(s: FileSummary) -> list[tuple[str, tuple[FileSummary, Def]]]:
    """(internal name, (summary, def)) of each function of `s` (its classes aside)."""
    return [(f"{s.module}.{d.qual}", (s, d)) for d in s.defs if d.kind != "class"]


class Index:
    """Modules by dotted name, with canonicalization and class hierarchy."""

    def __init__(self, summaries: Iterable[FileSummary], kept: Index | None = None) -> None:
        """`kept`: an earlier Index, whose module of a summary this one takes
        when it is of the same summary object (Note [Modules kept])."""
        self.modules: dict[str, _Module] = {}
        last = kept.modules if kept is not None else {}
        for s in summaries:
            if s.error is None:
                mod = last.get(s.module)
                self.modules[s.module] = mod if mod is not None and mod.summary is s else _Module(s)
        self._memo: dict[str, tuple[str, bool]] = {}
        self._defs_memo: dict[str, tuple[FileSummary, Def] | None] = {}

    # ---------------------------------------------------------------- names
    def canon(self, dotted: str) -> str:
        """The canonical output name of `dotted` (Note [Canonical Python names])."""
        return rename(self._canon(_unvf(dotted), 0)[0])

    def resolve(self, dotted: str) -> tuple[str, bool]:
        """(internal name, whether it is a Python definition or module alias)."""
        hit = self._memo.get(dotted)
        if hit is not None and not dotted.startswith("torch._VF."):
            return hit
        return self._canon(_unvf(dotted), 0)

    def _canon(self, d: str, depth: int) -> tuple[str, bool]:
        hit = self._memo.get(d)
        if hit is not None:
            return hit
        self._memo[d] = (d, False)  # cycle guard
        res = self._resolve(d, depth) if depth < 12 else (d, False)
        self._memo[d] = res
        return res

    def _resolve(self, d: str, depth: int) -> tuple[str, bool]:
        parts = d.split(".")
        for i in range(len(parts), 0, -1):
            mod = self.modules.get(".".join(parts[:i]))
            if mod is not None:
                break
        else:
            return d, False
        rest = parts[i:]
        if not rest:
            return d, True
        head, tail = rest[0], rest[1:]
        if head in mod.top or (head in mod.aliases and not tail):
            return d, True
        if head in mod.aliases:
            return self._canon(_unvf(".".join([mod.aliases[head][0], *tail])), depth + 1)
        if head in mod.imports:
            target = mod.imports[head]
            if target != d:
                return self._canon(_unvf(".".join([target, *tail])), depth + 1)
        for star in mod.stars:
            got = self._canon(".".join([star, *rest]), depth + 1)
            if got[1]:
                return got
        return d, False

    def in_tree(self, dotted: str) -> bool:
        """Whether `dotted` names something in a module of the tree (found or not)."""
        parts = dotted.split(".")
        return any(".".join(parts[:i]) in self.modules for i in range(len(parts), 0, -1))

    # ---------------------------------------------------------------- defs
    def def_of(self, dotted: str) -> tuple[FileSummary, Def] | None:
        """The summary and Def a canonical (un-renamed) name points at."""
        try:
            return self._defs_memo[dotted]
        except KeyError:
            hit = self._defs_memo[dotted] = self._def_of(dotted)
            return hit

    def _def_of(self, dotted: str) -> tuple[FileSummary, Def] | None:
        parts = dotted.split(".")
        for i in range(len(parts) - 1, 0, -1):
            mod = self.modules.get(".".join(parts[:i]))
            if mod is not None:
                d = mod.defs.get(".".join(parts[i:]))
                return (mod.summary, d) if d is not None else None
        return None

    def lookup_method(self, cls: str, method: str, depth: int = 0) -> str | None:
        """`cls.method` through the bases (depth-first, like a simple MRO)."""
        if depth > 10:
            return None
        found = self.def_of(cls)
        if found is None:
            return None
        summary, d = found
        if f"{d.qual}.{method}" in self.modules[summary.module].defs:
            return f"{cls}.{method}"
        for base in d.bases:
            hit = self.lookup_method(self._canon(base, 0)[0], method, depth + 1)
            if hit:
                return hit
        return None

    def bases(self, cls: str) -> list[str]:
        """Canonical (un-renamed) names of the bases of class `cls`."""
        found = self.def_of(cls)
        if found is None:
            return []
        return [self._canon(b, 0)[0] for b in found[1].bases]

    def subclasses_of(self, roots: Iterable[str]) -> dict[str, str]:
        """Every class that transitively derives from one of `roots` → that root."""
        parents: dict[str, list[str]] = {}
        for mname, mod in self.modules.items():
            for d in mod.summary.defs:
                if d.kind == "class":
                    parents[f"{mname}.{d.qual}"] = [self._canon(b, 0)[0] for b in d.bases]
        out: dict[str, str] = {r: r for r in roots}

        def root_of(c: str, seen: set[str]) -> str | None:
            if c in out:
                return out[c]
            if c in seen or c not in parents:
                return None
            seen.add(c)
            for b in parents[c]:
                r = root_of(b, seen)
                if r:
                    out[c] = r
                    return r
            return None

        for c in parents:
            root_of(c, set())
        return out
