"""Note [Overload ids]: each parameter list of an overloaded C++ name is a node
of its own, spelled alike by both tiers; calls pick one by their argument count
and types (Note [Typed overloads]: test_cpp_typed_overloads.py) or reach each,
labelled a guess (fixtures; the real tree is in test_cpp_real.py and
test_query_real.py)."""

from __future__ import annotations

import pytest

from extractors.cpp.names import normalize_type, sig_text, split_sig
from extractors.cpp.resolve import resolve
from extractors.cpp.scan import scan_file

SRC = b"""namespace at { namespace native {
Tensor where(const Tensor& condition, const Tensor& self, const Tensor& other) { return self; }
std::vector<Tensor> where(const Tensor& condition) { return {}; }
void fill(at::Tensor const &t, int64_t n = 1, std::optional<c10::ScalarType> dtype = {}) {}
void fill(const Tensor& t, double* __restrict__ values, const int64_t count) {}
int size(void) { return 0; }
struct S { int get(int i) const; int get(int i); };
int S::get(int i) const { return i; }
int S::get(int i) { return i; }
void user(const Tensor& c, const Tensor& a, const Tensor& b, double* v) {
  where(c, a, b);
  where(c);
  fill(c);
  fill(c, v, 3); fill(c, g(), 3);
  size();
}
template <typename... Args> void pack(Args&&... args) {}
void pack(int a, int b, int c, int d) {}
void use_pack() { pack(1); pack(1, 2, 3, 4); pack(h(), 2, 3, 4); }
}}
"""

W3 = "at::native::where(const Tensor&, const Tensor&, const Tensor&)"
W1 = "at::native::where(const Tensor&)"
F3 = "at::native::fill(const Tensor&, int64_t, optional<ScalarType>)"
FP = "at::native::fill(const Tensor&, double*, int64_t)"


@pytest.fixture(scope="module")
def rows():
    out, _stats, _ = resolve([scan_file("aten/src/ATen/native/X.cpp", SRC)])
    return out


def test_each_parameter_list_is_its_own_node(rows):
    funcs = {(r[0], r[3]) for r in rows["func"]}
    assert {(W3, 2), (W1, 3), (F3, 4), (FP, 5)} <= funcs
    # a name with one parameter list keeps its plain id; `(void)` is `()`
    assert ("at::native::size", 6) in funcs and ("at::native::user", 10) in funcs
    # a const method and its twin share one id (two definitions)
    assert sorted(r[3] for r in rows["func"] if r[0].startswith("at::native::S::get")) == [8, 9]
    assert {r[0] for r in rows["func"] if r[0].startswith("at::native::S::get")} == {"at::native::S::get"}


def test_overload_facts_name_the_base_and_the_parameters(rows):
    assert sorted(r for r in rows["overload"] if r[1] == "at::native::where") == [
        (W1, "at::native::where", 1), (W3, "at::native::where", 3)]
    assert sorted(r for r in rows["overload_param"] if r[0] == F3) == [
        (F3, 0, "const Tensor&"), (F3, 1, "int64_t"), (F3, 2, "optional<ScalarType>")]


def test_calls_pick_the_overload_by_argument_count(rows):
    calls = {(r[1], r[3], r[4]) for r in rows["calls"] if r[0] == "at::native::user"}
    assert calls == {(W3, 11, "scope"), (W1, 12, "scope"), (F3, 13, "scope"),
                     # three arguments fit both (defaults): the pointer `v` picks one,
                     # an argument of unknown type (`g()`) none
                     (FP, 14, "typed"), (FP, 14, "overload"), (F3, 14, "overload"),
                     ("at::native::size", 15, "scope")}


def test_a_count_that_fits_several_reaches_each_as_a_guess(rows):
    calls = sorted((r[1], r[3], r[4]) for r in rows["calls"] if r[0] == "at::native::use_pack")
    pack4 = "at::native::pack(int, int, int, int)"
    packs = "at::native::pack(Args&&...)"
    # pack(1): the pack only; pack(1, 2, 3, 4): either, and four ints make the
    # non-template the better (Note [Typed overloads]); pack(h(), 2, 3, 4): either
    assert calls == [(packs, 19, "overload"), (packs, 19, "scope"), (pack4, 19, "overload"), (pack4, 19, "typed")]


@pytest.mark.parametrize(("written", "spelled"), [
    ("const at::Tensor &", "const Tensor&"),
    ("at::Tensor const&", "const Tensor&"),
    ("const int64_t", "int64_t"),
    ("char *const", "char*"),
    ("const char *const *", "const char*const*"),
    ("float *__restrict", "float*"),
    ("C10_UNUSED const Tensor&", "const Tensor&"),
    ("int[3]", "int*"),
    ("std::array<bool, 3>", "array<bool,3>"),
    ("const c10::List<std::optional<at::Tensor>> &", "const List<optional<Tensor>>&"),
    ("typename std::vector<T>::iterator", "iterator"),
    ("void (*)(int)", "void(*)(int)"),
    ("Args &&...", "Args&&..."),
    ("unsigned long long", "unsigned long long"),
    ("CUDABLAS_GEMM_ARGTYPES(at::Half)", "CUDABLAS_GEMM_ARGTYPES(Half)"),
])
def test_type_spelling(written, spelled):
    assert normalize_type(written) == spelled


def test_suffix_and_split():
    assert sig_text(["void"]) == "()"
    assert split_sig(W3) == ("at::native::where", "(const Tensor&, const Tensor&, const Tensor&)")
    assert split_sig("at::Tensor::operator()(int)") == ("at::Tensor::operator()", "(int)")
    assert split_sig("at::native::(anonymous:a.cpp)::f") == ("at::native::(anonymous:a.cpp)::f", "")
