"""Whether a relation's rows change only where a column has certain values.

Note [Rows changed by file]: an update in place changes the rows of a few
files (torchtalk/update.py). A derived relation whose every rule carries a
changed relation's `file` into its own `file` column, through the atoms
that read what changed, keeps its rows of every other file: a row with
file F is made from rows of file F of what changed, and from rows of what
did not change. `partition_sources` checks that, rule by rule, through the
derived relations in between, and says which (relation, column) pairs the
values come from; the caller deletes the rows of the files those pairs'
changed rows name and computes them again (transform/restrict.py), instead
of the whole relation. A rule that reads a changed relation without the
head's variable at some column, or through a recursive relation, makes it
None: the whole relation is computed again. One that reads it under a
negation or an aggregate with the head's variable there is by that column
too: whether
`!fn_device(b, _)` holds, or what `count : { p(o, _) }` counts, for a
row of value b (or o) is a question of the rows of that value alone
(Note [Rows changed at other columns] in torchtalk/query/derived.py).

The same holds for any column, and the update tries `file` and `op`
(PART_COLUMNS in torchtalk/query/derived.py), and takes the one with the
fewer values: a Python module's edit changes py_api rows, which have no
test file, so the stored test links of every op (Note [Tests of every op
stored] in rules/ranking.dl) are computed again at the ops of the changed
rows (2 ops, where their test files are 68). Only rows whose projection on
the columns the relation reads went or came count (derived.py `moved_values`): a
line added to torch/nn/functional.py moves 277 ops' API rows down, which
the test links do not read, and changes what 2 ops are reached through.

Example:
    >>> p = parse_text(".decl c(a: symbol, f: symbol)\\n.input c\\n.decl k(a: symbol)\\n.input k\\n"
    ...                ".decl s(a: symbol, f: symbol)\\ns(a, f) :- c(a, f), k(a).")
    >>> partition_sources(p, "s", 1, lambda rel, cols: rel == "c")
    frozenset({('c', 1)})
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from torchtalk.datalog import ast as A
from torchtalk.datalog.analysis.grounding import occurrences

# moved(input relation, columns): whether its rows, seen through those columns, changed
Moved = Callable[[str, frozenset[int]], bool]


def partition_sources(program: A.Program, rel: str, col: int, moved: Moved) -> frozenset[tuple[str, int]] | None:
    """The (input relation, column) pairs whose changed rows' values at that
    column are the only values of `rel`'s column `col` whose rows may have
    changed; None when there is no such set (Note [Rows changed by file])."""
    return _sources(program, rel, col, moved_through(program, moved), frozenset())


def moved_through(program: A.Program, moved: Moved) -> Moved:
    """`moved` for every relation: a derived one may have changed when a rule
    of it reads one that did (in the columns it reads; a relation on a cycle
    is taken as changed)."""
    inputs = frozenset(program.inputs)
    memo: dict[str, bool] = {}

    def any_moved(rel: str, cols: frozenset[int]) -> bool:
        if rel in inputs:
            return moved(rel, cols)
        if rel not in memo:
            memo[rel] = True  # on a cycle: changed
            memo[rel] = any(any_moved(atom.name, read_columns(atom, rule) if atom is lit
                                      else frozenset(range(program.decls[atom.name].arity)))
                            for rule in program.rules_for(rel) for lit in rule.body
                            for atom, _strict in A.literal_atoms(lit))
        return memo[rel]

    return any_moved


def _sources(program, rel, col, moved, seen) -> frozenset | None:
    if rel in seen:  # recursive: its rows of one value may come from another's
        return None
    out: set[tuple[str, int]] = set()
    for rule in program.rules_for(rel):
        got = _rule_sources(program, rule, col, moved, seen | {rel})
        if got is None:
            return None
        out |= got
    return frozenset(out)


def _rule_sources(program, rule: A.Rule, col: int, moved, seen) -> frozenset | None:
    inputs = frozenset(program.inputs)
    changed = []
    for lit in rule.body:
        for atom, _strict in A.literal_atoms(lit):
            if atom is not lit and moved(atom.name, frozenset(range(program.decls[atom.name].arity))):
                changed.append(atom)  # a negation or an aggregate of what changed: by the head's value too
        if isinstance(lit, A.Atom) and moved(lit.name, read_columns(lit, rule)):
            changed.append(lit)
    if not changed:
        return frozenset()  # its rows are what they were
    head = rule.head.args[col]
    if not isinstance(head, A.Var):
        return None
    out: set[tuple[str, int]] = set()
    for lit in changed:
        at = [i for i, t in enumerate(lit.args) if isinstance(t, A.Var) and t.name == head.name]
        if not at:
            return None
        if lit.name in inputs:
            out.add((lit.name, at[0]))
            continue
        got = _sources(program, lit.name, at[0], moved, seen)
        if got is None:
            return None
        out |= got
    return frozenset(out)


def read_columns(atom: A.Atom, rule: A.Rule) -> frozenset[int]:
    """The columns of a positive atom whose values its rule reads: all but
    wildcards and variables that occur once in the rule."""
    counts = Counter(v.name for v, _enclosing in occurrences(rule))
    return frozenset(i for i, t in enumerate(atom.args)
                     if not isinstance(t, A.Wildcard) and not (isinstance(t, A.Var) and counts[t.name] == 1))
