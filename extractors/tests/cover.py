"""What a test covers: from `@ops(...)`/`@modules(...)`, from the calls in its
body, and from its name.

Note [Test cover subjects]: tests_cover.subject is
  - an ATen operator *name* ("softmax", "matmul") for how "opinfo",
    "opinfo_maybe" (the OpInfo list had a filter we could not evaluate, so the
    op may be filtered out) and "name" (the test's name starts with an op
    name: test_matmul_small → matmul);
  - a Python API for how "call" (`torch.add(...)`, `F.gelu(...)`: the
    canonical name, joinable with py_api) and "method" (`x.add_(...)` on an
    untyped receiver whose method name is an ATen Tensor method:
    torch.Tensor.add_);
  - a module class for how "moduleinfo", for "call" of a module class
    (`nn.Linear(...)` → torch.nn.modules.linear.Linear) and for "name" (the
    test's name has the class's name as written under torch.nn or torch.optim:
    test_EmbeddingBag_per_sample_weights → torch.nn.modules.sparse.EmbeddingBag);
  - an optimizer class for how "optiminfo" (`@optims(optim_db)`: its
    OptimizerInfo entry);
  - an ATen operator name for how "opinfo_alias": the test's OpInfo names the
    op among its `aliases=` (OpInfo('abs', aliases=('absolute',)) → absolute).
One row per (test, subject): the first evidence found, in that order. Calls
of input factories (torch.randn, torch.ones, ...: SETUP_APIS) count only when
the test's name mentions them.

Example:
    >>> list(covers(model, dbs, summary, d, "test/test_linalg.py::TestLinalg::test_matmul_out"))
"""

from __future__ import annotations

from collections.abc import Iterator

from extractors.python.model import Model, is_public
from extractors.python.names import rename
from extractors.python.summary import Def, FileSummary
from extractors.tests.opinfo import Databases

# Tensor methods too generic to say what a test is about.
METHOD_STOP = frozenset(
    "size dim stride numel item to type view contiguous is_contiguous data_ptr "
    "element_size storage_offset is_complex is_floating_point clone detach "
    "requires_grad_ cpu cuda double float half long int bool tolist".split()
)
# Test-name words that are op names but say nothing about an op.
NAME_STOP = frozenset({"t", "to", "is", "data", "item", "type", "set", "new", "any", "all", "one", "sum_to", "trace"})
# Tensor factories that tests call to make their inputs: a call of one is
# evidence only when the test's name mentions it (test_randn_like → randn_like).
SETUP_APIS = frozenset(
    f"torch.{n}" for n in
    "randn rand randint ones zeros empty full arange tensor as_tensor from_numpy eye linspace "
    "randn_like rand_like randint_like ones_like zeros_like empty_like full_like manual_seed".split()
)


# The test decorators that take an *Info list: (the entries' kind, tests_cover.how).
DECORATOR_KIND = {"ops": ("op", "opinfo"), "modules": ("module", "moduleinfo"), "optims": ("optim", "optiminfo")}
# Where a module class's name is exported (Note [Test cover subjects], "name").
MODULE_PACKAGES = ("torch.nn", "torch.optim")


