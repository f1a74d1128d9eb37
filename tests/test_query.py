"""The query DSL, name resolution, binding and the rule library on a small
hand-written fact set (tests/fixtures/query/facts: a slice of PyTorch with
real names and places). Real-tree acceptance: tests/test_query_real.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from torchtalk.errors import InputError, ParseError, QueryError
from torchtalk.query import query
from torchtalk.query.dsl import parse_query
from torchtalk.query.resolve import Ambiguous, Resolver

FIXTURE = Path(__file__).parent / "fixtures" / "query" / "facts"
ROOT = Path(__file__).resolve().parents[1]
LA = "aten/src/ATen/native/LinearAlgebra.cpp"
NF = "aten/src/ATen/native/native_functions.yaml"


@pytest.fixture(autouse=True)
def _isolated(tmp_path_factory, tmp_path, monkeypatch):
    # one rule cache for the module (parsing the library takes seconds)
    monkeypatch.setenv("TORCHTALK_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "qcache"))
    monkeypatch.setenv("TORCHTALK_CONFIG_DIR", str(tmp_path / "config"))


def build_db(path: Path | None = None):
    """An in-memory (or file) fact DB with every schema table, loaded from the fixture."""
    import duckdb

    from torchtalk.datalog import parse_file
    from torchtalk.nodes import number_nodes
    from torchtalk.store import SCHEMA_PATH, create_tables, load_facts

    con = duckdb.connect(str(path) if path else ":memory:")
    decls = parse_file(SCHEMA_PATH).decls
    create_tables(con, decls)
    for name, decl in decls.items():
        load_facts(con, decl, FIXTURE / f"{name}.facts")
    number_nodes(con, decls, None)  # as the index does (Note [Node numbers])
    return con


@pytest.fixture(scope="module")
def con():
    c = build_db()
    yield c
    c.close()


def q(con, text, **kw):
    return query(text, con, user_rules=False, **kw)


# ------------------------------------------------------------------ DSL


def test_parse_query_forms():
    p = parse_query("impact(at::native::cpublas::gemm, depth=3)")
    assert (p.name, [a.text for a in p.args], p.options["depth"].value) == (
        "impact", ["at::native::cpublas::gemm"], 3)
    p = parse_query("paths(softmax_warp_forward -> python)")
    assert (p.path.src.text, p.path.dst.text) == ("softmax_warp_forward", "python")
    p = parse_query('search("softmax warp")')
    assert p.args[0].quoted and p.args[0].value == "softmax warp"
    assert parse_query("tests(aten::add.Tensor)").args[0].text == "aten::add.Tensor"
    # ids with internal-linkage parts (Note [Internal linkage ids]), pasted back or typed
    pasted = "at::native::(anonymous:aten/src/ATen/native/cuda/SoftMax.cu)::host_softmax"
    assert [a.text for a in parse_query(f"callers({pasted}, depth=2)").args] == [pasted]
    p = parse_query("paths(at::(static:torch/csrc/x-y.cpp)::f -> (anonymous)::k)")
    assert (p.path.src.text, p.path.dst.text) == ("at::(static:torch/csrc/x-y.cpp)::f", "(anonymous)::k")


def test_parse_error_names_column():
    with pytest.raises(ParseError) as exc:
        parse_query("impact(gemm,,)")
    assert exc.value.headline() == (
        "<query>:1:13: parse error: unexpected ',)' "
        "(a query looks like impact(gemm) or paths(kernel -> python))")


def test_option_given_twice():
    with pytest.raises(ParseError) as exc:
        parse_query("impact(gemm, depth=1, depth=2)")
    assert "option 'depth' given twice" in exc.value.headline()


# ------------------------------------------------------------------ resolution


def test_resolve_names_as_typed(con):
    r = Resolver(con)
    assert r.resolve("cpublas::gemm", "fn").ids == ("at::native::cpublas::gemm",)
    assert r.resolve("at::native::cpublas::gemm", "fn").tier == "exact"
    # a dispatch-table kernel name means the at::native function torchgen binds
    assert r.resolve("matmul", "fn").ids == ("at::native::matmul",)
    assert r.resolve("aten::mm.out", "op").ids == ("mm.out",)
    assert r.resolve("mm", "op").ids == ("mm", "mm.out")  # the packet
    assert r.resolve("torch.matmul", "op").ids == ("matmul",)
    assert r.resolve("at::native::matmul", "op").ids == ("matmul",)
    m = r.resolve("softmax_warp_forward", "node").matches[0]
    assert (m.kind, m.id, m.file, m.line) == (
        "kernel", "at::native::(anonymous:aten/src/ATen/native/cuda/PersistentSoftmax.cuh)::softmax_warp_forward",
        "aten/src/ATen/native/cuda/PersistentSoftmax.cuh", 100)


def test_internal_linkage_ids_resolve_typed_with_or_without_their_file(con):
    r = Resolver(con)
    cuda = "at::native::(anonymous:aten/src/ATen/native/cuda/SoftMax.cu)::host_softmax"
    for typed in (cuda, "at::native::(anonymous)::host_softmax", "(anonymous)::host_softmax", "native::host_softmax"):
        assert r.resolve(typed, "fn").ids == (cuda,), typed
    assert r.resolve(cuda, "fn").tier == "exact"
    assert q(con, f"callers({cuda})").rows == q(con, "callers(at::native::(anonymous)::host_softmax)").rows != ()


def test_ambiguous_name_lists_groups(con):
    with pytest.raises(Ambiguous) as exc:
        q(con, "callers(gemm)")
    assert exc.value.render().splitlines() == [
        "query error: 'gemm' is ambiguous: it matches 2 functions "
        "(qualify the name, or add --all (all=true) to answer for all of them)",
        "  function in at::cuda::blas:",
        "    at::cuda::blas::gemm  aten/src/ATen/cuda/CUDABlas.cpp:300",
        "  function in at::native::cpublas:",
        "    at::native::cpublas::gemm  aten/src/ATen/native/CPUBlas.cpp:139",
    ]


def test_unknown_name_did_you_mean(con):
    with pytest.raises(QueryError) as exc:
        q(con, "callers(gemn)")
    assert exc.value.headline() == (
        "<query>:1:9: query error: no C++ function named 'gemn' "
        "(did you mean 'at::cuda::blas::gemm', 'at::native::cpublas::gemm'?)")


def test_unknown_query_did_you_mean(con):
    with pytest.raises(QueryError) as exc:
        q(con, "calers(gemm)")
    assert exc.value.headline() == "query error: no query or relation named 'calers' (did you mean 'callers', 'callees', 'op_callers'?)"


def test_unknown_option(con):
    with pytest.raises(QueryError) as exc:
        q(con, "impact(cpublas::gemm, dept=2)")
    assert "impact has no option or column 'dept' (did you mean 'depth'?)" in exc.value.headline()


# ------------------------------------------------------------------ the rules


def test_callers_with_call_sites(con):
    r = q(con, "callers(cpublas::gemm)")
    assert r.columns == ("fn", "caller", "via", "file", "line")
    assert r.rows == (("at::native::cpublas::gemm", "at::native::addmm_impl_cpu_", "qualified", LA, 1533),)


def test_callers_all_matches(con):
    r = q(con, "callers(gemm)", all_matches=True)
    assert [row[0] for row in r.rows] == ["at::native::cpublas::gemm"]
    assert q(con, "callers(gemm, all=true)").rows == r.rows


def test_callees(con):
    assert q(con, "callees(at::native::matmul)").rows == (
        ("at::native::matmul", "at::native::_matmul_impl", "qualified", LA, 2183),)
    assert q(con, "callees(_matmul_impl)").rows == (
        ("at::native::_matmul_impl", "dot", "aten", LA, 2028),
        ("at::native::_matmul_impl", "mm", "ambiguous", LA, 2034),
        ("at::native::_matmul_impl", "mm", "aten", LA, 2036),
        ("at::native::_matmul_impl", "mm_out", "aten", LA, 2034),
        ("at::native::_matmul_impl", "mv", "aten (typed)", LA, 2030),
    )


def test_callees_of_an_op_are_the_ops_its_kernels_call(con):
    """Note [Op-level callees]: `callees(matmul)` names the op, so it answers
    op_callees: the ops called below its kernel, each with its chain."""
    r = q(con, "callees(matmul)")
    assert r.name == "op_callees" and r.notes[0].startswith("'matmul' names an ATen op")
    assert [(row[1], row[3], row[4], row[2], row[9]) for row in r.rows] == [
        ("CompositeImplicitAutograd", "dot", "at::native::_matmul_impl", 2, 2028),
        ("CompositeImplicitAutograd", "mm", "at::native::_matmul_impl", 2, 2036),
        ("CompositeImplicitAutograd", "mm_out", "at::native::_matmul_impl", 2, 2034),
        ("CompositeImplicitAutograd", "mv", "at::native::_matmul_impl", 2, 2030),
    ]
    assert [(s.kind, s.dst, s.line) for s in r.rows[1][-1]] == [
        ("CompositeImplicitAutograd", "at::native::matmul", 3778), ("call", "at::native::_matmul_impl", 2183),
        ("aten", "mm", 2036)]


def test_impact_reaches_ops_and_python(con):
    r = q(con, "impact(cpublas::gemm)")
    got = {(row[1], row[2], row[4]) for row in r.rows}
    assert ("function", "at::native::addmm_impl_cpu_", 1) in got
    assert ("function", "at::native::structured_mm_out_cpu::impl", 2) in got
    assert ("op", "mm.out", 3) in got
    assert ("op", "mm", 3) in got  # through the structured delegate
    assert ("python", "torch.mm", 4) in got
    # depth bounds the walk
    r1 = q(con, "impact(cpublas::gemm, depth=1)")
    assert {(row[1], row[2]) for row in r1.rows} == {("function", "at::native::addmm_impl_cpu_")}


def test_trace_op(con):
    r = q(con, "trace(torch.matmul)")
    rows = {(row[1], row[2], row[3], row[4], row[5]) for row in r.rows}
    assert ("kernel", "at::native::matmul", "CompositeImplicitAutograd", LA, 2180) in rows
    assert ("python", "torch.matmul", "variant", NF, 3775) in rows
    assert ("derivative", "self", "matmul_backward(grad, self, other, grad_input_mask)",
            "tools/autograd/derivatives.yaml", 384) in rows
    assert ("test", "test/test_linalg.py::TestLinalg::test_matmul_small", "name",
            "test/test_linalg.py", 4000) in rows


def test_trace_stub_and_cuda_kernel(con):
    r = q(con, "trace(_softmax)")
    rows = {(row[1], row[2], row[3]) for row in r.rows}
    assert ("stub", "softmax_lastdim_kernel", "") in rows
    assert ("stub_impl", "at::native::(anonymous:aten/src/ATen/native/cpu/SoftMaxKernel.cpp)::softmax_lastdim_kernel_impl", "CPU") in rows
    assert ("cuda_kernel", "at::native::(anonymous:aten/src/ATen/native/cuda/PersistentSoftmax.cuh)::softmax_warp_forward",
            "at::native::(anonymous:aten/src/ATen/native/cuda/SoftMax.cu)::host_softmax") in rows


def test_kernels(con):
    r = q(con, "kernels(_softmax)")
    assert str(r.rows[0][-1]) == ("_softmax -CUDA native_functions.yaml:5013-> softmax_cuda -call SoftMax.cu:1010-> "
                                  "host_softmax -<<<>>> SoftMax.cu:910-> softmax_warp_forward")  # Note [Chains]
    assert tuple(row[:-1] for row in r.rows) == (("_softmax", "CUDA", "CUDA", "at::native::(anonymous:aten/src/ATen/native/cuda/PersistentSoftmax.cuh)::softmax_warp_forward",
                       "at::native::(anonymous:aten/src/ATen/native/cuda/SoftMax.cu)::host_softmax", "at::native::softmax_cuda", "resolved",
                       0, "the op's own", 2, "aten/src/ATen/native/cuda/SoftMax.cu", 910),)


def test_paths_both_ways(con):
    up = q(con, "paths(softmax_warp_forward -> python)")
    assert [(r[1], r[2], r[3]) for r in up.rows] == [("torch._softmax", "_softmax", 2)]
    assert q(con, "paths(python -> softmax_warp_forward)").rows == up.rows
    down = q(con, "paths(torch._softmax -> cuda)")
    assert [(r[1], r[2], r[4], r[5]) for r in down.rows] == [
        ("at::native::(anonymous:aten/src/ATen/native/cuda/PersistentSoftmax.cuh)::softmax_warp_forward", "_softmax",
         "aten/src/ATen/native/cuda/SoftMax.cu", 910)]


def test_tests_of_op(con):
    r = q(con, "tests(softmax)")
    assert r.columns == ("subject", "test", "rank", "why", "op", "how", "via", "depth", "file", "line", "chain")
    assert str(r.rows[0][-1]) == ("test/test_nn.py::TestNN::test_softmax -call test_nn.py:205-> torch.softmax "
                                  "-variant native_functions.yaml:5000-> softmax.int")
    # a call of torch.softmax, a core suite: rank 1 (Note [Test ranking])
    assert tuple(row[:-1] for row in r.rows) == (("softmax.int", "test/test_nn.py::TestNN::test_softmax", 1, "calls it", "softmax.int", "call",
                       "torch.softmax", 0, "test/test_nn.py", 205),)


def test_tests_of_function_walk_up_to_ops(con):
    r = q(con, "tests(cpublas::gemm)")
    # named for matmul, 5 steps up: rank 5 + 0
    assert [s.dst for s in r.rows[0][-1]][-4:] == [
        "at::native::_matmul_impl", "at::native::structured_mm_out_cpu::impl", "at::native::addmm_impl_cpu_",
        "at::native::cpublas::gemm"]
    assert tuple(row[:-1] for row in r.rows) == (("at::native::cpublas::gemm", "test/test_linalg.py::TestLinalg::test_matmul_small",
                       5, "named for it", "matmul", "name", "matmul", 5, "test/test_linalg.py", 4000),)
    assert q(con, "tests(cpublas::gemm, depth=3)").rows == ()


def test_affected(con):
    r = q(con, "affected(cpublas::gemm)")
    got = {(row[1], row[2]) for row in r.rows}
    assert ("op", "mm.out") in got and ("python", "torch.mm") in got


def test_search_and_limit(con):
    r = q(con, "search(softmax_warp)", limit=10)
    assert r.columns == ("text", "rank", "kind", "id", "file", "line")
    # a __global__ kernel is one row, a "kernel" (not also a "function")
    assert [row[1:4] for row in r.rows] == [(1, "kernel", "at::native::(anonymous:aten/src/ATen/native/cuda/PersistentSoftmax.cuh)::softmax_warp_forward")]
    r = q(con, "search(gemm)", limit=1)
    assert (len(r.rows), r.total) == (1, 3)


def test_search_ranks_the_name_then_its_start_then_the_rest_in_any_case(con):
    rows = q(con, "search(SoftMax)").rows
    assert [row[1] for row in rows] == sorted(row[1] for row in rows)
    ranked = {(row[2], row[3]): row[1] for row in rows}
    assert ranked[("op", "softmax.int")] == 0  # an op by its name
    assert ranked[("function", "at::native::softmax")] == 0  # the last component
    assert ranked[("python", "torch.softmax")] == 0
    assert ranked[("function", "at::native::softmax_cpu")] == 1
    assert ranked[("stub", "softmax_lastdim_kernel")] == 1
    assert ranked[("op", "_softmax")] == 2
    assert ranked[("test", "test/test_nn.py::TestNN::test_softmax")] == 2
    # the same rows however the text is written
    assert [row[1:] for row in q(con, "search(softmax)").rows] == [row[1:] for row in rows]
    assert [row[1:] for row in q(con, 'search("SOFTMAX")').rows] == [row[1:] for row in rows]


def test_search_text_is_literal_and_may_be_qualified(con):
    r = q(con, 'search("(anonymous:aten/src/ATen/native/cuda/SoftMax.cu)::host_softmax")')
    assert [row[1:4] for row in r.rows] == [(0, "function", "at::native::(anonymous:aten/src/ATen/native/cuda/SoftMax.cu)::host_softmax")]
    assert q(con, 'search("softmax.*")').rows == ()  # regex syntax is text
    assert q(con, 'search("")').rows == ()


def test_search_backend_keeps_what_serves_the_key(con):
    r = q(con, "search(softmax, backend=cuda)")
    assert "'cuda' = CUDA" in r.notes  # the key resolved case-insensitively
    assert [row[1:4] for row in r.rows] == [
        (1, "function", "at::native::softmax_cuda"),  # the dispatch table's CUDA kernel
        (1, "kernel", "at::native::(anonymous:aten/src/ATen/native/cuda/PersistentSoftmax.cuh)::softmax_warp_forward"),  # a __global__ kernel
        (2, "op", "_softmax"),  # an op with a CUDA kernel
    ]
    with pytest.raises(QueryError) as exc:
        q(con, "search(softmax, backend=CUDAX)")
    assert exc.value.headline() == "<query>:1:25: query error: no dispatch key named 'CUDAX' (did you mean 'CUDA'?)"


@pytest.mark.parametrize("sample", [None, "tensor_iterator\nlayer_norm\ngemm_out\nsoftmax"])
@pytest.mark.parametrize("text", ["gemm", "Layer_Norm", "a.b(c", "x", "softmax_warp_forward", "::", "ÄbCß"])
def test_like_probes_hold_for_every_casing(text, sample):
    """Every string holding `text` in any case holds one probe of each window
    (Note [Probes]), whichever windows are picked, and the regexes agree
    with Python's casefolding."""
    import itertools
    import re

    from torchtalk.query.like import like, probes, rarity_in

    exact, prefix, anywhere = (re.compile(p) for p in like(text))
    by_role: dict[str, list[str]] = {}
    for role, p in probes(text, rarity_in(sample)):
        by_role.setdefault(role, []).append(p)
    letters = [i for i, c in enumerate(text) if c.isascii() and c.isalpha()][:6]
    for flips in itertools.product((False, True), repeat=len(letters)):
        cased = list(text)
        for i, flip in zip(letters, flips, strict=True):
            cased[i] = cased[i].swapcase() if flip else cased[i]
        name = "at::native::" + "".join(cased)
        assert all(any(p in name for p in by_role[r]) for r in ("a", "b", "head")), name
        assert exact.fullmatch(name) and prefix.fullmatch(name + "_out") and anywhere.fullmatch("x" + name + "y")
        assert not exact.fullmatch(name + "_out")
    # a "case" probe is the text in some casing: holding it is holding the text
    assert all(anywhere.fullmatch(c) for c in by_role["case"])


