"""Precise tier (extractors/clang): exact calls_precise rows from a hand-written
snippet and from real ATen TUs, the parse cache, failures that are counted and
never fatal."""

from __future__ import annotations

import dataclasses
import json
import textwrap
from pathlib import Path

import pytest

from extractors.base import ExtractContext

UTIL_H = """\
#pragma once
namespace ns {
int f(int x);
double f(double x);
struct S {
  int m(int) const;
  static int s() { return 2; }
  S operator+(const S&) const { return *this; }
};
}  // namespace ns
"""

A_CPP = """\
#include "util.h"
#include <cstddef>
#include <vector>
#define CHECK(cond) ((cond) ? 0 : ns::fail())
namespace ns {
int fail() { return 1; }
int f(int x) { return x; }
double f(double x) { return x; }
int S::m(int) const { return 1; }
template <typename T> T twice(T x) { return f(x) + f(x); }
namespace {
int hidden() { return 3; }
}  // namespace
int caller() {
  S obj;
  int a = f(1);
  double b = f(2.0);
  a += obj.m(a);
  a += S::s();
  a += twice<int>(a);
  S c = obj + obj;
  std::vector<int> v;
  v.push_back(a);
  auto lam = [&] { return hidden(); };
  CHECK(
      f(a) > 0);
  return a + static_cast<int>(b) + lam();
}
}  // namespace ns
int top = ns::fail();
struct B { B& x(int) { return *this; } B& y() { return *this; } };
int chain() {
  B b;
  b.x(1)
      .y();
  return 0;
}
"""

B_CPP = """\
namespace other {
int g() { return 0; }
int h() { return g(); }
}  // namespace other
"""

BROKEN_CPP = """\
#include "util.h"
#include <no_such_header.h>
int k() { return ns::f(1); }
"""

GPU_CPP = """\
#include <cuda_runtime_api.h>
int k() { return 0; }
"""


class RowSink:
    """`rows`: the calls_precise rows; `other`: the other relations' rows."""

    def __init__(self) -> None:
        self.rows: list[tuple] = []
        self.other: dict[str, list[tuple]] = {"calls_op": [], "precise_file": []}
        self.warnings: list[tuple[str, int, str]] = []

    def add(self, relation: str, *values) -> None:
        if relation == "calls_precise":
            self.rows.append(values)
        else:
            self.other[relation].append(values)

    def warn(self, file: str, line: int, message: str) -> None:
        self.warnings.append((file, line, message))

    def progress(self, advance: int = 1, total: int | None = None, what: str = "") -> None:
        pass


@pytest.fixture
def snippet(tmp_path: Path) -> Path:
    """A tiny tree with a compile_commands.json (so no torchgen is needed)."""
    root = tmp_path / "tree"
    root.mkdir()
    files = {"util.h": UTIL_H, "a.cpp": A_CPP, "b.cpp": B_CPP, "broken.cpp": BROKEN_CPP, "gpu.cpp": GPU_CPP}
    for name, text in files.items():
        (root / name).write_text(text)
    db = [
        {"directory": str(root), "file": "a.cpp",
         "arguments": ["clang++", "-std=c++17", "-c", "a.cpp", "-o", "a.o"]},
        {"directory": str(root), "file": "b.cpp", "command": "clang++ -std=c++17 -c b.cpp -o b.o"},
        {"directory": str(root), "file": "broken.cpp", "command": "clang++ -std=c++17 -c broken.cpp"},
        {"directory": str(root), "file": "gpu.cpp", "command": "clang++ -std=c++17 -c gpu.cpp"},
    ]
    (root / "compile_commands.json").write_text(json.dumps(db))
    return root


def _run(root: Path, cache: Path, names: list[str], **kw):
    from extractors.clang import run

    sink = RowSink()
    stats = run(ExtractContext(root, cache, jobs=2), sink, [root / n for n in names], **kw)
    return sink, stats


INTERNAL_H = "namespace ns { namespace { inline int ha() { return 1; } } static inline int hs() { return 2; } }\n"
INTERNAL_CPP = """\
#include "internal.h"
namespace ns {
static int s();
namespace { int a() { return ha() + hs(); } }
static int s() { return a(); }
int pub() { return s() + a(); }
}
"""


