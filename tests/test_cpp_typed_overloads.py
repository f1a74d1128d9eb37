"""Note [Typed overloads]: the fast tier tells same-arity overloads apart by the
argument types the source shows (literals, casts, the declared types of the
calling function's parameters and locals); fixtures here, the real tree in
test_cpp_real.py (test_typed_gemm_calls_on_the_real_tree and after)."""

from __future__ import annotations

import pytest

from extractors.cpp.argtypes import classify, compatible, exact, literal_type, pick_typed
from extractors.cpp.resolve import resolve
from extractors.cpp.scan import scan_file

SRC = b"""namespace at { namespace native {
namespace cpublas {
template <typename scalar_t> void gemm(int m, opmath_type<scalar_t> alpha, const scalar_t* a, scalar_t* c) {}
void gemm(int m, float alpha, const float* a, float* c) {}
void gemm(int m, double alpha, const double* a, double* c) {}
void gemm(int m, float alpha, const at::BFloat16* a, float* c) {}
}
void user(const float* A, float* C, const at::BFloat16* B) {
  auto beta = 1;
  cpublas::gemm(3, 1, A, C);
  cpublas::gemm(3, beta, B, C);
  double* d = nullptr;
  { float* d = nullptr; cpublas::gemm(3, 1.0, A, d); }
  cpublas::gemm(3, 1.0, d, d);
}
template <typename scalar_t> void tuser(const scalar_t* a, scalar_t* c) { cpublas::gemm(3, 1, a, c); }
void k(const Tensor& t) {}
void k(int64_t n) {}
void k(const char* s) {}
void kuser(Tensor t, double x, Kind q) {
  k(t);
  k(x);
  k("name");
  k(nullptr);
  k(q);
  k(static_cast<int>(q));
  k(0);
}
void m(ScalarType s) {}
void m(Backend b) {}
void muser(ScalarType dtype) { m(dtype); }
void p(float* a) {}
void p(double* a) {}
void puser(int* i) { p(i); }
void w(float* a, int n) {}
void w(const char* s, long n) {}
void wuser() { TORCH_CHECK(true, w("x", 2)); }
}}
namespace other { void ufree(int) {} void ufree(const char*) {} }
namespace q { void quser() { ufree(3); } }
"""
NS = "at::native::"
G = NS + "cpublas::gemm"
G_FLOAT = G + "(int, float, const float*, float*)"
G_DOUBLE = G + "(int, double, const double*, double*)"
G_BF16 = G + "(int, float, const BFloat16*, float*)"
G_T = G + "(int, opmath_type<scalar_t>, const scalar_t*, scalar_t*)"


@pytest.fixture(scope="module")
def calls():
    rows, _stats, _ = resolve([scan_file("aten/src/ATen/native/T.cpp", SRC)])
    return sorted((r[0].removeprefix(NS), r[1], r[3], r[4]) for r in rows["calls"])


def at(calls, call: str) -> list[tuple[str, str]]:
    """(callee, via) of the calls on the one line of SRC that holds `call`."""
    lines = [i for i, text in enumerate(SRC.decode().splitlines(), 1) if call in text]
    assert len(lines) == 1, call
    return sorted((callee, via) for _caller, callee, ln, via in calls if ln == lines[0])


def test_pointer_element_types_pick_the_gemm_overload(calls):
    # `const float* A, float* C`: the float gemm, over the template (a tie C++ gives the non-template)
    assert at(calls, "gemm(3, 1, A, C)") == [(G_FLOAT, "typed")]
    # `beta` is auto (unknown), the BFloat16 and float pointers still pick one
    assert at(calls, "gemm(3, beta, B, C)") == [(G_BF16, "typed")]
    # the innermost declaration of `d` in scope: `float* d` in the block, `double* d` after it
    assert at(calls, "gemm(3, 1.0, A, d)") == [(G_FLOAT, "typed")]
    assert at(calls, "gemm(3, 1.0, d, d)") == [(G_DOUBLE, "typed")]


def test_template_parameter_types_are_unknown_and_every_candidate_a_guess(calls):
    assert at(calls, "gemm(3, 1, a, c)") == sorted((g, "overload") for g in (G_FLOAT, G_DOUBLE, G_BF16, G_T))


