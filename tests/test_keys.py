"""Walks keep their dispatch key (Note [Walks keep their key] in rules/graph.dl)
and label what a name guess reached (Note [Op call resolution]), on a small
hand-made graph: the edge cases, each with the wrong answer absent.

    op `f`: CPU kernel f_cpu, CUDA kernel f_cuda, both call f_stub;
            SparseCPU kernel f_sparse calls at::g
    op `g`: CPU kernel g_cpu, SparseCPU kernel g_sparse
    op `h`: CompositeImplicitAutograd kernel h_comp calls at::f
    f_stub: CPU impl f_cpu_impl (native/cpu), CUDA impl f_cuda_impl (.cu), which launches k1
    f_cuda calls helper (shared code) by a name guess; helper launches k2
"""

from __future__ import annotations

import os

import duckdb
import pytest

from torchtalk.query import query

NF = "aten/src/ATen/native/native_functions.yaml"
CU = "aten/src/ATen/native/cuda/F.cu"
CPUK = "aten/src/ATen/native/cpu/FKernel.cpp"
SH = "aten/src/ATen/native/F.cpp"

FACTS = {
    "op": [("f", "f", "", "f(Tensor self) -> Tensor", NF, 1), ("g", "g", "", "g(Tensor self) -> Tensor", NF, 5),
           ("h", "h", "", "h(Tensor self) -> Tensor", NF, 9)],
    "dispatch": [("f", "CPU", "f_cpu", NF, 2), ("f", "CUDA", "f_cuda", NF, 2), ("f", "SparseCPU", "f_sparse", NF, 3),
                 ("g", "CPU", "g_cpu", NF, 6), ("g", "SparseCPU", "g_sparse", NF, 7),
                 ("h", "CompositeImplicitAutograd", "h_comp", NF, 9)],
    "dispatch_default": [("h", "h_comp")],
    "func": [("at::native::f_cpu", "f_cpu", SH, 10, "cpp"), ("at::native::f_cuda", "f_cuda", CU, 10, "cuda"),
             ("at::native::f_sparse", "f_sparse", SH, 20, "cpp"), ("at::native::g_cpu", "g_cpu", SH, 30, "cpp"),
             ("at::native::g_sparse", "g_sparse", SH, 40, "cpp"), ("at::native::h_comp", "h_comp", SH, 50, "cpp"),
             ("at::native::f_cpu_impl", "f_cpu_impl", CPUK, 5, "cpp"),
             ("at::native::f_cuda_impl", "f_cuda_impl", CU, 30, "cuda"),
             ("at::native::helper", "helper", SH, 60, "cpp"),
             ("at::native::k1", "k1", CU, 50, "cuda"), ("at::native::k2", "k2", CU, 60, "cuda")],
    "kernel": [("at::native::k1", "k1", CU, 50), ("at::native::k2", "k2", CU, 60)],
    "stub_decl": [("at::native::f_stub", SH, 1)],
    "stub_call": [("at::native::f_cpu", "at::native::f_stub", SH, 11),
                  ("at::native::f_cuda", "at::native::f_stub", CU, 11)],
    "stub_register": [("at::native::f_stub", "CPU", "at::native::f_cpu_impl", CPUK, 9),
                      ("at::native::f_stub", "CUDA", "at::native::f_cuda_impl", CU, 40)],
    "launches": [("at::native::f_cuda_impl", "at::native::k1", CU, 31, "<<<>>>"),
                 ("at::native::helper", "at::native::k2", SH, 61, "<<<>>>")],
    "calls": [("at::native::f_cuda", "at::native::helper", CU, 12, "unique")],
    "calls_op": [("at::native::f_sparse", "g", SH, 21, "qualified"), ("at::native::h_comp", "f", SH, 51, "qualified")],
}


