"""The Soufflé engine: the same program run by `souffle` as a subprocess.

Writes the program (printed flat: includes resolved, `.output` set to the
requested relations) and one `<rel>.facts` per input relation (from the fact
DB tables and the given facts, tab-separated) to a temp dir, runs
`souffle -F facts -D out prog.dl`, and reads `out/<rel>.csv` back.

Note [Compiled Soufflé]: with `compiled=True` the program is compiled once
by `souffle -o` into an executable kept in the cache dir under the hash of
its text and of the souffle binary (a query shape prints the same text each
time), then run as `exe -F facts -D out`. Compiled mode needs the headers a
real Soufflé install has beside its binary (`<prefix>/include/souffle`,
which ../shared/souffle/build.sh installs); the binary is the first
`souffle` on PATH that has them, else build.sh's default prefix.

Example:
    >>> SouffleEngine().run(prog, con, ["impact"], {})  # doctest: +SKIP
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from torchtalk.datalog import ast as A
from torchtalk.datalog.analysis.strata import needed_relations
from torchtalk.datalog.compile import q
from torchtalk.datalog.engines.base import Fetch, fetch_rows
from torchtalk.errors import EngineError


def souffle_path() -> str | None:
    """The `souffle` binary on PATH, or None."""
    return shutil.which("souffle")


class SouffleEngine:
    name = "souffle"

    def __init__(self, compiled: bool = False) -> None:
        self.compiled = compiled
        if compiled:
            self.name = "souffle-compiled"

    def run(self, program: A.Program, con: Any, outputs: list[str], facts: dict[str, list[tuple]],
            tables: dict[str, str] | None = None,
            fetch: dict[str, Fetch] | None = None) -> dict[str, list[tuple]]:
        """Evaluate `outputs` with `souffle`; EngineError if it is not installed.
        An output in `fetch` comes back as its `Fetch` says (done in Python)."""
        exe = compiler_path() if self.compiled else souffle_path()
        if exe is None and self.compiled:
            raise EngineError(
                "compiled Soufflé needs a souffle installed with its headers (<prefix>/include/souffle)",
                hint="run ../shared/souffle/build.sh, or use --engine souffle")
        if exe is None:
            raise EngineError(
                "souffle is not on PATH", hint="install Soufflé (https://souffle-lang.github.io) or use --engine duckdb"
            )
        needed = needed_relations(program, outputs)
        with tempfile.TemporaryDirectory(prefix="torchtalk-souffle-") as tmp:
            fdir, odir = Path(tmp, "facts"), Path(tmp, "out")
            fdir.mkdir()
            odir.mkdir()
            # the inputs, and the relations given as facts (a presolved relation,
            # Note [Presolve] in torchtalk/query/run.py, is no .input of the program)
            given = [rel for rel in needed if rel in facts and rel not in program.inputs]
            for rel in [*program.inputs, *given]:
                if rel in needed:
                    rows = _rows(con, rel, facts.get(rel, []), (tables or {}).get(rel))
                    if program.decls[rel].arity == 0:  # a table holds it as one `unit` column
                        rows = [()] if rows else []
                    write_facts(fdir / f"{rel}.facts", rows)
            prog = Path(tmp, "program.dl")
            prog.write_text(souffle_text(program, outputs, given))
            if self.compiled:
                cmd = [str(compiled_program(exe, prog)), "-F", str(fdir), "-D", str(odir)]
            else:
                cmd = [exe, "-F", str(fdir), "-D", str(odir), str(prog)]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                first = (proc.stderr or proc.stdout).strip().splitlines()
                raise EngineError(f"souffle failed (exit {proc.returncode}): {first[0] if first else 'no output'}")
            out = {rel: read_csv(odir / f"{rel}.csv", program.decls[rel]) for rel in outputs}
        for rel, spec in (fetch or {}).items():
            out[rel] = fetch_rows(out[rel], spec)
        return out


def compiler_path() -> str | None:
    """A `souffle` that can compile (Note [Compiled Soufflé]), or None."""
    import os

    found = shutil.which("souffle")
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "souffle-2.5" / "bin" / "souffle"
    for cand in (found, str(default)):
        if cand and Path(cand).is_file() and (Path(cand).resolve().parent.parent / "include" / "souffle").is_dir():
            return cand
    return None


def compiled_program(exe: str, prog: Path) -> Path:
    """The executable `souffle -o` makes of `prog`, compiled once per program
    text and souffle binary, kept in the cache dir (Note [Compiled Soufflé])."""
    import hashlib
    import os

    from torchtalk.paths import cache_dir

    st = Path(exe).resolve().stat()
    key = hashlib.sha256(f"{Path(exe).resolve()}\0{st.st_size}\0{st.st_mtime_ns}\0".encode() + prog.read_bytes())
    target = cache_dir() / "souffle" / f"program-{key.hexdigest()[:24]}"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="torchtalk-souffle-o-", dir=target.parent) as tmp:
        out = Path(tmp, "program")
        proc = subprocess.run([exe, "-o", str(out), str(prog)], capture_output=True, text=True, cwd=tmp)
        if proc.returncode != 0 or not out.is_file():
            first = (proc.stderr or proc.stdout).strip().splitlines()
            raise EngineError(f"souffle -o failed (exit {proc.returncode}): {first[0] if first else 'no output'}")
        os.replace(out, target)  # atomic: a concurrent run sees the whole executable or none
    return target


def souffle_text(program: A.Program, outputs: list[str], given: list[str] = ()) -> str:
    """The program as one Soufflé file whose `.output`s are exactly `outputs`,
    reading the relations `given` as facts too."""
    dirs = [d for d in program.directives if d.kind is A.IOKind.INPUT]
    dirs += [A.IODirective(A.IOKind.INPUT, rel) for rel in given]
    dirs += [A.IODirective(A.IOKind.OUTPUT, rel) for rel in outputs]
    flat = A.Program(program.decls, program.rules, tuple(dirs), program.types)
    return str(flat)


def _rows(con, rel: str, given: list[tuple], table: str | None = None) -> list[tuple]:
    rows = list(given)
    if con is not None and table is not None:
        return rows + con.execute(f"SELECT * FROM {table}").fetchall()
    if con is not None:
        exists = con.execute(
            "SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() "
            "AND schema_name = current_schema() AND table_name = ?",
            [rel],
        ).fetchone()[0]
        if exists:
            rows += con.execute(f"SELECT * FROM {q(rel)}").fetchall()
    return rows


def write_facts(path: Path, rows: list[tuple]) -> None:
    """Soufflé fact file: one row per line, columns separated by tabs."""
    with open(path, "w", encoding="utf-8") as fh:
        for row in rows:
            for v in row:
                if isinstance(v, str) and ("\t" in v or "\n" in v):
                    raise EngineError(f"value {v!r} holds a tab or newline, which Soufflé fact files cannot carry")
            fh.write("\t".join(str(v) for v in row) + "\n" if row else "()\n")


def read_csv(path: Path, decl: A.Decl) -> list[tuple]:
    """Rows of a Soufflé output file (tab-separated), typed by `decl`."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if decl.arity == 0:  # a nullary relation that holds is written as `()`
            return [()]
        parts = line.split("\t")
        out.append(tuple(int(v) if c.type is A.ColType.NUMBER else v for v, c in zip(parts, decl.columns, strict=True)))
    return out
