"""Any name, one place (issue 15 deliverable 1, issue 19 deliverable 1): every
spelling people type resolves, on the real PyTorch 2.6.0 tree, to the
definition it means, through the query DSL (the CLI and the API run it) and
through the MCP tools, which call the DSL. Each definition is checked at its
file:line against the source line it points to."""

from __future__ import annotations

import re

import pytest
from _tree import line_of

from torchtalk.query.resolve import Ambiguous, Resolver

pytestmark = pytest.mark.real_tree

NF = "aten/src/ATen/native/native_functions.yaml"


@pytest.fixture(scope="module")
def con(real_con):
    return real_con


def q(con, text, **kw):
    from torchtalk import api

    return api.query(text, con=con, **kw)


def only(con, text: str, ns: str):
    """The one definition `text` names in namespace `ns`."""
    res = Resolver(con).resolve(text, ns)
    assert not res.ambiguous, (text, res.ids)
    assert len(res.ids) == 1, (text, res.ids)
    return res.matches[0]


# ------------------------------------------------------------------ Python aliases


def test_module_aliases_are_read_off_the_tree(con, tree):
    # F, nn and aten mean what most of torch/ binds them to, each binding at its line
    rows = con.execute("SELECT alias, module, files, file, line FROM py_alias WHERE alias IN ('F', 'nn', 'aten') "
                       "ORDER BY alias, files DESC").fetchall()
    best = {}
    for alias, module, files, file, line in rows:
        best.setdefault(alias, (module, files))
        lines = (tree / file).read_text().splitlines()[line - 1:]
        end = next(i for i, t in enumerate(lines) if ")" in t) if "(" in lines[0] else 0
        src = " ".join(lines[:end + 1])  # the import statement, over its lines
        assert re.search(rf"\b{re.escape(alias)}\b", src) and module.rsplit(".", 1)[-1] in src, (alias, src)
    assert {a: m for a, (m, _) in best.items()} == {
        "F": "torch.nn.functional", "nn": "torch.nn", "aten": "torch.ops.aten"}
    # F is also torch.optim._functional in a few files: the most files win
    f_rows = [r for r in rows if r[0] == "F"]
    assert f_rows[0][2] > 50 and any(r[1] == "torch.optim._functional" for r in f_rows[1:])
    assert Resolver(con).expand("F.gelu") == "torch.nn.functional.gelu"


def test_f_gelu_is_the_functional_gelu_and_its_ops(con, tree):
    m = only(con, "F.gelu", "py")
    assert (m.id, m.file, m.line) == ("torch.nn.functional.gelu", "torch/nn/functional.py",
                                      line_of(tree, "torch/nn/functional.py", "gelu = _add_docstr("))
    assert Resolver(con).resolve("F.gelu", "op").ids == ("gelu", "gelu.out")
    rows = q(con, "trace(F.gelu)").rows
    assert ("gelu", "python", "torch.nn.functional.gelu") in {r[:3] for r in rows}


def test_f_interpolate_reaches_the_upsample_ops(con, tree):
    m = only(con, "F.interpolate", "py")
    assert m.id == "torch.nn.functional.interpolate"
    assert (tree / m.file).read_text().splitlines()[m.line - 1].startswith("def interpolate(")
    ops = Resolver(con).resolve("F.interpolate", "op").ids
    assert {"upsample_nearest2d", "upsample_bilinear2d", "upsample_bicubic2d"} <= set(ops)


@pytest.mark.parametrize("text", ["nn.GELU", "GELU", "torch.nn.GELU"])
def test_gelu_module_spellings(con, tree, text):
    m = only(con, text, "module_class")
    path = "torch/nn/modules/activation.py"
    assert (m.id, m.file, m.line) == ("torch.nn.modules.activation.GELU", path, line_of(tree, path, "class GELU("))


@pytest.mark.parametrize("text", ["torch.nn.Linear", "nn.Linear", "Linear"])
def test_linear_is_torch_nn_linear(con, tree, text):
    m = only(con, text, "module_class")
    path = "torch/nn/modules/linear.py"
    assert (m.id, m.file, m.line) == ("torch.nn.modules.linear.Linear", path, line_of(tree, path, "class Linear("))


