"""An extension indexed beside its torch (issue 17, deliverables 4 and 5):
torchvision 0.21.0, the release built against torch 2.6 (Debian's
pytorch-vision source package, fetched by scripts/setup with `torchtalk
fetch torchvision`), indexed with `--with-torch` the real 2.6.0 tree into one
DB (Note [Extensions] in torchtalk/extension.py)."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest
from _tree import line_of
from conftest import _missing

pytestmark = pytest.mark.real_tree

NMS_CPU = "torchvision/csrc/ops/cpu/nms_kernel.cpp"
NMS_CUDA = "torchvision/csrc/ops/cuda/nms_kernel.cu"


def _fetched(name: str) -> Path:
    """The tree `torchtalk fetch NAME` unpacks (scripts/setup fetches it)."""
    from torchtalk.fetch import TREES, default_dest

    path = default_dest(name)
    if not (path / TREES[name].marker).is_file():
        _missing(f"{name} not found at {path}; run `torchtalk fetch {name}`")
    return path


def _index_beside(ext: Path, tree: Path, real_db: Path, tmp_path_factory) -> Path:
    """The extension indexed beside the real tree's DB (reused, not re-indexed)."""
    from torchtalk import api

    db = tmp_path_factory.mktemp(ext.name) / "ext.duckdb"
    report = api.index(ext, db=db, with_torch=tree, torch_db=real_db)
    assert [lr.name for lr in report.layers][-2:] == ["ext-cpp", "ext-python"]
    return db


@pytest.fixture(scope="module")
def vision() -> Path:
    """The torchvision 0.21.0 tree."""
    return _fetched("torchvision")


@pytest.fixture(scope="module")
def audio() -> Path:
    """The torchaudio 2.6.0 tree (a src layout: its paths are relative to src/)."""
    return _fetched("torchaudio")


@pytest.fixture(scope="module")
def vision_db(vision, tree, real_db, tmp_path_factory) -> Path:
    return _index_beside(vision, tree, real_db, tmp_path_factory)


@pytest.fixture(scope="module")
def con(vision_db):
    from torchtalk import api

    con = api.open_db(db=vision_db)
    yield con
    con.close()


@pytest.fixture(scope="module")
def audio_con(audio, tree, real_db, tmp_path_factory):
    from torchtalk import api

    con = api.open_db(db=_index_beside(audio, tree, real_db, tmp_path_factory))
    yield con
    con.close()


def q(con, text, **kw):
    from torchtalk import api

    return api.query(text, con=con, **kw)


def test_trace_nms_reaches_its_op_kernels_and_cuda_kernel(con, vision):
    rows = q(con, "trace(torchvision.ops.nms)", limit=None).rows
    schema = line_of(vision, "torchvision/csrc/ops/nms.cpp", "  m.def(TORCH_SELECTIVE_SCHEMA(")  # the m.def line
    assert ("torchvision::nms", "op", "torchvision::nms",
            "torchvision::nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
            "torchvision/csrc/ops/nms.cpp", schema) in rows
    cpu = "vision::ops::(anonymous:torchvision/csrc/ops/cpu/nms_kernel.cpp)::nms_kernel"
    cuda = "vision::ops::(anonymous:torchvision/csrc/ops/cuda/nms_kernel.cu)::nms_kernel"
    assert ("torchvision::nms", "kernel", cpu, "CPU", NMS_CPU, line_of(vision, NMS_CPU, "at::Tensor nms_kernel(")) in rows
    assert ("torchvision::nms", "kernel", cuda, "CUDA", NMS_CUDA, line_of(vision, NMS_CUDA, "at::Tensor nms_kernel(")) in rows
    # the registrations themselves, at their m.impl lines
    assert ("torchvision::nms", "registration", cuda, "CUDA", NMS_CUDA,
            line_of(vision, NMS_CUDA, '  m.impl(TORCH_SELECTIVE_NAME("torchvision::nms")')) in rows
    # the __global__ kernel, at its <<<>>> launch
    impl = "vision::ops::(anonymous:torchvision/csrc/ops/cuda/nms_kernel.cu)::nms_kernel_impl"
    launch = line_of(vision, NMS_CUDA, "        nms_kernel_impl<scalar_t><<<")
    assert ("torchvision::nms", "cuda_kernel", impl, cuda, NMS_CUDA, launch) in rows
    # and the Python wrapper that calls torch.ops.torchvision.nms
    assert ("torchvision::nms", "python", "torchvision.ops.boxes.nms", "wrapper", "torchvision/ops/boxes.py",
            line_of(vision, "torchvision/ops/boxes.py", "    return torch.ops.torchvision.nms(")) in rows


