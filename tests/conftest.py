"""Shared fixtures.

Note [Real-tree tests]: tests marked `real_tree` run on the real PyTorch 2.6.0
tree named by TORCHTALK_PYTORCH_SRC (scripts/test fetches it). Outside CI a
missing tree skips them with that reason; in CI (CI=true) it fails them, so a
missing tree can never pass as green.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _missing(reason: str):
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (required in CI)")
    pytest.skip(reason)


@pytest.fixture
def runtime_dir():
    """A private directory for a test's $XDG_RUNTIME_DIR, short: a Unix
    socket's path must fit in 107 bytes, and pytest's tmp_path under xdist
    (/tmp/pytest-of-root/pytest-N/popen-gwK/<test name>0/...) leaves no room
    for the query server's <dir>/torchtalk/<hash>.sock."""
    import shutil
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="tt-run-", dir="/tmp"))
    d.chmod(0o700)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session", autouse=True)
def no_warm_history():
    """The servers the tests start neither keep their queries beside the
    shared real DB nor replay the ones kept there (Note [Warm from history]
    in torchtalk/history.py): a test's server warms as a fresh one.
    tests/test_history.py turns it on for its own DBs."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TORCHTALK_MCP_HISTORY", "0")
        yield


@pytest.fixture(scope="session", autouse=True)
def private_runtime_dir(tmp_path_factory) -> Path:
    """$XDG_RUNTIME_DIR of the run (each worker's own): the query servers the
    tests start (`watch`, `mcp-serve`, Note [Query server] in
    torchtalk/qserver.py) listen there, and their `torchtalk query`
    subprocesses ask there, never a server of the developer's."""
    run = tmp_path_factory.mktemp("run")
    run.chmod(0o700)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_RUNTIME_DIR", str(run))
        yield run


@pytest.fixture(scope="session")
def tree() -> Path:
    """The real PyTorch 2.6.0 source tree."""
    from torchtalk.paths import default_source

    path = default_source()
    if not (path / "aten/src/ATen/native/native_functions.yaml").is_file():
        _missing(f"PyTorch 2.6.0 tree not found at {path}; run `torchtalk fetch`")
    return path


@pytest.fixture(scope="session")
def cuda_sdk() -> Path:
    """The CUDA headers `torchtalk fetch cuda` puts in the user cache dir
    (scripts/setup fetches them)."""
    from extractors.clang.sdk import CUDA, include_dir

    path = include_dir(CUDA)
    if path is None:
        _missing("CUDA SDK headers not fetched; run `torchtalk fetch cuda`")
    return path


@pytest.fixture(scope="session")
def sdk_headers(cuda_sdk: Path) -> dict[str, Path]:
    """Every SDK's headers `torchtalk fetch NAME` puts in the user cache dir
    (cuDNN, CUTLASS, pybind11, MKL, nlohmann/json beside CUDA; scripts/setup
    fetches them),
    fetched at their current pins, by name, and the interpreter's Python.h
    dir as "python"."""
    from extractors.clang.sdk import SDKS, fetched_pins, include_dir, python_include

    out = {"cuda": cuda_sdk}
    for name in ("cuda", "cudnn", "cutlass", "pybind11", "mkl", "nlohmann"):
        if fetched_pins(SDKS[name]) != list(SDKS[name].wheels):
            _missing(f"{SDKS[name].title} headers not fetched at the current pins; run `torchtalk fetch {name}`")
        out[name] = include_dir(SDKS[name])
    py = python_include()
    if py is None:
        _missing("no Python.h for this interpreter; install its -dev package")
    out["python"] = py
    return out


@pytest.fixture(scope="session")
def souffle_bin() -> str:
    """The `souffle` binary on PATH (scripts/test puts ../shared/souffle/bin there)."""
    import shutil

    path = shutil.which("souffle")
    if path is None:
        _missing("souffle is not on PATH; scripts/test puts ../shared/souffle/bin on it")
    return path


@pytest.fixture(scope="session")
def souffle_compiler() -> str:
    """A `souffle` that can compile (its headers installed beside it):
    scripts/setup builds one with ../shared/souffle/build.sh."""
    from torchtalk.datalog.engines.souffle import compiler_path

    path = compiler_path()
    if path is None:
        _missing("no souffle with its headers for compiled mode; scripts/setup builds it with ../shared/souffle/build.sh")
    return path


@pytest.fixture(scope="session")
def torch_wheel():
    """The installed torch==2.13.0 wheel (the runtime-dispatcher oracle)."""
    try:
        import torch
    except ImportError:
        _missing("torch==2.13.0 is not installed")
    return torch


@pytest.fixture(scope="session")
def real_con(real_db):
    """A read-only connection to the real tree's fact DB, shared by the tests
    of a worker (what a query computes once per connection is kept in it)."""
    from torchtalk import api

    con = api.open_db(db=real_db)
    yield con
    con.close()


@pytest.fixture(scope="session")
def real_db(tree, tmp_path_factory) -> Path:
    """A fact DB of the real tree, every layer that exists, indexed once per
    test run into a tmp dir shared by the xdist workers (a file lock makes the
    second worker wait, then its re-index is a no-op). TORCHTALK_TEST_DB names
    an existing DB to use instead (for quick local runs)."""
    import fcntl

    from torchtalk import api

    given = os.environ.get("TORCHTALK_TEST_DB")
    if given:
        return Path(given)
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent
    db = shared / "real_db" / "facts.duckdb"
    db.parent.mkdir(parents=True, exist_ok=True)
    with open(shared / "real_db.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        api.index(tree, db=db, jobs=2)
    return db
