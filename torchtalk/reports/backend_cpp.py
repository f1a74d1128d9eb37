"""Read a C++ backend's ATen registrations with the project's C++ extractor.

A PrivateUse1 backend (PyTorch's own example: test/cpp_extensions/
open_registration_extension.cpp) registers its kernels in
``TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("add.Tensor", &f); }``
blocks, and may give the key a boxed fallback with ``m.fallback(...)``. The
extractors/cpp scanner already reads these blocks in the PyTorch tree
(lib_impl / lib_fallback rows: TORCH_FN, function pointers, lambdas,
``CppFunction::makeFromBoxedFunction<&f>()``); this module runs it on each C++
file of the package and turns its rows into keyed `BackendRef`s and
`BackendFallback`s.

Example:
    >>> refs, fallbacks, notes = scan_cpp_files(Path("ext"), [Path("ext/reg.cpp")])
    >>> refs[0]
    BackendRef(name='abs', overload='out', file='reg.cpp', line=507, key='PrivateUse1')
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

CPP_SUFFIXES = (".cpp", ".cc", ".cxx", ".c++", ".cu", ".mm", ".h", ".hpp", ".cuh")
# the files worth parsing: only these register anything
_MARKER = b"TORCH_LIBRARY"


@dataclass(frozen=True, order=True)
class BackendFallback:
    """`m.fallback(fn)` in TORCH_LIBRARY_IMPL(ns, KEY, m): every op without a kernel of its own for KEY runs `fn`."""

    key: str
    fn: str
    file: str
    line: int


def scan_cpp_files(base: Path, files: list[Path]):
    """(keyed refs, fallbacks, notes) of the C++ `files` (paths relative to `base`).

    Notes name registrations that are no ATen op table entry: other
    namespaces' ops (an extension's own `TORCH_LIBRARY(ns, m)` ops), and files
    tree-sitter could not fully parse.
    """
    from extractors.cpp.constructs import FALLBACK
    from extractors.cpp.scan import scan_file
    from torchtalk.reports.backend_refs import BackendRef, parse_op_string

    refs: list[BackendRef] = []
    fallbacks: list[BackendFallback] = []
    notes: list[str] = []
    for path in files:
        src = path.read_bytes()
        if _MARKER not in src:
            continue
        rel = path.relative_to(base).as_posix()
        facts = scan_file(rel, src)
        if facts.errors:
            notes.append(f"{rel}: {facts.errors} syntax errors (tree-sitter); registrations there may be missed")
        for ns, op, key, target, line, _scope in facts.lib_impls:
            if op == FALLBACK:
                if ns in ("aten", "_"):
                    fallbacks.append(BackendFallback(key, "::".join(target), rel, line))
                continue
            parsed = parse_op_string(op, ns)
            if parsed is None:
                notes.append(f"{rel}:{line}: {ns}::{op} for {key} is not an ATen op registration")
                continue
            refs.append(BackendRef(parsed[0], parsed[1], rel, line, key))
    return refs, fallbacks, notes
