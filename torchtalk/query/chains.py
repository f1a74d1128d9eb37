"""The chain behind each row of a walk answer (paths, impact, kernels, tests, op_callees, op_callers,
affected): the shortest chain of steps from the row's far end to what was
asked, each step with its kind and file:line.

Note [Chains] (rules/chains.dl) says what Datalog gives: relation `chain`,
the edges of the shortest chains the rows need, keyed by their walk, plus
the first steps each query adds. Here each shown row picks one chain from
those edges, the row's own step first (its file:line is the row's
evidence); where several equally short chains exist, the smallest step by
(file, line, name) at each node. Only the rows shown get a chain, so a long
answer costs no more than the edges.

Example:
    >>> r = query("paths(vectorized_layer_norm_kernel -> python)", con)
    >>> str(r.records()[0]["chain"])  # doctest: +SKIP
    'torch.native_layer_norm -variant-> native_layer_norm -CUDA native_functions.yaml:3290-> layer_norm_cuda ...'
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

# the named queries whose rows carry a chain, and the relation holding its edges
CHAIN_QUERIES = ("paths", "impact", "kernels", "tests", "affected", "op_callees", "op_callers")
CHAIN = "chain"
COLUMN = "chain"
# given when every row of the answer is shown, or every edge of its walk
# is wanted (rules/chains.dl; Notes [Chains for the page], [Every edge of a
# small answer] in torchtalk/query/run.py)
ALL_SHOWN = "chain_all_shown"


@dataclass(frozen=True)
class Step:
    """One step of a chain: `src` goes to `dst` by `kind` (a call, a launch,
    a stub's dispatch, an op's kernel for a dispatch key, an API's binding,
    a test's link), written at file:line; `res` how it was resolved."""

    src: str
    dst: str
    kind: str
    file: str
    line: int
    res: str = "typed"

    def as_json(self) -> dict:
        """The step as JSON (the keys MCP's structured output also uses)."""
        return {"src": self.src, "dst": self.dst, "kind": self.kind, "file": self.file,
                "line": self.line, "res": self.res}


class Chain(tuple):
    """The steps of one row's chain, in call order; `str()` is the compact
    one-column form: `a -kind file:line-> b -kind file:line-> c`."""

    def as_json(self) -> list[dict]:
        return [s.as_json() for s in self]

    def __str__(self) -> str:
        if not self:
            return ""
        parts = [short(self[0].src)]
        for s in self:
            where = f" {s.file.rsplit('/', 1)[-1]}:{s.line}" if s.file else ""
            guess = "?" if s.res == "guess" else ""
            parts.append(f"-{s.kind}{guess}{where}-> {short(s.dst)}")
        return " ".join(parts)


_PRIVATE = re.compile(r"\((?:anonymous|static)(?::[^)]*)?\)::")


def short(name: str) -> str:
    """A name as the compact chain shows it: without `at::native::` and the
    file of an internal-linkage part (the JSON form keeps the full id)."""
    name = _PRIVATE.sub("", name)
    return name[len("at::native::"):] if name.startswith("at::native::") else name


# ------------------------------------------------------------------ edges
class Edges:
    """The `chain` rows, by walk (seed, from) and node. Indexed as read and
    sorted best first only where a chain looks (Note [Chains]: an answer's
    edges may be many more than its shown rows' chains take)."""

    def __init__(self, rows) -> None:
        self.out: dict[tuple, dict[tuple, list]] = defaultdict(lambda: defaultdict(list))
        self.up: dict[tuple, tuple] = {}  # (seed, node, state) -> up_walk's steps
        for seed, frm, src, ss, dst, ds, left, how, res, file, line in rows:
            self.out[(seed, frm)][(src, ss)].append((file, line, dst, ds, how, res, src, ss, left))
        self._into: dict[tuple, dict[tuple, list]] = {}
        self._nodes: dict[tuple, dict[str, list]] = {}
        self._sorted: set[int] = set()

    def _best_first(self, es: list) -> list:
        if id(es) not in self._sorted:
            es.sort(key=_order)
            self._sorted.add(id(es))
        return es

    def walks(self):
        """The walks (seed, from) that have edges."""
        return self.out.keys()

    def from_node(self, walk: tuple, node: str, state: str | None = None) -> list:
        """Edges out of `node` (in `state`, or any) in `walk`, best first."""
        table = self.out.get(walk)
        if table is None:
            return []
        if state is not None:
            es = table.get((node, state))
            return self._best_first(es) if es else []
        nodes = self._nodes.get(walk)
        if nodes is None:  # by node, in any state: grouped once per walk, not a scan per row
            nodes = self._nodes[walk] = defaultdict(list)
            for key, es in table.items():
                nodes[key[0]].extend(es)
        es = nodes.get(node)
        return self._best_first(es) if es else []

    def into(self, walk: tuple, node: str, state: str) -> list:
        """Edges into `node` in `state` in `walk`, best first."""
        table = self._into.get(walk)
        if table is None:
            table = self._into[walk] = defaultdict(list)
            for es in self.out.get(walk, {}).values():
                for e in es:
                    table[(e[2], e[3])].append(e)
        es = table.get((node, state))
        return self._best_first(es) if es else []


def _order(e) -> tuple:
    """Steps in the order a chain prefers them: nearer the end, then by
    file, line and the names at both ends; every column takes part, so the
    choice never depends on the order the engine gave the rows in."""
    file, line, dst, ds, how, res, src, ss, left = e
    return (left, file, line, dst, src, how, ds, ss, res)


def _step(e) -> Step:
    file, line, dst, ds, how, res, src, ss, left = e
    return Step(src, dst, how, file, line, res)


def up_walk(edges: Edges, seed: str, node: str, state: str) -> list[Step]:
    """The chain from `node` (in walk state `state`) up to `seed` (the same
    for every row reaching that node: walked once per answer)."""
    key = (seed, node, state)
    steps = edges.up.get(key)
    if steps is None:
        steps = []
        while (es := edges.from_node((seed, ""), node, state)) and len(steps) < 64:
            e = es[0]
            steps.append(_step(e))
            node, state = e[2], e[3]
        steps = edges.up[key] = tuple(steps)
    return list(steps)


def down_walk(edges: Edges, walk: tuple, node: str, state: str) -> list[Step]:
    """The chain from the walk's seed down to `node` (in `state`)."""
    steps = []
    while (es := [e for e in edges.into(walk, node, state) if e[8] > 0]) and len(steps) < 64:
        e = es[0]
        steps.append(_step(e))
        node, state = e[6], e[7]
    return steps[::-1]


def first(es, file=None, line=None, dst=None, left=None):
    """The best edge of `es` with the given file, line, dst and left."""
    for e in es:
        if (file is None or e[0] == file) and (line is None or e[1] == line) and \
                (dst is None or e[2] == dst) and (left is None or e[8] == left):
            return e
    return None


def from_op_or_fn(edges: Edges, seed: str, node: str, left: int | None) -> list[Step]:
    """The chain from an op (through its kernel at walk distance `left`,
    else its nearest) or a reached function up to `seed`."""
    es = edges.from_node((seed, ""), node, "")
    kernels = [e for e in es if e[8] >= 0]
    if kernels:
        e = first(kernels, left=left) or kernels[0]
        return [_step(e), *up_walk(edges, seed, e[2], e[3])]
    walked = edges.from_node((seed, ""), node)
    if walked:
        return up_walk(edges, seed, node, walked[0][7])
    return []


def via(edges: Edges, walk: tuple, src: str, dst: str, file=None, line=None) -> list[Step]:
    """The step from `src` to `dst` in `walk` (at file:line when given), or
    the shortest run of steps outside the walks leading there."""
    es = edges.from_node(walk, src, "")
    e = first(es, file, line, dst) or first(es, dst=dst)
    if e is not None:
        return [_step(e)]
    for e in es:  # a class runs a method, which binds the op
        nxt = first(edges.from_node(walk, e[2], ""), dst=dst)
        if e[8] < 0 and nxt is not None:
            return [_step(e), _step(nxt)]
    return []


# ------------------------------------------------------------------ rows
def _paths(edges: Edges, row) -> list[Step]:
    src, dst, op, depth, file, line, _res, _api, _tests, _rank = row
    e = first(edges.from_node((src, ""), dst, ""), file, line, op)
    if e is not None:  # up: the API, its op (or bound function), the chain to `src`
        return [_step(e), *from_op_or_fn(edges, src, op, depth)]
    head = via(edges, (src, ""), src, op)
    for k in edges.from_node((src, ""), op, ""):  # down: the op's kernel, a launch of `dst`
        walk = (k[2], k[3])
        launches = [x for x in edges.into(walk, dst, "") if x[0] == file and x[1] == line]
        launch = first(launches, left=depth)
        if launch is not None:
            return [*head, _step(k), *down_walk(edges, walk, launch[6], launch[7]), _step(launch)]
    return head


def _impact(edges: Edges, row) -> list[Step]:
    fn, kind, name, to, depth, file, line, _res, _api, _tests, _rank = row
    es = edges.from_node((fn, ""), name, None if kind == "function" else "")
    e = first(es, file, line, to, depth - 1) or first(es, file, line, to)
    if e is None:
        return []
    if kind == "python":
        return [_step(e), *from_op_or_fn(edges, fn, to, depth - 2)]
    return [_step(e), *up_walk(edges, fn, to, e[3])]


def _kernels(edges: Edges, row) -> list[Step]:
    op, key, _on, kernel, host, entry, _res, _rank, _why, depth, file, line = row
    # the kernel for the row's key, or the composite kernel serving it
    return _down_to(edges, op, entry, lambda ks: next((e for e in ks if e[4] == key), ks[0] if ks else None),
                    host, kernel, file, line, depth)


def _op_callees(edges: Edges, row) -> list[Step]:
    op, key, steps, called, caller, _res, entry, _on, file, line = row
    return _down_to(edges, op, entry, lambda ks: next((e for e in ks if e[4] == key), None),
                    caller, called, file, line, steps)


def _down_to(edges: Edges, op, entry, pick, source, target, file, line, depth) -> list[Step]:
    """`op`'s kernel step (`pick` among its kernel edges from `entry`), the
    walk down to `source`, and `source`'s step into `target` at file:line,
    in the first walk from `entry` that has them all ([] when none has)."""
    for walk in sorted(w for w in edges.walks() if w[0] == entry):
        k = pick([e for e in edges.from_node(walk, op, "") if e[2] == entry])
        last = first([x for x in edges.into(walk, target, "") if x[6] == source], file, line, left=depth)
        if k is not None and last is not None:
            return [_step(k), *down_walk(edges, walk, source, last[7]), _step(last)]
    return []


def _op_callers(edges: Edges, row) -> list[Step]:
    op, _steps, by, key, caller, res, entry, on, file, line = row
    k = next((e for e in edges.from_node((caller, ""), by, "") if e[2] == entry and e[3] == on and e[4] == key), None)
    if k is None:
        return []
    return [_step(k), *up_walk(edges, caller, entry, on), Step(caller, op, "aten", file, line, res)]


def _tests(edges: Edges, row) -> list[Step]:
    subject, test, _rank, _why, op, how, to, depth, file, line = row
    steps = [Step(test, to, how, file, line)]
    if to != op:
        steps += via(edges, (subject, ""), to, op)
    if depth > 0:
        steps += from_op_or_fn(edges, subject, op, depth - 1)
    return steps


def _affected(edges: Edges, row) -> list[Step]:
    fn, kind, name, to, depth, _rank, _why, file, line = row
    if kind == "op":
        return from_op_or_fn(edges, fn, name, depth - 1)
    if kind == "test":
        head = [Step(name, to, "covers", file, line)]
    else:
        head = via(edges, (fn, ""), name, to, file, line)
    return [*head, *from_op_or_fn(edges, fn, to, depth - 2)]


# each walk query's builder, and the columns it reads the rows by
BUILDERS = {
    "paths": (_paths, ("src", "dst", "op", "depth", "file", "line", "res", "api", "tests", "rank")),
    "impact": (_impact, ("fn", "kind", "name", "via", "depth", "file", "line", "res", "api", "tests", "rank")),
    "kernels": (_kernels, ("op", "key", "on", "kernel", "host", "entry", "res", "rank", "why",
                           "depth", "file", "line")),
    "op_callees": (_op_callees, ("op", "key", "steps", "calls", "caller", "res", "entry", "on", "file", "line")),
    "op_callers": (_op_callers, ("op", "steps", "by", "key", "caller", "res", "entry", "on", "file", "line")),
    "tests": (_tests, ("subject", "test", "rank", "why", "op", "how", "via", "depth", "file", "line")),
    "affected": (_affected, ("fn", "kind", "name", "via", "depth", "rank", "why", "file", "line")),
}


def wants_chain(program, name: str) -> bool:
    """Query `name` shows a chain per row: a walk query whose relation has
    the columns its builder reads (a user's rules may redefine it), with the
    `chain` relation declared."""
    decl = program.decls.get(name)
    return (name in BUILDERS and CHAIN in program.decls and decl is not None
            and tuple(c.name for c in decl.columns) == BUILDERS[name][1])


def chains(name: str, rows, chain_rows) -> list[Chain]:
    """The chain of each of `rows` of query `name`, from the `chain` rows."""
    edges = Edges(chain_rows)
    build = BUILDERS[name][0]
    return [Chain(build(edges, r)) for r in rows]
