"""The ops layer (extractors/ops*.py) on the real 2.6.0 tree and on small fixtures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _sinks import ListSink as _ListSink

from extractors import ops
from extractors.base import ExtractContext
from extractors.ops_derivatives import formula_calls
from extractors.ops_yaml import Signature
from torchtalk.errors import ExtractError, ParseError

NF = "aten/src/ATen/native/native_functions.yaml"
DY = "tools/autograd/derivatives.yaml"
DUMP = Path(__file__).parent / "data" / "torchgen_dump.py"
VIEWCOPY_DUMP = Path(__file__).parent / "data" / "torchgen_viewcopy.py"
UFUNC_DUMP = Path(__file__).parent / "data" / "torchgen_ufunc.py"


class ListSink(_ListSink):
    def where(self, relation, op):
        return sorted(r for r in self.rows[relation] if r[0] == op)


def run_ops(root: Path) -> ListSink:
    sink = ListSink()
    ops.extract(ExtractContext(root=root, cache_dir=root), sink)
    return sink


@pytest.fixture(scope="module")
def facts(tree) -> ListSink:
    return run_ops(tree)


def torchgen_view(tree: Path, *extra: str) -> dict:
    """The tree's own torchgen, in a subprocess (the wheel's torchgen would shadow it)."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run(
        [sys.executable, str(DUMP), str(tree / NF), str(tree / "aten/src/ATen/native/tags.yaml"), *extra],
        capture_output=True, text=True, env=env, check=True,
    )
    return json.loads(out.stdout)["ops"]


# ------------------------------------------------------------------ real tree


@pytest.mark.real_tree
def test_every_op_and_dispatch_table_equals_torchgen(tree, facts):
    expected = torchgen_view(tree)
    mine = {op: {"line": line, "dispatch": {}} for op, _, _, _, _, line in facts.rows["op"]}
    for op, key, kernel, file, _ in facts.rows["dispatch"]:
        assert file == NF
        assert key not in mine[op]["dispatch"], (op, key)
        mine[op]["dispatch"][key] = kernel
    assert len(facts.rows["op"]) == len(expected) == 2633
    diff = [op for op in expected if expected[op] != mine.get(op)]
    assert diff == []
    assert set(mine) == set(expected)


@pytest.mark.real_tree
def test_ops_torchgen_generates_are_autogen_facts(tree, facts):
    """Every op torchgen adds itself was asked for by an `autogen:` row."""
    generated = set(torchgen_view(tree, "--gen")) - {r[0] for r in facts.rows["op"]}
    autogen = {r[1] for r in facts.rows["autogen"]}
    assert len(generated) == 511
    assert generated <= autogen


@pytest.mark.real_tree
def test_add_tensor_facts(facts):
    assert facts.where("op", "add.Tensor") == [
        ("add.Tensor", "add", "Tensor", "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", NF, 552)
    ]
    assert facts.where("dispatch", "add.Tensor") == sorted([
        ("add.Tensor", "SparseCPU", "add_sparse", NF, 557),
        ("add.Tensor", "SparseCUDA", "add_sparse", NF, 557),
        ("add.Tensor", "SparseMeta", "add_sparse", NF, 557),
        ("add.Tensor", "SparseCsrCPU", "add_sparse_csr", NF, 558),
        ("add.Tensor", "SparseCsrCUDA", "add_sparse_csr", NF, 558),
        ("add.Tensor", "SparseCsrMeta", "add_sparse_csr", NF, 558),
        ("add.Tensor", "MkldnnCPU", "mkldnn_add", NF, 559),
        ("add.Tensor", "ZeroTensor", "add_zerotensor", NF, 560),
        ("add.Tensor", "NestedTensorCPU", "NestedTensor_add_Tensor", NF, 561),
        ("add.Tensor", "NestedTensorCUDA", "NestedTensor_add_Tensor", NF, 561),
    ])
    assert facts.where("structured_delegate", "add.Tensor") == [("add.Tensor", "add.out", NF, 554)]
    assert facts.where("op_variant", "add.Tensor") == [("add.Tensor", "function"), ("add.Tensor", "method")]
    assert facts.where("op_tag", "add.Tensor") == [("add.Tensor", "core"), ("add.Tensor", "pointwise")]
    assert facts.where("dispatch_default", "add.Tensor") == []


