"""Note [Walks toward a card] (rules/graph.dl) on the real 2.6.0 tree: a
downward walk that steps only to nodes reaching a node with a card (a launch
host for kernels and paths, a stub or host for trace) gives the answers of
the walk that steps anywhere, from fewer rows."""

from __future__ import annotations

import dataclasses

import pytest

pytestmark = pytest.mark.real_tree

QUERIES = (
    "trace(torch.nn.functional.interpolate)",
    "trace(softmax)",
    "trace(add.Tensor)",
    "trace(conv2d)",
    "trace(layer_norm, depth=8)",
    "trace(softmax_warp_forward)",
    "trace(at::native::add_stub)",
    "trace(at::native::cpublas::gemm)",
    "kernels(softmax)",
    "kernels(add.Tensor)",
    "paths(torch.softmax -> cuda)",
)


def _everywhere(monkeypatch):
    """The library without the gates' rules: every walk steps anywhere."""
    from torchtalk.query import library

    load = library.load_library_notes

    def ungated(*a, **kw):
        program, notes = load(*a, **kw)
        keep = tuple(r for r in program.rules if r.head.name not in ("down_to_card",))
        assert len(keep) < len(program.rules)
        return dataclasses.replace(program, rules=keep), notes

    monkeypatch.setattr(library, "load_library_notes", ungated)


def _rows(con, text):
    from torchtalk import api

    return sorted(api.query(text, con=con, limit=None, all_matches=True).rows, key=repr)


@pytest.mark.parametrize("text", QUERIES)
def test_a_walk_toward_its_targets_answers_as_one_that_steps_anywhere(real_con, text, monkeypatch):
    toward = _rows(real_con, text)
    _everywhere(monkeypatch)
    anywhere = _rows(real_con, text)
    assert toward and toward == anywhere


def test_the_trace_walk_reads_fewer_rows(real_con, monkeypatch):
    """trace(interpolate)'s walk: a fraction of the rows of one that steps anywhere."""
    from torchtalk.datalog.engines import memory

    sizes: list[int] = []
    run = memory.run_rule

    def counted(program, rule, env, out, delta=None):
        before = len(out)
        run(program, rule, env, out, delta=delta)
        if rule.head.name == "down_reach":
            sizes.append(len(out) - before)

    monkeypatch.setattr(memory, "run_rule", counted)
    real_con.engine, engine = "memory", real_con.engine
    try:
        _rows(real_con, QUERIES[0])
        toward, sizes[:] = sum(sizes), []
        _everywhere(monkeypatch)
        _rows(real_con, QUERIES[0])
        anywhere = sum(sizes)
    finally:
        real_con.engine = engine
    assert 0 < toward < anywhere / 4
