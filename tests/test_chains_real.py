"""The chain behind every walk answer (issue 15, deliverable 3), on the real
2.6.0 tree: each row of paths, impact, kernels, tests and affected carries
the shortest chain of steps that links it to what was asked, each step with
its kind and file:line (Note [Chains] in rules/chains.dl)."""

from __future__ import annotations

import json
import re

import pytest

pytestmark = pytest.mark.real_tree

LN = "aten/src/ATen/native/cuda/layer_norm_kernel.cu"
YAML = "aten/src/ATen/native/native_functions.yaml"
LA = "aten/src/ATen/native/LinearAlgebra.cpp"
ANON = "at::native::(anonymous:aten/src/ATen/native/cuda/layer_norm_kernel.cu)::"
VLN = ANON + "vectorized_layer_norm_kernel"
# the chain from layer_norm_cuda down to the kernel, as the tree has it
LN_TAIL = [
    ("at::native::layer_norm_cuda", ANON + "LayerNormKernelImpl", "call", LN, 1368),
    (ANON + "LayerNormKernelImpl", ANON + "LayerNormKernelImplInternal", "call", LN, 820),
    (ANON + "LayerNormKernelImplInternal", ANON + "launch_vectorized_layer_norm_kernel", "call", LN, 790),
    (ANON + "launch_vectorized_layer_norm_kernel", VLN, "<<<>>>", LN, 751),
]
MATMUL_IMPL = "at::native::(static:aten/src/ATen/native/LinearAlgebra.cpp)::_matmul_impl"
ADDMM = "at::native::(static:aten/src/ATen/native/LinearAlgebra.cpp)::addmm_impl_cpu_"
# the call at LinearAlgebra.cpp:1533 (in an AT_DISPATCH lambda: scalar_t) reaches
# each cpublas::gemm overload (Note [Overload ids]); a chain names the first by id
GEMM_CD = ("at::native::cpublas::gemm(TransposeType, TransposeType, int64_t, int64_t, int64_t, complex<double>,"
           " const complex<double>*, int64_t, const complex<double>*, int64_t, complex<double>, complex<double>*, int64_t)")
MM_TAIL = [
    ("at::native::structured_mm_out_cpu::impl", ADDMM, "call", LA, 1635),
    (ADDMM, GEMM_CD, "call", LA, 1533),
]


def _tiered(con, steps: list[tuple]) -> list[tuple]:
    """`steps` as this index has them: a C++ call written in a file the
    compiler tier parsed is its step of kind "precise" (the fast tier's
    "call" where it did not; the compiler tier may be done or not)."""
    import duckdb

    try:
        precise = {f for (f,) in con.con.execute("SELECT file FROM precise_file").fetchall()}
    except duckdb.CatalogException:
        precise = set()
    return [(a, b, "precise" if kind == "call" and f in precise else kind, f, line) for a, b, kind, f, line in steps]


@pytest.fixture(scope="module")
def con(real_db):
    from torchtalk import api

    c = api.open_db(db=real_db)
    yield c
    c.close()


def _records(con, text, limit=None):
    from torchtalk import api

    return api.query(text, con=con, limit=limit, all_matches=True).records()


def _steps(rec) -> list[tuple]:
    return [(s["src"], s["dst"], s["kind"], s["file"], s["line"]) for s in rec["chain"]]


def _connected(rec) -> bool:
    steps = rec["chain"]
    return all(a["dst"] == b["src"] for a, b in zip(steps, steps[1:], strict=False))


