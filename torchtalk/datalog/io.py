"""Soufflé-format fact and output files (tab-separated, no header, no quoting).

Example:
    >>> con = load_facts_dir(parse_file("prog.dl"), Path("facts/"))  # doctest: +SKIP
    >>> write_outputs(Path("out/"), {"path": [("a", "b")]})  # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path

from torchtalk.atomic import atomic_open, atomic_path
from torchtalk.datalog import ast as A
from torchtalk.datalog.compile import SQL_TYPES, q
from torchtalk.datalog.duck import duckdb as lean_duckdb
from torchtalk.errors import InputError


def load_facts_dir(program: A.Program, facts_dir: Path):
    """An in-memory DuckDB with one table per `.input` relation read from
    `facts_dir/<rel>.facts` (a missing file is an empty relation)."""
    duckdb = lean_duckdb()  # Note [Lean DuckDB import]

    if not facts_dir.is_dir():
        raise InputError(f"no such facts directory: {facts_dir}")
    con = duckdb.connect()
    for rel in program.inputs:
        decl = program.decls[rel]
        path = facts_dir / f"{rel}.facts"
        if not path.is_file():
            continue
        if decl.arity == 0:  # Note [Nullary relations]: `()` (or any line) makes it true
            con.execute(f"CREATE TABLE {q(rel)} (unit BIGINT)")
            if path.read_text(encoding="utf-8").strip():
                con.execute(f"INSERT INTO {q(rel)} VALUES (0)")
            continue
        cols = ", ".join(f"{q(c.name)} {SQL_TYPES[c.type]}" for c in decl.columns)
        con.execute(f"CREATE TABLE {q(rel)} ({cols})")
        if path.stat().st_size == 0:
            continue
        spec = "{" + ", ".join(f"'{c.name}': '{SQL_TYPES[c.type]}'" for c in decl.columns) + "}"
        try:
            con.execute(
                f"INSERT INTO {q(rel)} SELECT * FROM read_csv(?, delim='\\t', header=false, quote='', "
                f"escape='', nullstr='\\N', auto_detect=false, columns={spec})",  # as the index loads
                [str(path)],
            )
        except duckdb.Error as exc:
            raise InputError(f"cannot read {path} as '{rel}' ({decl.arity} columns): {_first_line(exc)}") from None
    return con


def write_outputs(out_dir: Path, results: dict[str, list[tuple]]) -> list[Path]:
    """Write `<rel>.csv` per relation (sorted rows, Soufflé's output format), atomically."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for rel, rows in results.items():
        target = out_dir / f"{rel}.csv"
        write_rows(target, sorted(rows))
        written.append(target)
    return written


def write_rows(target: Path | str, rows: list[tuple]) -> None:
    """`rows` as they come, a line each, tab-separated without quoting
    (Soufflé's output format; `()` a nullary fact), written atomically."""
    lines = ["\t".join(map(str, row)) if row else "()" for row in rows]
    with atomic_open(Path(target), "w") as fh:
        fh.write("\n".join(lines) + "\n" if lines else "")


def copy_rows(con, sql: str, target: Path | str) -> int:
    """`sql`'s rows written to `target` by DuckDB, in the format write_rows
    writes (tab-separated, no quoting), atomically; -> the rows written."""
    with atomic_path(Path(target)) as tmp:
        path = str(tmp).replace("'", "''")
        (count,) = con.execute(f"COPY ({sql}) TO '{path}' "
                               "(FORMAT csv, DELIMITER '\t', HEADER false, QUOTE '', ESCAPE '', NULL 'None')").fetchone()
    return count


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
