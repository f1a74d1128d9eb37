"""`torchtalk report coverage` through the CLI: formats, user rules, one-line errors."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from torchtalk.cli import main

pytestmark = pytest.mark.real_tree

RULES = Path(__file__).resolve().parents[1] / "rules" / "coverage.dl"
SCHEMA = Path(__file__).resolve().parents[1] / "facts" / "schema.dl"


@pytest.fixture(scope="module")
def db(tree, tmp_path_factory, request) -> str:
    try:
        return str(request.getfixturevalue("real_db"))
    except pytest.FixtureLookupError:
        from torchtalk import api

        path = tmp_path_factory.mktemp("cli_db") / "ops.duckdb"
        api.index(tree, db=path, layers=["ops"])
        return str(path)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["report", "coverage", "--quiet", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--keys", "CPU,CUDAA"], "error: unknown dispatch key 'CUDAA' (neither a dispatch entry nor c10's DispatchKey names it) (did you mean 'CUDA'?)"),
        (["--keys", "CompositeImplicitAutograd"], "error: CompositeImplicitAutograd is a composite alias key, not a backend: its kernels count for every key (pick backend keys, e.g. --keys CPU,MPS)"),
        (["--tag", "cor"], "error: unknown op tag 'cor' (did you mean 'core'?)"),
        (["--format", "yml"], "error: unknown report format 'yml' (one of md, html, csv, json)"),
        (["--format", "jsn"], "error: unknown report format 'jsn' (did you mean 'json'?)"),
        (["--backend-package", "/nonexistent/pkg"], "error: backend package not found: /nonexistent/pkg"),
        (["-o", "/nonexistent/dir/cov.md"], "error: cannot write /nonexistent/dir/cov.md: directory /nonexistent/dir does not exist"),
        (["--rules", "/nonexistent/cov.dl"], "error: coverage rules not found: /nonexistent/cov.dl"),
    ],
)
def test_user_errors_are_one_line(db, capsys, args, message):
    code, out, err = run(capsys, "--db", db, *args)
    assert (code, out, err) == (1, "", f"torchtalk: {message}\n")


def test_missing_db_names_the_fix(capsys, tmp_path):
    code, out, err = run(capsys, "--db", str(tmp_path / "none.duckdb"))
    assert code == 1 and out == ""
    assert err.startswith(f"torchtalk: store error: no such database: {tmp_path / 'none.duckdb'}")
    assert "torchtalk index" in err and "Traceback" not in err


def test_md_csv_json(db, capsys, tmp_path):
    code, md, _ = run(capsys, "--db", db, "--keys", "CPU,MPS", "--tag", "core")
    assert code == 0
    # col2im is registered by hand for MPS (MPSFallback.mm), so 182 of 189
    assert "| MPS | 182/189 | 96.3% | 182/189 (96.3%) |" in md
    assert "- `_adaptive_avg_pool3d` (aten/src/ATen/native/native_functions.yaml:12162)" in md
    assert "- `col2im`" not in md
    code, text, _ = run(capsys, "--db", db, "--keys", "CPU,MPS", "--format", "csv")
    rows = {r["op"]: r for r in csv.DictReader(io.StringIO(text))}
    assert len(rows) == 2633
    assert rows["add.Tensor"] == {"op": "add.Tensor", "CPU": "delegate", "MPS": "delegate"}
    assert rows["col2im"]["MPS"] == "registered"
    assert rows["_adaptive_avg_pool3d"]["MPS"] == "fallback"  # MPSFallback.mm's m.fallback runs it
    out = tmp_path / "cov.json"
    code, text, err = run(capsys, "--db", db, "--keys", "Meta", "--json", "-o", str(out))
    assert code == 0 and text == "" and err == f"wrote {out} (json, 1 keys, 2633 ops)\n"
    data = json.loads(out.read_text())
    assert (data["keys"][0]["key"], data["keys"][0]["covered"]) == ("Meta", 2118)
    assert [p.name for p in tmp_path.iterdir()] == ["cov.json"]  # no temp file left behind


def test_users_change_what_counts(db, capsys, tmp_path):
    """A copy of the rules without the composite path: CPU coverage drops to direct + delegate."""
    text = RULES.read_text().replace('#include "../facts/schema.dl"', f'#include "{SCHEMA}"')
    text = text.replace('#include "dispatch.dl"', f'#include "{RULES.parent / "dispatch.dl"}"')
    rule = 'kernel_via(op, k, "composite") :- serves(c, k), op_kernel(op, c).'
    assert rule in text
    mine = tmp_path / "no_composite.dl"
    mine.write_text(text.replace(rule, ""))
    code, out, _ = run(capsys, "--db", db, "--keys", "CPU", "--json", "--rules", str(mine))
    assert code == 0
    cpu = json.loads(out)["keys"][0]
    assert "composite" not in cpu["by_path"]
    # direct and delegate overlap for no op: a delegating op has no dispatch table of its own
    assert cpu["covered"] == cpu["by_path"]["direct"] + cpu["by_path"]["delegate"] == 671 + 382


def test_broken_user_rules_point_at_the_line(db, capsys, tmp_path):
    bad = tmp_path / "bad.dl"
    bad.write_text(f'#include "{SCHEMA}"\n.decl covered(op: symbol, key: symbol)\ncovered(op, k) :- op(op.\n')
    code, out, err = run(capsys, "--db", db, "--rules", str(bad))
    assert code == 1 and out == ""
    assert err.startswith(f"torchtalk: {bad}:3:"), err
    assert "Traceback" not in err
