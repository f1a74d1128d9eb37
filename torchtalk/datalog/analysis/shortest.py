"""Note [Rows a shorter walk covers]: a walk such as rules/graph.dl's

    down_reach(s, u, v, c, d + 1, g + h - g * h) :-
        down_reach(s, u, v, x, d, g), down_limit(m), d < m, step_pair(x, c, h), ...

derives a node once for every distance at which a path reaches it
(kernels(add): 10,027 rows for 5,140 nodes), and every one of those rows
steps on. Yet every rule that reads it takes the smallest distance (`d =
min x : { down_reach(s, u, v, c, x, _) }`) or none (`_`). Such a column is
a *distance*, and a row whose other columns another row holds at a
distance no greater adds nothing any reader sees: whatever it derives, the
shorter row derives with a distance no greater, and its bound (`d < m`)
passes whenever the longer one's does. So the in-memory engine keeps, of
the rows a round derives, only those shorter than every row it holds with
the same other columns (engines/memory.py's `_fixpoint`). The rows it
keeps are a subset of the relation's, holding for each set of other
columns the smallest distance, and every reader's rows are the same
(kernels(add) 22.5 -> 19.5 ms, paths(torch.softmax -> cuda) 24 -> 17 ms).

A column of relation `r` is a distance when

- `r` is the only relation of its recursive stratum, and is neither a
  run's output nor kept for a later run (its rows are then read as they
  are);
- each rule of `r` that reads `r` reads it once, positively, with a
  variable `d` in that column that appears elsewhere only as the head's
  column (`d` or `d + n`, n >= 0 a number) and as the smaller side of `<`
  or `<=` comparisons with what does not contain it;
- each other rule reading `r` has there `_`, a variable found nowhere
  else, or the target of a `min` aggregate read nowhere else.

The other engines derive every row; the answers are the same
(tests/datalog/test_shortest.py compares them on such programs).

Example:
    >>> from torchtalk.datalog.parser import parse_text
    >>> p = parse_text('.decl e(a: number, b: number)\\n.decl r(a: number, d: number)\\n'
    ...                '.decl m(a: number, d: number)\\nr(0, 0).\\n'
    ...                'r(b, d + 1) :- r(a, d), e(a, b), d < 9.\\n'
    ...                'm(a, d) :- r(a, _), d = min x : { r(a, x) }.')
    >>> distance_column(p, ('r',))
    1
"""

from __future__ import annotations

from collections import Counter

from torchtalk.datalog import ast as A


def distance_column(program: A.Program, members: tuple[str, ...]) -> int | None:
    """The distance column (the Note) of the relation of recursive stratum
    `members` (None when it has none, or the stratum has more relations)."""
    if len(members) != 1:
        return None
    return program.cached(("distance-column", members[0]), lambda: _distance_column(program, members[0]))


def _distance_column(program: A.Program, rel: str) -> int | None:
    own = [r for r in program.rules_for(rel) if rel in (name for name, _ in r.reads)]
    readers = [r for r in program.rules if r.head.name != rel and rel in (name for name, _ in r.reads)]
    for col in range(program.decls[rel].arity):
        if own and all(_steps(rule, rel, col) for rule in own) and all(_reads_least(rule, rel, col) for rule in readers):
            return col
    return None


def _steps(rule: A.Rule, rel: str, col: int) -> bool:
    """`rule` derives `rel` from one row of it, its column `col` a distance."""
    atoms = [lit for lit in rule.body if isinstance(lit, A.Atom) and lit.name == rel]
    if len(atoms) != 1 or [name for name, _ in rule.reads].count(rel) != 1:
        return False
    d = atoms[0].args[col]
    if not isinstance(d, A.Var):
        return False
    uses = _occurrences(rule)[d.name]
    head = rule.head.args[col]
    grows = head == d or (
        isinstance(head, A.BinOp) and head.op is A.ArithOp.ADD
        and {type(head.left), type(head.right)} == {A.Var, A.Num}
        and d in (head.left, head.right)
        and all(t.value >= 0 for t in (head.left, head.right) if isinstance(t, A.Num)))
    bounds = [lit for lit in rule.body if isinstance(lit, A.Comparison) and _bounds(lit, d)]
    return grows and uses == 2 + len(bounds)


def _bounds(lit: A.Comparison, d: A.Var) -> bool:
    """`lit` is `d < t`, `d <= t`, `t > d` or `t >= d`, with `t` free of `d`."""
    if lit.op in (A.CmpOp.LT, A.CmpOp.LE):
        small, big = lit.left, lit.right
    elif lit.op in (A.CmpOp.GT, A.CmpOp.GE):
        small, big = lit.right, lit.left
    else:
        return False
    return small == d and d.name not in A.all_var_names(big)


def _reads_least(rule: A.Rule, rel: str, col: int) -> bool:
    """Each atom of `rel` in `rule` reads its column `col` as `_`, as a
    variable used nowhere else, or as the target of a `min` read nowhere else."""
    uses = _occurrences(rule)
    for lit in rule.body:
        if isinstance(lit, A.Atom) and lit.name == rel:
            if not _unused(lit.args[col], uses):
                return False
        elif isinstance(lit, A.Negation):
            if isinstance(lit.target, A.Atom) and lit.target.name == rel and not _unused(lit.target.args[col], uses):
                return False
        elif not all(_agg_least(agg, rel, col, uses) for t in A.literal_terms(lit) for agg in _aggregates(t)):
            return False
    return True


def _agg_least(agg: A.Aggregate, rel: str, col: int, uses: Counter) -> bool:
    atoms = [lit for lit in agg.body if isinstance(lit, A.Atom) and lit.name == rel]
    if not atoms and not any(rel in (a.name for a, _ in A.literal_atoms(lit)) for lit in agg.body):
        return True
    if agg.func is not A.AggFunc.MIN or len(atoms) != 1 or not all(
            isinstance(lit, A.Atom) for lit in agg.body if rel in (a.name for a, _ in A.literal_atoms(lit))):
        return False
    x = atoms[0].args[col]
    if _unused(x, uses):
        return True
    return isinstance(x, A.Var) and agg.target == x and uses[x.name] == 2


def _unused(term: A.Term, uses: Counter) -> bool:
    return isinstance(term, A.Wildcard) or (isinstance(term, A.Var) and uses[term.name] == 1)


def _occurrences(rule: A.Rule) -> Counter:
    """Variable name -> how many times it appears in `rule`, aggregate bodies included."""
    return Counter([*(v for t in rule.head.args for v in A.all_var_names(t)),
                    *(v for lit in rule.body for v in A.literal_var_names(lit))])


def _aggregates(term: A.Term) -> list[A.Aggregate]:
    """Every aggregate in `term`, nested ones too."""
    if isinstance(term, A.Aggregate):
        return [term, *(a for lit in term.body for t in A.literal_terms(lit) for a in _aggregates(t))]
    return [a for t in A.subterms(term) for a in _aggregates(t)]
