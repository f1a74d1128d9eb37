"""The rows of a relation that a change to some of its inputs may reach.

Note [Rows a change reaches]: an update in place computes again, in some
files (or at some other column's values) only, a stored relation whose
rules carry the changed rows' file to its own (Note [Rows changed by file]
in torchtalk/datalog/analysis/partition.py). `step` is not such a one: a
new op in native_functions.yaml changes `op`, which `aten_call` joins by
the op's name to every file's calls of it, so the steps of any file may
change. Which do is a join away: those of the calls of the new op's name.
`reach` makes the program that computes them, a superset of the rows that
came or went, from the rows of what changed: for each rule and each atom
of it whose relation changed, the rule with that atom read from the
change (its rows that went or came, the new input `X__d_<columns>`:
those whose projection on the columns the atom reads went or came), and every
other changed input read as it was and is (both, the new input
`X__all`). A row that came or went has a derivation, before or after the
update, that reads a changed row (or that a changed row of a negated atom
blocks on one side); that rule, so read, derives it. What the rule reads
is no less than either side's, so nothing is missed; a negated atom of a
changed relation other than the one read from the change is left out,
which derives more, never less. A derived relation between is read from
its own change the same way (`aten_call__d` under `step0__d`). There is
no such program, None, when the change reaches `rel` through a recursive
relation or an aggregate, or when a rule would read every row of a
changed derived relation (that is computing it whole). The caller keeps
the values of the reached rows at one column, and computes `rel`'s rows
of those values again (transform/restrict.py).

Example:
    >>> p = parse_text(".decl c(a: symbol, n: symbol)\\n.input c\\n.decl o(n: symbol)\\n.input o\\n"
    ...                ".decl s(a: symbol)\\ns(a) :- c(a, n), o(n).")
    >>> program, deltas, _ = reach(p, "s", lambda rel, cols: rel == "o")
    >>> [str(r) for r in program.rules_for("s__d")], sorted(deltas)
    (['s__d(a) :- c(a, n), o__d_0(n).'], [('o', frozenset({0}))])
"""

from __future__ import annotations

import dataclasses

from torchtalk.datalog import ast as A
from torchtalk.datalog.analysis.partition import Moved, moved_through, read_columns
from torchtalk.datalog.analysis.strata import recursive_relations

DELTA = "__d"  # an input's rows that went or came; a derived relation's rows a change reaches
BOTH = "__all"  # an input's rows before and after the update


def reach(program: A.Program, rel: str, moved: Moved) -> tuple[A.Program, frozenset, frozenset[str]] | None:
    """(`program` with relation `rel` + DELTA holding a superset of `rel`'s
    rows that the change `moved` says of its inputs may bring or take away,
    the (input, columns) it reads the change of (`delta_name`), the inputs
    it reads as they were and are (X + BOTH)), or None (Note [Rows a change
    reaches])."""
    inputs = frozenset(program.inputs)
    recursive = recursive_relations(program)
    changed = moved_through(program, moved)
    decls = dict(program.decls)
    rules: list[A.Rule] = []
    deltas: set[tuple[str, frozenset[int]]] = set()
    read: set[str] = set()
    made: dict[str, str | None] = {}

    def delta_of(name: str, cols: frozenset[int]) -> str | None:
        if name in inputs:
            deltas.add((name, cols))
            return delta_name(name, cols)
        if name not in made:
            made[name] = None  # on a cycle: none
            if name in recursive:
                return None
            mine: list[A.Rule] = []  # a derived relation's change: every column of it
            for rule in program.rules_for(name):
                got = delta_rules(rule, name + DELTA)
                if got is None:
                    return None
                mine.extend(got)
            decls[name + DELTA] = dataclasses.replace(program.decls[name], name=name + DELTA)
            rules.extend(mine)
            made[name] = name + DELTA
        return made[name]

    def delta_rules(rule: A.Rule, head: str) -> list[A.Rule] | None:
        moving: dict[int, frozenset[int]] = {}  # body index -> the columns it reads
        for i, lit in enumerate(rule.body):
            if isinstance(lit, A.Atom):
                cols = read_columns(lit, rule)
                if changed(lit.name, cols):
                    moving[i] = cols
            elif isinstance(lit, A.Negation) and isinstance(lit.target, A.Atom):
                cols = frozenset(k for k, t in enumerate(lit.target.args) if not isinstance(t, A.Wildcard))
                if changed(lit.target.name, cols):
                    moving[i] = cols
            elif any(changed(a.name, frozenset(range(program.decls[a.name].arity)))
                     for a, _strict in A.literal_atoms(lit)):
                return None  # an aggregate of what changed
        out = []
        for i, cols in moving.items():
            lit = rule.body[i]
            atom = lit if isinstance(lit, A.Atom) else lit.target
            name = delta_of(atom.name, cols)
            if name is None:
                return None
            body: list[A.Literal] = []
            for j, other in enumerate(rule.body):
                if j == i:
                    body.append(dataclasses.replace(atom, name=name))
                elif j not in moving:
                    body.append(other)
                elif isinstance(other, A.Atom):
                    if other.name not in inputs:
                        return None  # every row of a changed derived relation
                    read.add(other.name)
                    body.append(dataclasses.replace(other, name=other.name + BOTH))
                # a changed relation's negation: left out
            out.append(dataclasses.replace(rule, head=dataclasses.replace(rule.head, name=head), body=tuple(body)))
        return out

    if delta_of(rel, frozenset()) is None:
        return None
    made_inputs = {delta_name(n, c): n for n, c in deltas} | {n + BOTH: n for n in read}
    for new, name in made_inputs.items():
        decls[new] = dataclasses.replace(program.decls[name], name=new)
    dirs = program.directives + tuple(A.IODirective(A.IOKind.INPUT, new) for new in sorted(made_inputs))
    return dataclasses.replace(program, decls=decls, rules=program.rules + tuple(rules), directives=dirs), \
        frozenset(deltas), frozenset(read)


