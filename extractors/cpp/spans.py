"""Function extents in one C++/CUDA file, for mapping changed lines to functions.

The fast tier's facts record where a function starts; `torchtalk affected`
also needs where it ends. This reuses the scanner's definition pass (same
names as the `func` facts, same macro cleaning, which keeps byte offsets).

Example:
    >>> def_spans("aten/src/ATen/native/CPUBlas.cpp", src)[0]
    ('at::native::cpublas::(anonymous)::normalize_last_dims', 28, 52)
"""

from __future__ import annotations

import tree_sitter as ts

from extractors.cpp.scan import _QUERY, _Scanner


def def_spans(rel: str, src: bytes) -> list[tuple[str, int, int]]:
    """(fn, line of its name, last line of its body) of each function in `src`."""
    sc = _Scanner(rel, src)
    sc._collect_defs(ts.QueryCursor(_QUERY).captures(sc.tree.root_node).get("def", []))
    text = sc.cleaned.text
    out = []
    for _start, end, idx, _info in sc.blocks:
        if idx < 0:
            continue
        fn, _short, line, _flags = sc.defs[idx]
        out.append((fn, line, text.count(b"\n", 0, end) + 1))
    return out
