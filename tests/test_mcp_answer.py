"""The compact text of an answer (Note [Answer size]): exact renderings."""

from __future__ import annotations

from torchtalk.lookup import Table
from torchtalk.mcp.answer import STRUCT_ROWS, render_text, to_result

COLS = ("fn", "kind", "name", "file", "line")


def test_constant_columns_go_to_the_header():
    t = Table("callers(gemm)", ("fn", "caller", "file", "line"),
              (("gemm", "a", "x.cpp", 3), ("gemm", "b", "y.cpp", 9)), 2, ("'gemm' = at::gemm",))
    assert render_text(t) == (
        "callers(gemm): 2 rows (fn=gemm)\n"
        "  a  x.cpp:3\n"
        "  b  y.cpp:9\n"
        "note: 'gemm' = at::gemm"
    )


def test_empty_and_capped_answers():
    assert render_text(Table("search 'zz'", COLS, (), 0)) == "search 'zz': no results"
    rows = tuple(("f", "op", f"op{i}", "n.yaml", i + 1) for i in range(5))
    t = Table("impact(f)", COLS, rows[:4], 5)
    assert render_text(t, text_rows=3) == (
        "impact(f): 5 rows (fn=f, kind=op)\n"
        "  op0  n.yaml:1\n  op1  n.yaml:2\n  op2  n.yaml:3\n"
        "… 2 more (narrow the question, or use `query` with a filter)"
    )


def test_long_answers_are_grouped_by_kind_so_every_kind_shows():
    rows = tuple(("f", "function", f"g{i}", "a.cpp", i + 1) for i in range(8)) + (
        ("f", "op", "mm", "n.yaml", 7), ("f", "python", "torch.mm", "t.py", 2))
    text = render_text(Table("impact(f)", COLS, rows, 10), text_rows=6)
    assert text == (
        "impact(f): 10 rows (fn=f)\n"
        "  kind function: 8\n"
        "    g0  a.cpp:1\n    g1  a.cpp:2\n    g2  a.cpp:3\n"
        "    … 5 more function\n"
        "  kind op: 1\n    mm  n.yaml:7\n"
        "  kind python: 1\n    torch.mm  t.py:2"
    )


def test_structured_output_keeps_every_column_up_to_the_cap():
    rows = tuple(("f", "op", f"op{i}", "n.yaml", i) for i in range(STRUCT_ROWS + 5))
    r = to_result(Table("impact(f)", COLS, rows, len(rows)))
    data = r.structured_content
    assert data["rows"][0] == {"fn": "f", "kind": "op", "name": "op0", "file": "n.yaml", "line": 0}
    assert (len(data["rows"]), data["total"], data["truncated"]) == (STRUCT_ROWS, STRUCT_ROWS + 5, True)