def test_internal_linkage_ids_agree_with_the_fast_tier(tmp_path: Path) -> None:
    """Note [Internal linkage ids]: both tiers name an anonymous namespace's
    and a `static` function by the file defining it, a header's included."""
    from extractors.cpp.resolve import resolve
    from extractors.cpp.scan import scan_file

    root = tmp_path / "tree"
    root.mkdir()
    (root / "sub").mkdir()
    (root / "sub" / "internal.h").write_text(INTERNAL_H)
    (root / "sub" / "internal.cpp").write_text(INTERNAL_CPP)
    (root / "compile_commands.json").write_text(json.dumps([
        {"directory": str(root), "file": "sub/internal.cpp", "command": "clang++ -std=c++17 -c sub/internal.cpp"}]))
    sink, stats = _run(root, tmp_path / "cache", ["sub/internal.cpp"])
    assert stats.ok == 1
    cpp, h = "ns::(anonymous:sub/internal.cpp)::", "sub/internal.h"
    s = "ns::(static:sub/internal.cpp)::s"
    assert sorted(sink.rows) == [
        (cpp + "a", f"ns::(anonymous:{h})::ha", "sub/internal.cpp", 4),
        (cpp + "a", f"ns::(static:{h})::hs", "sub/internal.cpp", 4),
        (s, cpp + "a", "sub/internal.cpp", 5),
        ("ns::pub", cpp + "a", "sub/internal.cpp", 6),
        ("ns::pub", s, "sub/internal.cpp", 6),
    ]
    facts = [scan_file(rel, (root / rel).read_bytes()) for rel in ("sub/internal.cpp", "sub/internal.h")]
    rows, _stats, _ = resolve(facts)
    assert sorted(r[:4] for r in rows["calls"]) == sorted(sink.rows)


def test_snippet_exact_edges(snippet: Path, tmp_path: Path) -> None:
    sink, stats = _run(snippet, tmp_path / "cache", ["a.cpp", "b.cpp"])
    assert sorted(sink.rows) == sorted([
        ("ns::caller", "ns::(anonymous:a.cpp)::hidden", "a.cpp", 24),  # inside a lambda
        ("ns::caller", "ns::S::m", "a.cpp", 18),  # method, defined out of line
        ("ns::caller", "ns::S::s", "a.cpp", 19),  # static method
        ("ns::caller", "ns::f(int)", "a.cpp", 16),  # overload f(int) (Note [Overload ids])
        ("ns::caller", "ns::f(double)", "a.cpp", 17),  # overload f(double)
        ("ns::caller", "ns::f(int)", "a.cpp", 26),  # macro argument: its own line
        ("ns::caller", "ns::fail", "a.cpp", 25),  # macro body: the line of the use
        ("ns::caller", "ns::twice", "a.cpp", 20),  # template specialization
        ("ns::twice", "ns::f(double)", "a.cpp", 10),  # dependent call, one overload name: each overload
        ("ns::twice", "ns::f(int)", "a.cpp", 10),
        ("chain", "B::x", "a.cpp", 34),
        ("chain", "B::y", "a.cpp", 35),  # a call chain: the line of the member's name
        ("other::h", "other::g", "b.cpp", 3),
    ])
    assert (stats.tus, stats.ok, stats.fatal, stats.cached) == (2, 2, 0, 0)
    # operator+ and operator() of the lambda, the constructors of S, std::vector and B,
    # vector::push_back, the global initializer
    assert stats.dropped == {"operator": 2, "constructor": 3, "external": 1, "outside_function": 1}
    assert sink.warnings == []
    assert sorted(sink.other["precise_file"]) == [("a.cpp",), ("b.cpp",)]
    assert sink.other["calls_op"] == []  # no ATen here


def test_overload_ids_agree_with_the_fast_tier(snippet: Path, tmp_path: Path) -> None:
    """Note [Overload ids]: the compiler tier names each overload as the fast
    tier does (from the definition, or the header's declaration), and a name
    with one parameter list without one."""
    from extractors.cpp.resolve import resolve
    from extractors.cpp.scan import scan_file

    sink, _stats = _run(snippet, tmp_path / "cache", ["a.cpp", "b.cpp"])
    facts = [scan_file(rel, (snippet / rel).read_bytes()) for rel in ("a.cpp", "b.cpp", "util.h")]
    rows, _s, _ = resolve(facts)
    ids = {r[0] for r in rows["func"]}
    assert {"ns::f(int)", "ns::f(double)", "ns::twice", "ns::caller"} <= ids
    assert {c for r in sink.rows for c in r[:2]} <= ids
    fast = {r[:4] for r in rows["calls"] if r[2] == "a.cpp"}
    assert {("ns::caller", "ns::f(int)", "a.cpp", 16), ("ns::caller", "ns::f(double)", "a.cpp", 17)} <= fast


