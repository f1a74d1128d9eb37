"""C++ backend packages in `report coverage --backend-package` (issue 17, deliverable 2).

The C++ registrations are read by the project's C++ extractor (reports/backend_cpp.py);
the real-tree test runs the report on PyTorch's own out-of-tree example,
test/cpp_extensions/open_registration_extension.cpp, and checks it against the
file's `m.impl` lines (read here with a regex) and the tree's own torchgen.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from test_report_pkg import _tiny_db

from torchtalk.reports.backend_pkg import scan_backend_package

CPP = """\
#include <torch/library.h>
at::Tensor my_a(const at::Tensor& x) { return x; }
void my_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("a", TORCH_FN(my_a));
  m.impl("aten::zzz.out", &my_a);
  m.impl("b",
         [](const at::Tensor& x) { return x; });
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&my_fallback>());
}

TORCH_LIBRARY(myns, m) { m.def("foo(Tensor x) -> Tensor"); }
TORCH_LIBRARY_IMPL(myns, PrivateUse1, m) {
  m.impl("foo", my_a);
}
"""


def _write(root: Path, fallback: bool = True) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    text = CPP if fallback else CPP.replace("  m.fallback(", "  // m.fallback(")
    (root / "reg.cpp").write_text(text)
    (root / "tab.py").write_text('T = {"aten::d": 1}\n')
    return root


def test_cpp_reader_reads_impls_lambdas_fallbacks(tmp_path):
    scan = scan_backend_package(_write(tmp_path))
    assert scan.files == 2 and scan.unparsed == ()
    assert [(r.name, r.overload, r.key, f"{r.file}:{r.line}") for r in scan.refs] == [
        ("a", "", "PrivateUse1", "reg.cpp:6"),  # TORCH_FN
        ("b", "", "PrivateUse1", "reg.cpp:8"),  # a lambda on the next line
        ("d", "", "", "tab.py:1"),  # the Python table: no key
        ("zzz", "out", "PrivateUse1", "reg.cpp:7"),  # "aten::" spelled out
    ]
    assert [(f.key, f.fn, f"{f.file}:{f.line}") for f in scan.fallbacks] == [
        ("PrivateUse1", "my_fallback", "reg.cpp:13")]
    assert scan.notes == ("reg.cpp:18: myns::foo for PrivateUse1 is not an ATen op registration",)
    assert scan.keys == ("PrivateUse1",)


def test_cpp_package_rules_on_tiny_db(tmp_path):
    """Ops a-d have CPU kernels, e is CompositeImplicitAutograd; refs.c decomposes c into a."""
    from torchtalk.reports.coverage import CoverageOptions, compute_coverage

    con = _tiny_db()
    with_fb = compute_coverage(con, CoverageOptions(keys=("CPU",), backend_package=_write(tmp_path / "fb")))
    assert with_fb.scope == "*" and [k.key for k in with_fb.keys] == ["CPU", "PrivateUse1"]
    pkg = with_fb.package
    assert [(p.op, p.file, p.line) for p in pkg.covered] == [
        ("a", "reg.cpp", 6), ("b", "reg.cpp", 8), ("d", "tab.py", 1)]
    assert pkg.unknown == ("aten.zzz.out at reg.cpp:7",)
    assert [(p.op, p.via) for p in pkg.inherited] == [("e", "CompositeImplicitAutograd")]
    assert [(p.op, p.via) for p in pkg.fallback] == [("c", "PrivateUse1: my_fallback (reg.cpp:13)")]
    assert pkg.missing == ()
    plain = compute_coverage(con, CoverageOptions(keys=("CPU",), backend_package=_write(tmp_path / "nofb", False)))
    pkg = plain.package
    assert pkg.fallback == () and [(p.op, p.decomposes) for p in pkg.missing] == [("c", ("refs.c",))]
    assert pkg.missing_decomposable == 1
    assert plain.to_json()["package"]["missing_decomposable"] == 1


# ------------------------------------------------------------------ PyTorch's own example

EXAMPLE = "test/cpp_extensions/open_registration_extension.cpp"
IMPL_RE = re.compile(r'^\s*m\.impl\("([\w.]+)"')


def _example_impls(path: Path) -> set[tuple[str, int]]:
    """(op, line) of every m.impl in the file's TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) blocks."""
    out, inside = set(), False
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if line.startswith("TORCH_LIBRARY_IMPL("):
            inside = line.startswith("TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)")
        m = IMPL_RE.match(line)
        if inside and m:
            out.add((m.group(1), i))
    return out


