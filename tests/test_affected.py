"""`torchtalk affected` (issue 9) on the real 2.6.0 tree: diffs made by editing
one line of a real file (in memory: the tree is never modified), mapped to the
changed entity, walked to ops and tests, ranked, with chains naming file:line.
"""

from __future__ import annotations

import difflib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from torchtalk import api
from torchtalk.changes import changed_lines
from torchtalk.errors import InputError, ParseError

CPUBLAS = "aten/src/ATen/native/CPUBlas.cpp"
NATIVE = "aten/src/ATen/native/native_functions.yaml"

# the cpublas::gemm overload for double (Note [Overload ids])
GEMM_DOUBLE = ("at::native::cpublas::gemm(TransposeType, TransposeType, int64_t, int64_t, int64_t, double, const double*,"
               " int64_t, const double*, int64_t, double, double*, int64_t)")


def _patch(tree: Path, rel: str, line: int, edit=lambda s: s + " // edited") -> str:
    """A unified diff that changes line `line` (1-based) of tree file `rel`."""
    old = (tree / rel).read_text().splitlines(keepends=True)
    new = list(old)
    new[line - 1] = edit(new[line - 1].rstrip("\n")) + "\n"
    return "".join(difflib.unified_diff(old, new, f"a/{rel}", f"b/{rel}"))


def _line_of(tree: Path, rel: str, pattern: str) -> int:
    for i, text in enumerate((tree / rel).read_text().splitlines(), 1):
        if re.search(pattern, text):
            return i
    raise AssertionError(f"{pattern!r} not in {rel}")


@pytest.mark.real_tree
def test_gemm_change_reaches_linalg_tests_with_chain(tree, real_db):
    first = _line_of(tree, CPUBLAS, r"^void gemm\(")  # the first cpublas::gemm overload
    body_line = _line_of(tree, CPUBLAS, r"int m_ = m, n_ = n, k_ = k")
    assert first < body_line < first + 40
    report = api.affected(diff=_patch(tree, CPUBLAS, body_line), db=real_db)
    # the edited overload only (Note [Overload ids]): gemm for double
    assert report.changes.fns == {GEMM_DOUBLE: (CPUBLAS, first)}
    linalg = [t for t in report.tests if t.test.startswith("test/test_linalg.py::")]
    assert len(linalg) >= 10
    yaml_text = (tree / NATIVE).read_text().splitlines()
    for t in linalg:
        gemm, op, test = t.chain
        assert (gemm.what, gemm.file, gemm.line) == (f"changed function {GEMM_DOUBLE}", CPUBLAS, first)
        name = re.match(r"op (\S+), (\d+) call\(s\) above$", op.what)
        assert name and op.file == NATIVE, op
        # the op step points at the op's own `- func:` line in native_functions.yaml
        assert re.match(rf"- func: {re.escape(name.group(1))}\(", yaml_text[op.line - 1])
        assert test.what == f"test {t.test}" and test.file == "test/test_linalg.py"
    ranks = [(t.rank, t.depth, -t.reached_by, t.test) for t in report.tests]
    assert ranks == sorted(ranks)


@pytest.mark.real_tree
def test_yaml_entry_change_maps_to_its_op(tree, real_db):
    line = _line_of(tree, NATIVE, r"^- func: gelu\(Tensor self, \*, str approximate")
    report = api.affected(diff=_patch(tree, NATIVE, line + 8, lambda s: s + "  # edited"), db=real_db)
    assert report.changes.ops == {"gelu": (NATIVE, line)}
    assert report.tests, "gelu is covered by tests"
    assert all(t.chain[0].what == "changed op gelu" for t in report.tests)


@pytest.mark.real_tree
def test_python_and_test_changes(tree, real_db):
    rel = "torch/nn/functional.py"
    line = _line_of(tree, rel, r"^def softmax\(")
    report = api.affected(diff=_patch(tree, rel, line + 1, lambda s: s + "  # edited"), db=real_db)
    assert report.changes.pys == {"torch.nn.functional.softmax": (rel, line)}
    assert report.tests and all(t.chain[0].what == "changed Python torch.nn.functional.softmax"
                                for t in report.tests)

    rel = "test/test_linalg.py"
    line = _line_of(tree, rel, r"def test_matmul_small_brute_force_1d_Nd\(")
    report = api.affected(diff=_patch(tree, rel, line + 1, lambda s: s + "  # edited"), db=real_db)
    test_id = "test/test_linalg.py::TestLinalg::test_matmul_small_brute_force_1d_Nd"
    assert report.changes.tests == {test_id: (rel, line)}
    assert report.tests[0].test == test_id and report.tests[0].depth == 0


@pytest.mark.real_tree
def test_cli_reads_a_patch_on_stdin_and_prints_json(tree, real_db):
    line = _line_of(tree, CPUBLAS, r"int m_ = m, n_ = n, k_ = k")
    proc = subprocess.run([sys.executable, "-m", "torchtalk", "affected", "--db", str(real_db), "--json"],
                          input=_patch(tree, CPUBLAS, line), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert [f["name"] for f in out["changed"]["functions"]] == [GEMM_DOUBLE]
    assert any(t["test"].startswith("test/test_linalg.py::") for t in out["tests"])


def test_changed_lines_counts_removals_at_the_following_line():
    diff = (
        "--- a/x.cpp\n+++ b/x.cpp\n@@ -3,4 +3,3 @@\n ctx\n-gone\n kept\n+new\n-old\n"
    )
    # removal of "gone" lands on "kept" (new line 4); "+new" is line 5; "-old" at the end: line 5
    assert changed_lines(diff) == {"x.cpp": {4, 5}}


def test_garbage_is_not_a_diff():
    with pytest.raises(ParseError) as err:
        changed_lines("hello\nworld\n", "notes.txt")
    assert str(err.value) == (
        "parse error: not a unified diff: notes.txt has no file headers ('--- a/...', '+++ b/...')"
    )


@pytest.mark.real_tree
def test_diff_rev_needs_a_git_checkout(tree, real_db):
    with pytest.raises(InputError) as err:
        api.affected(rev="HEAD~1", db=real_db)
    assert str(err.value).startswith(f"error: {tree.resolve()} is not a git checkout, so --diff HEAD~1")
