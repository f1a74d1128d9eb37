"""Parser: the schema parses, exact parse-error messages, round trip."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchtalk.datalog import ColType, parse_file, parse_text
from torchtalk.datalog import ast as A
from torchtalk.errors import ErrorList, ParseError, SrcLoc

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).parent


def test_schema_parses_with_locations():
    prog = parse_file(ROOT / "facts/schema.dl")
    calls = prog.decls["calls"]
    assert [(c.name, c.type, c.type_name) for c in calls.columns] == [
        ("caller", ColType.SYMBOL, "FnId"),  # Note [Fact namespaces]
        ("callee", ColType.SYMBOL, "FnId"),
        ("file", ColType.SYMBOL, "symbol"),
        ("line", ColType.NUMBER, "number"),
        ("via", ColType.SYMBOL, "symbol"),
    ]
    text = (ROOT / "facts/schema.dl").read_text().splitlines()
    line = next(i for i, t in enumerate(text, 1) if t.startswith(".decl calls("))
    assert calls.loc == SrcLoc(str(ROOT / "facts/schema.dl"), line, 1)
    assert calls.columns[3].loc.col == len(".decl calls(caller: FnId, callee: FnId, file: symbol, ") + 1
    assert set(prog.inputs) == set(prog.decls)
    assert prog.outputs == ()
    assert prog.rules == ()


def test_include_relative_to_including_file(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub/base.dl").write_text(".decl e(a: number, b: number)\n.input e\n")
    (tmp_path / "sub/mid.dl").write_text('#include "base.dl"\n.decl p(a: number)\np(x) :- e(x, _).\n')
    (tmp_path / "main.dl").write_text(
        '#include "sub/mid.dl"\n#include "sub/base.dl"\n.output p\n'
    )
    prog = parse_file(tmp_path / "main.dl")
    assert list(prog.decls) == ["e", "p"]
    assert prog.decls["p"].loc == SrcLoc(str(tmp_path / "sub/mid.dl"), 2, 1)
    assert prog.inputs == ("e",) and prog.outputs == ("p",)
    assert str(prog.rules[0]) == "p(x) :- e(x, _)."


def test_missing_include_names_the_include(tmp_path):
    (tmp_path / "m.dl").write_text('\n#include "nope.dl"\n')
    with pytest.raises(ParseError) as ei:
        parse_file(tmp_path / "m.dl")
    assert ei.value.loc == SrcLoc(str(tmp_path / "m.dl"), 2, 1)
    assert ei.value.message == f"cannot read '{tmp_path / 'nope.dl'}': No such file or directory"


ERRORS = [
    (".comp C {}", "<text>:1:1: parse error: '.comp' is outside TorchTalk's Soufflé subset (see docs/datalog.md)"),
    (".decl e(x: Opx)", "<text>:1:9: parse error: unsupported type 'Opx' (supported: symbol, number)"),
    (".type T <: symbol\n.type T <: symbol", "<text>:2:1: parse error: type 'T' is declared twice"),
    (".type T = A | B\n.type A <: symbol\n.type B <: number", "<text>:1:1: parse error: union 'T' mixes symbol and number types"),
    ("#define X 1", "<text>:1:1: parse error: '#define' is outside TorchTalk's Soufflé subset (see docs/datalog.md)"),
    (".decl p(x: float)", "<text>:1:9: parse error: unsupported type 'float' (supported: symbol, number)"),
    ("p(x) :- q(x) r(x).", "<text>:1:14: parse error: unexpected 'r', expected ',' or ';' or '.'"),
    ("p(x) :- q(x);.", "<text>:1:14: parse error: unexpected '.', expected '!' or match/contains or a term"),
    ("p(x) :- (q(x); r(x).", "<text>:1:20: parse error: unexpected '.', expected ',' or ';' or ')'"),
    ("p(x) :- q(x)", "<text>:1:13: parse error: unexpected end of line, expected ',' or ';' or '.'"),
    (".decl p(x: number)\np(1.5).", "<text>:2:3: parse error: float '1.5' is outside TorchTalk's Soufflé subset (numbers are integers)"),
    (".input r(IO=file)", "<text>:1:9: parse error: '.input' options (IO=..., filename=...) are outside TorchTalk's Soufflé subset"),
    ("p(x) :- x = sum : { q(x) }.", "<text>:1:13: parse error: 'sum' aggregate needs a target expression"),
    ("p(x) :- x = count y : { q(y) }.", "<text>:1:13: parse error: 'count' aggregate takes no target expression"),
    (".decl r(,)", "<text>:1:9: parse error: unexpected ',', expected a name or ')'"),
    ("p(x) :- q(x), .", "<text>:1:15: parse error: unexpected '.', expected '!' or match/contains or a term"),
    ('p(ord(x, y)) :- q(x, y).', "<text>:1:3: parse error: 'ord' takes 1 argument, got 2"),
]


@pytest.mark.parametrize("src,message", ERRORS, ids=[e[0] for e in ERRORS])
def test_parse_error_message(src, message):
    with pytest.raises(ParseError) as ei:
        parse_text(src)
    assert ei.value.headline() == message


def test_parse_error_renders_caret():
    with pytest.raises(ParseError) as ei:
        parse_text(".decl p(x: number)\np(x) :- q(x) r(x).")
    assert ei.value.render().splitlines() == [
        "<text>:2:14: parse error: unexpected 'r', expected ',' or ';' or '.'",
        "    p(x) :- q(x) r(x).",
        "                 ^",
    ]


def test_duplicate_declarations_listed():
    with pytest.raises(ErrorList) as ei:
        parse_text(".decl p(x: number)\n.decl q(x: number)\n.decl p(y: symbol)\n.decl q(x: number)\n")
    assert [e.headline() for e in ei.value.errors] == [
        "<text>:3:1: semantic error: relation 'p' is declared twice (first at <text>:1:1)",
        "<text>:4:1: semantic error: relation 'q' is declared twice (first at <text>:2:1)",
    ]


def test_terms_are_typed():
    prog = parse_text('p(x, -3, "a\\"b", _, 1 - 2 * -y) :- e(x, y).')
    args = prog.rules[0].head.args
    assert args[0] == A.Var("x")
    assert args[1] == A.Num(-3)
    assert args[2] == A.Str('a"b')
    assert args[3] == A.Wildcard()
    assert args[4] == A.BinOp(A.ArithOp.SUB, A.Num(1), A.BinOp(A.ArithOp.MUL, A.Num(2), A.Neg(A.Var("y"))))
    assert args[4].loc == SrcLoc("<text>", 1, 21)


def test_round_trip_fixture():
    """Note [Round trip]: print -> parse gives the same AST, and printing is stable."""
    prog = parse_file(HERE / "fixtures/roundtrip.dl")
    assert len(prog.rules) >= 15
    text = str(prog)
    again = parse_text(text)
    assert again == prog
    assert str(again) == text


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "rules").glob("*.dl")))
def test_rule_library_round_trips(name):
    """Every file of the rule library prints to Soufflé text that parses back the same."""
    prog = parse_file(ROOT / "rules" / name)
    assert parse_text(str(prog)) == prog


def test_ord_functor_parses_prints_and_is_no_relation():
    prog = parse_text('.decl n(s: symbol, i: number)\n.decl e(s: symbol)\n'
                      'n(a, ord(a)) :- e(a).\nn(a, i) :- e(a), ord(a) = i.')
    head = prog.rules[0].head.args[1]
    assert head == A.Functor(A.FunctorName.ORD, (A.Var("a"),))
    assert head.loc == SrcLoc("<text>", 3, 6)
    assert [str(r) for r in prog.rules] == ["n(a, ord(a)) :- e(a).", "n(a, i) :- e(a), ord(a) = i."]
    # `ord(a) = i` is a comparison, not an atom of a relation named ord
    assert isinstance(prog.rules[1].body[1], A.Comparison)
    assert parse_text("\n".join(str(r) for r in prog.rules)).rules == prog.rules


def test_equal_programs_hash_equal():
    """Program's hash follows its structural equality (a set or dict key holds one of two equal programs)."""
    a = parse_text('.decl e(a: symbol)\ne("x").')
    b = parse_text('.decl e(a: symbol)\ne("x").')
    c = parse_text('.decl e(a: symbol)\ne("y").')
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != c and len({a, c}) == 2