@pytest.fixture(scope="module")
def example(tree, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("openreg")
    shutil.copy(tree / EXAMPLE, root / "open_registration_extension.cpp")
    return root


@pytest.mark.real_tree
def test_open_registration_extension_report(tree, example, request):
    """Covered = the file's 20 m.impl lines; inherited = torchgen's composite kernels
    (CompositeImplicitAutograd, CompositeExplicitAutograd(NonFunctional)), which serve
    PrivateUse1; missing = the rest; decomposable = coverage(PrivateUse1)'s."""
    from test_report_real import torchgen_coverage

    from torchtalk import api

    db = Path(request.getfixturevalue("real_db"))
    report = api.coverage(db=db, keys=("CPU",), backend_package=example)
    pkg = report.package
    impls = _example_impls(tree / EXAMPLE)
    assert len(impls) == 20 and ("add.Tensor", 508) in impls and ("triu_indices", 533) in impls
    assert {(p.op, p.line) for p in pkg.covered} == impls
    assert {p.file for p in pkg.covered} == {"open_registration_extension.cpp"}
    assert pkg.keys == ("PrivateUse1",) and report.scope == "*" and pkg.unknown == ()
    assert pkg.notes == ("open_registration_extension.cpp:706: _test_funcs::custom_autograd_fn_aliasing "
                         "for AutogradCPU is not an ATen op registration",)
    composite = set(torchgen_coverage(tree, ("PrivateUse1",))["PrivateUse1"])
    registered = {op for op, _ in impls}
    assert {p.op for p in pkg.inherited} == composite - registered
    missing = {p.op for p in pkg.missing}
    assert missing == {r.op for r in report.heatmap} - composite - registered and pkg.fallback == ()
    assert (len(pkg.covered), len(pkg.inherited), len(pkg.missing), pkg.missing_decomposable) == (
        20, 1427, 1186, 105)
    # decomposable: the coverage(PrivateUse1) query's, less what the example registers
    rows = api.query("coverage(PrivateUse1)", db=db, limit=None, all_matches=True).records()
    query = {r["op"] for r in rows if r["how"] == "decomposes"}
    assert {p.op for p in pkg.missing if p.decomposes} == query - registered
    md = api.render_coverage(report, "md")
    assert "- `add.Tensor` (open_registration_extension.cpp:508)" in md
    assert "inherits 1427 through composite kernels" in md
    data = json.loads(api.render_coverage(report, "json"))["package"]
    assert (len(data["inherited"]), data["missing_decomposable"]) == (1427, 105)


@pytest.mark.real_tree
def test_coverage_table_counts_fallbacks(request):
    """The MCP `coverage` tool's table: MPS lacks no op outright, 507 run through MPSFallback.mm."""
    from torchtalk import api

    db = Path(request.getfixturevalue("real_db"))
    mps = api.coverage_table("MPS", db=db)
    assert mps.rows == () and mps.title.startswith("coverage of MPS: 2126/2633 ops")
    note = next(n for n in mps.notes if "backend fallback" in n)
    assert note.startswith("507 more ops have no kernel") and "MPSFallback.mm:83)" in note
    per_key = {r[0]: r for r in api.coverage_table(db=db).rows}
    assert (per_key["MPS"][5], per_key["MPS"][6]) == (507, 0)
    assert (per_key["CPU"][5], per_key["CPU"][6]) == (0, 2633 - 2467)


@pytest.mark.real_tree
def test_cli_cpp_package(example, request, capsys, tmp_path):
    """`report coverage --backend-package` on the example, as csv; a typo'd key is a one-line error."""
    import csv
    import io

    from torchtalk.cli import main

    db = str(request.getfixturevalue("real_db"))
    code = main(["report", "coverage", "--quiet", "--db", db, "--keys", "MPS", "--format", "csv",
                 "--backend-package", str(example)])
    out, _ = capsys.readouterr()
    rows = {r["op"]: r for r in csv.DictReader(io.StringIO(out))}
    assert code == 0 and list(next(iter(rows.values()))) == ["op", "MPS", "PrivateUse1"]
    assert rows["matmul"] == {"op": "matmul", "MPS": "composite", "PrivateUse1": "composite"}
    assert rows["_adaptive_avg_pool3d"] == {"op": "_adaptive_avg_pool3d", "MPS": "fallback",
                                            "PrivateUse1": "missing"}
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "k.cpp").write_text('TORCH_LIBRARY_IMPL(aten, PrivateUser1, m) {\n  m.impl("abs", &f);\n}\n')
    code = main(["report", "coverage", "--quiet", "--db", db, "--backend-package", str(bad)])
    _, err = capsys.readouterr()
    assert code != 0 and err.strip().splitlines() == [
        "torchtalk: error: k.cpp:2: unknown dispatch key 'PrivateUser1' in a TORCH_LIBRARY_IMPL block "
        "(did you mean 'PrivateUse1', 'PrivateUse3', 'PrivateUse2'?)"]


@pytest.mark.real_tree
def test_autograd_registrations_are_not_backend_kernels(tmp_path, request):
    """An m.impl for AutogradPrivateUse1 records the graph and redispatches to the
    PrivateUse1 kernel: add.Tensor (structured, no composite) stays missing."""
    from torchtalk import api

    db = Path(request.getfixturevalue("real_db"))
    (tmp_path / "ag.cpp").write_text(
        "TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {\n"
        '  m.impl("add.Tensor", &ag_add);\n'
        "}\n"
        "TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {\n"
        '  m.impl("mul.Tensor", &mul);\n'
        "}\n"
    )
    report = api.coverage(db=db, keys=("CPU",), backend_package=tmp_path)
    pkg = report.package
    assert pkg.keys == ("AutogradPrivateUse1", "PrivateUse1")
    assert [(p.op, p.line) for p in pkg.covered] == [("mul.Tensor", 5)]
    assert [(p.op, p.via, p.file, p.line) for p in pkg.autograd] == [
        ("add.Tensor", "AutogradPrivateUse1", "ag.cpp", 2)]
    assert "add.Tensor" in {p.op for p in pkg.missing}
    assert "- `add.Tensor` for AutogradPrivateUse1 (ag.cpp:2)" in api.render_coverage(report, "md")
