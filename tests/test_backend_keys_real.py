"""Every dispatch key, registrations and fallbacks in the rules (issue 17,
deliverables 1 and 3), on the real PyTorch 2.6.0 tree.

The expected counts are cross-checked against the fact tables where they can
be (the composite kernels against `dispatch`), so a rule that drops or adds
rows shows up as a difference, not as a new number."""

from __future__ import annotations

from collections import Counter

import pytest

pytestmark = pytest.mark.real_tree

NF = "aten/src/ATen/native/native_functions.yaml"


@pytest.fixture(scope="module")
def con(real_db):
    from torchtalk import api

    c = api.open_db(db=real_db)
    yield c
    c.close()


def q(con, text):
    from torchtalk import api

    return api.query(text, con=con, limit=None, all_matches=True)


def by_status(rows) -> Counter:
    return Counter((r[2], r[3]) for r in rows)


def test_private_use1_what_a_new_backend_gets(con):
    """PrivateUse1, a key no dispatch table names: it inherits the composite
    kernels (by their alias key), must implement the rest, and 106 of those
    decompose into ops it has."""
    rows = q(con, "coverage(PrivateUse1)").rows
    composite = dict(con.execute(
        "SELECT key, count(DISTINCT op) FROM dispatch WHERE key LIKE 'Composite%' GROUP BY key").fetchall())
    got = by_status(rows)
    assert got == {
        ("covered", "CompositeImplicitAutograd"): 836,
        ("covered", "CompositeExplicitAutograd"): 537,
        ("covered", "CompositeExplicitAutogradNonFunctional"): 57,
        ("missing", ""): 1097,
        ("missing", "decomposes"): 106,
    }
    for ckey in ("CompositeImplicitAutograd", "CompositeExplicitAutogradNonFunctional"):
        assert got[("covered", ckey)] == composite[ckey]
    assert len({r[1] for r in rows}) == 2633
    assert ("PrivateUse1", "_fused_dropout", "missing", "decomposes", NF, 273) in rows
    assert ("PrivateUse1", "matmul", "covered", "CompositeImplicitAutograd", NF, 3775) in rows


def test_autograd_and_functional_backends_follow_c10(con):
    """CompositeExplicitAutograd kernels serve no autograd key; the
    NonFunctional ones serve neither XLA nor Lazy (c10/core/DispatchKeySet.cpp)."""
    auto = by_status(q(con, "coverage(AutogradPrivateUse1)").rows)
    assert auto == {("covered", "CompositeImplicitAutograd"): 836, ("covered", "autograd"): 2633 - 836}
    lazy = by_status(q(con, "coverage(Lazy)").rows)
    assert ("covered", "CompositeExplicitAutogradNonFunctional") not in lazy
    assert lazy[("covered", "CompositeExplicitAutograd")] == 537


def test_unknown_key_names_the_nearest(con):
    from torchtalk.errors import QueryError

    with pytest.raises(QueryError) as e:
        q(con, "coverage(PrivateUse9)")
    assert e.value.message == "no dispatch key named 'PrivateUse9'"


def test_compare_lists_the_gap_op_by_op(con):
    rows = q(con, "coverage(XPU, compare=CUDA)").rows
    ops = Counter(r[1] for r in rows)
    assert len(ops) == 1056 and set(ops.values()) == {2}  # one row per key per op
    assert [r for r in rows if r[1] == "_adaptive_avg_pool3d"] == [
        ("CUDA", "_adaptive_avg_pool3d", "covered", "direct", NF, 12162),
        ("XPU", "_adaptive_avg_pool3d", "missing", "", NF, 12162),
    ]
    assert not [r for r in rows if r[1] == "matmul"]  # the same composite kernel for both


def test_mps_fallback_covers_the_missing_ops_as_a_fallback(con):
    rows = q(con, "coverage(MPS)").rows
    fallback = {r[1] for r in rows if r[2] == "fallback"}
    covered = {r[1] for r in rows if r[2] == "covered"}
    assert len(fallback) == 507 and not fallback & covered
    assert not [r for r in rows if r[2] == "missing"]
    assert ("MPS", "_adaptive_avg_pool3d", "fallback", "fallback", NF, 12162) in rows
    # MPSFallback.mm's TORCH_LIBRARY_IMPL(aten, MPS, m): ops it registers by hand
    assert sorted((r[1], r[5]) for r in rows if r[3] == "registered") == [
        ("_slow_conv2d_forward", 13041), ("col2im", 13113), ("embedding_renorm_", 2310),
        ("linalg_svd", 14224), ("linalg_svd.U", 14228), ("upsample_nearest3d.vec", 12649)]
    regs = con.execute("SELECT DISTINCT op FROM lib_impl WHERE ns = 'aten' AND key = 'MPS'").fetchall()
    assert {op for (op,) in regs} == {"_slow_conv2d_forward", "col2im", "embedding_renorm_", "linalg_svd",
                                      "linalg_svd.U", "upsample_nearest3d.vec"}


