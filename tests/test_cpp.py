"""The C++/CUDA fast tier (extractors/cpp) on small hand-written snippets.

Each test scans a snippet as a file of a tiny tree, resolves it, and asserts
the exact rows (file:line included).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _sinks import ListSink

from extractors import cpp
from extractors.base import ExtractContext
from extractors.cpp.preprocess import clean
from extractors.cpp.resolve import resolve
from extractors.cpp.scan import scan_file


def rows_of(files: dict[str, str]) -> dict[str, list[tuple]]:
    facts = [scan_file(rel, text.encode()) for rel, text in sorted(files.items())]
    rows, _stats, _per_file = resolve(facts)
    return rows




def test_blanking_keeps_offsets_and_lines():
    src = b"C10_LAUNCH_BOUNDS_1(num_threads())\n__global__ void k(int* x) {}\nvoid h() { k<<<1,\n 2>>>(p); }\n"
    out = clean(src)
    assert len(out.text) == len(src)
    assert out.text.count(b"\n") == src.count(b"\n")
    assert b"__global__" not in out.text and b"<<<" not in out.text
    assert out.globals_ == (src.index(b"__global__"),)
    assert out.launches == (src.index(b"<<<"),)


def test_qualified_names_namespaces_classes_out_of_line():
    rows = rows_of({
        "a/x.cpp": (
            "namespace at { namespace native {\n"
            "namespace {\n"
            "void helper() {}\n"
            "}\n"
            "struct Foo { int bar() { return 1; } };\n"
            "int Foo::baz() { return bar(); }\n"
            "} }\n"
            "namespace at::native::cpublas { void gemm(int m) { helper(); } }\n"
            "void at::native::top() {}\n"
        ),
    })
    assert sorted(rows["func"]) == [
        ("at::native::(anonymous:a/x.cpp)::helper", "helper", "a/x.cpp", 3, "cpp"),
        ("at::native::Foo::bar", "bar", "a/x.cpp", 5, "cpp"),
        ("at::native::Foo::baz", "baz", "a/x.cpp", 6, "cpp"),
        ("at::native::cpublas::gemm", "gemm", "a/x.cpp", 8, "cpp"),
        ("at::native::top", "top", "a/x.cpp", 9, "cpp"),
    ]
    assert rows["calls"] == [
        ("at::native::Foo::baz", "at::native::Foo::bar", "a/x.cpp", 6, "scope"),
        ("at::native::cpublas::gemm", "at::native::(anonymous:a/x.cpp)::helper", "a/x.cpp", 8, "scope"),
    ]


def test_calls_in_dispatch_macro_lambdas_belong_to_the_enclosing_function():
    rows = rows_of({
        "a/k.cpp": (
            "namespace at::native {\n"
            "void inner(int) {}\n"
            "void outer(const Tensor& self) {\n"
            "  AT_DISPATCH_FLOATING_TYPES(self.scalar_type(), \"outer\", [&] {\n"
            "    inner(1);\n"
            "  });\n"
            "  TORCH_CHECK(true, \"x\");\n"
            "}\n"
            "}\n"
        ),
    })
    assert rows["calls"] == [("at::native::outer", "at::native::inner", "a/k.cpp", 5, "macro-scope")]


def test_ambiguous_name_gives_call_ambiguous_not_a_guess():
    rows = rows_of({
        "a/one.cpp": "namespace a { void dup() {} }\n",
        "a/two.cpp": "namespace b { void dup() {} }\n",
        "a/use.cpp": "namespace c { void user() {\n  dup();\n  a::dup();\n  std::sort(x, y);\n} }\n",
    })
    assert rows["call_ambiguous"] == [("c::user", "dup", 2, "a/use.cpp", 2)]
    assert rows["calls"] == [("c::user", "a::dup", "a/use.cpp", 3, "qualified")]


def test_unique_short_name_and_qualified_suffix():
    rows = rows_of({
        "a/def.cpp": "namespace at { namespace native { namespace cpublas { void gemm() {} } } }\n"
                     "namespace x { void only_one() {} }\n",
        "a/use.cpp": "namespace at { namespace native {\nvoid mm() {\n  cpublas::gemm();\n  only_one();\n} } }\n",
    })
    assert rows["calls"] == [
        ("at::native::mm", "at::native::cpublas::gemm", "a/use.cpp", 3, "qualified"),
        ("at::native::mm", "x::only_one", "a/use.cpp", 4, "unique"),
    ]


def test_member_calls_resolve_through_declared_types_and_bases():
    rows = rows_of({
        "a/t.h": "namespace at {\nclass TensorBase { public: int dim() const { return 0; } };\n"
                 "class Tensor : public TensorBase {};\n"
                 "struct Other { int dim() const { return 1; } };\n}\n",
        "a/u.cpp": "namespace at { void f(const Tensor& self, std::vector<int> v, Other* o) {\n"
                   "  self.dim();\n  v.size();\n  o->dim();\n} }\n",
    })
    assert rows["calls"] == [
        ("at::f", "at::Other::dim", "a/u.cpp", 4, "type"),
        ("at::f", "at::TensorBase::dim", "a/u.cpp", 2, "type"),
    ]
    assert rows.get("call_ambiguous", []) == []


def test_structured_kernel_macros():
    rows = rows_of({
        "aten/src/ATen/native/X.cpp": (
            "namespace at { namespace meta {\n"
            "TORCH_META_FUNC2(add, Tensor)(const Tensor& self) { build(self); }\n"
            "TORCH_PRECOMPUTE_META_FUNC(avg_pool2d)(const Tensor& input) { return x; }\n"
            "} namespace native {\n"
            "void add_kernel_impl() {}\n"
            "TORCH_IMPL_FUNC(add_out) (\n  const Tensor& self, const Tensor& result) {\n"
            "  add_kernel_impl();\n}\n"
            "} }\n"
        ),
    })
    assert sorted(rows["impl_func"]) == [
        ("add.Tensor", "meta", "at::meta::structured_add_Tensor::meta", "aten/src/ATen/native/X.cpp", 2),
        ("add_out", "impl", "at::native::structured_add_out::impl", "aten/src/ATen/native/X.cpp", 6),
        ("avg_pool2d", "precompute_meta", "at::meta::structured_avg_pool2d::meta", "aten/src/ATen/native/X.cpp", 3),
    ]
    assert ("at::native::structured_add_out::impl", "impl", "aten/src/ATen/native/X.cpp", 6, "cpp") in rows["func"]
    assert rows["calls"] == [
        ("at::native::structured_add_out::impl", "at::native::add_kernel_impl", "aten/src/ATen/native/X.cpp", 8, "scope"),
    ]


STUB_H = (
    "namespace at::native {\n"
    "using fn_t = void(*)(TensorIteratorBase&);\n"
    "DECLARE_DISPATCH(fn_t, abs_stub)\n"
    "}\n"
)


def test_dispatch_stubs_keys_and_calls():
    rows = rows_of({
        "aten/src/ATen/native/Abs.h": STUB_H,
        "aten/src/ATen/native/Abs.cpp": (
            "namespace at::native {\nDEFINE_DISPATCH(abs_stub);\n"
            "void abs_out(TensorIterator& iter) {\n  abs_stub(iter.device_type(), iter);\n}\n}\n"
        ),
        "aten/src/ATen/native/cpu/AbsKernel.cpp": (
            "namespace at::native {\nnamespace {\nvoid abs_kernel(TensorIteratorBase& iter) {}\n}\n"
            "// REGISTER_DISPATCH(abs_stub, &not_this_one)\n"
            "REGISTER_DISPATCH(abs_stub, &abs_kernel)\nREGISTER_NO_CPU_DISPATCH(other_stub);\n}\n"
        ),
        "aten/src/ATen/native/cuda/AbsKernel.cu": (
            "namespace at::native {\nvoid abs_kernel_cuda(TensorIteratorBase& iter) {}\n"
            "REGISTER_DISPATCH(abs_stub, &abs_kernel_cuda);\n}\n"
        ),
        "aten/src/ATen/native/mps/Abs.mm": (
            "namespace at::native {\nstatic void abs_mps(TensorIteratorBase& iter) {}\n"
            "REGISTER_DISPATCH(abs_stub, abs_mps);\nREGISTER_HIP_DISPATCH(abs_stub, &abs_mps);\n}\n"
        ),
    })
    assert rows["stub_decl"] == [("at::native::abs_stub", "aten/src/ATen/native/Abs.h", 3)]
    assert rows["stub_define"] == [("at::native::abs_stub", "aten/src/ATen/native/Abs.cpp", 2)]
    assert sorted(rows["stub_register"]) == [
        ("at::native::abs_stub", "CPU", "at::native::(anonymous:aten/src/ATen/native/cpu/AbsKernel.cpp)::abs_kernel", "aten/src/ATen/native/cpu/AbsKernel.cpp", 6),
        ("at::native::abs_stub", "CUDA", "at::native::abs_kernel_cuda", "aten/src/ATen/native/cuda/AbsKernel.cu", 3),
        ("at::native::abs_stub", "HIP", "at::native::(static:aten/src/ATen/native/mps/Abs.mm)::abs_mps", "aten/src/ATen/native/mps/Abs.mm", 4),
        ("at::native::abs_stub", "MPS", "at::native::(static:aten/src/ATen/native/mps/Abs.mm)::abs_mps", "aten/src/ATen/native/mps/Abs.mm", 3),
        ("other_stub", "CPU", "nullptr", "aten/src/ATen/native/cpu/AbsKernel.cpp", 7),
    ]
    assert rows["stub_call"] == [("at::native::abs_out", "at::native::abs_stub", "aten/src/ATen/native/Abs.cpp", 4)]
    assert rows.get("calls", []) == []


def test_kernels_and_launches_direct_and_through_helpers():
    rows = rows_of({
        "aten/src/ATen/native/cuda/Loops.cuh": (
            "namespace at::native {\n"
            "template <typename F>\nC10_LAUNCH_BOUNDS_1(128)\n__global__ void elementwise_kernel(int n, F f) {}\n"
            "template <typename F>\nvoid launch_it(int n, const F& f) {\n"
            "  elementwise_kernel<F><<<1, 128, 0, stream>>>(n, f);\n}\n"
            "template <typename F>\nvoid gpu_kernel(TensorIteratorBase& iter, const F& f) { launch_it(1, f); }\n"
            "}\n"
        ),
        "aten/src/ATen/native/cuda/Relu.cu": (
            "namespace at::native {\n"
            "__global__ static void relu_kernel(float* x) { }\n"
            "__global__ void declared_only(float* x);\n"
            "void relu_cuda(TensorIteratorBase& iter) {\n"
            "  relu_kernel<<<grid, block>>>(p);\n"
            "  gpu_kernel(iter, [] GPU_LAMBDA (float a) -> float { return a; });\n"
            "}\n}\n"
        ),
    })
    assert sorted(rows["kernel"]) == [
        ("at::native::(static:aten/src/ATen/native/cuda/Relu.cu)::relu_kernel", "relu_kernel", "aten/src/ATen/native/cuda/Relu.cu", 2),
        ("at::native::elementwise_kernel", "elementwise_kernel", "aten/src/ATen/native/cuda/Loops.cuh", 4),
    ]
    assert rows["launches"] == [
        ("at::native::launch_it", "at::native::elementwise_kernel", "aten/src/ATen/native/cuda/Loops.cuh", 7, "<<<>>>"),
        ("at::native::relu_cuda", "at::native::(static:aten/src/ATen/native/cuda/Relu.cu)::relu_kernel", "aten/src/ATen/native/cuda/Relu.cu", 5, "<<<>>>"),
        ("at::native::relu_cuda", "at::native::elementwise_kernel", "aten/src/ATen/native/cuda/Relu.cu", 6, "gpu_kernel"),
    ]
    assert all(r[4] == "cuda" for r in rows["func"])


def test_torch_library_blocks():
    rows = rows_of({
        "aten/src/ATen/native/lib.cpp": (
            "namespace at::native {\nTensor my_op_cpu(const Tensor& x) { return x; }\n"
            "TORCH_LIBRARY(myns, m) {\n"
            "  m.def(\"my_op(Tensor x) -> Tensor\");\n"
            "  m.def(TORCH_SELECTIVE_SCHEMA(\"myns::other.out(Tensor x, *, Tensor(a!) out) \" \"-> Tensor(a!)\"));\n"
            "}\n"
            "TORCH_LIBRARY_IMPL(myns, CPU, m) {\n"
            "  m.impl(\"my_op\", TORCH_FN(my_op_cpu));\n"
            "  m.impl(TORCH_SELECTIVE_NAME(\"myns::other.out\"), [](const Tensor& x) { return x; });\n"
            "  m.impl(\"third\", &my_op_cpu);\n"
            "}\n}\n"
        ),
    })
    f = "aten/src/ATen/native/lib.cpp"
    assert rows["lib_def"] == [
        ("myns", "my_op", "my_op(Tensor x) -> Tensor", f, 4),
        ("myns", "other.out", "myns::other.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)", f, 5),
    ]
    assert rows["lib_impl"] == [
        ("myns", "my_op", "CPU", "at::native::my_op_cpu", f, 8),
        ("myns", "other.out", "CPU", "<lambda>", f, 9),
        ("myns", "third", "CPU", "at::native::my_op_cpu", f, 10),
    ]
    assert [r[0] for r in rows["func"]] == ["at::native::my_op_cpu"]


def test_library_objects_in_variables():
    """`auto m = MAKE_TORCH_LIBRARY_IMPL(ns, KEY);` in a function registers like
    TORCH_LIBRARY_IMPL's `m` (torch/csrc/lazy/ts_backend/ts_eager_fallback.cpp);
    another variable, `m` in another function, or one in a gtest TEST body
    (registered while one test runs) registers nothing."""
    rows = rows_of({
        "torch/csrc/x/reg.cpp": (
            "namespace torch::x {\n"
            "void boxed(const c10::OperatorHandle& op, torch::jit::Stack* s) {}\n"
            "Tensor k(const Tensor& x) { return x; }\n"
            "void register_x() {\n"
            "  static auto m = MAKE_TORCH_LIBRARY_IMPL(_, Lazy);\n"
            "  m.fallback(torch::CppFunction::makeFromBoxedFunction<&boxed>());\n"
            "  auto lib = MAKE_TORCH_LIBRARY(myns);\n"
            "  lib.def(\"my_op(Tensor x) -> Tensor\", &k);\n"
            "  auto m2 = MAKE_TORCH_LIBRARY_IMPL(myns, CPU);\n"
            "  m2.impl(\"my_op\", TORCH_FN(k));\n"
            "  lib.impl(\"my_op\", c10::DispatchKey::XLA, TORCH_FN(k));\n"
            "  other.impl(\"my_op\", TORCH_FN(k));\n"
            "}\n"
            "void elsewhere(torch::Library& m) { m.impl(\"my_op\", TORCH_FN(k)); }\n"
            "TEST(Reg, Once) {\n"
            "  auto t = MAKE_TORCH_LIBRARY_IMPL(_, CPU);\n"
            "  t.fallback(torch::CppFunction::makeFromBoxedFunction<&boxed>());\n"
            "  auto d = MAKE_TORCH_LIBRARY(_test);\n"
            "  d.def(\"t_op\", &k);\n"
            "}\n"
            "}\n"
        ),
    })
    f = "torch/csrc/x/reg.cpp"
    assert rows["lib_fallback"] == [("_", "Lazy", "torch::x::boxed", f, 6)]
    assert rows["lib_def"] == [("myns", "my_op", "my_op(Tensor x) -> Tensor", f, 8)]
    assert sorted(rows["lib_impl"]) == [
        ("myns", "my_op", "CPU", "torch::x::k", f, 10),
        ("myns", "my_op", "CatchAll", "torch::x::k", f, 8),
        ("myns", "my_op", "XLA", "torch::x::k", f, 11),
    ]
    assert rows.get("binds", []) == []  # `d.def` is a library's, no pybind11 binding


def test_pybind_bindings_module_and_class_names():
    rows = rows_of({
        "torch/csrc/x/init.cpp": (
            "namespace torch::x {\n"
            "void start() {}\n"
            "struct Event { bool done() { return true; } };\n"
            "void initModule(PyObject* module) {\n"
            "  auto m = py::handle(module).cast<py::module>();\n"
            "  auto sub = m.def_submodule(\"_x\");\n"
            "  sub.def(\"start\", start);\n"
            "  py::class_<Event>(m, \"Event\")\n"
            "      .def(\"done\", &Event::done)\n"
            "      .def(\"lam\", [](Event& e) { return 1; });\n"
            "  m.def(\"_plain\", &start);\n"
            "}\n}\n"
        ),
    })
    f = "torch/csrc/x/init.cpp"
    assert sorted(rows["binds"]) == [
        ("Event.done", "torch::x::Event::done", "pybind", f, 9),
        ("Event.lam", "<lambda>", "pybind", f, 10),
        ("_plain", "torch::x::start", "pybind", f, 11),
        ("torch._C._x.start", "torch::x::start", "pybind", f, 7),
    ]


def test_unbalanced_conditional_braces_do_not_swallow_later_functions():
    rows = rows_of({
        "c10/x.cpp": (
            "namespace c10 {\nvoid f(int k) {\n#ifdef ONE_KERNEL\n  if (k == 0) {\n#else\n  if (k != 0) {\n#endif\n"
            "    g();\n  }\n}\nvoid g() {}\n}\n"
        ),
    })
    assert sorted(r[0] for r in rows["func"]) == ["c10::f", "c10::g"]
    assert rows["calls"] == [("c10::f", "c10::g", "c10/x.cpp", 8, "scope")]


def test_extract_uses_the_cache_and_rescans_only_changed_files(tmp_path: Path):
    root, cache_dir = tmp_path / "tree", tmp_path / "cache"
    (root / "aten").mkdir(parents=True)
    (root / "aten" / "third_party").mkdir()
    (root / "aten" / "third_party" / "skip.cpp").write_text("void skipped() {}\n")
    (root / "aten" / "a.cpp").write_text("namespace at { void a() { b(); } }\n")
    (root / "aten" / "b.cpp").write_text("namespace at { void b() {} }\n")
    ctx = ExtractContext(root=root, cache_dir=cache_dir, jobs=1)
    first = cpp.run(ctx)
    assert first.scanned == 2
    assert first.rows["calls"] == [("at::a", "at::b", "aten/a.cpp", 1, "scope")]
    assert cpp.run(ctx).scanned == 0  # nothing changed: resolved rows from the cache
    (root / "aten" / "b.cpp").write_text("namespace at { void b() {}\nvoid c() {} }\n")
    os.utime(root / "aten" / "b.cpp", ns=(1, 1))
    third = cpp.run(ctx)
    assert third.scanned == 1
    assert sorted(r[0] for r in third.rows["func"]) == ["at::a", "at::b", "at::c"]
    sink = ListSink()
    cpp.extract(ctx, sink)
    assert sink.rows["calls"] == [("at::a", "at::b", "aten/a.cpp", 1, "scope")]
    assert not list(cache_dir.rglob(".tmp-*"))
    assert [p.relative_to(root).as_posix() for p in cpp.inputs(root)] == ["aten/a.cpp", "aten/b.cpp"]


@pytest.mark.parametrize("bad", [b"\xff\xfe garbage {{{ ((( ", b"", b"}}}} namespace {"])
def test_garbage_does_not_crash(bad: bytes):
    facts = scan_file("x.cpp", bad)
    assert facts.defs == ()


def test_local_macros_defining_structured_kernels_are_expanded_in_place():
    rows = rows_of({
        "aten/src/ATen/native/U.cpp": (
            "namespace at::native {\n"
            "#define CREATE_UNARY_TORCH_IMPL_FUNC(func_out, func_stub)   \\\n"
            "TORCH_IMPL_FUNC(func_out) (const Tensor& self, const Tensor& result) {  \\\n"
            "  func_stub(device_type(), *this);  \\\n"
            "  log(#func_out);  \\\n"
            "}\n"
            "DEFINE_DISPATCH(acos_stub);\n"
            "CREATE_UNARY_TORCH_IMPL_FUNC(acos_out, acos_stub)\n"
            "CREATE_UNARY_TORCH_IMPL_FUNC(\n  asin_out, acos_stub)\n"
            "void after() {}\n"
            "}\n"
        ),
    })
    f = "aten/src/ATen/native/U.cpp"
    assert rows["impl_func"] == [
        ("acos_out", "impl", "at::native::structured_acos_out::impl", f, 8),
        ("asin_out", "impl", "at::native::structured_asin_out::impl", f, 9),
    ]
    assert rows["stub_call"] == [
        ("at::native::structured_acos_out::impl", "at::native::acos_stub", f, 8),
        ("at::native::structured_asin_out::impl", "at::native::acos_stub", f, 9),
    ]
    assert ("at::native::after", "after", f, 11, "cpp") in rows["func"]


def test_namespaces_survive_objective_c_parse_errors():
    rows = rows_of({
        "aten/src/ATen/native/mps/X.mm": (
            "namespace at::native {\nnamespace mps {\n"
            "static void run() {\n  @autoreleasepool {\n    [stream commit];\n  }\n}\n"
            "}\n"
            "Tensor& relu_mps(const Tensor& self) { mps::run(); return self; }\n"
            "}\n"
        ),
    })
    assert sorted(r[0] for r in rows["func"]) == ["at::native::mps::(static:aten/src/ATen/native/mps/X.mm)::run", "at::native::relu_mps"]
    assert ("at::native::relu_mps", "at::native::mps::(static:aten/src/ATen/native/mps/X.mm)::run", "aten/src/ATen/native/mps/X.mm", 9, "qualified") in rows["calls"]


def test_receivers_typed_through_return_types_auto_and_make_shared():
    rows = rows_of({
        "a/t.h": (
            "namespace at {\n"
            "struct Options { int dtype() const { return 0; } };\n"
            "struct Impl { int numel() const { return 1; } };\n"
            "class Tensor {\n public:\n  Options options() const { return {}; }\n"
            "  c10::intrusive_ptr<Impl> impl() const { return p; }\n};\n"
            "Tensor make() { return {}; }\n"
            "struct Other { int dtype() const { return 2; } };\n"
            "}\n"
        ),
        "a/u.cpp": (
            "namespace at { void f(const Tensor& self) {\n"
            "  self.options().dtype();\n"
            "  auto t = make();\n"
            "  t.options();\n"
            "  self.impl()->numel();\n"
            "  auto o = std::make_shared<Options>();\n"
            "  o->dtype();\n"
            "  unknown().dtype();\n"
            "} }\n"
        ),
    })
    f = "a/u.cpp"
    assert sorted(r[1:] for r in rows["calls"] if r[0] == "at::f") == [
        ("at::Impl::numel", f, 5, "type"),
        ("at::Options::dtype", f, 2, "type"),
        ("at::Options::dtype", f, 7, "type"),
        ("at::Tensor::impl", f, 5, "type"),
        ("at::Tensor::options", f, 2, "type"),
        ("at::Tensor::options", f, 4, "type"),
        ("at::make", f, 3, "scope"),
    ]
    # the receiver of line 8 is unknown: two methods named dtype, no guess
    assert rows["call_ambiguous"] == [("at::f", "dtype", 2, f, 8)]


def test_receivers_fields_subscripts_and_constructor_chains():
    rows = rows_of({
        "a/t.h": (
            "namespace at {\n"
            "struct Desc { void set() {} };\n"
            "struct Args { Desc odesc; };\n"
            "struct Tester {\n  Tester& mr(int m) { return *this; }\n  void test() const {}\n};\n"
            "struct Conv {\n  Desc desc_;\n  std::vector<Desc> descs_;\n  void run(Args& args);\n};\n"
            "}\n"
        ),
        "a/u.cpp": (
            "namespace at {\n"
            "void Conv::run(Args& args) {\n"
            "  desc_.set();\n"
            "  args.odesc.set();\n"
            "  descs_[0].set();\n"
            "  Tester().mr(4).test();\n"
            "}\n}\n"
        ),
    })
    f = "a/u.cpp"
    assert sorted(r[1:] for r in rows["calls"] if r[0] == "at::Conv::run") == [
        ("at::Desc::set", f, 3, "type"),
        ("at::Desc::set", f, 4, "type"),
        ("at::Desc::set", f, 5, "type"),
        ("at::Tester::mr", f, 6, "type"),
        ("at::Tester::test", f, 6, "type"),
    ]


def test_macro_expansion_with_multiline_arguments_keeps_line_numbers():
    src = (
        "namespace torch {\n"
        "#define CTOR(NAME, SIG)  \\\n"
        "  static PyObject* THPVariable_##NAME(PyObject* a) {  \\\n"
        "    return NAME##_ctor(a);  \\\n"
        "  }\n"
        "PyObject* tensor_ctor(PyObject* a) { return a; }\n"
        "CTOR(\n    tensor,\n    ({\"tensor(a)\",\n      \"tensor(b)\"}))\n"
        "void later() { tensor_ctor(nullptr); }\n"
        "}\n"
    )
    rows = rows_of({"torch/csrc/x.cpp": src})
    assert sorted(rows["func"]) == [
        ("torch::(static:torch/csrc/x.cpp)::THPVariable_tensor", "THPVariable_tensor", "torch/csrc/x.cpp", 7, "cpp"),
        ("torch::later", "later", "torch/csrc/x.cpp", 11, "cpp"),
        ("torch::tensor_ctor", "tensor_ctor", "torch/csrc/x.cpp", 6, "cpp"),
    ]
    assert rows["calls"] == [
        ("torch::(static:torch/csrc/x.cpp)::THPVariable_tensor", "torch::tensor_ctor", "torch/csrc/x.cpp", 7, "scope"),
        ("torch::later", "torch::tensor_ctor", "torch/csrc/x.cpp", 11, "scope"),
    ]


def test_local_dispatch_macro_keeps_lambda_call_lines_and_comments_do_not_leak():
    src = (
        "namespace {\n"
        "#define MY_DISPATCH(TYPE, NAME, ...) \\\n"
        "  AT_DISPATCH_ALL_TYPES(TYPE, NAME, __VA_ARGS__)\n"
        "void helper(int) {}\n"
        "void run(const Tensor& self) {\n"
        "  MY_DISPATCH(self.scalar_type(), \"run\", [&] {\n"
        "    // a comment { with a brace\n"
        "    helper(1);\n"
        "  });\n"
        "}\n"
        "} // namespace\n"
        "namespace at::native { void after() { run(x); } }\n"
    )
    rows = rows_of({"aten/src/ATen/native/C.cpp": src})
    f = "aten/src/ATen/native/C.cpp"
    assert rows["calls"] == [
        (f"(anonymous:{f})::run", f"(anonymous:{f})::helper", f, 8, "macro-scope"),
        ("at::native::after", f"(anonymous:{f})::run", f, 12, "scope"),
    ]


def test_cache_drops_entries_of_old_file_contents(tmp_path: Path):
    from extractors.cpp import cache

    root, cache_dir = tmp_path / "tree", tmp_path / "cache"
    (root / "c10").mkdir(parents=True)
    (root / "c10" / "a.cpp").write_text("void a() {}\n")
    ctx = ExtractContext(root=root, cache_dir=cache_dir, jobs=1)
    cpp.run(ctx)
    old = cache.entry_path(cache_dir, cache.digest_of(b"void a() {}\n", "c10/a.cpp"))
    assert old.is_file()
    os.utime(old, (1, 1))  # an entry from long ago
    (root / "c10" / "a.cpp").write_text("void a2() {}\n")
    cpp.run(ctx)
    assert not old.exists()
    assert cache.entry_path(cache_dir, cache.digest_of(b"void a2() {}\n", "c10/a.cpp")).is_file()


def test_objective_c_chunks_keep_later_definitions():
    src = (
        "namespace at::native {\n"
        "static void run_graph(MPSStream* stream) {\n"
        "  NSDictionary* feeds = @{ key : value };\n"
        "  [stream executeMPSGraph:graph feeds:feeds results:results];\n"
        "  auto block = ^(MPSGraph* g) { return [g identity]; };\n"
        "}\n"
        "TORCH_IMPL_FUNC(relu_out_mps)(const Tensor& self, const Tensor& out) {\n"
        "  run_graph(getCurrentMPSStream());\n"
        "}\n"
        "Tensor cdist_mps(const Tensor& x) { return x; }\n"
        "}\n"
    )
    rows = rows_of({"aten/src/ATen/native/mps/operations/R.mm": src})
    f = "aten/src/ATen/native/mps/operations/R.mm"
    assert sorted(r[:4] for r in rows["func"]) == [
        (f"at::native::(static:{f})::run_graph", "run_graph", f, 2),
        ("at::native::cdist_mps", "cdist_mps", f, 10),
        ("at::native::structured_relu_out_mps::impl", "impl", f, 7),
    ]
    assert ("at::native::structured_relu_out_mps::impl", f"at::native::(static:{f})::run_graph", f, 8, "scope") in rows["calls"]


def test_inline_namespaces_are_named_as_written_and_transparent_for_lookup():
    rows = rows_of({
        "aten/src/ATen/native/cpu/K.cpp": (
            "namespace at::native {\ninline namespace CPU_CAPABILITY {\nnamespace {\n"
            "void pow_kernel(TensorIteratorBase& iter) {}\n"
            "}\n"
            "void other() { pow_kernel(it); }\n"
            "}\n"
            "REGISTER_DISPATCH(pow_stub, &pow_kernel)\n"
            "}\n"
        ),
        "aten/src/ATen/native/P.cpp": "namespace at::native {\nDECLARE_DISPATCH(fn, pow_stub)\nvoid use() { at::native::other(); }\n}\n",
    })
    assert sorted(r[0] for r in rows["func"]) == [
        "at::native::CPU_CAPABILITY::(anonymous:aten/src/ATen/native/cpu/K.cpp)::pow_kernel", "at::native::CPU_CAPABILITY::other", "at::native::use"]
    assert rows["calls"] == [
        ("at::native::CPU_CAPABILITY::other", "at::native::CPU_CAPABILITY::(anonymous:aten/src/ATen/native/cpu/K.cpp)::pow_kernel",
         "aten/src/ATen/native/cpu/K.cpp", 6, "scope"),
        ("at::native::use", "at::native::CPU_CAPABILITY::other", "aten/src/ATen/native/P.cpp", 3, "qualified"),
    ]
    assert rows["stub_register"] == [("at::native::pow_stub", "CPU", "at::native::CPU_CAPABILITY::(anonymous:aten/src/ATen/native/cpu/K.cpp)::pow_kernel",
                                      "aten/src/ATen/native/cpu/K.cpp", 8)]


def test_kernel_with_launch_bounds_inside_an_if_group():
    src = (
        "namespace at::native {\ntemplate <typename T>\n__global__ void\n#if !defined(USE_ROCM)\n"
        "C10_LAUNCH_BOUNDS_1(at::cuda::detail::CUDA_NUM_THREADS)\n#endif\nconv_kernel(T* x) {}\n"
        "void host() { conv_kernel<5> <<<grid, block, 0, stream>>>(p); }\n}\n"
    )
    rows = rows_of({"aten/src/ATen/native/cuda/D.cu": src})
    assert rows["kernel"] == [("at::native::conv_kernel", "conv_kernel", "aten/src/ATen/native/cuda/D.cu", 7)]
    assert rows["launches"] == [
        ("at::native::host", "at::native::conv_kernel", "aten/src/ATen/native/cuda/D.cu", 8, "<<<>>>")]


def test_names_containing_template_keep_it():
    rows = rows_of({
        "aten/src/ATen/native/E.cpp": (
            "namespace at::native {\ntemplate<typename scalar_t>\n"
            "Tensor backward_cpu_template(const Tensor& g) { return g; }\n"
            "Tensor backward_cpu(const Tensor& g) {\n  return backward_cpu_template<float>(g);\n}\n"
            "struct S { template <typename T> T* get() { return nullptr; } };\n"
            "void user(S& s) { s.template get<int>(); }\n}\n"
        ),
    })
    f = "aten/src/ATen/native/E.cpp"
    assert rows["calls"] == [
        ("at::native::backward_cpu", "at::native::backward_cpu_template", f, 5, "scope"),
        ("at::native::user", "at::native::S::get", f, 8, "type"),
    ]


def test_incremental_resolution_reuses_unchanged_files_and_sees_new_definitions(tmp_path: Path):
    root, cache_dir = tmp_path / "tree", tmp_path / "cache"
    (root / "aten").mkdir(parents=True)
    (root / "aten" / "a.cpp").write_text("namespace at { void a() { b(); c(); } }\n")
    (root / "aten" / "b.cpp").write_text("namespace at { void b() {} }\n")
    ctx = ExtractContext(root=root, cache_dir=cache_dir, jobs=1)
    assert cpp.run(ctx).rows["calls"] == [("at::a", "at::b", "aten/a.cpp", 1, "scope")]
    # a body-only edit: same interface, a.cpp's rows are reused
    (root / "aten" / "b.cpp").write_text("namespace at { void b() { b(); } }\n")
    second = cpp.run(ctx)
    assert second.rows["calls"] == [("at::a", "at::b", "aten/a.cpp", 1, "scope"),
                                    ("at::b", "at::b", "aten/b.cpp", 1, "scope")]
    assert second.read == 1  # the edited file's FileFacts only: a.cpp is neither read nor resolved
    # a new definition changes the interface: unchanged a.cpp now reaches c
    (root / "aten" / "b.cpp").write_text("namespace at { void b() { b(); }\nvoid c() {} }\n")
    third = cpp.run(ctx)
    assert ("at::a", "at::c", "aten/a.cpp", 1, "scope") in third.rows["calls"]
    fresh = cpp.run(ExtractContext(root=root, cache_dir=tmp_path / "fresh", jobs=1))
    assert fresh.rows == third.rows and fresh.stats == third.stats


def test_incremental_resolution_renames_an_unchanged_files_def_that_became_overloaded(tmp_path: Path):
    """Note [Incremental resolution]: a second parameter list for `at::f` in
    b.cpp makes a.cpp's unchanged `at::f(int)` an overload; its rows (and the
    calls of it) are renamed as a fresh run names them."""
    root = tmp_path / "tree"
    (root / "aten").mkdir(parents=True)
    (root / "aten" / "a.cpp").write_text("namespace at { void f(int x) {} }\n")
    (root / "aten" / "b.cpp").write_text("namespace at { void g() { f(1); } }\n")
    ctx = ExtractContext(root=root, cache_dir=tmp_path / "cache", jobs=1)
    assert ("at::f", "f", "aten/a.cpp", 1, "cpp") in cpp.run(ctx).rows["func"]
    (root / "aten" / "b.cpp").write_text("namespace at { void f(int x, int y) {}\nvoid g() { f(1); } }\n")
    again = cpp.run(ctx)
    assert ("at::f(int)", "f", "aten/a.cpp", 1, "cpp") in again.rows["func"]
    fresh = cpp.run(ExtractContext(root=root, cache_dir=tmp_path / "fresh", jobs=1))
    assert fresh.rows == again.rows and fresh.stats == again.stats


def test_a_definitions_edit_patches_the_last_index_to_the_one_built_from_every_file(tmp_path: Path, monkeypatch):
    """Note [Index patched]: an edit that adds, removes or retypes definitions
    only (no class, stub, alias or include changed) patches the last run's
    Index, the watcher's (memo) or the pickled one (a new process), instead
    of building one from every file: it equals the one built, and the rows
    equal a fresh run's."""
    from _index_contents import contents

    from extractors.cpp import resolve as R
    from extractors.cpp.overloads import Overloads

    root = tmp_path / "tree"
    (root / "aten").mkdir(parents=True)
    b_cpp = "namespace at {\nvoid b() {}\nnamespace { int twin(int x) { return x; } }\n}\n"
    files = {
        "aten/a.cpp": "namespace at {\nvoid a() { b(); c(); d(1); twin(2); }\n}\n",
        "aten/b.cpp": b_cpp,
        "aten/h.h": "namespace at {\ninline void hd() {}\nusing ::at::hd;\n}\n",
        "aten/d.cpp": "namespace at {\nvoid d(int x) {}\nnamespace { int twin(float y) { return 0; } }\n}\n",
    }
    for rel, text in files.items():
        (root / rel).write_text(text)
    edits = [
        ("aten/b.cpp", b_cpp + "namespace at {\nvoid c() {}\n}\n"),  # a new function a.cpp calls
        ("aten/b.cpp", b_cpp + "namespace at::inner {\nvoid c() {}\n}\n"),  # ... moved to a new namespace
        ("aten/d.cpp", files["aten/d.cpp"] + "namespace at {\nvoid d(int x, int y) {}\n}\n"),  # an overload
        ("aten/b.cpp", "namespace at {\nvoid b() {}\nstatic int twin(int x, int y) { return x; }\n}\n"),  # a twin retyped
        ("aten/h.h", "namespace at {\ninline void hd() {}\ninline void he() {}\nusing ::at::hd;\n}\n"),
        ("aten/b.cpp", b_cpp),  # back: removed
        ("aten/d.cpp", files["aten/d.cpp"]),
    ]
    real_init, built = R.Index.__init__, []

    def counted(self, *args, **kwargs):
        built.append(1)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(R.Index, "__init__", counted)
    memo: dict = {}
    calls = []  # what at::a calls after each step
    for i, (rel, text) in enumerate([("aten/a.cpp", files["aten/a.cpp"]), *edits]):
        (root / rel).write_text(text)
        built.clear()
        # even steps in a watcher (its memo), odd ones as a new process (the pickled Index)
        run = cpp.run(ExtractContext(root=root, cache_dir=tmp_path / "cache", jobs=1,
                                     memo=memo if i % 2 == 0 else None))
        assert built == ([1] if i == 0 else []), (i, rel)
        if i % 2:
            memo.pop("index", None)  # the process wrote the Index the watcher's next run reads
        ix = memo["index"][1] if i % 2 == 0 else R._cached_index(tmp_path / "cache", next(
            (tmp_path / "cache").glob("index-*.pkl")).stem.removeprefix("index-"))
        facts = [scan_file(r, (root / r).read_bytes()) for r in sorted(files)]
        ov = Overloads.of(facts)
        assert contents(ix) == contents(R.Index([ov.rename(f) for f in facts])), (i, rel)
        fresh = cpp.run(ExtractContext(root=root, cache_dir=tmp_path / f"fresh{i}", jobs=1))
        assert run.rows == fresh.rows and run.stats == fresh.stats, (i, rel)
        calls.append({c[1] for c in run.rows["calls"] if c[0] == "at::a"})
    # the new function, moved, then the call of d an overload, and all of it gone again
    assert [c & {"at::c", "at::inner::c", "at::d", "at::d(int)"} for c in calls] == [
        {"at::d"}, {"at::c", "at::d"}, {"at::inner::c", "at::d"}, {"at::inner::c", "at::d(int)"},
        {"at::d(int)"}, {"at::d(int)"}, {"at::d(int)"}, {"at::d"}]