def test_limit_and_filters_before_the_limit(con):
    # the filter applies to every row, then the limit; total counts the filtered rows
    full = q(con, "impact(cpublas::gemm)")
    kinds = [row[1] for row in full.rows]
    r = q(con, "impact(cpublas::gemm, kind=python)", limit=1)
    assert r.total == kinds.count("python") >= 2
    assert r.rows == tuple(row for row in full.rows if row[1] == "python")[:1]


def test_presolved_copies_equal_the_engines(con, monkeypatch):
    import torchtalk.datalog.transform.presolve as presolve

    texts = ("impact(cpublas::gemm, depth=2)", "trace(matmul)", "tests(softmax)", "paths(softmax_warp_forward -> python)")
    fast = [q(con, t).rows for t in texts]
    monkeypatch.setattr(presolve, "copies", lambda *a: None)  # every argument-level relation by the engine
    assert [q(con, t).rows for t in texts] == fast
    assert all(fast)


def test_presolve_asks_the_engine_only_for_what_is_not_a_copy(con, monkeypatch):
    """Note [Copies first]: trace's test_need, entry_need and down_limit
    copy its arguments and are computed in Python, though trace_composite,
    which reads a fact table, goes to the engine; the rows are the same."""
    import torchtalk.datalog as datalog

    fast = q(con, "trace(matmul)").rows
    asked: list[tuple] = []
    real = datalog.evaluate
    monkeypatch.setattr(datalog, "evaluate", lambda *a, **k: asked.append(tuple(k.get("outputs") or ())) or real(*a, **k))
    assert q(con, "trace(matmul)").rows == fast and fast
    presolved = [names for names in asked if "trace" not in names]
    assert presolved == [("trace_composite",)]


