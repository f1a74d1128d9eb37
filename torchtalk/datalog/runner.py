"""`evaluate`: check a program, pick the strata the outputs need, run an engine.

Example:
    >>> prog = parse_text('''.decl e(a: number, b: number)
    ... .decl p(a: number, b: number)
    ... .output p
    ... e(1, 2). e(2, 3).
    ... p(x, y) :- e(x, y).
    ... p(x, z) :- p(x, y), e(y, z).''')
    >>> sorted(evaluate(prog, None)["p"])
    [(1, 2), (1, 3), (2, 3)]
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping
from typing import Any

from torchtalk.datalog.analysis.checks import check
from torchtalk.datalog.ast import Program
from torchtalk.datalog.engines import Fetch, get_engine
from torchtalk.errors import InputError, did_you_mean

# Programs that passed check(): the query layer evaluates one parsed library
# many times, and checking it costs more than most queries.
_CHECKED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def evaluate(
    program: Program,
    con: Any,
    *,
    outputs: Iterable[str] | None = None,
    facts: Mapping[str, Iterable[tuple]] | None = None,
    engine: str = "duckdb",
    checked: bool = False,
    tables: Mapping[str, str] | None = None,
    fetch: Mapping[str, Fetch] | None = None,
    keep: dict[str, str] | None = None,
) -> dict[str, list[tuple]]:
    """Rows of each output relation (a set, as tuples in no given order).

    con:     duckdb connection to the fact DB (one table per input relation,
             named and typed as its .decl); may be read-only; None = no DB.
    outputs: relations to compute (only the strata they need run);
             None = every `.output` relation.
    facts:   extra input rows by relation (e.g. query seeds).
    checked: skip `check(program)` when the caller already did it.
    tables:  the DB table of an input relation not stored under its own name.
    fetch:   output relation -> `Fetch`: its rows come back as a `Page`:
             distinct, filtered, sorted, cut to a limit (engines/__init__.py).
    keep:    (the embedded and in-memory engines) a dict receiving relation ->
             table of the walks the run computed, left for a later run to
             read; the caller drops them (Note [One walk per answer] in
             torchtalk/query/run.py).
    """
    if not checked and program not in _CHECKED:
        check(program)
        _CHECKED[program] = True
    wanted = list(program.outputs if outputs is None else outputs)
    for rel in wanted:
        if rel not in program.decls:
            raise InputError(f"unknown relation '{rel}'", hint=did_you_mean(rel, program.decls))
    given = {rel: list(rows) for rel, rows in (facts or {}).items()}
    shaped = {rel: spec for rel, spec in (fetch or {}).items() if rel in wanted}
    if keep is not None and engine in ("duckdb", "memory"):
        return get_engine(engine).run(program, con, wanted, given, dict(tables or {}), shaped, keep=keep)
    return get_engine(engine).run(program, con, wanted, given, dict(tables or {}), shaped)


def eval_file(
    program_path,
    *,
    facts_dir=None,
    open_db=None,
    outputs: Iterable[str] | None = None,
    engine: str = "duckdb",
    out_dir=None,
) -> dict[str, list[tuple]]:
    """`torchtalk eval`: parse, check and evaluate a .dl file (see
    api.eval_program). `open_db(program)`: the fact DB's connection, or None
    (the application's store knows where it is; this package does not).
    With `out_dir`, each output is written to `out_dir/<rel>.csv`, and comes
    back as an empty `Page` whose total counts its rows."""
    from pathlib import Path

    from torchtalk.datalog.parser import parse_file_cached

    program = parse_file_cached(Path(program_path))
    check(program)
    given: dict[str, list[tuple]] = {}
    if facts_dir is not None and open_db is not None:  # the DB's rows, plus the rule author's own facts
        given = _facts_rows(program, Path(facts_dir))
        facts_dir = None
    if facts_dir is not None:
        from torchtalk.datalog.io import load_facts_dir

        con = load_facts_dir(program, Path(facts_dir))
    else:
        con = open_db(program) if open_db is not None else None
    wanted = list(program.outputs if outputs is None else outputs)
    fetch = {}
    if out_dir is not None:
        fetch = _output_fetch(program, [rel for rel in wanted if rel in program.decls], Path(out_dir))
    try:
        results = evaluate(program, con, outputs=wanted, facts=given, engine=engine, checked=True, fetch=fetch)
    finally:
        if con is not None:
            con.close()
    if out_dir is not None:  # the nullary outputs: the others are written
        from torchtalk.datalog.io import write_outputs

        write_outputs(Path(out_dir), {rel: rows for rel, rows in results.items() if rel not in fetch})
    return results


def _output_fetch(program: Program, outputs: list[str], out_dir) -> dict:
    """A `Fetch` per output with a column that writes it, sorted, to
    `out_dir/<rel>.csv` (the engine does it: DuckDB copies a large output
    to its file 8x faster than Python can); nullary outputs are left out."""
    out_dir.mkdir(parents=True, exist_ok=True)
    return {rel: Fetch(tuple(range(program.decls[rel].arity)), write_to=str(out_dir / f"{rel}.csv"))
            for rel in outputs if program.decls[rel].arity}


def compile_file(program_path, outputs: Iterable[str] | None = None) -> str:
    """`torchtalk eval --sql`: the rendered SQL plan (see api.compile_program)."""
    from pathlib import Path

    from torchtalk.datalog.compile import compile_program, q
    from torchtalk.datalog.parser import parse_file

    program = parse_file(Path(program_path))
    check(program)
    wanted = list(program.outputs if outputs is None else outputs)
    for rel in wanted:
        if rel not in program.decls:
            raise InputError(f"unknown relation '{rel}'", hint=did_you_mean(rel, program.decls))
    sources = {rel: [q(rel)] for rel in program.inputs}
    return compile_program(program, wanted, sources).render()


def _facts_rows(program: Program, facts_dir) -> dict[str, list[tuple]]:
    """The rows of the `<rel>.facts` files in `facts_dir`, for the program's inputs that have one."""
    from torchtalk.datalog.io import load_facts_dir

    con = load_facts_dir(program, facts_dir)
    try:
        have = {r for (r,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        return {rel: con.execute(f'SELECT * FROM "{rel}"').fetchall() for rel in program.inputs if rel in have}
    finally:
        con.close()


def check_files(files: Iterable) -> list[dict]:
    """`torchtalk rules check`: one report per file (see api.check_rules)."""
    from pathlib import Path

    from torchtalk.datalog.analysis.checks import check_errors
    from torchtalk.datalog.analysis.warnings import check_warnings
    from torchtalk.datalog.parser import parse_file
    from torchtalk.errors import ErrorList, TorchTalkError

    reports = []
    for f in files:
        report: dict = {"file": str(f), "ok": False, "relations": 0, "rules": 0, "errors": [], "warnings": []}
        try:
            program = parse_file(Path(f))
            errors: list[TorchTalkError] = check_errors(program)
            report.update(relations=len(program.decls), rules=len(program.rules))
            if not errors:
                report["warnings"] = [_error_json(w) for w in check_warnings(program)]
        except ErrorList as err:
            errors = list(err.errors)
        except TorchTalkError as err:
            errors = [err]
        errors.sort(key=lambda e: (e.loc.file, e.loc.line, e.loc.col) if e.loc else ("", 0, 0))
        report["errors"] = [_error_json(e) for e in errors]
        report["ok"] = not errors
        reports.append(report)
    return reports


def _error_json(err) -> dict:
    return {
        "loc": str(err.loc) if err.loc else None,
        "kind": err.kind,
        "message": err.message,
        "hint": err.hint,
        "rendered": err.render(),
    }
