"""Out-of-tree backend packages: the ast reader, and the package section of the report.

tests/fixtures/backend_pkg/tinyback is a toy torch.compile backend written for
these tests; the expected refs below are what its source says, line by line.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from torchtalk.errors import InputError
from torchtalk.reports.backend_pkg import PACKET, parse_op_string, scan_backend_package

PKG = Path(__file__).parent / "fixtures" / "backend_pkg"

# (spelled, file:line) of every table entry in tinyback, from its source
EXPECTED_REFS = {
    ("aten._log_softmax.default", "tinyback/table.py:25"),
    ("aten._softmax.default", "tinyback/table.py:24"),
    ("aten.abs.default", "tinyback/library.py:14"),
    ("aten.add", "tinyback/lowering.py:18"),
    ("aten.addmm.default", "tinyback/lowering.py:64"),
    ("aten.amax.default", "tinyback/table.py:21"),
    ("aten.bmm.default", "tinyback/lowering.py:59"),
    ("aten.cat.default", "tinyback/table.py:15"),
    ("aten.clone.default", "tinyback/table.py:14"),
    ("aten.convolution.default", "tinyback/table.py:26"),
    ("aten.cos.default", "tinyback/library.py:27"),
    ("aten.div.Tensor", "tinyback/lowering.py:33"),
    ("aten.embedding.default", "tinyback/table.py:30"),
    ("aten.eq.Scalar", "tinyback/table.py:19"),
    ("aten.exp.default", "tinyback/lowering.py:54"),
    ("aten.expand.default", "tinyback/table.py:13"),
    ("aten.gelu_fast.default", "tinyback/lowering.py:69"),
    ("aten.gt.Tensor", "tinyback/table.py:20"),
    ("aten.index.Tensor", "tinyback/library.py:29"),
    ("aten.log.default", "tinyback/library.py:18"),
    ("aten.max_pool2d_with_indices.default", "tinyback/library.py:28"),
    ("aten.mean.dim", "tinyback/table.py:23"),
    ("aten.mm.default", "tinyback/lowering.py:59"),
    ("aten.mul.Tensor", "tinyback/lowering.py:28"),
    ("aten.neg.default", "tinyback/table.py:16"),
    ("aten.permute.default", "tinyback/table.py:12"),
    ("aten.relu.default", "tinyback/lowering.py:38"),
    ("aten.rsub.Tensor", "tinyback/lowering.py:23"),
    ("aten.sigmoid.default", "tinyback/lowering.py:44"),
    ("aten.sqrt.default", "tinyback/table.py:17"),
    ("aten.sub.Tensor", "tinyback/lowering.py:23"),
    ("aten.sum.dim_IntList", "tinyback/table.py:22"),
    ("aten.tanh", "tinyback/lowering.py:49"),
    ("aten.view.default", "tinyback/table.py:11"),
    ("aten.where.self", "tinyback/table.py:18"),
}


def test_reader_finds_exactly_the_table_entries():
    scan = scan_backend_package(PKG)
    assert scan.files == 4 and scan.unparsed == ()
    assert {(r.spelled, str(r.loc)) for r in scan.refs} == EXPECTED_REFS
    # uses inside bodies, plain lists, docstrings and non-aten namespaces are not entries
    names = {r.name for r in scan.refs}
    assert not names & {"maximum", "ceil", "round", "floor", "convert_element_type", "my_op"}


@pytest.mark.parametrize(
    ("text", "ns", "want"),
    [
        ("aten::add.Tensor", None, ("add", "Tensor")),
        ("aten::relu", None, ("relu", "")),
        ("aten::sqrt.default", None, ("sqrt", "")),
        ("add.Tensor", "aten", ("add", "Tensor")),
        ("add.Tensor", None, None),
        ("prims::add", None, None),
        ("aten::add.Tensor.x", None, None),
        ("aten::", None, None),
    ],
)
def test_parse_op_string(text, ns, want):
    assert parse_op_string(text, ns) == want


def test_reader_aliases_and_broken_files(tmp_path):
    (tmp_path / "a.py").write_text(
        "import torch.ops.aten as A\n"
        "from torch import ops\n"
        "T = {A.gelu.default: 1,\n"
        "     ops.aten.silu: 2}\n"
    )
    (tmp_path / "b.py").write_text("def broken(:\n")
    scan = scan_backend_package(tmp_path)
    assert [(r.name, r.overload, r.file, r.line) for r in scan.refs] == [
        ("gelu", "", "a.py", 3),
        ("silu", PACKET, "a.py", 4),
    ]
    assert scan.unparsed == ("b.py:1: invalid syntax",)


def test_reader_errors(tmp_path):
    with pytest.raises(InputError) as err:
        scan_backend_package(tmp_path / "nope")
    assert str(err.value) == f"error: backend package not found: {tmp_path / 'nope'}"
    with pytest.raises(InputError) as err:
        scan_backend_package(tmp_path)
    assert str(err.value) == f"error: no Python or C++ files in backend package {tmp_path}"


# ------------------------------------------------------------------ the rules on a hand-made fact DB


def _tiny_db():
    """Four ops; `c` decomposes into `a`; `d`'s decomposition needs `b`; modules and tests reach them."""
    import duckdb

    from torchtalk.datalog import parse_file
    from torchtalk.store import SCHEMA_PATH, create_tables

    con = duckdb.connect()
    create_tables(con, parse_file(str(SCHEMA_PATH)).decls)
    y = "native_functions.yaml"
    rows = {
        "op": [(o, o, "", f"{o}(Tensor self) -> Tensor", y, i) for i, o in enumerate("abcde", 1)],
        "op_tag": [(o, "core") for o in "abcd"],
        "dispatch": [(o, "CPU", f"{o}_cpu", y, i) for i, o in enumerate("abcd", 1)],
        "dispatch_default": [("e", "e")],
        "decomp": [("c", "refs.c", "torch/_refs/__init__.py", 10), ("d", "refs.d", "torch/_refs/__init__.py", 20)],
        "py_calls": [("refs.c", "torch.a", "torch/_refs/__init__.py", 11),
                     ("refs.d", "torch.a", "torch/_refs/__init__.py", 21),
                     ("refs.d", "torch.b", "torch/_refs/__init__.py", 22),
                     ("M.forward", "F.helper", "m.py", 3), ("F.helper", "torch.b", "f.py", 9),
                     ("N.forward", "torch.b", "n.py", 3), ("N.forward", "torch.d", "n.py", 4)],
        "py_api": [(f"torch.{o}", o, "variant", y, i) for i, o in enumerate("abcd", 1)],
        "py_def": [("M.forward", "method", "m.py", 2), ("N.forward", "method", "n.py", 2)],
        "module_class": [("M", "nn", "m.py", 1), ("N", "nn", "n.py", 1)],
        "tests_cover": [("t1", "torch.b", "call", "test_x.py", 5), ("t2", "b", "opinfo", "test_x.py", 9),
                        ("t3", "torch.d", "call", "test_x.py", 12)],
    }
    for rel, data in rows.items():
        con.executemany(f'INSERT INTO "{rel}" VALUES ({", ".join("?" * len(data[0]))})', data)
    return con


