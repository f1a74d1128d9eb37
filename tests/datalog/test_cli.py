"""`torchtalk eval` and `torchtalk rules check` through the CLI entry point."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb

from torchtalk.cli import main

ROOT = Path(__file__).resolve().parents[2]

TC = """.decl edge(a: symbol, b: number)
.input edge
.decl path(a: symbol, n: number)
.output path
path(x, n) :- edge(x, n).
path(x, n + 1) :- path(x, n), n < 3.
"""


def _setup(tmp_path: Path) -> Path:
    (tmp_path / "facts").mkdir()
    (tmp_path / "facts/edge.facts").write_text("a\t1\nb c\t2\n")
    prog = tmp_path / "tc.dl"
    prog.write_text(TC)
    return prog


def test_eval_facts_dir_prints_rows(tmp_path, capsys):
    prog = _setup(tmp_path)
    assert main(["eval", str(prog), "--facts", str(tmp_path / "facts")]) == 0
    assert capsys.readouterr().out == "path (5 rows)\n\ta\t1\n\ta\t2\n\ta\t3\n\tb c\t2\n\tb c\t3\n"


def test_eval_json_and_out_dir(tmp_path, capsys):
    prog = _setup(tmp_path)
    assert main(["eval", str(prog), "--facts", str(tmp_path / "facts"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"path": [["a", 1], ["a", 2], ["a", 3], ["b c", 2], ["b c", 3]]}
    out = tmp_path / "out"
    assert main(["eval", str(prog), "--facts", str(tmp_path / "facts"), "--out", str(out)]) == 0
    assert (out / "path.csv").read_text() == "a\t1\na\t2\na\t3\nb c\t2\nb c\t3\n"
    assert sorted(p.name for p in out.iterdir()) == ["path.csv"]  # no temp file left


def test_eval_out_dir_same_file_from_every_engine(tmp_path, capsys, souffle_bin):
    """DuckDB writes the file itself (COPY); Soufflé's rows are written in
    Python: the files are byte for byte the same, quoting-free, sorted."""
    prog = _setup(tmp_path)
    (tmp_path / "facts/edge.facts").write_text("a\t1\nb c\t2\nz'q\t3\n")
    texts = {}
    for engine in ("duckdb", "souffle"):
        out = tmp_path / engine
        assert main(["eval", str(prog), "--facts", str(tmp_path / "facts"), "--out", str(out),
                     "--engine", engine, "--json"]) == 0
        assert json.loads(capsys.readouterr().out) == {"path": {"file": str(out / "path.csv"), "rows": 6}}
        texts[engine] = (out / "path.csv").read_text()
        assert sorted(p.name for p in out.iterdir()) == ["path.csv"]
    assert texts["duckdb"] == texts["souffle"] == "a\t1\na\t2\na\t3\nb c\t2\nb c\t3\nz'q\t3\n"


def test_program_exit_code_and_output_survive_the_quick_exit(tmp_path):
    """`python -m torchtalk` leaves by os._exit (Note [Quick exit]): what
    it printed is flushed, and a user error still exits 1."""
    import subprocess
    import sys

    prog = _setup(tmp_path)
    run = [sys.executable, "-m", "torchtalk", "eval", str(prog), "--facts"]
    ok = subprocess.run([*run, str(tmp_path / "facts")], capture_output=True, text=True, cwd=ROOT)
    assert (ok.returncode, ok.stdout) == (0, "path (5 rows)\n\ta\t1\n\ta\t2\n\ta\t3\n\tb c\t2\n\tb c\t3\n")
    bad = subprocess.run([*run, str(tmp_path / "nowhere")], capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 1 and bad.stderr.startswith("torchtalk: error: no such facts directory:")


def test_eval_process_takes_duckdb_extension_alone(tmp_path):
    """Note [Lean DuckDB import]: `eval --facts` never imports the `duckdb`
    package's Python layer, and DuckDB's errors still become one-line
    input errors (the exception classes come from the extension)."""
    import subprocess
    import sys

    prog = _setup(tmp_path)
    probe = ("import sys; from torchtalk.cli import main; code = main(sys.argv[1:]); "
             "print(code, 'duckdb' in sys.modules, '_duckdb' in sys.modules, file=sys.stderr)")
    ok = subprocess.run([sys.executable, "-c", probe, "eval", str(prog), "--facts", str(tmp_path / "facts"),
                         "--out", str(tmp_path / "out")], capture_output=True, text=True, cwd=ROOT)
    assert ok.stderr == "0 False True\n"
    assert (tmp_path / "out/path.csv").read_text() == "a\t1\na\t2\na\t3\nb c\t2\nb c\t3\n"
    (tmp_path / "facts/edge.facts").write_text("a\tnot-a-number\n")
    bad = subprocess.run([sys.executable, "-c", probe, "eval", str(prog), "--facts", str(tmp_path / "facts")],
                         capture_output=True, text=True, cwd=ROOT)
    first, last = bad.stderr.splitlines()[0], bad.stderr.splitlines()[-1]
    assert first.startswith(f"torchtalk: error: cannot read {tmp_path / 'facts/edge.facts'} as 'edge' (2 columns):")
    assert last == "1 False True"


def test_eval_db_file(tmp_path, capsys):
    prog = _setup(tmp_path)
    db = tmp_path / "f.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE torchtalk_meta (key VARCHAR, value VARCHAR)")
    con.execute("CREATE TABLE edge (a VARCHAR, b BIGINT)")
    con.execute("INSERT INTO edge VALUES ('z', 3)")
    con.close()
    assert main(["eval", str(prog), "--db", str(db)]) == 0
    assert capsys.readouterr().out == "path (1 rows)\n\tz\t3\n"


def test_eval_errors_are_one_line_with_caret(tmp_path, capsys):
    prog = tmp_path / "bad.dl"
    prog.write_text(".decl p(x: number)\n.output p\np(x) :- q(x).\n")
    assert main(["eval", str(prog), "--facts", str(tmp_path)]) == 1
    assert capsys.readouterr().err == (
        f"torchtalk: {prog}:3:9: semantic error: relation 'q' is not declared\n"
        "    p(x) :- q(x).\n"
        "            ^\n"
    )
    (tmp_path / "facts").mkdir()
    (tmp_path / "facts/edge.facts").write_text("a\tnot-a-number\n")
    good = tmp_path / "tc.dl"
    good.write_text(TC)
    assert main(["eval", str(good), "--facts", str(tmp_path / "facts")]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"torchtalk: error: cannot read {tmp_path / 'facts/edge.facts'} as 'edge' (2 columns): ")
    assert err.count("\n") == 1


def test_eval_souffle_missing(tmp_path, capsys, monkeypatch):
    prog = _setup(tmp_path)
    monkeypatch.setenv("PATH", "/nonexistent")
    assert main(["eval", str(prog), "--facts", str(tmp_path / "facts"), "--engine", "souffle"]) == 1
    assert "engine error: souffle is not on PATH" in capsys.readouterr().err


def test_rules_check(tmp_path, capsys):
    good = tmp_path / "good.dl"
    good.write_text(TC)
    bad = tmp_path / "bad.dl"
    bad.write_text(".decl p(x: number)\np(x, y) :- p(x).\np(y) :- p(x).\n")
    assert main(["rules", "check", str(good)]) == 0
    assert capsys.readouterr().out == f"{good}: ok (2 relations, 2 rules)\n"
    assert main(["rules", "check", str(good), str(bad)]) == 1
    cap = capsys.readouterr()
    assert cap.out == f"{good}: ok (2 relations, 2 rules)\n"
    assert cap.err.splitlines()[0] == f"{bad}:2:1: semantic error: 'p' has 1 column but is used with 2 arguments"
    assert cap.err.splitlines()[3] == f"{bad}:3:3: semantic error: variable 'y' is not grounded (bind it in a positive atom of the body)"
    assert main(["rules", "check", str(bad), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert [e["loc"] for e in report[0]["errors"]] == [f"{bad}:2:1", f"{bad}:3:3"]


def test_schema_passes_rules_check(capsys):
    assert main(["rules", "check", str(ROOT / "facts/schema.dl")]) == 0


def test_every_rule_file_passes_rules_check(capsys):
    """Acceptance (issue 3): every file of the rule library passes `rules check`."""
    files = sorted((ROOT / "rules").glob("*.dl"))
    assert files
    code = main(["rules", "check", *map(str, files)])
    assert capsys.readouterr().err == ""
    assert code == 0


def test_rules_check_prints_warnings_and_passes(tmp_path, capsys):
    prog = tmp_path / "w.dl"
    prog.write_text(".decl e(a: number, b: number)\n.input e\n.decl p(x: number)\n.output p\np(x) :- e(x, y).\n")
    assert main(["rules", "check", str(prog)]) == 0
    cap = capsys.readouterr()
    assert cap.out == f"{prog}: ok (2 relations, 1 rules, 1 warning)\n"
    assert cap.err.splitlines() == [
        f"{prog}:5:14: warning: variable 'y' occurs only once (use '_' if any value will do)",
        "    p(x) :- e(x, y).",
        "                 ^",
    ]
    assert main(["rules", "check", str(prog), "--json"]) == 0
    (report,) = json.loads(capsys.readouterr().out)
    assert report["ok"] and report["errors"] == [] and [w["loc"] for w in report["warnings"]] == [f"{prog}:5:14"]


def test_eval_sql_prints_the_plan(tmp_path, capsys):
    prog = _setup(tmp_path)
    assert main(["eval", str(prog), "--sql"]) == 0
    assert capsys.readouterr().out == (
        "-- output path\n"
        'WITH RECURSIVE "_tt_path_rec"("a", "n") AS ((SELECT t0."a" AS "a", t0."b" AS "n" FROM "edge" AS t0) '
        'UNION (SELECT t0."a" AS "a", (t0."n" + 1) AS "n" FROM "_tt_path_rec" AS t0 WHERE t0."n" < 3)) '
        'SELECT * FROM "_tt_path_rec";\n'
    )


EMPTY = """.decl e(a: symbol, b: symbol)
.input e
.decl blank(a: symbol)
.output blank
blank(a) :- e(a, "").
"""


def test_an_empty_field_is_the_empty_symbol_as_in_the_index(tmp_path, capsys):
    """`eval --facts` reads an empty field as "" (the index's loader does too), not NULL."""
    (tmp_path / "facts").mkdir()
    (tmp_path / "facts/e.facts").write_text("x\t\ny\tz\n")
    prog = tmp_path / "p.dl"
    prog.write_text(EMPTY)
    assert main(["eval", str(prog), "--facts", str(tmp_path / "facts"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"blank": [["x"]]}


def test_eval_db_with_extra_facts(tmp_path, capsys):
    """A rule author adds facts of their own to a fact DB's: the rows of both."""
    from torchtalk.datalog import parse_text
    from torchtalk.store import create_tables

    db = tmp_path / "f.duckdb"
    con = duckdb.connect(str(db))
    create_tables(con, parse_text(TC).decls)
    con.execute("INSERT INTO edge VALUES ('a', 3)")
    con.close()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine/edge.facts").write_text("m\t3\n")
    prog = tmp_path / "tc.dl"
    prog.write_text(TC)
    assert main(["eval", str(prog), "--db", str(db), "--facts", str(tmp_path / "mine"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"path": [["a", 3], ["m", 3]]}
