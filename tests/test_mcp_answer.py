"""The compact text of an answer (Note [Answer size], Note [Sized answers]): exact renderings."""

from __future__ import annotations

from torchtalk.lookup import Table
from torchtalk.mcp.answer import More, render_text, to_result, tokens
from torchtalk.query.output import group_overloads, join_ops, section_caps, size

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


def test_empty_answers_and_rows_not_read():
    assert render_text(Table("search 'zz'", COLS, (), 0)) == "search 'zz': no results"
    rows = tuple(("f", "op", f"op{i}", "n.yaml", i + 1) for i in range(4))
    more = More(budget=lambda b: f"impact(name='f', budget={b})")
    assert render_text(Table("impact(f)", COLS, rows, 5), more=more) == (
        "impact(f): 5 rows (fn=f, kind=op)\n"
        "  op0  n.yaml:1\n  op1  n.yaml:2\n  op2  n.yaml:3\n  op3  n.yaml:4\n"
        "… 1 more rows not read (narrow the question)"
    )


def test_a_long_answer_fits_the_budget_every_section_showing_with_the_call_for_more():
    rows = tuple(("f", "function", f"g{i}", "a.cpp", i + 1) for i in range(200)) + (
        ("f", "op", "mm", "n.yaml", 7), ("f", "python", "torch.mm", "t.py", 2))
    more = More(section=lambda col, v: f"query(dsl='impact(f, {col}={v})')")
    t = Table("impact(f)", COLS, rows, len(rows))
    text = render_text(t, budget=200, more=more)
    assert tokens(text) <= 200
    lines = text.splitlines()
    assert lines[:3] == ["impact(f): 202 rows (fn=f)", "  kind function: 200", "    g0  a.cpp:1"]
    cut = next(ln for ln in lines if ln.startswith("    … "))
    shown = sum(1 for ln in lines if ln.startswith("    g"))
    assert cut == f"    … {200 - shown} more function: query(dsl='impact(f, kind=function)')"
    assert lines[-4:] == ["  kind op: 1", "    mm  n.yaml:7", "  kind python: 1", "    torch.mm  t.py:2"]
    # a larger budget shows more rows of the same answer
    assert render_text(t, budget=400, more=more).count("\n    g") > shown


def test_a_trace_opens_with_the_schema_and_kernels_whatever_the_rows_order():
    cols = ("op", "step", "name", "detail", "file", "line")
    rows = (("mm", "test", "test_mm", "call", "t.py", 1), ("mm", "python", "torch.mm", "", "f.py", 2),
            ("mm", "kernel", "at::native::mm", "CPU", "a.cpp", 3), ("mm", "op", "mm", "mm(Tensor self)", "n.yaml", 4))
    assert [r[1] for r in size(cols, rows, 4).rows] == ["op", "kernel", "python", "test"]


def test_overloads_are_grouped_not_multiplied():
    cols = ("op", "step", "name", "file", "line")
    rows = (("add.Tensor", "test", "t1", "t.py", 1), ("add.out", "test", "t1", "t.py", 1),
            ("sub.Tensor", "test", "t1", "t.py", 1), ("add.Tensor", "test", "t2", "t.py", 5))
    assert group_overloads(cols, rows) == (
        ("add.Tensor, .out; sub.Tensor", "test", "t1", "t.py", 1), ("add.Tensor", "test", "t2", "t.py", 5))
    assert join_ops(["matmul", "matmul.out"]) == "matmul, .out"
    assert join_ops([f"op{i}.out" for i in range(6)]) == "op0.out; op1.out; op2.out; op3.out; +2 ops"


def test_section_caps_keep_small_sections_whole():
    assert section_caps([1, 72, 300], 20) == [1, 8, 8]
    assert section_caps([3, 4], 40) == [3, 4]
    assert sum(c + 1 for c in section_caps([43, 72, 13, 28, 36, 80, 171, 26, 23, 6, 245], 29)) <= 33


def test_structured_output_holds_the_rows_the_text_shows():
    rows = tuple(("f", "op", f"op{i}", "n.yaml", i) for i in range(500))
    r = to_result(Table("impact(f)", COLS, rows, len(rows)))
    data = r.structured_content
    text = r.content[0].text
    assert data["rows"][0] == {"fn": "f", "kind": "op", "name": "op0", "file": "n.yaml", "line": 0}
    assert len(data["rows"]) == text.count("\n  op") and data["rows"][-1]["name"] in text
    assert (data["total"], data["truncated"]) == (500, True)
    assert tokens(text) <= 1200
