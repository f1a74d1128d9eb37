"""Layer deltas (Note [Layer deltas]) and applying them to a DB (Note
[Update in place]) on small inputs: what the sink writes, what `emit`
chooses, and a multiset delete."""

from __future__ import annotations

import duckdb
import pytest

from extractors.base import ExtractContext, emit
from extractors.layers import LAYERS
from torchtalk import index as index_mod
from torchtalk import store, update
from torchtalk.errors import ExtractError
from torchtalk.query.derived import moved_rows

OPS = LAYERS[0]


@pytest.fixture(scope="module")
def schema():
    return index_mod.load_schema()


def _previous(tmp_path, schema):
    prev = tmp_path / "prev"
    prev.mkdir()
    sink = index_mod.LayerSink(OPS, schema, prev)
    sink.add_rows("op_tag", [("add", "core"), ("mul", "core"), ("mul", "pointwise")])
    sink.add_rows("tag", [("core", "d", "t.yaml", 1)])
    sink.close()
    return prev


def test_delta_edits_the_previous_files(tmp_path, schema):
    prev = _previous(tmp_path, schema)
    out = tmp_path / "out"
    out.mkdir()
    sink = index_mod.LayerSink(OPS, schema, out, previous=prev)
    sink.delta("op_tag", [("mul", "core")], [("sub", "core")])
    sink.close()
    assert (out / "op_tag.facts").read_text() == "add\tcore\nmul\tpointwise\nsub\tcore\n"
    assert (out / "tag.facts").read_text() == "core\td\tt.yaml\t1\n"  # untouched: kept
    assert (out / "tag.facts").stat().st_ino == (prev / "tag.facts").stat().st_ino
    assert sink.counts == {"op_tag": 3, "tag": 1}
    assert sink.deltas == {"op_tag": (["mul\tcore\n"], ["sub\tcore\n"])}
    assert sink.changed()


def test_a_memo_keeps_the_lines_of_the_files_written(tmp_path, schema, monkeypatch):
    """Note [Lines kept]: the next delta over a file the sink wrote (moved as
    its facts dir is) reads its lines from the memo, not the file; a file
    written anew since is read; a relation kept is counted as the last
    layer.json says."""
    import os

    from torchtalk import sink as sink_mod

    prev, memo = _previous(tmp_path, schema), {}
    first = tmp_path / "first"
    first.mkdir()
    sink = index_mod.LayerSink(OPS, schema, first, previous=prev, memo=memo)
    sink.delta("op_tag", [("mul", "core")], [("sub", "core")])
    sink.close()
    counts = dict(sink.counts)  # what its layer.json says
    moved = tmp_path / "moved"
    os.rename(first, moved)  # as a facts dir is swapped into place
    reads: list[str] = []
    read = sink_mod.fact_lines
    monkeypatch.setattr(sink_mod, "fact_lines", lambda path: (reads.append(path.name), read(path))[1])
    out = tmp_path / "out"
    out.mkdir()
    sink = index_mod.LayerSink(OPS, schema, out, previous=moved, memo=memo, previous_counts=counts)
    sink.delta("op_tag", [("sub", "core")], [("div", "core")])
    sink.close()
    assert reads == [] and sink.counts == {"op_tag": 3, "tag": 1}
    assert (out / "op_tag.facts").read_text() == "add\tcore\nmul\tpointwise\ndiv\tcore\n"
    again = tmp_path / "again"
    again.mkdir()
    (out / "op_tag.facts").unlink()
    (out / "op_tag.facts").write_text("add\tcore\ndiv\tcore\n")  # another writer's file: read
    sink = index_mod.LayerSink(OPS, schema, again, previous=out, memo=memo)
    sink.delta("op_tag", [("div", "core")], [])
    sink.close()
    assert reads == ["op_tag.facts", "tag.facts"]  # tag: no counts given, so counted
    assert (again / "op_tag.facts").read_text() == "add\tcore\n"