def test_package_rules_on_tiny_db(tmp_path):
    from torchtalk.reports.coverage import CoverageOptions, compute_coverage

    (tmp_path / "tab.py").write_text('T = {"aten::a": 1, "aten::e": 2, "aten::zzz": 3}\n')
    report = compute_coverage(_tiny_db(), CoverageOptions(keys=("CPU",), backend_package=tmp_path, tag="*"))
    pkg = report.package
    assert [(p.op, p.file, p.line) for p in pkg.covered] == [("a", "tab.py", 1), ("e", "tab.py", 1)]
    assert pkg.unknown == ("aten.zzz.default at tab.py:1",)
    got = [(p.op, p.modules, p.tests, p.composite, p.decomposes, p.unmet) for p in pkg.missing]
    assert got == [
        ("b", 2, 2, False, (), ()),  # M (via F.helper) and N; t1 via torch.b, t2 directly
        ("d", 1, 1, False, (), ("torch.b",)),  # refs.d calls torch.b, whose op the package lacks
        ("c", 0, 0, False, ("refs.c",), ()),  # refs.c only calls a: runs on the package
    ]
    assert report.key("CPU").covered == 5  # a-d direct, e composite
    assert {m.op for m in report.untested} == {"a", "c", "e"}


# ------------------------------------------------------------------ the package against the real tree