def test_nms_kernels_are_torchvision_files_and_its_calls_reach_aten(con):
    """Paths tell the trees apart; the CUDA kernel's at:: calls walk into the torch index."""
    rows = q(con, "trace(torchvision::nms)", limit=None).rows
    files = {r[4] for r in rows if r[1] in ("kernel", "registration")}
    assert files and all(f.startswith("torchvision/csrc/ops/") for f in files)
    assert any(r[1] == "stub_impl" and r[4].startswith("aten/src/ATen/native/") for r in rows)


_IMPL_BLOCK = re.compile(r"TORCH_LIBRARY_IMPL\((\w+),\s*(\w+),\s*m\)\s*\{(.*?)\n\}", re.S)
_IMPL_NAME = re.compile(r'm\.impl\(\s*(?:TORCH_SELECTIVE_NAME\()?"(?:\w+::)?(\w+)"')


def _impl_blocks(root: Path, ns: str) -> dict[str, set[str]]:
    """key -> the ops m.impl'd in TORCH_LIBRARY_IMPL(ns, key, m) blocks under
    `root`, read off the sources with a regex (not the extractor's tree-sitter)."""
    out: dict[str, set[str]] = defaultdict(set)
    for path in sorted(root.rglob("*")):
        if path.suffix not in (".cpp", ".cu", ".mm"):
            continue
        for block_ns, key, body in _IMPL_BLOCK.findall(path.read_text(errors="replace")):
            if block_ns == ns:
                out[key] |= {f"{ns}::{name}" for name in _IMPL_NAME.findall(body)}
    return out


def _assert_coverage_is_blocks(con, ns: str, blocks: dict[str, set[str]]) -> None:
    for key, ops in blocks.items():
        rows = q(con, f"coverage({key})", limit=None).rows
        registered = {r[1] for r in rows if r[1].startswith(f"{ns}::") and r[3] == "registered"}
        assert registered == ops, key
        # the namespace's other ops are covered only by a kernel given with their m.def (CatchAll), if at all
        assert {r[3] for r in rows if r[1].startswith(f"{ns}::") and r[1] not in ops and r[2] == "covered"} <= {
            "catchall"}, key


def test_coverage_of_torchvision_ops_per_key_is_its_impl_blocks(con, vision):
    blocks = _impl_blocks(vision / "torchvision/csrc", "torchvision")
    # read off the files: 6 CPU blocks (nms, roi_align, roi_pool, ps_roi_align,
    # ps_roi_pool, deform_conv2d and their backwards), 6 CUDA, 5 MPS (no deform_conv2d)
    assert {k: len(v) for k, v in blocks.items()} == {
        "CPU": 11, "CUDA": 11, "MPS": 9, "Autograd": 10, "Autocast": 6, "AutocastCPU": 2, "AutocastXPU": 2,
        "QuantizedCPU": 2}
    _assert_coverage_is_blocks(con, "torchvision", blocks)


def test_coverage_of_torchaudio_ops_per_key_is_its_impl_blocks(audio_con, audio):
    blocks = _impl_blocks(audio / "src/libtorchaudio", "torchaudio")
    # read off the files: CPU forced_align, ray_tracing, _simulate_rir, _make_rir_filter,
    # rnnt_loss(_alphas, _betas); CUDA forced_align, rnnt_loss(_alphas, _betas)
    assert {k: len(v) for k, v in blocks.items()} == {"CPU": 7, "CUDA": 4, "Autograd": 1,
                                                     "CompositeImplicitAutograd": 1}
    _assert_coverage_is_blocks(audio_con, "torchaudio", blocks)


