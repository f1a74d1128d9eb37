"""Why is this row there? Walk back through the rules that derived it.

For a tuple of a derived relation, each rule of that relation is tried: its
body, with the head's arguments equated to the tuple's values and every `_`
made a fresh variable, becomes a one-rule "witness" relation that the engine
evaluates (with the query's seeds). The first witness row (the smallest,
so a `min` aggregate is explained by its minimum) gives the body atoms' exact
tuples, which are explained in turn, down to the facts of the fact DB. Each
step names the rule (rules/x.dl:line) and each fact its evidence (file:line).

Example:
    >>> tree = explain(program, con, "callers", ("at::native::cpublas::gemm", ...), facts)
    >>> tree["rule"]
    'rules/calls.dl:19'
"""

from __future__ import annotations

from pathlib import Path

from torchtalk.datalog import ast as A

WITNESS = "tt_witness"
MAX_DEPTH = 16


def explain(program, con, relation: str, row: tuple, facts: dict, *, engine: str = "duckdb") -> dict:
    """The derivation tree of `relation(row)`: {fact, where, rule, because: [...]}."""
    derived = {r.head.name for r in program.rules}
    return _Explainer(program, con, facts, derived, engine).why(relation, tuple(row), 0, set())


# Note [Explain once]: a derived fact is explained the first time it appears
# in the tree; later occurrences say "see above", so a chain through a walk
# (up_reach at depth d, d-1, ...) reads top-down without repeated subtrees.


class _Explainer:
    def __init__(self, program, con, facts, derived, engine) -> None:
        self.program, self.con, self.facts = program, con, facts
        self.derived, self.engine = derived, engine
        self.done: set[tuple[str, tuple]] = set()  # Note [Explain once]

    def why(self, rel: str, row: tuple, depth: int, seen: set) -> dict:
        node = {"fact": _fmt(rel, row)}
        decl = self.program.decls.get(rel)
        if rel in self.facts:
            node["where"] = "query argument"
            return node
        if rel not in self.derived:
            node["where"] = _evidence(decl, row)
            return node
        if depth >= MAX_DEPTH or (rel, row) in seen:
            node["where"] = "..."
            return node
        if (rel, row) in self.done:
            node["where"] = "see above"
            return node
        self.done.add((rel, row))
        seen = seen | {(rel, row)}
        for rule in self.program.rules_for(rel):
            found = self._witness(rule, row)
            if found is None:
                continue
            binding, atoms = found
            node["rule"] = _loc(rule.loc)
            node["because"] = [
                self.why(a.name, tuple(_value(t, binding) for t in a.args), depth + 1, seen)
                for a in atoms
            ]
            return node
        node["where"] = "no derivation found"
        return node

    def _witness(self, rule: A.Rule, row: tuple):
        """A satisfying assignment of `rule`'s body for head tuple `row`, or None."""
        if rule.is_fact:
            consts = tuple(_const(t) for t in rule.head.args)
            return ({}, []) if consts == row else None
        body, atoms = _fresh_wildcards(rule.body)
        types = _var_types(self.program, body)
        names = list(types)
        eqs = tuple(
            A.Comparison(A.CmpOp.EQ, t, A.Num(v) if isinstance(v, int) else A.Str(v))
            for t, v in zip(rule.head.args, row, strict=True)
        )
        head = A.Atom(WITNESS, tuple(A.Var(n) for n in names))
        cols = tuple(A.Column(n.lstrip("_") or "w", A.ColType(types[n])) for n in names)
        cols = tuple(A.Column(f"c{i}_{c.name}", c.type) for i, c in enumerate(cols))
        decls = {**self.program.decls, WITNESS: A.Decl(WITNESS, cols)}
        prog = A.Program(decls, (*self.program.rules, A.Rule(head, (*body, *eqs))),
                         self.program.directives, self.program.types, files=self.program.files,
                         sources=self.program.sources)
        from torchtalk.datalog import evaluate

        rows = evaluate(prog, self.con, outputs=[WITNESS], facts=self.facts, engine=self.engine,
                        checked=True)
        rows = sorted(rows.get(WITNESS, []), key=lambda r: tuple((isinstance(v, str), v) for v in r))
        if not rows:
            return None
        return dict(zip(names, rows[0], strict=True)), atoms


def _fresh_wildcards(body):
    """Replace each `_` in positive atoms by a fresh variable, and each
    computed argument (`up_min(ord(s), j, d)`) by a fresh variable equal to
    it, so the witness row carries its value as the engine computes it;
    return (body, positive atoms)."""
    counter = iter(range(10_000))
    out, atoms, eqs = [], [], []
    for lit in body:
        if isinstance(lit, A.Atom):
            args = []
            for t in lit.args:
                if isinstance(t, A.Wildcard):
                    t = A.Var(f"tt_w{next(counter)}")
                elif isinstance(t, (A.Functor, A.BinOp, A.Neg)):
                    v = A.Var(f"tt_e{next(counter)}")
                    eqs.append(A.Comparison(A.CmpOp.EQ, v, t))
                    t = v
                args.append(t)
            lit = A.Atom(lit.name, tuple(args), lit.loc)
            atoms.append(lit)
        out.append(lit)
    return (*out, *eqs), atoms


def _var_types(program, body) -> dict[str, str]:
    """Each variable bound by a positive atom (or an aggregate), with its column type."""
    types: dict[str, str] = {}
    for lit in body:
        if isinstance(lit, A.Atom):
            decl = program.decls[lit.name]
            for t, col in zip(lit.args, decl.columns, strict=True):
                if isinstance(t, A.Var):
                    types.setdefault(t.name, str(col.type))
        elif isinstance(lit, A.Comparison) and lit.op is A.CmpOp.EQ:
            for a, b in ((lit.left, lit.right), (lit.right, lit.left)):
                if isinstance(a, A.Var) and isinstance(b, (A.Aggregate, A.BinOp, A.Functor, A.Num)):
                    types.setdefault(a.name, "number")
    return types


def _value(t, binding: dict):
    if isinstance(t, A.Var):
        return binding.get(t.name, "?")
    if isinstance(t, (A.Str, A.Num)):
        return t.value
    if isinstance(t, A.Neg):
        return -_value(t.operand, binding)
    if isinstance(t, A.BinOp):
        a, b = _value(t.left, binding), _value(t.right, binding)
        ops = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
               "/": lambda: a // b, "%": lambda: a % b}
        return ops[str(t.op)]()
    return "?"


def _const(t):
    return t.value if isinstance(t, (A.Str, A.Num)) else None


def _fmt(rel: str, row: tuple) -> str:
    return f"{rel}({', '.join(repr(v) if isinstance(v, str) else str(v) for v in row)})"


def _evidence(decl, row: tuple) -> str:
    if decl is None:
        return ""
    names = [c.name for c in decl.columns]
    if "file" in names and "line" in names:
        f, ln = row[names.index("file")], row[names.index("line")]
        return f"{f}:{ln}" if f else ""
    return "fact"


def _loc(loc) -> str:
    if loc is None or not getattr(loc, "file", ""):
        return ""
    f = loc.file
    try:
        f = str(Path(f).resolve().relative_to(Path(__file__).resolve().parents[2]))
    except ValueError:
        pass
    return f"{f}:{loc.line}"
