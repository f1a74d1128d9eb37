"""OpInfo / ModuleInfo databases, evaluated statically from the summaries.

An entry is an `*Info(...)` constructor call inside a module-level list
(`op_db: List[OpInfo] = [UnaryUfuncInfo('abs', ...), ...]`). A database is a
module-level name whose value the evaluator follows through `+`, `+=`,
`*unpacking`, references to other modules' lists, and comprehensions or
`filter(...)` over them. Filters it can decide (`isinstance(op, X)`,
`op.name == 'x'`, `op.name in (...)`) are applied; any other filter keeps every
entry and marks the result inexact (Note [Inexact OpInfo lists]): tests_cover
then says "opinfo_maybe" instead of "opinfo". Entries made by a factory
call are entries only when the factory's name says so (`*Info(...)`,
`make_*opinfo(...)`); other calls in a list add nothing.

Note [OpInfo subjects]: an OpInfo's subject is the ATen operator *name* it
tests (`aten_name=` when given, else its name when an op has that name, or the
name with dots as underscores: `linalg.vector_norm` → `linalg_vector_norm`);
when no op has that name it is the Python API `torch.<name>`
(`torch.nn.functional.dropout2d`), which py_api maps to ops. A PythonRefInfo
takes the subject of the OpInfo it names (`torch_opinfo_name`). A ModuleInfo's
subject is the module class's canonical name (`torch.nn.modules.linear.Linear`),
an OptimizerInfo's the optimizer class's (`torch.optim.adamw.AdamW`). An
OpInfo's `aliases=` (`('absolute',)`, `('special.expit',)`) name more ops it
tests: each alias gets a subject the same way (`InfoEntry.aliases`).

Example:
    >>> dbs = Databases(model)
    >>> keys, exact = dbs.value("torch.testing._internal.common_methods_invocations.op_db")
"""

from __future__ import annotations

from dataclasses import dataclass

from extractors.python.model import Model
from extractors.python.names import rename
from extractors.python.summary import FileSummary

EMPTY: frozenset = frozenset()


@dataclass(frozen=True)
class InfoEntry:
    file: str
    line: int
    cls: str  # canonical class name ("...opinfo.core.UnaryUfuncInfo")
    name: str  # "softmax", or "softmax:with_dtype" for a variant
    subject: str
    db: str  # the list it is written in ("op_db", "module_db", ...)
    kind: str  # "op" | "module" | "optim"
    aliases: tuple[str, ...] = ()  # the subjects of its `aliases=` (Note [OpInfo subjects])


