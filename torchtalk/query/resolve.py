"""Names as people type them → the ids of the fact DB: the one resolver of
the query DSL, the CLI, the API and MCP.

A namespace (the column name of a query's seed, Note [Named queries]) says
what kind of thing a name must denote:

  fn     C++/CUDA function, __global__ kernel or dispatch stub: a
         qualified name is first the exact id ("at::native::cpublas::gemm";
         "(anonymous)" also matches an anonymous namespace named with its
         file); then a dispatch-table kernel name ("matmul", "gelu_out_cpu",
         "at::native::topk_out_cuda"): the function torchgen binds it to,
         `at::native::<kernel>` or, for a structured kernel,
         `TORCH_IMPL_FUNC(<kernel>)`'s `at::native::structured_<kernel>::impl`;
         then every id equal to the name or ending in "::<name>"
         ("cpublas::gemm"; "gemm" is ambiguous); then an op spelling (below):
         the kernels of those ops.
  op     ATen op, in any of its spellings (Note [Op spellings]): a name ("add":
         every overload, one packet) or an id ("add.Tensor", "aten::add.Tensor",
         "torch.ops.aten.add.Tensor", "aten.add.Tensor"; "X.default" is X's
         default overload only); a Python API ("torch.matmul", "F.gelu": the
         ops it reaches); a dispatch-table kernel ("gelu_out_cpu",
         "at::native::matmul") or a structured kernel's function
         ("at::native::structured_gelu_out_cpu::impl"): the ops whose table
         names it; a generated C++ API name ("at::gelu", "at::gelu_out",
         "at::nll_loss_nd_symint", "at::cpu::gelu", "at::_ops::add_Tensor::call").
  py     Python definition or API: exact, then any id ending in ".<name>".
  node   fn or py, whichever matches.
  subject  op first (names, ids, Python APIs), else fn.
  test   test id, exact or ending in "::<name>".
  key    dispatch key, case-insensitively.
  module_class  nn module, optimizer or LR scheduler class: the exact id; then a
         name whose last component is the class's ("Linear", "torch.nn.Linear":
         the classes of that name under the package written, if any).

Python names may start with a module alias as PyTorch's own code writes it
("F.gelu", "nn.Linear", "aten.add.Tensor"; Note [Module aliases] in
extractors/python/__init__.py).

Tiers are tried in order and the first that matches wins. When the winning
tier has several ids and exactly one of them is public (Note [Public
definitions]: no private namespace or module component, a torch.nn /
torch.optim class rather than another Module subclass), that one wins and the
others are listed (`Resolution.others`): "Linear" is torch.nn.Linear.
Otherwise a name with several ids is ambiguous (`Ambiguous`), unless the
caller asks for all of them; a name that matches nothing gets a QueryError
with the nearest names ("did you mean").

A C++ name names all its overloads (Note [Overload ids] in
extractors/cpp/names.py: `at::native::where` is the five `where(...)`), one
packet.

Example:
    >>> Resolver(con).resolve("cpublas::gemm", "fn").ids
    ('at::native::cpublas::gemm',)
"""

from __future__ import annotations

import copy
import re
from collections import defaultdict
from dataclasses import dataclass

from extractors.cpp.names import split_sig
from torchtalk.connmemo import remember
from torchtalk.errors import QueryError


@dataclass(frozen=True)
class Match:
    """One thing a name denotes, at its definition."""

    kind: str  # "function", "kernel", "stub", "op", "python", "test", "key", "module"
    id: str
    file: str = ""
    line: int = 0

    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.file else ""


@dataclass(frozen=True)
class Resolution:
    """What `text` resolved to in namespace `ns`; `packet` = one thing (an op's
    overloads); `others` = the non-public matches a public one won over."""

    text: str
    ns: str
    matches: tuple[Match, ...]
    tier: str
    packet: bool = False
    others: tuple[Match, ...] = ()

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(m.id for m in self.matches))

    @property
    def ambiguous(self) -> bool:
        return not self.packet and len(self.ids) > 1


