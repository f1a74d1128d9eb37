"""Semantic checks of a parsed program, each error with its location.

Undeclared relation, arity and type mismatch, ungrounded variable, `_` where
a value is needed, unstratifiable negation or aggregation. All errors are
collected, sorted by location, and raised together as an ErrorList.

Example:
    >>> check(parse_text('.decl p(x: number)\\np(x) :- q(x).'))
    Traceback (most recent call last):
    ErrorList: <text>:2:9: semantic error: relation 'q' is not declared
"""

from __future__ import annotations

from torchtalk.datalog import ast as A
from torchtalk.datalog.analysis.grounding import ground_rule
from torchtalk.datalog.analysis.strata import strata
from torchtalk.errors import ErrorList, SemanticError, SrcLoc, TorchTalkError, did_you_mean


def check(program: A.Program) -> None:
    """Raise ErrorList with every semantic error of `program`, if any."""
    errors = check_errors(program)
    if errors:
        raise ErrorList(errors)


def check_errors(program: A.Program) -> list[TorchTalkError]:
    """Every semantic error of `program` (empty when it is fine)."""
    c = _Checker(program)
    for d in program.directives:
        if d.name not in program.decls:
            c.error(f"'.{d.kind}' of undeclared relation '{d.name}'", d.loc, c.hint(d.name))
    for rule in program.rules:
        c.rule(rule)
    if not c.errors:
        try:
            strata(program)
        except SemanticError as err:
            c.error(err.message, err.loc)
    return c.errors