@pytest.mark.real_tree
def test_add_out_ufunc_structured_facts(facts):
    ufunc = [r for r in facts.where("dispatch", "add.out") if r[1] in ("CPU", "CUDA")]
    assert ufunc == [("add.out", "CPU", "ufunc_add_CPU", NF, 579), ("add.out", "CUDA", "ufunc_add_CUDA", NF, 579)]
    assert facts.where("structured", "add.out") == [("add.out", NF, 577)]
    assert facts.where("structured_inherits", "add.out") == [("add.out", "TensorIteratorBase", NF, 578)]
    assert facts.where("op_attr", "add.out") == [("add.out", "device_check", "NoCheck", NF, 576)]
    assert facts.rows["ufunc_inner_loop"] == [
        ("add.out", "Generic", "add", "AllAndComplex, BFloat16, Half, ComplexHalf", NF, 580),
        ("add.out", "ScalarOnly", "add", "Bool", NF, 581),
    ]
    # torchgen generates REGISTER_DISPATCH(add_stub, &add_kernel) for CPU and CUDA
    assert facts.rows["ufunc_stub_register"] == [
        ("at::native::add_stub", "CPU", "at::native::(anonymous:UfuncCPUKernel_add.cpp)::add_kernel", "add.out", "UfuncCPUKernel_add.cpp", NF, 579),
        ("at::native::add_stub", "CUDA", "at::native::add_kernel", "add.out", "UfuncCUDA_add.cu", NF, 579),
    ]


@pytest.mark.real_tree
def test_ufunc_facts_equal_what_torchgen_generates(tree, facts):
    """The loops as torchgen parses them, and the REGISTER_DISPATCH lines of the
    code it generates (tests/data/torchgen_ufunc.py runs the tree's torchgen)."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run([sys.executable, str(UFUNC_DUMP), str(tree)], capture_output=True, text=True,
                         env=env, check=True)
    dump = json.loads(out.stdout)
    classes = dump["dtype_classes"]
    loops: dict = {}
    for op, key, name, dtypes, _, _ in facts.rows["ufunc_inner_loop"]:
        expanded = [d for w in dtypes.split(", ") for d in classes.get(w, [w])]
        loops.setdefault(op, {})[key] = [name, expanded]
    regs: dict = {}
    for stub, key, fn, op, gen_file, _, _ in facts.rows["ufunc_stub_register"]:
        regs.setdefault(op, []).append([key, stub, fn, gen_file])
    assert {op: {"loops": loops[op], "registrations": regs[op]} for op in loops} == dump["ufuncs"]
    assert list(dump["ufuncs"]) == ["add.out"]


@pytest.mark.real_tree
def test_view_copy_kernels_equal_what_torchgen_generates(tree, facts):
    """Note [View copy codegen]: the composite kernels torchgen generates for
    {view}_copy ops, and the ops each one calls, as the tree's own torchgen
    writes them (tests/data/torchgen_viewcopy.py)."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run([sys.executable, str(VIEWCOPY_DUMP), str(tree)], capture_output=True, text=True,
                         env=env, check=True)
    want = json.loads(out.stdout)["kernels"]
    calls: dict[str, set[str]] = {}
    for fn, name, _file, _line in facts.rows["codegen_call"]:
        calls.setdefault(fn, set()).add(name)
    mine = {op: [kernel, sorted(calls[fn])] for op, key, kernel, fn, _f, _l in facts.rows["codegen_kernel"]}
    assert len(want) == 42 and mine == want
    assert ("alias_copy", "CompositeExplicitAutogradNonFunctional", "alias_copy", "at::native::alias_copy",
            NF, 14775) in facts.rows["codegen_kernel"]