class Ambiguous(QueryError):
    """A name that matches several things: lists them, grouped."""

    def __init__(self, res: Resolution, shown: int = 12) -> None:
        self.resolution = res
        super().__init__(
            f"{res.text!r} is ambiguous: it matches {len(res.ids)} {_plural(res.ns)}",
            hint="qualify the name, or add --all (all=true) to answer for all of them",
        )
        self.shown = shown

    def render(self) -> str:
        lines = [self.headline()]
        for group, items in group_matches(self.resolution.matches).items():
            lines.append(f"  {group}:")
            for m in items[: self.shown]:
                lines.append(f"    {m.id}  {m.where()}".rstrip())
            if len(items) > self.shown:
                lines.append(f"    ... and {len(items) - self.shown} more")
        return "\n".join(lines)


def _plural(ns: str) -> str:
    return {"fn": "functions", "op": "ops", "py": "Python names", "test": "tests",
            "module_class": "classes"}.get(ns, "things")


def group_matches(matches) -> dict[str, list[Match]]:
    """Matches grouped by kind and, for C++ names, by namespace."""
    groups: dict[str, list[Match]] = defaultdict(list)
    for m in sorted(matches, key=lambda m: (m.kind, m.id)):
        scope = m.id.rsplit("::", 1)[0] if "::" in m.id else ""
        label = f"{m.kind} in {scope}" if m.kind in ("function", "kernel", "stub") and scope else m.kind
        groups[label].append(m)
    return dict(groups)


# Note [Public definitions]: when a name matches several definitions and
# exactly one is public, people mean that one (the documented `torch.nn.Linear`,
# not the quantized Linear classes of torch.ao). Public: a C++ id with no
# anonymous, static, `detail`/`internal`/`impl` or `_`-prefixed namespace; a Python id
# with no `_`-prefixed component that is an API reaching ATen ops (py_api); an
# nn class of torch.nn, torch.optim or an LR scheduler (module_class category
# other than "nn_other"). The MCP tools order the matches of an ambiguous name
# the same way, then by callers.
_PRIVATE_NS = frozenset({"detail", "details", "internal", "impl"})


def private_rank(m: Match, category: str = "", api: bool = True) -> int:
    """0 for a public definition (Note [Public definitions]), higher for less
    public; `category`: a module class's, `api`: a Python name is a public API
    that reaches ATen ops (a py_api row)."""
    if m.kind in ("function", "kernel", "stub"):
        scopes = _INTERNAL_PART.sub(r"(\1)", m.id).split("::")[:-1]
        return sum(1 for p in scopes if p in ("(anonymous)", "(static)") or p in _PRIVATE_NS or p.startswith("_"))
    if m.kind in ("python", "module"):
        private = sum(1 for p in m.id.split(".") if p.startswith("_") and not p.endswith("__"))
        return private + (category == "nn_other") + (m.kind == "python" and not api)
    return 0


_RESOLVED_MAX = 4096  # names remembered per connection
# The modules of PyTorch's documented Python API (Note [Public definitions]):
# a bare name that is no op is read as the API of that name in one of them.
PUBLIC_API_MODULES = frozenset({"torch", "torch.Tensor", "torch.nn.functional", "torch.linalg", "torch.fft",
                                "torch.special", "torch.nn.init"})
# Note [Op spellings]: the names of an ATen op in PyTorch's own code, each
# derived from the op table (native_functions.yaml) the way torchgen derives
# it: `aten::add.Tensor` (schema), `torch.ops.aten.add.Tensor` /
# `aten.add.Tensor` (Python; `.default` is the overload-less one),
# `at::add` / `at::add_out` / `at::add_outf` / `at::X_symint[_out]` (the C++
# API, torchgen/api/cpp.py `name()`: an out= overload adds `_out`, a SymInt
# one `_symint` first), `at::cpu::add` (a backend's namespace: the lowercased
# dispatch key), `at::_ops::add_Tensor` (torchgen's operator struct: the id
# with "." as "_"), and the dispatch-table kernel names.
_CPP_API = re.compile(r"(?:at|torch)::(?:(?P<ns>\w+)::)?(?P<name>\w+)")
_OPS_STRUCT = re.compile(r"at::_ops::(?P<name>\w+)(?:::(?:call|redispatch|schema|name|overload_name))?")
_OUT_FN = r"regexp_matches(split_part(schema, ' -> ', 1), '[*].*!\)')"  # an out= overload
_NATIVE = "at::native::"