class _Checker:
    def __init__(self, program: A.Program) -> None:
        self.program = program
        self.errors: list[TorchTalkError] = []

    def error(self, message: str, loc: SrcLoc | None, hint: str | None = None) -> None:
        src = self.program.source_line(loc)
        self.errors.append(SemanticError(message, loc, hint=hint, source_line=src))

    def hint(self, name: str) -> str | None:
        return did_you_mean(name, self.program.decls)

    def rule(self, rule: A.Rule) -> None:
        before = len(self.errors)
        types: dict[str, tuple[A.ColType, str]] = {}  # var -> (type, where first typed)
        self.named: dict[str, tuple[str, str]] = {}  # var -> (declared type, where), body atoms only
        self.atom(rule.head, types, head=True)
        self.head_terms(rule.head)
        for lit in rule.body:
            self.literal(lit, types)
        if len(self.errors) == before:
            self.head_types(rule.head)
        if len(self.errors) > before:
            return  # grounding of a malformed rule would only add noise
        for var in ground_rule(rule).ungrounded:
            self.error(f"variable '{var.name}' is not grounded (bind it in a positive atom of the body)", var.loc)
        self.expressions(rule, types)

    def head_terms(self, head: A.Atom) -> None:
        for t in head.args:
            if _has(t, A.Wildcard) and not _has(t, A.Aggregate):
                self.error(f"'_' in the head of a rule for '{head.name}'", _find(t, A.Wildcard).loc)
            if _has(t, A.Aggregate):
                self.error("an aggregate in the head of a rule is outside the subset (bind it in the body)", _find(t, A.Aggregate).loc)

    def literal(self, lit: A.Literal, types) -> None:
        if isinstance(lit, A.Atom):
            self.atom(lit, types)
        elif isinstance(lit, A.Negation):
            self.literal(lit.target, types)
        else:
            for t in (lit.left, lit.right):
                wild = [n for n in _walk(t, into_aggregates=False) if isinstance(n, A.Wildcard)]
                if wild:
                    what = "a comparison" if isinstance(lit, A.Comparison) else f"'{lit.name}'"
                    self.error(f"'_' in {what} (use a variable)", wild[0].loc)
                self.aggregates(t, types)

    def aggregates(self, term: A.Term, types) -> None:
        for agg in _all(term, A.Aggregate):
            if not any(isinstance(lit, A.Atom) for lit in agg.body):
                self.error(f"'{agg.func}' aggregate body needs a positive atom", agg.loc)
            for lit in agg.body:
                self.literal(lit, types)
            if agg.target is not None and _has(agg.target, A.Wildcard):
                self.error("'_' as an aggregate target", _find(agg.target, A.Wildcard).loc)

    def head_types(self, head: A.Atom) -> None:
        """Note [Types]: each head argument is of a subtype of its column's
        type: a variable by the columns it is bound in, `as(x, T)` by T."""
        decl = self.program.decls[head.name]
        for col, arg in zip(decl.columns, head.args, strict=True):
            got, where = None, ""
            if isinstance(arg, A.Var) and arg.name in self.named:
                got, where = self.named[arg.name]
                where = f" (bound as {where})"
            elif isinstance(arg, A.Functor) and arg.name is A.FunctorName.AS:
                got = arg.type_name
                if _base(self.program, got) is None:
                    self.error(f"unknown type '{got}' in as()", arg.loc,
                               hint=did_you_mean(got, ["symbol", "number", *self.program.types]))
                    continue
            if got is not None and not self.program.is_subtype(got, col.type_name):
                self.error(f"column '{col.name}' of '{head.name}' has type {col.type_name}, got type {got}{where}",
                           arg.loc, hint=f"write as({arg}, {col.type_name}) if every value is one"
                           if isinstance(arg, A.Var) else None)

    def named_type(self, atom: A.Atom, col: A.Column, arg: A.Var) -> None:
        """Narrow `arg`'s declared type by the column it is bound in; two types
        neither of which is a subtype of the other are an error (Note [Types])."""
        where = f"column '{col.name}' of '{atom.name}' at {arg.loc}"
        seen = self.named.get(arg.name)
        if seen is None or self.program.is_subtype(col.type_name, seen[0]):
            self.named[arg.name] = (col.type_name, where)
        elif not self.program.is_subtype(seen[0], col.type_name):
            self.error(f"variable '{arg.name}' has type {col.type_name} here (column '{col.name}' of '{atom.name}') "
                       f"but type {seen[0]} as {seen[1]}", arg.loc)

    def atom(self, atom: A.Atom, types, head: bool = False) -> None:
        decl = self.program.decls.get(atom.name)
        if decl is None:
            self.error(f"relation '{atom.name}' is not declared", atom.loc, self.hint(atom.name))
            return
        if len(atom.args) != decl.arity:
            self.error(
                f"'{atom.name}' has {decl.arity} column{'s' * (decl.arity != 1)} but is used with "
                f"{len(atom.args)} argument{'s' * (len(atom.args) != 1)}",
                atom.loc,
            )
            return
        for col, arg in zip(decl.columns, atom.args, strict=True):
            self.argument(atom, col, arg, types)
            if not head and isinstance(arg, A.Var) and self.program.types:
                self.named_type(atom, col, arg)

    def argument(self, atom: A.Atom, col: A.Column, arg: A.Term, types) -> None:
        where = f"column '{col.name}' of '{atom.name}'"
        if isinstance(arg, A.Var):
            seen = types.get(arg.name)
            if seen is None:
                types[arg.name] = (col.type, f"{where} at {arg.loc}")
            elif seen[0] is not col.type:
                self.error(f"variable '{arg.name}' is a {col.type} here ({where}) but a {seen[0]} as {seen[1]}", arg.loc)
            return
        got = _const_type(arg)
        if got is not None and got is not col.type:
            self.error(f"{where} is a {col.type}, got the {got} {arg}", arg.loc)

    def expressions(self, rule: A.Rule, types) -> None:
        """Type of arithmetic, comparisons, builtins and aggregates."""
        env = {name: t for name, (t, _) in types.items()}
        for a in ground_rule(rule).assignments:
            env.setdefault(a.var, _type_of(a.expr, env) or A.ColType.NUMBER)
        for node in _walk_rule(rule):
            self.expression(node, env)

    def expression(self, node, env) -> None:
        num, sym = A.ColType.NUMBER, A.ColType.SYMBOL
        if isinstance(node, (A.BinOp, A.Neg)):
            for part in (node.left, node.right) if isinstance(node, A.BinOp) else (node.operand,):
                if _type_of(part, env) is sym:
                    self.error(f"arithmetic on the symbol {part}", part.loc)
        elif isinstance(node, A.Comparison):
            lt, rt = _type_of(node.left, env), _type_of(node.right, env)
            if node.op in (A.CmpOp.EQ, A.CmpOp.NE):
                if lt and rt and lt is not rt:
                    self.error(f"'{node.op}' compares a {lt} with a {rt}", node.loc)
            elif sym in (lt, rt):
                self.error(f"'{node.op}' compares numbers, got a symbol", node.loc)
        elif isinstance(node, A.Builtin):
            for part in (node.left, node.right):
                if _type_of(part, env) is num:
                    self.error(f"'{node.name}' takes symbols, got the number {part}", part.loc)
        elif isinstance(node, A.Functor) and node.name is A.FunctorName.AS:
            want = A.ColType(_base(self.program, node.type_name)) if _base(self.program, node.type_name) else None
            got = _type_of(node.args[0], env)
            if want is None:
                pass  # reported by head_types
            elif got is not None and got is not want:
                self.error(f"as() makes a {got} a {node.type_name}, which is a {want}", node.loc)
        elif isinstance(node, A.Functor):  # ord(symbol) -> number
            for part in node.args:
                if _type_of(part, env) is num:
                    self.error(f"'{node.name}' takes a symbol, got the number {part}", part.loc)
        elif isinstance(node, A.Aggregate) and node.target is not None:
            if _type_of(node.target, env) is sym:
                self.error(f"'{node.func}' aggregates numbers, got the symbol {node.target}", node.target.loc)
        # Atom arguments that are expressions: a number column needs a number.
        if isinstance(node, A.Atom) and node.name in self.program.decls:
            for col, arg in zip(self.program.decls[node.name].columns, node.args, strict=False):
                t = _type_of(arg, env)
                if isinstance(arg, (A.BinOp, A.Neg, A.Functor, A.Aggregate)) and t is not col.type:
                    self.error(f"column '{col.name}' of '{node.name}' is a {col.type}, got a number expression", arg.loc)