def test_disjunction_is_its_disjunctive_normal_form():
    prog = parse_text(".decl a(x: number)\n.decl b(x: number)\n.decl c(x: number)\n.decl p(x: number)\n"
                      "p(x) :- a(x), (b(x) ; c(x), x > 1 ; (x = 1 ; x = 2)), !c(x) ; a(x), x = 9.")
    assert [str(r) for r in prog.rules] == [
        "p(x) :- a(x), b(x), !c(x).",
        "p(x) :- a(x), c(x), x > 1, !c(x).",
        "p(x) :- a(x), x = 1, !c(x).",
        "p(x) :- a(x), x = 2, !c(x).",
        "p(x) :- a(x), x = 9.",
    ]
    assert {r.loc for r in prog.rules} == {SrcLoc("<text>", 5, 1)}
    assert parse_text(str(prog)) == prog


def test_nullary_relations_round_trip():
    prog = parse_text(".decl ok()\n.decl e(x: number)\nok() :- e(_).\nok().\n.decl p(x: number)\np(x) :- e(x), !ok().")
    assert prog.decls["ok"].arity == 0
    assert [str(r) for r in prog.rules] == ["ok() :- e(_).", "ok().", "p(x) :- e(x), !ok()."]
    assert str(prog.decls["ok"]) == ".decl ok()"
    assert parse_text(str(prog)) == prog