class _Miss(Exception):
    """No tier of a namespace matches the text."""


class Resolver:
    """Resolves names against one fact DB connection (tables may be missing)."""

    def __init__(self, con) -> None:
        from torchtalk.connmemo import per_connection, session_memo

        self.con = con
        self.tables = per_connection(con, "main_tables", lambda c: {r[0] for r in c.execute(
            "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main'").fetchall()})
        # a read-only connection resolves a name the same way every time (Note
        # [DB info cache]): an agent asks about the same few names again and again
        self.memo = session_memo(con, "resolved")  # (text, namespace) -> Resolution

    def _q(self, sql: str, params, *tables: str) -> list[tuple]:
        if not all(t in self.tables for t in tables):
            return []
        return self.con.execute(sql, list(params)).fetchall()

    def resolve(self, text: str, ns: str) -> Resolution:
        """Resolve `text` in namespace `ns`; QueryError if nothing matches.

        Example:
            >>> Resolver(con).resolve("aten::add.Tensor", "op").ids
            ('add.Tensor',)
        """
        found = self.find(text, ns)
        if found is not None:
            return found
        # not found: its did-you-mean is as costly as a match, and as lasting;
        # raised as a copy (a caller may place the error)
        key = ("not found", text, ns)
        err = self.memo.get(key) if self.memo is not None else None
        if err is None:
            err = self._not_found(text, ns)
            if self.memo is not None:
                remember(self.memo, key, err, _RESOLVED_MAX)
        raise copy.copy(err)

    def find(self, text: str, ns: str) -> Resolution | None:
        """`text` resolved in namespace `ns`, or None: the probe the query
        router asks in turn (`trace(X)`: an op? a module? a function?), which
        needs no did-you-mean (Note [Trace of anything]); a miss is
        remembered as a match is."""
        key = (text, ns)
        if self.memo is not None and key in self.memo:
            return self.memo[key]
        try:
            found = self._match(text, ns)
        except _Miss:
            found = None
        return found if self.memo is None else remember(self.memo, key, found, _RESOLVED_MAX)

    def _match(self, text: str, ns: str) -> Resolution:
        tiers = {
            "fn": self._fn_tiers,
            "op": self._op_tiers,
            "py": self._py_tiers,
            "node": self._node_tiers,
            "subject": self._subject_tiers,
            "test": self._test_tiers,
            "key": self._key_tiers,
            "kernel": self._kernel_tiers,
            "module_class": self._module_tiers,
        }.get(ns)
        if tiers is None:
            return Resolution(text, ns, (Match("text", text),), "text")
        for tier, packet, fetch in tiers(text):
            rows = fetch()
            if rows:
                matches = tuple(dict.fromkeys(Match(*r) for r in rows))
                return self._prefer(Resolution(text, ns, matches, tier, packet or _overloads(matches)))
        raise _Miss

    def _prefer(self, res: Resolution) -> Resolution:
        """The one public match of an ambiguous resolution, the others kept
        aside (Note [Public definitions]); else `res` as it is."""
        if not res.ambiguous:
            return res
        ids = [list(res.ids)]
        cats = dict(self._q("SELECT cls, category FROM module_class WHERE list_contains(?, cls)",
                            ids, "module_class")) if res.ns == "module_class" else {}
        apis = {r[0] for r in self._q("SELECT DISTINCT api FROM py_api WHERE list_contains(?, api)", ids, "py_api")
                } if any(m.kind == "python" for m in res.matches) else set()
        ranks = {m.id: private_rank(m, cats.get(m.id, ""), m.id in apis) for m in res.matches}
        best = min(ranks.values())
        winners = [m for m in res.matches if ranks[m.id] == best]
        if len({m.id for m in winners}) != 1:
            return res
        rest = tuple(m for m in res.matches if m.id != winners[0].id)
        return Resolution(res.text, res.ns, tuple(winners), f"{res.tier}, public", res.packet, rest)

    def central(self, res: Resolution) -> list[tuple[Match, int]]:
        """The matches of `res` with their callers, most central first: public
        (Note [Public definitions]), then most callers (call sites' callers,
        launching hosts, stub callers), then by id."""
        ids = [list(res.ids)]
        callers: dict[str, int] = defaultdict(int)
        for table, callee, caller in (("calls", "callee", "caller"), ("launches", "kernel", "host"),
                                      ("stub_call", "stub", "fn")):
            for i, n in self._q(f"SELECT {callee}, count(DISTINCT {caller}) FROM {table} "
                                f"WHERE list_contains(?, {callee}) GROUP BY 1", ids, table):
                callers[i] += n
        # the overloads of one name are one definition, named without its
        # parameter list, at its first overload (Note [Overload ids])
        named: dict[str, Match] = {}
        for m in sorted(res.matches, key=lambda m: (m.file, m.line)):
            plain = split_sig(m.id)[0]
            if plain != m.id:
                callers[plain] += callers[m.id]
            named.setdefault(plain, Match(m.kind, plain, m.file, m.line))
        first = list(named.values())
        first.sort(key=lambda m: (private_rank(m), -callers[m.id], m.id))
        return [(m, callers[m.id]) for m in first]

    def expand(self, text: str) -> str:
        """`text` with a leading module alias written out, as PyTorch's code
        means it (Note [Module aliases]): "F.gelu" → "torch.nn.functional.gelu"."""
        head, dot, rest = text.partition(".")
        if not dot or head == "torch" or not head.isidentifier():
            return text
        rows = self._q("SELECT module FROM py_alias WHERE alias = ? ORDER BY files DESC, module LIMIT 1",
                       [head], "py_alias")
        return f"{rows[0][0]}.{rest}" if rows else text

    # ------------------------------------------------------------- tiers
    def _fn_tiers(self, t: str):
        cands = _once(lambda: self._fn_candidates(t))
        if "::" in t:  # a qualified name is first taken as the full id
            yield "exact", False, lambda: [m for m in cands() if m[1] == t]
        # a dispatch-table kernel name: the function torchgen binds it to
        kernel = _kernel_name(t)
        if kernel:
            yield "dispatch", False, lambda: self._kernel_defs([kernel])
        # an unqualified name says nothing of the namespace: `gemm` is the
        # global gemm and every X::gemm alike; nor does a name without the
        # file of an internal-linkage part (`(anonymous)::host_softmax`)
        yield "name", False, lambda: [m for m in cands() if any(
            f == t or f.endswith("::" + t) for f in _typed_forms(m[1]))]
        # an op's spelling (at::gelu, aten::gelu.out): the kernels of its ops
        if t.startswith(("aten::", "at::", "torch::", "torch.ops.")) or ("." in t and "::" not in t):
            yield "op kernels", False, lambda: self._kernel_defs(self._op_kernels(t))

    def _fn_candidates(self, t: str) -> list[tuple]:
        """Every function, kernel and stub whose last name component is t's (one scan)."""
        last = split_sig(t)[0].rsplit("::", 1)[-1]
        kernels = {r[0] for r in self._q("SELECT kernel FROM kernel WHERE name = ?", [last], "kernel")}
        rows = self._q(
            "SELECT fn, arg_min(file, (file, line)), arg_min(line, (file, line)) FROM func "
            "WHERE name = ? GROUP BY fn ORDER BY fn", [last], "func")
        out = [("kernel" if fn in kernels else "function", fn, f, ln) for fn, f, ln in rows]
        out += self._q(
            "SELECT 'stub', stub, arg_min(file, (file, line)), arg_min(line, (file, line)) FROM stub_decl "
            "WHERE stub = ? OR suffix(stub, ?) GROUP BY stub ORDER BY stub", [last, "::" + last], "stub_decl")
        return out

    def _kernel_defs(self, kernels: list[str]) -> list[tuple]:
        """The definitions of dispatch-table kernels: `at::native::<k>`, or a
        structured kernel's `TORCH_IMPL_FUNC(<k>)` function."""
        if not kernels or not self._q("SELECT 1 FROM dispatch WHERE list_contains(?, kernel) LIMIT 1",
                                      [kernels], "dispatch"):
            return []
        fns = [_NATIVE + k for k in kernels]
        fns += [r[0] for r in self._q("SELECT fn FROM impl_func WHERE kind = 'impl' AND list_contains(?, name)",
                                      [kernels], "impl_func")]
        rows = self._q(
            "SELECT 'function', fn, arg_min(file, (file, line)), arg_min(line, (file, line)) FROM func "
            "WHERE list_contains(?, fn) GROUP BY fn ORDER BY fn", [fns], "func")
        # the overloads of an at::native name (Note [Overload ids])
        return rows + self._q(
            "SELECT 'function', f.fn, arg_min(f.file, (f.file, f.line)), arg_min(f.line, (f.file, f.line)) "
            "FROM overload o JOIN func f ON f.fn = o.fn WHERE list_contains(?, o.base) GROUP BY f.fn ORDER BY f.fn",
            [fns], "overload", "func")

    def _op_kernels(self, t: str) -> list[str]:
        """The dispatch-table kernel names of the ops `t` spells (not as a bare
        name), and of their structured delegates (at::gelu runs gelu.out's)."""
        ops = [m[1] for tier, _, fetch in self._op_tiers(t) if tier in ("exact", "default", "name", "cpp api")
               for m in fetch()]
        if not ops:
            return []
        ops += [r[0] for r in self._q("SELECT out_op FROM structured_delegate WHERE list_contains(?, op)",
                                      [ops], "structured_delegate")]
        return [r[0] for r in self._q("SELECT DISTINCT kernel FROM dispatch WHERE list_contains(?, op) "
                                      "ORDER BY 1", [ops], "dispatch")]

    def _op_tiers(self, t: str):
        py = self.expand(t)
        o = _op_id(t, py)
        if o is not None:
            op = ("SELECT 'op', op, file, line FROM op WHERE op = ?", "op")
            exact = ("exact", False, lambda: self._q(op[0], [o], op[1]))
            name = ("name", True, lambda: self._q(
                "SELECT 'op', op, file, line FROM op WHERE name = ? ORDER BY op", [o], "op"))
            if o.endswith(".default"):  # the default overload: the id without one
                yield "default", False, lambda: self._q(op[0] + " AND overload = ''", [o[:-8]], op[1])
            else:  # a bare name ("matmul") means every overload; "add.Tensor" means one
                yield from ((name, exact) if "." not in o else (exact, name))
        yield "python", True, lambda: self._q(
            "SELECT DISTINCT 'op', o.op, o.file, o.line FROM py_api a JOIN op o ON o.op = a.op "
            "WHERE a.api = ? ORDER BY 2", [py], "py_api", "op")
        kernel = _kernel_name(t)
        if kernel:
            yield "kernel", True, lambda: self._q(
                "SELECT DISTINCT 'op', o.op, o.file, o.line FROM dispatch d JOIN op o ON o.op = d.op "
                "WHERE d.kernel = ? ORDER BY 2", [kernel], "dispatch", "op")
        if "::" in t:
            yield "impl_func", True, lambda: self._impl_func_ops(t)
            yield "cpp api", True, lambda: self._cpp_api_ops(t)
        elif "." not in t:  # a bare name of no op: the documented Python API of that name
            apis = self.public_apis(t)  # the generator gets here only when the tiers above found nothing
            api = apis[0] if len(apis) == 1 else None
            yield f"python {api or 'name'}", True, lambda: self._q(
                "SELECT DISTINCT 'op', o.op, o.file, o.line FROM py_api a JOIN op o ON o.op = a.op "
                "WHERE a.api = ? ORDER BY 2", [api], "py_api", "op") if api else []

    def public_apis(self, name: str) -> list[str]:
        """The Python APIs named `name` in a documented namespace
        (PUBLIC_API_MODULES: `interpolate` is torch.nn.functional.interpolate,
        not torch.ao.nn.quantized.functional.interpolate); a bare name of no
        op means the one such API, if there is one."""
        return [a for (a,) in self._q("SELECT DISTINCT api FROM py_api WHERE suffix(api, ?) ORDER BY 1",
                                      ["." + name], "py_api") if a.rsplit(".", 1)[0] in PUBLIC_API_MODULES]

    def _impl_func_ops(self, t: str) -> list[tuple]:
        """The ops of a structured kernel's function (TORCH_IMPL_FUNC: the ops
        whose table names the kernel; TORCH_META_FUNC: the ops of that name)."""
        rows = self._q("SELECT name, kind FROM impl_func WHERE fn = ? OR fn = ? || '::impl'", [t, t], "impl_func")
        kernels = [n for n, kind in rows if kind == "impl"]
        names = [n for n, kind in rows if kind != "impl"]
        return self._q(
            "SELECT DISTINCT 'op', o.op, o.file, o.line FROM op o LEFT JOIN dispatch d ON d.op = o.op "
            "WHERE list_contains(?, d.kernel) OR list_contains(?, o.op) OR list_contains(?, o.name) ORDER BY 2",
            [kernels, names, names], "op", "dispatch") if rows else []

    def _cpp_api_ops(self, t: str) -> list[tuple]:
        """The ops a generated C++ API name denotes (Note [Op spellings])."""
        m = _OPS_STRUCT.fullmatch(t)
        if m:
            return self._q("SELECT 'op', op, file, line FROM op WHERE replace(op, '.', '_') = ? ORDER BY op",
                           [m["name"]], "op")
        # at::native::gelu_out: not a kernel (above), so the C++ API's at::gelu_out
        m = _CPP_API.fullmatch("at::" + t[len(_NATIVE):] if t.startswith(_NATIVE) else t)
        if m is None or (m["ns"] and not self._q("SELECT 1 FROM dispatch WHERE lower(key) = ? LIMIT 1",
                                                  [m["ns"]], "dispatch")):
            return []
        for base, out in _cpp_name_probes(m["name"]):
            rows = self._q(f"SELECT 'op', op, file, line FROM op WHERE name = ? AND {_OUT_FN} = ? ORDER BY op",
                           [base, out], "op")
            if rows:
                return rows
        return []

    def _py_tiers(self, t: str):
        py = self.expand(t)
        yield "exact", False, lambda: (
            self._q("SELECT 'python', py, file, line FROM py_def WHERE py = ?", [py], "py_def")
            or self._q("SELECT DISTINCT 'python', api, arg_min(file, (file, line)), arg_min(line, (file, line)) FROM py_api WHERE api = ? "
                       "GROUP BY ALL", [py], "py_api")
        )
        yield "suffix", False, lambda: self._q(
            "SELECT 'python', py, file, line FROM py_def WHERE suffix(py, ?) ORDER BY py",
            ["." + t], "py_def")

    def _node_tiers(self, t: str):
        both = [*self._fn_tiers(t), *self._py_tiers(t)]
        for tier in ("exact", "dispatch", "name", "suffix", "op kernels"):
            fetches = [f for name, _, f in both if name == tier]
            if fetches:
                yield tier, False, lambda fs=fetches: [r for f in fs for r in f()]

    def _subject_tiers(self, t: str):
        """An op (or the ops a Python API reaches) first, else a C++ function."""
        yield from self._op_tiers(t)
        yield from self._fn_tiers(t)

    def _test_tiers(self, t: str):
        yield "exact", False, lambda: self._q(
            "SELECT 'test', test, file, line FROM test WHERE test = ?", [t], "test")
        yield "suffix", False, lambda: self._q(
            "SELECT 'test', test, file, line FROM test WHERE suffix(test, ?) ORDER BY test",
            ["::" + t], "test")

    def _key_tiers(self, t: str):
        yield "exact", False, lambda: self._q(
            "SELECT DISTINCT 'key', key, '', 0 FROM dispatch WHERE lower(key) = lower(?)", [t], "dispatch")
        # every key of c10::DispatchKey (PrivateUse1, AutogradMTIA, ...), at its line of DispatchKey.h
        yield "c10", False, lambda: self._q(
            "SELECT 'key', key, file, line FROM dispatch_key_def WHERE lower(key) = lower(?)", [t],
            "dispatch_key_def")
        # a key a TORCH_LIBRARY_IMPL block names (an extension's "Autocast"), at its first block
        yield "registered", False, lambda: self._q(
            "SELECT 'key', key, arg_min(file, (file, line)), min(line) FILTER (WHERE file = "
            "(SELECT min(file) FROM lib_impl WHERE lower(key) = lower(?))) FROM lib_impl "
            "WHERE lower(key) = lower(?) GROUP BY key", [t, t], "lib_impl")

    def _kernel_tiers(self, t: str):
        last = t.rsplit("::", 1)[-1]
        yield "exact", False, lambda: self._q(
            "SELECT 'kernel', kernel, file, line FROM kernel WHERE kernel = ?", [t], "kernel")
        yield "suffix", False, lambda: self._q(
            "SELECT 'kernel', kernel, arg_min(file, (file, line)), arg_min(line, (file, line)) FROM kernel WHERE name = ? AND suffix(kernel, ?) "
            "GROUP BY ALL ORDER BY 2", [last, "::" + t], "kernel")

    def _module_tiers(self, t: str):
        full = self.expand(t)
        last = full.rsplit(".", 1)[-1]
        package = full.rsplit(".", 1)[0] + "." if "." in full else ""
        yield "exact", False, lambda: self._q(
            "SELECT 'module', cls, file, line FROM module_class WHERE cls = ?", [full], "module_class")
        # under the package written; the public class wins (Note [Public definitions])
        yield "name", False, lambda: self._q(
            "SELECT 'module', cls, file, line FROM module_class "
            "WHERE (cls = ? OR suffix(cls, ?)) AND prefix(cls, ?) ORDER BY cls",
            [last, "." + last, package], "module_class")

    # ------------------------------------------------------------- misses
    def _not_found(self, text: str, ns: str) -> QueryError:
        near = self.nearest(text, ns)
        hint = ("did you mean " + ", ".join(repr(n) for n in near) + "?") if near else None
        missing = self.missing_tables(ns)
        if missing and not near:
            hint = (f"the fact DB has no {' or '.join(missing)} rows: index the layer that "
                    f"writes them (torchtalk index --source PATH)")
        apis = self.public_apis(text) if ns == "op" and "." not in text and "::" not in text else []
        if len(apis) > 1:
            hint = f"it names the Python APIs {', '.join(apis)}: give one of them"
        module = self._module_named(text) if ns in ("op", "fn", "subject", "node") else None
        if module:  # trace(nn.GELU): a module is asked about with trace_module
            hint = f"{text!r} is the nn module or optimizer {module}: ask trace_module({text})"
        return QueryError(f"no {_singular(ns)} named {text!r}", hint=hint)

    def _module_named(self, text: str) -> str | None:
        """The module class `text` names, if it names exactly one (after Note [Public definitions])."""
        for tier, _, fetch in self._module_tiers(text):
            rows = fetch()
            if rows:
                res = self._prefer(Resolution(text, "module_class", tuple(Match(*r) for r in rows), tier))
                return None if res.ambiguous else res.ids[0]
        return None

    def missing_tables(self, ns: str) -> list[str]:
        """The tables namespace `ns` needs that are absent or empty (layer not indexed)."""
        need = {"fn": ["func"], "op": ["op"], "py": ["py_def"], "node": ["func", "py_def"],
                "subject": ["op", "func"],
                "test": ["test"], "key": ["dispatch"], "kernel": ["kernel"],
                "module_class": ["module_class"]}.get(ns, [])
        return [t for t in need if not self._q(f"SELECT 1 FROM {t} LIMIT 1", [], t)]

    def nearest(self, text: str, ns: str, n: int = 3) -> list[str]:
        """The closest known ids (Jaro-Winkler similarity of the names, in DuckDB)."""
        last = text.rsplit("::", 1)[-1].removeprefix("aten::")
        sources = {
            "fn": [("func", "fn", "name")],
            "kernel": [("kernel", "kernel", "name")],
            "op": [("op", "op", "op"), ("py_api", "api", "api")],
            "py": [("py_def", "py", "py"), ("py_api", "api", "api")],
            "node": [("func", "fn", "name"), ("py_api", "api", "api")],
            "subject": [("op", "op", "op"), ("func", "fn", "name")],
            "test": [("test", "test", "test")],
            "key": [("dispatch", "key", "key"), ("dispatch_key_def", "key", "key"), ("lib_impl", "key", "key")],
            "module_class": [("module_class", "cls", "regexp_extract(cls, '[^.]+$')")],
        }.get(ns, [])
        scored: list[tuple[float, str]] = []
        for table, idcol, namecol in sources:
            probe = last if namecol == "name" else text.removeprefix("aten::")
            if ns == "module_class":  # the class's name against the last component of what was typed
                probe = text.rsplit(".", 1)[-1]
            scored += self._q(
                f"SELECT jaro_winkler_similarity({namecol}, ?) AS s, {idcol} FROM "
                f"(SELECT DISTINCT {namecol}, {idcol} FROM {table}) ORDER BY s DESC, {idcol} LIMIT ?",
                [probe, n * 8], table,
            )
        scored = [(s, i) for s, i in scored if s is not None and s >= 0.8]
        scored.sort(key=lambda x: (-x[0], x[1]))
        return list(dict.fromkeys(split_sig(i)[0] for _, i in scored))[:n]  # an overloaded name once


