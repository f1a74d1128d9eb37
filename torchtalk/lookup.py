"""What is read off an open fact DB without the rules: its tables and
metadata, a test file's path as typed, and the one question Datalog cannot
say, word matching (`find_similar_tests`). Every other question, listings
included (Note [Listings are queries] in torchtalk/api.py), is a named query
in rules/, run by `api.query` for the CLI, the API and MCP alike (STYLE 15).

Note [Missing layers]: a relation whose layer was not indexed yet (or is still
being built) may have no table, or an empty one. Lookups then answer from
what is there and say which layer is missing in `Table.notes`; they never fail
for it.

Example:
    >>> find_similar_tests(con, "matmul out").rows[0][0]  # doctest: +SKIP
    'test/torch_np/numpy_tests/core/test_multiarray.py::TestMethods::test_matmul_out'
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from torchtalk.errors import QueryError, did_you_mean

DEFAULT_LIMIT = 40


@dataclass(frozen=True)
class Table:
    """An answer: `columns` name the values of each row of `rows`.

    `total` counts the rows before the cap (`len(rows) <= total`); `notes`
    say what is missing or how the answer was narrowed.
    """

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    total: int
    notes: tuple[str, ...] = field(default=())
    # when only the first rows of each section were read (Note [Rows per
    # section] in torchtalk/query/output.py): rows per section value, and
    # the indices of the columns with one value over all rows
    counts: dict | None = None
    one_value: frozenset[int] | None = None

    def dicts(self) -> list[dict[str, Any]]:
        """The rows as dicts keyed by column name."""
        return [dict(zip(self.columns, r, strict=True)) for r in self.rows]


@dataclass(frozen=True)
class DBInfo:
    """What a fact DB holds: its tables, rows per relation, the layers indexed."""

    tables: frozenset[str]
    rows: dict[str, int]
    layers: frozenset[str] | None  # None: a DB without torchtalk_layers


def db_info(con) -> DBInfo:
    """The DBInfo of `con` (cached per connection, see Note [DB info cache])."""
    from torchtalk.connmemo import per_connection

    return per_connection(con, "db_info", _db_info)


def _db_info(con) -> DBInfo:
    names = frozenset(r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall())
    rows: dict[str, int] = {}
    if "torchtalk_relations" in names:
        rows = dict(con.execute("SELECT relation, rows FROM torchtalk_relations").fetchall())
    else:
        for n in names:
            rows[n] = con.execute(f'SELECT count(*) FROM "{n}"').fetchone()[0]
    layers = None
    if "torchtalk_layers" in names:
        layers = frozenset(r[0] for r in con.execute("SELECT layer FROM torchtalk_layers").fetchall())
    return DBInfo(names, rows, layers)


def tables(con) -> frozenset[str]:
    """The relation tables present in the DB."""
    return db_info(con).tables


def meta(con) -> dict[str, str]:
    """torchtalk_meta as a dict (source, version, git_commit, indexed_at, ...)."""
    if "torchtalk_meta" not in tables(con):
        return {}
    return dict(con.execute("SELECT key, value FROM torchtalk_meta").fetchall())


def layer_of(relation: str) -> str:
    """The extractor layer that writes `relation` (first one listed)."""
    from extractors.layers import LAYERS

    for layer in LAYERS:
        if relation in layer.relations:
            return layer.name
    return "?"


def missing_note(con, *relations: str) -> tuple[str, ...]:
    """One note naming the layers, among those writing `relations`, not indexed yet."""
    info = db_info(con)
    missing: dict[str, list[str]] = {}
    for rel in relations:
        layer = layer_of(rel)
        if (info.layers is not None and layer in info.layers) or info.rows.get(rel, 0) > 0:
            continue
        missing.setdefault(layer, []).append(rel)
    if not missing:
        return ()
    parts = [f"{layer} ({', '.join(rels)})" for layer, rels in missing.items()]
    return ("not indexed yet, answer may be incomplete: layer " + "; layer ".join(parts),)


def _select(con, relations: tuple[str, ...], sql: str, params: list[Any], limit: int):
    """Run `sql`; rows capped at `limit` and the uncapped count. Missing tables give no rows."""
    present = tables(con)
    if any(r not in present for r in relations):
        return (), 0
    rows = con.execute(sql, params).fetchall()
    return tuple(rows[:limit]), len(rows)


def normalize_test_path(con, path: str) -> str:
    """`path` as a tree-relative test file of the DB, or a QueryError with candidates."""
    rel = "test_file" if db_info(con).rows.get("test_file") else "test"
    files = [r[0] for r in con.execute(f"SELECT DISTINCT file FROM {rel}").fetchall()]
    p = path.strip().replace("\\", "/")
    for exact in (p, "test/" + p.lstrip("./")):
        if exact in files:
            return exact
    tail = [f for f in files if p.endswith("/" + f) or f.endswith("/" + p.lstrip("./"))]
    if len(tail) == 1:
        return tail[0]
    if len(tail) > 1:
        shown = ", ".join(sorted(tail)[:5])
        raise QueryError(f"test file {path!r} is ambiguous", hint=f"one of: {shown}")
    hint = did_you_mean(p if "/" in p else "test/" + p, files)
    raise QueryError(f"no indexed test file {path!r}", hint=hint)


_WORD = re.compile(r"[A-Za-z0-9]+")


def _words(query: str) -> list[str]:
    words = [w.lower() for w in _WORD.findall(query.replace("_", " "))]
    return [w for w in words if w not in {"test", "tests", "the", "a", "of", "for"}]


def find_similar_tests(con, query: str, limit: int = DEFAULT_LIMIT) -> Table:
    """Tests whose name or covered subjects match the words of `query`, best first.

    Words match whole tokens (`out` matches test_matmul_out, not test_dropout).
    Per query word a test scores 2 when it is a token of the test function's
    name, 1 when it is elsewhere in its id (class, file), and 1 more when a
    subject it covers (tests_cover) has it as a token.

    Example:
        >>> find_similar_tests(con, "matmul out").rows[0][:2]
        ('test/torch_np/numpy_tests/core/test_multiarray.py::TestMethods::test_matmul_out', 5)
    """
    words = _words(query)
    if not words:
        raise QueryError(f"no words to search for in {query!r}", hint="e.g. 'softmax backward'")
    notes = missing_note(con, "test", "tests_cover")
    cols = ("test", "score", "file", "line")
    present = tables(con)
    if "test" not in present:
        return Table(f"tests like {query!r}", cols, (), 0, notes)
    tokens = _test_tokens(con)
    if tokens is not None:  # a server's connection (Note [Tests by token])
        rows, total = tokens.similar(words, limit)
        return Table(f"tests like {query!r}", cols, rows, total, notes)
    func = "lower(regexp_extract(t.test, '[^:]+$'))"
    terms, params = [], []
    for w in words:
        tok = f"(^|[^a-z0-9]){w}([^a-z0-9]|$)"
        terms.append(
            f"CASE WHEN regexp_matches({func}, ?) THEN 2 WHEN regexp_matches(lower(t.test), ?) THEN 1 ELSE 0 END"
        )
        params += [tok, tok]
        if "tests_cover" in present:
            terms.append(
                "(t.test IN (SELECT test FROM tests_cover WHERE lower(subject) LIKE ? "
                "AND regexp_matches(lower(subject), ?)))::INT"
            )
            params += [f"%{w}%", tok]
    # cheap prefilter: the id contains a word, or the test covers a subject that does
    pre = " OR ".join("lower(t.test) LIKE ?" for _ in words)
    params += [f"%{w}%" for w in words]
    if "tests_cover" in present:
        pre += " OR t.test IN (SELECT test FROM tests_cover WHERE " + " OR ".join(
            "lower(subject) LIKE ?" for _ in words) + ")"
        params += [f"%{w}%" for w in words]
    sql = (
        f"SELECT test, score, file, line FROM (SELECT t.test, t.file, t.line, "
        f"{' + '.join(terms)} AS score FROM test t WHERE t.kind = 'function' AND ({pre})) "
        f"WHERE score > 0 ORDER BY score DESC, length(regexp_extract(test, '[^:]+$')), test, line"
    )
    rows, total = _select(con, ("test",), sql, params, limit)
    return Table(f"tests like {query!r}", cols, rows, total, notes)


def warm(con) -> None:
    """Build what find_similar_tests reads on a server's connection (Note
    [Tests by token]), for the server's warm-up to pay instead of a call."""
    if "test" in tables(con):
        _test_tokens(con)