def test_delta_checks_rows_and_what_it_removes(tmp_path, schema):
    prev = _previous(tmp_path, schema)
    out = tmp_path / "out"
    out.mkdir()
    sink = index_mod.LayerSink(OPS, schema, out, previous=prev)
    with pytest.raises(ExtractError) as err:
        sink.delta("tag", [], [("x", "d", "t.yaml", "2")])
    assert str(err.value) == "extract error: layer ops: relation tag: column line is a number, got '2'"
    with pytest.raises(ExtractError) as err:
        sink.delta("op_tag", [("div", "core")], [])
    assert str(err.value) == ("extract error: layer ops: relation op_tag: delta removes 1 rows the last run "
                              "did not have, e.g. 'div\\tcore'")
    with pytest.raises(ExtractError):
        index_mod.LayerSink(OPS, schema, out).delta("op_tag", [], [])  # no previous run


def test_a_run_without_changes_keeps_its_generation(tmp_path, schema):
    prev = _previous(tmp_path, schema)
    out = tmp_path / "out"
    out.mkdir()
    rows = {"op_tag": [("add", "core"), ("mul", "core"), ("mul", "pointwise")], "tag": [("core", "d", "t.yaml", 1)]}
    ctx = ExtractContext(tmp_path, tmp_path, previous="g1", generation="g2")
    sink = index_mod.LayerSink(OPS, schema, out, previous=prev)
    assert emit(ctx, sink, rows, ("g1", rows)) == "g1"
    sink.close()
    assert sink.deltas == {} and not sink.changed()
    assert (out / "op_tag.facts").read_text() == (prev / "op_tag.facts").read_text()


def test_emit_writes_in_full_unless_the_kept_rows_are_the_dbs(tmp_path, schema):
    prev = _previous(tmp_path, schema)
    rows = {"op_tag": [("add", "core")]}
    for i, kept in enumerate((None, ("g0", rows), (None, rows))):  # none kept, another generation, unknown
        out = tmp_path / f"out{i}"
        out.mkdir()
        sink = index_mod.LayerSink(OPS, schema, out, previous=prev)
        assert emit(ExtractContext(tmp_path, tmp_path, previous="g1", generation="g2"), sink, rows, kept) == "g2"
        sink.close()
        assert sink.deltas is None and sink.counts == {"op_tag": 1}
        assert not (out / "tag.facts").exists()


def test_a_lost_row_deletes_one_copy(tmp_path, schema):
    con = duckdb.connect()
    decl = schema.decls["binds"]
    store.create_tables(con, {"binds": decl})
    row = ("torch.relu", "torch._C._nn.relu", "wrapper", "torch/nn/functional.py", 7)
    con.executemany("insert into binds values (?, ?, ?, ?, ?)", [row, row, row[:4] + (8,)])
    con.execute("insert into torchtalk_relations values ('binds', 3)")
    line = "\t".join(map(str, row)) + "\n"
    update._apply_relation(con, decl, [line], ["a\tb\twrapper\tf.py\t1\n"], tmp_path, "_1")
    assert sorted(con.execute("select * from binds").fetchall()) == sorted(
        [row, row[:4] + (8,), ("a", "b", "wrapper", "f.py", 1)])
    with pytest.raises(Exception) as err:
        update._apply_relation(con, decl, ["x\ty\twrapper\tf.py\t1\n"], [], tmp_path, "_2")
    assert str(err.value) == ("store error: relation binds: 1 rows to delete, 0 found "
                              "(re-run `torchtalk index --force`)")


def test_changed_relations_ignores_a_row_that_moved_between_layers():
    deltas = {"binds": (["a\n"], ["a\n"]), "calls": (["x\n"], [])}
    assert update.changed_relations(deltas) == frozenset({"calls"})