_INTERNAL_PART = re.compile(r"\((anonymous|static):[^()]*\)")


def _typed_forms(fn: str) -> tuple[str, ...]:
    """`fn` and the ways people type it without the files of its internal-linkage
    parts (Note [Internal linkage ids] in extractors/cpp/names.py) or without
    its overload's parameter list (Note [Overload ids]): a name names all its
    overloads.

    Example:
        >>> _typed_forms("at::(anonymous:a.cpp)::f")
        ('at::(anonymous:a.cpp)::f', 'at::(anonymous)::f', 'at::f')
        >>> _typed_forms("at::native::where(const Tensor&)")
        ('at::native::where(const Tensor&)', 'at::native::where')
    """
    plain, sig = split_sig(fn)
    if sig:
        return (fn, *_typed_forms(plain))
    if "(" not in fn or not _INTERNAL_PART.search(fn):
        return (fn,)
    generic = _INTERNAL_PART.sub(lambda m: "(anonymous)" if m.group(1) == "anonymous" else "", fn).replace("::::", "::")
    bare = "::".join(p for p in generic.split("::") if p and p != "(anonymous)")
    return fn, generic.removeprefix("::"), bare


def _op_id(t: str, py: str) -> str | None:
    """The op id or name `t` spells, if it spells one: "aten::add.Tensor",
    "torch.ops.aten.add.Tensor" (`py`: `t` with its module alias written out),
    or `t` itself when it is no C++ name; an op of another namespace keeps
    it ("torchvision::nms", Note [Library ops] in extractors/cpp/library.py)."""
    if t.startswith("aten::"):
        return t[len("aten::"):]
    if py.startswith("torch.ops.aten."):
        return py[len("torch.ops.aten."):]
    if re.fullmatch(r"\w+::[\w.]+", t):
        return t
    return None if "::" in t else t