def test_helper_launches_are_walked_again_only_when_a_cuda_file_changes(tmp_path: Path, monkeypatch):
    """Note [Helper launches kept]: an edit of a .cpp file that holds no CUDA
    function, launch or call the helpers' walks read uses the last run's
    walks (in a watcher, and in a new process reading the state); a CUDA
    file's edit walks again. The rows equal a fresh run's after each edit."""
    from extractors.cpp import resolve as R

    root = tmp_path / "tree"
    (root / "aten/src/ATen/native/cuda").mkdir(parents=True)
    loops = ("namespace at::native {\n"
             "template <typename F>\n__global__ void elementwise_kernel(int n, F f) {}\n"
             "template <typename F>\nvoid launch_it(int n, const F& f) {\n"
             "  elementwise_kernel<F><<<1, 128, 0, stream>>>(n, f);\n}\n"
             "template <typename F>\nvoid gpu_kernel(TensorIteratorBase& iter, const F& f) { launch_it(1, f); }\n"
             "}\n")
    files = {
        "aten/src/ATen/native/cuda/Loops.cuh": loops,
        "aten/src/ATen/native/cuda/Relu.cu": (
            "namespace at::native {\nvoid relu_cuda(TensorIteratorBase& iter) {\n"
            "  gpu_kernel(iter, [] GPU_LAMBDA (float a) -> float { return a; });\n}\n}\n"),
        "aten/src/ATen/native/Relu.cpp": "namespace at::native {\nvoid relu_cpu() {}\n}\n",
    }
    for rel, text in files.items():
        (root / rel).write_text(text)
    walks = []
    real = R._helper_walks
    monkeypatch.setattr(R, "_helper_walks", lambda *a: walks.append(1) or real(*a))
    more = loops.replace("  elementwise_kernel<F>", "  vectorized_kernel<<<1, 1>>>(n);\n  elementwise_kernel<F>")
    more = more.replace("template <typename F>\nvoid launch_it", "__global__ void vectorized_kernel(int n) {}\n"
                        "template <typename F>\nvoid launch_it")
    steps = [
        (None, None, True),  # the first run walks
        ("aten/src/ATen/native/Relu.cpp", "namespace at::native {\nvoid relu_cpu() { relu_cpu(); }\n}\n", False),
        ("aten/src/ATen/native/Relu.cpp", "namespace at::native {\nvoid relu_cpu() {}\nvoid more() {}\n}\n", False),
        ("aten/src/ATen/native/cuda/Loops.cuh", more, True),  # a kernel more, launched by the helper's callee
        ("aten/src/ATen/native/Relu.cpp", "namespace at::native {\nvoid relu_cpu() {}\n}\n", False),
        ("aten/src/ATen/native/cuda/Relu.cu", files["aten/src/ATen/native/cuda/Relu.cu"] + "// more\n", True),
    ]
    memo: dict = {}
    helper_rows = []
    for i, (rel, text, walked) in enumerate(steps):
        if rel is not None:
            (root / rel).write_text(text)
        walks.clear()
        run = cpp.run(ExtractContext(root=root, cache_dir=tmp_path / "cache", jobs=1,
                                     memo=memo if i % 2 == 0 else None))
        assert walks == ([1] if walked else []), (i, rel)
        fresh = cpp.run(ExtractContext(root=root, cache_dir=tmp_path / f"fresh{i}", jobs=1))
        assert run.rows == fresh.rows and run.stats == fresh.stats, (i, rel)
        helper_rows.append(sorted(r[1] for r in run.rows["launches"] if r[4] == "gpu_kernel"))
    assert helper_rows == [["at::native::elementwise_kernel"]] * 3 + [
        ["at::native::elementwise_kernel", "at::native::vectorized_kernel"]] * 3


