"""Ranked answers (issue 15, deliverable 4), on the real 2.6.0 tree: tests
named for the subject or calling it, or its own *Info entry, before generic
sweeps and before other suites, each row saying why (`rank`, `why`; Note
[Test ranking] in rules/ranking.dl); `torchtalk affected` by distance plus the
strength of the test's link."""

from __future__ import annotations

import difflib

import pytest

pytestmark = pytest.mark.real_tree

EB = "aten/src/ATen/native/cuda/EmbeddingBag.cu"


@pytest.fixture(scope="module")
def con(real_con):
    return real_con


def _rows(con, text):
    from torchtalk import api

    r = api.query(text, con=con, limit=None)
    return r.records()


def test_tests_of_softmax_start_with_test_nn_and_test_ops(con):
    rows = _rows(con, "tests(softmax.int)")
    assert rows[0]["test"].startswith("test/test_nn.py::") and rows[0]["why"] == "named for it"
    files = [r["test"].split("::")[0] for r in rows]
    # the named and calling tests of the core suites, then sweeps; every other suite after them
    first_other = next(i for i, r in enumerate(rows) if r["why"].endswith("other suite"))
    assert "test/test_ops.py" in files[:first_other]
    assert not any(f.startswith(("test/distributed/", "test/inductor/")) for f in files[:first_other])
    assert [r["rank"] for r in rows] == sorted(r["rank"] for r in rows)
    # one rank per test: a test's best link
    assert len({r["test"] for r in rows}) == len({(r["test"], r["rank"]) for r in rows})


def test_each_rank_says_why(con):
    rows = _rows(con, "tests(softmax.int)")
    by_why = {}
    for r in rows:
        by_why.setdefault(r["why"], set()).add((r["rank"], r["how"]))
    assert by_why["named for it"] == {(0, "name")}
    assert {h for _, h in by_why["calls it"]} <= {"call", "method"}
    assert {h for _, h in by_why["sweep"]} <= {"opinfo", "opinfo_alias", "moduleinfo", "optiminfo"}
    other = {r["test"].split("::")[0] for r in rows if r["why"].endswith("other suite")}
    assert {"test/distributed/_tensor/test_math_ops.py", "test/inductor/test_torchinductor.py"} <= other
    assert not other & {"test/test_nn.py", "test/test_ops.py", "test/nn/test_embedding.py"}


def test_a_function_s_tests_rank_by_distance_plus_link(con):
    rows = _rows(con, "tests(cpublas::gemm, depth=3)")
    assert all(r["rank"] >= r["depth"] for r in rows)
    named = [r for r in rows if r["why"] == "named for it"]
    assert named and all(r["rank"] == r["depth"] for r in named)


def test_embedding_bag_cuda_diff_puts_its_tests_first(real_db, tree):
    from torchtalk import api

    old = (tree / EB).read_text().splitlines(keepends=True)
    at = next(i for i, s in enumerate(old) if s.startswith("_embedding_bag_cuda(const Tensor &weight"))
    new = list(old)
    new[at + 20] = new[at + 20].rstrip("\n") + " // edited\n"
    report = api.affected(diff="".join(difflib.unified_diff(old, new, f"a/{EB}", f"b/{EB}")), db=real_db)
    assert list(report.changes.fns) == ["at::native::_embedding_bag_cuda"]
    names = [t.test.rpartition("::")[2] for t in report.tests]
    assert all(n.lower().startswith("test_embedding_bag") for n in names[:15]), names[:15]
    nn = [i for i, t in enumerate(report.tests)
          if t.test.startswith("test/nn/test_embedding.py::") and "::test_embedding_bag_" in t.test]
    assert len(nn) == 14 and max(nn) < 20
    sweeps = [i for i, t in enumerate(report.tests) if t.why.startswith("sweep")]
    assert sweeps and max(nn) < min(sweeps)
    keys = [(t.rank, t.depth, -t.reached_by, t.test) for t in report.tests]
    assert keys == sorted(keys)