PROGRAM = """
.decl calls(caller: symbol, callee: symbol, file: symbol, line: number)
.input calls
.decl edge(a: symbol, b: symbol)
edge(a, b) :- calls(a, b, _, _).
.decl at(a: symbol, f: symbol, l: number)
at(a, f, l) :- calls(a, _, f, l).
.decl late(a: symbol)
late(a) :- calls(a, _, _, l), l > 100.
.decl lonely(a: symbol)
lonely(a) :- edge(a, _), !calls(_, a, _, _).
.decl hops(a: symbol, n: number)
hops(a, n) :- edge(a, _), n = count : { calls(a, _, _, _) }.
"""


def test_needed_columns_follow_the_rules():
    from torchtalk.datalog import parse_text
    from torchtalk.query.derived import needed_columns

    p = parse_text(PROGRAM)
    assert needed_columns(p, "edge") == {"edge": {0, 1}, "calls": {0, 1}}
    assert needed_columns(p, "at")["calls"] == {0, 2, 3}
    assert needed_columns(p, "late")["calls"] == {0, 3}
    assert needed_columns(p, "lonely")["calls"] == {0, 1, 2, 3}  # under a negation: every column
    assert needed_columns(p, "hops")["calls"] == {0, 1, 2, 3}  # in an aggregate: every column


def test_moved_compares_projections_as_sets(tmp_path, schema):
    con = duckdb.connect()
    decl = schema.decls["calls"]
    store.create_tables(con, {"calls": decl})
    rows = [("f", "g", "a.cpp", 10, "unique"), ("f", "g", "a.cpp", 12, "unique"), ("h", "g", "a.cpp", 20, "unique")]
    con.executemany("insert into calls values (?, ?, ?, ?, ?)", rows)
    con.execute("insert into torchtalk_relations values ('calls', 3)")

    def line(r):
        return "\t".join(map(str, r)) + "\n"

    # a line inserted above f's first call: it moves from 10 to 11
    temps = update._apply_relation(con, decl, [line(rows[0])], [line(rows[0][:3] + (11, "unique"))], tmp_path, "_a")
    assert not moved_rows(con, decl, *temps, frozenset({0, 1}))
    assert moved_rows(con, decl, *temps, frozenset({3}))
    assert not moved_rows(con, decl, *temps, frozenset())
    # h's call goes: (h, g) is lost, (f, g) and the callee g stay
    temps = update._apply_relation(con, decl, [line(rows[2])], [], tmp_path, "_b")
    assert moved_rows(con, decl, *temps, frozenset({0, 1}))
    assert not moved_rows(con, decl, *temps, frozenset({1}))
    # a new caller
    temps = update._apply_relation(con, decl, [], [line(("k", "g", "b.cpp", 1, "unique"))], tmp_path, "_c")
    assert moved_rows(con, decl, *temps, frozenset({0}))
    assert not moved_rows(con, decl, *temps, frozenset({1}))
    # projections holding the file (Note [Rows of the delta's files]): f calls g from c.cpp too
    temps = update._apply_relation(con, decl, [], [line(("f", "g", "c.cpp", 5, "unique"))], tmp_path, "_d")
    assert moved_rows(con, decl, *temps, frozenset({0, 1, 2}))
    assert not moved_rows(con, decl, *temps, frozenset({0, 1}))
    # f's call at a.cpp:11 goes: its other one in a.cpp still holds (f, g, a.cpp)
    temps = update._apply_relation(con, decl, [line(rows[0][:3] + (11, "unique"))], [], tmp_path, "_e")
    assert not moved_rows(con, decl, *temps, frozenset({0, 1, 2}))
    assert moved_rows(con, decl, *temps, frozenset({0, 2, 3}))
    # ... and that one goes: (f, g, a.cpp) is lost, though c.cpp's row holds (f, g)
    temps = update._apply_relation(con, decl, [line(rows[1])], [], tmp_path, "_f")
    assert moved_rows(con, decl, *temps, frozenset({0, 1, 2}))
    assert not moved_rows(con, decl, *temps, frozenset({0, 1}))


