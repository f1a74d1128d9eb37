"""The compiler tier after an edit (Note [Compiler tier catching up]), on a
copy of the real tree whose compiler tier covers aten/src/ATen/native/utils
(Factory.cpp, one TU, and its three headers, each parsed as its own main
file: Note [Header jobs] in extractors/clang/__init__.py): an index without --precise never answers from the
compiler's rows of an edited TU, the fast tier answers for it until
`index --precise` parses it again, and `status` says which TUs are pending.

The copy is made of hard links; the edited file is written anew, so the
real tree is never modified.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.test_update_real import _edit, _rows, _seed_cache
from torchtalk import api
from torchtalk.cli import main

pytestmark = pytest.mark.real_tree

FACTORY = "aten/src/ATen/native/utils/Factory.cpp"
UTILS_HEADERS = [(f"aten/src/ATen/native/utils/{h}",) for h in ("Factory.h", "ParamUtils.h", "ParamsHash.h")]
CALLER = "at::native::mobile::allocate_padded_contiguous_if_needed"
CALLEE = "at::native::mobile::empty_with_tail_padding"
LAYERS = ["ops", "cpp"]


def _edges(db, table: str) -> list[tuple]:
    """The caller -> callee calls of Factory.cpp in `table`, as (file, line)."""
    sql = (f"select file, line from {table} where caller = ? and callee = ? and file = ? order by line")
    return _rows(db, sql, [CALLER, CALLEE, FACTORY])


def _callers(db) -> list[tuple]:
    """`callers(CALLEE)` rows in Factory.cpp: (caller, via, file, line)."""
    rows = api.query(f"callers({CALLEE})", db=db, limit=None).rows
    return [r[1:] for r in rows if r[3] == FACTORY]


@pytest.fixture
def precise_copy(tree, tmp_path, monkeypatch, cuda_sdk):
    """(copy of the tree, its DB of LAYERS + the compiler tier over native/utils)."""
    monkeypatch.setenv("TORCHTALK_PRECISE_DIRS", "aten/src/ATen/native/utils")
    copy = tmp_path / "pytorch"
    subprocess.run(["cp", "-al", str(tree.resolve()), str(copy)], check=True)
    db = tmp_path / "db" / "tree.duckdb"
    db.parent.mkdir()
    _seed_cache(db, tree)
    assert api.index(copy, db, layers=LAYERS, precise=True, jobs=2).mode == "built"
    return copy, db


def test_an_edited_tu_is_the_fast_tiers_until_parsed_again(precise_copy, capsys):
    copy, db = precise_copy
    assert _rows(db, "select file from precise_file order by file", []) == [(FACTORY,), *UTILS_HEADERS]
    assert _edges(db, "calls_precise") == [(FACTORY, 53)]
    assert _callers(db) == [(CALLER, "precise", FACTORY, 53)]
    assert _rows(db, "select count(*) from precise_pending", []) == [(0,)]

    line = _edit(copy, FACTORY, "  const auto* const allocator = input.storage().allocator();",
                 "  // one line more\n  const auto* const allocator = input.storage().allocator();")
    assert line == 37
    report = api.index(copy, db, layers=LAYERS, jobs=2)  # no --precise: the compiler tier catches up from its cache
    assert report.mode == "updated"
    assert _rows(db, "select file from precise_pending", []) == [(FACTORY,)]
    assert _rows(db, "select file from precise_file order by file", []) == UTILS_HEADERS  # unchanged: current
    assert _edges(db, "calls_precise") == []  # the compiler's rows of the old text are gone
    assert _edges(db, "calls") == [(FACTORY, 54)]  # and the fast tier answers, at the new line
    assert _callers(db) == [(CALLER, "scope", FACTORY, 54)]  # the answer names the fast tier's resolution
    pending = ("compiler tier: 3 files parsed (TUs and native headers), 1 changed since and pending (the fast "
               "tier answers for them until `torchtalk index --precise` parses them)")
    assert pending in api.query(f"callers({CALLEE})", db=db).notes
    assert pending in api.query("impact(at::native::mobile::empty_with_tail_padding, depth=2)", db=db).notes
    assert pending not in api.query("search(empty_with_tail_padding)", db=db).notes  # reads no C++ call

    assert main(["status", "--db", str(db), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["compiler_tier"] == pending

    again = api.index(copy, db, layers=LAYERS, precise=True, jobs=2)  # parses the pending TU
    assert {lr.name: lr.action for lr in again.layers}["precise"] == "ran"
    assert _rows(db, "select count(*) from precise_pending", []) == [(0,)]
    assert _rows(db, "select file from precise_file order by file", []) == [(FACTORY,), *UTILS_HEADERS]
    assert _edges(db, "calls_precise") == [(FACTORY, 54)]
    assert _callers(db) == [(CALLER, "precise", FACTORY, 54)]
    assert not [n for n in api.query(f"callers({CALLEE})", db=db).notes if "compiler tier" in n]
    assert api.index(copy, db, layers=LAYERS, precise=True, jobs=2).mode == "current"


DISTRIBUTIONS = "aten/src/ATen/native/Distributions.cpp"
UPSAMPLE = "aten/src/ATen/native/cpu/UpSampleKernel.cpp"
CONVOLUTION = "aten/src/ATen/native/Convolution.cpp"
MKLDNN_CONV = "aten/src/ATen/native/mkldnn/Conv.cpp"


@pytest.fixture(scope="module")
def functor_db(tree, tmp_path_factory, cuda_sdk):
    """A DB of the real tree whose compiler tier parsed four TUs (Distributions.cpp,
    UpSampleKernel.cpp, Convolution.cpp, mkldnn/Conv.cpp)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("TORCHTALK_PRECISE_DIRS", ":".join((DISTRIBUTIONS, UPSAMPLE, CONVOLUTION, MKLDNN_CONV)))
    db = tmp_path_factory.mktemp("functors") / "tree.duckdb"
    try:
        _seed_cache(db, tree)
        assert api.index(tree, db, layers=LAYERS, precise=True, jobs=2).mode == "built"
    finally:
        mp.undo()
    return db