class Databases:
    """Every entry, and the value (a set of entry keys) of any module-level list."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self.idx = model.idx
        self.by_file: dict[str, FileSummary] = {s.file: s for s in model.summaries}
        self.assigns: dict[str, list[tuple[FileSummary, tuple]]] = {}
        for s in model.summaries:
            for name, _line, ir in s.assigns:
                self.assigns.setdefault(f"{s.module}.{name}", []).append((s, ir))
        self._memo: dict[str, tuple[frozenset, bool]] = {}
        self._ancestors: dict[str, frozenset[str]] = {}
        self.entries: dict[tuple[str, int], InfoEntry] = {}
        self._collect_entries()

    # ---------------------------------------------------------------- entries
    def _collect_entries(self) -> None:
        pending: list[tuple[FileSummary, int, str]] = []
        for s in self.model.summaries:
            if not s.entries:
                continue
            owner: dict[int, str] = {}
            for name, _line, ir in s.assigns:
                for i in _direct_entries(ir):
                    owner.setdefault(i, name)
            pending.extend((s, i, db) for i, db in owner.items())
        by_name: dict[str, str] = {}
        for s, i, db in pending:  # plain OpInfos first: PythonRefInfos refer to them
            e = s.entries[i]
            if not e.torch_opinfo_name:
                info = self._entry(s, i, db, "")
                self.entries[(s.file, i)] = info
                by_name.setdefault(_full_name(e.name, e.variant), info.subject)
        for s, i, db in pending:
            e = s.entries[i]
            if e.torch_opinfo_name:
                base = by_name.get(_full_name(e.torch_opinfo_name, e.torch_opinfo_variant), "")
                self.entries[(s.file, i)] = self._entry(s, i, db, base)

    def _entry(self, s: FileSummary, i: int, db: str, ref_subject: str) -> InfoEntry:
        e = s.entries[i]
        cls = self.idx.resolve(e.cls)[0]
        last = e.cls.rpartition(".")[2]
        if last == "ModuleInfo" or self._is_module_ref(e.name):
            subject = self.idx.canon(e.name)
            return InfoEntry(s.file, e.line, rename(cls), subject.rpartition(".")[2], subject, db, "module")
        if last == "OptimizerInfo":
            subject = self.idx.canon(e.name)
            return InfoEntry(s.file, e.line, rename(cls), e.name, subject, db, "optim")
        subject = ref_subject or self._op_subject(e.name, e.aten_name)
        aliases = tuple(dict.fromkeys(a for a in map(self._alias_subject, e.aliases) if a != subject))
        return InfoEntry(s.file, e.line, rename(cls), _full_name(e.name, e.variant), subject, db, "op", aliases)

    def _alias_subject(self, alias: str) -> str:
        """An alias's subject, as for a name (`special.expit` → op `special_expit`)."""
        return self._op_subject(alias, "")

    def _is_module_ref(self, name: str) -> bool:
        return name.startswith("torch.nn.") and name[len("torch.nn."):][:1].isupper()

    def _op_subject(self, name: str, aten_name: str) -> str:
        by_name = self.model.native.by_name
        aten = name[len("torch.ops.aten."):].split(".")[0] if name.startswith("torch.ops.aten.") else ""
        tail = name.rpartition(".")[2] if name.startswith("nn.functional.") else ""
        for cand in (aten_name, name, name.replace(".", "_"), tail, aten):
            if cand and cand in by_name:
                return cand
        if name.startswith("torch."):
            api = name
        elif name.startswith("__"):
            api = f"torch.Tensor.{name}"  # OpInfo('__radd__', op=torch.Tensor.__radd__)
        else:
            api = f"torch.{name}"
        return self.idx.canon(api)

    # ---------------------------------------------------------------- values
    def value(self, dotted: str) -> tuple[frozenset, bool]:
        """(entry keys, exact) of the module-level list named `dotted`."""
        internal = self.idx.resolve(dotted)[0]
        hit = self._memo.get(internal)
        if hit is not None:
            return hit
        self._memo[internal] = (EMPTY, True)  # `op_db += ...` refers to itself
        keys: set = set()
        exact = True
        for s, ir in self.assigns.get(internal, ()):
            k, ex = self.evaluate(s, ir)
            keys |= k
            exact = exact and ex
        res = (frozenset(keys), exact)
        self._memo[internal] = res
        return res

    def evaluate(self, s: FileSummary, ir: tuple) -> tuple[frozenset, bool]:
        """(entry keys, exact) of an IR value written in file `s`."""
        kind = ir[0]
        if kind == "entry":
            key = (s.file, ir[1])
            return (frozenset([key]) if key in self.entries else EMPTY), True
        if kind == "ref":
            return self.value(ir[1])
        if kind in ("seq", "add", "star"):
            parts = ir[1] if kind == "seq" else ir[1:]
            keys: set = set()
            exact = True
            for p in parts:
                k, ex = self.evaluate(s, p)
                keys |= k
                exact = exact and ex
            return frozenset(keys), exact
        if kind == "comp":
            keys, exact = self.evaluate(s, ir[1])
            return self._filter(keys, ir[2], exact)
        # A call in a list (a factory we do not run) adds no entry; "exact" is
        # only about filters (Note [Inexact OpInfo lists]).
        return EMPTY, True

    def _filter(self, keys: frozenset, conds: tuple, exact: bool) -> tuple[frozenset, bool]:
        out = set(keys)
        for cond in conds:
            if cond[0] == "isinstance":
                want = cond[1].rpartition(".")[2]
                out = {k for k in out if want in self.ancestors(self.entries[k].cls)}
            elif cond[0] == "name_in":
                out = {k for k in out if self.entries[k].name.split(":")[0] in cond[1]}
            elif cond[0] == "name_not_in":
                out = {k for k in out if self.entries[k].name.split(":")[0] not in cond[1]}
            else:
                exact = False
        return frozenset(out), exact

    def ancestors(self, cls: str) -> frozenset[str]:
        """Last name components of `cls` and all its bases."""
        hit = self._ancestors.get(cls)
        if hit is None:
            names = {cls.rpartition(".")[2]}
            todo, seen = [self.idx.resolve(cls)[0]], set()
            while todo:
                c = todo.pop()
                if c in seen:
                    continue
                seen.add(c)
                for b in self.idx.bases(c):
                    names.add(b.rpartition(".")[2])
                    todo.append(b)
            hit = self._ancestors[cls] = frozenset(names)
        return hit


def _direct_entries(ir: tuple) -> list[int]:
    """Entry indexes written literally in `ir` (not through references)."""
    kind = ir[0]
    if kind == "entry":
        return [ir[1]]
    if kind == "seq":
        return [i for p in ir[1] for i in _direct_entries(p)]
    if kind in ("add", "star"):
        return [i for p in ir[1:] for i in _direct_entries(p)]
    if kind == "comp":
        return _direct_entries(ir[1])
    return []


def _full_name(name: str, variant: str) -> str:
    return f"{name}:{variant}" if variant else name
