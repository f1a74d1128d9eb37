"""Large inputs of a recursive rule cut down, once, to the rows it can join
(Note [Loop inputs cut first]).

Example:
    >>> p = parse_text('''
    ... .decl step(a: number, b: number)
    ... .input step
    ... .decl near(a: number, d: number)
    ... .input near
    ... .decl close(a: number, d: number)
    ... close(a, d) :- near(a, d), d < 3.
    ... .decl walk(a: number)
    ... walk(1).
    ... walk(b) :- walk(a), step(a, b), close(b, _).''')
    >>> print(cut_loop_inputs(p, frozenset({"step"})).rules[-1])
    walk(b) :- walk(a), step_cut0(a, b), close(b, _).
"""

from __future__ import annotations

import dataclasses

from torchtalk.datalog import ast as A
from torchtalk.datalog.analysis.strata import strata

# Note [Loop inputs cut first]: DuckDB runs a recursive CTE one iteration at
# a time, and joins each iteration's new rows with the whole of every other
# relation the recursive rule reads: a walk over the call graph that reads
# step_pair (163,577 rows) and step_dev (115,491) in each of 7 iterations
# scans or hashes those tables 7 times, to step through a few dozen nodes.
# When such a rule also reads a relation computed before the loop (not
# recursive with it) that shares a variable with the large input (chains.dl's
# up_dag_at: `step_pair(k, j, _)` beside `up_min(i, v, k, d)` and
# `up_min(i, w, j, e)`), only the input's rows whose values of those
# variables occur there can ever join. So the input is replaced in that rule
# by a relation of those rows, computed once before the loop:
#
#     step_pair_cut0(k, j, g) :- step_pair(k, j, g), up_min_keys0(k), up_min_keys0(j).
#     up_min_keys0(k) :- up_min(_, _, k, _).
#
# An exact rewrite (the rows removed join with nothing), made only for the
# DuckDB engine: the in-memory engine looks rows up by index from each new
# row, and Soufflé likewise, so neither scans a large input per iteration.
# For impact(cpublas::gemm)'s chain walk: 41 -> 28 ms. Only inputs of at
# least LOOP_INPUT_ROWS rows are cut (the engine counts them): a small one
# costs more as one more relation than it saves.
LOOP_INPUT_ROWS = 10_000


def loop_inputs(program: A.Program, relations: frozenset[str] | None = None) -> frozenset[str]:
    """The input relations some recursive rule of `program` (of `relations`,
    default all) reads beside a relation computed before its loop, sharing a
    variable with it: those `cut_loop_inputs` may cut (the engine counts only
    their rows)."""
    return frozenset(a.name for _rule, _i, a, _keys in _cuts(program, None, relations))


def cut_loop_inputs(program: A.Program, large: frozenset[str],
                    relations: frozenset[str] | None = None) -> A.Program:
    """`program` with each input of `large` that a recursive rule (of
    `relations`, default all) reads beside relations computed before its
    loop read there through a relation of only the rows that can join them
    (Note [Loop inputs cut first])."""
    cuts = list(_cuts(program, large, relations))
    if not cuts:
        return program
    decls = dict(program.decls)
    made: dict[tuple, str] = {}  # the text of a new relation's rule -> its name
    new_rules: list[A.Rule] = []

    def relation(kind: str, base: str, columns: tuple[A.Column, ...], head: tuple[A.Term, ...],
                 body: tuple[A.Literal, ...]) -> str:
        """The relation `head :- body` defines, one per distinct definition."""
        key = (kind, str(A.Rule(A.Atom("_", head), body)))
        if key not in made:
            n = 0
            while f"{base}_{kind}{n}" in decls:
                n += 1
            name = f"{base}_{kind}{n}"
            decls[name] = A.Decl(name, columns)
            new_rules.append(A.Rule(A.Atom(name, head), body))
            made[key] = name
        return made[key]

    replaced: dict[A.Rule, dict[int, A.Atom]] = {}
    for rule, i, atom, keys in cuts:
        decl = program.decls[atom.name]
        fresh = tuple(A.Var(f"x{j}") for j in range(decl.arity))
        filters = []
        for other, shared in keys:
            other_decl = program.decls[other.name]
            cols = tuple(A.Column(f"c{j}", other_decl.columns[p].type) for j, (_v, p) in enumerate(shared))
            canon = {v: A.Var(f"v{j}") for j, (v, _p) in enumerate(shared)}  # one relation per projection
            proj_args = tuple(canon[a.name] if isinstance(a, A.Var) and a.name in canon else
                              a if isinstance(a, (A.Str, A.Num)) else A.Wildcard() for a in other.args)
            name = relation("keys", other.name, cols, tuple(canon.values()), (A.Atom(other.name, proj_args),))
            first = {a.name: j for j, a in reversed(list(enumerate(atom.args))) if isinstance(a, A.Var)}
            filters.append(A.Atom(name, tuple(fresh[first[v]] for v, _p in shared)))
        columns = tuple(A.Column(c.name, c.type, type_name=c.type_name) for c in decl.columns)
        cut = relation("cut", atom.name, columns, fresh, (A.Atom(atom.name, fresh), *filters))
        replaced.setdefault(rule, {})[i] = A.Atom(cut, atom.args, atom.loc)
    rules = tuple(dataclasses.replace(r, body=tuple(replaced[r].get(i, lit) for i, lit in enumerate(r.body)))
                  if r in replaced else r for r in program.rules)
    return dataclasses.replace(program, decls=decls, rules=(*rules, *new_rules))


def _cuts(program: A.Program, large: frozenset[str] | None, relations: frozenset[str] | None):
    """(rule, body index, input atom, [(other atom, [(var, its column in other)])]):
    each input atom of a recursive rule of `relations` (of `large`, or any)
    that shares variables with positive atoms of relations computed before
    the loop."""
    inputs = program.inputs
    for st in strata(program, relations):
        if not st.recursive:
            continue
        members = set(st.relations)
        for rel in st.relations:
            for rule in program.rules_for(rel):
                body = rule.body
                if not any(isinstance(lit, A.Atom) and lit.name in members for lit in body):
                    continue
                for i, atom in enumerate(body):
                    if not (isinstance(atom, A.Atom) and atom.name in inputs and atom.name not in members
                            and (large is None or atom.name in large)):
                        continue
                    own = {a.name for a in atom.args if isinstance(a, A.Var)}
                    keys = []
                    for j, other in enumerate(body):
                        if j == i or not isinstance(other, A.Atom) or other.name in members or other.name in inputs:
                            continue
                        shared, seen = [], set()
                        for p, a in enumerate(other.args):
                            if isinstance(a, A.Var) and a.name in own and a.name not in seen:
                                seen.add(a.name)
                                shared.append((a.name, p))
                        if shared:
                            keys.append((other, shared))
                    if keys:
                        yield rule, i, atom, keys