def test_types_round_trip_and_give_columns_their_base():
    prog = parse_text(".decl e(o: Op, n: Count)\n.type Op <: symbol\n.type Count = number\n.type Node = Op | Fn\n"
                      ".type Fn <: symbol\n.decl f(x: Node)\nf(as(x, Fn)) :- e(x, _).")
    assert [(c.name, c.type, c.type_name) for c in prog.decls["e"].columns] == [
        ("o", ColType.SYMBOL, "Op"), ("n", ColType.NUMBER, "Count")]
    assert str(prog.rules[0]) == "f(as(x, Fn)) :- e(x, _)."
    assert prog.supertypes("Op") == ("Op", "Node", "symbol")
    assert prog.is_subtype("Fn", "Node") and not prog.is_subtype("Node", "Fn") and prog.is_subtype("Count", "number")
    assert parse_text(str(prog)) == prog


def test_a_parsed_program_is_kept_until_a_file_it_read_changes(tmp_path, monkeypatch):
    """Note [Parsed program cache]: eval parses a file once; an edit to it or
    to a file it includes is seen."""
    import os

    from torchtalk.datalog import parser

    monkeypatch.setenv("TORCHTALK_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "base.dl").write_text(".decl e(a: number)\n.input e\n")
    main = tmp_path / "main.dl"
    main.write_text('#include "base.dl"\n.decl p(a: number)\np(x) :- e(x).\n')
    first = parser.parse_file_cached(main)
    calls = []
    monkeypatch.setattr(parser, "parse_file", lambda p: calls.append(p) or parse_file(p))
    assert parser.parse_file_cached(main) == first and calls == []
    (tmp_path / "base.dl").write_text(".decl e(a: symbol)\n.input e\n")
    os.utime(tmp_path / "base.dl", ns=(1, 1))  # a different mtime whatever the clock's resolution
    again = parser.parse_file_cached(main)
    assert len(calls) == 1 and again.decls["e"].columns[0].type is ColType.SYMBOL
