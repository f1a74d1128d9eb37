"""Lines of a TU's main file that the compiler skipped for a feature the wheel has.

Note [Configured out here, on in the wheel]: the compiler tier configures the
tree as torch 2.6.0's Linux x86-64 CUDA wheel only where it has the headers
(Note [Build configuration] in flags.py). Features the wheel builds with but
whose headers the source package lacks (oneDNN's ideep, NNPACK, FBGEMM,
XNNPACK, Kineto, NCCL, ...) or that only some of the wheel's libraries define
(USE_CUDA, USE_DISTRIBUTED) stay off, so clang skips their `#if` branches and
the calls in them would be lost: in a file the tier parsed, its edges replace
the fast tier's. libclang reports the skipped ranges (with a detailed
preprocessing record); a range whose governing condition names one of
`WHEEL_ON` is kept as `precise_skipped(file, first, last)`, and the fast
tier's calls inside it stand (rules/graph.dl), with the fast tier's own
resolution. A range skipped for anything else (USE_ROCM, C10_MOBILE,
__APPLE__, ...) is code the wheel does not build either, and its calls stay
out. Found by bench/runtime_oracle.py on a compiler-tier DB: the runtime's
`mkldnn_convolution -> empty` (mkldnn/Conv.cpp, under `#else` of
`#if !AT_MKLDNN_ENABLED()`) and `_convolution -> _nnpack_available` had no path.

The governing condition of a range is read from the file's text: the range
starts at the directive that began the skipping, an `#if`/`#ifdef`/
`#ifndef`/`#elif` whose condition was false, or an `#else` (its `#if`'s
condition, and those of its `#elif`s, were true); an `#if` block's directives
are matched with a stack.
"""

from __future__ import annotations

import ctypes
import re
from pathlib import Path

from clang import cindex as ci

from extractors.clang.visit import libclang_fn

# On in the wheel, off in the compiler tier's configuration: the macros of the
# wheel's build (torch.__config__.show(): CXX_FLAGS -DUSE_KINETO -DUSE_FBGEMM
# -DUSE_PYTORCH_QNNPACK -DUSE_XNNPACK; USE_CUDA, USE_CUDNN, USE_CUSPARSELT,
# USE_GLOO, USE_MKLDNN, USE_NCCL, USE_NNPACK on; distributed and MAGMA
# available) as the sources test them.
WHEEL_ON = frozenset({
    "AT_MKLDNN_ENABLED", "AT_NNPACK_ENABLED", "AT_CUDNN_ENABLED", "AT_MAGMA_ENABLED",
    "USE_KINETO", "USE_FBGEMM", "USE_PYTORCH_QNNPACK", "USE_XNNPACK",
    "USE_CUDA", "USE_CUDNN", "USE_CUSPARSELT", "USE_NCCL", "USE_GLOO", "USE_MKLDNN", "USE_NNPACK",
    "USE_DISTRIBUTED", "USE_C10D", "USE_C10D_GLOO", "USE_C10D_NCCL", "USE_RPC", "USE_TENSORPIPE",
    "USE_MEM_EFF_ATTENTION", "USE_FLASH_ATTENTION", "USE_LINALG_SOLVER", "USE_CUSOLVER_64_BIT",
})

_DIRECTIVE = re.compile(r"^\s*#\s*(if|ifdef|ifndef|elif|else|endif)\b(.*)$")
_WORD = re.compile(r"[A-Za-z_]\w*")


class _RangeList(ctypes.Structure):
    _fields_ = [("count", ctypes.c_uint), ("ranges", ctypes.POINTER(ci.SourceRange))]


def skipped_ranges(tu: ci.TranslationUnit, path: str) -> list[tuple[int, int]]:
    """(first line, last line) of each range of `path` the preprocessor skipped
    (the TU parsed with PARSE_DETAILED_PROCESSING_RECORD; [] without it)."""
    ranges = ctypes.POINTER(_RangeList)
    got = libclang_fn("clang_getSkippedRanges", [ci.TranslationUnit, ci.File], ranges)(
        tu, ci.File.from_name(tu, path))
    if not got:
        return []
    try:
        lst = got.contents
        return [(lst.ranges[i].start.line, lst.ranges[i].end.line) for i in range(lst.count)]
    finally:
        libclang_fn("clang_disposeSourceRangeList", [ranges])(got)


def conditions(lines: list[str]) -> dict[int, str]:
    """{1-based line of each `#if`/`#elif`/`#else` directive: the condition it
    was skipped for}: its own for `#if`/`#ifdef`/`#ifndef`/`#elif`, its block's
    earlier ones for `#else`.

    Example:
        >>> conditions(["#if !AT_MKLDNN_ENABLED()", "x", "#else", "y", "#endif"])
        {1: '!AT_MKLDNN_ENABLED()', 3: '!AT_MKLDNN_ENABLED()'}
    """
    out: dict[int, str] = {}
    stack: list[list[str]] = []
    for n, text in enumerate(lines, 1):
        m = _DIRECTIVE.match(text)
        if m is None:
            continue
        kind, cond = m.group(1), m.group(2).split("//")[0].strip()
        if kind in ("if", "ifdef", "ifndef"):
            stack.append([cond])
            out[n] = cond
        elif kind == "elif" and stack:
            stack[-1].append(cond)
            out[n] = cond
        elif kind == "else" and stack:
            out[n] = " ".join(stack[-1])
        elif kind == "endif" and stack:
            stack.pop()
    return out


def wheel_ranges(tu: ci.TranslationUnit, path: str) -> tuple[tuple[int, int], ...]:
    """The skipped ranges of main file `path` governed by a WHEEL_ON feature
    (Note [Configured out here, on in the wheel]); the file is read only
    when some range was skipped."""
    ranges = skipped_ranges(tu, path)
    if not ranges:
        return ()
    conds = conditions(Path(path).read_text(errors="replace").splitlines())
    return tuple((lo, hi) for lo, hi in ranges if WHEEL_ON & set(_WORD.findall(conds.get(lo, ""))))