def _type_of(term: A.Term, env: dict[str, A.ColType]) -> A.ColType | None:
    if isinstance(term, A.Var):
        return env.get(term.name)
    if isinstance(term, A.Str):
        return A.ColType.SYMBOL
    if isinstance(term, A.Functor) and term.name is A.FunctorName.AS:
        return _type_of(term.args[0], env)
    if isinstance(term, (A.Num, A.BinOp, A.Neg, A.Functor, A.Aggregate)):
        return A.ColType.NUMBER
    return None


def _base(program: A.Program, name: str | None) -> str | None:
    """symbol or number for a known type name, else None."""
    if name is None:
        return None
    base = program.supertypes(name)[-1]
    return base if base in ("symbol", "number") else None


def _const_type(term: A.Term) -> A.ColType | None:
    if isinstance(term, A.Str):
        return A.ColType.SYMBOL
    if isinstance(term, A.Num):
        return A.ColType.NUMBER
    return None


def _children(node):
    if isinstance(node, A.Atom):
        return node.args
    if isinstance(node, A.Negation):
        return (node.target,)
    if isinstance(node, (A.Comparison, A.Builtin)):
        return (node.left, node.right)
    if isinstance(node, (A.BinOp, A.Neg, A.Functor)):
        return A.subterms(node)
    if isinstance(node, A.Aggregate):
        return ((node.target,) if node.target is not None else ()) + node.body
    return ()


def _walk(node, into_aggregates: bool = True):
    yield node
    if isinstance(node, A.Aggregate) and not into_aggregates:
        return
    for child in _children(node):
        yield from _walk(child, into_aggregates)


def _walk_rule(rule: A.Rule):
    yield from _walk(rule.head)
    for lit in rule.body:
        yield from _walk(lit)


def _all(term, cls) -> list:
    return [n for n in _walk(term) if isinstance(n, cls)]


def _has(term, cls) -> bool:
    return bool(_all(term, cls))


def _find(term, cls):
    return _all(term, cls)[0]
