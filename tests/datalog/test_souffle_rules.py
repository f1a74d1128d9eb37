"""Every file of the rule library is a program the real Soufflé accepts (each
file starts with `#pragma once`, Note [Include once] in
torchtalk/datalog/parser.py), and a user program that includes several of
them, as docs/rules.md shows, is one too."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RULES = sorted((ROOT / "rules").glob("*.dl"))

pytestmark = pytest.mark.souffle


def _souffle(souffle_bin: str, program: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    from torchtalk.datalog import parse_file

    facts = tmp_path / "facts"
    facts.mkdir(exist_ok=True)
    for rel in parse_file(program).inputs:  # empty facts: the test is about the program
        (facts / f"{rel}.facts").touch()
    return subprocess.run([souffle_bin, "-F", str(facts), "-D", str(tmp_path), str(program)],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("rules", RULES, ids=lambda p: p.name)
def test_souffle_accepts_each_rule_file(rules, souffle_bin, tmp_path):
    proc = _souffle(souffle_bin, rules, tmp_path)
    errors = [line for line in proc.stderr.splitlines() if "Error" in line]
    assert proc.returncode == 0 and errors == [], proc.stderr[:2000]


def test_a_user_program_including_several_rule_files(souffle_bin, tmp_path):
    user = tmp_path / "mine.dl"
    user.write_text(f'#include "{ROOT}/rules/impact.dl"\n#include "{ROOT}/rules/trace.dl"\n'
                    f'#include "{ROOT}/rules/graph.dl"\n'
                    '.decl big_kernel(op: symbol)\nbig_kernel(o) :- kernel_entry(o, "CUDA", _, _, _).\n'
                    '.output big_kernel\n')
    proc = _souffle(souffle_bin, user, tmp_path)
    assert proc.returncode == 0 and "Error" not in proc.stderr, proc.stderr[:2000]
    assert (tmp_path / "big_kernel.csv").exists()


def _blocks(doc: Path) -> list[str]:
    """The fenced code blocks of a markdown file, dedented."""
    import textwrap

    out, cur = [], None
    for line in doc.read_text(encoding="utf-8").splitlines():
        if line.strip().startswith("```"):
            if cur is None:
                cur = []
            else:
                out.append(textwrap.dedent("\n".join(cur)))
                cur = None
        elif cur is not None:
            cur.append(line)
    return out


def test_the_docs_rule_fragments_are_the_librarys_own_rules():
    """docs/rules.md quotes rules of the library: each quoted rule is one, word for word."""
    from torchtalk.datalog import parse_file

    lib = {str(r) for f in RULES for r in parse_file(f).rules}
    quoted = [b for b in _blocks(ROOT / "docs/rules.md") if b.lstrip().startswith("// rules/")]
    assert quoted
    for block in quoted:
        for line in block.splitlines():
            if line.strip() and not line.lstrip().startswith("//"):
                assert line.strip() in lib, line


def test_the_docs_user_rule_file_runs_on_souffle(souffle_bin, tmp_path):
    """docs/rules.md's example rule file, with the library it says to include."""
    (example,) = [b for b in _blocks(ROOT / "docs/rules.md") if ".decl cuda_callers(" in b]
    program = tmp_path / "mine.dl"
    program.write_text(f'#include "{ROOT}/rules/graph.dl"\n{example}\n.output cuda_callers\n')
    proc = _souffle(souffle_bin, program, tmp_path)
    assert proc.returncode == 0 and "Error" not in proc.stderr, proc.stderr[:2000]
    assert (tmp_path / "cuda_callers.csv").exists()


def test_the_library_numbers_nothing_by_an_engines_ord():
    """ord() numbers differ between engines (Soufflé: its symbol table's
    index; DuckDB: a hash), so the library's numbers come from the fact
    `node` (Note [Node numbers] in torchtalk/nodes.py), never from ord()."""
    from torchtalk.datalog import ast as A
    from torchtalk.query.library import load_library

    def ords(term) -> int:
        here = isinstance(term, A.Functor) and term.name is A.FunctorName.ORD
        return here + sum(ords(t) for t in A.subterms(term))

    library = load_library(user=False)
    used = [str(rule.loc) for rule in library.rules
            for atom in [rule.head, *[lit for lit in rule.body if isinstance(lit, A.Atom)]]
            if any(ords(t) for t in atom.args)]
    used += [str(rule.loc) for rule in library.rules for lit in rule.body
             if isinstance(lit, A.Comparison) and ords(lit.left) + ords(lit.right)]
    assert used == []
    assert "node" in library.inputs
