"""Note [Loop inputs cut first] on the real 2.6.0 tree: the walk queries
whose chain walks read the call graph's steps beside a walk's distances
give, on DuckDB, the rows and chains they give with every input read whole,
and their plans read the cut steps in the loop."""

from __future__ import annotations

import pytest

from tests.datalog.test_loop_inputs import _Logged

pytestmark = pytest.mark.real_tree

QUERIES = (
    # walks past ALL_EDGES_WALK rows, so their chains walk a closure (Note [Every edge of a small answer])
    "impact(TensorIterator, depth=5)",
    "affected(TensorIterator, depth=5)",
    "kernels(add)",
    "paths(torch.softmax -> cuda)",
    "paths(vectorized_layer_norm_kernel -> python)",
)


def _answer(real_db, text):
    """(the rows with their chains as text, the SQL run) of `text` on DuckDB, on a new connection."""
    from torchtalk import api

    con = api.open_db(db=real_db)
    try:
        con.engine = "duckdb"
        logged = con.con = _Logged(con.con)
        res = api.query(text, con=con, limit=50, all_matches=True)
        return [tuple(str(v) for v in r) for r in res.rows], res.total, " ".join(logged.sql)
    finally:
        con.close()


@pytest.mark.parametrize("text", QUERIES)
def test_cut_steps_give_the_answers_of_the_whole_steps(real_db, text, monkeypatch):
    from torchtalk.datalog.engines import duckdb as engine

    rows, total, sql = _answer(real_db, text)
    assert "_step_pair_cut0" in sql and "_step_dev_cut0" in sql  # the chain walks read the cut steps
    monkeypatch.setattr(engine, "_cut_loops", lambda program, *_: program)
    whole_rows, whole_total, whole_sql = _answer(real_db, text)
    assert "_cut0" not in whole_sql
    assert rows and total == whole_total and rows == whole_rows
    assert all(r[-1] for r in rows)  # every row shown has its chain
