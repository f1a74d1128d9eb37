"""Careless input gets one line and a non-zero exit (issue 15, deliverable 7).

Each case runs `torchtalk` as a real subprocess (the exit code and stderr are
the contract) or calls the MCP server through the SDK's stdio client, on the
real 2.6.0 tree's fact DB; a truncated or corrupt DB is a damaged copy of it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from torchtalk.query.run import MAX_DEPTH

pytestmark = pytest.mark.real_tree

HINT = "(the walks' memory grows with depth; see docs/queries.md)"


def cli(*argv: str, stdin: str | None = None, env: dict | None = None, timeout: float = 60):
    """Run `torchtalk ARGV`; (exit code, stdout, stderr)."""
    p = subprocess.run([sys.executable, "-m", "torchtalk", *argv], input=stdin if stdin is not None else "",
                       capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})
    return p.returncode, p.stdout, p.stderr


def one_line_error(code: int, out: str, err: str) -> str:
    """Assert a user error: exit 1, nothing on stdout, no traceback; its first line."""
    assert code == 1, (code, out, err)
    assert out == "" and "Traceback" not in err, err
    return err.splitlines()[0]


@pytest.fixture(scope="module")
def db(real_db) -> str:
    return str(real_db)


# ---------------------------------------------------------------- depth


@pytest.mark.parametrize(("query", "col", "value"), [
    ("impact(cpublas::gemm, depth=-1)", 29, "-1"),
    ("impact(cpublas::gemm, depth=0)", 29, "0"),
    ("kernels(add, depth=100000)", 20, "100000"),
    ("paths(torch.softmax -> cuda, depth=21)", 36, "21"),
])
def test_a_depth_out_of_bounds_is_one_line_before_any_walk(db, query, col, value):
    t0 = time.perf_counter()
    code, out, err = cli("query", query, "--db", db)
    first = one_line_error(code, out, err)
    assert first == f"torchtalk: <query>:1:{col}: query error: depth must be 1 to {MAX_DEPTH}, got {value} {HINT}"
    assert err.splitlines()[1:] == [f"    {query}", "    " + " " * (col - 1) + "^"]
    assert time.perf_counter() - t0 < 10  # refused, not walked 100,000 levels deep


def test_the_deepest_allowed_walk_answers(db):
    code, out, err = cli("query", f"kernels(add, depth={MAX_DEPTH})", "--db", db, "--json")
    assert code == 0, err


def test_query_memory_is_capped_so_a_big_walk_fails_in_one_line(db):
    # Note [Query memory]: the same walk under a tiny cap is refused by DuckDB, not the machine
    code, out, err = cli("query", f"kernels(add, depth={MAX_DEPTH})", "--db", db,
                         env={"TORCHTALK_QUERY_MEMORY": "30MB"})
    first = one_line_error(code, out, err)
    assert first.startswith("torchtalk: engine error: DuckDB failed: Out of Memory Error"), first
    code, out, err = cli("query", "kernels(add)", "--db", db, env={"TORCHTALK_QUERY_MEMORY": "lots"})
    assert one_line_error(code, out, err).startswith(
        "torchtalk: error: TORCHTALK_QUERY_MEMORY='lots' is not a memory size")


def test_affected_depth_is_checked(db):
    code, out, err = cli("affected", "--db", db, "--depth", "-3", stdin="x\n")
    assert one_line_error(code, out, err) == f"torchtalk: error: --depth must be 1 to {MAX_DEPTH}, got -3 {HINT}"


# ---------------------------------------------------------------- paths, diffs


@pytest.mark.parametrize("query", ["paths(softmax_warp_forward)", "paths()"])
def test_paths_without_an_arrow(db, query):
    code, out, err = cli("query", query, "--db", db)
    assert "query error: paths needs two ends: `A -> B` (e.g. paths(softmax_warp_forward -> python), " \
           "paths(torch.softmax -> cuda))" in one_line_error(code, out, err)


@pytest.mark.parametrize("diff", ["", "  \n\t\n\n"])
def test_an_empty_or_blank_diff_on_stdin(db, diff):
    code, out, err = cli("affected", "--db", db, stdin=diff)
    assert one_line_error(code, out, err) == (
        "torchtalk: error: the diff from <stdin> is empty: no changed lines to follow "
        "(pipe a unified diff, or give --patch FILE or --diff REV)")
    assert len(err.splitlines()) == 1


def test_an_empty_patch_file(db, tmp_path):
    (tmp_path / "empty.patch").write_text("\n")
    code, out, err = cli("affected", "--db", db, "--patch", str(tmp_path / "empty.patch"))
    assert f"the diff from {tmp_path / 'empty.patch'} is empty" in one_line_error(code, out, err)


# ---------------------------------------------------------------- damaged DBs


def damaged(db: str, dest: Path, how: str) -> Path:
    """A copy of `db` cut after 3 MB ("truncated"), or with every byte after
    3 MB overwritten ("corrupt": same size, bad block checksums)."""
    out = dest / f"{how}.duckdb"
    shutil.copyfile(db, out)
    keep = 3 << 20
    with open(out, "r+b") as fh:
        if how == "truncated":
            fh.truncate(keep)
        else:
            size = fh.seek(0, 2)
            fh.seek(keep)
            fh.write(bytes((i * 131 + 7) % 251 for i in range(size - keep)))
    return out


@pytest.mark.parametrize("how", ["truncated", "corrupt"])
@pytest.mark.parametrize("argv", [("query", "callers(cpublas::gemm)"), ("query", "trace(add)"), ("status",)])
def test_a_damaged_db_is_one_line(db, tmp_path, how, argv):
    bad = damaged(db, tmp_path, how)
    code, out, err = cli(*argv, "--db", str(bad))
    first = one_line_error(code, out, err)
    assert first.startswith(f"torchtalk: store error: cannot read the database {bad}: "), first
    assert first.endswith("(it may be truncated or corrupt; re-run `torchtalk index --force`)")
    assert len(err.splitlines()) == 1


# ---------------------------------------------------------------- MCP


@pytest.fixture(scope="module")
def mcp(db):
    from test_mcp_server import open_session

    with open_session(["--db", db]) as session:
        yield session


@pytest.mark.parametrize(("tool", "args", "text"), [
    ("impact", {"name": "gemm", "depth": 99}, f"impact: error: depth must be 1 to {MAX_DEPTH}, got 99 (parameters: name, depth, budget)"),
    ("impact", {"name": "gemm", "depth": -1}, f"impact: error: depth must be 1 to {MAX_DEPTH}, got -1 (parameters: name, depth, budget)"),
    ("impact", {"name": "gemm", "depth": "deep"},
     "impact: error: depth must be an integer, got 'deep' (parameters: name, depth, budget)"),
    ("impact", {}, "impact: error: name is required (parameters: name, depth, budget)"),
    ("affected", {"functions": []}, "affected: error: functions must not be empty (parameters: functions, budget)"),
    ("called_by", {"name": 3}, "called_by: error: name must be a string, got 3 (parameters: name, budget)"),
])
def test_mcp_argument_errors_are_one_line_without_pydantic(mcp, tool, args, text):
    r = mcp.call(tool, **args)
    assert r.is_error
    assert r.text.startswith(f"Error executing tool {tool}: ") and r.text.endswith(text), r.text
    assert "\n" not in r.text and "pydantic" not in r.text and "http" not in r.text


def test_every_mcp_depth_is_the_cli_bound(mcp):
    """Note [Depth bound]: each tool taking a `depth` says 1 to MAX_DEPTH in its
    schema, refuses one more (or 0) in one line, as the CLI words it, and
    answers at the bound."""
    tools = [t for t in mcp.list_tools() if "depth" in t.input_schema["properties"]]
    assert [t.name for t in tools] == ["impact"]
    for t in tools:
        schema = t.input_schema["properties"]["depth"]
        number = next(s for s in schema.get("anyOf", [schema]) if s.get("type") == "integer")
        assert (number["minimum"], number["maximum"]) == (1, MAX_DEPTH)
        assert f"1 to {MAX_DEPTH}" in schema["description"]
        for bad in (MAX_DEPTH + 1, 0):
            r = mcp.call(t.name, name="softmax_warp_forward", depth=bad)
            assert r.is_error and "\n" not in r.text, r.text
            assert r.text.endswith(f"error: depth must be 1 to {MAX_DEPTH}, got {bad} (parameters: name, depth, budget)")
        r = mcp.call(t.name, name="softmax_warp_forward", depth=MAX_DEPTH)
        assert not r.is_error and r.total > 0, r.text


def test_mcp_query_memory_is_capped_as_the_cli_s(db):
    """Note [Query memory]: the server's connections take the same cap; the
    deepest walk under a tiny one is refused by DuckDB in one line."""
    import os

    from test_mcp_server import open_session

    with open_session(["--db", str(db)], env={**os.environ, "TORCHTALK_QUERY_MEMORY": "30MB"}) as s:
        r = s.call("query", dsl=f"kernels(add, depth={MAX_DEPTH})")
        assert r.is_error and "\n" not in r.text, r.text
        assert "engine error: DuckDB failed: Out of Memory Error" in r.text


def test_mcp_query_depth_is_the_cli_bound(mcp):
    r = mcp.call("query", dsl="kernels(add, depth=100000)")
    assert r.is_error and f"depth must be 1 to {MAX_DEPTH}, got 100000" in r.text.splitlines()[0]


def test_mcp_on_a_truncated_db_says_so_in_one_line(db, tmp_path):
    from test_mcp_server import open_session

    bad = damaged(db, tmp_path, "truncated")
    with open_session(["--db", str(bad)]) as s:
        r = s.call("calls", name="at::native::matmul")
        assert r.is_error and "\n" not in r.text, r.text
        assert r.text.startswith(f"Error executing tool calls: store error: cannot read the database {bad}: ")
        again = s.call("get_status")  # the server lives on: an answer, or the same one-line error
        assert not again.is_error or ("\n" not in again.text and "cannot read the database" in again.text)


# ---------------------------------------------------------------- which error first
# (Note [DB opened meanwhile] in torchtalk/api.py: the DB is opened in a
# thread while the query text is parsed; the errors keep their order)


def test_a_damaged_db_is_said_before_a_malformed_query(db, tmp_path):
    bad = damaged(db, tmp_path, "truncated")
    first = one_line_error(*cli("query", "impact(gemm", "--db", str(bad)))
    assert first.startswith(f"torchtalk: store error: cannot read the database {bad}: "), first


def test_a_missing_db_is_said_before_a_malformed_query(tmp_path):
    first = one_line_error(*cli("query", "impact(gemm", "--db", str(tmp_path / "none.duckdb")))
    assert first == f"torchtalk: store error: no such database: {tmp_path / 'none.duckdb'} " \
                    "(run `torchtalk index --source PATH --db FILE`)", first


def test_a_malformed_query_on_a_good_db_is_its_parse_error(db):
    first = one_line_error(*cli("query", "impact(gemm", "--db", db))
    assert first.startswith("torchtalk: <query>:1:12: parse error: unexpected end of query"), first


def test_a_broken_user_rule_on_a_good_db_is_its_error(db, tmp_path):
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "bad.dl").write_text(".decl q(x: symbol)\nq(x) :- nowhere(x).\n")
    first = one_line_error(*cli("query", "q(a)", "--db", db, "--rules", str(tmp_path / "r")))
    assert f"{tmp_path / 'r' / 'bad.dl'}:2:" in first and "nowhere" in first, first


def test_the_db_opened_meanwhile_is_closed_when_the_query_is_interrupted(db, monkeypatch):
    import torchtalk.store as store
    from torchtalk import api

    opened, original = [], store.open_db

    def open_db(path, read_only=True):
        opened.append(original(path, read_only))
        return opened[-1]

    def interrupted(*_a):
        raise KeyboardInterrupt

    monkeypatch.setattr(store, "open_db", open_db)
    monkeypatch.setattr(api, "_ready_query", interrupted)
    with pytest.raises(KeyboardInterrupt):
        api.query("search(gemm)", db=db)
    assert len(opened) == 1
    with pytest.raises(Exception, match="closed"):
        opened[0].execute("select 1")


def test_the_db_s_opening_imports_nothing_once_its_modules_are(db):
    """torchtalk/meanwhile.py: after `open_db_imports`, opening the DB (in a
    thread beside the query's own imports) imports no module, in a new process."""
    code = (
        "import sys\n"
        "from torchtalk import store\n"
        "store.open_db_imports()\n"
        "before = set(sys.modules)\n"
        f"store.open_db({db!r}).close()\n"
        "print(sorted(set(sys.modules) - before))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False,
                         env={**os.environ, "TORCHTALK_SERVER": "0"})
    assert out.stdout.strip() == "[]", out.stdout + out.stderr[-2000:]
