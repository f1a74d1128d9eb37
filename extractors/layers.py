"""The extractor layers, in the order `torchtalk index` runs them.

Each `module` implements `extractors.base.LayerModule`. A layer is one unit of
indexing: its rows are replaced together, and `status` reports its time. A
relation may be written by several layers (`binds`: pybind11 from cpp, Python
wrappers from python); its rows are the union of theirs.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Layer:
    name: str
    module: str  # importable module implementing LayerModule
    relations: tuple[str, ...]  # the schema relations this layer writes
    optional: bool = False  # only with a flag (e.g. --precise)


LAYERS: tuple[Layer, ...] = (
    Layer(
        "ops",
        "extractors.ops",
        (
            "op", "op_tag", "tag", "op_variant", "op_python_module", "dispatch",
            "dispatch_default", "structured", "structured_delegate",
            "structured_inherits", "autogen", "op_attr", "ufunc_inner_loop",
            "ufunc_stub_register", "derivative", "derivative_calls", "codegen_kernel", "codegen_call",
            "dispatch_key_def",
            "native_kernel_param",
        ),
    ),
    Layer(
        "cpp",
        "extractors.cpp",
        (
            "func", "calls", "call_ambiguous", "calls_op", "binds", "lib_def", "lib_impl", "lib_fallback", "lib_op",
            "impl_func", "stub_decl", "stub_define", "stub_register", "stub_call",
            "kernel", "launches", "overload", "overload_param",
        ),
    ),
    Layer(
        "python",
        "extractors.python",
        ("py_def", "py_calls", "py_api", "binds", "module_class", "class_base", "decomp", "py_op_impl",
         "py_alias"),
    ),
    Layer("tests", "extractors.tests", ("test", "opinfo", "tests_cover", "test_util", "test_file", "test_file_uses", "module_runs")),
    Layer("precise", "extractors.clang", ("calls_precise", "calls_op", "precise_file", "precise_pending",
                                               "precise_skipped"),
          optional=True),
)