@pytest.mark.real_tree
def test_matmul_and_gelu_facts(facts):
    assert facts.where("dispatch", "matmul") == [
        ("matmul", "CompositeImplicitAutograd", "matmul", NF, 3778),
        ("matmul", "NestedTensorCPU", "matmul_nested", NF, 3779),
        ("matmul", "NestedTensorCUDA", "matmul_nested", NF, 3779),
    ]
    assert facts.where("dispatch_default", "matmul") == []  # written in the yaml, not defaulted
    assert facts.where("op", "gelu") == [("gelu", "gelu", "", "gelu(Tensor self, *, str approximate='none') -> Tensor", NF, 5099)]
    assert facts.where("dispatch", "gelu.out") == [
        ("gelu.out", "CPU", "gelu_out_cpu", NF, 5087),
        ("gelu.out", "CUDA", "gelu_out_cuda", NF, 5088),
        ("gelu.out", "MPS", "gelu_out_mps", NF, 5089),
    ]
    assert facts.where("op_python_module", "gelu") == [("gelu", "nn")]


@pytest.mark.real_tree
def test_default_composite_implicit_kernels(facts):
    """torchgen's cpp.name: base name, "_out" for out= overloads, dunder names kept."""
    assert facts.where("dispatch", "_cast_Byte") == [("_cast_Byte", "CompositeImplicitAutograd", "_cast_Byte", NF, 9)]
    assert facts.where("dispatch_default", "_cast_Byte") == [("_cast_Byte", "_cast_Byte")]
    assert facts.where("dispatch_default", "all.dimname_out") == [("all.dimname_out", "all_out")]
    assert facts.where("dispatch", "all.dimname_out") == [("all.dimname_out", "CompositeImplicitAutograd", "all_out", NF, 734)]
    assert facts.where("dispatch_default", "__iand__.Scalar") == [("__iand__.Scalar", "__iand__")]
    assert len(facts.rows["dispatch_default"]) == 744


@pytest.mark.real_tree
def test_derivative_formula_and_calls(facts):
    assert facts.where("derivative", "gelu") == [
        ("gelu", "result", "auto_element_wise", DY, 2121),
        ("gelu", "self", "gelu_backward(grad, self, approximate)", DY, 2120),
    ]
    assert facts.where("derivative_calls", "gelu") == [("gelu", "self", "gelu_backward", DY, 2120)]
    assert facts.where("derivative_calls", "add.Tensor") == [
        ("add.Tensor", "other", "handle_r_to_c", DY, 231),
        ("add.Tensor", "other", "maybe_multiply", DY, 231),
        ("add.Tensor", "result", "maybe_multiply", DY, 232),
        ("add.Tensor", "self", "handle_r_to_c", DY, 230),
    ]
    # a key naming several inputs gives one row per input (Note [Derivative rows])
    assert [r[1] for r in facts.where("derivative", "conv_tbc")] == ["bias", "self", "weight"]
    # dispatch sections (Default / AutogradNestedTensor) both count, qualified calls kept
    assert facts.where("derivative_calls", "values") == [
        ("values", "self", "at::_nested_view_from_buffer", DY, 1971),
        ("values", "self", "values_backward", DY, 1969),
    ]


@pytest.mark.real_tree
def test_tags(facts):
    tags = {r[0]: r for r in facts.rows["tag"]}
    assert len(tags) == 13
    assert tags["core"][2:] == ("aten/src/ATen/native/tags.yaml", 60)
    assert facts.warnings == []


# ------------------------------------------------------------------ fixtures


def make_tree(tmp_path: Path, native: str, derivatives: str | None = None, tags: str | None = None) -> Path:
    d = tmp_path / "aten/src/ATen/native"
    d.mkdir(parents=True)
    (d / "native_functions.yaml").write_text(native)
    (d / "tags.yaml").write_text(tags if tags is not None else "- tag: core\n  desc: core op\n")
    if derivatives is not None:
        (tmp_path / "tools/autograd").mkdir(parents=True)
        (tmp_path / "tools/autograd/derivatives.yaml").write_text(derivatives)
    return tmp_path