def test_filter_relation_without_seed(con):
    # `call_edge` has no seed: positional arguments filter its columns
    r = q(con, "call_edge(matmul)")
    assert r.rows == (("at::native::matmul", "at::native::_matmul_impl", "qualified", LA, 2183),)
    r = q(con, "call_edge(via=unique)")
    assert [row[0] for row in r.rows] == ["at::native::structured_mm_out_cpu::impl"]


def test_json_records_keyed_by_columns(con):
    from torchtalk.query.output import to_json

    rec = json.loads(to_json(q(con, "callers(cpublas::gemm)")))
    assert rec == {"columns": ["fn", "caller", "via", "file", "line"],
                   "rows": [{"fn": "at::native::cpublas::gemm", "caller": "at::native::addmm_impl_cpu_",
                             "via": "qualified", "file": LA, "line": 1533}],
                   "total": 1, "notes": ["'cpublas::gemm' = at::native::cpublas::gemm"]}


def test_explain_walks_to_facts(con):
    r = q(con, "impact(cpublas::gemm, depth=2)", explain=1)
    tree = r.explanations[0]
    assert tree["rule"].startswith("rules/impact.dl:")
    text = json.dumps(tree)
    assert "calls('at::native::addmm_impl_cpu_', 'at::native::cpublas::gemm'" in text
    assert f"{LA}:1533" in text
    assert "query argument" in text