def test_kernels_of_an_op_own_launches_first(con):
    """Note [Kernel ranking]: embedding_bag's own launches (EmbeddingBag.cu, the
    file of its `_embedding_bag` CUDA kernel) before the fill and gpu_kernel
    launches reached through at::X calls and stubs."""
    rows = _rows(con, "kernels(embedding_bag, depth=8)")
    own = [r for r in rows if r["why"] == "the op's own"]
    assert {(r["host"], r["file"]) for r in own} == {
        ("at::native::_embedding_bag_cuda", "aten/src/ATen/native/cuda/EmbeddingBag.cu")}
    assert rows[:len(own)] == own and len(rows) > len(own)
    assert {r["host"] for r in rows[len(own):]} >= {"at::native::fill_kernel_cuda"}
    assert all(r["rank"] == 1 for r in rows[len(own):])
    # a host called from the op's own file: SoftMax.cu's host_softmax → dispatch_softmax_forward
    sm = {r["kernel"].rpartition("::")[2]: r["why"] for r in _rows(con, "kernels(_softmax)")}
    assert sm["softmax_warp_forward"] == "the op's own"
    topk = {r["host"]: r["why"] for r in _rows(con, "kernels(topk)")}
    assert topk["at::native::arange_cuda_out"] == "through a shared helper"


# ---------------------------------------------------------------- chains
# Note [Chain ranking]: impact, paths and affected rank a row by its depth
# plus its chain's strength: a row only name guesses reach counts 3 steps more.
GUESS_STEPS = 3
TF = "aten/src/ATen/native/transformers/transformer.cpp"


def _penalty(res: str) -> int:
    return GUESS_STEPS if res == "guess" else 0


def test_impact_of_gemm_puts_its_typed_direct_callers_before_guesses(con):
    """cpublas::brgemm calls gemm's overloads by their argument types
    (CPUBlas.cpp); the other callers' calls of `gemm` are told apart neither
    by count nor types (guesses), so they rank 3 steps further."""
    rows = _rows(con, "impact(cpublas::gemm)")
    assert all(r["rank"] == r["depth"] + _penalty(r["res"]) for r in rows)
    assert [(r["rank"], r["depth"]) for r in rows] == sorted((r["rank"], r["depth"]) for r in rows)
    typed = [r for r in rows if r["res"] == "resolved"]
    assert rows[:len(typed)] == typed
    assert {(r["kind"], r["name"].split("(")[0], r["depth"], r["file"], r["line"]) for r in typed} == {
        ("function", "at::native::cpublas::brgemm", 1, "aten/src/ATen/native/CPUBlas.cpp", ln)
        for ln in (1215, 1246, 1277)}
    assert all(s["res"] == "typed" for r in typed for s in r["chain"])
    guess = rows[len(typed)]  # the nearest guess: a direct caller, rank 1 + 3
    assert (guess["depth"], guess["rank"], guess["chain"][0]["res"]) == (1, 4, "guess")
    deep = [r for r in rows if r["depth"] == 4 and r["res"] == "guess"]
    assert deep and {r["rank"] for r in deep} == {7}
    assert max(rows.index(r) for r in typed) < min(rows.index(r) for r in deep)


def test_paths_up_from_layer_norm_cpu_rank_a_guessed_chain_last(con):
    """torch.layer_norm reaches layer_norm_cpu by typed steps; the
    transformer's fused op only through transformer.cpp's call of `norm`,
    a name guess: its APIs come last, with the guessed step in their chain."""
    rows = _rows(con, "paths(at::native::layer_norm_cpu -> python)")
    assert all(r["rank"] == r["depth"] + _penalty(r["res"]) for r in rows)
    assert [r["rank"] for r in rows] == sorted(r["rank"] for r in rows)
    sure = {r["dst"]: r["rank"] for r in rows if r["res"] == "resolved"}
    assert sure["torch.native_layer_norm"] == 0 and sure["torch.nn.functional.layer_norm"] == 1
    guessed = [r for r in rows if r["res"] == "guess"]
    assert {r["op"] for r in guessed} == {"_transformer_encoder_layer_fwd"}
    assert rows[-len(guessed):] == guessed and {r["rank"] for r in guessed} == {3 + GUESS_STEPS}
    for r in guessed:
        assert ("norm", "guess", TF, 105) in {(s["dst"].rpartition("::")[2], s["res"], s["file"], s["line"])
                                               for s in r["chain"]}