def _test_tokens(con) -> _TestTokens | None:
    """The token maps of a server's connection, made once for its DB (Note
    [Tests by token]); None on another (a one-shot one asks DuckDB)."""
    from torchtalk.connmemo import per_connection

    return per_connection(con, "tests-by-token", _TestTokens) if getattr(con, "engine", None) == "memory" else None


# Note [Tests by token]: find_similar_tests scores each test function by the
# words of the query that are whole tokens (maximal [a-z0-9] runs) of its
# lower-cased id, of its function name, and of the subjects it covers. On
# DuckDB that is a regular expression per word over 26,000 tests and a
# LIKE over 107,000 tests_cover rows: 24 ms per call, every call, the
# slowest tool of bench/mcp.py's mix. A server's connection (the in-memory
# engine's, which keeps what it computes for its DB: Note [DB info cache])
# reads the two tables once into token -> tests maps instead, and a call
# looks its words up there: the same rows in the same order
# (tests/test_lookups_real.py compares the two on the real tree).
_TOKEN = re.compile(r"[a-z0-9]+")


class _TestTokens:
    """The test functions of a DB by the tokens of their id, of their
    function name and of the subjects they cover (Note [Tests by token])."""

    def __init__(self, con) -> None:
        from collections import defaultdict

        self.where: dict[str, list[tuple[str, int]]] = defaultdict(list)  # a test defined twice: two rows
        self.in_name: dict[str, set[str]] = defaultdict(set)
        self.in_id: dict[str, set[str]] = defaultdict(set)
        self.in_covered: dict[str, set[str]] = defaultdict(set)
        for test, file, line in con.execute("SELECT test, file, line FROM test WHERE kind = 'function'").fetchall():
            self.where[test].append((file, line))
            low = test.lower()
            for tok in _TOKEN.findall(low):
                self.in_id[tok].add(test)
            for tok in _TOKEN.findall(low.rpartition(":")[2]):
                self.in_name[tok].add(test)
        if "tests_cover" in tables(con):
            tokens: dict[str, list[str]] = {}
            for test, subject in con.execute("SELECT DISTINCT test, subject FROM tests_cover").fetchall():
                toks = tokens.get(subject)
                if toks is None:
                    toks = tokens[subject] = _TOKEN.findall(subject.lower())
                for tok in toks:
                    self.in_covered[tok].add(test)

    def similar(self, words: list[str], limit: int) -> tuple[tuple, int]:
        """(the first `limit` rows of find_similar_tests, their count)."""
        score: dict[str, int] = {}
        for w in words:
            named, covered = self.in_name.get(w, ()), self.in_covered.get(w, ())
            for test in self.in_id.get(w, ()):
                score[test] = score.get(test, 0) + (2 if test in named else 1)
            for test in covered:
                if test in self.where:
                    score[test] = score.get(test, 0) + 1
        ranked = sorted(((test, n, *at) for test, n in score.items() for at in self.where[test]),
                        key=lambda r: (-r[1], len(r[0].rpartition(":")[2]), r[0], r[3]))
        return tuple(ranked[:limit]), len(ranked)