# ------------------------------------------------------------------ user rules


def test_user_rules_are_queries(con, tmp_path):
    d = tmp_path / "myrules"
    d.mkdir()
    (d / "mine.dl").write_text(
        f'#include "{ROOT}/rules/graph.dl"\n'
        "// Seed of my query.\n.decl cuda_callers_arg(fn: symbol)\n.input cuda_callers_arg\n"
        "// Callers of a function that are written in CUDA.\n"
        ".decl cuda_callers(fn: symbol, caller: symbol, file: symbol, line: number)\n"
        'cuda_callers(f, c, file, l) :- cuda_callers_arg(f), call_edge(c, f, _, file, l), func(c, _, _, _, "cuda").\n'
    )
    r = q(con, "cuda_callers(host_softmax)", rules=(d,))
    assert r.rows == (("at::native::(anonymous:aten/src/ATen/native/cuda/SoftMax.cu)::host_softmax", "at::native::softmax_cuda",
                       "aten/src/ATen/native/cuda/SoftMax.cu", 1010),)


def test_a_name_the_index_does_not_tier_is_tiered_when_asked(con, tmp_path):
    """Note [API tiers]: the index tiers and counts every API's and
    binding's name (api_name_tier, api_name_tests); a user's rule may need
    another name, which the same rules tier and count when asked."""
    d = tmp_path / "tiers"
    d.mkdir()
    (d / "tiers.dl").write_text(
        f'#include "{ROOT}/rules/ranking.dl"\n'
        "// Names to tier.\n"
        'api_need("torch.nn.functional.my_fn"). api_need("torch._hidden"). api_need("mypkg.thing"). api_need("torch.softmax").\n'
        "// Their tiers and tests.\n.decl my_tiers(name: symbol, api: symbol, tests: number)\n"
        "my_tiers(n, a, c) :- api_need(n), api_tier(n, a), api_tests(n, c).\n")
    assert sorted(q(con, "my_tiers()", rules=(d,)).rows) == [
        ("mypkg.thing", "other public", 0), ("torch._hidden", "private", 0),
        ("torch.nn.functional.my_fn", "documented", 0), ("torch.softmax", "documented", 1)]


