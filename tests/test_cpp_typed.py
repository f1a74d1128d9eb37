"""Op calls by type, aliases and Tensor operators in the C++ fast tier, on
small hand-written snippets (Note [Op call resolution], Note [Tensor
operators], Note [Aliases], Note [Who can call ops])."""

from __future__ import annotations

from extractors.cpp.aten import AtenNames
from extractors.cpp.resolve import resolve
from extractors.cpp.scan import scan_file

# a tiny ATen: TensorBase (a tree method fill_, size brought into Tensor by `using`),
# Tensor, IntArrayRef as an alias
TENSOR_H = """#include <c10/util/ArrayRef.h>
namespace c10 { template <class T> class ArrayRef { public: const T* data() const { return 0; } };
using IntArrayRef = ArrayRef<int64_t>; class SymInt { public: SymInt max(int) const; }; }
namespace at { using c10::IntArrayRef;
class TensorBase { public: IntArrayRef sizes() const { return {}; }
  const TensorBase& fill_(int v) const { return *this; } int64_t size(int64_t d) const { return 0; } };
class Tensor : public TensorBase { public: using TensorBase::size; };
}
"""
OPS = ("mm", "mv", "add", "add_", "mul", "sub", "sub_", "empty_like", "fill_", "neg", "select", "eq", "data",
       "size", "empty", "sum", "max", "copy_")
NAMES = AtenNames(frozenset(OPS), frozenset(OPS) - {"empty", "empty_like"},
                  frozenset(OPS) - {"data", "size", "max"}, frozenset(OPS) - {"empty", "empty_like"})


def rows_of(files: dict[str, str]) -> dict[str, list[tuple]]:
    facts = [scan_file(rel, text.encode()) for rel, text in sorted(files.items())]
    rows, _stats, _ = resolve(facts, aten=NAMES)
    return rows


def ops_at(rows, line: int, file: str = "aten/src/ATen/native/k.cpp") -> set[tuple[str, str]]:
    return {(r[1], r[4]) for r in rows.get("calls_op", []) if r[2] == file and r[3] == line}


def native(body: str) -> dict[str, str]:
    return {"aten/src/ATen/core/TensorBase.h": TENSOR_H,
            "aten/src/ATen/native/k.cpp": '#include <ATen/core/TensorBase.h>\nnamespace at::native {\n' + body + "\n}\n"}


def test_receivers_of_known_type_are_typed_or_no_op():
    rows = rows_of(native(
        "void f(const Tensor& t, c10::SymInt s, std::vector<int> v, T w) {\n"  # 3
        "  t.mm(t);\n"              # 4 typed
        "  s.max(1);\n"             # 5 a tree class: no op
        "  v.size();\n"             # 6 std: no op
        "  w.mv(t);\n"              # 7 a template parameter: a guess
        "  t.sizes().data();\n"     # 8 IntArrayRef (an alias): no op
        "  t.size(0);\n"            # 9 TensorBase::size, brought in by `using`: the tree's, no op
        "  t.fill_(1);\n"           # 10 the generated Tensor::fill_ hides TensorBase::fill_
        "  auto e = at::empty({1});\n  e.sum();\n"  # 11, 12 the type of a generated op's call
        "}"))
    assert ops_at(rows, 4) == {("mm", "typed")}
    assert ops_at(rows, 5) == ops_at(rows, 6) == ops_at(rows, 8) == ops_at(rows, 9) == set()
    assert ops_at(rows, 7) == {("mv", "guess")}
    assert ops_at(rows, 10) == {("fill_", "typed")}
    assert ops_at(rows, 11) == {("empty", "qualified")}
    assert ops_at(rows, 12) == {("sum", "typed")}
    calls = {(r[1], r[3]) for r in rows["calls"]}
    assert ("c10::ArrayRef::data", 8) in calls and ("at::TensorBase::size", 9) in calls
    assert not [c for c in calls if c[1] == 10]


def test_tensor_operators_follow_the_operand_types():
    rows = rows_of(native(
        "void f(const Tensor& a, const Tensor& b, int n, std::vector<Tensor> v) {\n"  # 3
        "  a + b;\n"        # 4
        "  2 - a;\n"        # 5 Scalar - Tensor
        "  n + 1;\n"        # 6 ints: nothing
        "  -a;\n"           # 7
        "  v[0] += 1;\n"    # 8 an element of a vector<Tensor>
        "  a[n] = 1;\n"     # 9 select, then fill_ on the temporary
        "  (a * b).sum();\n"  # 10
        "  a == b;\n"       # 11
        "}"))
    assert ops_at(rows, 4) == {("add", "typed")}
    assert ops_at(rows, 5) == {("empty_like", "typed"), ("fill_", "typed"), ("sub_", "typed")}
    assert ops_at(rows, 6) == set()
    assert ops_at(rows, 7) == {("neg", "typed")}
    assert ops_at(rows, 8) == {("add_", "typed")}
    assert ops_at(rows, 9) == {("select", "typed"), ("fill_", "typed")}
    assert ops_at(rows, 10) == {("mul", "typed"), ("sum", "typed")}
    assert ops_at(rows, 11) == {("eq", "typed")}


