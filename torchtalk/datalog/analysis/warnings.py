"""Warnings about a checked program, kept apart from its errors, as Soufflé
keeps them: the program still runs.

- a variable that occurs once in a rule (`_` says "any value" on purpose; a
  name starting with `_` says it too);
- a relation that an `.output` needs but that has no rules, no facts and no
  `.input`, so it is always empty. (A library file has no `.output`: the
  relations it leaves to its includers, such as graph.dl's `up_seed`, are
  not reported.)

A rule written with a disjunction stands for several rules (one per
alternative, parser.py); a variable is reported when it occurs once in
every alternative that mentions it, once per written rule.

Example:
    >>> [w.message for w in check_warnings(parse_text('.decl e(a: number, b: number)\\n.input e\\n.decl p(x: number)\\np(x) :- e(x, y).'))]
    ["variable 'y' occurs only once (use '_' if any value will do)"]
"""

from __future__ import annotations

from collections import Counter

from torchtalk.datalog import ast as A
from torchtalk.datalog.analysis.grounding import occurrences
from torchtalk.datalog.analysis.strata import needed_relations
from torchtalk.errors import SemanticWarning


def check_warnings(program: A.Program) -> list[SemanticWarning]:
    """Every warning of `program`, sorted by location."""
    out = _singletons(program) + _empty_relations(program)
    return sorted(out, key=lambda w: (w.loc.file, w.loc.line, w.loc.col) if w.loc else ("", 0, 0))


def _singletons(program: A.Program) -> list[SemanticWarning]:
    by_clause: dict = {}  # the rules of one written clause share its location
    for rule in program.rules:
        by_clause.setdefault((rule.loc, rule.head.name), []).append(rule)
    out = []
    for rules in by_clause.values():
        counts = [Counter(v.name for v in _vars(r)) for r in rules]
        names = set().union(*counts)
        for name in sorted(names):
            if name.startswith("_") or any(c[name] > 1 for c in counts):
                continue
            first = next(v for r in rules for v in _vars(r) if v.name == name)
            out.append(_warn(program, f"variable '{name}' occurs only once (use '_' if any value will do)", first.loc))
    return out


def _empty_relations(program: A.Program) -> list[SemanticWarning]:
    if not program.outputs:
        return []
    needed = needed_relations(program, list(program.outputs))
    filled = {r.head.name for r in program.rules} | set(program.inputs)
    out, seen = [], set()
    for rule in program.rules:
        if rule.head.name not in needed:
            continue
        for lit in rule.body:
            for atom, _ in _atoms(lit):
                if atom.name in program.decls and atom.name not in filled and atom.name not in seen:
                    seen.add(atom.name)
                    decl = program.decls[atom.name]
                    out.append(_warn(program, f"relation '{atom.name}' has no rules, no facts and no .input, "
                                              "so it is always empty", decl.loc))
    return out


def _atoms(lit: A.Literal):
    yield from A.literal_atoms(lit)


def _vars(rule: A.Rule) -> list[A.Var]:
    """Every occurrence of a named variable in `rule`, aggregate bodies included."""
    return [v for v, _ in occurrences(rule)]


def _warn(program: A.Program, message: str, loc) -> SemanticWarning:
    return SemanticWarning(message, loc, source_line=program.source_line(loc))