def test_unknown_key_is_an_error_with_line(tmp_path):
    root = make_tree(tmp_path, "- func: foo(Tensor self) -> Tensor\n  variants: function\n  dispach:\n    CPU: foo_cpu\n")
    with pytest.raises(ExtractError) as err:
        run_ops(root)
    assert str(err.value) == (
        f"{NF}:3: extract error: unknown key 'dispach' in entry 'foo' (did you mean 'dispatch'?)"
    )


def test_unknown_dispatch_key_is_an_error(tmp_path):
    root = make_tree(tmp_path, "- func: foo(Tensor self) -> Tensor\n  dispatch:\n    CPU, CUDAA: foo_k\n")
    with pytest.raises(ExtractError) as err:
        run_ops(root)
    assert str(err.value) == f"{NF}:3: extract error: unknown dispatch key 'CUDAA' (did you mean 'CUDA'?)"


def test_malformed_yaml_names_file_line_col(tmp_path):
    root = make_tree(tmp_path, "- func: foo(Tensor self) -> Tensor\n  dispatch: [CPU\n- func: bar() -> Tensor\n")
    with pytest.raises(ParseError) as err:
        run_ops(root)
    assert err.value.headline() == f"{NF}:3:7: parse error: malformed YAML: did not find expected ',' or ']'"
    assert err.value.source_line == "- func: bar() -> Tensor"


def test_illegal_tag_and_variant(tmp_path):
    root = make_tree(tmp_path, "- func: foo(Tensor self) -> Tensor\n  tags: cor\n")
    with pytest.raises(ExtractError, match=r"native_functions.yaml:2: extract error: illegal tag 'cor' in entry 'foo' \(did you mean 'core'\?\)"):
        run_ops(root)
    root2 = make_tree(tmp_path / "b", "- func: foo(Tensor self) -> Tensor\n  variants: function, methd\n")
    with pytest.raises(ExtractError, match=r":2: extract error: illegal variant 'methd'"):
        run_ops(root2)


def test_derivative_unknown_argument_is_an_error(tmp_path):
    root = make_tree(
        tmp_path, "- func: foo(Tensor self) -> Tensor\n",
        "- name: foo(Tensor self) -> Tensor\n  self: grad\n  slef: grad\n",
    )
    with pytest.raises(ExtractError) as err:
        run_ops(root)
    assert str(err.value) == (
        "tools/autograd/derivatives.yaml:3: extract error: unknown key 'slef' in derivative of 'foo' (not an argument or output)"
    )


def test_small_tree_rows(tmp_path):
    root = make_tree(tmp_path, (
        "- func: foo.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)\n"
        "  python_module: special\n"
        "  manual_cpp_binding: True\n"
        "- func: foo_(Tensor(a!) self) -> Tensor(a!)\n"
        "  variants: method\n"
        "  autogen: foo_.out, foo_functional\n"
    ))
    sink = run_ops(root)
    assert sink.rows["dispatch"] == [
        ("foo.out", "CompositeImplicitAutograd", "foo_out", NF, 1),
        ("foo_", "CompositeImplicitAutograd", "foo_", NF, 4),
    ]
    assert sink.rows["op_python_module"] == [("foo.out", "special")]
    assert sink.rows["op_attr"] == [("foo.out", "manual_cpp_binding", "True", NF, 3)]
    assert sink.rows["op_variant"] == [("foo.out", "function"), ("foo_", "method")]
    assert sink.rows["autogen"] == [("foo_", "foo_.out", NF, 6), ("foo_", "foo_functional", NF, 6)]
    assert sink.warnings == [("tools/autograd/derivatives.yaml", 0, "derivatives.yaml not found; no derivative facts")]


UFUNC_OUT = (
    "- func: foo.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)\n"
    "  structured: True\n"
)