@pytest.mark.real_tree
def test_package_report_on_real_tree(tree, tmp_path_factory, request):
    from torchtalk import api

    try:
        db = Path(request.getfixturevalue("real_db"))
    except pytest.FixtureLookupError:
        db = tmp_path_factory.mktemp("pkg") / "ops.duckdb"
        api.index(tree, db=db, layers=["ops"])
    # tinyback/library.py registers kernels for PrivateUse1, which the eager
    # dispatcher calls for every op: the default scope is every op, not core
    assert api.coverage(db=db, keys=("CPU",), backend_package=PKG).scope == "*"
    report = api.coverage(db=db, keys=("CPU",), tag="core", backend_package=PKG)
    assert report.scope == "core"
    pkg = report.package
    covered = {(p.op, f"{p.file}:{p.line}") for p in pkg.covered}
    assert covered == {
        ("_log_softmax", "tinyback/table.py:25"), ("_softmax", "tinyback/table.py:24"),
        ("abs", "tinyback/library.py:14"), ("add.Scalar", "tinyback/lowering.py:18"),
        ("add.Tensor", "tinyback/lowering.py:18"), ("addmm", "tinyback/lowering.py:64"),
        ("amax", "tinyback/table.py:21"), ("bmm", "tinyback/lowering.py:59"),
        ("cat", "tinyback/table.py:15"), ("clone", "tinyback/table.py:14"),
        ("convolution", "tinyback/table.py:26"), ("cos", "tinyback/library.py:27"),
        ("div.Tensor", "tinyback/lowering.py:33"), ("embedding", "tinyback/table.py:30"),
        ("eq.Scalar", "tinyback/table.py:19"), ("exp", "tinyback/lowering.py:54"),
        ("expand", "tinyback/table.py:13"), ("gt.Tensor", "tinyback/table.py:20"),
        ("index.Tensor", "tinyback/library.py:29"), ("log", "tinyback/library.py:18"),
        ("max_pool2d_with_indices", "tinyback/library.py:28"), ("mean.dim", "tinyback/table.py:23"),
        ("mm", "tinyback/lowering.py:59"), ("mul.Tensor", "tinyback/lowering.py:28"),
        ("neg", "tinyback/table.py:16"), ("permute", "tinyback/table.py:12"),
        ("relu", "tinyback/lowering.py:38"), ("sigmoid", "tinyback/lowering.py:44"),
        ("sqrt", "tinyback/table.py:17"), ("sub.Tensor", "tinyback/lowering.py:23"),
        ("sum.dim_IntList", "tinyback/table.py:22"), ("tanh", "tinyback/lowering.py:49"),
        ("view", "tinyback/table.py:11"), ("where.self", "tinyback/table.py:18"),
    }  # rsub.Tensor is mapped too, but it is not a core op
    # the rest is missing, or inherited: a composite kernel serves PrivateUse1
    assert pkg.scope_total == 189 and (len(pkg.missing), len(pkg.inherited)) == (101, 54)
    assert pkg.unknown == ("aten.gelu_fast.default at tinyback/lowering.py:69",)
    inherited = {p.op: p.via for p in pkg.inherited}
    assert inherited["adaptive_avg_pool1d"] == inherited["avg_pool1d"] == "CompositeImplicitAutograd"
    assert "acos" in {p.op for p in pkg.missing} and not any(p.composite for p in pkg.missing)
    # every overload of a packet: add.out and tanh.out outside the core scope
    every = api.coverage(db=db, keys=("CPU",), tag="*", backend_package=PKG).package
    names = {p.op for p in every.covered}
    assert {"add.out", "tanh.out", "rsub.Tensor"} <= names and "add_.Tensor" not in names