def test_literal_tensor_and_cast_arguments(calls):
    K_T, K_N, K_S = NS + "k(const Tensor&)", NS + "k(int64_t)", NS + "k(const char*)"
    assert at(calls, "k(t)") == [(K_T, "typed")]
    assert at(calls, "k(x)") == [(K_N, "typed")]  # a double converts to int64_t only
    assert at(calls, 'k("name")') == [(K_S, "typed")]
    assert at(calls, "k(nullptr)") == [(K_S, "typed")]
    # an unknown class type rules nothing out
    assert at(calls, "k(q)") == sorted([(K_T, "overload"), (K_N, "overload"), (K_S, "overload")])
    assert at(calls, "k(static_cast<int>(q))") == [(K_N, "typed")]
    # `0` is an int or a null pointer: not known
    assert at(calls, "k(0)") == at(calls, "k(q)")


def test_same_spelled_class_type_is_an_exact_match(calls):
    assert at(calls, "m(dtype)") == [(NS + "m(ScalarType)", "typed")]


def test_no_overload_fits_falls_back_to_every_one(calls):
    # an int* converts to neither float* nor double*: the types we read rule out
    # both, so both stay, each a guess
    assert at(calls, "p(i)") == [(NS + "p(double*)", "overload"), (NS + "p(float*)", "overload")]


def test_inside_a_macro_argument(calls):
    assert at(calls, 'w("x", 2)') == [(NS + "w(const char*, long)", "macro-typed")]


def test_a_lookup_by_name_alone_stays_a_guess(calls):
    # `ufree` found as the one free function of that name ("unique", a guess):
    # the int literal picks the overload, the label stays the lookup's
    assert at(calls, "ufree(3)") == [("other::ufree(int)", "unique")]


@pytest.mark.parametrize(("arg", "param", "ok"), [
    ("float", "int64_t", True),            # arithmetic conversions
    ("const float*", "float*", True),      # const aside
    ("float*", "const void*", True),
    ("float*", "const double*", False),
    ("const BFloat16*", "const Half*", False),
    ("?*", "const double*", True),         # pointee unknown
    ("float*", "bool", True),
    ("float*", "int64_t", False),
    ("int", "float*", False),
    ("const Tensor&", "int64_t", False),
    ("const Tensor&", "optional<Tensor>", True),  # unknown class: compatible
    ("nullptr_t", "double*", True),
    ("nullptr_t", "int", False),
    ("const char*", "const string&", True),
    ("Foo", "int", True),
])
def test_compatibility(arg, param, ok):
    assert compatible(arg, param) is ok


def test_classify_and_exact():
    assert classify("const int64_t&") == ("arith", "long") == classify("long")
    assert classify("const at::BFloat16*") == ("ptr", "")  # not normalized: a qualified pointee is unknown
    assert classify("const BFloat16*") == ("ptr", "BFloat16")
    assert exact("int64_t", "long") and not exact("int", "long")
    assert exact("ScalarType", "ScalarType") and not exact("T", "T", ["T"]) and not exact("?", "?")
    assert not exact("", "int")


@pytest.mark.parametrize(("text", "spelled"), [
    ("1", "int"), ("0", ""), ("1L", "long"), ("2ul", "unsigned long"), ("1.5", "double"),
    ("1.f", "float"), ("-1.5f", "float"), ("0x1f", "int"), ("3000000000", "long"),
])
def test_number_literals(text, spelled):
    assert literal_type("number_literal", text) == spelled


def test_pick_typed_ties_are_no_pick():
    # `Tensor&` and `const Tensor&` both take a Tensor without conversion: no pick
    cands = [("f(Tensor&)", ("Tensor&",), (), ()), ("f(const Tensor&)", ("const Tensor&",), (), ())]
    assert pick_typed(cands, ("Tensor",)) == (("f(Tensor&)", "f(const Tensor&)"), False)
    # a template whose parameter is the argument's type: C++ prefers it to a conversion
    cands = [("g(T)", ("T",), ("T",), ()), ("g(int)", ("int",), (), ())]
    assert pick_typed(cands, ("double",)) == (("g(T)", "g(int)"), False)
    assert pick_typed(cands, ("int",)) == (("g(int)",), True)