def test_paths_to_python_goes_through_host_layer_norm_cuda_and_the_impl(con):
    rows = _records(con, "paths(vectorized_layer_norm_kernel -> python)")
    assert len(rows) >= 10
    best: dict[str, dict] = {}
    for r in rows:
        assert _connected(r) and r["chain"][0]["src"] == r["dst"] and r["chain"][-1]["dst"] == VLN
        if r["dst"] not in best or r["depth"] < best[r["dst"]]["depth"]:
            best[r["dst"]] = r
    for api_name, r in best.items():  # each API's shortest chain
        assert _steps(r)[-4:] == _tiered(con, LN_TAIL), api_name
    assert _steps(best["torch.native_layer_norm"]) == _tiered(con, [
        ("torch.native_layer_norm", "native_layer_norm", "variant", YAML, 3287),
        ("native_layer_norm", "at::native::layer_norm_cuda", "CUDA", YAML, 3290),
        *LN_TAIL,
    ])
    assert _steps(best["torch.nn.functional.layer_norm"])[:3] == [
        ("torch.nn.functional.layer_norm", "layer_norm", "wrapper", "torch/nn/functional.py", 2910),
        ("layer_norm", "at::native::layer_norm_symint", "CompositeImplicitAutograd", YAML, 3285),
        ("at::native::layer_norm_symint", "at::native::layer_norm_cuda", "aten",
         "aten/src/ATen/native/layer_norm.cpp", 199),
    ]


def test_paths_gemm_to_matmul_through_matmul_impl_and_mm_out_cpu(con):
    rows = [r for r in _records(con, "paths(cpublas::gemm -> python)")
            if r["dst"] == "torch.matmul" and r["op"] == "matmul"]
    r = min(rows, key=lambda r: r["depth"])
    assert r["depth"] == 4
    assert _steps(r) == _tiered(con, [
        ("torch.matmul", "matmul", "variant", YAML, 3775),
        ("matmul", "at::native::matmul", "CompositeImplicitAutograd", YAML, 3778),
        ("at::native::matmul", MATMUL_IMPL, "call", LA, 2183),
        (MATMUL_IMPL, "at::native::structured_mm_out_cpu::impl", "aten", LA, 2032),
        *MM_TAIL,
    ])


SOFTMAX_INT = "at::native::softmax(const Tensor&, int64_t, optional<ScalarType>)"


def test_paths_down_to_cuda_ends_with_the_rows_launch(con):
    rows = _records(con, "paths(torch.softmax -> cuda)")
    for r in rows:
        assert _connected(r) and r["chain"][0]["src"] == "torch.softmax", r
        last = r["chain"][-1]
        assert (last["dst"], last["file"], last["line"]) == (r["dst"], r["file"], r["line"])
        assert len(r["chain"]) == r["depth"] + 2  # the API's op, its kernel, the walk
    r = rows[0]
    assert _steps(r) == _tiered(con, [
        # softmax.int's kernel is the int overload of at::native::softmax (Note [Kernel overloads])
        ("torch.softmax", "softmax.int", "variant", YAML, 5541),
        ("softmax.int", SOFTMAX_INT, "CompositeImplicitAutograd", YAML, 5541),
        (SOFTMAX_INT, "at::native::structured_softmax_cuda_out::impl", "aten",
         "aten/src/ATen/native/SoftMax.cpp", 447),
        ("at::native::structured_softmax_cuda_out::impl",
         "at::native::(anonymous:aten/src/ATen/native/cuda/SoftMax.cu)::host_softmax", "call",
         "aten/src/ATen/native/cuda/SoftMax.cu", 1096),
        ("at::native::(anonymous:aten/src/ATen/native/cuda/SoftMax.cu)::host_softmax",
         "at::native::(anonymous:aten/src/ATen/native/cuda/SoftMax.cu)::cunn_SoftMaxForward", "<<<>>>",
         "aten/src/ATen/native/cuda/SoftMax.cu", 876),
    ])