def test_user_rule_error_names_file_line(con, tmp_path):
    d = tmp_path / "bad"
    d.mkdir()
    (d / "bad.dl").write_text(".decl p(x: symbol)\np(x) :- q(x.\n")
    with pytest.raises(ParseError) as exc:
        q(con, "p(a)", rules=(d,))
    assert exc.value.headline().startswith(f"{d / 'bad.dl'}:2:")


# ------------------------------------------------------------------ CLI


def _cli(*args, env_extra=None):
    env = {**os.environ, **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "torchtalk", "query", *args],
                          capture_output=True, text=True, env=env, cwd=ROOT)


def test_cli_json_and_errors(tmp_path):
    db = tmp_path / "f.duckdb"
    build_db(db).close()
    env = {"TORCHTALK_CACHE_DIR": str(tmp_path / "c"), "TORCHTALK_CONFIG_DIR": str(tmp_path / "cfg")}
    out = _cli("callees(at::native::matmul)", "--db", str(db), "--json", env_extra=env)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["rows"][0]["callee"] == "at::native::_matmul_impl"
    bad = _cli("callees(matmull)", "--db", str(db), env_extra=env)
    assert bad.returncode == 1
    assert bad.stderr.splitlines()[0] == (
        "torchtalk: <query>:1:9: query error: no C++ function named 'matmull' "
        "(did you mean 'at::native::matmul', 'torch::jit::tensorexpr::matmul', "
        "'at::native::_matmul_impl'?)")
    assert "Traceback" not in bad.stderr
    why = _cli("--explain", "callers(cpublas::gemm)", "--db", str(db), env_extra=env)
    assert why.returncode == 0, why.stderr
    assert "why row 1:" in why.stdout
    assert f"[{LA}:1533]" in why.stdout


