"""Dependency graph, strongly connected components, strata.

A relation depends on every relation its rules read. A dependency is
*strict* when read under negation or inside an aggregate: the relation read
must be complete first, so a strict edge inside a cycle is unstratifiable.

Example:
    >>> prog = parse_text('.decl e(a: number)\\n.decl p(a: number)\\np(x) :- e(x).')
    >>> [s.relations for s in strata(prog)]
    [('e',), ('p',)]
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from torchtalk.datalog import ast as A
from torchtalk.errors import SemanticError, SrcLoc


@dataclass(frozen=True)
class Edge:
    """`head` reads `body` (strictly: under negation / in an aggregate) at `loc`."""

    head: str
    body: str
    strict: bool
    loc: SrcLoc


@dataclass(frozen=True)
class Stratum:
    """Relations evaluated together; `recursive` when they depend on themselves.

    `linear` (single recursive relation whose every rule reads it at most
    once) can run as one `WITH RECURSIVE`; otherwise a semi-naive loop.
    """

    relations: tuple[str, ...]
    recursive: bool
    linear: bool


def dependency_edges(program: A.Program) -> list[Edge]:
    """Every (head relation, body relation) edge, with its strictness and
    where it is read (once per program)."""
    return program.cached("dependency_edges", lambda: _edges(program))


def _edges(program: A.Program) -> list[Edge]:
    edges = []
    for rule in program.rules:
        for lit in rule.body:
            for atom, strict in A.literal_atoms(lit):
                edges.append(Edge(rule.head.name, atom.name, strict, atom.loc))
    return edges


# Note [Rule reads]: a query runs several programs made from the library
# (pruned, with stored relations as inputs, presolved, ...; and the chains'
# run's), and each needs its dependency map and strata. Built from every
# atom of every rule, as Edge objects, they took 27 ms of a `torchtalk
# query` process under cProfile (4-5 ms a program), and keyed by the
# program's structural hash, hashing it took about half as much again; by
# turns, without the profiler, impact(cpublas::gemm) as a process went from
# 357 to 347 ms once they were kept. The relations each rule reads are
# now kept with the rule (`Rule.reads`), which those programs share, and the
# maps with the program (`Program.cached`); the Edges, with where each atom
# is read, are made only for an error's message and for derived.py.


def _name_edges(program: A.Program) -> list[tuple[str, str, bool]]:
    """(head, body, strict) of every relation a rule reads, once per program (Note [Rule reads])."""
    return program.cached("name_edges", lambda: [(rule.head.name, body, strict)
                                                 for rule in program.rules for body, strict in rule.reads])


def needed_relations(program: A.Program, outputs: Iterable[str]) -> set[str]:
    """The relations `outputs` depend on, transitively (outputs included)."""
    deps = program.cached("dependency_map", lambda: _dependency_map(program))
    seen: set[str] = set()
    todo = list(outputs)
    while todo:
        rel = todo.pop()
        if rel not in seen:
            seen.add(rel)
            todo.extend(deps.get(rel, ()))
    return seen


def _dependency_map(program: A.Program) -> dict[str, set[str]]:
    """Head relation -> the relations its rules read."""
    deps: dict[str, set[str]] = {}
    for head, body, _strict in _name_edges(program):
        deps.setdefault(head, set()).add(body)
    return deps


def strata(program: A.Program, relations: Iterable[str] | None = None) -> list[Stratum]:
    """Strata of `relations` (default: all declared) in evaluation order.

    Raises SemanticError at the offending literal when a negation or an
    aggregate sits on a cycle.
    """
    wanted = set(program.decls) if relations is None else set(relations)
    edges = [e for e in _name_edges(program) if e[0] in wanted and e[1] in wanted]
    succ: dict[str, list[str]] = {r: [] for r in wanted}
    for head, body, _strict in edges:
        succ[head].append(body)
    order = [r for r in program.decls if r in wanted] + sorted(wanted - set(program.decls))
    comps = strongly_connected(order, succ)
    comp_of = {r: i for i, comp in enumerate(comps) for r in comp}
    for head, body, strict in edges:
        if strict and comp_of[head] == comp_of[body]:
            located = [e for e in dependency_edges(program) if e.head in wanted and e.body in wanted]
            first = next(e for e in located if e.strict and (e.head, e.body) == (head, body))
            raise _unstratifiable(first, comps[comp_of[head]], located)
    self_loops = {head for head, body, _strict in edges if head == body}
    return [_stratum(program, comp, self_loops) for comp in comps]


def recursive_relations(program: A.Program) -> frozenset[str]:
    """The relations of `program`'s recursive strata (kept with the program)."""
    return program.cached("recursive", lambda: frozenset(r for s in strata(program) if s.recursive
                                                         for r in s.relations))


def _stratum(program: A.Program, comp: tuple[str, ...], self_loops: set[str]) -> Stratum:
    recursive = len(comp) > 1 or comp[0] in self_loops
    linear = False
    if recursive and len(comp) == 1:
        linear = all(
            sum(1 for lit in r.body if isinstance(lit, A.Atom) and lit.name == comp[0]) <= 1
            for r in program.rules_for(comp[0])
        )
    return Stratum(comp, recursive, linear)


def strongly_connected(order: list[str], succ: dict[str, list[str]]) -> list[tuple[str, ...]]:
    """SCCs, dependencies first (Tarjan emits them in reverse topological order)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[tuple[str, ...]] = []
    rank = {r: i for i, r in enumerate(order)}

    def visit(root: str) -> None:  # iterative, so deep chains do not overflow
        work = [(root, iter(succ[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(succ[nxt])))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                out.append(tuple(sorted(comp, key=rank.__getitem__)))

    for r in order:
        if r not in index:
            visit(r)
    return out


def _unstratifiable(edge: Edge, comp: tuple[str, ...], edges: list[Edge]) -> SemanticError:
    cycle = _cycle(edge.body, edge.head, set(comp), edges)
    path = " -> ".join([edge.head, *cycle])
    return SemanticError(
        f"'{edge.head}' reads '{edge.body}' under negation or aggregation, but '{edge.body}' "
        f"depends on '{edge.head}' (cycle {path}): not stratifiable",
        edge.loc,
    )


def _cycle(start: str, goal: str, members: set[str], edges: list[Edge]) -> list[str]:
    """Shortest path start -> ... -> goal inside `members` (BFS)."""
    succ: dict[str, list[str]] = {}
    for e in edges:
        if e.head in members and e.body in members:
            succ.setdefault(e.head, []).append(e.body)
    prev: dict[str, str | None] = {start: None}
    queue = [start]
    while queue:
        node = queue.pop(0)
        if node == goal:
            break
        for n in succ.get(node, []):
            if n not in prev:
                prev[n] = node
                queue.append(n)
    path, node = [], goal
    while node is not None:
        path.append(node)
        node = prev.get(node)
    return list(reversed(path))