def test_impact_rows_carry_their_chain(con):
    rows = _records(con, "impact(vectorized_layer_norm_kernel, depth=5)")
    for r in rows:
        assert _connected(r) and r["chain"][-1]["dst"] == VLN, r
        first = r["chain"][0]
        assert (first["src"], first["dst"], first["file"], first["line"]) == (r["name"], r["via"], r["file"], r["line"])
        assert len(r["chain"]) == r["depth"]  # the row's own step, then one per walk step
    cuda = next(r for r in rows if r["name"] == "at::native::layer_norm_cuda")
    assert _steps(cuda) == _tiered(con, LN_TAIL)
    op = next(r for r in _records(con, "impact(cpublas::gemm, depth=4)") if r["kind"] == "op" and r["name"] == "mm")
    assert _steps(op) == _tiered(con, [("mm", "at::native::structured_mm_out_cpu::impl", "CPU", YAML, 4143), *MM_TAIL])


def test_kernels_rows_chain_from_the_op_to_the_launch(con):
    rows = _records(con, "kernels(embedding_bag, depth=3)")
    for r in rows:
        assert _connected(r)
        assert (r["chain"][0]["src"], r["chain"][0]["dst"], r["chain"][0]["kind"]) == (r["op"].split(".")[0], r["entry"], r["key"]) \
            or r["chain"][0]["src"] == r["op"]
        assert (r["chain"][-2]["dst"] if len(r["chain"]) > 1 else r["entry"]) == r["host"]
        assert (r["chain"][-1]["dst"], r["chain"][-1]["line"]) == (r["kernel"], r["line"])
        assert len(r["chain"]) == r["depth"] + 1
    eb = "aten/src/ATen/native/cuda/EmbeddingBag.cu"
    # embedding_bag.padding_idx's kernel: the nine-parameter at::native::embedding_bag (Note [Kernel overloads])
    eb9 = ("at::native::embedding_bag(const Tensor&, const Tensor&, const Tensor&, bool, int64_t, bool,"
           " const optional<Tensor>&, bool, optional<int64_t>)")
    assert _steps(rows[0]) == [
        ("embedding_bag.padding_idx", eb9, "CompositeImplicitAutograd", YAML, 2347),
        (eb9, "at::native::_embedding_bag_cuda", "aten", "aten/src/ATen/native/EmbeddingBag.cpp", 1255),
        ("at::native::_embedding_bag_cuda",
         "at::native::(anonymous:aten/src/ATen/native/cuda/EmbeddingBag.cu)::EmbeddingBag_updateOutputKernel_max",
         "<<<>>>", eb, 402),
    ]


def test_tests_rows_chain_from_the_test_to_the_subject(con):
    r = next(r for r in _records(con, "tests(cpublas::gemm, depth=3)")
             if r["test"] == "test/test_custom_ops.py::MiniOpTest::test_mm" and r["op"] == "mm")
    assert _steps(r) == _tiered(con, [
        ("test/test_custom_ops.py::MiniOpTest::test_mm", "mm", "name", "test/test_custom_ops.py", 2211),
        ("mm", "at::native::structured_mm_out_cpu::impl", "CPU", YAML, 4143),
        *MM_TAIL,
    ])
    rows = _records(con, "tests(layer_norm)")
    for r in rows:
        assert _connected(r) and r["chain"][0]["src"] == r["test"] and r["chain"][-1]["dst"] == r["op"], r
    mod = next(r for r in rows if r["test"] == "test/test_nn.py::TestNN::test_transformerdecoder"
               and r["via"] == "torch.nn.modules.normalization.LayerNorm")
    assert [s["kind"] for s in mod["chain"]] == ["call", "forward", "wrapper"]
    assert mod["chain"][1]["dst"] == "torch.nn.modules.normalization.LayerNorm.forward"


def test_affected_rows_chain_to_the_changed_function(con):
    rows = _records(con, "affected(vectorized_layer_norm_kernel)")
    kinds = {r["kind"] for r in rows}
    assert kinds == {"op", "python", "test"}
    for r in rows:
        assert _connected(r) and r["chain"][-1]["dst"] == VLN, r
    test = next(r for r in rows if r["name"] == "test/test_decomp.py::DecompOneOffTests::test_native_layer_norm_cpu_decomp")
    assert _steps(test)[0] == (test["name"], "native_layer_norm", "covers", "test/test_decomp.py", 1201)
    assert _steps(test)[1:] == _tiered(con, [("native_layer_norm", "at::native::layer_norm_cuda", "CUDA", YAML, 3290),
                                             *LN_TAIL])