@pytest.mark.real_tree
def test_package_decompositions_on_real_tree(tree, request):
    """torch/_refs/nn/functional/__init__.py:380: leaky_relu = torch.where(torch.gt(a, 0), a,
    torch.mul(a, negative_slope)); tinyback maps where.self, gt.Tensor and mul.Tensor, so the
    missing leaky_relu decomposes into its ops. gelu's decomposition calls torch.erf, unmapped."""
    from torchtalk import api

    try:
        db = Path(request.getfixturevalue("real_db"))
    except pytest.FixtureLookupError:
        pytest.skip("needs the python layer (the shared real_db fixture)")
    report = api.coverage(db=db, keys=("CPU",), tag="core", backend_package=PKG)
    pkg = report.package
    if not (pkg.decomps_known and pkg.decomp_calls_known):
        pytest.skip("the python layer is not indexed in real_db")
    missing = {p.op: p for p in pkg.missing}
    assert missing["leaky_relu"].decomposes == ("torch._refs.nn.functional.leaky_relu",)
    assert missing["leaky_relu"].unmet == ()
    assert "torch.erf" in missing["gelu"].unmet and missing["gelu"].decomposes == ()
    # ranking: most nn modules + tests first
    weights = [p.modules + p.tests for p in pkg.missing]
    assert weights == sorted(weights, reverse=True) and weights[0] > 0


# ------------------------------------------------------------------ torch.library dispatch keys

KEYS = Path(__file__).parent / "fixtures" / "backend_keys"
OPENREG = "test/cpp_extensions/open_registration_extension/pytorch_openreg"


def test_reader_carries_torch_library_keys():
    """keyback.py registers mul.Tensor for PrivateUse1, AutogradPrivateUse1 and CPU,
    positionally and by keyword, through a Library's own key, device types, and none."""
    scan = scan_backend_package(KEYS)
    assert [(r.spelled, r.key, str(r.loc)) for r in scan.refs] == [
        ("aten.abs.default", "AutogradPrivateUse1", "keyback.py:29"),  # types= keyword
        ("aten.div.Tensor", "Meta", "keyback.py:20"),  # Library("aten", "IMPL", "Meta")'s key
        ("aten.exp.default", "CompositeExplicitAutograd", "keyback.py:30"),  # register_kernel(op, None)
        ("aten.mm.default", "AutogradPrivateUse1", "keyback.py:19"),  # legacy impl(lib, name, dispatch_key=)
        ("aten.mul.Tensor", "PrivateUse1", "keyback.py:16"),
        ("aten.mul.Tensor", "AutogradPrivateUse1", "keyback.py:17"),
        ("aten.mul.Tensor", "CPU", "keyback.py:18"),
        ("aten.neg.default", "", "keyback.py:21"),  # no key: the package's backend
        ("aten.sub.Tensor", "CPU", "keyback.py:24"),  # device types "privateuseone", "cpu"
        ("aten.sub.Tensor", "PrivateUse1", "keyback.py:24"),
    ]
    assert [(f.key, f.fn, f"{f.file}:{f.line}") for f in scan.fallbacks] == [
        ("PrivateUse1", "_k", "keyback.py:31")]
    assert scan.keys == ("AutogradPrivateUse1", "CPU", "CompositeExplicitAutograd", "Meta", "PrivateUse1")
    assert scan.notes == ()
    # tinyback's torch.library registrations name PrivateUse1; its tables name no key
    keyed = {(r.name, r.key) for r in scan_backend_package(PKG).refs if r.file == "tinyback/library.py"}
    assert keyed == {(n, "PrivateUse1") for n in ("abs", "cos", "index", "log", "max_pool2d_with_indices")}


def test_reader_notes_unread_keys(tmp_path):
    (tmp_path / "k.py").write_text(
        "import torch\n"
        "KEY = 'PrivateUse1'\n"
        "lib = torch.library.Library('aten', 'IMPL')\n"
        "lib.impl('neg', f, KEY)\n"
        "torch.library.impl('aten::abs', 'foo')(f)\n"
    )
    scan = scan_backend_package(tmp_path)
    assert [(r.name, r.key, r.line) for r in scan.refs] == [("abs", "PrivateUse1", 5), ("neg", "", 4)]
    assert scan.notes == (
        "k.py:4: the dispatch key is no string literal; its registrations count for the package's backend",
        "k.py:5: device type 'foo' read as PrivateUse1 (a renamed privateuse1 backend, a guess)",
    )