# ------------------------------------------------------------------ library


def test_builtin_conflict_leaves_the_later_file_out(tmp_path, monkeypatch):
    from torchtalk.query import library

    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "graph.dl").write_text(".decl a(x: symbol)\n.input a\n")
    (rules / "other.dl").write_text("// clashes with graph.dl\n.decl a(x: number)\n.input a\n")
    (rules / "third.dl").write_text(".decl b(x: symbol)\nb(x) :- a(x).\n")
    monkeypatch.setattr(library, "RULES_DIR", rules)
    program, notes = library.load_library_notes(user=False)
    assert len(notes) == 1 and notes[0].startswith(f"rules/other.dl left out: {rules / 'other.dl'}:2:1: ")
    assert "'a' is declared twice" in notes[0]
    assert "b" in program.decls


def test_a_user_file_that_breaks_a_whole_builtin_library_is_its_error_at_once(tmp_path, monkeypatch):
    """Note [Library conflicts]: when the built-in files load together, the
    search for a built-in file to leave out (quadratic in the files) is not
    made; the error is raised once per process (Note [A broken library
    parsed once]). With a built-in clash, the search is made and the
    user's error still raised."""
    import torchtalk.datalog as datalog
    from torchtalk.errors import TorchTalkError
    from torchtalk.query import library

    rules, user = tmp_path / "rules", tmp_path / "user"
    rules.mkdir()
    user.mkdir()
    (rules / "graph.dl").write_text(".decl a(x: symbol)\n.input a\n")
    (rules / "third.dl").write_text(".decl b(x: symbol)\nb(x) :- a(x).\n")
    (user / "mine.dl").write_text(".decl q(x: symbol)\nq(x) :- nowhere(x).\n")
    monkeypatch.setattr(library, "RULES_DIR", rules)
    monkeypatch.setattr(library, "KEY_CHECK_S", 0.0)  # the files are looked at on each load
    searched, compatible = [], library._compatible
    monkeypatch.setattr(library, "_compatible", lambda files: searched.append(files) or compatible(files))
    parsed, parse_text = [], datalog.parse_text
    monkeypatch.setattr(datalog, "parse_text", lambda *a, **k: parsed.append(a) or parse_text(*a, **k))
    for _ in range(2):
        with pytest.raises(TorchTalkError) as err:
            library.load_library_notes((user,), user=False)
        assert err.value.headline().startswith(f"{user / 'mine.dl'}:2:9: "), err.value.headline()
        assert "nowhere" in err.value.headline()
    assert (len(parsed), searched) == (2, [])  # with the user's file, then the built-in files alone

    (rules / "other.dl").write_text(".decl a(x: number)\n.input a\n")  # clashes with graph.dl
    with pytest.raises(TorchTalkError, match="nowhere"):
        library.load_library_notes((user,), user=False)
    assert searched and all(sorted(p.name for p in files) == ["graph.dl", "other.dl", "third.dl"]
                            for files in searched)