def test_changed_rows_are_the_set_differences_of_the_windows():
    """emit's `_changed`: distinct rows, edited, moved, dropped and added
    anywhere (3,000 random edits, seeded), give the two set differences."""
    import random

    from extractors.base import _changed

    rng = random.Random(0)
    for _ in range(3000):
        old = [(f"r{x}", x) for x in rng.sample(range(40), rng.randint(0, 30))]
        new = list(old)
        for _ in range(rng.randint(0, 4)):
            kind = rng.random()
            if kind < 0.3 and new:
                new.pop(rng.randrange(len(new)))
            elif kind < 0.6:
                row = (f"r{rng.randint(0, 60)}", 0)
                if row not in new:
                    new.insert(rng.randint(0, len(new)), row)
            elif new:
                new.insert(rng.randint(0, len(new) - 1), new.pop(rng.randrange(len(new))))
        assert _changed(old, new) == (set(old) - set(new), set(new) - set(old))


def test_without_drops_one_copy_of_each_line_and_says_a_missing_one():
    from torchtalk.errors import ExtractError
    from torchtalk.sink import _without

    assert _without(["a\n", "b\n", "c\n"], ["b\n"], "r") == ["a\n", "c\n"]
    assert _without(["a\n", "b\n", "b\n"], ["b\n"], "r") == ["a\n", "b\n"]  # a line there twice: one goes
    assert _without(["a\n", "b\n", "b\n"], ["b\n", "b\n"], "r") == ["a\n"]
    with pytest.raises(ExtractError, match="delta removes 1 rows the last run did not have"):
        _without(["a\n", "b\n", "b\n"], ["c\n", "b\n"], "r")


def test_deltas_asked_in_python_answer_as_the_db(tmp_path, schema):
    """Note [Deltas asked in Python]: over random deltas of a small table,
    FactMoves given the delta's lines says what moved, and the values at a
    column, as the one asking the DB does, for every set of columns."""
    import random
    from itertools import combinations

    from torchtalk.query.derived import FactMoves

    rng = random.Random(0)
    con = duckdb.connect()
    decl = schema.decls["calls"]
    store.create_tables(con, {"calls": decl})
    con.execute("insert into torchtalk_relations values ('calls', 0)")

    def line(r):
        return "\t".join(map(str, r)) + "\n"

    def row():
        return (rng.choice("fgh"), rng.choice("gk"), rng.choice(["a.cpp", "b.cpp"]), rng.randint(1, 4),
                rng.choice(["unique", "scope"]))

    held: list[tuple] = []
    sets = [frozenset(c) for n in range(1, 6) for c in combinations(range(5), n)]
    for step in range(25):
        gone = rng.sample(held, rng.randint(0, min(3, len(held))))
        new = [row() for _ in range(rng.randint(0, 3))]
        for r in gone:
            held.remove(r)
        held += new
        lines = ([line(r) for r in gone], [line(r) for r in new])
        temps = update._apply_relation(con, decl, *lines, tmp_path, f"_{step}")
        by_db = FactMoves(con, {"calls": decl}, {"calls": temps})
        by_lines = FactMoves(con, {"calls": decl}, {"calls": temps}, {"calls": lines})
        for col in range(5):
            assert sorted(by_lines.values("calls", col)) == sorted(by_db.values("calls", col)), (step, col)
        for cols in sets:
            assert by_lines.moved("calls", cols) == by_db.moved("calls", cols), (step, cols)
            col = min(cols)
            assert sorted(by_lines.values("calls", col, cols)) == sorted(by_db.values("calls", col, cols)), \
                (step, cols)
    # a field `\N` is none, as DuckDB reads it
    lines = ([], [line(("f", "\\N", "c.cpp", 1, "unique"))])
    temps = update._apply_relation(con, decl, *lines, tmp_path, "_null")
    assert FactMoves(con, {"calls": decl}, {"calls": temps}, {"calls": lines}).values("calls", 1) == [None] \
        == FactMoves(con, {"calls": decl}, {"calls": temps}).values("calls", 1)
