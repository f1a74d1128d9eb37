"""The coverage report as data: what the renderers (md, csv, json, html) show.

Every number here comes from an `.output` relation of rules/coverage.dl; the
renderers only format. `to_json()` is the one serialisation the JSON format,
the MCP tool and the HTML page's numbers share.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum

from torchtalk.errors import InputError


class KernelPath(StrEnum):
    """How an op reaches a kernel for a key (Note [Coverage model] in rules/coverage.dl)."""

    DIRECT = "direct"
    DELEGATE = "delegate"
    STRUCTURED_META = "structured_meta"
    COMPOSITE = "composite"
    REGISTERED = "registered"  # m.impl in a TORCH_LIBRARY_IMPL (Note [Registrations are kernels])
    AUTOGRAD = "autograd"  # an autograd key's VariableType kernel
    CATCHALL = "catchall"  # the kernel given with an op's m.def: every key's (an extension's ops)

    @classmethod
    def parse(cls, text: str) -> KernelPath:
        try:
            return cls(text)
        except ValueError:
            known = ", ".join(p.value for p in cls)
            raise InputError(f"unknown kernel path {text!r} from the rules (known: {known})") from None


# precedence when an op has several paths (the heatmap shows the first)
PATH_ORDER = (KernelPath.DIRECT, KernelPath.DELEGATE, KernelPath.STRUCTURED_META, KernelPath.REGISTERED,
              KernelPath.CATCHALL, KernelPath.COMPOSITE, KernelPath.AUTOGRAD)


class Format(StrEnum):
    """Output formats of `torchtalk report coverage --format`."""

    MD = "md"
    HTML = "html"
    CSV = "csv"
    JSON = "json"

    @classmethod
    def parse(cls, text: str) -> Format:
        try:
            return cls(text.lower())
        except ValueError:
            from torchtalk.errors import did_you_mean

            raise InputError(
                f"unknown report format {text!r}",
                hint=did_you_mean(text, [f.value for f in cls]) or "one of md, html, csv, json",
            ) from None


@dataclass(frozen=True)
class TagShare:
    """Of the in-scope ops carrying `tag`, `covered` have a kernel for the key."""

    tag: str
    covered: int
    total: int


@dataclass(frozen=True)
class MissingOp:
    """An op without a kernel for a key; `decomps` are its Python decompositions (file:line)."""

    op: str
    file: str
    line: int
    decomps: tuple[str, ...] = ()


@dataclass(frozen=True)
class KeyCoverage:
    """Coverage of one dispatch key."""

    key: str
    covered: int
    total: int
    by_path: dict[str, int]  # ops reaching a kernel through each path (not exclusive)
    tags: tuple[TagShare, ...]
    missing: tuple[MissingOp, ...]  # no kernel and no backend fallback
    fallback: tuple[MissingOp, ...] = ()  # no kernel: the key's backend fallback runs them
    fallback_fns: tuple[str, ...] = ()  # "fn (file:line)" of the key's m.fallback registrations

    @property
    def share(self) -> float:
        return self.covered / self.total if self.total else 0.0

    def tag(self, name: str) -> TagShare | None:
        return next((t for t in self.tags if t.tag == name), None)

    @property
    def missing_with_decomp(self) -> int:
        return sum(1 for m in self.missing if m.decomps)


@dataclass(frozen=True)
class OpRow:
    """One op of the heatmap: its kernel path per key ("" = missing)."""

    op: str
    paths: dict[str, str]
    decomp: bool
    fallback: tuple[str, ...] = ()  # the keys whose backend fallback runs it (no kernel)

    def status(self, key: str) -> str:
        """The cell of `key`: its kernel path, "fallback", "missing+decomp" or "missing"."""
        if self.paths[key]:
            return self.paths[key]
        if key in self.fallback:
            return "fallback"
        return "missing+decomp" if self.decomp else "missing"


@dataclass(frozen=True)
class PackageOp:
    """An op of the out-of-tree backend package's table (or one it lacks)."""

    op: str
    file: str = ""
    line: int = 0
    modules: int = 0  # nn modules reaching it (missing ops)
    tests: int = 0  # tests reaching it (missing ops)
    composite: bool = False  # CompositeImplicitAutograd: decomposed before the backend
    decomposes: tuple[str, ...] = ()  # decompositions whose calls the package all has
    unmet: tuple[str, ...] = ()  # Python APIs its decompositions call with no op in the package
    has_decomp: bool = False
    via: str = ""  # inherited: the composite alias key; fallback: "fn (file:line)"


