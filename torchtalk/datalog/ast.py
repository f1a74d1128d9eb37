"""Typed AST of TorchTalk's Soufflé subset.

Every node is a frozen dataclass with a `loc` (file:line:col) that takes no
part in equality, so `parse(print(ast)) == ast` (Note [Round trip]).
`str(node)` prints valid Soufflé text.

Example:
    >>> from torchtalk.datalog import parse_text
    >>> prog = parse_text('.decl e(a: number, b: number)\\np(x) :- e(x, _).')
    >>> str(prog.rules[0])
    'p(x) :- e(x, _).'
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from enum import StrEnum

from torchtalk.errors import ParseError, SrcLoc

NOLOC = SrcLoc("<unknown>", 0, 0)


def _loc() -> SrcLoc:
    return field(default=NOLOC, compare=False, repr=False)  # type: ignore[return-value]


class _StrictEnum(StrEnum):
    """A closed vocabulary whose `parse` fails loudly on anything else."""

    @classmethod
    def parse(cls, text: str, loc: SrcLoc | None = None, what: str = "value"):
        for member in cls:
            if member.value == text:
                return member
        allowed = ", ".join(m.value for m in cls)
        raise ParseError(f"unsupported {what} '{text}' (supported: {allowed})", loc)


class ColType(_StrictEnum):
    SYMBOL = "symbol"
    NUMBER = "number"


class CmpOp(_StrictEnum):
    EQ = "="
    NE = "!="
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="


class ArithOp(_StrictEnum):
    ADD = "+"
    SUB = "-"
    MUL = "*"
    DIV = "/"
    MOD = "%"


class AggFunc(_StrictEnum):
    COUNT = "count"
    SUM = "sum"
    MIN = "min"
    MAX = "max"


class FunctorName(_StrictEnum):
    ORD = "ord"  # ord(s): the number of symbol s, one-to-one (Note [ord] in compile.py)
    AS = "as"  # as(x, T): x taken as a value of type T (Note [Types])


class BuiltinName(_StrictEnum):
    MATCH = "match"  # match(regex, s): s matches regex entirely
    CONTAINS = "contains"  # contains(sub, s): sub is a substring of s


# ------------------------------------------------------------------ terms


@dataclass(frozen=True)
class Var:
    name: str
    loc: SrcLoc = _loc()

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Wildcard:
    loc: SrcLoc = _loc()

    def __str__(self) -> str:
        return "_"


@dataclass(frozen=True)
class Str:
    value: str
    loc: SrcLoc = _loc()

    def __str__(self) -> str:
        return '"' + escape_string(self.value) + '"'


@dataclass(frozen=True)
class Num:
    value: int
    loc: SrcLoc = _loc()

    def __str__(self) -> str:
        return str(self.value)


@dataclass(frozen=True)
class Neg:
    operand: Term
    loc: SrcLoc = _loc()

    def __str__(self) -> str:
        return "-" + _wrap(self.operand)


@dataclass(frozen=True)
class BinOp:
    op: ArithOp
    left: Term
    right: Term
    loc: SrcLoc = _loc()

    def __str__(self) -> str:
        return f"{_wrap(self.left)} {self.op} {_wrap(self.right)}"


@dataclass(frozen=True)
class Aggregate:
    """`count : { body }`, `sum e : { body }`, `min e : {...}`, `max e : {...}`."""

    func: AggFunc
    target: Term | None
    body: tuple[Literal, ...]
    loc: SrcLoc = _loc()

    def __post_init__(self) -> None:
        if (self.func is AggFunc.COUNT) != (self.target is None):
            raise ParseError(f"'{self.func}' aggregate {'takes no' if self.func is AggFunc.COUNT else 'needs a'} target expression", self.loc)

    def __str__(self) -> str:
        body = ", ".join(str(lit) for lit in self.body)
        target = f" {self.target}" if self.target is not None else ""
        return f"{self.func}{target} : {{ {body} }}"


@dataclass(frozen=True)
class Functor:
    """`ord(s)`: a function of its arguments (Soufflé's intrinsic functors);
    `as(x, T)`: x as a value of type `T` (`type_name`, Note [Types])."""

    name: FunctorName
    args: tuple[Term, ...]
    loc: SrcLoc = _loc()
    type_name: str | None = None

    def __str__(self) -> str:
        extra = [self.type_name] if self.type_name is not None else []
        return f"{self.name}({', '.join([*(str(a) for a in self.args), *extra])})"


Term = Var | Wildcard | Str | Num | Neg | BinOp | Functor | Aggregate


def subterms(term: Term) -> tuple[Term, ...]:
    """The terms directly inside an arithmetic or functor term (not an aggregate's)."""
    if isinstance(term, Neg):
        return (term.operand,)
    if isinstance(term, BinOp):
        return (term.left, term.right)
    if isinstance(term, Functor):
        return term.args
    return ()


def _wrap(term: Term) -> str:
    return f"({term})" if isinstance(term, (BinOp, Aggregate)) else str(term)


# ------------------------------------------------------------------ literals


@dataclass(frozen=True)
class Atom:
    name: str
    args: tuple[Term, ...]
    loc: SrcLoc = _loc()

    def __str__(self) -> str:
        return f"{self.name}({', '.join(str(a) for a in self.args)})"


@dataclass(frozen=True)
class Builtin:
    """`match(regex, s)` / `contains(sub, s)`: string constraints."""

    name: BuiltinName
    left: Term
    right: Term
    loc: SrcLoc = _loc()

    def __str__(self) -> str:
        return f"{self.name}({self.left}, {self.right})"


@dataclass(frozen=True)
class Negation:
    target: Atom | Builtin
    loc: SrcLoc = _loc()

    def __str__(self) -> str:
        return f"!{self.target}"


@dataclass(frozen=True)
class Comparison:
    op: CmpOp
    left: Term
    right: Term
    loc: SrcLoc = _loc()

    def __str__(self) -> str:
        return f"{self.left} {self.op} {self.right}"


Literal = Atom | Builtin | Negation | Comparison


# ------------------------------------------------------------------ clauses


@dataclass(frozen=True)
class Rule:
    """`head :- body.`; a fact when `body` is empty (`head.`)."""

    head: Atom
    body: tuple[Literal, ...] = ()
    loc: SrcLoc = _loc()

    @property
    def is_fact(self) -> bool:
        return not self.body

    @functools.cached_property
    def reads(self) -> tuple[tuple[str, bool], ...]:
        """(relation, strict) of each atom the body reads, in order, as
        `literal_atoms` gives them: kept with the rule, which the programs
        a query's passes make from the library share (Note [Rule reads])."""
        return tuple((atom.name, strict) for lit in self.body for atom, strict in literal_atoms(lit))

    @functools.cached_property
    def positives(self) -> tuple[str, ...]:
        """The relations of the body's positive atoms (kept as `reads` is)."""
        return tuple(lit.name for lit in self.body if isinstance(lit, Atom))

    def __str__(self) -> str:
        if not self.body:
            return f"{self.head}."
        return f"{self.head} :- {', '.join(str(lit) for lit in self.body)}."


@dataclass(frozen=True)
class Column:
    """A column: `type` is its base type (symbol or number), `type_name` the
    type it is declared with (the base type, or a `.type` of the program)."""

    name: str
    type: ColType
    loc: SrcLoc = _loc()
    type_name: str = ""

    def __post_init__(self) -> None:
        if not self.type_name:
            object.__setattr__(self, "type_name", str(self.type))

    def __str__(self) -> str:
        return f"{self.name}: {self.type_name}"


# Note [Types]: as in Soufflé, `.type T <: symbol` (or `<: number`, or `<:`
# another such type) declares a subtype, and `.type U = A | B` a union of
# subtypes. Values are the base type's; the checker (analysis/checks.py)
# uses the names: a variable bound in columns of two types neither of which
# is a subtype of the other is an error (an op name joined with a function
# id), and a head's argument must be of a subtype of its column's type,
# which `as(x, T)` asserts. A constant fits any type of its base type.
@dataclass(frozen=True)
class TypeDecl:
    """`.type name <: base` (a subtype) or `.type name = a | b` (a union)."""

    name: str
    base: str | None = None
    union: tuple[str, ...] = ()
    loc: SrcLoc = _loc()

    def __str__(self) -> str:
        if self.base is not None:
            return f".type {self.name} <: {self.base}"
        return f".type {self.name} = {' | '.join(self.union)}"


@dataclass(frozen=True)
class Decl:
    name: str
    columns: tuple[Column, ...]
    loc: SrcLoc = _loc()

    @property
    def arity(self) -> int:
        return len(self.columns)

    def __str__(self) -> str:
        return f".decl {self.name}({', '.join(str(c) for c in self.columns)})"


class IOKind(_StrictEnum):
    INPUT = "input"
    OUTPUT = "output"


@dataclass(frozen=True)
class IODirective:
    kind: IOKind
    name: str
    loc: SrcLoc = _loc()

    def __str__(self) -> str:
        return f".{self.kind} {self.name}"


@dataclass(frozen=True)
class Program:
    """A parsed program, includes resolved.

    decls:      relation name -> Decl, in source order
    rules:      rules and facts, in source order
    directives: every .input/.output with its location
    inputs / outputs: relation names of the .input / .output directives
    files:      the files read (the main file first), for messages
    sources:    file -> text, to show the source line of an error
    types:      type name -> TypeDecl, the `.type`s (Note [Types])
    """

    decls: dict[str, Decl]
    rules: tuple[Rule, ...] = ()
    directives: tuple[IODirective, ...] = ()
    types: dict[str, TypeDecl] = field(default_factory=dict)
    files: tuple[str, ...] = field(default=(), compare=False)
    sources: dict[str, str] = field(default_factory=dict, compare=False, repr=False)
    # What has been computed from this program (`cached`); a program made
    # from it (dataclasses.replace) starts with an empty one.
    memo: dict = field(default_factory=dict, init=False, compare=False, repr=False)

    def __getstate__(self) -> dict:
        """Pickled without what was computed from it (memo, hash, indexes)."""
        return {f: getattr(self, f) for f in ("decls", "rules", "directives", "types", "files", "sources")}

    def __setstate__(self, state: dict) -> None:
        for k, v in state.items():
            object.__setattr__(self, k, v)
        object.__setattr__(self, "memo", {})

    def cached(self, key, compute):
        """`compute()`, once per `key` for this program (its analyses and the
        programs and plans derived from it live with it, as Soufflé's
        translation unit owns its analyses)."""
        memo = self.memo
        if key in memo:
            return memo[key]
        value = compute()
        return memo.setdefault(key, value)

    @property
    def inputs(self) -> tuple[str, ...]:
        # kept: the query layer asks a library's program hundreds of times a call
        return self.cached("inputs", lambda: _unique(d.name for d in self.directives if d.kind is IOKind.INPUT))

    @property
    def outputs(self) -> tuple[str, ...]:
        return self.cached("outputs", lambda: _unique(d.name for d in self.directives if d.kind is IOKind.OUTPUT))

    def rules_for(self, name: str) -> tuple[Rule, ...]:
        """The rules and facts whose head is relation `name`."""
        return self._rules_by_head.get(name, ())

    @functools.cached_property
    def _rules_by_head(self) -> dict[str, tuple[Rule, ...]]:
        out: dict[str, list[Rule]] = {}
        for r in self.rules:
            out.setdefault(r.head.name, []).append(r)
        return {k: tuple(v) for k, v in out.items()}

    def source_line(self, loc: SrcLoc | None) -> str | None:
        """The text of the line at `loc`, if its file was read."""
        if loc is None or loc.file not in self.sources:
            return None
        lines = self.sources[loc.file].splitlines()
        return lines[loc.line - 1] if 0 < loc.line <= len(lines) else None

    def __str__(self) -> str:
        parts = [str(t) for t in self.types.values()]
        parts += [str(d) for d in self.decls.values()]
        parts += [str(d) for d in self.directives]
        parts += [str(r) for r in self.rules]
        return "\n".join(parts) + "\n"

    def __hash__(self) -> int:  # as __eq__: structural (the fields it compares), computed once
        return self._hash

    @functools.cached_property
    def _hash(self) -> int:
        return hash((tuple(self.decls.items()), self.rules, self.directives, tuple(self.types.items())))

    def supertypes(self, name: str) -> tuple[str, ...]:
        """`name` and every type it is a subtype of, the base type last
        (a union is a supertype of each of its members)."""
        return self.cached(("supertypes", name), lambda: _supertypes(self.types, name))

    def is_subtype(self, sub: str, sup: str) -> bool:
        """Every value of type `sub` is one of type `sup` (Note [Types])."""
        return sup in self.supertypes(sub)


def _supertypes(types: dict[str, TypeDecl], name: str) -> tuple[str, ...]:
    out: list[str] = []
    todo = [name]
    while todo:
        t = todo.pop(0)
        if t in out:
            continue
        out.append(t)
        decl = types.get(t)
        if decl is not None and decl.base is not None:
            todo.append(decl.base)
        if decl is not None and decl.union:  # a union's values are its members' base type's
            todo.append(_base_name(types, decl.union[0]))
        todo += [u.name for u in types.values() if t in u.union]
    base = [t for t in out if t in ("symbol", "number")]
    return tuple([t for t in out if t not in base] + base)


def _base_name(types: dict[str, TypeDecl], name: str) -> str:
    """symbol or number: the base type of `name` (down its first union member)."""
    seen = set()
    while name in types and name not in seen:
        seen.add(name)
        t = types[name]
        name = t.base if t.base is not None else t.union[0]
    return name


def _unique(names) -> tuple[str, ...]:
    return tuple(dict.fromkeys(names))


_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"}
_UNESCAPES = {"\\": "\\", '"': '"', "n": "\n", "t": "\t", "r": "\r"}


def escape_string(value: str) -> str:
    """Soufflé string-literal escaping: `a"b` -> `a\\"b`."""
    return "".join(_ESCAPES.get(ch, ch) for ch in value)


def unescape_string(body: str) -> str:
    """Inverse of `escape_string` (unknown escapes are kept verbatim)."""
    out, i = [], 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body) and body[i + 1] in _UNESCAPES:
            out.append(_UNESCAPES[body[i + 1]])
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def term_vars(term: Term) -> list[Var]:
    """Variables of a term outside aggregates (aggregate bodies are scopes)."""
    if isinstance(term, Var):
        return [term]
    return [v for t in subterms(term) for v in term_vars(t)]


def all_var_names(term: Term) -> list[str]:
    """The variable names in `term`, each occurrence, aggregates' bodies and
    targets included (`term_vars` stops at an aggregate)."""
    if isinstance(term, Var):
        return [term.name]
    if isinstance(term, Aggregate):
        inner = [v for lit in term.body for v in literal_var_names(lit)]
        return inner + (all_var_names(term.target) if term.target is not None else [])
    return [v for t in subterms(term) for v in all_var_names(t)]


def literal_var_names(lit: Literal) -> list[str]:
    """Every variable occurrence of a literal, by name, aggregates' included."""
    return [v for t in literal_terms(lit) for v in all_var_names(t)]


def literal_terms(lit: Literal) -> tuple[Term, ...]:
    """The terms a literal holds: an atom's arguments (a negated one's too),
    a comparison's or builtin's two sides."""
    if isinstance(lit, Atom):
        return lit.args
    if isinstance(lit, Negation):
        return literal_terms(lit.target)
    return (lit.left, lit.right)


def literal_atoms(lit: Literal) -> list[tuple[Atom, bool]]:
    """(atom, strict) pairs a literal reads, aggregate bodies included.

    `strict` marks an atom under negation or inside an aggregate: its relation
    must be complete (in a lower stratum) before this literal is evaluated.
    """
    if isinstance(lit, Atom):
        out = [(lit, False)]
        terms: tuple = lit.args
    elif isinstance(lit, Negation):
        inner = literal_atoms(lit.target)
        return [(a, True) for a, _ in inner]
    else:
        out, terms = [], (lit.left, lit.right)
    for t in terms:
        for agg in term_aggregates(t):
            for sub in agg.body:
                out += [(a, True) for a, _ in literal_atoms(sub)]
    return out


def term_aggregates(term: Term) -> list[Aggregate]:
    """Aggregates directly inside a term (not nested inside other aggregates)."""
    if isinstance(term, Aggregate):
        return [term]
    return [a for t in subterms(term) for a in term_aggregates(t)]
