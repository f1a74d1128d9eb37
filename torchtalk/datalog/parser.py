"""Parse Soufflé-subset text (grammar.tx, via textX) into the typed AST.

`#include "x.dl"` is resolved relative to the including file; a file is
included once, however many files include it (Note [Include once]).

Example:
    >>> prog = parse_text('.decl e(a: symbol)\\n.input e\\n')
    >>> prog.decls["e"].columns[0].type
    <ColType.SYMBOL: 'symbol'>
"""

from __future__ import annotations

import functools
import re
import threading
from pathlib import Path

from torchtalk.datalog import ast as A
from torchtalk.errors import ErrorList, ParseError, SemanticError, SrcLoc

GRAMMAR = Path(__file__).with_name("grammar.tx")

# Note [Include once]: Soufflé runs the C preprocessor, where including a file
# twice duplicates its declarations. Rule files here each include the schema
# they read, and a query combines several rule files, so we include every
# file once. For Soufflé itself, each file of facts/ and rules/ starts with
# `#pragma once` (which the preprocessor honours and we accept as a no-op),
# so `souffle rules/graph.dl` reads the schema once too. Programs sent to
# `souffle` by the engine are printed flat (no #include).


# Building a textX metamodel is not thread-safe: two built at once in two
# threads (a server's first calls, each parsing its first query) resolved
# rules against each other's grammar: "Unexisting rule 'Arg'" in
# tests/reliability/test_readers_during_swap.py under load. Both of
# TorchTalk's grammars are built under this lock; functools.cache keeps each.
TEXTX_LOCK = threading.Lock()


@functools.cache
def _metamodel():
    from textx import metamodel_from_file

    with TEXTX_LOCK:
        return metamodel_from_file(str(GRAMMAR), autokwd=False, memoization=True, use_regexp_group=False)


def parse_text(text: str, file: str = "<text>", *, base: Path | None = None) -> A.Program:
    """Parse program text; `#include`s resolve against `base` (default: cwd).

    Example:
        >>> parse_text('.decl p(x: number)\\np(1).').rules[0].head.args
        (Num(value=1),)
    """
    state = _State()
    state.read_text(text, file, base or Path.cwd())
    return state.program()


def parse_file(path: str | Path) -> A.Program:
    """Parse a .dl file and the files it #includes.

    Example:
        >>> parse_file("facts/schema.dl").decls["calls"].arity
        5
    """
    state = _State()
    state.read_file(Path(path), None)
    return state.program()