def test_chain_is_a_compact_column_in_tables_and_a_list_in_json(con, capsys):
    from torchtalk import api
    from torchtalk.query.output import print_table, to_json

    r = api.query("paths(cpublas::gemm -> python)", con=con, limit=3)
    assert r.columns[-1] == "chain"
    print_table(r)
    out = capsys.readouterr().out
    assert "chain" in out.splitlines()[0].split("\t")
    # the fast tier's call is a guess at which overload (Note [Overload ids]); the compiler tier's is resolved
    kind = _tiered(con, [("", "", "call", LA, 1533)])[0][2]
    assert f"-{'call?' if kind == 'call' else kind} LinearAlgebra.cpp:1533-> cpublas::gemm(" in out
    recs = json.loads(to_json(r))
    recs = recs["rows"] if isinstance(recs, dict) else recs
    assert all(isinstance(rec["chain"], list) and {"src", "dst", "kind", "file", "line"} <= set(rec["chain"][0])
               for rec in recs)


def test_explain_stays_for_the_full_derivation(con):
    from torchtalk import api

    r = api.query("paths(vectorized_layer_norm_kernel -> python)", con=con, limit=1, explain=1)
    assert r.explanations[0]["fact"].startswith("paths(")
    assert "chain" in r.columns and r.rows[0][-1]


@pytest.mark.parametrize("text", ["impact(cpublas::gemm)", "impact(at::native::layer_norm_cpu)",
                                  "affected(cpublas::gemm)", "affected(at::native::layer_norm_cpu)"])
def test_a_page_s_chains_are_the_whole_answer_s(con, text):
    """Note [Chains for the page]: a page's chains come from a second run
    given the rows shown (their own closure), the whole answer's from one run
    (every reached node's steps); a row's chain is the same either way."""
    from torchtalk import api

    whole = api.query(text, con=con, limit=None, all_matches=True)
    for n in (1, 50):
        page = api.query(text, con=con, limit=n, all_matches=True)
        assert page.total == whole.total and len(page.rows) == n
        assert page.records() == whole.records()[:n]
        assert all(r["chain"] for r in page.records())


def _recorded_sql(monkeypatch) -> list[str]:
    """The SQL of each DuckDB plan run from now on (its statements and fetches), one string a plan."""
    from torchtalk.datalog.engines import duckdb as engine

    runs: list[str] = []
    real = engine._execute

    def recording(c, plan, *args, **kw):
        runs.append(" ".join(getattr(s, "sql", "") for s in plan.steps) + " ".join(plan.fetch.values()))
        return real(c, plan, *args, **kw)

    monkeypatch.setattr(engine, "_execute", recording)
    return runs


@pytest.mark.parametrize("text,walk", [("impact(cpublas::gemm)", "up_reach"),
                                       ("affected(at::native::layer_norm_cpu)", "up_reach")])
def test_a_page_walks_once_and_leaves_no_table(con, monkeypatch, text, walk):
    """Note [One walk per answer]: the chains' run reads the walk the rows'
    run computed (its statements compute no `up_reach`), and the kept
    table is dropped once the answer is built; the chains are the whole
    answer's (the test above)."""
    from torchtalk import api

    runs = _recorded_sql(monkeypatch)
    page = api.query(text, con=con, limit=5, all_matches=True)
    assert all(r["chain"] for r in page.records())
    walked = [i for i, sql in enumerate(runs) if f'{walk}_rec"' in sql]
    assert len(walked) == 1
    table = re.search(rf'CREATE TEMP TABLE ("_tt\d+_{walk}")', runs[walked[0]]).group(1)
    assert any(f"temp.main.{table}" in sql for sql in runs[walked[0] + 1:])  # read by the chains' run
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE temporary").fetchone()[0] == 0


