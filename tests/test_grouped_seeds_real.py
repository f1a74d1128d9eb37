"""Note [One walk per name] (rules/graph.dl), Note [Grouped seeds]
(torchtalk/query/run.py) on the real 2.6.0 tree: impact and affected of a
name with several overloads walk once from the name, and give what the
walks from each overload give, each caller once at its distance to the
nearest overload."""

from __future__ import annotations

import pytest

from extractors.cpp.names import split_sig

pytestmark = pytest.mark.real_tree

BLAS = "aten/src/ATen/native/CPUBlas.cpp"
GEMM = "at::native::cpublas::gemm"


def q(con, text, **kw):
    from torchtalk import api

    return api.query(text, con=con, limit=None, **kw)


def overloads(con) -> list[str]:
    ids = q(con, f"callers({GEMM})").resolutions[0].ids
    assert len(ids) == 10 and {split_sig(i)[0] for i in ids} == {GEMM}
    return list(ids)


def by_key(rows, key, depth: int) -> dict:
    """key(row) -> the least depth of the rows with that key."""
    out: dict = {}
    for r in rows:
        k = key(r)
        out[k] = min(out.get(k, r[depth]), r[depth])
    return out


@pytest.mark.parametrize("query, key, depth", [
    # impact: (kind, name, via, file, line); affected: (kind, name, via, why, file, line)
    ("impact({}, depth=3)", lambda r: (r[1], r[2], r[3], r[5], r[6]), 4),
    ("affected({}, depth=3)", lambda r: (r[1], r[2], r[3], r[6], r[7], r[8]), 4),
])
def test_one_walk_gives_the_overloads_walks(real_con, query, key, depth):
    """The name's rows are the union of its overloads' own answers, at the
    least distance: nothing lost, nothing added, the seed written as the name."""
    grouped = q(real_con, query.format("cpublas::gemm")).rows
    assert {r[0] for r in grouped} == {GEMM}
    each = [r for i in overloads(real_con) for r in q(real_con, query.format(f'"{i}"')).rows]
    assert {r[0] for r in each} == set(overloads(real_con))
    assert by_key(grouped, key, depth) == by_key(each, key, depth)
    assert len(grouped) < len(each) / 5  # the walks' rows are no longer ten times over


def gemm_calls_in_brgemm(tree) -> set[int]:
    """The lines of CPUBlas.cpp's brgemm overloads that call gemm (`  gemm(`)."""
    lines, inside = set(), False
    for i, line in enumerate((tree / BLAS).read_text().splitlines(), 1):
        if line.startswith("void brgemm("):
            inside = True
        elif line.startswith("}"):  # a function's end
            inside = False
        elif inside and line == "  gemm(":
            lines.add(i)
    return lines


def test_direct_callers_name_the_overload_they_call(real_con, tree):
    lines = gemm_calls_in_brgemm(tree)
    assert len(lines) == 3  # float, BFloat16 and Half
    rows = [r for r in q(real_con, "impact(cpublas::gemm, depth=1)").rows
            if split_sig(r[2])[0] == "at::native::cpublas::brgemm"]
    assert {r[6] for r in rows} == lines
    for r in rows:
        assert r[:2] == (GEMM, "function") and r[4] == 1 and r[5] == BLAS and r[7] == "resolved"
        assert split_sig(r[3])[0] == GEMM and split_sig(r[3])[1]  # `via`: the overload, with its parameters
    assert len({r[3] for r in rows}) == 3  # each calls its own


def test_one_overload_stays_itself(real_con):
    one = overloads(real_con)[0]
    rows = q(real_con, f'impact("{one}", depth=2)').rows
    assert rows and {r[0] for r in rows} == {one}