def test_files_that_cannot_see_aten_call_no_op():
    files = native("void f(const Tensor& t) { t.mm(t); }")
    files["c10/core/impl.cpp"] = ("#include <c10/core/SymInt.h>\n#include <vector>\n"
                                  "namespace c10 { void g(Foo x) { x.mm(x); x.data(); } }\n")
    rows = rows_of(files)
    assert {r[2] for r in rows["calls_op"]} == {"aten/src/ATen/native/k.cpp"}


def test_using_declarations_and_namespace_aliases_resolve_calls():
    rows = rows_of({
        "aten/src/ATen/native/Util.cpp": "namespace at::native { bool canUse32(int t) { return true; } }\n",
        "aten/src/ATen/cuda/detail/IndexUtils.cuh": "namespace at::cuda::detail { using at::native::canUse32; }\n",
        "aten/src/ATen/native/cuda/K.cu": (
            "namespace at::native {\n"
            "void k(int t) {\n"
            "  cuda::detail::canUse32(t);\n"     # 3: through the header's using-declaration
            "  at::cuda::detail::canUse32(t);\n"  # 4
            "}\n}\n"),
        "torch/csrc/api/src/F.cpp": "namespace torch::nn::functional { void gelu() {} }\n",
        "torch/csrc/api/src/G.cpp": (
            "namespace F = torch::nn::functional;\n"
            "void use() { F::gelu(); }\n"),        # 2: through the namespace alias
        "c10/core/S.h": "namespace c10 { struct Symbol { int toQual() const { return 0; } }; }\n"
                        "namespace at { using namespace c10; }\n",
        "aten/src/ATen/core/D.cpp": "namespace at { void d(at::Symbol s) { s.toQual(); } }\n",
    })
    calls = {(r[0], r[1], r[2], r[3]) for r in rows["calls"]}
    assert ("at::native::k", "at::native::canUse32", "aten/src/ATen/native/cuda/K.cu", 3) in calls
    assert ("at::native::k", "at::native::canUse32", "aten/src/ATen/native/cuda/K.cu", 4) in calls
    assert ("use", "torch::nn::functional::gelu", "torch/csrc/api/src/G.cpp", 2) in calls
    # `at::Symbol` is c10::Symbol through `namespace at { using namespace c10; }`
    assert ("at::d", "c10::Symbol::toQual", "aten/src/ATen/core/D.cpp", 1) in calls


def test_a_source_files_aliases_hold_in_that_file_only():
    rows = rows_of({
        "a/defs.cpp": "namespace x { void f() {} }\nnamespace y { void f() {} }\n",
        "a/one.cpp": "using x::f;\nvoid one() { f(); }\n",
        "a/two.cpp": "void two() { f(); }\n",
    })
    assert [(r[0], r[1]) for r in rows["calls"]] == [("one", "x::f")]
    assert [(r[0], r[1]) for r in rows["call_ambiguous"]] == [("two", "f")]



def test_a_symint_method_spelling_is_its_op():
    """`self.mm_symint(...)` (the SymInt spelling of a Tensor method) is op mm;
    a method whose name only ends like it is no op."""
    rows = rows_of(native(
        "void f(const Tensor& t) {\n"    # 3
        "  t.mm_symint(t);\n"            # 4
        "  t.nosuch_symint(t);\n"        # 5
        "}"))
    assert ops_at(rows, 4) == {("mm", "typed")}
    assert ops_at(rows, 5) == set()


def test_the_type_of_an_op_call_by_its_argument_count():
    """max() returns one Tensor, max.dim two: `t.max() < 1` is lt on a Tensor,
    `t.max(0) < 1` nothing known; at::max(t) alike (Note [Op call resolution])."""
    names = AtenNames(NAMES.ops | {"lt"}, NAMES.methods | {"lt"}, NAMES.tensor_returning | {"lt"}, NAMES.generated,
                      frozenset({"max"}), frozenset({("max", 1, 1, True), ("max", 2, 3, False)}))
    src = native(
        "void f(const Tensor& t) {\n"          # 3
        "  auto a = t.max() < 1;\n"             # 4 typed
        "  auto b = t.max(0) < 1;\n"            # 5 a tuple: no op
        "  auto c = at::max(t);\n  c.sum();\n"  # 6, 7 typed
        "  auto d = at::max(t, 0);\n  d.sum();\n"  # 8, 9 unknown: a guess
        "}")
    facts = [scan_file(rel, text.encode()) for rel, text in sorted(src.items())]
    rows = resolve(facts, aten=names)[0]
    assert ops_at(rows, 4) == {("max", "typed"), ("lt", "typed")}
    assert ops_at(rows, 5) == {("max", "typed")}
    assert ops_at(rows, 7) == {("sum", "typed")}
    assert ops_at(rows, 9) == {("sum", "guess")}