def test_the_state_is_written_by_file_and_read_back_whole(tmp_path: Path, monkeypatch):
    """Note [State by file]: the layer's state read back, by a new process,
    gives the rows and counts the run that wrote it had (the files' rows
    merged again, with the helper launches and the library's op rows); an
    update, in a watcher or in a new process, writes again only the entry
    of the file it changed."""
    import marshal

    from extractors.cpp import STATE, _read_memo

    root, cache = tmp_path / "tree", tmp_path / "cache"
    (root / "aten/src/ATen/native/cuda").mkdir(parents=True)
    files = {
        "aten/src/ATen/native/cuda/Loops.cuh": (
            "namespace at::native {\ntemplate <typename F>\n__global__ void elementwise_kernel(int n, F f) {}\n"
            "template <typename F>\nvoid gpu_kernel(TensorIteratorBase& iter, const F& f) {\n"
            "  elementwise_kernel<F><<<1, 128, 0, stream>>>(1, f);\n}\n}\n"),
        "aten/src/ATen/native/cuda/Relu.cu": (
            "namespace at::native {\nvoid relu_cuda(TensorIteratorBase& iter) {\n"
            "  gpu_kernel(iter, [] GPU_LAMBDA (float a) -> float { return a; });\n}\n}\n"),
        "aten/src/ATen/native/Relu.cpp": ("namespace at::native {\nvoid f(int a) {}\nvoid f(float a) {}\n"
                                          "void relu_cpu() { f(1); }\nTORCH_LIBRARY(myops, m) {\n"
                                          "  m.def(\"relu2(Tensor x) -> Tensor\");\n}\n}\n"),
    }
    for rel, text in files.items():
        (root / rel).write_text(text)
    entries = []
    real = marshal.dumps
    monkeypatch.setattr(marshal, "dumps", lambda obj, *a: (
        entries.append(obj[0]) if isinstance(obj, tuple) and len(obj) == 6 else None) or real(obj, *a))
    memo: dict = {}
    first = cpp.run(ExtractContext(root=root, cache_dir=cache, jobs=1, memo=memo))
    assert len(entries) == 3 and first.rows["launches"] and first.rows["lib_op"] and first.rows["overload"]
    back = _read_memo({}, cache / STATE)
    assert back[1] == first.rows and back[2] == first.stats
    for i, text in enumerate(("void g() {}\n", "void h() {}\n")):  # a watcher's update, then a new process's
        (root / "aten/src/ATen/native/Relu.cpp").write_text(files["aten/src/ATen/native/Relu.cpp"] + text)
        entries.clear()
        run = cpp.run(ExtractContext(root=root, cache_dir=cache, jobs=1, memo=memo if i == 0 else {}))
        assert len(entries) == 1, i  # the changed file's entry, no other
        fresh = cpp.run(ExtractContext(root=root, cache_dir=tmp_path / f"fresh{i}", jobs=1))
        assert run.rows == fresh.rows and _read_memo({}, cache / STATE)[1] == fresh.rows