def test_affected_ranks_ops_apis_and_tests_by_distance_and_strength(con):
    rows = _rows(con, "affected(at::native::layer_norm_cpu)")
    assert [(r["rank"], r["depth"]) for r in rows] == sorted((r["rank"], r["depth"]) for r in rows)
    apis = [r for r in rows if r["kind"] != "test"]
    assert {r["why"] for r in apis} == {"resolved", "guess"}
    for r in apis:
        assert r["rank"] == r["depth"] + _penalty(r["why"])
    fused = [r for r in apis if r["via"] == "_transformer_encoder_layer_fwd"]
    assert {(r["kind"], r["depth"], r["rank"], r["why"]) for r in fused} == {
        ("op", 4, 7, "guess"), ("python", 5, 8, "guess")}
    # its tests say the guess after their link, and rank 3 steps further
    tests = [r for r in rows if r["kind"] == "test" and r["via"] == "_transformer_encoder_layer_fwd"]
    assert tests and all(r["why"].endswith(", through a guess") for r in tests)
    named = next(r for r in rows if r["kind"] == "test" and r["via"] == "native_layer_norm"
                 and r["why"] == "named for it")
    assert named["rank"] == named["depth"] == 2
    assert min(r["rank"] for r in tests) >= 5 + GUESS_STEPS


def test_affected_of_an_embedding_bag_cuda_diff_opens_with_its_ops_and_apis(con, tree):
    """A diff of EmbeddingBag.cu (its op's CUDA kernel and a kernel helper):
    the ops and Python APIs of embedding_bag come first, nearest first, then
    the tests."""
    from torchtalk.changes import changed_entities, changed_lines
    from torchtalk.query.dsl import value_text

    old = (tree / EB).read_text().splitlines(keepends=True)
    new = list(old)
    for start in ("_embedding_bag_cuda(const Tensor &weight", "__global__ void EmbeddingBag_updateOutputKernel_max("):
        at = next(i for i, s in enumerate(old) if s.startswith(start))
        new[at + 3] = new[at + 3].rstrip("\n") + " // edited\n"
    diff = "".join(difflib.unified_diff(old, new, f"a/{EB}", f"b/{EB}"))
    fns = sorted(changed_entities(con, tree, changed_lines(diff, "<diff>")).fns)
    assert [f.rpartition("::")[2] for f in fns] == ["EmbeddingBag_updateOutputKernel_max", "_embedding_bag_cuda"]
    rows = _rows(con, "affected(" + ", ".join(value_text(f) for f in fns) + ")")
    first_test = next(i for i, r in enumerate(rows) if r["kind"] == "test")
    head = rows[:first_test]
    assert head[0]["kind"] == "op" and (head[0]["name"], head[0]["rank"]) == ("_embedding_bag", 1)
    assert {r["kind"] for r in head} == {"op", "python"}
    assert {r["via"] for r in head} <= {"_embedding_bag", "_embedding_bag_forward_only", "embedding_bag.padding_idx"}
    assert [r["rank"] for r in rows] == sorted(r["rank"] for r in rows)


# Note [API tiers]: at equal rank, documented Python APIs, then other public
# names, then private ones (a `_` segment, torch._C.*, torch.ops.*).
TIERS = ("documented", "other public", "private")


