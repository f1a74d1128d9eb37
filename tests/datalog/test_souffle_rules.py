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
