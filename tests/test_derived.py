"""Relations stored at index time (Note [Derived at index time]): which are
stored, that queries answer the same from them as by computing them, that a
changed rule is not answered from a stale table, and that `torchtalk index`
refreshes them when only the rules changed."""

from __future__ import annotations

import dataclasses

import pytest
from test_index import cache, rows, small  # noqa: F401  (fixtures)

from torchtalk import api, store
from torchtalk.datalog import parse_text
from torchtalk.query import derived
from torchtalk.query.library import load_library

QUERIES = (
    "impact(cpublas::gemm)",
    "trace(matmul)",
    "trace(aten::add.Tensor)",
    "kernels(softmax)",
    "paths(cunn_SoftMaxForward -> python)",
    "paths(torch.softmax -> cuda)",
    "tests(softmax)",
    "affected(cpublas::gemm)",
    "op_stub_impl(add)",
    "op_cuda_kernel(_softmax)",
)


@pytest.fixture(scope="module")
def con(real_db):  # the real-tree tests below take it
    c = api.open_db(db=real_db)
    yield c
    c.close()


@pytest.mark.real_tree
def test_the_index_stores_the_argument_free_relations(con):
    library = load_library(user=False)
    stored = derived.stored(con)
    assert stored == derived.fingerprints(library)
    # the walks' edges, the kernels, the tests' reach and the op reports are stored ...
    assert {"step_at", "step_pair", "kernel_entry", "test_reaches", "op_stub_impl", "op_cuda_kernel"} <= set(stored)
    # ... and every Python API's tier and test count (Note [API tiers])
    assert {"api_name_tier", "api_name_tests"} <= set(stored)
    # ... and what only other stored relations read (Note [Derived in place]) ...
    assert {"step", "fn_device", "link_reach"} <= set(stored)
    # ... not views of one table, nor what reads a query argument, nor a pipeline's step
    # that one stored relation alone reads, positively (step0 under step)
    assert not {"call_edge", "api_op", "up_reach", "impact", "step0", "aten_call"} & set(stored)
    counts = dict(con.execute(f"SELECT relation, rows FROM {derived.CATALOG}").fetchall())
    assert counts["step_at"] == con.execute('SELECT count(*) FROM derived."step_at"').fetchone()[0]
    assert counts["step_at"] >= con.execute("SELECT count(DISTINCT (caller, callee, file, line)) FROM calls").fetchone()[0]
    # the walks' numbering is the fact `node` (Note [Node numbers]): one-to-one, every end of a step numbered
    nodes = con.execute('SELECT count(*), count(DISTINCT name), count(DISTINCT id) FROM node').fetchone()
    ends = con.execute('SELECT count(*) FROM (SELECT src_id FROM derived."step_at" UNION SELECT dst_id FROM derived."step_at")').fetchone()[0]
    assert nodes[0] == nodes[1] == nodes[2] >= ends > 30_000
    assert con.execute('SELECT count(*) FROM (SELECT src_id AS id FROM derived."step_at" UNION '
                       'SELECT dst_id FROM derived."step_at") WHERE id NOT IN (SELECT id FROM node)').fetchone() == (0,)
    # step_pair: the pairs of the steps that need no device, once resolved and once guessed;
    # step_dev: the others, per device (Note [Walks keep their key] in rules/graph.dl)
    pairs = con.execute('SELECT count(*) FROM (SELECT DISTINCT src_id, dst_id, res = \'guess\' '
                        'FROM derived."step_at" WHERE need = \'*\')').fetchone()[0]
    assert counts["step_pair"] == pairs
    keyed = con.execute('SELECT count(*) FROM (SELECT DISTINCT src_id, dst_id, need, res = \'guess\' '
                        'FROM derived."step_at" WHERE need <> \'*\')').fetchone()[0]
    assert counts["step_dev"] == keyed and keyed > 10_000


def test_a_shared_ord_number_is_an_index_error():
    import duckdb

    from torchtalk.errors import EngineError

    program = parse_text(".decl e(a: symbol)\n.decl node(name: symbol, id: number)\nnode(a, ord(a)) :- e(a).")
    con = duckdb.connect()
    con.execute("CREATE SCHEMA derived")
    con.execute("CREATE TABLE derived.node AS SELECT * FROM (VALUES ('at::a', 7), ('at::b', 7), ('at::c', 8)) v(name, id)")
    with pytest.raises(EngineError) as ei:
        derived._check_one_to_one(con, program, "node")
    assert ei.value.message == "ord() gives 'at::a' and 'at::b' the same number 7 in 'node'"
    con.execute("UPDATE derived.node SET id = 9 WHERE name = 'at::b'")
    derived._check_one_to_one(con, program, "node")  # one-to-one: no error
    # a column that holds the numbered symbol in one rule only is not checked
    # (node_card: the stub's name for "stub" rows, its implementation's otherwise)
    cards = parse_text(".decl s(a: symbol, f: symbol)\n.decl card(id: number, name: symbol)\n"
                       "card(ord(a), a) :- s(a, _).\ncard(ord(a), f) :- s(a, f).")
    con.execute("CREATE TABLE derived.card AS SELECT * FROM (VALUES (7, 'at::s'), (7, 'at::impl')) v(id, name)")
    derived._check_one_to_one(con, cards, "card")