def _tier(name: str) -> str:
    """The tier of a Python name by Note [API tiers]'s words, from resolve.py's
    PUBLIC_API_MODULES (what the rules' documented_module must agree with)."""
    from torchtalk.query.resolve import PUBLIC_API_MODULES

    parts = name.split(".")
    if any(p.startswith("_") for p in parts) or name.startswith("torch.ops."):
        return "private"
    return "documented" if name.rsplit(".", 1)[0] in PUBLIC_API_MODULES else "other public"


@pytest.mark.parametrize(("subject", "key", "documented", "private"), [
    ("impact(cpublas::gemm, depth=4, kind=python)", "name", {"torch.mm", "torch.addmm", "torch.Tensor.mm"},
     {"torch._C._nn.slow_conv_dilated2d", "torch.ops.aten.addmm", "torch.Tensor._addmm_activation"}),
    ("paths(at::native::layer_norm_cpu -> python)", "dst",
     {"torch.native_layer_norm", "torch.nn.functional.layer_norm", "torch.layer_norm"},
     {"torch.ops.aten.native_layer_norm", "torch.ops.aten.layer_norm.default"}),
    ("impact(at::native::layer_norm_cpu, kind=python)", "name", {"torch.nn.functional.layer_norm", "torch.native_layer_norm"},
     {"torch.ops.aten.native_layer_norm"}),
])
def test_impact_and_paths_put_documented_apis_first_at_equal_rank(con, subject, key, documented, private):
    rows = _rows(con, subject)
    assert all(r["api"] == _tier(r[key]) for r in rows)
    names = {r[key] for r in rows}
    assert documented <= names and private <= names
    assert [(r["rank"], TIERS.index(r["api"])) for r in rows] == sorted(
        (r["rank"], TIERS.index(r["api"])) for r in rows)
    for rank in {r["rank"] for r in rows}:  # within a rank: documented, then public, then private
        tiers = [r["api"] for r in rows if r["rank"] == rank]
        assert tiers == sorted(tiers, key=TIERS.index)
        for tier in TIERS:  # in a tier, the API with the most tests first (its tests_cover rows)
            tests = [r["tests"] for r in rows if (r["rank"], r["api"]) == (rank, tier)]
            assert tests == sorted(tests, reverse=True)
    for r in rows[:50]:
        n = con.execute("SELECT count(DISTINCT test) FROM tests_cover WHERE subject = ?", [r[key]]).fetchone()[0]
        assert r["tests"] == n, r[key]
    first = {r[key]: i for i, r in reversed(list(enumerate(rows)))}
    by_rank = {r[key]: r["rank"] for r in rows}
    for d in documented:
        for p in private:
            if by_rank[d] == by_rank[p]:
                assert first[d] < first[p], (d, p)


def test_the_rules_documented_modules_are_resolve_s_public_api_modules():
    from pathlib import Path

    from torchtalk.query.resolve import PUBLIC_API_MODULES

    text = (Path(__file__).resolve().parents[1] / "rules/ranking.dl").read_text()
    import re

    found = dict(re.findall(r'^documented_module\("([^"]+)", "([^"]+)"\)\.$', text, re.M))
    assert set(found) == PUBLIC_API_MODULES
    for m, members in found.items():  # the regex of the module's direct public members
        assert members.replace("\\\\", "\\") == re.escape(m) + r"\.[^._][^.]*"


def test_every_test_link_of_every_op_has_one_rank(con):
    """Note [Tests of every op stored]: op_test (trace's tests) reads the
    ranked links, so every link must have a rank, and one: the links of all
    ops and their ranks, stored by the index, are the same rows."""
    from torchtalk import api

    links = api.query("op_test_link()", con=con, limit=None, all_matches=True)
    ranks = api.query("op_test_rank()", con=con, limit=None, all_matches=True)
    assert links.total == ranks.total > 300_000
    keep = ("op", "test", "how", "via", "file", "line")
    key = {c: i for i, c in enumerate(links.columns)}
    rkey = {c: i for i, c in enumerate(ranks.columns)}
    assert {tuple(r[key[c]] for c in keep) for r in links.rows} == {tuple(r[rkey[c]] for c in keep) for r in ranks.rows}