def test_functors_through_templates_beside_the_compiler(functor_db):
    """Note [Functors beside the compiler]: `bernoulli_impl_<BernoulliStub, Generator>(...)`
    (Distributions.cpp:179) and `upsample_generic_Nd_kernel_impl<1, scale_t, HelperInterpNearest>(...)`
    (UpSampleKernel.cpp:1666) call the functor class's methods; libclang shows no
    instantiation, so the fast tier's functor edges stand in the files it parsed."""
    db = functor_db
    assert _rows(db, "select file from precise_file order by file", []) == [
        (CONVOLUTION,), (DISTRIBUTIONS,), (UPSAMPLE,), (MKLDNN_CONV,)]
    stub = "at::native::BernoulliStub::operator()"
    rows = api.query("callees(at::native::bernoulli_(Tensor&, double, optional<Generator>))", db=db, limit=None).rows
    assert {(r[1], r[2], r[3], r[4]) for r in rows if r[1].startswith(stub)} == {
        (f"{stub}(Tensor&, const Tensor&, optional<Generator>)", "functor-overload", DISTRIBUTIONS, 179),
        (f"{stub}(Tensor&, double, optional<Generator>)", "functor-overload", DISTRIBUTIONS, 179)}
    anon = "at::native::(anonymous:aten/src/ATen/native/cpu/UpSampleKernel.cpp)::"
    rows = api.query(f"callees({anon}upsample_nearest1d_kernel_impl)", db=db, limit=None).rows
    assert (f"{anon}HelperInterpNearest::compute_indices_weights", "functor", UPSAMPLE, 1666) in {
        tuple(r[1:5]) for r in rows}
    assert (f"{anon}upsample_generic_Nd_kernel_impl", "precise", UPSAMPLE, 1666) in {tuple(r[1:5]) for r in rows}
    # `Vec::loadu(in + d)` with `using Vec = vec::Vectorized<scalar_t>` (:490): the compiler's, by the class template
    loadu = {r[:2] for r in _rows(db, "select caller, callee from calls_precise where file = ? and line = 494", [UPSAMPLE])}
    assert [c for _, c in loadu] == ["at::vec::CPU_CAPABILITY::Vectorized::loadu(const void*)"], loadu  # by its 1 argument
    # the runtime's upsample_nearest1d -> empty (bench/runtime_oracle.py) has its path again, on CPU
    ops = api.query("op_callees(upsample_nearest1d)", db=db, limit=None)
    cols = [ops.columns.index(c) for c in ("op", "key", "calls", "file", "line", "chain")]
    chains = [r[cols[-1]] for r in ops.rows
              if tuple(r[i] for i in cols[:-1]) == ("upsample_nearest1d", "CPU", "empty", UPSAMPLE, 1053)]
    assert len(chains) == 1
    assert [(s.kind, s.file, s.line, s.res) for s in chains[0]][3:] == [
        ("call", UPSAMPLE, 1666, "typed"), ("precise", UPSAMPLE, 1077, "compiler"), ("aten", UPSAMPLE, 1053, "resolved")]


def test_branches_configured_out_here_but_on_in_the_wheel(functor_db):
    """Note [Configured out here, on in the wheel]: the compiler tier has no
    oneDNN or NNPACK headers, so it skips `#if AT_MKLDNN_ENABLED()` and
    `#if AT_NNPACK_ENABLED()` branches, which torch 2.6.0's wheel builds: the
    fast tier's calls there stand. A branch the wheel does not build either
    (`#ifdef USE_MPS` on Linux) keeps its calls out."""
    db = functor_db
    skipped = set(_rows(db, "select file, first, last from precise_skipped", []))
    assert {(MKLDNN_CONV, 37, 1085), (CONVOLUTION, 546, 561)} <= skipped  # `#else // AT_MKLDNN_ENABLED`, NNPACK
    assert not [r for r in skipped if r[0] == CONVOLUTION and r[1] <= 590 <= r[2]]  # `#ifdef USE_MPS`
    real = [r[1:5] for r in api.query("callees(at::native::mkldnn_convolution)", db=db, limit=None).rows]
    assert (f"at::native::(static:{MKLDNN_CONV})::_mkldnn_convolution", "scope", MKLDNN_CONV, 288) in real  # the wheel's
    nnpack = [r[1:5] for r in api.query("callees(at::native::ConvParams::use_nnpack)", db=db, limit=None).rows]
    assert ("_nnpack_available", "aten", CONVOLUTION, 548) in nnpack
    mps = [r[1:5] for r in api.query("callees(at::native::ConvParams::use_mps)", db=db, limit=None).rows]
    assert [r for r in mps if r[2] == CONVOLUTION and 589 <= r[3] <= 597] == []
    # `params.use_nnpack(input, weight)` with `const ConvParams<T>& params`: the compiler's, by the class template
    assert ("at::native::_select_conv_backend", "at::native::ConvParams::use_nnpack", CONVOLUTION, 1277) in set(
        _rows(db, "select caller, callee, file, line from calls_precise where line = 1277", []))
    # the runtime's _convolution -> _nnpack_available (bench/runtime_oracle.py) has a path on CPU
    ops = api.query("op_callees(_convolution)", db=db, limit=None)
    i, k, c = (ops.columns.index(n) for n in ("op", "key", "calls"))
    assert ("_convolution", "CompositeExplicitAutograd", "_nnpack_available") in {(r[i], r[k], r[c]) for r in ops.rows}