@pytest.mark.parametrize("text,closure", [("impact(host_softmax, depth=4)", False),
                                          ("affected(at::native::layer_norm_cpu)", True)])
def test_op_rows_chain_by_the_kind_their_query_gives(con, monkeypatch, text, closure):
    """Note [Chain kind given with the op] (rules/chains.dl): impact gives
    its op and API rows' ops as up_dag_op, so its chains' run computes no
    up_chain_at closure; affected gives up_chain_op and does. The op and
    API rows' chains are those of the whole answer's one run. (Both by
    closures: Note [Every edge of a small answer] takes none.)"""
    from torchtalk import api
    from torchtalk.query import run

    monkeypatch.setattr(run, "ALL_EDGES_WALK", -1)

    whole = api.query(text, con=con, limit=None, all_matches=True)
    kinds = whole.columns.index("kind")
    ops = [i for i, r in enumerate(whole.rows) if r[kinds] in ("op", "python")]
    assert len(ops) >= 3
    runs = _recorded_sql(monkeypatch)
    picked = api.query(text, con=con, all_matches=True, chains_for=lambda cols, rows: ops)
    assert [picked.rows[i][-1] for i in ops] == [whole.rows[i][-1] for i in ops]
    assert all(picked.rows[i][-1] for i in ops)
    assert any('up_chain_at_rec"' in sql for sql in runs) is closure


@pytest.mark.parametrize("text,closure,walk", [
    ("impact(host_softmax, depth=4)", False, "up_dag_at"),
    ("impact(cpublas::gemm)", False, "up_dag_at"),
    ("impact(TensorIterator, depth=5)", True, "up_dag_at"),
    ("affected(cpublas::gemm)", False, "up_chain_at"),
    ("affected(TensorIterator, depth=5)", True, "up_chain_at"),
])
def test_a_small_walk_s_page_takes_every_edge(con, monkeypatch, text, closure, walk):
    """Note [Every edge of a small answer] (torchtalk/query/run.py): on
    DuckDB, the chains of a page whose walk kept at most ALL_EDGES_WALK rows
    come from the steps between every two reached nodes, with no closure
    from the rows; a longer walk's from the closure. Its rows' chains are
    those the closure gives."""
    from torchtalk import api
    from torchtalk.datalog.engines import duckdb as engine
    from torchtalk.query import run

    runs, sizes = _recorded_sql(monkeypatch), []
    small = run._small_walks

    def sizing(c, eng, walks):
        sizes.append(sum(engine.table_rows(c, t) for t in walks.values()))
        return small(c, eng, walks)

    monkeypatch.setattr(run, "_small_walks", sizing)
    page = api.query(text, con=con, limit=50, all_matches=True)
    assert len(sizes) == 1 and (sizes[0] > run.ALL_EDGES_WALK) is closure
    assert any(f'{walk}_rec"' in sql for sql in runs) is closure
    monkeypatch.setattr(run, "ALL_EDGES_WALK", -1)  # every walk by the closure
    runs.clear()
    by_closure = api.query(text, con=con, limit=50, all_matches=True)
    assert any(f'{walk}_rec"' in sql for sql in runs)
    assert page.records() == by_closure.records() and all(r["chain"] for r in page.records())


# ------------------------------------------------- chains for the rows read
# Note [Chains for the rows read] (torchtalk/query/run.py): a table or an MCP
# answer reads every row but computes the chains of the rows it shows only.