def test_ufunc_rows_short_and_low_level_forms(tmp_path):
    """`ufunc_inner_loop: NAME (dtypes)` is the Generic loop at the key's line;
    the low-level keys are rows of their own."""
    root = make_tree(tmp_path, (
        UFUNC_OUT + "  ufunc_inner_loop: foo (Floating, Half)\n"
        "- func: bar.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)\n"
        "  structured: True\n"
        "  ufunc_inner_loop:\n"
        "    CPUScalar: bar_scalar (All, Bool)\n"
        "    CUDAFunctor: BarFunctor (Float)\n"
        "  dispatch:\n"
        "    MPS: bar_out_mps\n"
    ))
    sink = run_ops(root)
    assert sink.rows["ufunc_inner_loop"] == [
        ("foo.out", "Generic", "foo", "Floating, Half", NF, 3),
        ("bar.out", "CPUScalar", "bar_scalar", "All, Bool", NF, 7),
        ("bar.out", "CUDAFunctor", "BarFunctor", "Float", NF, 8),
    ]
    assert sink.rows["ufunc_stub_register"] == [
        ("at::native::foo_stub", "CPU", "at::native::(anonymous:UfuncCPUKernel_foo.cpp)::foo_kernel", "foo.out", "UfuncCPUKernel_foo.cpp", NF, 3),
        ("at::native::foo_stub", "CUDA", "at::native::foo_kernel", "foo.out", "UfuncCUDA_foo.cu", NF, 3),
        ("at::native::bar_stub", "CPU", "at::native::(anonymous:UfuncCPUKernel_bar.cpp)::bar_kernel", "bar.out", "UfuncCPUKernel_bar.cpp", NF, 6),
        ("at::native::bar_stub", "CUDA", "at::native::bar_kernel", "bar.out", "UfuncCUDA_bar.cu", NF, 6),
    ]
    assert sorted(r for r in sink.rows["dispatch"] if r[0] == "bar.out") == [
        ("bar.out", "CPU", "ufunc_bar_CPU", NF, 6),
        ("bar.out", "CUDA", "ufunc_bar_CUDA", NF, 6),
        ("bar.out", "MPS", "bar_out_mps", NF, 10),
    ]
    assert sink.rows["op_attr"] == []


@pytest.mark.parametrize(("entry", "message"), [
    (UFUNC_OUT + "  ufunc_inner_loop:\n    Generc: foo (All)\n",
     "4: extract error: unknown ufunc key 'Generc' (did you mean 'Generic'?)"),
    (UFUNC_OUT + "  ufunc_inner_loop:\n    Generic: foo (All, Flaot)\n",
     "4: extract error: unknown dtype 'Flaot' in ufunc loop 'foo (All, Flaot)' (did you mean 'Float', 'Floating', 'BFloat16'?)"),
    (UFUNC_OUT + "  ufunc_inner_loop: foo All\n",
     "3: extract error: ufunc loop 'foo All' is not 'name (dtypes)'"),
    (UFUNC_OUT + "  ufunc_inner_loop: [foo (All)]\n",
     "3: extract error: `ufunc_inner_loop:` must be a string or a mapping, got ['foo (All)']"),
    ("- func: foo.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)\n  ufunc_inner_loop: foo (All)\n",
     "2: extract error: `ufunc_inner_loop:` of 'foo.out' needs `structured: True` (torchgen: ufunc must be structured)"),
    ("- func: foo(Tensor self) -> Tensor\n  structured: True\n  ufunc_inner_loop: foo (All)\n",
     "3: extract error: `ufunc_inner_loop:` of 'foo' is only allowed on an out= overload"),
    (UFUNC_OUT + "  ufunc_inner_loop: foo (All)\n  dispatch:\n    CPU, MPS: foo_out\n",
     "5: extract error: 'foo.out' is a ufunc: its CPU kernel is generated, not written in `dispatch:`"),
])
def test_ufunc_entries_are_checked_like_torchgen(tmp_path, entry, message):
    with pytest.raises(ExtractError) as err:
        run_ops(make_tree(tmp_path, entry))
    assert str(err.value) == f"{NF}:{message}"