class _State:
    """Accumulates items over the main file and its includes."""

    def __init__(self) -> None:
        self.decls: dict[str, A.Decl] = {}
        self.types: dict[str, A.TypeDecl] = {}
        self.type_errors: list[ParseError] = []
        self.dup_decls: list[A.Decl] = []
        self.rules: list[A.Rule] = []
        self.directives: list[A.IODirective] = []
        self.sources: dict[str, str] = {}
        self.seen: set[Path] = set()

    def program(self) -> A.Program:
        if self.dup_decls:
            raise ErrorList(self._duplicate(d) for d in self.dup_decls)
        for name, t in self.types.items():  # every .type, used or not, has one base type
            self._base(name, t.loc)
        decls = {name: self._typed(d) for name, d in self.decls.items()}
        if len(self.type_errors) == 1:
            raise self.type_errors[0]
        if self.type_errors:
            raise ErrorList(dict.fromkeys(self.type_errors))
        return A.Program(
            decls,
            tuple(self.rules),
            tuple(self.directives),
            dict(self.types),
            tuple(self.sources),
            dict(self.sources),
        )

    def _typed(self, decl: A.Decl) -> A.Decl:
        """`decl` with each column's base type read off its declared type
        (a `.type` may come after the relations that use it, as in Soufflé)."""
        cols = []
        for c in decl.columns:
            base = self._base(c.type_name, c.loc)
            cols.append(A.Column(c.name, base or A.ColType.SYMBOL, c.loc, c.type_name))
        return A.Decl(decl.name, tuple(cols), decl.loc)

    def _base(self, name: str, loc: SrcLoc, seen: tuple[str, ...] = ()) -> A.ColType | None:
        if name in ("symbol", "number"):
            return A.ColType(name)
        t = self.types.get(name)
        if t is None or name in seen:
            allowed = ", ".join(["symbol", "number", *self.types])
            what = "a cycle of .type declarations" if t is not None else f"unsupported type '{name}' (supported: {allowed})"
            src = self.sources.get(loc.file, "").splitlines()
            line = src[loc.line - 1] if 0 < loc.line <= len(src) else None
            self.type_errors.append(ParseError(what, loc, source_line=line))
            return None
        parts = [t.base] if t.base is not None else list(t.union)
        bases = {self._base(p, t.loc, (*seen, name)) for p in parts}
        if len(bases) > 1:
            self.type_errors.append(ParseError(f"union '{name}' mixes symbol and number types", t.loc))
        return next(iter(bases))

    def _duplicate(self, decl: A.Decl) -> SemanticError:
        first = self.decls[decl.name].loc
        lines = self.sources.get(decl.loc.file, "").splitlines()
        src = lines[decl.loc.line - 1] if 0 < decl.loc.line <= len(lines) else None
        return SemanticError(
            f"relation '{decl.name}' is declared twice (first at {first})", decl.loc, source_line=src
        )

    def read_file(self, path: Path, loc: SrcLoc | None) -> None:
        key = path.resolve()
        if key in self.seen:
            return
        self.seen.add(key)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ParseError(f"cannot read '{path}': {exc.strerror or exc}", loc) from None
        except UnicodeDecodeError as exc:
            raise ParseError(f"cannot read '{path}': not UTF-8 text (byte {exc.start})", loc) from None
        self.read_text(text, str(path), path.parent)

    def read_text(self, text: str, file: str, base: Path) -> None:
        from textx import TextXSyntaxError

        self.sources[file] = text
        try:
            # textX reads `file` from disk for an empty string: an empty
            # program (or #included file) would be another file, or none
            model = _metamodel().model_from_str(text or "\n", file_name=file)
        except TextXSyntaxError as exc:
            raise _syntax_error(exc, file, text) from None
        if isinstance(model, str):  # blanks and comments only: textX gives no model
            return
        conv = _Converter(file, text, model._tx_parser)
        for item in model.items:
            self._add(conv, item, base)

    def _add(self, conv: _Converter, item, base: Path) -> None:
        kind = type(item).__name__
        loc = conv.loc(item)
        if kind == "Include":
            rel = A.unescape_string(item.path[1:-1])
            self.read_file(base / rel, loc)
        elif kind == "PragmaOnce":  # every file is included once anyway
            return
        elif kind == "Unsupported":
            raise conv.error(f"'{item.directive}' is outside TorchTalk's Soufflé subset (see docs/datalog.md)", loc)
        elif kind == "TypeDecl":
            t = A.TypeDecl(item.name, item.base or None, tuple(item.union), loc)
            if item.name in self.types or item.name in ("symbol", "number"):
                raise conv.error(f"type '{item.name}' is declared twice", loc)
            self.types[item.name] = t
        elif kind == "Decl":
            decl = conv.decl(item)
            if decl.name in self.decls:
                self.dup_decls.append(decl)
            else:
                self.decls[decl.name] = decl
        elif kind in ("Input", "Output"):
            io = A.IOKind.parse(kind.lower())
            for i, name in enumerate(item.names):
                self.directives.append(A.IODirective(io, name, loc if i == 0 else conv.loc(item)))
        else:
            self.rules.extend(conv.rules(item))


