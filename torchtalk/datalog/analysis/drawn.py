"""Which columns hold only values drawn from some typed columns of the facts.

A column of a derived relation is *drawn* from a set of fact columns when
every rule of the relation puts there a variable that a positive atom of
its body holds at a drawn column (of a fact relation: one of the given
types). Whatever the facts, every value at a drawn column is then a value
of one of those fact columns: a derivation is finite, so induction on its
depth shows it, and the largest set of columns that passes the rule check
(found by shrinking from every column) is drawn.

What it is for (Note [Names that come and go] in torchtalk/query/derived.py):
`node(name, id)` numbers the values of the fact columns typed `FnId` or
`StubName`. A rule that reads `node` only to number a name its body draws
from such a column sees a name that came (or went) only with a fact row
that came (or went) too.

Example:
    >>> p = parse_text(".type F <: symbol\\n.decl c(a: F, b: symbol)\\n.input c\\n"
    ...                ".decl s(a: symbol, b: symbol)\\ns(a, b) :- c(a, b).\\ns(b, a) :- c(a, b).")
    >>> drawn_columns(p, frozenset({"c"}), frozenset({"F"}))["s"]
    frozenset()
"""

from __future__ import annotations

from torchtalk.datalog import ast as A
from torchtalk.datalog.analysis.strata import needed_relations


def drawn_columns(program: A.Program, facts: frozenset[str], types: frozenset[str]) -> dict[str, frozenset[int]]:
    """Relation -> its columns drawn from the columns of `facts` (input
    relations) declared with a type in `types`; an input not in `facts` (a
    query's argument) has none."""
    return program.cached(("drawn", facts, types), lambda: _drawn(program, facts, types))


def _drawn(program: A.Program, facts: frozenset[str], types: frozenset[str]) -> dict[str, frozenset[int]]:
    inputs = set(program.inputs)
    drawn: dict[str, set[int]] = {}
    for name, decl in program.decls.items():
        if name in inputs:
            drawn[name] = {i for i, c in enumerate(decl.columns) if c.type_name in types} if name in facts else set()
        else:
            drawn[name] = set(range(decl.arity))  # shrunk below to what the rules show
    derived = [name for name in program.decls if name not in inputs]
    shrunk = True
    while shrunk:
        shrunk = False
        for rel in derived:
            keep = {i for i in drawn[rel] if all(_drawn_at(rule, i, drawn) for rule in program.rules_for(rel))}
            if keep != drawn[rel]:
                drawn[rel] = keep
                shrunk = True
    return {name: frozenset(cols) for name, cols in drawn.items()}


def _drawn_at(rule: A.Rule, col: int, drawn: dict[str, set[int]]) -> bool:
    """`rule`'s head holds at `col` a variable a positive body atom holds at a drawn column."""
    term = rule.head.args[col]
    return isinstance(term, A.Var) and _held_drawn(rule, term.name, drawn)


def _held_drawn(rule: A.Rule, var: str, drawn: dict[str, set[int]], but: A.Atom | None = None) -> bool:
    return any(isinstance(lit, A.Atom) and lit is not but and any(
        isinstance(t, A.Var) and t.name == var and i in drawn[lit.name] for i, t in enumerate(lit.args))
        for lit in rule.body)


def numbers_drawn_names(program: A.Program, rel: str, keyed: str, key: int, facts: frozenset[str],
                        types: frozenset[str]) -> bool:
    """Whether every rule under `rel` (its closure) that reads `keyed` reads
    it as a positive atom whose column `key` is a variable another positive
    atom of the rule holds at a drawn column (`drawn_columns`): rows of
    `keyed` whose key no fact column of those types holds join nothing
    there."""
    return program.cached(("numbers_drawn_names", rel, keyed, key, facts, types),
                          lambda: _numbers_drawn_names(program, rel, keyed, key, facts, types))


def _numbers_drawn_names(program: A.Program, rel: str, keyed: str, key: int, facts: frozenset[str],
                         types: frozenset[str]) -> bool:
    drawn = drawn_columns(program, facts, types)
    for name in sorted(needed_relations(program, [rel])):
        for rule in program.rules_for(name):
            for lit in rule.body:
                for atom, _strict in A.literal_atoms(lit):
                    if atom.name != keyed:
                        continue
                    term = atom.args[key]
                    if atom is not lit or not isinstance(term, A.Var) or not _held_drawn(
                            rule, term.name, drawn, but=atom):
                        return False
    return True