def test_signature_parse():
    s = Signature.parse("max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)")
    assert (s.op, s.name, s.overload, s.args, s.returns, s.is_out_fn) == (
        "max.dim", "max", "dim", ("self", "dim", "keepdim"), ("values", "indices"), False)
    s = Signature.parse("avg_pool2d.out(Tensor self, int[2] kernel_size, int[2] stride=[], *, Tensor(a!) out) -> Tensor(a!)")
    assert (s.args, s.is_out_fn) == (("self", "kernel_size", "stride", "out"), True)


def test_formula_calls():
    assert formula_calls(["grad.defined() ? at::sum_to(grad, self.sym_sizes()) : Tensor()", "auto_linear", "std::get<0>(f(x))"]) == [
        (0, "at::sum_to"), (0, "Tensor"), (2, "std::get"), (2, "f"),
    ]


@pytest.mark.parametrize(("line", "message"), [
    ("  structured: maybe\n", "`structured:` of 'foo' must be True or False, got 'maybe'"),
    ("  device_check: Nope\n", "`device_check:` of 'foo' must be ExactSame or NoCheck, got 'Nope'"),
    ("  python_module: [nn]\n", "`python_module:` of 'foo' must be a string, got ['nn']"),
])
def test_value_types_are_checked(tmp_path, line, message):
    root = make_tree(tmp_path, "- func: foo(Tensor self) -> Tensor\n" + line)
    with pytest.raises(ExtractError) as err:
        run_ops(root)
    assert str(err.value) == f"{NF}:2: extract error: {message}"


NATIVE_DUMP = Path(__file__).parent / "data" / "torchgen_native.py"


@pytest.mark.real_tree
def test_native_kernel_params_equal_torchgens_native_signature(tree, facts):
    """Note [Native kernel parameters]: the C++ parameter types of every
    dispatch-table kernel are those of torchgen's own
    NativeSignature (tests/data/torchgen_native.py runs the tree's torchgen),
    spelled as overload ids spell them (Note [Overload ids])."""
    from extractors.cpp.names import normalize_type

    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run([sys.executable, str(NATIVE_DUMP), str(tree)], capture_output=True, text=True,
                         env=env, check=True)
    default = dict(facts.rows["dispatch_default"])
    want = {}
    for func, kernel, types in json.loads(out.stdout):
        op = func.split("(", 1)[0]
        if kernel or op in default:  # a structured delegate without a table has no kernel of its own
            want[(op, kernel or default[op])] = [normalize_type(t) for t in types]
    got: dict = {}
    for op, kernel, arity, pos, t in sorted(facts.rows["native_kernel_param"]):
        got.setdefault((op, kernel), [None] * arity)[pos] = t
    assert {k: v for k, v in want.items() if v} == got
    assert len(got) > 3000
    assert got[("where.self", "where")] == ["const Tensor&"] * 3
    assert got[("cumsum.out", "cumsum_out")] == ["const Tensor&", "int64_t", "optional<ScalarType>", "Tensor&"]


def test_a_yaml_is_parsed_once_per_text(tmp_path: Path) -> None:
    """Note [One parse of a YAML per process]: the same text gives the same
    object; an edit gives the new entries."""
    from extractors.ops_yaml import load_yaml

    path = tmp_path / "native_functions.yaml"
    path.write_text("- func: a(Tensor self) -> Tensor\n")
    first = load_yaml(path, "native_functions.yaml")
    assert load_yaml(path, "native_functions.yaml") is first
    path.write_text("- func: a(Tensor self) -> Tensor\n\n- func: b(Tensor self) -> Tensor\n")
    edited = load_yaml(path, "native_functions.yaml")
    assert [e["func"] for e in edited] == ["a(Tensor self) -> Tensor", "b(Tensor self) -> Tensor"]
    assert edited[1].line == 3
