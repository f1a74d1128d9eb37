"""derivatives.yaml: backward / forward-AD formulas and the functions they call.

Each entry names an op by its full schema (`name: gelu(Tensor self, *, str
approximate='none') -> Tensor`) and maps input names ("self", "self, other")
or output names ("result", forward AD) to a C++ expression. An entry may
instead hold a `dispatch:` map ("Default", "AutogradNestedTensor", ...) of
such maps. Strict ingestion: a key that is neither a special key nor names of
the op's arguments/outputs is an ExtractError at file:line.

Note [Derivative rows]: a key naming several inputs ("self, other") gives one
`derivative` row per input, all with the same formula and line. The calls of a
formula are found by parsing it with tree-sitter-cpp: free and qualified
function calls (`gelu_backward(...)`, `at::sum_to(...)`, template arguments
dropped); method calls (`grad.sum_to_size(...)`) are not recorded.

Example:
    >>> extract_derivatives(root, "tools/autograd/derivatives.yaml", sink)
"""

from __future__ import annotations

import re
from pathlib import Path

from extractors.base import Sink
from extractors.ops_yaml import (
    LineMap,
    entries,
    entry_signature,
    load_yaml,
    reject_unknown,
)
from torchtalk.errors import ExtractError, SrcLoc

SPECIAL_KEYS = frozenset({"name", "output_differentiability", "dispatch"})
AUTOGRAD_KEYS = frozenset({
    "Default", "AutogradNestedTensor", "AutogradCPU", "AutogradCUDA", "AutogradXPU",
    "AutogradMPS", "AutogradMeta", "AutogradLazy", "AutogradHPU", "AutogradMTIA",
})
_RESULT = re.compile(r"result\d*|grads?")


def extract_derivatives(root: Path, rel: str, sink: Sink) -> None:
    """derivative and derivative_calls rows for every formula of `rel`."""
    formulas: list[tuple[str, str, str, int]] = []  # op, arg, formula, line
    for entry in entries(load_yaml(root / rel, rel), rel, "derivative"):
        formulas.extend(_entry_formulas(entry, rel))
    for op, arg, formula, line in formulas:
        sink.add("derivative", op, arg, formula, rel, line)
    for index, fn in formula_calls([f[2] for f in formulas]):
        op, arg, _, line = formulas[index]
        sink.add("derivative_calls", op, arg, fn, rel, line)


def _entry_formulas(entry: LineMap, rel: str) -> list[tuple[str, str, str, int]]:
    sig = entry_signature(entry, "name", rel, "derivative entry without a `name:` schema")
    allowed = set(sig.args) | set(sig.returns)
    sections = [(entry, frozenset(entry) - SPECIAL_KEYS)]
    table = entry.get("dispatch")
    if table is not None:
        if not isinstance(table, LineMap):
            raise ExtractError(f"`dispatch:` of {sig.op!r} is not a mapping", SrcLoc(rel, entry.key_line("dispatch")))
        reject_unknown(table, AUTOGRAD_KEYS, rel, sig.op)
        sections += [(sub, frozenset(sub)) for sub in table.values() if isinstance(sub, LineMap)]
    out = []
    for section, keys in sections:
        for key in sorted(keys, key=section.key_line):
            line = section.key_line(key)
            names = [n.strip() for n in str(key).split(",")]
            bad = [n for n in names if n not in allowed and not _RESULT.fullmatch(n)]
            if bad:
                raise ExtractError(
                    f"unknown key {bad[0]!r} in derivative of {sig.op!r} (not an argument or output)",
                    SrcLoc(rel, line),
                )
            formula = " ".join(str(section[key]).split())
            out.extend((sig.op, n, formula, line) for n in names)
    return out


def formula_calls(formulas: list[str]) -> list[tuple[int, str]]:
    """(formula index, called function) for every free or qualified call, in order.

    Example:
        >>> formula_calls(["gelu_backward(grad, self)", "grad.sum()"])
        [(0, 'gelu_backward')]
    """
    import tree_sitter_cpp
    from tree_sitter import Language, Parser

    parser = Parser(Language(tree_sitter_cpp.language()))
    src = "".join(f"auto f = {f.replace(chr(10), ' ')};\n" for f in formulas)
    tree = parser.parse(src.encode())
    found: list[tuple[int, str]] = []
    seen: set[tuple[int, str]] = set()
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        if node.type == "call_expression":
            fn = node.child_by_field_name("function")
            if fn is not None and fn.type in ("identifier", "qualified_identifier", "template_function"):
                name = re.sub(r"<.*>", "", fn.text.decode()).replace(" ", "")
                item = (node.start_point[0], name)
                if item not in seen and item[0] < len(formulas):
                    seen.add(item)
                    found.append(item)
        stack.extend(reversed(node.children))
    return sorted(found, key=lambda x: x[0])