def test_cache_reuses_and_header_edit_invalidates(snippet: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first, _ = _run(snippet, cache, ["a.cpp", "b.cpp"])
    again, stats = _run(snippet, cache, ["a.cpp", "b.cpp"])
    assert stats.cached == 2 and sorted(again.rows) == sorted(first.rows)
    (snippet / "util.h").write_text(UTIL_H.replace("int m(int) const;", "int m(int) const;  // edited"))
    _, stats = _run(snippet, cache, ["a.cpp", "b.cpp"])
    assert stats.cached == 1  # b.cpp does not include util.h; a.cpp is parsed again
    deps = json.loads(next((cache / "tu").glob("*.json")).read_text())
    assert "deps" in deps


def test_unparsable_tu_is_reported_and_counted(snippet: Path, tmp_path: Path) -> None:
    sink, stats = _run(snippet, tmp_path / "cache", ["broken.cpp", "b.cpp"])
    assert (stats.tus, stats.ok, stats.fatal) == (2, 1, 1)
    assert sink.other["precise_file"] == [("b.cpp",)]  # the fast tier keeps broken.cpp
    assert sink.warnings == [
        ("broken.cpp", 2, "precise: broken.cpp does not parse: 'no_such_header.h' file not found")
    ]
    assert stats.failed == [("broken.cpp", "broken.cpp:2: 'no_such_header.h' file not found")]
    assert ("other::h", "other::g", "b.cpp", 3) in sink.rows


def test_missing_sdk_header_names_the_sdk(snippet: Path, tmp_path: Path) -> None:
    sink, stats = _run(snippet, tmp_path / "cache", ["gpu.cpp"])
    assert (stats.tus, stats.ok, stats.fatal) == (1, 0, 1)
    assert sink.warnings == [("gpu.cpp", 1, (
        "precise: gpu.cpp does not parse: 'cuda_runtime_api.h' file not found"
        " (the CUDA 12.4 headers are missing: run `torchtalk fetch cuda`)"))]


@pytest.mark.parametrize("message, expected", [
    ("'cuda_runtime_api.h' file not found", "the CUDA 12.4 headers are missing: run `torchtalk fetch cuda`"),
    ("'nv/target' file not found", "the CUDA 12.4 headers are missing: run `torchtalk fetch cuda`"),
    ("'curand_mtgp32_kernel.h' file not found", "the CUDA 12.4 headers are missing: run `torchtalk fetch cuda`"),
    ("'oneapi/dnnl/dnnl.hpp' file not found",
     "the XPU (SYCL and oneDNN, oneAPI 2025.0) headers are missing: run `torchtalk fetch xpu`"),
    ("'sycl/sycl.hpp' file not found",
     "the XPU (SYCL and oneDNN, oneAPI 2025.0) headers are missing: run `torchtalk fetch xpu`"),
    ("'nvToolsExt.h' file not found", "the CUDA 12.4 headers are missing: run `torchtalk fetch cuda`"),
    ("'cudnn.h' file not found", "the cuDNN 9.1 headers are missing: run `torchtalk fetch cudnn`"),
    ("'cute/algorithm/copy.hpp' file not found", "the CUTLASS 3.5.1 headers are missing: run `torchtalk fetch cutlass`"),
    ("'cutlass/cutlass.h' file not found", "the CUTLASS 3.5.1 headers are missing: run `torchtalk fetch cutlass`"),
    ("'pybind11/pybind11.h' file not found", "the pybind11 2.13.6 headers are missing: run `torchtalk fetch pybind11`"),
    ("'mkl_dfti.h' file not found", "the MKL 2024.2 headers are missing: run `torchtalk fetch mkl`"),
    ("'nlohmann/json.hpp' file not found",
     "the nlohmann/json 3.11.3 headers are missing: run `torchtalk fetch nlohmann`"),
    ("'Python.h' file not found",
     "the Python headers are missing: install the -dev package of the Python that runs torchtalk"),
    ("'ATen/ops/eq_mps_dispatch.h' file not found", None),
    ("'cudaless.h' file not found", None),
    ("'cutlassy.h' file not found", None),
    ("expected ';' after expression", None),
])
def test_sdk_hint(message: str, expected: str | None) -> None:
    from extractors.clang.sdk import hint

    assert hint(message) == expected


def _fake_wheel(path: Path, files: dict[str, str]) -> None:
    import zipfile

    with zipfile.ZipFile(path, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)


def test_sdk_fetch_unpacks_headers_once(tmp_path: Path, monkeypatch) -> None:
    """Only the wheels' headers land in <cache>/sdk/NAME/include, made atomically;
    a second fetch is a no-op; new pins fetch again (Note [SDK headers])."""
    from extractors.clang import sdk

    monkeypatch.setenv("TORCHTALK_CACHE_DIR", str(tmp_path / "cache"))
    fake = sdk.Sdk("fake", "Fake 1.0", ("fake-rt==1.0", "fake-blas==1.0"), r"nvidia/[^/]+/include/(.+)",
                   "fake_api.h", ("fake_api.h",), subdirs=("sub",))
    monkeypatch.setitem(sdk.SDKS, "fake", fake)
    calls = []

    def download(wheels, dest):
        calls.append(wheels)
        dest.mkdir(parents=True)
        _fake_wheel(dest / "rt.whl", {
            "nvidia/__init__.py": "", "nvidia/rt/include/__init__.py": "",
            "nvidia/rt/include/fake_api.h": "int f();", "nvidia/rt/include/sub/x.h": "",
            "nvidia/rt/lib/libfake.so": "ELF", "fake_rt-1.0.dist-info/RECORD": ""})
        _fake_wheel(dest / "blas.whl", {"nvidia/blas/include/fake_blas.h": "int g();",
                                        "nvidia/blas/include/../../escape.h": ""})
        return sorted(dest.glob("*.whl"))

    monkeypatch.setattr(sdk, "_download", download)
    inc = sdk.fetch("fake")
    root = tmp_path / "cache" / "sdk"
    assert inc == root / "fake" / "include"
    assert sorted(p.relative_to(inc).as_posix() for p in inc.rglob("*") if p.is_file()) == [
        "fake_api.h", "fake_blas.h", "sub/x.h"]
    assert (root / "fake" / "pins.txt").read_text() == "fake-rt==1.0\nfake-blas==1.0\n"
    assert [p.name for p in root.iterdir()] == ["fake"]  # no temp dir, no wheels left
    py = sdk.python_include()  # the interpreter's Python.h, last (None without a -dev package)
    assert sdk.include_dirs() == (inc, inc / "sub", *([py] if py else []))
    assert sdk.fetch("fake") == inc and len(calls) == 1
    monkeypatch.setitem(sdk.SDKS, "fake", dataclasses.replace(fake, wheels=("fake-rt==2.0",)))
    assert sdk.fetch("fake") == inc and len(calls) == 2
    assert [p.name for p in root.iterdir()] == ["fake"]


def test_sdk_fetch_added_pin_downloads_only_it(tmp_path: Path, monkeypatch) -> None:
    """A pin added to an SDK (cuRAND to CUDA) downloads that wheel only and
    keeps the headers already there."""
    from extractors.clang import sdk

    monkeypatch.setenv("TORCHTALK_CACHE_DIR", str(tmp_path / "cache"))
    fake = sdk.Sdk("fake", "Fake 1.0", ("fake-rt==1.0",), r"nvidia/[^/]+/include/(.+)", "fake_api.h",
                   ("fake_api.h", "fake_rand*.h"))
    monkeypatch.setitem(sdk.SDKS, "fake", fake)
    calls = []
    contents = {"fake-rt==1.0": {"nvidia/rt/include/fake_api.h": "int f();"},
                "fake-rand==1.0": {"nvidia/rand/include/fake_rand_kernel.h": "int r();"}}

    def download(wheels, dest):
        calls.append(wheels)
        dest.mkdir(parents=True)
        for i, w in enumerate(wheels):
            _fake_wheel(dest / f"{i}.whl", contents[w])
        return sorted(dest.glob("*.whl"))

    monkeypatch.setattr(sdk, "_download", download)
    inc = sdk.fetch("fake")
    monkeypatch.setitem(sdk.SDKS, "fake", dataclasses.replace(fake, wheels=("fake-rt==1.0", "fake-rand==1.0")))
    assert sdk.fetch("fake") == inc
    assert calls == [("fake-rt==1.0",), ("fake-rand==1.0",)]
    assert sorted(p.name for p in inc.iterdir()) == ["fake_api.h", "fake_rand_kernel.h"]
    assert (inc.parent / "pins.txt").read_text() == "fake-rt==1.0\nfake-rand==1.0\n"
    assert sdk.SDKS["fake"].owns("fake_rand_kernel.h") and not sdk.SDKS["fake"].owns("fake_other.h")


def test_sdk_fetch_errors(tmp_path: Path, monkeypatch, capsys) -> None:
    from torchtalk.cli import main

    monkeypatch.setenv("TORCHTALK_CACHE_DIR", str(tmp_path / "cache"))
    assert main(["fetch", "cuda", "--dest", str(tmp_path)]) == 1
    assert capsys.readouterr().err == (
        "torchtalk: error: --dest is for the source tree; SDK headers go to the user cache dir"
        " (set TORCHTALK_CACHE_DIR to move it)\n")
    from extractors.clang.sdk import fetch
    from torchtalk.errors import InputError

    with pytest.raises(InputError) as err:
        fetch("rocm")
    assert err.value.render() == "error: unknown SDK 'rocm' (one of: cuda, cudnn, cutlass, mkl, nlohmann, pybind11, xpu)"


CUDA_STUB_H = """\
#define __global__ __attribute__((global))
struct dim3 { unsigned x, y, z; dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {} };
extern "C" int __cudaPushCallConfiguration(dim3 grid, dim3 block, unsigned long shmem = 0, void* stream = 0);
"""

K_CU = """\
#include <cuda_stub.h>
namespace k {
template <typename T> __global__ void fill(T* p) { p[0] = T(1); }
__global__ void zero(int* p) { p[0] = 0; }
int helper(int x) { return x; }
void host(int* p, bool c) {
  fill<int><<<1, 1>>>(p);
  auto kern = &fill<int>;
  kern<<<helper(1),
         1>>>(p);
  auto pick = c ? &zero : &fill<int>;
  pick<<<1, 1>>>(p);
}
void param(void (*f)(int*), int* p) { f<<<1, 1>>>(p); }
}  // namespace k
"""


def test_cuda_launches_resolved_by_the_compiler(tmp_path: Path) -> None:
    """A .cu TU parsed as CUDA host code: a call of a __global__ function is a
    launch (not an edge), at the line of the kernel's name; a kernel held in a
    variable is found through the variable's initializer (both arms of a
    conditional); a kernel passed as a parameter is unresolved."""
    root, sdk = tmp_path / "tree", tmp_path / "sdk"
    root.mkdir()
    sdk.mkdir()
    (sdk / "cuda_stub.h").write_text(CUDA_STUB_H)  # outside the tree, as CUDA's headers are
    (root / "k.cu").write_text(K_CU)
    (root / "compile_commands.json").write_text(json.dumps([{
        "directory": str(root), "file": "k.cu",
        "command": f"clang++ -x cuda --cuda-host-only -nocudainc -nocudalib -std=c++17 -isystem {sdk} -c k.cu"}]))
    sink, stats = _run(root, tmp_path / "cache", ["k.cu"])
    assert (stats.tus, stats.ok, stats.fatal) == (1, 1, 0)
    assert sorted(stats.launches) == [
        ("k::host", "k::fill", "k.cu", 7),
        ("k::host", "k::fill", "k.cu", 9),  # through `auto kern = &fill<int>`
        ("k::host", "k::fill", "k.cu", 12),
        ("k::host", "k::zero", "k.cu", 12),  # `c ? &zero : &fill<int>`
    ]
    assert sink.rows == [("k::host", "k::helper", "k.cu", 9)]
    assert stats.unresolved == [("k::param", "f", "k.cu", 14)]
    assert sink.other["precise_file"] == [("k.cu",)]


def test_operator_call_line_is_the_operators(tmp_path: Path) -> None:
    """An operator call's line is its operator's (`a\n + b`: the `+`), as a
    named call's is its name's; the cursor itself starts at `a`."""
    from clang import cindex as ci

    from extractors.clang.visit import Namer, Walker

    src = tmp_path / "op.cpp"
    src.write_text(textwrap.dedent("""\
        struct T { T operator+(const T&) const; T operator-() const; T operator[](long) const; };
        T operator*(const T&, const T&);
        T f(T a, T b) {
          T c = a
              + b;
          T d = a
              * b;
          T e = -
              a;
          T g = a
              [3];
          return c;
        }
        """))
    tu = ci.Index.create().parse(str(src), args=["-x", "c++", "-std=c++17"])
    walker = Walker(tu, "op.cpp", lambda path: "tree", Namer())
    got = [(c.referenced.spelling, c.location.line, walker._line(c, operator=True))
           for c in tu.cursor.walk_preorder()
           if c.kind == ci.CursorKind.CALL_EXPR and c.referenced and c.referenced.spelling.startswith("operator")]
    assert got == [("operator+", 4, 5), ("operator*", 6, 7), ("operator-", 8, 8), ("operator[]", 10, 11)]


LOOPS_H = """\
#pragma once
namespace ns {
int step(int x);
double step(double x);
inline int loop(int n) {
  int s = 0;
  for (int i = 0; i < n; i++)
    s += step(i);
  return s;
}
template <typename T> T each(T x) { return step(x); }
}  // namespace ns
"""
USES_CPP = """\
#include "loops.h"
namespace ns {
int step(int x) { return x; }
double step(double x) { return x; }
int run() { return loop(3) + each(1); }
}  // namespace ns
"""


def test_header_walked_at_its_own_lines(tmp_path: Path) -> None:
    """Note [Header jobs]: a header is parsed as its own main file, with its
    nearest TU's flags from the compile database: its functions' calls are
    rows at the header's file:line (a template's dependent call: each
    overload of its one name), it gets `precise_file`, and the TU that
    includes it keeps only its own calls (no row twice). Editing the header
    parses it and its TU again."""
    from extractors.clang import header_files

    root = tmp_path / "tree"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "loops.h").write_text(LOOPS_H)
    (root / "sub" / "uses.cpp").write_text(USES_CPP)
    (root / "compile_commands.json").write_text(json.dumps([
        {"directory": str(root), "file": "sub/uses.cpp", "command": "clang++ -std=c++17 -c sub/uses.cpp"}]))
    cache = tmp_path / "cache"
    sink, stats = _run(root, cache, ["sub/uses.cpp", "sub/loops.h"])
    h = "sub/loops.h"
    assert (stats.tus, stats.headers, stats.ok, stats.fatal) == (2, 1, 2, 0)
    assert sorted(sink.rows) == [
        ("ns::each", "ns::step(double)", h, 11),
        ("ns::each", "ns::step(int)", h, 11),
        ("ns::loop", "ns::step(int)", h, 8),
        ("ns::run", "ns::each", "sub/uses.cpp", 5),
        ("ns::run", "ns::loop", "sub/uses.cpp", 5),
    ]
    assert sorted(sink.other["precise_file"]) == [(h,), ("sub/uses.cpp",)]
    (root / "sub" / "loops.h").write_text(LOOPS_H.replace("int s = 0;", "int s = 0;  // edited"))
    again, stats = _run(root, cache, ["sub/uses.cpp", "sub/loops.h"])
    assert stats.cached == 0 and sorted(again.rows) == sorted(sink.rows)
    _, stats = _run(root, cache, ["sub/uses.cpp", "sub/loops.h"])
    assert stats.cached == 2
    # a header that needs what its includer declared before it: its rows, but no claim on the file
    (root / "sub" / "part.h").write_text("namespace ns {\ninline int twice() { return loop(2) + missing(); }\n}\n")
    part, stats = _run(root, cache, ["sub/part.h"])
    assert (stats.tus, stats.ok, stats.incomplete, stats.fatal) == (1, 0, 1, 0)
    assert part.other["precise_file"] == [] and part.warnings == []
    # the layer's scope: headers under HEADER_DIRS only, not those of test or ROCm dirs
    for rel in ("aten/src/ATen/native/cpu/Loops.h", "aten/src/ATen/native/cuda/Sort.cuh",
                "aten/src/ATen/native/hip/H.h", "aten/src/ATen/native/mps/M.h", "aten/src/ATen/core/T.h",
                "aten/src/ATen/native/quantized/cpu/qnnpack/test/t.h"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    rels = lambda files: [f.relative_to(tmp_path).as_posix() for f in files]  # noqa: E731
    assert rels(header_files(tmp_path, ["aten", "c10"])) == [
        "aten/src/ATen/native/cpu/Loops.h", "aten/src/ATen/native/cuda/Sort.cuh"]
    assert rels(header_files(tmp_path, ["aten/src/ATen/native/cpu"])) == ["aten/src/ATen/native/cpu/Loops.h"]
    assert rels(header_files(tmp_path, ["c10"])) == []


CTOR_CPP = """\
namespace ns {
struct P {
  P(int a, int b);
  P(const P& other);
};
struct Q {};
P::P(int a, int b) {}
P::P(const P& other) {}
P make() {
  P a(1, 2);
  P b = a;
  Q q = Q();
  return P(3,
           4);
}
}  // namespace ns
"""


def test_written_construction_is_an_edge(tmp_path: Path) -> None:
    """Note [Precise edges]: a temporary written with its class's name
    (`P(3, 4)`) is an edge to the constructor the tree declares, at the
    class name's line, as the fast tier reads it; a variable's construction
    (`P a(1, 2)`), a copy and a constructor the compiler declares (Q's) are
    counted, not kept."""
    root = tmp_path / "tree"
    root.mkdir()
    (root / "ctor.cpp").write_text(CTOR_CPP)
    (root / "compile_commands.json").write_text(json.dumps([
        {"directory": str(root), "file": "ctor.cpp", "command": "clang++ -std=c++17 -c ctor.cpp"}]))
    sink, stats = _run(root, tmp_path / "cache", ["ctor.cpp"])
    assert sink.rows == [("ns::make", "ns::P::P(int, int)", "ctor.cpp", 13)]
    assert stats.dropped["constructor"] == 3


def test_timeout_is_counted_not_fatal(snippet: Path, tmp_path: Path) -> None:
    sink, stats = _run(snippet, tmp_path / "cache", ["b.cpp"], timeout=0.0)
    assert (stats.tus, stats.ok, stats.timeout) == (1, 0, 1)
    assert sink.rows == []
    assert sink.warnings == [("b.cpp", 1, "precise: b.cpp does not parse: parse exceeded 0 s")]


def test_configure_template() -> None:
    from extractors.clang.flags import configure

    text = textwrap.dedent("""\
        #cmakedefine C10_BUILD_SHARED_LIBS
        #cmakedefine C10_USE_GLOG
        #define AT_MKL_ENABLED() @AT_MKL_ENABLED@
        #define AT_NNPACK_ENABLED() @AT_NNPACK_ENABLED@
        #define AT_PARALLEL_NATIVE @AT_PARALLEL_NATIVE@
        #define NVCC_FLAGS_EXTRA "@NVCC_FLAGS_EXTRA@"
        """)
    assert configure(text) == textwrap.dedent("""\
        #define C10_BUILD_SHARED_LIBS
        /* #undef C10_USE_GLOG */
        #define AT_MKL_ENABLED() 1
        #define AT_NNPACK_ENABLED() 0
        #define AT_PARALLEL_NATIVE 1
        #define NVCC_FLAGS_EXTRA ""
        """)


def test_configure_version_header(tmp_path: Path) -> None:
    """torch/version.h.in gets the tree's version.txt (2.6.0a0 -> 2, 6, 0);
    a tree without one leaves the @VARS@ to the CPU-build rule."""
    from extractors.clang.flags import configure, tree_version

    (tmp_path / "version.txt").write_text("2.6.0a0\n")
    text = ('#define TORCH_VERSION_MAJOR @TORCH_VERSION_MAJOR@\n'
            '#define TORCH_VERSION "@TORCH_VERSION_MAJOR@.@TORCH_VERSION_MINOR@.@TORCH_VERSION_PATCH@"\n')
    assert configure(text, tree_version(tmp_path)) == ('#define TORCH_VERSION_MAJOR 2\n'
                                                       '#define TORCH_VERSION "2.6.0"\n')
    assert tree_version(tmp_path / "none") == {}
    (tmp_path / "version.txt").write_text("main\n")
    assert tree_version(tmp_path) == {}


def test_scope_leaves_out_what_no_build_compiles(tmp_path: Path) -> None:
    """Note [Not a TU of the build]: torchgen templates and the ROCm-only
    dirs are not TUs; they are listed as excluded, tests are neither."""
    from extractors.clang import excluded_tus, tu_files

    for rel in ("aten/src/ATen/native/A.cpp", "aten/src/ATen/templates/Functions.cpp",
                "aten/src/ATen/hip/impl/G.cpp", "aten/src/ATen/native/miopen/Conv_miopen.cpp",
                "aten/src/ATen/native/cuda/K.cu", "aten/src/ATen/test/t.cpp", "c10/core/x_test.cpp"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    rels = lambda files: [f.relative_to(tmp_path).as_posix() for f in files]  # noqa: E731
    assert rels(tu_files(tmp_path, ["aten", "c10"])) == ["aten/src/ATen/native/A.cpp", "aten/src/ATen/native/cuda/K.cu"]
    assert rels(excluded_tus(tmp_path, ["aten", "c10"])) == [
        "aten/src/ATen/hip/impl/G.cpp", "aten/src/ATen/native/miopen/Conv_miopen.cpp",
        "aten/src/ATen/templates/Functions.cpp"]


def test_fetch_names_every_sdk() -> None:
    """`torchtalk fetch` offers exactly the SDKs sdk.py knows."""
    from extractors.clang.sdk import SDKS
    from torchtalk.cli.fetch import SDK_NAMES

    assert SDK_NAMES == tuple(SDKS)


def test_compile_db_options_cleaned(snippet: Path) -> None:
    from extractors.clang.flags import load_compile_db

    db = load_compile_db(snippet)
    assert db[str(snippet / "a.cpp")].args == ("-std=c++17",)
    assert db[str(snippet / "b.cpp")].directory == str(snippet)


# ----------------------------------------------------------------- the real tree

REAL_TUS = [
    "aten/src/ATen/native/LinearAlgebra.cpp",
    "aten/src/ATen/native/cpu/airy_ai.cpp",
]


@pytest.fixture(scope="module")
def real_cache(tmp_path_factory) -> Path:
    """One cache for this module's real parses: torchgen and the PCH run once."""
    return tmp_path_factory.mktemp("precise-cache")


@pytest.fixture(scope="module")
def real(tree: Path, real_cache: Path) -> tuple[RowSink, object]:
    """Two real TUs parsed once with synthesized flags (torchgen headers included)."""
    return _run(tree, real_cache, REAL_TUS)


@pytest.mark.real_tree
def test_real_matmul_edges(real) -> None:
    sink, _ = real
    f = "aten/src/ATen/native/LinearAlgebra.cpp"
    rows = set(sink.rows)
    got = sorted(r for r in rows if r[0] == "at::native::matmul")
    assert got == [
        ("at::native::matmul", "at::namedinference::compute_matmul_outnames", f, 2181),
        # an overloaded name: the overload's id, spelled as the fast tier spells it (Note [Overload ids])
        ("at::native::matmul", "at::namedinference::propagate_names_if_nonempty(const Tensor&, DimnameList, bool)", f, 2184),
        ("at::native::matmul", "at::native::(static:aten/src/ATen/native/LinearAlgebra.cpp)::_matmul_impl", f, 2183),
    ]
    # methods of Tensor (the generated TensorBody.h) and functions of ATen/ops/*.h
    # that reach an op are calls_op rows (test_clang_real.py), not edges
    assert not any(r[1] in ("at::Tensor::mm", "at::mm_out") for r in rows)
    assert ("at::native::(static:aten/src/ATen/native/LinearAlgebra.cpp)::_matmul_impl", "mm", f, 2033, "compiler") in sink.other["calls_op"]
    assert ("at::native::(static:aten/src/ATen/native/LinearAlgebra.cpp)::_matmul_impl", "mm", f, 2032, "compiler") in sink.other["calls_op"]
    # TensorBase::dim reads the TensorImpl: an edge, not an op call
    assert ("at::native::(static:aten/src/ATen/native/LinearAlgebra.cpp)::_matmul_impl", "at::TensorBase::dim", f, 2005) in rows
    assert ("at::native::matmul_out", "at::native::(static:aten/src/ATen/native/LinearAlgebra.cpp)::_matmul_impl", f, 2190) in rows


@pytest.mark.real_tree
def test_real_cpu_kernel_exact(real) -> None:
    """A per-arch kernel: `inline namespace CPU_CAPABILITY` named as written,
    calls inside the AT_DISPATCH lambda on their own lines, the calls that
    TORCH_INTERNAL_ASSERT / AT_DISPATCH expand to on the line of the macro."""
    sink, _ = real
    f = "aten/src/ATen/native/cpu/airy_ai.cpp"
    k = "at::native::CPU_CAPABILITY::(static:aten/src/ATen/native/cpu/airy_ai.cpp)::airy_ai_kernel"
    assert sorted(r for r in sink.rows if r[2] == f) == [
        (k, "airy_ai_forward", f, 17),
        (k, "at::TensorIteratorBase::common_dtype", f, 15),
        (k, "at::TensorIteratorBase::ntensors", f, 13),
        (k, "at::native::CPU_CAPABILITY::cpu_kernel", f, 16),
        (k, "at::should_include_kernel_dtype", f, 15),
        (k, "c10::detail::torchCheckFail(const char*, const char*, uint32_t, const string&)", f, 15),
        (k, "c10::detail::torchCheckMsgImpl(const char*, const Args&...)", f, 15),  # the template's
        (k, "c10::detail::torchInternalAssertFail(const char*, const char*, uint32_t, const char*, CompileTimeEmptyString)",
         f, 13),
        (k, "c10::str", f, 13),
        (k, "c10::toString(ScalarType)", f, 15),
        (k, "detail::scalar_type", f, 15),
    ]


@pytest.mark.real_tree
def test_real_cuda_tu_parses_with_sdk(tree: Path, real_cache: Path, cuda_sdk: Path) -> None:
    """cuda/Resize.cpp stopped at c10/cuda/CUDAStream.h:3, "'cuda_runtime_api.h'
    file not found", until `torchtalk fetch cuda` (Note [SDK headers]): now it
    parses, and a call made inside a CUDA runtime call (cudaMemcpyAsync,
    declared by cuda_runtime_api.h) resolves to c10's CUDA stream API."""
    f = "aten/src/ATen/native/cuda/Resize.cpp"
    sink, stats = _run(tree, real_cache, [f])
    assert (stats.tus, stats.ok, stats.fatal) == (1, 1, 0)
    assert sink.warnings == []
    rows = set(sink.rows)
    assert ("at::native::resize_bytes_cuda", "c10::cuda::getCurrentCUDAStream", f, 41) in rows
    assert ("at::native::resize_bytes_cuda", "c10::cuda::c10_cuda_check_implementation", f, 35) in rows
    assert ("at::native::resize_cuda_", "at::native::resize_impl_cuda_", f, 58) in rows


@pytest.mark.real_tree
def test_real_pch_gives_same_edges(real, tree: Path, tmp_path: Path) -> None:
    """The common PCH (Note [Common PCH]) is a speed-up only: same rows without it."""
    sink, _ = real
    f = "aten/src/ATen/native/cpu/airy_ai.cpp"
    plain, stats = _run(tree, tmp_path / "nopch", [f], use_pch=False)
    assert stats.ok == 1
    assert sorted(plain.rows) == sorted(r for r in sink.rows if r[2] == f)


DEPENDENT_EXT_H = "namespace ext { template <class T> struct vec { long size() const; }; }\n"
DEPENDENT_CPP = """\
#include "ext.h"
namespace other { template <class T> T twice(T x); }
#define MAKE(v) V<T>::make(v)
namespace ns {
using other::twice;
template <class T> struct V { void store(T*) const; static V make(T); };
template <class T> V<T> operator+(const V<T>&, const V<T>&);
struct Tn {};
Tn operator/(const Tn&, double);
Tn operator/(double, const Tn&);
template <class T> struct MaxF { T operator()(T a, T b) const; };
template <class T> T k(T* p, const Tn& t, T s) {
  using fV = V<T>;
  fV x;
  x.store(p);
  fV y = x + x;
  Tn u = t / s;
  T z = T(1);
  MaxF<T> m;
  m(z, z);
  ext::vec<T> v;
  v.size();
  [&] { y.store(p); }();
  MAKE(z);
  twice<T>(z);
  return z + s;
}
}
"""


def test_dependent_calls_by_what_the_compiler_knows(tmp_path: Path) -> None:
    """Note [Dependent operators and constructions]: in a template, a member
    call through an alias of a class template, an operator (its candidates
    by the operands' classes), a construction, a functor, a member of a class
    outside the tree and an immediately called lambda are each what the
    compiler knows them to be; none is left unresolved. A static member
    called through a macro, and a function a using-declaration brings in,
    are bound too."""
    from clang import cindex as ci

    from extractors.clang.visit import Namer, collect_edges

    (tmp_path / "ext.h").write_text(DEPENDENT_EXT_H)
    src = tmp_path / "dep.cpp"
    src.write_text(DEPENDENT_CPP)
    tu = ci.Index.create().parse(str(src), args=["-x", "c++", "-std=c++17", f"-I{tmp_path}"])
    facts = collect_edges(tu, "dep.cpp", lambda path: None if path.endswith("ext.h") else "tree", Namer())
    assert sorted((e.caller, e.callee, e.line) for e in facts.edges) == [
        ("ns::k(T*, const Tn&, T)", "ns::V::make(T)", 24), ("ns::k(T*, const Tn&, T)", "ns::V::store(T*)", 15),
        ("ns::k(T*, const Tn&, T)", "ns::V::store(T*)", 23), ("ns::k(T*, const Tn&, T)", "other::twice(T)", 25)]
    # `x + x` and `t / s` pick their candidate by the operands' classes (dropped as operators,
    # as resolved operator calls are); `z + s` has no operand of a class: a dependent operator
    assert {k: facts.dropped[k] for k in ("operator", "dependent_operator", "dependent_construction",
                                          "lambda", "dependent_external", "unresolved")} == {
        "operator": 3, "dependent_operator": 1, "dependent_construction": 1, "lambda": 1, "dependent_external": 1,
        "unresolved": 0}
    assert facts.sites == 11
