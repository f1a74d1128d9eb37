"""PyTorch registration constructs found while scanning one file.

pybind11 `.def("name", target)`, `TORCH_LIBRARY*` blocks' `m.def` / `m.impl`,
and the dispatch-stub macros (`DECLARE_DISPATCH`, `DEFINE_DISPATCH`,
`REGISTER_*DISPATCH`). Names stay unresolved here (Note [Per-file facts]).

Example (the backend a stub registration is for):
    >>> stub_key("REGISTER_DISPATCH", "aten/src/ATen/native/cuda/X.cu")
    'CUDA'
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field

import tree_sitter as ts

from extractors.cpp.fields import F_ARGUMENT, F_ARGUMENTS, F_FIELD, F_FUNCTION, F_VALUE
from extractors.cpp.macros import define_spans
from extractors.cpp.names import name_parts
from extractors.cpp.preprocess import strip_comments

LAMBDA = ("<lambda>",)

_STUB_RE = re.compile(
    rb"\b(DECLARE_DISPATCH|DEFINE_DISPATCH|REGISTER_\w*DISPATCH|ALSO_REGISTER_\w+_DISPATCH)\s*\("
)
# Explicit-backend registration macros (aten/src/ATen/native/DispatchStub.h).
_EXPLICIT_KEY = {
    "REGISTER_CUDA_DISPATCH": "CUDA",
    "REGISTER_HIP_DISPATCH": "HIP",
    "REGISTER_MPS_DISPATCH": "MPS",
    "REGISTER_XPU_DISPATCH": "XPU",
    "REGISTER_MTIA_DISPATCH": "MTIA",
    "REGISTER_PRIVATEUSE1_DISPATCH": "PrivateUse1",
}
_STRING_RE = re.compile(r'(?:u8|u|U|L)?"((?:\\.|[^"\\])*)"|R"([^(]*)\((.*?)\)\2"', re.S)
_SUBMODULE_RE = re.compile(r'(\w+)\s*=\s*(\w+)\s*\.\s*def_submodule\(\s*"(\w+)"')
# `auto m = MAKE_TORCH_LIBRARY_IMPL(ns, KEY);` / `MAKE_TORCH_LIBRARY(ns)`: a library
# object in a variable (torch/library.h), registered through like a block's `m`.
_LIB_VAR_RE = re.compile(r"\b(\w+)\s*=\s*MAKE_(TORCH_LIBRARY(?:_IMPL)?)\s*\(([^()]*)\)")
_CLASS_VAR_RE = re.compile(
    r'(\w+)\s*(?:=\s*(?:py::|pybind11::)?(?:class_|enum_)\s*<[^;{]*?>\s*\(|\()\s*\w+\s*,\s*"(\w+)"'
)


@dataclass
class Constructs:
    """The construct rows of one file (see FileFacts for their shapes)."""

    binds: list = field(default_factory=list)
    lib_defs: list = field(default_factory=list)
    lib_impls: list = field(default_factory=list)
    impl_funcs: list = field(default_factory=list)
    stub_decls: list = field(default_factory=list)
    stub_defines: list = field(default_factory=list)
    stub_regs: list = field(default_factory=list)
    module_vars: dict = field(default_factory=dict)  # def idx -> {var: py prefix}
    lib_vars: dict = field(default_factory=dict)  # def idx -> {var: lib block info}


def stub_key(macro: str, rel: str) -> str:
    """The backend a `REGISTER_*DISPATCH` in file `rel` registers for.

    Plain REGISTER_DISPATCH is CUDA in a .cu file (__CUDACC__), MPS in an
    Objective-C++ .mm file, else CPU (CPU_CAPABILITY kernel files, compiled
    once per arch: DEFAULT, AVX2, AVX512, ...). The arch and ALL_CPU / NO_CPU
    variants are CPU."""
    if macro in _EXPLICIT_KEY:
        return _EXPLICIT_KEY[macro]
    if macro == "REGISTER_DISPATCH":
        if rel.endswith((".cu", ".cuh")):
            return "CUDA"
        if rel.endswith(".mm"):
            return "MPS"
    return "CPU"


def _split_args(text: str) -> list[str]:
    """Top-level comma-separated arguments of `(a, f(b, c), d)` text (no parens)."""
    args, depth, cur = [], 0, []
    for ch in text:
        if ch in "([{<" :
            depth += 1
        elif ch in ")]}>" and depth:
            depth -= 1
        elif ch == "," and depth == 0:
            args.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    args.append("".join(cur).strip())
    return args


def _balanced(text: bytes, open_at: int) -> bytes | None:
    """The text inside the parenthesis opening at `open_at`, or None."""
    depth = 0
    for i in range(open_at, min(len(text), open_at + 4000)):
        c = text[i]
        if c == 40:
            depth += 1
        elif c == 41:
            depth -= 1
            if depth == 0:
                return text[open_at + 1 : i]
    return None


def scan_stub_macros(src: bytes, rel: str, out: Constructs, scope_at) -> None:
    """DECLARE_DISPATCH / DEFINE_DISPATCH / REGISTER_*DISPATCH uses in `src`
    (outside #define bodies); `scope_at(offset)` gives the namespace path."""
    if b"DISPATCH" not in src:
        return
    text = strip_comments(src)
    defines = define_spans(text)
    starts = [d[0] for d in defines]
    for m in _STUB_RE.finditer(text):
        i = bisect.bisect_right(starts, m.start()) - 1
        if i >= 0 and m.start() < defines[i][1]:
            continue  # inside a macro definition
        inner = _balanced(text, m.end() - 1)
        if inner is None:
            continue
        args = _split_args(inner.decode(errors="replace"))
        macro = m.group(1).decode()
        line = text.count(b"\n", 0, m.start()) + 1
        scope = scope_at(m.start())
        _stub_row(macro, args, rel, line, scope, out)


def _stub_row(macro: str, args: list[str], rel: str, line: int, scope: str, out: Constructs) -> None:
    qual = lambda name: f"{scope}::{name}" if scope else name  # noqa: E731
    if macro == "DECLARE_DISPATCH" and len(args) >= 2 and args[-1].isidentifier():
        out.stub_decls.append((qual(args[-1]), line))
    elif macro == "DEFINE_DISPATCH" and args[0].isidentifier():
        out.stub_defines.append((qual(args[0]), line))
    elif macro == "REGISTER_NO_CPU_DISPATCH" and args[0].isidentifier():
        out.stub_regs.append(((args[0],), "CPU", ("nullptr",), line, scope))
    elif macro.startswith(("REGISTER_", "ALSO_REGISTER_")) and len(args) >= 2:
        stub = name_parts(args[0])
        fn = _fn_text_parts(args[-1])
        if stub and fn:
            out.stub_regs.append((stub, stub_key(macro, rel), fn, line, scope))


def _fn_text_parts(text: str) -> tuple[str, ...]:
    text = text.strip()
    if text in ("nullptr", "NULL", "0"):
        return ("nullptr",)
    text = text.lstrip("&").strip()
    if text.startswith("(") and text.endswith(")"):
        return _fn_text_parts(text[1:-1])
    return name_parts(text)


def string_value(node: ts.Node | None) -> str | None:
    """The value of a C++ string literal node (concatenations and
    TORCH_SELECTIVE_SCHEMA / TORCH_SELECTIVE_NAME wrappers included)."""
    if node is None:
        return None
    if node.type in ("string_literal", "raw_string_literal", "concatenated_string"):
        txt = node.text.decode(errors="replace")
        return "".join(m.group(1) if m.group(1) is not None else m.group(3) for m in _STRING_RE.finditer(txt))
    if node.type == "call_expression":
        args = node.child_by_field_id(F_ARGUMENTS)
        if args is not None and args.named_child_count:
            return string_value(args.named_children[0])
    return None


def target_parts(node: ts.Node | None, depth: int = 0) -> tuple[str, ...] | None:
    """The function a registration argument names: `TORCH_FN(f)`, `&f`, `f`,
    `py::overload_cast<...>(&f)`, `torch::dispatch(key, f)`, or a lambda."""
    if node is None or depth > 4:
        return None
    t = node.type
    if t == "lambda_expression":
        return LAMBDA
    if t in ("pointer_expression", "parenthesized_expression", "cast_expression"):
        inner = node.child_by_field_id(F_ARGUMENT) or node.child_by_field_id(F_VALUE)
        if inner is None and node.named_child_count:
            inner = node.named_children[-1]
        return target_parts(inner, depth + 1)
    if t in ("identifier", "qualified_identifier", "template_function"):
        return name_parts(node.text.decode(errors="replace")) or None
    if t == "call_expression":
        args = node.child_by_field_id(F_ARGUMENTS)
        fn = node.child_by_field_id(F_FUNCTION)
        m = re.search(r"<\s*&\s*([\w:]+)", fn.text.decode(errors="replace")) if fn else None
        if m:
            return name_parts(m.group(1)) or None
        if args is not None and args.named_child_count:
            return target_parts(args.named_children[-1], depth + 1)
    return None


def _dispatch_key(node: ts.Node) -> str | None:
    """`torch::dispatch(c10::DispatchKey::CPU, f)` -> "CPU"."""
    if node.type != "call_expression":
        return None
    fn = node.child_by_field_id(F_FUNCTION)
    args = node.child_by_field_id(F_ARGUMENTS)
    if fn is None or args is None or not args.named_child_count:
        return None
    if name_parts(fn.text.decode(errors="replace"))[-1:] != ("dispatch",):
        return None
    return name_parts(args.named_children[0].text.decode(errors="replace"))[-1:][0] if name_parts(
        args.named_children[0].text.decode(errors="replace")) else None


def _device_key(node: ts.Node) -> str | None:
    """`m.impl("op", torch::kCUDA, fn)`'s device: `torch::kCUDA`,
    `c10::DeviceType::CUDA` -> "CUDA" (the device's backend key); a dispatch
    key `DispatchKey::CPU` -> "CPU" (torch/library.h impl(name, Dispatch&&, f))."""
    parts = name_parts(node.text.decode(errors="replace"))
    if not parts or node.type not in ("qualified_identifier", "identifier"):
        return None
    last = parts[-1]
    if len(parts) >= 2 and parts[-2] in ("DeviceType", "DispatchKey"):
        return last
    return last[1:] if re.fullmatch(r"k[A-Z]\w*", last) else None


def member_construct(scanner, call: ts.Node, fn: ts.Node, name: str, block, scope: str | None) -> None:
    """Record `m.def` / `m.impl` of TORCH_LIBRARY blocks and pybind11 `.def`."""
    args = call.child_by_field_id(F_ARGUMENTS)
    if args is None or not args.named_child_count:
        return
    argv = args.named_children
    field_node = fn.child_by_field_id(F_FIELD)
    line = (field_node or call).start_point[0] + 1  # the `.def(` line, also in a chain
    out: Constructs = scanner.out
    if block is not None and block[3][0] == "lib":
        _lib_construct(block[3], name, argv, line, scope or "", out)
        return
    info = _lib_var(scanner, fn.child_by_field_id(F_ARGUMENT), block) if name != "def_static" else None
    if info is not None:  # a library object's m.def is no pybind11 binding, not even in a test
        if block[2] not in scanner.gtest_defs:
            _lib_construct(info, name, argv, line, scanner._scope_text(call), out)
        return
    if name not in ("def", "def_static") or len(argv) < 2 or block is None or block[2] < 0:
        return
    py = string_value(argv[0])
    target = target_parts(argv[1])
    if not py or target is None:
        return
    prefix = _py_prefix(scanner, fn.child_by_field_id(F_ARGUMENT), block[2], block[0], block[1])
    out.binds.append((prefix + py, target, line, scanner.scope_of_def(block[2])))


def _lib_construct(info: tuple, name: str, argv: list, line: int, scope: str, out: Constructs) -> None:
    macro = info[-1]
    ns = info[1] if len(info) > 2 else ""
    if name == "fallback" and macro == "TORCH_LIBRARY_IMPL" and len(info) > 3:
        out.lib_impls.append((ns, FALLBACK, info[2], _fallback_target(argv[0]), line, scope))
        return
    text = string_value(argv[0])
    if not text:
        return
    if name == "def" and macro in ("TORCH_LIBRARY", "TORCH_LIBRARY_FRAGMENT"):
        op = text.split("(", 1)[0].strip()
        op = op.split("::", 1)[1] if "::" in op else op
        out.lib_defs.append((ns, op, text, line))
        target = target_parts(argv[1]) if len(argv) > 1 else None
        if target:
            out.lib_impls.append((ns, op, "CatchAll", target, line, scope))
    elif name == "impl" and len(argv) > 1:
        key = info[2] if macro == "TORCH_LIBRARY_IMPL" and len(info) > 3 else "CatchAll"
        device = _device_key(argv[1]) if len(argv) > 2 else None
        key = device or _dispatch_key(argv[1]) or key
        op = text.split("::", 1)[1] if "::" in text else text
        target = target_parts(argv[2] if device else argv[1])
        if target:
            out.lib_impls.append((ns, op, key, target, line, scope))


# Note [Fallback rows]: `m.fallback(f)` in TORCH_LIBRARY_IMPL(ns, KEY, m) is kept
# as a lib_impls entry whose op is this marker (no m.impl names an empty op);
# resolve.py writes it as a lib_fallback row.
FALLBACK = ""


def _fallback_target(node: ts.Node) -> tuple[str, ...]:
    """The boxed function of `CppFunction::makeFromBoxedFunction<&f>()`, else
    the maker's name in brackets (`makeFallthrough()` -> "<makeFallthrough>")."""
    target = target_parts(node)
    if target is not None:
        return target
    fn = node.child_by_field_id(F_FUNCTION) if node.type == "call_expression" else None
    parts = name_parts(fn.text.decode(errors="replace")) if fn is not None else ()
    return (f"<{parts[-1]}>",) if parts else ("<unknown>",)


def _py_prefix(scanner, obj: ts.Node | None, idx: int, start: int, end: int) -> str:
    """"Cls." for `py::class_<T>(m, "Cls").def(...)` chains and class variables,
    "torch._C._sub." for modules made by `def_submodule("_sub")`, else ""."""
    while obj is not None and obj.type == "call_expression":
        fn = obj.child_by_field_id(F_FUNCTION)
        if fn is not None and fn.type == "field_expression":
            obj = fn.child_by_field_id(F_ARGUMENT)
            continue
        args = obj.child_by_field_id(F_ARGUMENTS)
        if fn is not None and re.search(r"\b(class_|enum_)\b", fn.text.decode(errors="replace")):
            if args is not None and args.named_child_count >= 2:
                cls = string_value(args.named_children[1])
                return f"{cls}." if cls else ""
        return ""
    if obj is None or obj.type != "identifier":
        return ""
    var = obj.text.decode(errors="replace")
    return _module_vars(scanner, idx, start, end).get(var, "")


def _lib_var(scanner, obj: ts.Node | None, block) -> tuple | None:
    """The lib block info ("lib", ns[, KEY], var, macro) of `obj` when it names a
    variable of the enclosing function initialised by MAKE_TORCH_LIBRARY[_IMPL].
    The caller records nothing for one in a gtest TEST body: its registrations
    last one test, no build has them (op_registration_test.cpp's `_` CPU
    fallback would otherwise cover CPU's missing ops)."""
    if obj is None or obj.type != "identifier" or block is None or block[2] < 0:
        return None
    idx = block[2]
    found = scanner.out.lib_vars.get(idx)
    if found is None:
        body = scanner.cleaned.text[block[0]:block[1]].decode(errors="replace")
        found = {var: ("lib", *(a.strip() for a in args.split(",")), var, macro)
                 for var, macro, args in _LIB_VAR_RE.findall(body)}
        scanner.out.lib_vars[idx] = found
    return found.get(obj.text.decode(errors="replace"))


def _module_vars(scanner, idx: int, start: int, end: int) -> dict[str, str]:
    cached = scanner.out.module_vars.get(idx)
    if cached is not None:
        return cached
    body = scanner.cleaned.text[start:end].decode(errors="replace")
    found: dict[str, str] = {}
    for var, parent, sub in _SUBMODULE_RE.findall(body):
        base = found.get(parent, "torch._C.")
        found[var] = f"{base}{sub}."
    for var, cls in _CLASS_VAR_RE.findall(body):
        found.setdefault(var, f"{cls}.")
    scanner.out.module_vars[idx] = found
    return found
