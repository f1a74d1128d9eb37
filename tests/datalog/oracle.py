"""A naive bottom-up Datalog evaluator: the differential tests' oracle.

Written independently of torchtalk.datalog's analysis and compile modules:
it uses only the AST. Strata by iterated ranks; each stratum is evaluated
naively (every rule over all rows, repeated until nothing changes); rules are
evaluated tuple-at-a-time by substitution. Aggregates: over the distinct
combinations of matched rows of the aggregate body's atoms (Soufflé counts
tuples, so `count : { e(x, _) }` counts rows of e, not values of x).
"""

from __future__ import annotations

import re

from torchtalk.datalog import ast as A


def naive_eval(program: A.Program, edb: dict[str, set[tuple]]) -> dict[str, set[tuple]]:
    db: dict[str, set[tuple]] = {name: set() for name in program.decls}
    for name, rows in edb.items():
        db[name] |= set(rows)
    rank = _ranks(program)
    for level in sorted(set(rank.values())):
        rules = [r for r in program.rules if rank[r.head.name] == level]
        changed = True
        while changed:
            changed = False
            for rule in rules:
                for row in list(_rule_rows(rule, db)):
                    if row not in db[rule.head.name]:
                        db[rule.head.name].add(row)
                        changed = True
    return db


def _ranks(program: A.Program) -> dict[str, int]:
    """rank(head) >= rank(body), > for a negated or aggregated body relation."""
    rank = {name: 0 for name in program.decls}
    limit = len(rank) + 1
    changed = True
    while changed:
        changed = False
        for rule in program.rules:
            for dep, strict in _deps(rule):
                need = rank[dep] + (1 if strict else 0)
                if rank[rule.head.name] < need:
                    rank[rule.head.name] = need
                    changed = True
                    if need > limit:
                        raise ValueError("not stratifiable")
    return rank


def _deps(rule: A.Rule):
    def lits(body, strict):
        for lit in body:
            if isinstance(lit, A.Atom):
                yield lit.name, strict
                for t in lit.args:
                    yield from terms(t)
            elif isinstance(lit, A.Negation):
                if isinstance(lit.target, A.Atom):
                    yield lit.target.name, True
            else:
                yield from terms(lit.left)
                yield from terms(lit.right)

    def terms(t):
        if isinstance(t, A.Aggregate):
            yield from lits(t.body, True)
        elif isinstance(t, A.BinOp):
            yield from terms(t.left)
            yield from terms(t.right)
        elif isinstance(t, A.Neg):
            yield from terms(t.operand)

    yield from lits(rule.body, False)


def _rule_rows(rule: A.Rule, db) -> set[tuple]:
    outside = _names_outside_aggregates(rule)
    out = set()
    for env, _ in _solve(list(rule.body), [({}, ())], db, outside):
        out.add(tuple(_value(t, env, db, outside) for t in rule.head.args))
    return out


def _solve(body: list, states: list, db, outside) -> list:
    """All (env, matched rows) satisfying `body`, picking a ready literal each time."""
    if not body:
        return states
    for i, lit in enumerate(body):
        if _ready(lit, states[0][0] if states else {}, outside):
            rest = body[:i] + body[i + 1 :]
            new_states = []
            for env, rows in states:
                new_states += _step(lit, env, rows, db, outside)
            return _solve(rest, new_states, db, outside) if new_states else []
    raise ValueError(f"no literal ready in {[str(b) for b in body]}")


def _ready(lit, env, outside) -> bool:
    if isinstance(lit, A.Atom):
        return True
    if isinstance(lit, A.Comparison) and lit.op is A.CmpOp.EQ:
        for v, o in ((lit.left, lit.right), (lit.right, lit.left)):
            if isinstance(v, A.Var) and v.name not in env and _bound(o, env, outside):
                return True
    return _bound_lit(lit, env, outside)


def _bound_lit(lit, env, outside) -> bool:
    if isinstance(lit, A.Negation):
        lit = lit.target
        if isinstance(lit, A.Atom):
            return all(isinstance(t, A.Wildcard) or _bound(t, env, outside) for t in lit.args)
    return _bound(lit.left, env, outside) and _bound(lit.right, env, outside)


def _bound(t, env, outside) -> bool:
    if isinstance(t, A.Var):
        return t.name in env
    if isinstance(t, A.BinOp):
        return _bound(t.left, env, outside) and _bound(t.right, env, outside)
    if isinstance(t, A.Neg):
        return _bound(t.operand, env, outside)
    if isinstance(t, A.Aggregate):
        return all(n in env for n in _agg_names(t) if n in outside)
    return True


