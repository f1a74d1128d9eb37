"""Chains for the answer (Note [Chains for the answer] in torchtalk/mcp/answer.py;
issues 18, 19, 16): an MCP answer of impact or affected computes the chains
of the rows it may show only, and is the answer with every chain, byte for
byte: small tables for the edge cases, then the real PyTorch 2.6.0 tree.
"""

from __future__ import annotations

import pytest

from torchtalk.lookup import Table
from torchtalk.mcp.answer import Chained, More, fit

COLS = ("fn", "kind", "name", "depth", "file", "line", "chain")


def _rows(n: int, kinds=("caller", "op", "python")) -> list[tuple]:
    """`n` rows per kind, each with a chain of its own length."""
    return [("f", k, f"{k}{i}", 1 + i % 3, f"{k}.cpp", i + 1, "g" + "-" * (i * 7 % 50) + f"> {k}{i}")
            for k in kinds for i in range(n)]


def _lazy(whole: list[tuple], asked: list, title: str = "impact(f)") -> Chained:
    """`whole` with its chains left to a `chain_of` that records the rows asked."""
    chain = {r[:-1]: r[-1] for r in whole}

    def chain_of(rows):
        asked.extend(rows)
        return [chain[r] for r in rows]

    return Chained.of(Table(title, COLS, tuple((*r[:-1], None) for r in whole), len(whole)), chain_of)


MORE = More(section=lambda col, v: f"query(dsl='impact(f, {col}={v})')", budget=lambda b: f"impact(name='f', budget={b})")


@pytest.mark.parametrize("budget", [200, 600, 1200, 5000, 20000])
@pytest.mark.parametrize("n", [3, 40, 700])
def test_the_text_and_rows_are_those_with_every_chain(budget, n):
    whole = _rows(n)
    asked: list = []
    assert fit(_lazy(whole, asked), budget, MORE) == fit(Table("impact(f)", COLS, tuple(whole), len(whole)), budget, MORE)
    text, kept = fit(_lazy(whole, []), budget, MORE)
    assert len(set(asked)) == len(asked)  # no chain computed twice
    if n == 700 and budget <= 5000:  # a few dozen rows shown: their chains, not 2,100
        assert len(kept) <= len(asked) <= 3 * 200


def test_rows_that_may_show_past_the_first_ones_get_their_chains_too():
    whole = [(*r[:-1], "") for r in _rows(300, ("caller",))]  # empty chains: many rows fit
    asked: list = []
    text, kept = fit(_lazy(whole, asked), 20000, MORE)
    assert len(kept) > 50 and len(asked) >= len(kept)
    assert (text, kept) == fit(Table("impact(f)", COLS, tuple(whole), len(whole)), 20000, MORE)


def test_a_chain_that_could_be_constant_is_computed_for_every_row():
    whole = [(*r[:-1], "f -call-> g") for r in _rows(200, ("caller",))]  # one chain: said in the heading
    asked: list = []
    text, _ = fit(_lazy(whole, asked), 1200, MORE)
    assert len(asked) == len(whole)
    assert text.splitlines()[0] == "impact(f): 200 rows (fn=f, kind=caller, chain=f -call-> g)"


# ---------------------------------------------------------------- the real tree

QUERIES = ("impact(at::native::cpublas::gemm)", "affected(at::native::cpublas::gemm)",
           "affected(at::native::layer_norm_cpu)", "impact(at::native::layer_norm_cpu, depth=2)",
           "affected(at::native::cpublas::gemm, kind=test)")


@pytest.fixture(scope="module")
def con(real_db):
    from torchtalk import api

    c = api.open_db(db=str(real_db))
    yield c
    c.close()


def _answers(con, text: str):
    """(every chain, chains later, rows asked for their chains) of `text` as the MCP tools fetch it."""
    from torchtalk import api
    from torchtalk.mcp.tools import FETCH_ROWS, _table

    whole = _table(api.query(text, con=con, limit=FETCH_ROWS), text)
    later = api.query(text, con=con, limit=FETCH_ROWS, chains_later=True)
    asked: list = []

    def chain_of(rows):
        asked.extend(rows)
        return later.chain_of(rows)

    return whole, Chained.of(_table(later, text), chain_of), asked


@pytest.mark.real_tree
@pytest.mark.parametrize("text", QUERIES)
def test_real_answers_are_unchanged_and_chain_the_rows_shown(con, text):
    whole, later, asked = _answers(con, text)
    assert later.rows == tuple((*r[:-1], None) for r in whole.rows) and later.total == whole.total
    for budget in (300, 1200, 5000):
        asked.clear()
        assert fit(later, budget, MORE) == fit(whole, budget, MORE), budget
        if len(whole.rows) > 1000 and budget <= 1200:
            assert len(asked) <= len(whole.rows) // 20, (budget, len(asked))


def test_overload_rows_merge_by_their_chains_as_with_every_chain():
    """Note [Ambiguous names for agents]: rows equal once g's overloads are
    one name merge when their chains are equal too; only they need chains."""
    from torchtalk.mcp.tools import _merged

    whole = [("g(int)", "caller", "a", 1, "a.cpp", 3, "a -call-> g"), ("g(float)", "caller", "a", 1, "a.cpp", 3, "a -call-> g"),
             ("g(int)", "caller", "b", 1, "b.cpp", 4, "b -call-> g(int)"),
             ("g(float)", "caller", "b", 1, "b.cpp", 4, "b -call-> g(float)"),
             *[("g(int)", "caller", f"c{i}", 2, "c.cpp", i, f"c{i} -call-> a") for i in range(100)]]
    asked: list = []
    merged, lazy = _merged(Table("impact(g)", COLS, tuple(whole), len(whole)), "g"), _merged(_lazy(whole, asked, "impact(g)"), "g")
    assert merged.total == lazy.total == len(whole) - 1
    assert sorted(asked) == sorted(r[:-1] for r in whole[:4])
    assert fit(lazy, 300, MORE) == fit(merged, 300, MORE)
    assert fit(lazy, 300, MORE)[0].splitlines()[1:3] == ["  a  1  a -call-> g  a.cpp:3", "  b  1  b -call-> g(int)  b.cpp:4"]
