"""The fast tier's mechanisms for what it used to miss (issue 13), on small
hand-written snippets: macros by position and nested, stubs passed as
arguments, functor objects passed to templates, kernels held in locals."""

from __future__ import annotations

from extractors.cpp.resolve import resolve
from extractors.cpp.scan import scan_file


def rows_of(rel: str, src: str) -> dict[str, list[tuple]]:
    rows, _stats, _ = resolve([scan_file(rel, src.encode())])
    return rows


def test_nested_macros_expand_with_the_definition_in_force():
    from extractors.cpp.macros import expand_local_macros

    src = (b"#define K(x) launch_##x(x)\n"
           b"#define MB(x) if (c) { K(x); }\n"
           b"#define T(x) MB(x)\n"
           b"T(a);\n"
           b"#undef K\n"
           b"#define K(x) other_##x(x)\n"
           b"T(b);\n"
           b"#undef T\n"
           b"T(c);\n")
    out = expand_local_macros(src).split(b"\n")
    assert out[3].strip() == b"if (c) { launch_a(a); };"
    assert out[6].strip() == b"if (c) { other_b(b); };"
    assert out[8] == b"T(c);"  # after its #undef: not expanded
    # a macro is not expanded inside its own expansion
    assert expand_local_macros(b"#define F(x) F(x, 1)\nF(y);\n").split(b"\n")[1] == b"F(y, 1);"


def test_stub_arguments_functors_and_kernel_locals():
    rows = rows_of("a.cu", """namespace at::native {
struct Small { template <int A> void sort(int x) { k<<<1, 1>>>(x); } };
struct Fun { int operator()(int x) const { return x; } };
__global__ void k(int x) {}
__global__ void k2(int x) {}
template <typename Sorter> void sortCommon(Sorter sorter, int k) { sorter.template sort<1>(k); }
template <typename F> void gpu_kernel(int it, const F& f) {}
void impl(int a, Stub& stub) { stub(a); }
DECLARE_DISPATCH(fn_t, cumsum_stub);
void top(int x, bool c, Fun fun) {
  sortCommon(Small{}, x);
  gpu_kernel(x, Fun());
  impl(x, cumsum_stub);
  auto kernel = c ? &k<int> : &k2;
  kernel<<<1, 1>>>(x);
  auto lam = [&](int y) {};
  lam(3);
  fun(2);
}
void param(void (*kernel)(int)) { kernel<<<1, 1>>>(0); }
}
""")
    top = "at::native::top"
    assert sorted((r[1], r[3], r[4]) for r in rows["calls"] if r[0] == top) == [
        ("at::native::Fun::operator()", 12, "functor"),   # passed to a template that forwards it
        ("at::native::Fun::operator()", 18, "type"),      # a local of class type, called
        ("at::native::Small::sort", 11, "functor"),       # what sortCommon calls on its parameter
        ("at::native::gpu_kernel", 12, "scope"),
        ("at::native::impl", 13, "scope"),
        ("at::native::k", 15, "scope"),                   # `kernel` holds k or k2
        ("at::native::k2", 15, "scope"),
        ("at::native::sortCommon", 11, "scope"),
    ]  # `lam(3)` calls no function named lam
    assert rows["stub_call"] == [(top, "at::native::cumsum_stub", "a.cu", 13)]
    assert sorted(r[:2] for r in rows["launches"]) == [
        ("at::native::Small::sort", "at::native::k"), (top, "at::native::k"), (top, "at::native::k2")]


def test_internal_linkage_functions_belong_to_their_file():
    """Note [Internal linkage]: another source file's anonymous-namespace or
    `static` function is never a callee; a header's is everyone's. Each is its
    own node, named with its file (Note [Internal linkage ids])."""
    facts = [scan_file(rel, src.encode()) for rel, src in sorted({
        "a/one.cpp": "namespace at { namespace { void helper() {} }\nvoid one() { helper(); } }\n",
        "a/two.cpp": "namespace at { static void helper() {}\nvoid two() { helper(); } }\n",
        "a/three.cpp": "namespace at { void three() { helper(); shared(); } }\n",
        "a/h.h": "namespace at { namespace { void shared() {} } }\n",
        "a/four.cpp": "namespace { struct Box { int get() { return 1; } }; }\n"
                      "namespace at { void four(Box b) { b.get(); } }\n",
        "a/five.cpp": "namespace at { void five(Box b) { b.get(); } }\n",
    }.items())]
    rows, _stats, _ = resolve(facts)
    assert sorted(r[:4] for r in rows["calls"]) == [
        ("at::four", "(anonymous:a/four.cpp)::Box::get", "a/four.cpp", 2),
        ("at::one", "at::(anonymous:a/one.cpp)::helper", "a/one.cpp", 2),
        ("at::three", "at::(anonymous:a/h.h)::shared", "a/three.cpp", 1),
        ("at::two", "at::(static:a/two.cpp)::helper", "a/two.cpp", 2),
    ]