def test_ambiguous_linear_picks_the_public_one_and_lists_the_others(con):
    res = Resolver(con).resolve("Linear", "module_class")
    others = {m.id for m in res.others}
    # every other Linear class of the tree is listed, none of them public
    every = {r[0] for r in con.execute(
        "SELECT cls FROM module_class WHERE suffix(cls, '.Linear') AND category = 'nn_other'").fetchall()}
    assert others == every and "torch.ao.nn.quantized.modules.linear.Linear" in others
    r = q(con, "trace_module(Linear)")
    assert {row[0] for row in r.rows} == {"torch.nn.modules.linear.Linear"}
    assert any("torch.ao.nn.quantized.modules.linear.Linear" in n for n in r.notes), r.notes


def test_nn_lstm_is_torch_nn_lstm(con, tree):
    r = q(con, "trace_module(nn.LSTM)")
    assert {row[0] for row in r.rows} == {"torch.nn.modules.rnn.LSTM"}
    cls = [row for row in r.rows if row[1] == "class"]
    assert cls == [("torch.nn.modules.rnn.LSTM", "class", "torch.nn.modules.rnn.LSTM", "nn",
                    "torch/nn/modules/rnn.py", line_of(tree, "torch/nn/modules/rnn.py", "class LSTM("))]
    # the bare name lists the quantized LSTMs it did not pick
    assert "torch.ao.nn.quantized.modules.rnn.LSTM" in {m.id for m in Resolver(con).resolve("LSTM", "module_class").others}


def test_module_given_to_trace_is_traced_as_a_module(con):
    r = q(con, "trace(nn.GELU)")  # Note [Trace of anything]
    assert r.name == "trace_module" and {row[0] for row in r.rows} == {"torch.nn.modules.activation.GELU"}
    assert r.notes[0] == "'nn.GELU' names no ATen op but an nn module, optimizer or scheduler: trace_module(nn.GELU)"


def test_module_given_to_another_query_says_trace_module(con):
    with pytest.raises(Exception) as exc:
        q(con, "kernels(nn.GELU)")
    assert "torch.nn.modules.activation.GELU: ask trace_module(nn.GELU)" in exc.value.headline()


# ------------------------------------------------------------------ op spellings


@pytest.mark.parametrize("text", ["aten.add.Tensor", "torch.ops.aten.add.Tensor", "aten::add.Tensor",
                                  "add.Tensor", "at::_ops::add_Tensor", "at::_ops::add_Tensor::call"])
def test_add_tensor_spellings(con, tree, text):
    m = only(con, text, "op")
    assert (m.id, m.file, m.line) == ("add.Tensor", NF, line_of(tree, NF, "- func: add.Tensor("))


@pytest.mark.parametrize(("text", "op", "needle"), [
    ("at::gelu", "gelu", "- func: gelu("),
    ("at::cpu::gelu", "gelu", "- func: gelu("),
    ("at::gelu_out", "gelu.out", "- func: gelu.out("),
    ("at::gelu_outf", "gelu.out", "- func: gelu.out("),
    ("at::nll_loss_nd_symint", "nll_loss_nd", "- func: nll_loss_nd("),
    ("at::native::gelu_out", "gelu.out", "- func: gelu.out("),
    ("gelu.default", "gelu", "- func: gelu("),
    ("aten.gelu.default", "gelu", "- func: gelu("),
])
def test_cpp_api_and_default_overload_spellings(con, tree, text, op, needle):
    m = only(con, text, "op")
    assert (m.id, m.file, m.line) == (op, NF, line_of(tree, NF, needle))


def test_default_is_the_default_overload_only(con):
    assert Resolver(con).resolve("gelu", "op").ids == ("gelu", "gelu.out")  # the name: every overload
    assert {r[0] for r in q(con, "trace(gelu.default)").rows} == {"gelu"}


def test_cpp_api_names_follow_the_schema(con):
    # at::X is X's functional overloads, at::X_out its out= ones, as torchgen names them
    r = Resolver(con)
    out = {o for (o,) in con.execute("SELECT op FROM op WHERE name = 'add' AND schema LIKE '%out) ->%'").fetchall()}
    assert set(r.resolve("at::add_out", "op").ids) == out == {"add.out"}
    assert set(r.resolve("at::add", "op").ids) == {"add.Tensor", "add.Scalar"}


