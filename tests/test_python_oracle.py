"""The python layer over the installed torch wheel, checked against the same
torch at run time (extractors.python.oracle): decompositions, nn modules,
alias bindings. Same version on both sides: a difference is an extractor
miss or a false row. The floors are the measured figures less a small margin."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_python_layer import ListSink

from extractors.base import ExtractContext


@pytest.fixture(scope="module")
def report(torch_wheel, tmp_path_factory) -> dict:
    from extractors import python as layer
    from extractors.python.oracle import compare

    root = Path(torch_wheel.__file__).resolve().parents[1]
    sink = ListSink()
    layer.extract(ExtractContext(root, tmp_path_factory.getbasetemp() / "wheel" / "python", 2), sink)
    return compare(sink.rows)


@pytest.mark.wheel
def test_decompositions_match_the_runtime_tables(report: dict) -> None:
    r = report["decomp"]
    # measured on torch 2.13.0: 1083 of 1133 registered ops found, 1102 rows' ops
    assert r["recall"] >= 0.94, r["missed"]
    assert r["precision"] >= 0.97, r["extra"]


@pytest.mark.wheel
def test_nn_modules_match_the_runtime_classes(report: dict) -> None:
    r = report["nn_modules"]
    assert r["missed"] == []
    # the extras: Module itself and torch.nn.cpp.ModuleWrapper (not imported by torch.nn)
    assert set(r["extra"]) <= {"torch.nn.modules.module.Module", "torch.nn.cpp.ModuleWrapper"}


@pytest.mark.wheel
def test_alias_bindings_are_the_runtime_objects(report: dict) -> None:
    a = report["alias"]
    assert a["checked"] >= 100
    assert a["bad"] == [] and a["ok"] == a["checked"]
