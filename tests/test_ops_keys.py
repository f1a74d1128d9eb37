"""Every dispatch key from c10/core/DispatchKey.h (extractors/ops_keys.py) and
backend fallbacks (`m.fallback`, lib_fallback rows), issue 17."""

from __future__ import annotations

import pytest

from extractors.cpp.resolve import resolve
from extractors.cpp.scan import scan_file
from extractors.ops_keys import parse_keys
from torchtalk.errors import ExtractError

MINI = """\
#define C10_FORALL_BACKEND_COMPONENTS(_, extra) \\
  _(CPU, extra)                                 \\
  _(Meta, extra)
#define C10_FORALL_FUNCTIONALITY_KEYS(_) \\
  _(Dense, )                             \\
  _(AutogradFunctionality, Autograd)
enum class DispatchKey : uint16_t {
  Undefined = 0,
  CatchAll = Undefined,
  Dense,
  Python, // a comment, with a comma
  AutogradFunctionality,
  EndOfFunctionalityKeys,
#define DEFINE_PER_BACKEND_KEYS(fullname, prefix) \\
  StartOf##fullname##Backends,
  C10_FORALL_FUNCTIONALITY_KEYS(DEFINE_PER_BACKEND_KEYS)
#undef DEFINE_PER_BACKEND_KEYS
      EndOfRuntimeBackendKeys = EndOfAutogradFunctionalityBackends,
  Autograd,
  CompositeImplicitAutograd,
  StartOfAliasKeys = Autograd,
  EndOfAliasKeys = CompositeImplicitAutograd,
  CPUTensorId = CPU,
};
"""


def test_mini_header_expands_the_x_macros():
    f = "c10/core/DispatchKey.h"
    assert parse_keys(MINI, f) == [
        ("Dense", "functionality", "", "", f, 10),
        ("Python", "functionality", "", "", f, 11),
        ("AutogradFunctionality", "functionality", "", "", f, 12),
        ("CPU", "backend", "Dense", "CPU", f, 2),
        ("Meta", "backend", "Dense", "Meta", f, 3),
        ("AutogradCPU", "per_backend", "AutogradFunctionality", "CPU", f, 2),
        ("AutogradMeta", "per_backend", "AutogradFunctionality", "Meta", f, 3),
        ("Autograd", "alias", "", "", f, 19),
        ("CompositeImplicitAutograd", "alias", "", "", f, 20),
    ]


def test_unreadable_enumerator_is_an_error_at_its_line():
    bad = MINI.replace("  Python, // a comment, with a comma\n", "  Python + 1,\n")
    with pytest.raises(ExtractError) as e:
        parse_keys(bad, "c10/core/DispatchKey.h")
    assert str(e.value) == "c10/core/DispatchKey.h:11: extract error: cannot read DispatchKey enumerator '+ 1'"


def test_fallback_is_a_lib_fallback_row_not_a_lib_impl():
    f = "aten/src/ATen/mps/Fallback.mm"
    facts = [scan_file(f, (
        b"namespace at {\nstatic void fb(const c10::OperatorHandle& op, torch::jit::Stack* s) {}\n"
        b"TORCH_LIBRARY_IMPL(_, MPS, m) {\n"
        b"  m.fallback(torch::CppFunction::makeFromBoxedFunction<&fb>());\n"
        b"}\n"
        b"TORCH_LIBRARY_IMPL(_, AutocastMPS, m) {\n  m.fallback(torch::CppFunction::makeFallthrough());\n}\n"
        b"TORCH_LIBRARY_IMPL(aten, MPS, m) {\n  m.impl(\"relu\", TORCH_FN(fb));\n}\n}\n"
    ))]
    rows, _stats, _per_file = resolve(facts)
    assert sorted(rows["lib_fallback"], key=lambda r: r[4]) == [
        ("_", "MPS", f"at::(static:{f})::fb", f, 4),
        ("_", "AutocastMPS", "<makeFallthrough>", f, 7),
    ]
    assert rows["lib_impl"] == [("aten", "relu", "MPS", f"at::(static:{f})::fb", f, 10)]


# ------------------------------------------------------------------ the real tree

@pytest.fixture(scope="module")
def con(real_con):
    return real_con


@pytest.mark.real_tree
def test_real_keys_of_c10(con):
    """142 keys: 15 backends x 6 customizable functionalities (90), 46 other
    functionality keys, 6 alias keys; each at its line of DispatchKey.h."""
    rows = con.execute("SELECT * FROM dispatch_key_def").fetchall()
    kinds = {}
    for _k, kind, *_ in rows:
        kinds[kind] = kinds.get(kind, 0) + 1
    assert kinds == {"backend": 15, "per_backend": 75, "functionality": 46, "alias": 6}
    by_key = {r[0]: r[1:] for r in rows}
    f = "c10/core/DispatchKey.h"
    assert by_key["PrivateUse1"] == ("backend", "Dense", "PrivateUse1", f, 48)
    assert by_key["AutogradPrivateUse1"] == ("per_backend", "AutogradFunctionality", "PrivateUse1", f, 48)
    assert by_key["SparseCsrMeta"] == ("per_backend", "SparseCsr", "Meta", f, 51)
    assert by_key["MkldnnCPU"] == ("functionality", "", "", f, 213)
    assert by_key["CompositeExplicitAutograd"] == ("alias", "", "", f, 476)
    assert "CPUTensorId" not in by_key and "EndOfFunctionalityKeys" not in by_key
    assert "Undefined" not in by_key


@pytest.mark.real_tree
def test_real_fallbacks(con):
    rows = con.execute("SELECT * FROM lib_fallback WHERE key IN ('MPS', 'Meta', 'AutogradCUDA') "
                       "ORDER BY file, line").fetchall()
    assert rows == [
        ("_", "Meta", "at::impl::(static:aten/src/ATen/core/MetaFallbackKernel.cpp)::metaFallback",
         "aten/src/ATen/core/MetaFallbackKernel.cpp", 24),
        ("_", "AutogradCUDA", "AUTOGRAD_FALLBACK", "aten/src/ATen/core/VariableFallbackKernel.cpp", 76),
        ("_", "MPS", "at::(static:aten/src/ATen/mps/MPSFallback.mm)::mps_error_fallback",
         "aten/src/ATen/mps/MPSFallback.mm", 81),
        ("_", "MPS", "at::(static:aten/src/ATen/mps/MPSFallback.mm)::mps_fallback",
         "aten/src/ATen/mps/MPSFallback.mm", 83),
    ]
    # 37 in TORCH_LIBRARY_IMPL blocks, and Lazy's on a MAKE_TORCH_LIBRARY_IMPL variable
    assert con.execute("SELECT count(*) FROM lib_fallback WHERE file <> "
                       "'torch/csrc/lazy/ts_backend/ts_eager_fallback.cpp'").fetchone()[0] == 37
    assert con.execute("SELECT count(*) FROM lib_fallback").fetchone()[0] == 38
    # every m.impl site once (a registered function with several overloads of
    # its name has a row per candidate overload: Note [Overload edges])
    assert con.execute("SELECT count(DISTINCT (ns, op, key, file, line)) FROM lib_impl").fetchone()[0] == 1260