def _step(lit, env, rows, db, outside) -> list:
    if isinstance(lit, A.Atom):
        out = []
        for row in db[lit.name]:
            e = _match(lit.args, row, env, db, outside)
            if e is not None:
                out.append((e, rows + ((lit.name, row),)))
        return out
    if isinstance(lit, A.Negation):
        target = lit.target
        if isinstance(target, A.Atom):
            hit = any(_match(target.args, row, env, db, outside) is not None for row in db[target.name])
        else:
            hit = _builtin(target, env, db, outside)
        return [] if hit else [(env, rows)]
    if isinstance(lit, A.Builtin):
        return [(env, rows)] if _builtin(lit, env, db, outside) else []
    if lit.op is A.CmpOp.EQ:
        for v, o in ((lit.left, lit.right), (lit.right, lit.left)):
            if isinstance(v, A.Var) and v.name not in env:
                val = _value(o, env, db, outside)
                return [] if val is None else [({**env, v.name: val}, rows)]
    a, b = _value(lit.left, env, db, outside), _value(lit.right, env, db, outside)
    if a is None or b is None:
        return []
    ok = {"=": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[lit.op.value]
    return [(env, rows)] if ok else []


def _builtin(lit: A.Builtin, env, db, outside) -> bool:
    a, b = _value(lit.left, env, db, outside), _value(lit.right, env, db, outside)
    if lit.name is A.BuiltinName.CONTAINS:
        return a in b
    return re.fullmatch(a, b) is not None


def _match(args, row, env, db, outside):
    e = dict(env)
    for t, v in zip(args, row, strict=True):
        if isinstance(t, A.Wildcard):
            continue
        if isinstance(t, A.Var) and t.name not in e:
            e[t.name] = v
        elif _value(t, e, db, outside) != v:
            return None
    return e


def _value(t, env, db, outside):
    if isinstance(t, A.Var):
        return env[t.name]
    if isinstance(t, (A.Num, A.Str)):
        return t.value
    if isinstance(t, A.Neg):
        return -_value(t.operand, env, db, outside)
    if isinstance(t, A.BinOp):
        a, b = _value(t.left, env, db, outside), _value(t.right, env, db, outside)
        if a is None or b is None:
            return None
        if t.op is A.ArithOp.DIV:
            return int(a / b)  # truncation, like C and Soufflé
        if t.op is A.ArithOp.MOD:
            return a - b * int(a / b)
        return {"+": a + b, "-": a - b, "*": a * b}[t.op.value]
    return _aggregate(t, env, db, outside)


def _aggregate(agg: A.Aggregate, env, db, outside):
    inner_env = {k: v for k, v in env.items() if k in outside}
    matches = _solve(list(agg.body), [(inner_env, ())], db, outside | set())
    seen = {}
    for e, rows in matches:
        key = tuple(sorted(rows))
        if key not in seen:
            seen[key] = _value(agg.target, e, db, outside) if agg.target is not None else 1
    vals = list(seen.values())
    if agg.func is A.AggFunc.COUNT:
        return len(vals)
    if agg.func is A.AggFunc.SUM:
        return sum(vals)
    if not vals:
        return None
    return min(vals) if agg.func is A.AggFunc.MIN else max(vals)


def _agg_names(agg: A.Aggregate) -> set[str]:
    out = set()

    def walk(n):
        if isinstance(n, A.Var):
            out.add(n.name)
        for child in _kids(n):
            walk(child)

    walk(agg)
    return out


def _kids(n):
    if isinstance(n, A.Atom):
        return n.args
    if isinstance(n, A.Negation):
        return (n.target,)
    if isinstance(n, (A.Comparison, A.Builtin, A.BinOp)):
        return (n.left, n.right)
    if isinstance(n, A.Neg):
        return (n.operand,)
    if isinstance(n, A.Aggregate):
        return ((n.target,) if n.target is not None else ()) + n.body
    return ()


def _names_outside_aggregates(rule: A.Rule) -> set[str]:
    """Variables occurring outside every aggregate (candidates for injection)."""
    out = set()

    def walk(n):
        if isinstance(n, A.Aggregate):
            return
        if isinstance(n, A.Var):
            out.add(n.name)
        for child in _kids(n):
            walk(child)

    walk(rule.head)
    for lit in rule.body:
        walk(lit)
    return out