def test_trace_rnnt_loss_reaches_its_kernels(audio_con, audio):
    """torchaudio's src layout: paths relative to src/ (libtorchaudio/..., torchaudio/...)."""
    src = audio / "src"
    rows = q(audio_con, "trace(torchaudio.functional.rnnt_loss)", limit=None).rows
    cpu, cuda = "libtorchaudio/rnnt/cpu/compute.cpp", "libtorchaudio/rnnt/gpu/compute.cu"
    assert ("torchaudio::rnnt_loss", "kernel", "torchaudio::rnnt::cpu::compute", "CPU", cpu,
            line_of(src, cpu, "std::tuple<torch::Tensor, std::optional<torch::Tensor>> compute(")) in rows
    assert ("torchaudio::rnnt_loss", "kernel", "torchaudio::rnnt::gpu::compute", "CUDA", cuda,
            line_of(src, cuda, "std::tuple<torch::Tensor, std::optional<torch::Tensor>> compute(")) in rows
    assert ("torchaudio::rnnt_loss", "registration", "torchaudio::rnnt::rnnt_loss_autograd", "Autograd",
            "libtorchaudio/rnnt/autograd.cpp", line_of(src, "libtorchaudio/rnnt/autograd.cpp", '  m.impl("rnnt_loss"')) \
        in rows
    kernels = {r[2] for r in rows if r[1] == "cuda_kernel" and r[4].startswith("libtorchaudio/rnnt/gpu/")}
    assert {"torchaudio::rnnt::ComputeLogProbs", "torchaudio::rnnt::ComputeGradients"} <= kernels


def test_paths_from_a_cuda_kernel_reach_torchvision_ops(con):
    kernel = "vision::ops::(anonymous:torchvision/csrc/ops/cuda/roi_align_kernel.cu)::roi_align_forward_kernel_impl"
    rows = q(con, f'paths("{kernel}" -> python)', limit=None).rows
    apis = {r[1] for r in rows}
    assert {"torchvision.ops.roi_align", "torchvision.ops.roi_align.roi_align"} <= apis
    assert {r[2] for r in rows} == {"torchvision::roi_align"}


def test_torch_answers_gain_only_the_extensions_callers(con, real_con):
    """The torch layers are the torch DB's: trace(torch.matmul) beside torchvision
    is the torch tree's answer plus torchvision's Python callers of matmul."""
    alone = set(q(real_con, "trace(torch.matmul)", limit=None).rows)
    beside = set(q(con, "trace(torch.matmul)", limit=None).rows)
    assert alone <= beside
    extra = beside - alone
    assert extra and all(r[1] == "python" and r[4].startswith("torchvision/") for r in extra)


def test_reindex_is_a_no_op(vision, tree, vision_db, real_db):
    from torchtalk import api

    report = api.index(vision, db=vision_db, with_torch=tree, torch_db=real_db)
    assert report.up_to_date and report.mode == "current"


def test_impact_of_an_aten_kernel_reaches_torchvision_ops(con, vision):
    """An extension's kernel calling into ATen: impact of that ATen kernel
    reaches the extension's op (through its CUDA kernel) and its Python APIs."""
    rows = q(con, "impact(at::native::index_select_cuda, depth=3)", limit=None).rows
    cuda = "vision::ops::(anonymous:torchvision/csrc/ops/cuda/nms_kernel.cu)::nms_kernel"
    assert any(r[1] == "op" and r[2] == "torchvision::nms" and r[3] == cuda for r in rows)
    # the nms_kernel's own call of index_select, where the chain leaves torchvision
    call = line_of(vision, NMS_CUDA, "  auto dets_sorted = dets.index_select(")
    assert ("at::native::index_select_cuda", "function", cuda, "at::native::index_select_cuda", 1, NMS_CUDA, call,
            "guess") in {r[:8] for r in rows}  # the fast tier labels this member call a guess
    assert any(r[1] == "python" and r[2].startswith("torchvision.") for r in rows)


def test_coverage_report_of_an_extension_db(con):
    """`report coverage` on the DB beside torchvision: its ops' m.def kernels
    (CatchAll: torchvision::_cuda_version, the video decoder's) are a path of their own."""
    from torchtalk.reports.coverage import CoverageOptions, compute_coverage

    report = compute_coverage(con, CoverageOptions(keys=("CUDA",)))
    catchall = {r[1] for r in q(con, "coverage(CUDA)", limit=None).rows if r[3] == "catchall"}
    assert "torchvision::_cuda_version" in catchall
    assert report.key("CUDA").by_path["catchall"] == len(catchall)
    ops = {r[1] for r in q(con, "coverage(CUDA)", limit=None).rows}
    # 19: torchvision's 15 m.defs (11 in csrc/ops, vision.cpp's _cuda_version, 3 in the GPU decoder), video_reader's 4
    assert report.total == len(ops) and report.library_ops == sum(1 for o in ops if "::" in o) == 19
    from torchtalk.reports.model import scope_text

    assert scope_text(report) == f"all {len(ops)} ops: native_functions.yaml's {len(ops) - 19} and the extension's 19 " \
                                 "(TORCH_LIBRARY)"