@pytest.mark.real_tree
def test_keyed_python_package_report(request, tmp_path):
    """The report treats keyback's keys as a C++ package's: AutogradPrivateUse1
    kernels are autograd rows, mm (autograd only, no composite) runs through the
    package's fallback, abs through CompositeExplicitAutograd; CPU/Meta kernels count."""
    from torchtalk import api

    db = Path(request.getfixturevalue("real_db"))
    report = api.coverage(db=db, keys=("CPU",), backend_package=KEYS)
    pkg = report.package
    assert report.scope == "*" and [k.key for k in report.keys] == ["CPU", "AutogradPrivateUse1", "Meta", "PrivateUse1"]
    assert [(p.op, p.file, p.line) for p in pkg.covered] == [
        ("div.Tensor", "keyback.py", 20), ("exp", "keyback.py", 30), ("mul.Tensor", "keyback.py", 16),
        ("neg", "keyback.py", 21), ("sub.Tensor", "keyback.py", 24)]
    assert [(p.op, p.via, p.line) for p in pkg.autograd] == [
        ("abs", "AutogradPrivateUse1", 29), ("mm", "AutogradPrivateUse1", 19),
        ("mul.Tensor", "AutogradPrivateUse1", 17)]
    fallback = {p.op: p.via for p in pkg.fallback}
    assert fallback["mm"] == "PrivateUse1: _k (keyback.py:31)" and "abs" not in fallback
    assert {p.op: p.via for p in pkg.inherited}["abs"] == "CompositeExplicitAutograd"
    assert pkg.missing == () and pkg.unknown == () and pkg.notes == ()
    assert "- `mm` for AutogradPrivateUse1 (keyback.py:19)" in api.render_coverage(report, "md")
    (tmp_path / "bad.py").write_text("import torch\ntorch.library.impl('aten::abs', 'PrivateUser1')(f)\n")
    with pytest.raises(InputError) as err:
        api.coverage(db=db, keys=("CPU",), backend_package=tmp_path)
    assert str(err.value).startswith(
        "error: bad.py:2: unknown dispatch key 'PrivateUser1' in a torch.library registration")


@pytest.mark.real_tree
def test_openreg_mixed_package_report(tree, request):
    """PyTorch's pytorch_openreg registers 4 aten kernels in C++ (csrc/OpenRegMem.cpp:116)
    and 3 in Python with dispatch_key="PrivateUse1" (_aten_impl.py:213-220), plus a
    Python fallback for PrivateUse1 (_aten_impl.py:211): every other op is inherited
    through a composite kernel (torchgen's) or runs through that fallback."""
    from test_report_real import torchgen_coverage

    from torchtalk import api

    db = Path(request.getfixturevalue("real_db"))
    report = api.coverage(db=db, keys=("CPU",), backend_package=tree / OPENREG)
    pkg = report.package
    assert [(p.op, f"{p.file}:{p.line}") for p in pkg.covered] == [
        ("_copy_from", "_aten_impl.py:214"), ("_local_scalar_dense", "_aten_impl.py:219"),
        ("as_strided", "csrc/OpenRegMem.cpp:119"), ("empty.memory_format", "csrc/OpenRegMem.cpp:117"),
        ("empty_strided", "csrc/OpenRegMem.cpp:118"),
        ("set_.source_Storage_storage_offset", "csrc/OpenRegMem.cpp:120"),
        ("set_.source_Tensor", "_aten_impl.py:216")]
    assert pkg.keys == ("PrivateUse1",) and pkg.autograd == () and pkg.missing == ()
    registered = {p.op for p in pkg.covered}
    composite = set(torchgen_coverage(tree, ("PrivateUse1",))["PrivateUse1"])
    assert {p.op for p in pkg.inherited} == composite - registered
    assert {p.via for p in pkg.fallback} == {"PrivateUse1: _openreg_kernel_fallback (_aten_impl.py:211)"}
    assert (report.total, len(pkg.inherited), len(pkg.fallback)) == (2633, 1430, 1196)
    assert len(registered) + len(pkg.inherited) + len(pkg.fallback) == report.total