@pytest.mark.parametrize("damage", ["half", "last bytes", "zeros inside", "empty", "bytes after"])
def test_a_damaged_state_is_not_read_and_the_run_resolves_again(tmp_path: Path, damage: str):
    """Note [State by file]: a state file cut short, overwritten or grown
    reads as no state, and the next run's rows are a fresh run's."""
    from extractors.cpp import STATE, _read_memo

    root = tmp_path / "tree"
    (root / "aten").mkdir(parents=True)
    (root / "aten" / "a.cpp").write_text("namespace at { void a() { b(); } }\n")
    (root / "aten" / "b.cpp").write_text("namespace at { void b() {} }\n")
    first = cpp.run(ExtractContext(root=root, cache_dir=tmp_path / "cache", jobs=1))
    state = tmp_path / "cache" / STATE
    data = state.read_bytes()
    state.write_bytes({"half": data[:len(data) // 2], "last bytes": data[:-3],
                       "zeros inside": data[:60] + bytes(40) + data[100:], "empty": b"",
                       "bytes after": data + b"xx"}[damage])
    assert _read_memo({}, state) is None
    assert cpp.run(ExtractContext(root=root, cache_dir=tmp_path / "cache", jobs=1)).rows == first.rows
    assert _read_memo({}, state)[1] == first.rows  # written again whole


def test_a_state_of_another_format_is_not_read(tmp_path: Path, monkeypatch):
    """A state written with another FILES_FORMAT (its per-file entries of
    another shape) is no state, though its digest of the files matches: the
    rows are resolved again, not taken as none."""
    from extractors.cpp import STATE, _read_memo, incremental

    root = tmp_path / "tree"
    (root / "aten").mkdir(parents=True)
    (root / "aten" / "a.cpp").write_text("namespace at { void a() { b(); } }\n")
    (root / "aten" / "b.cpp").write_text("namespace at { void b() {} }\n")
    first = cpp.run(ExtractContext(root=root, cache_dir=tmp_path / "cache", jobs=1))
    monkeypatch.setattr(incremental, "FILES_FORMAT", incremental.FILES_FORMAT + 1)
    assert _read_memo({}, tmp_path / "cache" / STATE) is None
    assert cpp.run(ExtractContext(root=root, cache_dir=tmp_path / "cache", jobs=1)).rows == first.rows


def test_an_aten_names_edit_resolves_again_only_the_files_that_spell_a_changed_op():
    """Note [Incremental resolution]: a new op (an entry added to
    native_functions.yaml) changes what `at::tt_probe_out(...)` and
    `at::_ops::tt_probe_Tensor::call(...)` resolve to, not what `t.mm(t)`
    does; the file calling only mm keeps its rows, and the rows equal a fresh
    resolution. An op a C++ operator calls (`a * b`: mul) resolves every file again."""
    from extractors.cpp.aten import AtenNames
    from extractors.cpp.incremental import TreeFacts, resolve_tree

    sources = {
        "aten/a.cpp": b"namespace at::native {\nTensor f(const Tensor& t) { return at::tt_probe_out(t, t); }\n}\n",
        "aten/b.cpp": b"namespace at::native {\nTensor g(const Tensor& t) { return t.mm(t); }\n}\n",
        "aten/c.cpp": b"namespace at::native {\nvoid h(const Tensor& a) { at::_ops::tt_probe_Tensor::call(a); }\n}\n",
    }
    facts = [scan_file(rel, src) for rel, src in sources.items()]
    digests = {rel: f"d-{rel}" for rel in sources}
    before = AtenNames(frozenset({"mm"}), frozenset({"mm"}), functions=frozenset({"mm"}))
    after = AtenNames(frozenset({"mm", "tt_probe"}), frozenset({"mm"}), functions=frozenset({"mm", "tt_probe"}))
    _rows, _stats, state = resolve_tree(TreeFacts.of(facts), digests, None, before)
    rows, stats, again = resolve_tree(TreeFacts.of(facts), digests, state, after)
    assert [rel for rel in sources if again["files"][rel] is state["files"][rel]] == ["aten/b.cpp"]
    assert sorted(rows["calls_op"]) == [
        ("at::native::f", "tt_probe", "aten/a.cpp", 2, "qualified"),
        ("at::native::g", "mm", "aten/b.cpp", 2, "guess"),  # no class Tensor in this tree
        ("at::native::h", "tt_probe", "aten/c.cpp", 2, "qualified"),
    ]
    fresh_rows, fresh_stats, _ = resolve_tree(TreeFacts.of(facts), digests, None, after)
    assert (rows, stats) == (fresh_rows, fresh_stats)
    with_mul = AtenNames(after.ops | {"mul"}, after.methods, functions=after.functions)
    _rows, _stats, third = resolve_tree(TreeFacts.of(facts), digests, again, with_mul)
    assert not [rel for rel in sources if third["files"][rel] is again["files"][rel]]


def test_aten_api_calls_become_calls_op():
    from extractors.cpp.aten import AtenNames
    from extractors.cpp.resolve import resolve
    from extractors.cpp.scan import scan_file

    src = b"""namespace at { namespace native {
Tensor f(const Tensor& self, Tensor out) {
  at::mm_out(out, self, self);
  auto r = at::_ops::add_Tensor::call(self, self, 1);
  at::cpu::relu(self);
  self.mv(self);
  at::parallel_for(0, 1, 1, nullptr);
  return at::native::g(self);
}
Tensor g(const Tensor& self) { return self; }
}}
"""
    names = AtenNames(frozenset({"mm", "mv", "relu", "add"}), frozenset({"mv"}))
    rows, _stats, _ = resolve([scan_file("a.cpp", src)], aten=names)
    assert sorted(rows["calls_op"]) == [
        ("at::native::f", "add", "a.cpp", 4, "qualified"),
        ("at::native::f", "mm", "a.cpp", 3, "qualified"),
        ("at::native::f", "mv", "a.cpp", 6, "guess"),
        ("at::native::f", "relu", "a.cpp", 5, "qualified"),
    ]
    assert rows["calls"] == [("at::native::f", "at::native::g", "a.cpp", 8, "qualified")]


def test_unqualified_calls_in_a_method_find_base_class_methods():
    """C++ class scope lookup: `build()` / `this->build()` in D::f is Base::build
    when D derives from Base, and so is `D::build()`; a structured kernel's generated class derives
    from its yaml `structured_inherits` (Note [Structured kernel classes])."""
    from extractors.cpp.aten import AtenNames
    from extractors.cpp.resolve import resolve
    from extractors.cpp.scan import scan_file

    src = b"""namespace at { struct Base { void build(); }; void Base::build() {}
struct D : public Base { void f(); void g(); }; void D::f() {
  build(); }
void D::g() { D::build(); }
struct TensorIteratorBase { void build_unary_op(); }; void TensorIteratorBase::build_unary_op() {}
namespace meta { TORCH_META_FUNC(relu)(const Tensor& self) {
  build_unary_op(); } }
}"""
    names = AtenNames(frozenset({"relu"}), frozenset(), structured=frozenset(
        {("at::meta::structured_relu", ("at", "TensorIteratorBase"))}))
    rows, _stats, _ = resolve([scan_file("a.cpp", src)], aten=names)
    assert sorted(rows["calls"]) == [("at::D::f", "at::Base::build", "a.cpp", 3, "scope"),
                                     ("at::D::g", "at::Base::build", "a.cpp", 4, "qualified"),
                                     ("at::meta::structured_relu::meta", "at::TensorIteratorBase::build_unary_op", "a.cpp", 7, "scope")]


def test_a_files_internal_function_hides_a_same_signature_one_elsewhere():
    """Note [Internal linkage]: k.cpp's anonymous `kern(Tensor&)` and another
    file's public at::native::kern(Tensor&) cannot both be seen by k.cpp (a
    call would be ambiguous), so k.cpp's calls name its own; a public overload
    of other parameters (`g(int)` beside the static `g(Block*)`) stays a candidate."""
    from extractors.cpp.resolve import resolve
    from extractors.cpp.scan import scan_file

    k = b"""namespace at::native {
namespace { void kern(Tensor& v) {} }
static void g(Block* b) {}
void f(Tensor& t) {
  kern(t);
  g(b); }
}"""
    other = b"namespace at::native { void kern(Tensor& v) {} void g(int x) {} }"
    rows, _stats, _ = resolve([scan_file("aten/k.cpp", k), scan_file("aten/cuda/m.cpp", other)])
    assert sorted(r for r in rows["calls"] if r[0] == "at::native::f") == [
        ("at::native::f", "at::native::(anonymous:aten/k.cpp)::kern", "aten/k.cpp", 5, "scope"),
        ("at::native::f", "at::native::(static:aten/k.cpp)::g", "aten/k.cpp", 6, "overload"),
        ("at::native::f", "at::native::g", "aten/k.cpp", 6, "overload")]


def test_explicit_template_arguments_pass_functors():
    """`impl_<Stub, Generator>(...)` where impl_'s body calls `K<RNG>()(...)` on
    its template parameter K: Stub::operator() (functor); Generator, never
    called, adds nothing; K itself is no function."""
    from extractors.cpp.resolve import resolve
    from extractors.cpp.scan import scan_file

    t = b"""namespace at::native::templates {
template<template<typename> class K, typename RNG>
Tensor& impl_(Tensor& self, std::optional<Generator> gen) {
  K<RNG>()(self, gen);
  return self; }
}"""
    d = b"""namespace at::native {
void K(Tensor& s) {}
template<typename RNG> struct Stub { void operator()(Tensor& s, std::optional<Generator> g) {} };
struct Generator { void operator()() {} };
Tensor& f(Tensor& self, std::optional<Generator> gen) {
  return templates::impl_<Stub, Generator>(self, gen); }
}"""
    rows, _stats, _ = resolve([scan_file("aten/t.h", t), scan_file("aten/d.cpp", d)])
    assert sorted(rows["calls"]) == [("at::native::f", "at::native::Stub::operator()", "aten/d.cpp", 6, "functor"),
                                     ("at::native::f", "at::native::templates::impl_", "aten/d.cpp", 6, "qualified")]


def test_constructor_calls_when_one_constructor_fits():
    """Note [Constructor calls]: `Info(t, 1)` constructs an Info (one
    constructor takes two arguments); `Value(x)` with x a double is
    Value(double) (Note [Typed overloads]); `Value(w)`, w of no known type,
    fits both one-argument constructors: no edge rather than a guess each."""
    from extractors.cpp.resolve import resolve
    from extractors.cpp.scan import scan_file

    src = b"""namespace at::native {
struct Info { Info(const Tensor& t, int64_t d); Info(); };
Info::Info(const Tensor& t, int64_t d) {}
Info::Info() {}
struct Value { Value(int64_t v); Value(double v); };
Value::Value(int64_t v) {}
Value::Value(double v) {}
void f(const Tensor& t, double x) {
  Info(t, 1);
  Value(x);
  Value(w); }
}"""
    rows, _stats, _ = resolve([scan_file("aten/a.cpp", src)])
    assert [r for r in rows["calls"] if r[0] == "at::native::f"] == [
        ("at::native::f", "at::native::Info::Info(const Tensor&, int64_t)", "aten/a.cpp", 9, "scope"),
        ("at::native::f", "at::native::Value::Value(double)", "aten/a.cpp", 10, "typed")]


def test_a_name_starting_with_the_word_operator_loses_its_template_arguments() -> None:
    """`operator_brackets_proxy<self_type>(...)` (CompositeRandomAccessorCommon.h:151)
    is a call of the class template operator_brackets_proxy, not of an
    operator: its template arguments go like any name's."""
    from extractors.cpp.names import strip_templates

    assert strip_templates("operator_brackets_proxy<self_type>") == "operator_brackets_proxy"
    assert strip_templates("Foo<T>::operator<") == "Foo::operator<"


def test_the_scanners_source_is_in_the_cache_key(tmp_path: Path) -> None:
    """Note [Code in the cache key]: an edit to a module the scanner is made
    of gives new per-file cache keys, so no entry of an older scanner is read."""
    from extractors.base import source_digest
    from extractors.cpp import cache

    (tmp_path / "scan.py").write_text("x = 1\n")
    before = source_digest(("scan.py",), tmp_path)
    (tmp_path / "scan.py").write_text("x = 2\n")
    assert source_digest(("scan.py",), tmp_path) != before
    here = Path(cache.__file__).parent
    assert cache.VERSION.endswith(source_digest(cache.SCANNER_MODULES, here))
    assert cache.digest_of(b"int f();", "a.cpp") != cache.digest_of(b"int f();", "b.cpp")
    # every module of extractors/cpp the scanner imports at its top, however deep, is of the key
    import ast

    seen, todo = set(), ["scan.py"]
    while todo:
        mod = todo.pop()
        seen.add(mod)
        for node in ast.parse((here / mod).read_text()).body:
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("extractors.cpp"):
                for name in [node.module, *(f"{node.module}.{a.name}" for a in node.names)]:
                    file = f"{name.split('.')[2]}.py" if name.count(".") >= 2 else ""
                    if (here / file).is_file() and file not in seen:
                        todo.append(file)
    assert seen <= set(cache.SCANNER_MODULES), seen - set(cache.SCANNER_MODULES)


def test_rows_of_their_own_file_skip_the_distinct_pass(monkeypatch):
    """Note [Rows of their own file]: with the schema's `file` columns, a
    file whose rows all hold it there is marked so, and the tree's rows are
    those of the pass that makes every relation distinct; a row two files
    give that holds neither (here: added to both) is written once."""
    from extractors.cpp import resolve as R
    from extractors.cpp.incremental import TreeFacts, resolve_tree
    from torchtalk.datalog import parse_file
    from torchtalk.store import SCHEMA_PATH

    decls = parse_file(SCHEMA_PATH).decls
    columns = {rel: [c.name for c in d.columns].index("file") for rel, d in decls.items()
               if "file" in [c.name for c in d.columns]}
    sources = {"aten/a.cpp": b"namespace at { void f() {} }\n",
               "aten/b.cpp": b"namespace at { void g() { f(); } }\n"}
    facts = [scan_file(rel, src) for rel, src in sources.items()]
    digests = {rel: f"d-{rel}" for rel in sources}
    plain_rows, plain_stats, _ = resolve_tree(TreeFacts.of(facts), digests)
    rows, stats, state = resolve_tree(TreeFacts.of(facts), digests, file_columns=columns)
    assert (rows, stats) == (plain_rows, plain_stats)
    assert [state["files"][rel][5] for rel in sources] == [True, True]
    assert rows["calls"] == [("at::g", "at::f", "aten/b.cpp", 1, "scope")]

    shared = ("at::x", "at::y", "aten/shared.h", 7, "qualified")
    file_rows = R._file_rows

    def with_shared(f, rv):
        frows, fstats, fsites = file_rows(f, rv)
        frows.setdefault("calls", []).append(shared)
        return frows, fstats, fsites

    monkeypatch.setattr(R, "_file_rows", with_shared)
    rows, _stats, state = resolve_tree(TreeFacts.of(facts), digests, file_columns=columns)
    assert [state["files"][rel][5] for rel in sources] == [False, False]
    assert rows["calls"].count(shared) == 1