class CoverFinder:
    """Computes tests_cover rows; memoizes the Python API checks."""

    def __init__(self, model: Model, dbs: Databases, module_classes: frozenset[str]) -> None:
        self.model = model
        self.dbs = dbs
        self.module_classes = module_classes
        self._subject: dict[str, str | None] = {}
        self._helpers: dict[tuple[str, str, bool], list[tuple[str, str, str, int]]] = {}  # (class, method, super)
        self._helper_looked: dict[tuple[str, str, bool], set[str | tuple[str, str]]] = {}
        self._op_names = model.native.by_name
        # what the rows found since it was last emptied have read: the callees
        # whose subject they asked (Note [Test files kept across a body edit]
        # in __init__.py), and as ("op", name) and ("method", name) the names
        # they looked up among the YAML's ops and Tensor methods (Note [Test
        # files kept across a YAML edit])
        self.looked: set[str | tuple[str, str]] = set()

    def subjects(self) -> dict[str, str | None]:
        """Every callee whose subject was asked -> that subject."""
        return dict(self._subject)

    def covers(self, s: FileSummary, d: Def, test: str) -> Iterator[tuple[str, str, str, int]]:
        """(subject, how, file, line) for test function `d` (deduplicated by subject)."""
        seen: set[str] = set()
        for row in self._from_decorators(s, d):
            if row[0] not in seen:
                seen.add(row[0])
                yield row
        name = d.qual.rpartition(".")[2]
        for row in self._from_calls(s, d):
            if row[0] in SETUP_APIS and row[0][len("torch."):] not in name:
                continue
            if row[0] not in seen:
                seen.add(row[0])
                yield row
        for subject in (self.name_op(name), self.name_module(name)):
            if subject and subject not in seen:
                seen.add(subject)
                yield subject, "name", s.file, d.line

    def _from_decorators(self, s: FileSummary, d: Def) -> Iterator[tuple[str, str, str, int]]:
        for deco in d.decorators:
            last = deco.target.rpartition(".")[2]
            if not deco.called or not deco.args or last not in DECORATOR_KIND:
                continue
            kind, how = DECORATOR_KIND[last]
            keys, exact = self.dbs.evaluate(s, deco.args[0])
            for key in sorted(keys):
                e = self.dbs.entries[key]
                if e.kind != kind:
                    continue
                yield e.subject, how if exact or kind != "op" else "opinfo_maybe", s.file, deco.line
                for alias in e.aliases:
                    yield alias, "opinfo_alias" if exact else "opinfo_maybe", s.file, deco.line

    def _from_calls(self, s: FileSummary, d: Def, helper: bool = False) -> Iterator[tuple[str, str, str, int]]:
        """Calls in the test's body, and (one level) in the helper methods it
        calls on self that are defined under test/ (`self.check_single_matmul`)."""
        methods = self.model.native.methods
        for callee, line in d.calls:
            head, _, m = callee.partition(".")
            if head in ("self", "super"):
                if not helper:
                    yield from self._from_helper(s, d, m, head == "super")
                continue
            if head == "?":
                if m not in METHOD_STOP:
                    self.looked.add(("method", m))
                    if m in methods:
                        yield f"torch.Tensor.{m}", "method", s.file, line
                continue
            subject = self.subject(callee)
            if subject:
                yield subject, "call", s.file, line

    def _from_helper(self, s: FileSummary, d: Def, m: str, sup: bool) -> Iterator[tuple[str, str, str, int]]:
        cls = self.model.enclosing_class(s, d)
        if not cls or m.startswith("test"):
            return
        key = (cls, m, sup)  # the tests of a class call its helpers again and again
        rows = self._helpers.get(key)
        if rows is None:
            outer, self.looked = self.looked, set()
            try:
                rows = self._helpers[key] = list(self._helper_rows(cls, m, sup))
                self._helper_looked[key] = self.looked
            finally:
                self.looked = outer
        self.looked |= self._helper_looked[key]
        yield from rows

    def _helper_rows(self, cls: str, m: str, sup: bool) -> Iterator[tuple[str, str, str, int]]:
        hit = self.model.method(cls, m, sup)
        if hit is None or hit[1] != "def":
            return
        found = self.model.idx.def_of(hit[0])
        if found is not None and found[0].file.startswith("test/"):
            yield from self._from_calls(found[0], found[1], helper=True)

    def subject(self, callee: str) -> str | None:
        """The Python API or module class a resolved callee names, if it reaches an op."""
        self.looked.add(callee)
        if callee in self._subject:
            return self._subject[callee]
        hit = self.model.classify(callee)
        out = None
        if hit is not None:
            target, kind = hit
            name = rename(target)
            if kind == "leaf":
                out = name
            elif name.startswith("torch.") and not name.startswith("torch.testing") and is_public(name):
                if name in self.module_classes or self.model.api_ops(target):
                    out = name
        self._subject[callee] = out
        return out

    def name_module(self, test_name: str) -> str | None:
        """The module or optimizer class a CamelCase word of the test's name
        names as exported by torch.nn / torch.optim (test_LayerNorm_general →
        torch.nn.modules.normalization.LayerNorm)."""
        for word in test_name.split("_")[1:]:
            if not word[:1].isupper():
                continue
            for pkg in MODULE_PACKAGES:
                cls = self.model.idx.canon(f"{pkg}.{word}")
                if cls in self.module_classes:
                    return cls
        return None

    def name_op(self, test_name: str) -> str | None:
        """The longest op name the test's name starts with (after `test_`)."""
        if not test_name.startswith("test_"):
            return None
        words = test_name[5:].split("_")
        for n in range(len(words), 0, -1):
            cand = "_".join(words[:n])
            if cand in NAME_STOP:
                continue
            self.looked.add(("op", cand))
            if cand in self._op_names:
                return cand
        return None