@pytest.mark.real_tree
@pytest.mark.parametrize("text", QUERIES)
def test_stored_relations_answer_as_computing_them(con, text, monkeypatch):
    stored = api.query(text, con=con, all_matches=True)
    bypassed = []

    def compute_all(program, con, library=None):
        bypassed.append(program)
        return program, {}

    monkeypatch.setattr(derived, "use_derived", compute_all)
    computed = api.query(text, con=con, all_matches=True)
    assert bypassed and stored.total > 0
    assert stored.rows == computed.rows


@pytest.mark.real_tree
def test_a_changed_rule_is_computed_not_read(con):
    library = load_library(user=False)
    (rule,) = [r for r in library.rules if r.head.name == "kernel_entry" and "impl_func" in str(r)][:1]
    changed = dataclasses.replace(library, rules=tuple(r for r in library.rules if r is not rule))
    program, tables = derived.use_derived(changed, con)
    assert "kernel_entry" not in tables and "kernel_entry" not in program.inputs
    assert "op_stub_impl" in tables  # its closure does not hold the changed rule
    assert "op_card" in tables and "op_card" in program.inputs and not program.rules_for("op_card")


def test_views_are_not_stored():
    program = parse_text(
        ".decl e(a: symbol, b: symbol)\n.input e\n"
        ".decl v(a: symbol, b: symbol)\nv(a, b) :- e(a, b), a != \"x\".\n"
        ".decl w(a: symbol)\nw(a) :- v(a, _).\n"
        ".decl j(a: symbol, c: symbol)\nj(a, c) :- v(a, b), e(b, c).\n"
    )
    assert derived.argument_free(program) == ["j"]


def test_the_rows_shown_are_an_argument():
    # a relation joining a page of shown rows with a fact table is computed
    # per answer, never stored (it would be read back empty)
    program = parse_text(
        ".decl e(a: symbol, b: symbol)\n.input e\n"
        ".decl q(a: symbol)\n.decl q_shown(a: symbol)\n.input q_shown\n"
        ".decl chain_all_shown()\n.input chain_all_shown\n"
        ".decl p(a: symbol, b: symbol)\np(a, b) :- q_shown(a), e(a, b).\n"
        ".decl r(a: symbol, b: symbol)\nr(a, b) :- chain_all_shown(), e(a, b).\n"
        ".decl j(a: symbol, c: symbol)\nj(a, c) :- e(a, b), e(b, c).\n"
    )
    assert derived.argument_free(program) == ["j"]


def test_index_refreshes_stored_relations_when_only_rules_changed(small, cache):  # noqa: F811
    first = api.index(small, layers=["ops"])
    good = rows(first.db, f"SELECT relation, fingerprint FROM {derived.CATALOG} ORDER BY 1")
    assert ("kernel_entry", derived.fingerprints(load_library(user=False))["kernel_entry"]) in good
    con = store.open_db(first.db, read_only=False)
    con.execute(f"UPDATE {derived.CATALOG} SET fingerprint = 'stale' WHERE relation = 'kernel_entry'")
    con.close()
    logged = []
    again = api.index(small, layers=["ops"], log=logged.append)
    assert again.up_to_date
    assert logged[-1] == "rules changed since the last index: recomputing the stored relations"
    assert rows(again.db, f"SELECT relation, fingerprint FROM {derived.CATALOG} ORDER BY 1") == good
    assert rows(again.db, 'SELECT op, "key", fn FROM derived.kernel_entry') == []  # no C++ layer: no kernels
    logged.clear()
    api.index(small, layers=["ops"], log=logged.append)
    assert not any("recomputing" in m for m in logged)


def test_index_is_written_without_stored_relations_when_the_rules_fail(small, cache, monkeypatch):  # noqa: F811
    from torchtalk.errors import EngineError

    def broken(con, program, tables):
        con.execute(f"CREATE SCHEMA IF NOT EXISTS {derived.SCHEMA}")
        con.execute(f"CREATE TABLE {derived.CATALOG} (relation VARCHAR, fingerprint VARCHAR, rows BIGINT)")
        raise EngineError("DuckDB failed: boom")

    monkeypatch.setattr(derived, "materialize", broken)
    report = api.index(small, layers=["ops"])
    assert rows(report.db, "SELECT value FROM torchtalk_meta WHERE key = 'derived'") == [
        ("not stored (engine error: DuckDB failed: boom)",)]
    assert rows(report.db, "SELECT count(*) FROM duckdb_tables() WHERE schema_name = 'derived'") == [(0,)]
    con = api.open_db(db=report.db)
    try:
        assert derived.stored(con) == {}
        assert api.query("trace(foo)", con=con).total > 0  # answered by computing every relation
    finally:
        con.close()


def test_the_librarys_own_analyses_are_kept_with_its_parse(tmp_path, monkeypatch):
    """Note [Analyses kept with the library]: a process that loads the parsed
    library from the cache has its fingerprints without computing them, the
    same as those computed; a change to the code that computes them is a new
    cache key."""
    from torchtalk.query import library

    monkeypatch.setenv("TORCHTALK_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(library, "_MEMO", {})
    parsed, _ = library.load_library_notes((), user=False)  # parsed, and pickled
    fresh = derived.fingerprints(parsed)
    monkeypatch.setattr(library, "_MEMO", {})
    monkeypatch.setattr(derived, "_fingerprints", lambda program: pytest.fail("computed again"))
    loaded, _ = library.load_library_notes((), user=False)  # from the pickle
    assert loaded is not parsed and derived.fingerprints(loaded) == fresh and len(fresh) > 20
    key = library.library_key((), user=False)
    monkeypatch.setattr(library, "_analyses_code", lambda: "other code")
    assert library.library_key((), user=False) != key