def _kernel_name(t: str) -> str | None:
    """The dispatch-table kernel name `t` may be: bare, or under at::native."""
    k = t[len(_NATIVE):] if t.startswith(_NATIVE) else t
    return k if k.isidentifier() else None


def _cpp_name_probes(name: str) -> list[tuple[str, bool]]:
    """(op name, is an out= overload) that torchgen's C++ API name `name` may
    come from, the literal name first (Note [Op spellings])."""
    probes = [(name, False)]
    for suffix in ("_outf", "_out"):
        if name.endswith(suffix):
            probes.append((name[: -len(suffix)], True))
    return probes + [(b[: -len("_symint")], out) for b, out in probes if b.endswith("_symint")]


def _overloads(matches: tuple[Match, ...]) -> bool:
    """Are `matches` the overloads of one C++ name (Note [Overload ids])? Then
    they are one packet, as an op's overloads are: `cpublas::gemm` is all nine."""
    return len(matches) > 1 and all(m.kind in ("function", "kernel") for m in matches) and len(
        {split_sig(m.id)[0] for m in matches}) == 1


def _once(fetch):
    """`fetch`, called at most once."""
    box: list = []

    def get():
        if not box:
            box.append(fetch())
        return box[0]

    return get


def _singular(ns: str) -> str:
    return {"fn": "C++ function", "op": "ATen op", "py": "Python name", "node": "function or Python name",
            "subject": "op or C++ function",
            "test": "test", "key": "dispatch key", "kernel": "CUDA kernel",
            "module_class": "nn module or optimizer"}.get(ns, "thing")