@dataclass(frozen=True)
class PackageReport:
    """Coverage of an out-of-tree backend package against the in-scope ops."""

    root: str
    files: int
    refs: int
    scope_total: int
    covered: tuple[PackageOp, ...]
    missing: tuple[PackageOp, ...]  # ranked: most modules + tests first
    unknown: tuple[str, ...]  # "aten.x.y at file:line": names no ATen op of the tree
    unparsed: tuple[str, ...]
    decomp_calls_known: bool  # py_calls/py_api facts exist to check decompositions
    decomps_known: bool = True  # decomp facts exist (the python layer is indexed)
    keys: tuple[str, ...] = ()  # dispatch keys its C++ / torch.library registrations name (Note [Package keys])
    inherited: tuple[PackageOp, ...] = ()  # not registered: a composite kernel serves its key
    fallback: tuple[PackageOp, ...] = ()  # neither: the package's m.fallback runs them
    notes: tuple[str, ...] = ()  # registrations that are no ATen op table entry
    autograd: tuple[PackageOp, ...] = ()  # m.impl for an autograd key (via = the key): not a backend kernel

    @property
    def missing_decomposable(self) -> int:
        """Missing ops with a decomposition into ops the package has or inherits."""
        return sum(1 for p in self.missing if p.decomposes)


@dataclass(frozen=True)
class CoverageReport:
    """The whole report (see rules/coverage.dl for what each number means)."""

    source: str
    scope: str  # "*" or the --tag
    total: int
    keys: tuple[KeyCoverage, ...]
    heatmap: tuple[OpRow, ...]
    no_derivative: tuple[MissingOp, ...]
    untested: tuple[MissingOp, ...]
    layers_missing: tuple[str, ...]  # "python (decomp, py_api, ...)": what the DB lacks
    seconds: float
    package: PackageReport | None = None
    notes: tuple[str, ...] = field(default=())
    library_ops: int = 0  # in scope, an extension's own (TORCH_LIBRARY m.def), not the yaml's

    def key(self, name: str) -> KeyCoverage:
        for k in self.keys:
            if k.key == name:
                return k
        from torchtalk.errors import did_you_mean

        raise InputError(
            f"key {name!r} not in the report", hint=did_you_mean(name, [k.key for k in self.keys])
        )

    def to_json(self) -> dict:
        """Plain data for json.dumps (the JSON format and the HTML page's numbers)."""
        data = asdict(self)
        for k, kc in zip(data["keys"], self.keys, strict=True):
            k["share"] = round(kc.share, 4)
            k["missing_with_decomp"] = kc.missing_with_decomp
        if self.package is not None:
            data["package"]["missing_decomposable"] = self.package.missing_decomposable
        return data


# ----------------------------------------------------------------- text shared by the renderers


def pct(n: int, total: int) -> str:
    """`n/total` as a percentage with one decimal ("97.3%")."""
    return f"{100.0 * n / total:.1f}%" if total else "n/a"


def scope_text(report: CoverageReport) -> str:
    if report.scope == "*" and report.library_ops:
        return (f"all {report.total} ops: native_functions.yaml's {report.total - report.library_ops} and the "
                f"extension's {report.library_ops} (TORCH_LIBRARY)")
    if report.scope == "*":
        return f"all {report.total} ops of native_functions.yaml"
    return f"the {report.total} ops tagged `{report.scope}`"


def package_path(p: PackageOp, pkg: PackageReport) -> str:
    """What could still run a missing package op: composite, decomposition, or nothing."""
    if p.composite:
        return "composite (CompositeImplicitAutograd)"
    if not pkg.decomps_known:
        return "unknown (decompositions not indexed: python layer)"
    if p.decomposes:
        return "decomposes into mapped ops: " + ", ".join(p.decomposes)
    if p.has_decomp and p.unmet:
        return "decomposition calls " + ", ".join(p.unmet) + ": no mapped op"
    if p.has_decomp and not pkg.decomp_calls_known:
        return "has a decomposition (its calls are not indexed)"
    if p.has_decomp:
        return "has a decomposition (no ATen call seen: prims or Python operators)"
    return "none"