def test_list_queries_describes_usage():
    from torchtalk.query.library import describe_queries, load_library

    by_name = {d["name"]: d for d in describe_queries(load_library(user=False))}
    assert by_name["impact"]["usage"] == "impact(FN, depth=6)"
    assert by_name["paths"]["usage"] == "paths(NODE -> NODE, depth=8)"
    assert (by_name["callers"]["file"], by_name["callers"]["columns"]) == (
        "rules/calls.dl", ["fn", "caller", "via", "file", "line"])


def test_impact_crosses_calls_of_aten_ops(con):
    # _matmul_impl calls at::mm (calls_op), whose structured kernel reaches gemm
    r = q(con, "impact(cpublas::gemm)")
    got = {(row[1], row[2], row[3], row[4], row[6]) for row in r.rows}
    assert ("function", "at::native::_matmul_impl", "at::native::structured_mm_out_cpu::impl", 3, 2036) in got
    assert ("python", "torch.matmul", "matmul", 6, 3775) in got


def test_coverage_query_uses_the_report_model(con):
    r = q(con, "coverage(cpu)")
    assert {(row[1], row[2], row[3]) for row in r.rows} == {
        ("matmul", "covered", "CompositeImplicitAutograd"), ("matmul.out", "covered", "CompositeImplicitAutograd"),
        ("mm", "covered", "delegate"), ("mm.out", "covered", "direct"),
        ("softmax.int", "covered", "CompositeImplicitAutograd"), ("_softmax", "covered", "direct"),
    }
    r = q(con, "coverage(CUDA, tag=core)")
    assert {(row[1], row[2], row[3]) for row in r.rows} == {
        ("mm", "covered", "delegate"), ("_softmax", "covered", "direct")}


def test_names_resolve_once_per_read_only_connection(tmp_path, monkeypatch):
    """A read-only connection is a Session (store.open_db), which keeps what
    was resolved (Note [DB info cache])."""
    import duckdb

    from torchtalk.connmemo import Session

    path = tmp_path / "facts.duckdb"
    build_db(path).close()
    calls = []
    real = Resolver._q
    monkeypatch.setattr(Resolver, "_q", lambda self, *a: calls.append(a[0]) or real(self, *a))
    ro = Session(duckdb.connect(str(path), read_only=True))
    first = Resolver(ro).resolve("torch.matmul", "op")
    n = len(calls)
    assert n > 0 and Resolver(ro).resolve("torch.matmul", "op") == first and len(calls) == n
    build_db(tmp_path / "rw.duckdb").close()
    rw = duckdb.connect(str(tmp_path / "rw.duckdb"))  # writable: its tables may change, no memo
    Resolver(rw).resolve("torch.matmul", "op")
    Resolver(rw).resolve("torch.matmul", "op")
    assert len(calls) == 3 * n


