"""An extension indexed beside its torch, on small trees (issue 17,
deliverable 4; Note [Extensions] in torchtalk/extension.py): its library's
ops, their kernels per key, its Python wrappers, and the CLI's errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_index import cache, cli  # noqa: F401 - the fixture and the CLI helper of the index tests

from extractors.cpp.library import lib_op_rows, library_op_rows, op_id
from extractors.python.native import library_ref_op
from torchtalk import api, store

NF = "aten/src/ATen/native/native_functions.yaml"
NATIVE = "- func: mul.Tensor(Tensor self, Tensor other) -> Tensor\n  dispatch:\n    CPU: mul_cpu\n"
LIB = 'TORCH_LIBRARY(myext, m) {\n  m.def("myext::scale(Tensor x, float s) -> Tensor");\n' \
      '  m.def("myext::scale.out(Tensor x, float s, *, Tensor(a!) out) -> Tensor(a!)");\n}\n'
CPU = ('#include <torch/library.h>\nnamespace myext {\n'
       'at::Tensor scale_cpu(const at::Tensor& x, double s) {\n  return at::mul(x, s);\n}\n'
       'TORCH_LIBRARY_IMPL(myext, CPU, m) {\n  m.impl("myext::scale", TORCH_FN(scale_cpu));\n}\n}\n')
CUDA = ('namespace myext {\n__global__ void scale_kernel(float* x, float s) {}\n'
        'at::Tensor scale_cuda(const at::Tensor& x, double s) {\n'
        '  scale_kernel<<<1, 1>>>(nullptr, s);\n  return x;\n}\n'
        'TORCH_LIBRARY_IMPL(myext, CUDA, m) {\n  m.impl("scale", TORCH_FN(scale_cuda));\n}\n}\n')
PY = 'import torch\n\n\ndef scale(x, s):\n    """Scale x."""\n    return torch.ops.myext.scale(x, s)\n'


@pytest.fixture
def torch_tree(tmp_path) -> Path:
    root = tmp_path / "pytorch"
    (root / "aten/src/ATen/native").mkdir(parents=True)
    (root / NF).write_text(NATIVE)
    (root / "torch").mkdir()
    (root / "torch/__init__.py").write_text("")
    return root


@pytest.fixture
def ext(tmp_path) -> Path:
    root = tmp_path / "myext-1.0"
    for rel, text in {"myext/__init__.py": "from .ops import scale\n", "myext/ops.py": PY,
                      "myext/csrc/scale.cpp": LIB, "myext/csrc/cpu/scale_kernel.cpp": CPU,
                      "myext/csrc/cuda/scale_kernel.cu": CUDA, "test/test_scale.py": "import myext\n",
                      "version.txt": "1.0\n"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_op_ids_of_libraries_and_torch_ops_references():
    assert (op_id("myext", "scale.out"), op_id("aten", "mul.Tensor")) == ("myext::scale.out", "mul.Tensor")
    rows = {"lib_def": [("myext", "scale", "myext::scale(Tensor x) -> Tensor", "a.cpp", 2),
                        ("aten", "foo", "foo(Tensor x) -> Tensor", "a.cpp", 3)],
            "lib_impl": [("myext", "scale", "CPU", "f", "b.cpp", 7), ("aten", "mul.Tensor", "CPU", "g", "b.cpp", 8)]}
    assert lib_op_rows(rows) == [("aten", "foo", "foo"), ("aten", "mul.Tensor", "mul.Tensor"),
                                 ("myext", "scale", "myext::scale")]
    assert library_op_rows(rows) == [("myext::scale", "myext::scale", "", "myext::scale(Tensor x) -> Tensor",
                                      "a.cpp", 2)]
    assert [library_ref_op(s) for s in ("torch.ops.myext.scale", "torch.ops.myext.scale.default",
                                        "torch.ops.myext.scale.out", "torch.ops.aten.mul", "torch.ops.load_library",
                                        "torch.nn.functional.relu")] == [
        "myext::scale", "myext::scale", "myext::scale.out", None, None, None]


def test_extension_beside_its_torch(torch_tree, ext, cache, capsys):  # noqa: F811
    code, out, _ = cli(capsys, "index", "--source", str(ext), "--with-torch", str(torch_tree), "--quiet")
    assert code == 0 and "indexed in" in out
    con = api.open_db(source=ext)
    try:
        ops = con.execute("SELECT op, file, line FROM op ORDER BY op").fetchall()
        assert ops == [("mul.Tensor", NF, 1), ("myext::scale", "myext/csrc/scale.cpp", 2),
                       ("myext::scale.out", "myext/csrc/scale.cpp", 3)]
        trace = set(api.query("trace(myext.scale)", con=con, limit=None).rows)
        cov = set(api.query("coverage(CUDA)", con=con, limit=None).rows)
        meta = dict(con.execute("SELECT key, value FROM torchtalk_meta").fetchall())
        calls_op = con.execute("SELECT caller, name, file, line FROM calls_op").fetchall()
    finally:
        con.close()
    assert {("myext::scale", "kernel", "myext::scale_cpu", "CPU", "myext/csrc/cpu/scale_kernel.cpp", 3),
            ("myext::scale", "kernel", "myext::scale_cuda", "CUDA", "myext/csrc/cuda/scale_kernel.cu", 3),
            ("myext::scale", "cuda_kernel", "myext::scale_kernel", "myext::scale_cuda",
             "myext/csrc/cuda/scale_kernel.cu", 4),
            ("myext::scale", "python", "myext.ops.scale", "wrapper", "myext/ops.py", 6)} <= trace
    # the CPU kernel's at::mul is a call of the torch tree's op (its names come from torch's yaml)
    assert calls_op == [("myext::scale_cpu", "mul", "myext/csrc/cpu/scale_kernel.cpp", 4)]
    assert {r[1:4] for r in cov if r[1].startswith("myext::")} == {
        ("myext::scale", "covered", "registered"), ("myext::scale.out", "missing", "")}
    assert (meta["kind"], meta["with_torch"], meta["extension_dirs"]) == ("extension", str(torch_tree), "myext")
    assert meta["torch_db"] == str(store.default_db(torch_tree))
    # unchanged trees: a no-op; an edit of the extension re-runs its layers
    code, out, _ = cli(capsys, "index", "--source", str(ext), "--with-torch", str(torch_tree), "--quiet")
    assert out.endswith("up to date\n")
    code, out, _ = cli(capsys, "index", "--source", str(ext), "--quiet")  # beside the torch its DB names
    assert out.endswith("up to date\n")
    code, out, _ = cli(capsys, "status", "--source", str(ext))
    assert f"source    {ext} (extension)\nbeside    {torch_tree} (its DB {store.default_db(torch_tree)})\n" in out
    (ext / "myext/ops.py").write_text(PY + "\n\ndef twice(x):\n    return scale(x, 2.0)\n")
    code, out, _ = cli(capsys, "index", "--source", str(ext), "--with-torch", str(torch_tree), "--quiet")
    assert "indexed in" in out
    con = api.open_db(source=ext)
    try:
        assert ("myext.ops.twice", "myext::scale") in con.execute("SELECT api, op FROM py_api").fetchall()
    finally:
        con.close()


def test_errors(torch_tree, ext, cache, capsys, tmp_path):  # noqa: F811
    code, _, err = cli(capsys, "index", "--with-torch", str(torch_tree))
    assert (code, err) == (1, "torchtalk: error: --with-torch needs --source EXT, the extension's checkout\n")
    code, _, err = cli(capsys, "index", "--source", str(ext), "--with-torch", str(ext))
    assert code == 1 and err.startswith(f"torchtalk: error: not a PyTorch tree: {ext}")
    bare = tmp_path / "bare"
    bare.mkdir()
    code, _, err = cli(capsys, "index", "--source", str(bare), "--with-torch", str(torch_tree))
    assert (code, err) == (1, f"torchtalk: error: no Python package at the top of {bare} (a directory with "
                              "__init__.py) (pass the root of the extension's checkout)\n")
    clash = tmp_path / "clash"
    (clash / "torch").mkdir(parents=True)
    (clash / "torch/__init__.py").write_text("")
    code, _, err = cli(capsys, "index", "--source", str(clash), "--with-torch", str(torch_tree))
    assert (code, err) == (1, f"torchtalk: error: the extension's package torch/ is also a directory of the torch "
                              f"tree {torch_tree} (their files would share paths)\n")
    code, _, err = cli(capsys, "index", "--source", str(ext), "--with-torch", str(torch_tree), "--layers", "cpp")
    assert code == 1 and "no --layers or --precise" in err
    assert not store.default_db(ext).exists()


VLLM_REG = '#define TORCH_LIBRARY_EXPAND(NAME, MODULE) TORCH_LIBRARY(NAME, MODULE)\n'
VLLM_OPS = ('#include "core/registration.h"\n'
            'void rms_norm(at::Tensor& out, at::Tensor& input) {}\n'
            'TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {\n'
            '  ops.def("rms_norm(Tensor! out, Tensor input) -> ()");\n'
            '  ops.impl("rms_norm", torch::kCUDA, &rms_norm);\n'
            '}\n')
VLLM_PY = 'import torch\n\n\ndef rms_norm(out, x):\n    torch.ops._C.rms_norm(out, x)\n'
TOML = '[cpp.macros]\nTORCH_LIBRARY_EXPAND = "TORCH_LIBRARY"\nTORCH_EXTENSION_NAME = "_C"\n'


def test_project_macros_name_an_extensions_own_registration_macros(torch_tree, tmp_path, cache, capsys):  # noqa: F811
    """Note [Project macros]: `.torchtalk.toml` says what TORCH_LIBRARY_EXPAND (defined
    in a header, as vLLM's csrc/core/registration.h does) and TORCH_EXTENSION_NAME (a
    build flag) mean; without it the library is not seen."""
    root = tmp_path / "vllm"
    for rel, text in {"vllm/__init__.py": "", "vllm/custom_ops.py": VLLM_PY,
                      "vllm/csrc/core/registration.h": VLLM_REG, "vllm/csrc/torch_bindings.cpp": VLLM_OPS}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)

    def ops_and_kernels():
        assert cli(capsys, "index", "--source", str(root), "--with-torch", str(torch_tree), "--quiet")[0] == 0
        con = api.open_db(source=root)
        try:
            return (con.execute("SELECT op, file, line FROM op WHERE op LIKE '%::%'").fetchall(),
                    set(api.query("trace(vllm.custom_ops.rms_norm)", con=con, limit=None).rows)
                    if con.execute("SELECT 1 FROM op WHERE op = '_C::rms_norm'").fetchall() else set())
        finally:
            con.close()

    assert ops_and_kernels() == ([], set())
    (root / ".torchtalk.toml").write_text(TOML)
    ops, trace = ops_and_kernels()
    assert ops == [("_C::rms_norm", "vllm/csrc/torch_bindings.cpp", 4)]
    assert ("_C::rms_norm", "registration", "rms_norm", "CUDA", "vllm/csrc/torch_bindings.cpp", 5) in trace
    assert ("_C::rms_norm", "python", "vllm.custom_ops.rms_norm", "wrapper", "vllm/custom_ops.py", 5) in trace
    # a bad entry is a warning at its line, not an error
    (root / ".torchtalk.toml").write_text(TOML + 'BAD = 3\n')
    cli(capsys, "index", "--source", str(root), "--with-torch", str(torch_tree), "--quiet")
    con = api.open_db(source=root)
    try:
        assert con.execute("SELECT file, line, message FROM torchtalk_warnings WHERE layer = 'ext-cpp'").fetchall() == [
            (".torchtalk.toml", 4, '[cpp.macros] BAD: want an identifier = "one line"')]
    finally:
        con.close()


def test_src_layout_paths_are_relative_to_src(torch_tree, ext, tmp_path, cache, capsys):  # noqa: F811
    """A package under src/ (torchaudio's layout) wins over a top-level one (its tools/)."""
    root = tmp_path / "srcext"
    (root / "src").mkdir(parents=True)
    ext.rename(root / "src" / "pkg")
    (root / "src/pkg/myext").rename(root / "src/myext")
    (root / "tools").mkdir()
    (root / "tools/__init__.py").write_text("")
    assert cli(capsys, "index", "--source", str(root), "--with-torch", str(torch_tree), "--quiet")[0] == 0
    con = api.open_db(source=root)
    try:
        assert con.execute("SELECT op, file FROM op WHERE op = 'myext::scale'").fetchall() == [
            ("myext::scale", "myext/csrc/scale.cpp")]
        meta = dict(con.execute("SELECT key, value FROM torchtalk_meta").fetchall())
    finally:
        con.close()
    assert (meta["source"], meta["extension_dirs"]) == (str(root / "src"), "myext,pkg")
