"""Evaluate first the relations that read only the given facts and the
fact tables, and give their rows back as facts (Note [Presolve] in
torchtalk/query/run.py): the rest of the program then prunes what an empty
one makes impossible.

Example:
    >>> program2, facts2 = presolve(program, facts, "impact", evaluate_some)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable

from torchtalk.datalog import ast as A
from torchtalk.datalog.analysis.strata import needed_relations
from torchtalk.datalog.transform.prune import prune


def presolve(program: A.Program, facts: dict[str, list[tuple]], output: str,
             evaluate: Callable[[list[str]], dict[str, list[tuple]]],
             memo: Callable[[tuple, Callable[[], A.Program]], A.Program] | None = None):
    """(program', facts'): the argument-level relations `output` needs,
    computed (by `evaluate(relations)`, unless each rule only copies given
    facts) and added to the facts, their rules dropped; the relations that
    came out empty pruned with everything that needs them. `(program, facts)`
    itself when there are none. `memo(shape, compute)` may keep program'
    per query shape (the same object each time: plans are cached by it)."""
    needed = needed_relations(program, [output])
    cands = [rel for rel in needed if rel != output and argument_level(program, rel, facts)]
    if not cands:
        return program, facts
    rows = {}  # Note [Copies first]
    for rel in cands:
        rows.update(copies(program, [rel], facts) or {})
    rest = [rel for rel in cands if rel not in rows]
    if rest:
        rows.update(evaluate(rest))
    full = {rel: rs for rel in cands if (rs := rows.get(rel, []))}
    shape = (frozenset(cands), frozenset(full), frozenset(facts))

    def compute() -> A.Program:
        return frozen(program, *shape)

    return (compute() if memo is None else memo(shape, compute)), {**facts, **full}


def frozen(program: A.Program, cands: frozenset[str], full: frozenset[str], given: frozenset[str]) -> A.Program:
    """`program` without the rules of `cands`, the non-empty ones (`full`)
    now given as facts, the empty ones pruned."""
    import dataclasses

    kept = dataclasses.replace(program, rules=tuple(r for r in program.rules if r.head.name not in cands))
    return prune(kept, frozenset(), frozenset(program.inputs) | given | full)


# Note [Copies first]: a candidate whose rules only copy given facts is
# computed here, whatever the others are; only the rest go to the engine
# (a statement each: `trace(matmul)` asked DuckDB for test_need, entry_need
# and down_limit, copies of its arguments, because trace_composite reads
# a fact table; a statement costs 0.3 ms at least, more on a loaded machine
# or when it reads a page of given rows).
def copies(program: A.Program, cands: list[str], facts: dict) -> dict[str, list[tuple]] | None:
    """The rows of `cands` when each of their rules copies given facts
    (`up_limit(d) :- impact_depth(d).`, `entry_need(o) :- trace_arg(o).`),
    computed here rather than by an engine call; None if some rule does more."""
    out: dict[str, list[tuple]] = {}
    for rel in cands:
        rows: set[tuple] = set()
        for rule in program.rules_for(rel):
            if len(rule.body) != 1 or not isinstance(rule.body[0], A.Atom) or rule.body[0].name not in facts:
                return None
            atom = rule.body[0]
            if not all(isinstance(t, (A.Var, A.Wildcard, A.Str, A.Num)) for t in atom.args) or not all(
                    isinstance(t, (A.Var, A.Str, A.Num)) for t in rule.head.args):
                return None
            for row in facts[atom.name]:
                env: dict[str, object] = {}
                if all(_match(t, v, env) for t, v in zip(atom.args, row, strict=True)):
                    rows.add(tuple(env[t.name] if isinstance(t, A.Var) else t.value for t in rule.head.args))
        out[rel] = sorted(rows, key=repr)
    return out


def _match(term, value, env: dict) -> bool:
    """Bind or check `term` (a variable, `_` or a constant) against `value`."""
    if isinstance(term, A.Var):
        return env.setdefault(term.name, value) == value
    return isinstance(term, A.Wildcard) or term.value == value


def argument_level(program: A.Program, rel: str, facts: dict) -> bool:
    """Every rule of derived `rel` reads only given facts and fact tables,
    and one reads a given fact."""
    rules = program.rules_for(rel)
    if not rules or rel in program.inputs:
        return False
    derived = {r.head.name for r in program.rules}
    reads_args = False
    for rule in rules:
        reads_args |= any(isinstance(lit, A.Atom) and lit.name in facts for lit in rule.body)
        for lit in rule.body:
            target = lit.target if isinstance(lit, A.Negation) else lit
            if isinstance(target, A.Atom):
                if target.name in derived and target.name not in facts:
                    return False
            elif isinstance(target, A.Comparison):
                if any(isinstance(t, A.Aggregate) for t in (target.left, target.right)):
                    return False
            elif not isinstance(target, A.Builtin):
                return False
    return reads_args