def test_like_probes_pick_the_rarest_windows():
    """Note [Probes]: with a sample of names (in memory), "a" is the window
    fewest of them hold and "b" the rarest one apart from it; without (on
    DuckDB), the first pair with the fewest letters and the last three."""
    from torchtalk.query.like import probes, rarity_in

    sample = rarity_in("tensor\ntensor_list\ntensorimpl\niterator\nsort_out\n")  # as name_sample: lower case

    def windows(text, rarity):  # role -> its window, in lower case (each comes in every case)
        return {role: min(p for r, p in probes(text, rarity) if r == role).lower() for role in "ab"}

    # "rit" is in no name, "era" in one, and does not overlap it (the first of four such)
    assert windows("TensorIterator", sample) == {"a": "rit", "b": "era"}
    assert windows("add_", sample) == {"a": "dd_", "b": "ad"}  # a pair outside "a" when no window is
    assert windows("TensorIterator", None) == {"a": "te", "b": "tor"}
    assert windows("add_", None) == {"a": "d_", "b": "dd_"}


def test_routing_probes_build_no_did_you_mean(tmp_path, monkeypatch):
    """`callees(_matmul_impl)` asks whether `_matmul_impl` is an op (Note
    [Op-level callees]); the miss routes it and needs no did-you-mean, so
    none is computed, and a read-only connection remembers the miss. A
    real miss still says what it could have meant."""
    import duckdb

    from torchtalk.connmemo import Session

    path = tmp_path / "facts.duckdb"
    build_db(path).close()
    near = []
    real = Resolver.nearest
    monkeypatch.setattr(Resolver, "nearest", lambda self, *a, **k: near.append(a) or real(self, *a, **k))
    ro = Session(duckdb.connect(str(path), read_only=True))
    r = query("callees(_matmul_impl)", ro)
    assert r.name == "callees" and r.rows and near == []
    assert Resolver(ro).memo[("_matmul_impl", "op")] is None
    with pytest.raises(QueryError, match="did you mean"):
        query("trace(matmull)", ro)
    assert near


def test_library_loads_once_from_two_threads(tmp_path):
    # the MCP server's warm thread and its first call load the library together:
    # textX is not thread-safe, so one parses and the other waits for it
    import threading

    from torchtalk.query.library import load_library_notes

    d = tmp_path / "myrules"
    d.mkdir()
    (d / "mine.dl").write_text(".decl mine_arg(op: symbol)\n.input mine_arg\n"
                               ".decl mine(op: symbol)\nmine(o) :- mine_arg(o), op(o, _, _, _, _, _).\n")
    got, errors = [], []

    def load():
        try:
            got.append(load_library_notes((d,), user=False)[0])
        except Exception as exc:  # noqa: BLE001  (collected for the assert)
            errors.append(exc)

    threads = [threading.Thread(target=load) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(got) == 4 and all(p is got[0] for p in got)
    assert "mine" in got[0].decls


def test_the_passes_can_be_shown_between_them(con, tmp_path):
    """Issue 14, deliverable 4: the query's program after each pass, as valid
    Soufflé text; the answer is the same with or without the dump."""
    from torchtalk.datalog import parse_file

    plain = q(con, "impact(cpublas::gemm, depth=2)")
    shown = query("impact(cpublas::gemm, depth=2)", con, user_rules=False, dump_passes=tmp_path / "p")
    assert shown.rows == plain.rows and plain.rows
    files = sorted(p.name for p in (tmp_path / "p").iterdir())
    assert files == ["00-input.dl", "01-prune.dl", "02-use_stored.dl", "03-presolve.dl"]
    sizes = [len(parse_file(tmp_path / "p" / f).rules) for f in files]
    assert sizes[0] > sizes[1] >= sizes[2] >= sizes[3]
    assert (tmp_path / "p/03-presolve.dl").read_text().splitlines()[0].startswith("// after pass 'presolve': ")


def test_the_library_files_are_looked_at_once_a_second(tmp_path, monkeypatch):
    """Note [Library files looked at once a second]: an edited rule file is
    read by the queries asked KEY_CHECK_S after the last look; a missing
    --rules dir is an error at every call."""
    from torchtalk.query import library

    d = tmp_path / "mine"
    d.mkdir()
    rule = d / "mine.dl"
    rule.write_text(".decl mine_a(x: symbol)\nmine_a(\"one\").\n")
    monkeypatch.setattr(library, "KEY_CHECK_S", 60.0)  # the library's first parse may take a second
    first, _ = library.load_library_notes((d,), user=False)
    rule.write_text(".decl mine_b(x: symbol)\nmine_b(\"two\").\n")
    again, _ = library.load_library_notes((d,), user=False)
    assert again is first and "mine_b" not in again.decls  # looked at less than KEY_CHECK_S ago
    monkeypatch.setattr(library, "KEY_CHECK_S", 0.0)
    edited, _ = library.load_library_notes((d,), user=False)
    assert "mine_b" in edited.decls and "mine_a" not in edited.decls
    for _ in range(2):
        with pytest.raises(InputError, match="rules directory not found"):
            library.load_library_notes((tmp_path / "gone",), user=False)