def test_trace_shows_registrations_and_fallbacks(con):
    rows = q(con, "trace(convolution_overrideable)").rows
    reg = [r for r in rows if r[1] in ("registration", "kernel")]
    assert reg == [
        ("convolution_overrideable", "kernel", "at::native::convolution_overrideable",
         "CompositeExplicitAutograd", "aten/src/ATen/native/Convolution.cpp", 1189),
        ("convolution_overrideable", "kernel",
         "at::native::vulkan::ops::(anonymous:aten/src/ATen/native/vulkan/ops/Convolution.cpp)::convolution",
         "Vulkan", "aten/src/ATen/native/vulkan/ops/Convolution.cpp", 765),
        ("convolution_overrideable", "kernel", "at::native::xpu::convolution_overrideable", "XPU",
         "aten/src/ATen/native/mkldnn/xpu/Conv.cpp", 568),
        ("convolution_overrideable", "registration",
         "at::native::vulkan::ops::(anonymous:aten/src/ATen/native/vulkan/ops/Convolution.cpp)::convolution",
         "Vulkan", "aten/src/ATen/native/vulkan/ops/Convolution.cpp", 1413),
        ("convolution_overrideable", "registration", "at::native::xpu::convolution_overrideable", "XPU",
         "aten/src/ATen/native/mkldnn/xpu/Conv.cpp", 741),
    ]
    assert not [r for r in rows if r[1] == "fallback"]  # a composite kernel serves MPS
    pool = q(con, "trace(_adaptive_avg_pool3d)").rows
    assert [r for r in pool if r[1] == "fallback"] == [
        ("_adaptive_avg_pool3d", "fallback", "at::(static:aten/src/ATen/mps/MPSFallback.mm)::mps_error_fallback",
         "MPS", "aten/src/ATen/mps/MPSFallback.mm", 81),
        ("_adaptive_avg_pool3d", "fallback", "at::(static:aten/src/ATen/mps/MPSFallback.mm)::mps_fallback",
         "MPS", "aten/src/ATen/mps/MPSFallback.mm", 83),
        ("_adaptive_avg_pool3d", "fallback", "torch::lazy::ltc_eager_fallback", "Lazy",
         "torch/csrc/lazy/ts_backend/ts_eager_fallback.cpp", 204),
    ]


def test_lazy_eager_fallback_registered_through_a_library_variable(con):
    """ts_eager_fallback.cpp registers Lazy's fallback on `static auto m =
    MAKE_TORCH_LIBRARY_IMPL(_, Lazy)` in a function, not in a TORCH_LIBRARY_IMPL
    block; it runs every op with no Lazy kernel (issue 17)."""
    assert con.execute("SELECT * FROM lib_fallback WHERE key = 'Lazy'").fetchall() == [
        ("_", "Lazy", "torch::lazy::ltc_eager_fallback", "torch/csrc/lazy/ts_backend/ts_eager_fallback.cpp", 204)]
    rows = q(con, "coverage(Lazy)").rows
    fallback = {r[1] for r in rows if r[2] == "fallback"}
    covered = {r[1] for r in rows if r[2] == "covered"}
    assert len(fallback) == 1260 and not fallback & covered and fallback | covered == {r[1] for r in rows}
    assert not [r for r in rows if r[2] == "missing"]
    assert ("Lazy", "_adaptive_avg_pool3d", "fallback", "fallback", NF, 12162) in rows
    assert ("Lazy", "matmul", "covered", "CompositeImplicitAutograd", NF, 3775) in rows
    # op_registration_test.cpp's TEST bodies register `_` CPU fallbacks the same way, for one test only
    cpu = by_status(q(con, "coverage(CPU)").rows)
    assert ("fallback", "fallback") not in cpu and cpu[("missing", "")] == 161


def test_kernels_of_a_composite_op_under_a_concrete_key(con):
    """embedding_bag is CompositeImplicitAutograd; under CUDA its kernel's walk
    reaches _embedding_bag's CUDA kernels in EmbeddingBag.cu."""
    rows = q(con, "kernels(embedding_bag, key=CUDA)").rows
    eb = "aten/src/ATen/native/cuda/EmbeddingBag.cu"
    anon = f"at::native::(anonymous:{eb})::"
    assert sorted((r[0], r[1], r[3], r[4], r[7], r[10], r[11]) for r in rows) == sorted(
        (op, "CUDA", anon + k, "at::native::_embedding_bag_cuda", 0, eb, line)
        for op in ("embedding_bag", "embedding_bag.padding_idx")
        for k, line in (("EmbeddingBag_updateOutputKernel_max", 402),
                        ("EmbeddingBag_updateOutputKernel_sum_mean", 411))
    )
    # an op with a CUDA kernel of its own keeps only that kernel's launches under CUDA
    own = q(con, "kernels(_embedding_bag, key=CUDA)").rows
    assert {r[5] for r in own} == {"at::native::_embedding_bag_cuda"}
