"""From a unified diff to the entities it changes: C++/CUDA functions, Python
definitions, tests, and native_functions.yaml / derivatives.yaml entries.

Note [Changed lines]: a hunk changes the lines it adds (new numbering) and the
places where it removes lines (the new-numbered line that follows a removal).
Lines are mapped to the definition whose span holds them in the file as it is
now in the tree (tree-sitter for C++/CUDA, `ast` for Python), and to facts of
the fact DB by (file, first line): the DB's `func`/`py_def`/`test` rows name
them. YAML entries span from their own line to the next entry's.

Example:
    >>> ch = changed_entities(con, root, changed_lines(diff_text))
    >>> ch.fns
    {'at::native::cpublas::gemm': ('aten/src/ATen/native/CPUBlas.cpp', 281)}
"""

from __future__ import annotations

import ast
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from torchtalk.errors import InputError, ParseError

CPP_SUFFIXES = (".cpp", ".cc", ".cxx", ".c", ".h", ".hpp", ".cu", ".cuh")


@dataclass
class Changes:
    """What a diff touches; each entity maps to its (file, line) evidence."""

    fns: dict[str, tuple[str, int]] = field(default_factory=dict)
    pys: dict[str, tuple[str, int]] = field(default_factory=dict)
    tests: dict[str, tuple[str, int]] = field(default_factory=dict)
    ops: dict[str, tuple[str, int]] = field(default_factory=dict)
    files: tuple[str, ...] = ()
    unmapped: tuple[str, ...] = ()  # changed files with no known entity


def diff_from_git(root: Path, rev: str) -> str:
    """`git diff REV` of the tree at `root` (REV against the working tree)."""
    if not (root / ".git").exists():
        raise InputError(f"{root} is not a git checkout, so --diff {rev} has nothing to compare",
                         hint="pipe a unified diff on stdin: `git diff | torchtalk affected`")
    proc = subprocess.run(["git", "-C", str(root), "diff", "--no-color", "-U0", rev],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["git diff failed"])[-1]
        raise InputError(f"git diff {rev} in {root}: {last}")
    return proc.stdout


def changed_lines(diff_text: str, origin: str = "<diff>") -> dict[str, set[int]]:
    """Changed new-numbered lines per file (Note [Changed lines]).

    Example:
        >>> changed_lines(open("fix.patch").read())
        {'aten/src/ATen/native/CPUBlas.cpp': {283}}
    """
    from unidiff import PatchSet
    from unidiff.errors import UnidiffParseError

    try:
        patch = PatchSet(diff_text)
    except UnidiffParseError as exc:
        raise ParseError(f"not a unified diff: {exc}", hint=f"in {origin}") from None
    if diff_text.strip() and not len(patch):
        raise ParseError(f"not a unified diff: {origin} has no file headers ('--- a/...', '+++ b/...')")
    out: dict[str, set[int]] = {}
    for pf in patch:
        if pf.is_removed_file:
            continue
        lines = out.setdefault(_strip_prefix(pf.path), set())
        for hunk in pf:
            pending = False
            for ln in hunk:
                if ln.is_added:
                    lines.add(ln.target_line_no)
                    pending = False
                elif ln.is_removed:
                    pending = True
                elif pending and ln.target_line_no:
                    lines.add(ln.target_line_no)
                    pending = False
            if pending:  # a removal at the end of the hunk
                lines.add(max(hunk.target_start + hunk.target_length - 1, 1))
    return out


def _strip_prefix(path: str) -> str:
    return path[2:] if path.startswith(("a/", "b/")) else path


def changed_entities(con, root: Path, lines: dict[str, set[int]]) -> Changes:
    """Map changed lines to the DB's functions, Python defs, tests and ops."""
    ch = Changes(files=tuple(sorted(lines)))
    unmapped = []
    for rel, nums in sorted(lines.items()):
        before = (len(ch.fns), len(ch.pys), len(ch.tests), len(ch.ops))
        if rel.endswith(CPP_SUFFIXES):
            _map_cpp(con, root, rel, nums, ch)
        elif rel.endswith(".py"):
            _map_python(con, root, rel, nums, ch)
        elif Path(rel).name == "native_functions.yaml":
            _map_yaml(con, "op", rel, nums, ch)
        elif Path(rel).name == "derivatives.yaml":
            _map_yaml(con, "derivative", rel, nums, ch)
        if before == (len(ch.fns), len(ch.pys), len(ch.tests), len(ch.ops)):
            unmapped.append(rel)
    ch.unmapped = tuple(unmapped)
    return ch


def _map_cpp(con, root: Path, rel: str, nums: set[int], ch: Changes) -> None:
    from extractors.cpp.scan import def_spans

    path = root / rel
    if not path.is_file():
        return
    from extractors.cpp.names import split_sig

    # def_spans names an overload without its suffix (Note [Overload ids]); its line says which
    known = {(split_sig(fn)[0], ln): fn for fn, ln in con.execute(
        "select fn, line from func where file = ?", [rel]).fetchall()}
    for fn, first, last in def_spans(rel, path.read_bytes()):
        hit = known.get((fn, first))
        if hit is not None and any(first <= n <= last for n in nums):
            ch.fns.setdefault(hit, (rel, first))


def _map_python(con, root: Path, rel: str, nums: set[int], ch: Changes) -> None:
    path = root / rel
    try:
        tree = ast.parse(path.read_bytes(), filename=rel)
    except (OSError, SyntaxError, ValueError):
        return
    spans = [(n.lineno, n.end_lineno or n.lineno, [d.lineno for d in n.decorator_list])
             for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)]
    hit = [(first, deco) for first, last, deco in spans
           if any(min([first, *deco]) <= n <= last for n in nums)]
    if not hit:
        return
    tests = dict(con.execute("select line, test from test where file = ? and kind = 'function'", [rel]).fetchall())
    pys = dict(con.execute("select line, py from py_def where file = ?", [rel]).fetchall())
    for first, deco in hit:
        for line in (first, *deco):
            if line in tests:
                ch.tests.setdefault(tests[line], (rel, line))
            if line in pys:
                ch.pys.setdefault(pys[line], (rel, line))


def _map_yaml(con, table: str, rel: str, nums: set[int], ch: Changes) -> None:
    """Each changed line belongs to the entry whose rows start last at or before it."""
    import bisect

    by_line: dict[int, list[str]] = {}
    for line, op in con.execute(f'select line, op from "{table}" where file = ? order by line, op', [rel]).fetchall():
        by_line.setdefault(line, []).append(op)
    starts = sorted(by_line)
    for n in sorted(nums):
        i = bisect.bisect_right(starts, n)
        if i:
            for op in by_line[starts[i - 1]]:
                ch.ops.setdefault(op, (rel, starts[i - 1]))
