"""The python layer typed (issue 13, deliverable 6), as exact facts with file:line on the
real PyTorch 2.6.0 tree: calls on non-Tensors are no ops, a submodule call is its
forward, functions chosen through variables are callees, `_VF.lstm` reaches the lstm ops
(Note [Receiver types] in extractors/python/localtypes.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from _sinks import ListSink

from extractors.base import ExtractContext

pytestmark = pytest.mark.real_tree


@pytest.fixture(scope="module")
def real(tree: Path, tmp_path_factory) -> ListSink:
    from extractors import python as layer

    sink = ListSink()
    # the summary cache tests/test_python_layer.py uses
    layer.extract(ExtractContext(tree, tmp_path_factory.getbasetemp() / "pylayers" / "python", 2), sink)
    return sink


MODULE = "torch/nn/modules/module.py"


def test_set_add_is_no_op(real: ListSink) -> None:
    """`memo.add(self)` on `memo: Optional[Set[Module]]` / `memo = set()` is not aten::add."""
    named_modules = "torch.nn.modules.module.Module.named_modules"
    assert not [r for r in real.rows["py_calls"] if r[2:] == (MODULE, 2814)]
    assert not [r for r in real.rows["py_api"] if r[3:] == (MODULE, 2814)]
    assert not [r for r in real.rows["py_api"] if r[0] == named_modules]
    # the other `memo.add(...)` of module.py, and `self._backward_hooks.values()` on the
    # class-level annotation `_backward_hooks: Dict[int, Callable]`
    assert not [r for r in real.rows["py_calls"] if r[1] in ("torch.Tensor.add", "torch.Tensor.values")
                and r[2] == MODULE and r[3] in (582, 1492, 2604, 2745)]


def test_untyped_receiver_stays_a_guess(real: ListSink) -> None:
    """`def softsign(input): ... input.abs()`: no type, so a labelled guess."""
    f = "torch/nn/functional.py"
    assert ("torch.nn.functional.softsign", "torch.Tensor.abs", f, 2039) in real.rows["py_calls"]
    assert ("torch.nn.functional.softsign", "abs", "method_guess", f, 2039) in real.rows["py_api"]
    assert ("torch.nn.modules.activation.Softsign.forward", "abs", "method_guess",
            "torch/nn/modules/activation.py", 1543) in real.rows["py_api"]


def test_typed_tensor_receiver_is_no_guess(real: ListSink) -> None:
    """`self.weight = Parameter(...)`: `self.weight.detach()` is the Tensor method;
    `scalar = torch.zeros(...)` (an op returning one Tensor) types `scalar`, so even a
    method too generic to guess (`expand`) is an edge."""
    calls = real.rows["py_calls"]
    assert ("torch.ao.nn.qat.modules.conv._ConvNd.to_float", "torch.Tensor.detach",
            "torch/ao/nn/qat/modules/conv.py", 108) in calls
    f = "torch/functional.py"
    assert ("torch.functional.broadcast_shapes", "torch.Tensor.expand", f, 150) in calls
    assert ("torch.functional.broadcast_shapes", "expand", "wrapper", f, 150) in real.rows["py_api"]
    assert not [r for r in real.rows["py_api"] if r[0] == "torch.nn.modules.module.Module.cuda"
                and r[2] == "method_guess"]


def test_transformer_layer_reaches_linear(real: ListSink) -> None:
    """`self.linear1 = Linear(...)` in __init__; `self.linear1(x)` in _ff_block is
    Linear.forward, which calls F.linear = torch._C._nn.linear → op linear."""
    t = "torch/nn/modules/transformer.py"
    layer = "torch.nn.modules.transformer.TransformerEncoderLayer"
    calls = real.rows["py_calls"]
    assert (f"{layer}.forward", f"{layer}._ff_block", t, 916) in calls
    assert (f"{layer}._ff_block", "torch.nn.modules.linear.Linear.forward", t, 947) in calls
    assert (f"{layer}._ff_block", "torch.nn.modules.dropout.Dropout.forward", t, 947) in calls
    assert (f"{layer}._sa_block", "torch.nn.modules.activation.MultiheadAttention.forward", t, 934) in calls
    assert (f"{layer}.forward", "torch.nn.modules.normalization.LayerNorm.forward", t, 914) in calls
    assert ("torch.nn.modules.linear.Linear.forward", "torch.nn.functional.linear",
            "torch/nn/modules/linear.py", 125) in calls
    assert ("torch.nn.functional.linear", "torch._C._nn.linear", "alias", "torch/nn/functional.py", 2309) in real.rows["binds"]
    api = real.rows["py_api"]
    assert (f"{layer}.forward", "linear", "wrapper", t, 916) in api
    assert (f"{layer}.forward", "layer_norm", "wrapper", t, 914) in api
    # `self.activation = activation` (a parameter that may be a str or any callable): no callee
    assert not [r for r in calls if r[0] == f"{layer}._ff_block" and r[1].endswith("__call__")]


def test_functions_chosen_through_variables(real: ListSink) -> None:
    """adam.py: `func = _fused_adam / _multi_tensor_adam / _single_tensor_adam` in branches,
    then `func(...)`: every candidate is a callee at the call."""
    f = "torch/optim/adam.py"
    calls = real.rows["py_calls"]
    for impl in ("_fused_adam", "_multi_tensor_adam", "_single_tensor_adam"):
        assert ("torch.optim.adam.adam", f"torch.optim.adam.{impl}", f, 876) in calls
    ops = {r[1] for r in real.rows["py_api"] if r[0] == "torch.optim.adam.Adam.step"}
    assert {"_fused_adam_", "_foreach_lerp_.Scalar", "addcdiv_"} <= ops
    # `index_copy = Tensor.index_copy_ if inplace else torch.index_copy` shadows
    # torch._refs.index_copy; `def memory(snapshot, format_flamegraph=format_flamegraph)`
    refs = "torch/_refs/__init__.py"
    assert ("torch._refs._index_fill", "torch.Tensor.index_copy_", refs, 4083) in calls
    assert ("torch._refs._index_fill", "torch.index_copy", refs, 4083) in calls
    assert not [r for r in calls if r[0] == "torch._refs._index_fill" and r[1] == "torch._refs.index_copy"]
    assert ("torch.cuda._memory_viz.memory", "torch.cuda._memory_viz.format_flamegraph",
            "torch/cuda/_memory_viz.py", 135) in calls


def test_vf_lstm_reaches_lstm_ops(real: ListSink) -> None:
    """`from torch import _VF`; `_VF.lstm(...)` is torch._C._VariableFunctions.lstm, the
    function variant of lstm.input and lstm.data; one py_api row each."""
    f = "torch/nn/modules/rnn.py"
    lstm = "torch.nn.modules.rnn.LSTM.forward"
    assert (lstm, "torch._C._VariableFunctions.lstm", f, 1124) in real.rows["py_calls"]
    assert (lstm, "torch._C._VariableFunctions.lstm", "wrapper", f, 1124) in real.rows["binds"]
    rows = [r for r in real.rows["py_api"] if r[0] == lstm and r[1].startswith("lstm")]
    assert sorted(rows) == [(lstm, "lstm.data", "wrapper", f, 1124), (lstm, "lstm.input", "wrapper", f, 1124)]


def test_no_duplicate_rows(real: ListSink) -> None:
    for rel in ("py_api", "py_calls"):
        assert len(real.rows[rel]) == len(set(real.rows[rel])), rel
    assert not real.warnings