class _Converter:
    """textX model objects -> AST nodes, with locations."""

    def __init__(self, file: str, text: str, parser) -> None:
        self.file = file
        self.text = text
        self.parser = parser

    def loc(self, obj) -> SrcLoc:
        line, col = self.parser.pos_to_linecol(obj._tx_position)
        return SrcLoc(self.file, line, col)

    def error(self, message: str, loc: SrcLoc) -> ParseError:
        lines = self.text.splitlines()
        src = lines[loc.line - 1] if 0 < loc.line <= len(lines) else None
        return ParseError(message, loc, source_line=src)

    def decl(self, item) -> A.Decl:
        # the base types are read off the .types once all are known (_State._typed)
        cols = [A.Column(c.name, A.ColType.SYMBOL, self.loc(c), c.type) for c in item.columns]
        return A.Decl(item.name, tuple(cols), self.loc(item))

    def rules(self, item) -> list[A.Rule]:
        """One rule per alternative of the body's disjunctive normal form
        (`p(x) :- a(x), (b(x) ; c(x)).` is `p(x) :- a(x), b(x).` and
        `p(x) :- a(x), c(x).`), as Soufflé reads it."""
        head, loc = self.atom(item.head), self.loc(item)
        if item.body is None:
            return [A.Rule(head, (), loc)]
        return [A.Rule(head, body, loc) for body in dict.fromkeys(self.alternatives(item.body))]

    def alternatives(self, disjunction) -> list[tuple[A.Literal, ...]]:
        """The conjunctions a body's disjunction stands for, in order."""
        out: list[tuple[A.Literal, ...]] = []
        for conj in disjunction.alternatives:
            partial: list[tuple[A.Literal, ...]] = [()]
            for part in conj.items:
                options = (self.alternatives(part.body) if type(part).__name__ == "Group"
                           else [(self.literal(part),)])
                partial = [done + more for done in partial for more in options]
            out += partial
        return out

    def atom(self, item) -> A.Atom:
        return A.Atom(item.name, tuple(self.term(a) for a in item.args), self.loc(item))

    def literal(self, item) -> A.Literal:
        kind = type(item).__name__
        loc = self.loc(item)
        if kind == "Atom":
            return self.atom(item)
        if kind == "Negation":
            return A.Negation(self.literal(item.target), loc)  # type: ignore[arg-type]
        if kind == "Builtin":
            name = A.BuiltinName.parse(item.name)
            return A.Builtin(name, self.term(item.left), self.term(item.right), loc)
        op = A.CmpOp.parse(item.op)
        return A.Comparison(op, self.term(item.left), self.term(item.right), loc)

    def term(self, item) -> A.Term:
        kind = type(item).__name__
        if kind in ("Sum", "Prod"):
            return self.chain(item)
        loc = self.loc(item)
        if kind == "Var":
            return A.Var(item.name, loc)
        if kind == "Wildcard":
            return A.Wildcard(loc)
        if kind == "Number":
            return A.Num(int(item.value), loc)
        if kind == "String":
            return A.Str(A.unescape_string(item.value[1:-1]), loc)
        if kind == "Paren":
            return self.term(item.expr)
        if kind == "Neg":
            inner = self.term(item.operand)
            if isinstance(inner, A.Num) and inner.value >= 0:
                return A.Num(-inner.value, loc)
            return A.Neg(inner, loc)
        if kind == "Aggregate":
            return self.aggregate(item, loc)
        if kind == "Cast":
            return A.Functor(A.FunctorName.AS, (self.term(item.arg),), loc, item.type)
        if kind == "Call":
            args = tuple(self.term(a) for a in item.args)
            if len(args) != 1:
                raise self.error(f"'{item.name}' takes 1 argument, got {len(args)}", loc)
            return A.Functor(A.FunctorName.parse(item.name, loc, "functor"), args, loc)
        raise self.error(f"internal: unexpected node {kind}", loc)

    def chain(self, item) -> A.Term:
        """`a + b - c` -> BinOp(-, BinOp(+, a, b), c): left associative."""
        result = self.term(item.operands[0])
        for op, operand in zip(item.operators, item.operands[1:], strict=True):
            right = self.term(operand)
            result = A.BinOp(A.ArithOp.parse(op), result, right, _loc_of(result))
        return result

    def aggregate(self, item, loc: SrcLoc) -> A.Aggregate:
        func = A.AggFunc.parse(item.func)
        target = self.term(item.target) if item.target is not None else None
        body = tuple(self.literal(lit) for lit in item.body)
        try:
            return A.Aggregate(func, target, body, loc)
        except ParseError as err:
            raise self.error(err.message, loc) from None


def _loc_of(term: A.Term) -> SrcLoc:
    return term.loc