@pytest.mark.parametrize(("kernel", "op", "path"), [
    ("gelu_out_cpu", "gelu.out", "aten/src/ATen/native/Activation.cpp"),
    ("topk_out_cuda", "topk.values", "aten/src/ATen/native/cuda/TensorTopK.cpp"),
])
def test_yaml_kernel_names_of_structured_kernels(con, tree, kernel, op, path):
    # the C++ function of a structured kernel's YAML name is its TORCH_IMPL_FUNC
    m = only(con, kernel, "fn")
    assert (m.id, m.file, m.line) == (f"at::native::structured_{kernel}::impl", path,
                                      line_of(tree, path, f"TORCH_IMPL_FUNC({kernel})"))
    assert only(con, kernel, "op").id == op
    assert only(con, f"at::native::{kernel}", "fn").id == m.id
    # the id TorchTalk prints for it, pasted back, names the same op
    assert only(con, m.id, "op").id == op
    assert {r[0] for r in q(con, f"trace({m.id})").rows} == {op}


def test_op_spelling_as_a_function_is_its_kernels(con):
    res = Resolver(con).resolve("at::native::gelu_out", "fn")
    assert res.ambiguous and set(res.ids) == {
        "at::native::structured_gelu_out_cpu::impl", "at::native::structured_gelu_out_cuda::impl",
        "at::native::structured_gelu_out_mps::impl"}


# ------------------------------------------------------------------ ids pasted back


def test_anonymous_namespace_id_pasted_back_unquoted(con, tree):
    # the id as printed, with its file: that definition only
    cpu = "at::native::(anonymous:aten/src/ATen/native/SoftMax.cpp)::host_softmax"
    r = q(con, f"callers({cpu})")
    assert r.rows and {row[0] for row in r.rows} == {cpu}
    for row in r.rows:
        assert "host_softmax" in (tree / row[3]).read_text().splitlines()[row[4] - 1]
    # as people type it, without the file: every file's, listed
    with pytest.raises(Ambiguous) as exc:
        q(con, "callers(at::native::(anonymous)::host_softmax)")
    assert cpu in exc.value.render()
    assert "at::native::(anonymous:aten/src/ATen/native/cuda/SoftMax.cu)::host_softmax" in exc.value.render()


def test_every_function_id_printed_parses_unquoted_and_resolves(con):
    from torchtalk.query.dsl import value_text

    ids = [r[0] for r in con.execute(
        "SELECT DISTINCT fn FROM func WHERE contains(fn, '(') OR contains(fn, 'operator') ORDER BY fn").fetchall()]
    assert any("(anonymous:" in i for i in ids) and any("(static:" in i for i in ids)
    plain = [i for i in ids if not re.search(r"[\s,\"']", i)]
    assert len(plain) > 400
    assert [i for i in plain if value_text(i) != i] == []
    r = Resolver(con)
    for fn in plain[::25]:
        assert fn in r.resolve(fn, "fn").ids, fn


def test_gemm_stays_ambiguous_in_the_dsl_and_lists_all(con):
    with pytest.raises(Ambiguous) as exc:
        q(con, "impact(gemm, depth=4)")
    text = exc.value.render()
    for fn in ("at::native::cpublas::gemm", "at::cuda::blas::gemm", "pytorch_flash::gemm"):
        assert fn in text
    ranked = [m.id for m, _ in Resolver(con).central(exc.value.resolution)]
    assert ranked[0] == "at::native::cpublas::gemm"  # the most callers


# ------------------------------------------------------------------ MCP


@pytest.fixture(scope="module")
def mcp(real_db):
    from test_mcp_server import open_session

    with open_session(["--db", str(real_db)]) as session:
        yield session


def test_mcp_impact_of_ambiguous_gemm_answers_each(mcp):
    # the largest budget, so that no definition's Python APIs are cut (Note [Answer size])
    r = mcp.call("impact", name="gemm", depth=4, budget=20000)
    assert not r.is_error, r.text
    lines = r.text.splitlines()
    assert lines[0].startswith("'gemm' names 3 definitions")
    heads = [ln for ln in lines if re.match(r"\[\d\] ", ln)]
    assert heads[0].startswith("[1] at::native::cpublas::gemm  aten/src/ATen/native/CPUBlas.cpp:139")
    assert len(heads) == 3
    python = {row["name"] for row in r.rows if row["definition"] == "at::native::cpublas::gemm"
              and row["kind"] == "python"}
    # the ten overloads answer as one definition (Note [Overload ids]): the
    # first python rows shown (sorted) are the Tensor methods, mm among them
    assert "torch.Tensor.mm" in python, sorted(python)
    more = "more python: query(dsl='impact(at::native::cpublas::gemm, depth=4, kind=python)')"
    assert any(re.fullmatch(r"… [\d,]+ " + re.escape(more), ln.strip()) for ln in lines), lines


