"""Names as people type them → the ids of the fact DB.

A namespace (the column name of a query's seed, Note [Named queries]) says
what kind of thing a name must denote:

  fn     C++/CUDA function, __global__ kernel or dispatch stub: a
         qualified name is first the exact id ("at::native::cpublas::gemm");
         then, for a dispatch-table kernel name ("matmul"), the at::native
         function torchgen binds it to; then every id equal to the name or
         ending in "::<name>" ("cpublas::gemm"; "gemm" is ambiguous).
  op     ATen op: a name ("add": every overload, one packet) or an id
         ("add.Tensor"; an "aten::" prefix and ".default" are dropped); then a
         Python API ("torch.matmul": the ops it reaches); then a C++ kernel
         ("at::native::matmul": the ops whose dispatch table names it).
  py     Python definition or API: exact, then any id ending in ".<name>".
  node   fn or py, whichever matches.
  subject  op first (names, ids, Python APIs), else fn.
  test   test id, exact or ending in "::<name>".
  key    dispatch key, case-insensitively.
  module_class  nn module, optimizer or LR scheduler class: the exact id; then a
         name whose last component is the class's ("Linear", "torch.nn.Linear":
         the classes of that name under the package written, if any), the
         public ones (nn, optim, lr_scheduler) before the others (torch.ao...).

Tiers are tried in order and the first that matches wins. A name whose
winning tier has several ids is ambiguous (`Ambiguous`), unless the caller
asks for all of them; a name that matches nothing gets a QueryError with the
nearest names ("did you mean").

Example:
    >>> Resolver(con).resolve("cpublas::gemm", "fn").ids
    ('at::native::cpublas::gemm',)
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

from torchtalk.connmemo import remember
from torchtalk.errors import QueryError


@dataclass(frozen=True)
class Match:
    """One thing a name denotes, at its definition."""

    kind: str  # "function", "kernel", "stub", "op", "python", "test", "key"
    id: str
    file: str = ""
    line: int = 0

    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.file else ""


@dataclass(frozen=True)
class Resolution:
    """What `text` resolved to in namespace `ns`; `packet` = one thing (an op's overloads)."""

    text: str
    ns: str
    matches: tuple[Match, ...]
    tier: str
    packet: bool = False

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
    return {"fn": "functions", "op": "ops", "py": "Python names", "test": "tests"}.get(ns, "things")


def group_matches(matches) -> dict[str, list[Match]]:
    """Matches grouped by kind and, for C++ names, by namespace."""
    groups: dict[str, list[Match]] = defaultdict(list)
    for m in sorted(matches, key=lambda m: (m.kind, m.id)):
        scope = m.id.rsplit("::", 1)[0] if "::" in m.id else ""
        label = f"{m.kind} in {scope}" if m.kind in ("function", "kernel", "stub") and scope else m.kind
        groups[label].append(m)
    return dict(groups)


_RESOLVED_MAX = 4096  # names remembered per connection


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
        if self.memo is not None and (text, ns) in self.memo:
            return self.memo[(text, ns)]
        found = self._resolve(text, ns)
        return found if self.memo is None else remember(self.memo, (text, ns), found, _RESOLVED_MAX)

    def _resolve(self, text: str, ns: str) -> Resolution:
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
                return Resolution(text, ns, matches, tier, packet)
        raise self._not_found(text, ns)

    # ------------------------------------------------------------- tiers
    def _fn_tiers(self, t: str):
        cands = _once(lambda: self._fn_candidates(t))
        if "::" in t:  # a qualified name is first taken as the full id
            yield "exact", False, lambda: [m for m in cands() if m[1] == t]
        # a dispatch-table kernel name: the at::native function torchgen binds it to
        yield "dispatch", False, lambda: [
            m for m in cands() if m[1] == "at::native::" + t
        ] if self._q("SELECT 1 FROM dispatch WHERE kernel = ? LIMIT 1", [t], "dispatch") else []
        # an unqualified name says nothing of the namespace: `gemm` is the
        # global gemm and every X::gemm alike; nor does a name without the
        # file of an internal-linkage part (`(anonymous)::host_softmax`)
        yield "name", False, lambda: [m for m in cands() if any(
            f == t or f.endswith("::" + t) for f in _typed_forms(m[1]))]

    def _fn_candidates(self, t: str) -> list[tuple]:
        """Every function, kernel and stub whose last name component is t's (one scan)."""
        last = t.rsplit("::", 1)[-1]
        kernels = {r[0] for r in self._q("SELECT kernel FROM kernel WHERE name = ?", [last], "kernel")}
        rows = self._q(
            "SELECT fn, arg_min(file, (file, line)), arg_min(line, (file, line)) FROM func "
            "WHERE name = ? GROUP BY fn ORDER BY fn", [last], "func")
        out = [("kernel" if fn in kernels else "function", fn, f, ln) for fn, f, ln in rows]
        out += self._q(
            "SELECT 'stub', stub, arg_min(file, (file, line)), arg_min(line, (file, line)) FROM stub_decl "
            "WHERE stub = ? OR suffix(stub, ?) GROUP BY stub ORDER BY stub", [last, "::" + last], "stub_decl")
        return out

    def _op_tiers(self, t: str):
        o = t.removeprefix("aten::")
        o = o.removesuffix(".default")
        exact = ("exact", False, lambda: self._q(
            "SELECT 'op', op, file, line FROM op WHERE op = ?", [o], "op"))
        name = ("name", True, lambda: self._q(
            "SELECT 'op', op, file, line FROM op WHERE name = ? ORDER BY op", [o], "op"))
        # a bare name ("matmul") means every overload; "add.Tensor" means one
        yield from ((name, exact) if "." not in o else (exact, name))
        yield "python", True, lambda: self._q(
            "SELECT DISTINCT 'op', o.op, o.file, o.line FROM py_api a JOIN op o ON o.op = a.op "
            "WHERE a.api = ? ORDER BY 2", [t], "py_api", "op")
        kern = t.removeprefix("at::native::")
        yield "kernel", True, lambda: self._q(
            "SELECT DISTINCT 'op', o.op, o.file, o.line FROM dispatch d JOIN op o ON o.op = d.op "
            "WHERE d.kernel = ? AND prefix(?, 'at::native::') ORDER BY 2", [kern, t], "dispatch", "op")

    def _py_tiers(self, t: str):
        yield "exact", False, lambda: (
            self._q("SELECT 'python', py, file, line FROM py_def WHERE py = ?", [t], "py_def")
            or self._q("SELECT DISTINCT 'python', api, arg_min(file, (file, line)), arg_min(line, (file, line)) FROM py_api WHERE api = ? "
                       "GROUP BY ALL", [t], "py_api")
        )
        yield "suffix", False, lambda: self._q(
            "SELECT 'python', py, file, line FROM py_def WHERE suffix(py, ?) ORDER BY py",
            ["." + t], "py_def")

    def _node_tiers(self, t: str):
        both = [*self._fn_tiers(t), *self._py_tiers(t)]
        for tier in ("exact", "dispatch", "name", "suffix"):
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

    def _kernel_tiers(self, t: str):
        last = t.rsplit("::", 1)[-1]
        yield "exact", False, lambda: self._q(
            "SELECT 'kernel', kernel, file, line FROM kernel WHERE kernel = ?", [t], "kernel")
        yield "suffix", False, lambda: self._q(
            "SELECT 'kernel', kernel, arg_min(file, (file, line)), arg_min(line, (file, line)) FROM kernel WHERE name = ? AND suffix(kernel, ?) "
            "GROUP BY ALL ORDER BY 2", [last, "::" + t], "kernel")

    def _module_tiers(self, t: str):
        last = t.rsplit(".", 1)[-1]
        package = t.rsplit(".", 1)[0] + "." if "." in t else ""
        named = _once(lambda: self._q(
            "SELECT 'module', cls, file, line, category FROM module_class "
            "WHERE (cls = ? OR suffix(cls, ?)) AND prefix(cls, ?) ORDER BY cls",
            [last, "." + last, package], "module_class"))
        yield "exact", False, lambda: self._q(
            "SELECT 'module', cls, file, line FROM module_class WHERE cls = ?", [t], "module_class")
        yield "public", False, lambda: [r[:4] for r in named() if r[4] != "nn_other"]
        yield "name", False, lambda: [r[:4] for r in named()]

    # ------------------------------------------------------------- misses
    def _not_found(self, text: str, ns: str) -> QueryError:
        near = self.nearest(text, ns)
        hint = ("did you mean " + ", ".join(repr(n) for n in near) + "?") if near else None
        missing = self.missing_tables(ns)
        if missing and not near:
            hint = (f"the fact DB has no {' or '.join(missing)} rows: index the layer that "
                    f"writes them (torchtalk index --source PATH)")
        return QueryError(f"no {_singular(ns)} named {text!r}", hint=hint)

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
            "key": [("dispatch", "key", "key")],
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
                [probe, n], table,
            )
        scored = [(s, i) for s, i in scored if s is not None and s >= 0.8]
        scored.sort(key=lambda x: (-x[0], x[1]))
        return list(dict.fromkeys(i for _, i in scored))[:n]


_INTERNAL_PART = re.compile(r"\((anonymous|static):[^()]*\)")


def _typed_forms(fn: str) -> tuple[str, ...]:
    """`fn` and the ways people type it without the files of its internal-linkage
    parts (Note [Internal linkage ids] in extractors/cpp/names.py).

    Example:
        >>> _typed_forms("at::(anonymous:a.cpp)::f")
        ('at::(anonymous:a.cpp)::f', 'at::(anonymous)::f', 'at::f')
    """
    if "(" not in fn or not _INTERNAL_PART.search(fn):
        return (fn,)
    generic = _INTERNAL_PART.sub(lambda m: "(anonymous)" if m.group(1) == "anonymous" else "", fn).replace("::::", "::")
    bare = "::".join(p for p in generic.split("::") if p and p != "(anonymous)")
    return fn, generic.removeprefix("::"), bare


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