def _syntax_error(exc, file: str, text: str) -> ParseError:
    """A textX syntax error as a one-line ParseError with the source line."""
    lines = text.splitlines()
    line, col = exc.line, exc.col
    src = lines[line - 1] if 0 < line <= len(lines) else ""
    rest = src[col - 1 :] if src else ""
    m = _TOKEN.match(rest)
    found = m.group(0)[:30] if m else ""
    expected = _expected(exc)
    directive = src.lstrip().split("(")[0].split()[0] if src.strip() else ""
    if found == "(" and directive in (".input", ".output"):
        msg = f"'{directive}' options (IO=..., filename=...) are outside TorchTalk's Soufflé subset"
    elif _FLOAT.fullmatch(found):
        msg = f"float '{found}' is outside TorchTalk's Soufflé subset (numbers are integers)"
    else:
        msg = f"unexpected '{found}'" if found else "unexpected end of line"
        if expected:
            msg += f", expected {expected}"
    return ParseError(msg, SrcLoc(file, line, col), source_line=src if lines else None)


_TOKEN = re.compile(r'\d+\.\d+|\w+|"(\\.|[^"\\])*"?|:-|<=|>=|!=|\S')
_FLOAT = re.compile(r"\d+\.\d+")

_RULE_NAMES = {
    "Ident": "a name",
    "RelName": "a name",
    "FunctorName": "a name",
    "DLString": "a string",
    "NumberLit": "a number",
    "WildcardLit": "'_'",
    "AggFunc": "an aggregate",
    "BuiltinName": "match/contains",
    "CmpOp": "a comparison",
    "SumOp": "an operator",
    "ProdOp": "an operator",
    "Comment": None,
    "UnsupportedDirective": None,
}


def _expected(exc) -> str:
    names: list[str] = []
    for rule in getattr(exc, "expected_rules", []) or []:
        rname = getattr(rule, "rule_name", "") or ""
        if rname == "sep":  # a list's separator: ',' or, between alternatives, ';'
            label = f"'{getattr(rule, 'to_match', ',')}'"
        elif rname in _RULE_NAMES:
            label = _RULE_NAMES[rname]
        elif hasattr(rule, "to_match") and isinstance(rule.to_match, str) and rname == "":
            label = f"'{rule.to_match}'"
        else:
            label = rname or getattr(rule, "name", "")
            if label.startswith("__"):
                label = ""
        if label and label not in names:
            names.append(label)
    term_parts = {"a name", "a number", "a string", "'_'", "an aggregate", "'-'", "'('", "'as'"}
    if {"a name", "a number"} <= set(names):
        names = [n for n in names if n not in term_parts]
        names.append("a term")
    return " or ".join(names[:6])


# Note [Parsed program cache]: `torchtalk eval PROG.dl` spends about as long
# importing textX, building its metamodel and parsing as evaluating a small
# program. The program it parsed (includes resolved) is kept, pickled, in the
# cache dir under the main file's path, with each file it read and that
# file's size and mtime; it is used again only while all of them are the same.
PARSED_FORMAT = "1"


def parse_file_cached(path: str | Path) -> A.Program:
    """`parse_file(path)`, from the cache when no file it read has changed
    (Note [Parsed program cache]); a cache that cannot be read or written is
    ignored."""
    import hashlib
    import pickle

    from torchtalk.paths import cache_dir

    path = Path(path).resolve()
    key = hashlib.sha1(f"{PARSED_FORMAT}\0{path}".encode()).hexdigest()[:20]
    store = cache_dir() / "parsed" / f"{key}.pickle"
    try:
        stamps, program = pickle.loads(store.read_bytes())
        if stamps and stamps == _stamps([f for f, _ in stamps]):
            return program
    except (OSError, ValueError, EOFError, pickle.UnpicklingError, AttributeError, TypeError):
        pass
    program = parse_file(path)
    try:
        import os
        import tempfile

        store.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=store.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            fh.write(pickle.dumps((_stamps(list(program.files)), program)))
        os.replace(tmp, store)
    except OSError:
        pass
    return program


def _stamps(files: list[str]) -> list[tuple[str, tuple[int, int] | None]]:
    out = []
    for f in files:
        try:
            st = Path(f).stat()
            out.append((f, (st.st_size, st.st_mtime_ns)))
        except OSError:
            out.append((f, None))
    return out