def test_mcp_called_by_gemm_groups_by_definition(mcp, tree):
    r = mcp.call("called_by", name="gemm", budget=20000)  # every row (Note [Answer size])
    assert not r.is_error, r.text
    assert {row["definition"] for row in r.rows} == {
        "at::native::cpublas::gemm", "at::cuda::blas::gemm", "pytorch_flash::gemm"}
    # one row per call site, not one per overload it may reach (Note [Overload ids])
    rows = [x for x in r.rows if x["definition"] == "at::native::cpublas::gemm"]
    assert len(rows) == len({(x["caller"], x["file"], x["line"]) for x in rows}) > 0
    row = next(x for x in rows if x["caller"].endswith("::slow_conv2d_backward_weight_frame"))
    assert row["fn"] == "at::native::cpublas::gemm" and row["via"] == "overload"
    assert "gemm" in (tree / row["file"]).read_text().splitlines()[row["line"] - 1]


def test_mcp_trace_module_linear(mcp):
    r = mcp.call("trace_module", name="Linear")
    assert not r.is_error, r.text
    assert {row["module"] for row in r.rows} == {"torch.nn.modules.linear.Linear"}
    got = {(row["step"], row["name"], row["detail"]) for row in r.rows}
    # Linear.forward → F.linear → aten::linear → addmm / matmul
    assert ("calls", "torch.nn.functional.linear", "torch.nn.modules.linear.Linear.forward") in got
    assert ("op", "linear", "torch.nn.functional.linear") in got
    assert {("op_calls", "addmm", "linear"), ("op_calls", "matmul", "linear")} <= got
    assert any("torch.ao.nn.quantized.modules.linear.Linear" in n for n in r.data["notes"])


@pytest.mark.parametrize(("tool", "name", "column", "value"), [
    ("calls", "at::native::(anonymous:aten/src/ATen/native/SoftMax.cpp)::host_softmax", "fn",
     "at::native::(anonymous:aten/src/ATen/native/SoftMax.cpp)::host_softmax"),
    ("calls", "at::native::(anonymous)::host_softmax", "definition",
     "at::native::(anonymous:aten/src/ATen/native/cuda/SoftMax.cu)::host_softmax"),
    ("called_by", "topk_out_cuda", "fn", None),
    ("impact", "gelu_out_cpu", "fn", "at::native::structured_gelu_out_cpu::impl"),
    ("trace_module", "nn.LSTM", "module", "torch.nn.modules.rnn.LSTM"),
    ("trace", "F.gelu", "op", "gelu"),
    ("trace", "aten.add.Tensor", "op", "add.Tensor"),
    ("trace", "at::nll_loss_nd_symint", "op", "nll_loss_nd"),
])
def test_mcp_takes_every_spelling(mcp, tool, name, column, value):
    r = mcp.call(tool, name=name)
    assert not r.is_error, r.text
    if value is not None:
        assert r.rows and value in {row[column] for row in r.rows}


def test_mcp_unknown_name_is_an_error_with_candidates(mcp):
    r = mcp.call("impact", name="gemmx")
    assert r.is_error
    assert "no C++ function named 'gemmx' (did you mean 'at::cuda::blas::gemm'" in r.text


# ------------------------------------------------------------------ bare Python names


def test_a_bare_name_of_no_op_is_the_documented_python_api_of_that_name(con):
    from torchtalk.query.resolve import Resolver

    res = Resolver(con).resolve("interpolate", "op")  # not torch.ao.nn.quantized.functional.interpolate
    assert res.tier == "python torch.nn.functional.interpolate"
    api_ops = {o for (o,) in con.execute(
        "SELECT DISTINCT op FROM py_api WHERE api = 'torch.nn.functional.interpolate'").fetchall()}
    assert set(res.ids) == api_ops and "upsample_bilinear2d.vec" in api_ops
    assert Resolver(con).resolve("softmax", "op").tier == "name"  # an op's own name comes first


def test_a_bare_name_of_two_documented_apis_names_none(con):
    from torchtalk.errors import QueryError
    from torchtalk.query.resolve import Resolver

    # torch.Tensor.lu and torch.linalg.lu: which one is not said, so neither is taken
    with pytest.raises(QueryError, match="no ATen op named 'lu'") as ei:
        Resolver(con).resolve("lu", "op")
    assert ei.value.hint == "it names the Python APIs torch.Tensor.lu, torch.linalg.lu: give one of them"