BEFORE = "__before"  # a recursive relation's rows as they were, read by its unrolled rules


# Note [A recursion by a carried column]: a recursive relation is computed
# whole when what it reads moved (`reach` finds no program through it), and
# `link_reach(fn, g, d)` (the functions fn's calls reach in three steps) was
# 0.11 s of an update that adds one call. But its recursive rule carries fn
# from the atom of itself it reads to its head, so its rows of one fn are
# made from its rows of that fn alone: it can be computed again at some
# values of that column, as a relation partitioned by file is. Which values:
# take a row that came or went, and a derivation of it, after or before the
# update, that reads a changed row. Its first step that reads one reads,
# of the relation itself, rows made from unchanged rows only: rows it had
# before. So the rules with the relation's own atoms read from its rows as
# they were (the new input rel + BEFORE, its table before the update) make a
# program without that recursion, and `reach` of it derives such a step's
# row, whose value at the carried column is the one of every row derived
# from it. `unrolled` makes that program; the caller computes the rows of
# those values again with the recursion (transform/restrict.py), at a
# carried column only.
def unrolled(program: A.Program, rel: str) -> tuple[A.Program, frozenset[int]] | None:
    """(`program` with `rel`'s rules reading its own atoms from the new input
    `rel` + BEFORE, the columns every recursive rule of `rel` carries from
    them to its head), or None when `rel` is not alone in a recursive
    stratum or carries no column (Note [A recursion by a carried column])."""
    from torchtalk.datalog.analysis.strata import strata

    if not any(st.recursive and st.relations == (rel,) for st in strata(program)):
        return None
    carried = set(range(program.decls[rel].arity))
    rules = []
    for rule in program.rules:
        if rule.head.name != rel:
            rules.append(rule)
            continue
        body = []
        for lit in rule.body:
            if isinstance(lit, A.Atom) and lit.name == rel:
                carried &= {c for c in carried if isinstance(h := rule.head.args[c], A.Var)
                            and isinstance(t := lit.args[c], A.Var) and t.name == h.name}
                lit = dataclasses.replace(lit, name=rel + BEFORE)
            elif any(a.name == rel for a, _strict in A.literal_atoms(lit)):
                return None
            body.append(lit)
        rules.append(dataclasses.replace(rule, body=tuple(body)))
    if not carried:
        return None
    decls = {**program.decls, rel + BEFORE: dataclasses.replace(program.decls[rel], name=rel + BEFORE)}
    dirs = program.directives + (A.IODirective(A.IOKind.INPUT, rel + BEFORE),)
    return dataclasses.replace(program, decls=decls, rules=tuple(rules), directives=dirs), frozenset(carried)


def delta_name(rel: str, cols: frozenset[int]) -> str:
    """The input of input `rel`'s rows that went or came whose projection
    on `cols` did (those that moved in other columns only are the same rows
    to an atom that reads `cols`: a line moved, for `aten_call`'s read of
    `kernel_entry`, which reads no line)."""
    return rel + DELTA + "".join(f"_{c}" for c in sorted(cols))