@pytest.mark.parametrize("text", ["impact(cpublas::gemm, depth=3)", "affected(at::native::cpublas::gemm)"])
def test_a_table_computes_the_chains_of_the_rows_it_shows(real_con, text):
    import io

    from torchtalk import api
    from torchtalk.query import output

    every = api.query(text, con=real_con)
    picked = api.query(text, con=real_con, chains_for=lambda cols, rows: output.table_rows(cols, rows, 12))
    assert picked.total == every.total > 100
    assert [r[:-1] for r in picked.rows] == [r[:-1] for r in every.rows]
    with_chain = [i for i, r in enumerate(picked.rows) if r[-1] is not None]
    # the rows the table shows, and no others, have their chain: the one every row's run gives
    assert 0 < len(with_chain) <= 12
    assert all(picked.rows[i][-1] == every.rows[i][-1] for i in with_chain)
    texts = []
    for result in (every, picked):
        out = io.StringIO()
        output.print_table(result, file=out, cap=12, text=text)
        texts.append(out.getvalue())
    assert texts[0] == texts[1]
    shown = texts[1].splitlines()[1:]
    assert len(shown) == len(with_chain)


@pytest.mark.parametrize("name, dsl", [
    ("gemm", "impact({}, depth=3)"),  # three definitions, each within its share of the budget
    ("at::native::cpublas::gemm", "affected({})"),  # one definition: its first rows per section read
    ("host_softmax", "impact({}, depth=4)"),
])
def test_an_mcp_answer_computes_the_chains_of_the_rows_it_fits(real_con, monkeypatch, name, dsl):
    """The same text and structured rows whether every row is read with its
    chain, or the first rows of each section and the chains of those the
    budget fits (Notes [Chains for the rows read], [Rows per section])."""
    from types import SimpleNamespace

    from torchtalk.mcp import tools
    from torchtalk.mcp.answer import to_result

    ctx = SimpleNamespace(request_context=SimpleNamespace(lifespan_context=SimpleNamespace(rules=())))

    def answer():
        out = tools._each(ctx, real_con, name, dsl.format, None)
        return out if hasattr(out, "content") else to_result(out)

    picked = answer()
    monkeypatch.setattr(tools, "_fitted", lambda budget, name=None: None)
    monkeypatch.setattr(tools, "PER_SECTION", None)
    read = tools._dsl  # every row (not FETCH_ROWS of them: affected(gemm) has 91,250)
    monkeypatch.setattr(tools, "_dsl", lambda ctx, con, text, limit=None, pick=None, per=None:
                        read(ctx, con, text, None, pick, per))
    every = answer()
    assert picked.content[0].text == every.content[0].text
    assert picked.structured_content == every.structured_content
    assert name.split("::")[-1] in picked.content[0].text


@pytest.mark.parametrize("text", ["impact(cpublas::gemm)", "affected(at::native::cpublas::gemm)",
                                  "callers(cpublas::gemm)", "callees(_matmul_impl)", "search(gemm)"])
def test_a_table_reads_the_first_rows_of_each_section(real_con, text):
    """Note [Rows per section]: the CLI's table reads the first rows of each
    section, with the counts of all, and prints what it printed from every row."""
    import contextlib
    import io

    from torchtalk import api
    from torchtalk.query import output

    def table(**kw) -> tuple[str, str, int]:
        result = api.query(text, con=real_con, **kw)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stderr(err):
            output.print_table(result, file=out, cap=output.CLI_ROWS, text=text)
        return out.getvalue(), err.getvalue(), len(result.rows)

    cap = output.CLI_ROWS
    every = table()
    first = table(per_section=cap, chains_for=lambda cols, rows: output.table_rows(cols, rows, cap))
    assert first[:2] == every[:2]
    assert every[2] > cap and first[2] <= cap * 4  # at most 4 sections (kind) of `cap` rows were read


def test_an_answer_with_overloads_to_group_is_read_by_its_limit(real_con):
    """Note [Rows per section]: kernels has an `op` column (overloads grouped
    by the reader), so `per_section` does not apply and the limit does."""
    from torchtalk import api

    result = api.query("kernels(add)", con=real_con, limit=7, per_section=2)
    assert len(result.rows) == 7 and result.total > 7 and result.counts is None
    impact = api.query("impact(cpublas::gemm, depth=2)", con=real_con, limit=7, per_section=2)
    assert impact.counts is not None and len(impact.rows) <= 2 * len(impact.counts) < impact.total