def _db(facts: dict[str, list[tuple]]):
    from torchtalk.datalog import parse_file
    from torchtalk.nodes import number_nodes
    from torchtalk.store import SCHEMA_PATH, create_tables

    c = duckdb.connect(":memory:")
    decls = parse_file(SCHEMA_PATH).decls
    create_tables(c, decls)
    for rel, rows in facts.items():
        marks = ", ".join("?" * len(rows[0]))
        c.executemany(f'INSERT INTO "{rel}" VALUES ({marks})', rows)
    number_nodes(c, decls, None)  # as the index does (Note [Node numbers])
    return c


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    """The facts' DB, the library's parse cache in a cache dir of the
    module's own (given back after: a later test on this worker finds the
    real tree under the real cache dir)."""
    mp = pytest.MonkeyPatch()
    if "TORCHTALK_CACHE_DIR" not in os.environ:
        mp.setenv("TORCHTALK_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    c = _db(FACTS)
    yield c
    c.close()
    mp.undo()


def kernels(con, op: str) -> set[tuple]:
    """(key, on, kernel, host, res) of kernels(op)."""
    rows = query(f"kernels({op})", con, user_rules=False, limit=None).rows
    return {(r[1], r[2], r[3].rpartition("::")[2], r[4].rpartition("::")[2], r[6]) for r in rows}


def test_kernels_per_key(con):
    # f's CUDA kernel: the stub's CUDA implementation launches k1 (resolved);
    # the helper it calls by a name guess launches k2 (labelled a guess).
    # f's CPU kernel calls the same stub: no row (the CPU registration launches nothing).
    assert kernels(con, "f") == {("CUDA", "CUDA", "k1", "f_cuda_impl", "resolved"),
                                 ("CUDA", "CUDA", "k2", "helper", "guess")}


def test_a_composite_kernel_is_walked_per_backend_it_reaches(con):
    # h's composite kernel calls at::f: on CUDA it reaches f's CUDA kernel and its launches;
    # h has no CUDA kernel of its own, so under CUDA they are h's CUDA kernels too (composite_serves)
    assert kernels(con, "h") == {("CompositeImplicitAutograd", "CUDA", "k1", "f_cuda_impl", "resolved"),
                                 ("CompositeImplicitAutograd", "CUDA", "k2", "helper", "guess"),
                                 ("CUDA", "CUDA", "k1", "f_cuda_impl", "resolved"),
                                 ("CUDA", "CUDA", "k2", "helper", "guess")}


def _down(con, seed: str, state: str) -> set[tuple[str, str]]:
    from torchtalk.datalog.engines.duckdb import DuckDBEngine
    from torchtalk.datalog.parser import parse_text
    from torchtalk.query.library import RULES_DIR

    program = parse_text(f'#include "graph.dl"\ndown_seed("at::native::{seed}", "{state}").\ndown_limit(5).\n'
                         f'.decl r(device: symbol, node: symbol)\n'
                         f'r(v, n) :- down_dist("at::native::{seed}", "{state}", v, n, _).\n', "t.dl", base=RULES_DIR)
    rows = DuckDBEngine().run(program, con, ["r"], {})["r"]
    return {(v, n.rpartition("::")[2]) for v, n in rows}


def test_a_cpu_walk_takes_the_cpu_registration_only(con):
    reached = _down(con, "f_cpu", "CPU")
    assert ("CPU", "f_cpu_impl") in reached
    assert not {n for _v, n in reached} & {"f_cuda_impl", "k1", "k2"}


def test_a_sparse_kernel_reaches_its_key_and_the_dense_kernel_of_its_device(con):
    # at::g from f's SparseCPU kernel: g's SparseCPU kernel and g's CPU kernel (on dense values)
    reached = _down(con, "f_sparse", "SparseCPU")
    assert {("SparseCPU", "g_sparse"), ("CPU", "g_cpu")} <= reached


def test_a_dense_kernel_never_reaches_a_sparse_one(con):
    # at::f from the composite h, walked as if on CPU: f's CPU kernel, not its SparseCPU one
    reached = _down(con, "h_comp", "CPU")
    assert ("CPU", "f_cpu") in reached
    assert not {n for _v, n in reached} & {"f_sparse", "g_sparse", "f_cuda", "k1"}


def test_the_compilers_edges_supersede_the_fast_tiers_in_a_parsed_file():
    """F.cu parsed by the precise tier: its fast-tier guess (f_cuda -> helper)
    is gone, and the compiler's edges are what the walk takes."""
    facts = {**FACTS, "precise_file": [(CU,)],
             "calls_precise": [("at::native::f_cuda_impl", "at::native::f_cpu_impl", CU, 32)]}
    c = _db(facts)
    try:
        assert kernels(c, "f") == {("CUDA", "CUDA", "k1", "f_cuda_impl", "resolved")}
        # the compiler's call from CUDA code into a CPU-only function is no step a CUDA walk takes
        assert ("CPU", "f_cpu_impl") not in _down(c, "f_cuda", "CUDA")
    finally:
        c.close()


def test_impact_labels_what_only_a_guess_reaches(con):
    """helper is called by f_cuda through a name guess ("unique"): its callers
    and the op above are labelled "guess"; k1's are resolved."""
    def impact(name: str) -> list[dict]:
        res = query(f"impact({name})", con, user_rules=False, limit=None)
        return [dict(zip(res.columns, r, strict=False)) for r in res.rows]

    rows = impact("helper")
    got = {(r["kind"], r["name"].rpartition("::")[2], r["res"]) for r in rows}
    assert {("function", "f_cuda", "guess"), ("op", "f", "guess")} <= got
    assert not {r for r in got if r[2] == "resolved"}
    sure = {(r["kind"], r["name"].rpartition("::")[2], r["res"]) for r in impact("k1")}
    assert {("function", "f_cuda_impl", "resolved"), ("op", "f", "resolved")} <= sure
    # Note [Chain ranking]: rank = depth, plus 3 for a row only a guess reaches
    assert {r["rank"] - r["depth"] for r in rows} == {3}
    assert [r["rank"] for r in rows] == sorted(r["rank"] for r in rows)
    assert {(r["depth"], r["rank"]) for r in impact("k1") if r["res"] == "resolved"} >= {(1, 1)}
