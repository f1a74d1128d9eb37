"""Relations of the rule library computed once per index, not once per query.

Note [Derived at index time]: about half of the library's derived relations
read no query argument (`aten_call`, `call_edge`, `flow`, `link_reach`,
`op_stub_impl`, …): their rows depend only on the fact tables, yet every
query that needs one recomputed it (tens of ms each on the 2.6.0 tree, most
of an `impact` or `trace`). `torchtalk index` now evaluates them with the
built-in library after loading the facts and stores each as table
`derived."<relation>"` of the fact DB, listed in `derived.catalog` with a
fingerprint: the text of every declaration and rule the relation depends on.

A query uses a stored table only when the fingerprint of the relation in
its own library is the same (the rules/ directory edited since the index, or
a user's rule that adds to a relation's closure, means recomputing it, as
before); the relation then becomes an input read from that table, and the
rules under it are not evaluated. The index writes the DB to a temp file and
renames it, so the stored rows always belong to the facts beside them.

Example:
    >>> program, tables = use_derived(load_library(), con)  # doctest: +SKIP
    >>> tables["flow"]
    'derived."flow"'
"""

from __future__ import annotations

import hashlib
from operator import itemgetter
from typing import Any

from torchtalk.datalog import ast as A
from torchtalk.datalog.analysis.strata import dependency_edges, needed_relations
from torchtalk.datalog.compile import q
from torchtalk.datalog.duck import duckdb as lean_duckdb

SCHEMA = "derived"
CATALOG = f"{SCHEMA}.catalog"


def table_of(rel: str) -> str:
    """The SQL name of `rel`'s stored table."""
    return f"{SCHEMA}.{q(rel)}"


def argument_free(program: A.Program) -> list[str]:
    """The derived relations worth storing: those whose rules read,
    transitively, no query argument (Note [Named queries]), so their rows
    depend on the fact tables alone; not views (they cost as much to read
    back as to compute). Those only other stored relations read (`step`
    under `step_pair`, `fn_device` under `step`) are stored too: an update
    in place sees whether they moved (Note [Derived in place]); but not a
    step of a pipeline, one that a single stored relation reads, and never
    under a negation or an aggregate (`step0` under `step`): it is computed
    inside that one, where its moves show as that one's, at no table's cost."""
    return program.cached("argument_free", lambda: _argument_free(program))


def _argument_free(program: A.Program) -> list[str]:
    args = {n for n in program.inputs if is_argument(program, n)}
    derived = {r.head.name for r in program.rules} - set(program.inputs)
    views = _views(program)
    free = {rel for rel in derived - views if not (needed_relations(program, [rel]) & args)}
    read_by = readers(program)
    piped = {rel for rel in free if rel in read_by and len({h for h, _ in read_by[rel]}) == 1
             and all(h in free and not strict for h, strict in read_by[rel])}
    return sorted(free - piped)


def readers(program: A.Program) -> dict[str, frozenset[tuple[str, bool]]]:
    """Relation -> (each other relation whose rules read it, whether under
    a negation or an aggregate), for those some rule reads."""
    def compute():
        out: dict[str, set[tuple[str, bool]]] = {}
        for e in dependency_edges(program):
            if e.body != e.head:
                out.setdefault(e.body, set()).add((e.head, e.strict))
        return {rel: frozenset(by) for rel, by in out.items()}
    return program.cached("readers", compute)


def _views(program: A.Program) -> set[str]:
    """Relations whose every rule copies one input or view, with at most
    comparisons (`call_edge`, `flow`, `api_op`): reading them back would cost
    as much as the copy, so they are computed when a query needs them."""
    inputs = set(program.inputs)
    views: set[str] = set()
    changed = True
    while changed:
        changed = False
        for rel in {r.head.name for r in program.rules} - views - inputs:
            ok = True
            for rule in program.rules_for(rel):
                atoms = [lit for lit in rule.body if not isinstance(lit, A.Comparison)]
                ok &= len(atoms) == 1 and isinstance(atoms[0], A.Atom) and (
                    atoms[0].name in inputs or atoms[0].name in views)
                ok &= not any(isinstance(t, A.Aggregate) for lit in rule.body
                              if isinstance(lit, A.Comparison) for t in (lit.left, lit.right))
            if ok:
                views.add(rel)
                changed = True
    return views


def fingerprints(program: A.Program) -> dict[str, str]:
    """Relation -> digest of the decls, input directives and rules it depends
    on, for every argument-free relation (cached per program object)."""
    return program.cached("fingerprints", lambda: _fingerprints(program))


def _fingerprints(program: A.Program) -> dict[str, str]:
    inputs = set(program.inputs)
    out = {}
    for rel in argument_free(program):
        closure = needed_relations(program, [rel])
        text = [str(program.decls[r]) + (" .input" if r in inputs else "") for r in sorted(closure)]
        rules = [r for r in program.rules if r.head.name in closure]
        text += sorted(str(r) for r in rules)
        if any(_ord_columns(r) for r in rules):  # ord() is DuckDB's hash (Note [ord])
            text.append(f"duckdb {_duckdb_version()}")
        out[rel] = hashlib.sha1("\n".join(text).encode()).hexdigest()
    return out


def materialize(con: Any, program: A.Program, tables: frozenset[str]) -> dict[str, int]:
    """Store every argument-free relation of `program` in `derived` (on the
    writable connection of an index being built; `tables` = the fact tables
    it holds). -> rows per relation."""
    from torchtalk.datalog.engines.duckdb import DuckDBEngine

    prints = fingerprints(program)
    con.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
    con.execute(f"CREATE OR REPLACE TABLE {CATALOG} (relation VARCHAR, fingerprint VARCHAR, rows BIGINT)")
    counts = DuckDBEngine().materialize(_reading(program, tables), con, {rel: table_of(rel) for rel in prints})
    for rel in prints:
        _check_one_to_one(con, program, rel)
    con.executemany(f"INSERT INTO {CATALOG} VALUES (?, ?, ?)",
                    [(rel, prints[rel], counts[rel]) for rel in prints])
    return counts


def _reading(program: A.Program, tables: frozenset[str], stored: frozenset[str] = frozenset()) -> A.Program:
    """`program` reading the relations `stored` from their tables, without
    the rules that read a query argument or a fact relation with no table
    of `tables` (they derive nothing at index time)."""
    from torchtalk.datalog.transform.prune import prune
    from torchtalk.datalog.transform.use_stored import use_stored

    read = use_stored(program, stored) if stored else program
    return prune(read, frozenset(n for n in read.inputs
                                 if is_argument(read, n) or (n not in tables and n not in stored)))


def refresh(con: Any, program: A.Program, tables: frozenset[str], changed: frozenset[str],
            moved=None, empty: frozenset[str] = frozenset(), values=None,
            by_part: dict[str, tuple[str, int]] | None = None,
            keyed: dict[str, tuple[int, frozenset[str]]] | None = None,
            deltas=None) -> dict[str, int]:
    """Compute again, on the writable `con` of a DB updated in place, the
    stored relations whose rows may have changed: those whose fingerprint
    is no longer the library's, and those that read a fact relation in
    `changed` in a column whose values moved (`moved(relation, columns)`,
    default: any change moves every column), or a stored relation computed
    again here whose rows moved in a column they read (Note [Derived in
    place]). -> rows per relation computed again.

    `values(relation, column, columns)`: the values at that column of a
    changed fact relation's rows that went or came (whose projection on
    `columns`, those a stored relation reads, did); given, a relation whose
    rows changed only in some files (or at some ops, PART_COLUMNS) is
    updated there alone (Note [Rows changed by file] in
    torchtalk/datalog/analysis/partition.py; `by_part` gets the column and
    the number of its values of each). `keyed`: changed relations whose
    rows changed only by keys that came or went, relation -> (its key
    column, the types of the fact columns its keys are the values of)
    (Note [Names that come and go]). `deltas(relation)`: the tables of a
    changed fact relation's rows that went and came; given, a relation that
    no column partitions is updated at the values of the rows the change
    reaches (Note [Rows a change reaches] in
    torchtalk/datalog/transform/reach.py).

    Note [Derived in place]: an update that changes the rows of a few fact
    relations (torchtalk/update.py) leaves every stored relation whose rules
    read none of them as it is: its rows are a function of unchanged inputs.
    The stored relations are visited in the order they are computed, each
    computed from the fact tables and the tables of the others, so the
    stored rows equal a cold index's. A relation is computed again only when
    what it reads moved: a fact relation whose rows, seen through the columns
    it reads (`needed_columns`), are another set (a line inserted above a
    call moves its line only, which `node` does not read), or a stored
    relation that was computed again and whose rows, seen so, are another
    set too. That is the early cutoff of a build system: `fn_device` reads
    `func`, and a new C++ function in a file of no device changes `func`
    but not `fn_device`, so the steps, which read `func` only through
    `fn_device` and its like, stay. Hence the relations that only other
    stored relations read (`fn_device`, `step`, `link_reach`) are stored too
    (`argument_free`), but for a step of a pipeline, read by one stored
    relation alone and positively (`step0` under `step`): each stored
    relation updated costs some statements of its own (a .cpp body edit
    updated 9 in its file, 6 without them: 0.69-0.76 s against 0.51 s), and
    such a one seldom stays the same when what it reads moved. A relation
    computed again whole is compared with its
    rows before (only when a later one asks what moved); one updated in some
    files only, with its rows of those files before. A catalog that lists
    other relations than the library would store (the library changed) is
    rebuilt whole. A rule that reads a fact relation in `empty` (without
    rows before the update and after it) derives nothing either way, so the
    columns only it reads are not needed (a fast-tier DB has no
    precise_skipped rows: the line of a call it compares is not read).

    Note [Names that come and go]: `node` numbers the names of the fact
    columns typed FnId or StubName, a number per name that no other name
    moves (Note [Numbers that stay] in torchtalk/nodes.py), so an update
    that brings a new C++ function or kernel name changes `node` by one
    row. When the update's `node` rows are only those of names that came or
    went (no name in both its deleted and its inserted rows), a stored
    relation whose every read of `node` numbers a name that another
    positive atom of the rule draws from such a fact column
    (torchtalk/datalog/analysis/drawn.py) sees that change through the fact
    relation too: a name that came is in a fact row that came, at a column
    the rule reads (it joins `node`), and so in the rows of what it reads
    that came, and a name that went, in rows that went. So `node` counts as
    unchanged for it: the relation is kept, or updated in some files only,
    as those rows say. A relation that reads `node` otherwise (a name from
    a constant or a query's argument, every number) sees it changed.
    """
    prints = fingerprints(program)
    have = _read_catalog(con)
    if set(have) != set(prints):
        con.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
        return materialize(con, program, tables)
    from torchtalk.datalog.analysis.drawn import numbers_drawn_names
    from torchtalk.datalog.analysis.strata import strata
    from torchtalk.datalog.engines.duckdb import DuckDBEngine, columns_kept
    from torchtalk.datalog.transform.prune import prune

    live = program.cached(("empty", empty), lambda: prune(program, empty)) if empty else program
    facts_seen: dict = {}

    def fact_moves(rel: str, cols: frozenset[int]) -> bool:
        if (rel, cols) not in facts_seen:
            facts_seen[rel, cols] = True if moved is None else moved(rel, cols)
        return facts_seen[rel, cols]

    stored_moves = _Moves(con, program)  # the stored relations computed again, and what moved in them

    def moves_but(unseen: frozenset[str]):
        """What moved, but for the changed fact relations `unseen`."""
        def moves(rel: str, cols: frozenset[int]) -> bool:
            if rel in stored_moves:
                return stored_moves.moved(rel, cols)
            return rel in changed and rel not in unseen and fact_moves(rel, cols)
        return moves

    def moves_for(target: str):
        """What moved, as stored relation `target` sees it (Note [Names that come and go])."""
        return moves_but(frozenset(rel for rel, (key, types) in (keyed or {}).items()
                                   if numbers_drawn_names(live, target, rel, key, tables, types)))

    def vals(rel: str, col: int, cols=None) -> list:
        return stored_moves.values(rel, col, cols) if rel in stored_moves else values(rel, col, cols)

    # what moved, every name of `node` too: a name that went is no longer
    # there to join (Note [Rows a change reaches])
    any_moves = moves_but(frozenset())

    def delta_tables(rel: str) -> tuple[str, str]:
        return stored_moves.delta(rel) if rel in stored_moves else deltas(rel)

    counts: dict[str, int] = {}
    stored = frozenset(prints)
    try:
        with columns_kept(con):  # Note [Columns kept in a refresh] in datalog/engines/duckdb.py
            for group in program.cached(("stored strata", stored), lambda: [
                    tuple(r for r in st.relations if r in stored) for st in strata(program)]):
                if not group:
                    continue
                moving = [rel for rel in group if have[rel] != prints[rel] or _reads_a_move(
                    live, rel, stored, moves_for(rel), frozenset(changed) | stored_moves.names())]
                if not moving:
                    continue
                reading = program.cached(("reading", tables, group), lambda group=group: _reading(
                    program, tables, stored - set(group)))
                inputs = {r: table_of(r) for r in prints if r not in group}
                if len(group) == 1 and values is not None and have[group[0]] == prints[group[0]]:
                    done = _by_part(con, reading, group[0], moves_for(group[0]), vals, inputs, stored_moves)
                    if done is None and deltas is not None:
                        done = _by_reach(con, reading, group[0], any_moves, delta_tables, inputs, stored_moves)
                    if done is not None:
                        name, n, counts[group[0]] = done
                        if by_part is not None:
                            by_part[group[0]] = (name, n)
                        continue
                for rel in group:  # what it was, to say what moved (Note [Derived in place])
                    con.execute(f"ALTER TABLE {table_of(rel)} RENAME TO {q(rel + WAS)}")
                    stored_moves.whole(rel)
                counts |= DuckDBEngine().materialize(reading, con, {rel: table_of(rel) for rel in group}, inputs)
    finally:
        stored_moves.drop()
    for rel in counts:
        _check_one_to_one(con, program, rel)
    if counts:  # DuckDB's executemany takes no empty list: a change no stored relation reads
        con.executemany(f"UPDATE {CATALOG} SET fingerprint = ?, rows = ? WHERE relation = ?",
                        [(prints[rel], counts[rel], rel) for rel in sorted(counts)])
    return counts


def moved_rows(con, decl, gone_t: str, new_t: str, cols: frozenset[int]) -> bool:
    """Whether `decl`'s rows, projected on `cols`, are another set than
    before the delta in `gone_t`/`new_t` was applied (Note [Derived in
    place]): a lost projection no row has now, or a new one only new rows
    have."""
    return FactMoves(con, {decl.name: decl}, {decl.name: (gone_t, new_t)}).moved(decl.name, cols)


def _had_rows_moved(con, table: str, gone_t: str, new_t: str) -> bool:
    """Whether `table` has rows now and had none before the delta in
    `gone_t`/`new_t`, or the other way round (a rule that reads no column of it)."""
    now, gone, new = (con.execute(f'SELECT count(*) FROM {t}').fetchone()[0] for t in (table, gone_t, new_t))
    return (now > 0) != (now - new + gone > 0)


def _delta_differs(decl, gone_t: str, new_t: str, cols: frozenset[int]) -> str:
    """The SELECT of the projections on `cols` of the rows that went and not
    of those that came, and the other way round. When there is none, no
    projection went or came (each that went is still there, each that came
    was there), which reads the few changed rows, not the table (a body
    edit's moved lines, seen by what does not read lines)."""
    sel = ", ".join(q(decl.columns[i].name) for i in sorted(cols))
    return (f"(SELECT {sel} FROM {gone_t} EXCEPT SELECT {sel} FROM {new_t}) UNION ALL "
            f"(SELECT {sel} FROM {new_t} EXCEPT SELECT {sel} FROM {gone_t})")


def _delta_moves(con, decl, gone_t: str, new_t: str, cols: frozenset[int]) -> bool:
    """Whether `_delta_differs` finds a projection."""
    return con.execute(f"SELECT EXISTS ({_delta_differs(decl, gone_t, new_t, cols)})").fetchone()[0]


def _delta_values(con, decl, gone_t: str, new_t: str, col: int) -> list:
    """The values at column `col` of the rows that went or came."""
    c = q(decl.columns[col].name)
    return [v for (v,) in con.execute(f"SELECT {c} FROM {gone_t} UNION SELECT {c} FROM {new_t}").fetchall()]


def _projections_moved(decl, gone_t: str, new_t: str, cols: frozenset[int]) -> tuple[str, str]:
    """The SELECTs of `decl`'s projections on `cols` (in column order) that
    the delta in `gone_t`/`new_t` took away (no row has it now) and brought
    (only new rows have it)."""
    table = q(decl.name)
    names = [q(decl.columns[i].name) for i in sorted(cols)]
    if q("file") in names:  # Note [Rows of the delta's files]
        table = (f'(SELECT * FROM {table} WHERE "file" IN '
                 f'(SELECT "file" FROM {gone_t} UNION SELECT "file" FROM {new_t}))')
    sel = ", ".join(f"a.{c}" for c in names)
    on = " AND ".join(f"t.{c} = a.{c}" for c in names)
    lost = (f'SELECT {sel} FROM (SELECT DISTINCT {", ".join(names)} FROM {gone_t}) a WHERE NOT EXISTS '
            f'(SELECT 1 FROM {table} t WHERE {on})')
    on_g = " AND ".join(f"g.{c} = a.{c}" for c in names)
    came = (f"SELECT {sel} FROM (SELECT {', '.join(names)}, count(*) AS _n FROM {new_t} GROUP BY ALL) a "
            f"WHERE NOT EXISTS (SELECT 1 FROM {gone_t} g WHERE {on_g}) "
            f'AND (SELECT count(*) FROM {table} t WHERE {on}) <= a._n')
    return lost, came


# Note [Rows of the delta's files]: whether a projection that went is still
# held by some row, and how many rows hold one that came, is asked of the
# whole table: an anti-join probing its 230,000 rows (calls) with the few
# projections of the delta, 15-18 ms each, five of them in a .cpp body
# edit's refresh. A row holding a projection has its values, so when the
# projection holds the file, only the rows of the delta's files can: the
# table is first cut to those, by a semi-join on one dictionary-coded
# column, and the same question takes 8 ms.


def moved_values(con, decl, gone_t: str, new_t: str, col: int, cols: frozenset[int] | None = None) -> list:
    """The values at column `col` of `decl`'s rows that went or came (Note
    [Rows changed by file] in torchtalk/datalog/analysis/partition.py); of
    those whose projection on `cols` (holding `col`), the columns a stored
    relation reads, went or came, when given: a line moved in a module is
    no change to what reads its APIs' names."""
    return FactMoves(con, {decl.name: decl}, {decl.name: (gone_t, new_t)}).values(decl.name, col, cols)


# Note [Deltas asked in Python]: whether a changed fact relation's rows
# that went and came hold other projections on some columns (the first
# question of every `FactMoves.projections`), and their values at one
# column, were asked of the DB: 14 statements of 1-5 ms in a .cpp body
# edit's refresh, over deltas of a few hundred rows. The update has those
# rows as the lines it wrote (Note [Layer deltas]): a tab between fields,
# no tab or line break inside one (`sink._clean`), `\N` for none, as
# DuckDB's reader of them is told (`store.read_csv_sql`); so the same
# questions are set comparisons of their split lines. Whether a
# projection is still held by another row of the table is still asked of
# the DB.
NULL = "\\N"  # none, in a fact file


class FactMoves:
    """What moved in the changed fact relations of an update in place
    (`moved_rows`, `moved_values`), over `temps`: relation -> the temp
    tables of its rows that went and came. The projections on some columns
    that went or came are asked of the DB once per relation and columns:
    the stored relations that read them alike, and the refresh's two
    questions (whether any moved, and their values at one column), take
    them from one query, not one each (a YAML edit asked 78, 0.36 s)."""

    def __init__(self, con, decls: dict, temps: dict[str, tuple[str, str]],
                 lines: dict[str, tuple[list[str], list[str]]] | None = None):
        self.con, self.decls, self.temps = con, decls, temps
        self.lines = lines or {}  # relation -> its delta's fact-file lines (Note [Deltas asked in Python])
        self._fields: dict[str, tuple[list[list[str]], list[list[str]]]] = {}
        self._seen: dict[tuple[str, frozenset[int]], list[tuple]] = {}

    def projections(self, rel: str, cols: frozenset[int]) -> list[tuple]:
        """`rel`'s projections on `cols` (in column order) that the delta
        took away or brought (`_projections_moved`)."""
        if (rel, cols) not in self._seen:
            decl, (gone_t, new_t) = self.decls[rel], self.temps[rel]
            rows = []
            if self._differs(rel, cols):
                rows = self.con.execute(" UNION ".join(_projections_moved(decl, gone_t, new_t, cols))).fetchall()
            self._seen[rel, cols] = rows
        return self._seen[rel, cols]

    def _split(self, rel: str) -> tuple[list[list[str]], list[list[str]]]:
        """The fields of the delta's lines that went and came (Note [Deltas asked in Python])."""
        got = self._fields.get(rel)
        if got is None:
            got = self._fields[rel] = tuple([line.rstrip("\n").split("\t") for line in part]
                                            for part in self.lines[rel])
        return got

    def _differs(self, rel: str, cols: frozenset[int]) -> bool:
        """Whether the delta's rows that went and came hold other
        projections on `cols` (`_delta_differs` finds one)."""
        if rel not in self.lines:
            return _delta_moves(self.con, self.decls[rel], *self.temps[rel], cols)
        gone, came = self._split(rel)
        key = itemgetter(*sorted(cols))
        return set(map(key, gone)) != set(map(key, came))

    def moved(self, rel: str, cols: frozenset[int]) -> bool:
        if not cols:
            return _had_rows_moved(self.con, q(rel), *self.temps[rel])
        return bool(self.projections(rel, cols))

    def values(self, rel: str, col: int, cols: frozenset[int] | None = None) -> list:
        if cols is None or col not in cols:
            if rel not in self.lines:
                return _delta_values(self.con, self.decls[rel], *self.temps[rel], col)
            number = self.decls[rel].columns[col].type == A.ColType.NUMBER
            return list(dict.fromkeys(None if f[col] == NULL else int(f[col]) if number else f[col]
                                      for part in self._split(rel) for f in part))
        at = sorted(cols).index(col)
        return list(dict.fromkeys(p[at] for p in self.projections(rel, cols)))


WAS = "__was"  # a stored relation's table before it is computed again whole, while the refresh runs


def _reads_a_move(live: A.Program, rel: str, stored: frozenset[str], moves, changed: frozenset[str]) -> bool:
    """Whether `rel` reads, in a column it needs, a relation of `changed`
    whose rows moved there; the stored relations it reads are read as they
    are (the refresh has computed them again or kept them)."""
    needs = needed_columns(live, rel, stored)
    return any(moves(c, needs[c]) for c in sorted(changed) if c in needs)


class _Moves:
    """The stored relations a refresh computed again, and what moved in
    their rows (Note [Derived in place]): each one's rows that went and
    came, as temp tables made when a later relation first asks."""

    def __init__(self, con, program: A.Program):
        self.con, self.program = con, program
        self.whole_rels: set[str] = set()  # computed whole: the old rows in table <rel>__was
        self.parts: dict[str, tuple[str, str]] = {}  # updated by part: its rows of the parts (before, now)
        self.deltas: dict[str, tuple[str, str]] = {}
        self.seen: dict = {}

    def __contains__(self, rel: str) -> bool:
        return rel in self.whole_rels or rel in self.parts

    def names(self) -> frozenset[str]:
        return frozenset(self.whole_rels) | frozenset(self.parts)

    def whole(self, rel: str) -> None:
        self.whole_rels.add(rel)

    def part(self, rel: str, was: str, now: str) -> None:
        self.parts[rel] = (was, now)

    def delta(self, rel: str) -> tuple[str, str]:
        """The temp tables of `rel`'s rows that went and came, made at the first ask."""
        if rel not in self.deltas:
            i = len(self.deltas)
            gone, came = f"_tt_sgone_{i}", f"_tt_scame_{i}"
            was, now = self.parts.get(rel) or (f"{SCHEMA}.{q(rel + WAS)}", table_of(rel))
            self.con.execute(f"CREATE TEMP TABLE {gone} AS SELECT * FROM {was} EXCEPT SELECT * FROM {now}")
            self.con.execute(f"CREATE TEMP TABLE {came} AS SELECT * FROM {now} EXCEPT SELECT * FROM {was}")
            self.deltas[rel] = (gone, came)
        return self.deltas[rel]

    # A stored relation is a set, and its rows that went and came are sets
    # apart: seen through some columns, its rows are the same set when the
    # projections of those that went are those of those that came
    # (`_delta_differs`), and that is all there is to ask, not the table as
    # for a fact relation's rows (`moved_rows`). When they differ, it counts
    # as moved, and the values of the projections in one but not the other
    # as those that moved: at most some more than did (one that went may
    # be another row's still), which computes a part again for nothing.
    def moved(self, rel: str, cols: frozenset[int]) -> bool:
        if (rel, cols) not in self.seen:
            decl, (gone, came) = self.program.decls[rel], self.delta(rel)
            self.seen[rel, cols] = (_delta_moves(self.con, decl, gone, came, cols) if cols else
                                    _had_rows_moved(self.con, table_of(rel), gone, came))
        return self.seen[rel, cols]

    def values(self, rel: str, col: int, cols=None) -> list:
        decl, (gone, came) = self.program.decls[rel], self.delta(rel)
        if cols is None or col not in cols:
            return _delta_values(self.con, decl, gone, came, col)
        sql = f"SELECT DISTINCT {q(decl.columns[col].name)} FROM ({_delta_differs(decl, gone, came, cols)})"
        return [v for (v,) in self.con.execute(sql).fetchall()]

    def drop(self) -> None:
        """Drop the tables of what moved (after a failure too: its error is the one to tell)."""
        from torchtalk.datalog.engines.duckdb import drop_tables

        drop_tables(self.con, [f"{SCHEMA}.{q(rel + WAS)}" for rel in self.whole_rels]
                    + [t for was, now in self.parts.values() for t in (f"temp.main.{was}", now)]
                    + [f"temp.main.{t}" for pair in self.deltas.values() for t in pair])


# the input of the values whose rows are computed again (Note [Rows changed by file])
PART = "tt_changed_part"
PART_TABLE = "_tt_changed_part"
# the columns a stored relation's rows may be updated by, the one of those that
# can be with the fewest values to compute again, the first of a tie (Note
# [Rows changed by file]): a test file's edit moves the rows of its file, a
# Python module's edit the rows of the ops whose APIs it changed. A relation
# with neither, or with neither its rows can be updated by, is tried by its
# other columns (Note [Rows changed at other columns])
PART_COLUMNS = ("file", "op")

# Note [Rows changed at other columns]: what holds for a file holds for any
# column a relation's rules carry from what changed: api_name_documented(n)
# is a regex test of each Python name n, and a new op in
# native_functions.yaml brings a few names to py_api, whose rows of every
# other name stay; computing it whole took 0.6 s of the YAML edit's update
# (profiled). The columns other than PART_COLUMNS are tried only when none
# of those can be, so a relation updated by file or op is updated as before
# and no update asks more of its changed rows' values than it did.


def _by_part(con, live: A.Program, rel: str, moves, values, inputs: dict[str, str],
             stored_moves: _Moves) -> tuple[str, int, int] | None:
    """Update stored relation `rel` of `live` (the library with the other
    stored relations as inputs, read from `inputs`) when its rows changed
    only at some values of one of its PART_COLUMNS: its rows of those
    values deleted and computed again (Note [Rows changed by file]); what
    went and came is told to `stored_moves`. `moves`: what moved, as `rel`
    sees it. -> (column, values, rows now), or None."""
    needs = needed_columns(live, rel)  # what changed counts as seen through what it reads
    found = None  # (values, name, column) of the column with the fewest values to compute again
    for name, col, sources in _part_columns(live, rel, moves):
        if not sources:  # no rule reads what changed, in the columns it reads: the same rows
            return name, 0, con.execute(f"SELECT count(*) FROM {table_of(rel)}").fetchone()[0]
        parts = sorted({v for src, c in sources for v in values(src, c, needs.get(src))})
        if found is None or len(parts) < len(found[0]):
            found = (parts, name, col)
    if found is None:
        return None
    parts, name, col = found
    return name, len(parts), _update_part(con, live, rel, col, parts, inputs, stored_moves)


def _update_part(con, live: A.Program, rel: str, col: int, parts: list, inputs: dict[str, str],
                 stored_moves: _Moves) -> int:
    """Compute `rel`'s rows whose column `col` holds a value of `parts`
    again, in its table; what went and came is told to `stored_moves`. ->
    its rows now."""
    from torchtalk.datalog.compile import SQL_TYPES
    from torchtalk.datalog.engines.duckdb import DuckDBEngine
    from torchtalk.datalog.transform.restrict import restrict

    column = live.decls[rel].columns[col]
    name, table = column.name, table_of(rel)
    # one statement, not one a value (nor one to create it); it is dropped with the connection
    con.execute(f"CREATE OR REPLACE TEMP TABLE {PART_TABLE} AS SELECT unnest(?::{SQL_TYPES[column.type]}[]) AS v",
                [list(parts)])
    part = table_of(f"{rel}__{PART}")
    con.execute(f"DROP TABLE IF EXISTS {part}")
    restricted = live.cached(("restrict", rel, col), lambda: restrict(live, rel, col, PART))
    DuckDBEngine().materialize(restricted, con, {rel: part},
                               {**inputs, PART: f"temp.main.{PART_TABLE}"})
    was, now = f"_tt_pwas_{len(stored_moves.parts)}", f"_tt_pnow_{len(stored_moves.parts)}"
    where = f"WHERE {q(name)} IN (SELECT v FROM {PART_TABLE})"
    con.execute(f"CREATE TEMP TABLE {was} AS SELECT * FROM {table} {where}")
    con.execute(f"DELETE FROM {table} {where}")
    con.execute(f"INSERT INTO {table} SELECT * FROM {part}")
    con.execute(f"ALTER TABLE {part} RENAME TO {now}")  # its rows of those parts before and now
    stored_moves.part(rel, was, f"{SCHEMA}.{now}")
    return con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def _by_reach(con, live: A.Program, rel: str, moves, delta_tables, inputs: dict[str, str],
              stored_moves: _Moves) -> tuple[str, int, int] | None:
    """Update stored relation `rel` of `live` (as `_by_part`) at the values,
    at one of its columns, of the rows the change may reach (Note [Rows a
    change reaches] in torchtalk/datalog/transform/reach.py): the column
    with the fewest such values. `delta_tables(relation)`: the tables of a
    changed input's rows that went and came. A recursive `rel` is updated
    so at a column its recursion carries (Note [A recursion by a carried
    column]). -> (column, values, rows now), or None when there is no such
    program."""
    from torchtalk.datalog.analysis.strata import recursive_relations
    from torchtalk.datalog.engines.duckdb import DuckDBEngine, drop_tables
    from torchtalk.datalog.transform.reach import BEFORE, BOTH, DELTA, delta_name, reach, unrolled

    program, columns, sources = live, None, dict(inputs)
    if rel in recursive_relations(live):
        got = live.cached(("unrolled", rel), lambda: unrolled(live, rel))
        if got is None:
            return None
        program, columns = got
        sources[rel + BEFORE] = table_of(rel)  # its rows as they were: not computed again yet
    made = reach(program, rel, moves)
    if made is None:
        return None
    program, deltas, read = made
    views = []
    reached = table_of(rel + DELTA)

    def view(name: str, sql: str) -> None:
        views.append(f"_tt_reach_{len(views)}")
        con.execute(f"CREATE OR REPLACE TEMP VIEW {views[-1]} AS {sql}")
        sources[name] = f"temp.main.{views[-1]}"

    try:
        for name, cols in sorted(deltas, key=lambda d: (d[0], sorted(d[1]))):
            gone, came = delta_tables(name)
            decl = live.decls[name]
            rows = f"SELECT * FROM {gone} UNION ALL SELECT * FROM {came}"
            if cols:  # those whose projection on cols went or came (`delta_name`)
                on = " AND ".join(f"t.{q(decl.columns[c].name)} = m.{q(decl.columns[c].name)}" for c in sorted(cols))
                rows = f"SELECT t.* FROM ({rows}) t SEMI JOIN ({_delta_differs(decl, gone, came, cols)}) m ON {on}"
            view(delta_name(name, cols), rows)
        for name in sorted(read):
            now, gone = inputs.get(name) or q(name), delta_tables(name)[0]
            view(name + BOTH, f"SELECT * FROM {now} UNION ALL SELECT * FROM {gone}")
        DuckDBEngine().materialize(program, con, {rel + DELTA: reached}, sources)
        names = [c.name for c in live.decls[rel].columns]
        counts = con.execute("SELECT " + ", ".join(f"count(DISTINCT {q(c)})" for c in names)
                             + f" FROM {reached}").fetchone()
        col = min((c for c in range(len(names)) if columns is None or c in columns),
                  key=lambda c: (counts[c], names[c] not in PART_COLUMNS, c))
        parts = [v for (v,) in con.execute(f"SELECT DISTINCT {q(names[col])} FROM {reached}").fetchall()]
    finally:  # the update's error is the one to tell, not a drop's
        drop_tables(con, [reached])
        drop_tables(con, [f"temp.main.{v}" for v in views], kind="VIEW")
    return names[col], len(parts), _update_part(con, live, rel, col, parts, inputs, stored_moves)


def _part_columns(live: A.Program, rel: str, moved) -> list[tuple[str, int, frozenset]]:
    """(name, index, sources) of each of `rel`'s PART_COLUMNS its rows can
    be updated by (partition_sources); of its other columns when none (Note
    [Rows changed at other columns])."""
    from torchtalk.datalog.analysis.partition import partition_sources

    names = [c.name for c in live.decls[rel].columns]
    found = []
    for name in PART_COLUMNS:
        if name in names:
            sources = partition_sources(live, rel, names.index(name), moved)
            if sources is not None:
                found.append((name, names.index(name), sources))
    if not found:  # Note [Rows changed at other columns]
        for col, name in enumerate(names):
            sources = partition_sources(live, rel, col, moved) if name not in PART_COLUMNS else None
            if sources is not None:
                found.append((name, col, sources))
    return found


def needed_columns(program: A.Program, rel: str, stop: frozenset[str] = frozenset()) -> dict[str, frozenset[int]]:
    """Relation -> the columns of it whose values `rel`'s rows can depend on,
    for every relation in `rel`'s closure, not below those in `stop` (read
    as they are: stored relations) (Note [Derived in place]). A column
    is not needed where every rule that reads the relation has a wildcard
    there, or a variable used nowhere else (in that rule, and at a head
    column not needed itself); a negated atom, an aggregate's body and a
    term other than a variable need every column they touch."""
    return program.cached(("needed_columns", rel, stop), lambda: _needed_columns(program, rel, stop))


def _needed_columns(program: A.Program, rel: str, stop: frozenset[str]) -> dict[str, frozenset[int]]:
    need: dict[str, set[int]] = {rel: set(range(program.decls[rel].arity))}
    todo = [rel]
    while todo:
        head = todo.pop()
        if head in stop and head != rel:
            continue
        for rule in program.rules_for(head):
            for name, cols in _rule_needs(rule, need[head], program).items():
                have = need.setdefault(name, set())
                if not cols <= have:
                    have |= cols
                    todo.append(name)
    return {name: frozenset(cols) for name, cols in need.items()}


def _rule_needs(rule: A.Rule, head_cols: set[int], program: A.Program) -> dict[str, set[int]]:
    """The columns of each relation `rule`'s body reads that its head's `head_cols` need."""
    wanted = {v for i, t in enumerate(rule.head.args) if i in head_cols for v in A.all_var_names(t)}
    uses: dict[str, int] = {}  # variable -> occurrences in the body
    for lit in rule.body:
        for v in A.literal_var_names(lit):
            uses[v] = uses.get(v, 0) + 1
    out: dict[str, set[int]] = {}
    for lit in rule.body:
        if isinstance(lit, A.Atom):
            cols = out.setdefault(lit.name, set())
            for i, t in enumerate(lit.args):
                free = isinstance(t, A.Wildcard) or (
                    isinstance(t, A.Var) and uses.get(t.name, 0) == 1 and t.name not in wanted)
                if not free:
                    cols.add(i)
        for atom, _strict in A.literal_atoms(lit):
            if atom is not lit:  # under a negation or in an aggregate: every column
                out.setdefault(atom.name, set()).update(range(program.decls[atom.name].arity))
    return out


def _duckdb_version() -> str:
    duckdb = lean_duckdb()  # Note [Lean DuckDB import]

    return duckdb.__version__


def _ord_columns(rule: A.Rule) -> list[tuple[int, int]]:
    """(i, j) for each head column j holding `ord(v)` of the variable in head column i."""
    args = rule.head.args
    return [(i, j) for j, t in enumerate(args) if isinstance(t, A.Functor) and t.name is A.FunctorName.ORD
            for i, v in enumerate(args) if isinstance(v, A.Var) and t.args == (v,)]


def _check_one_to_one(con: Any, program: A.Program, rel: str) -> None:
    """A stored relation whose every rule holds a symbol beside its ord()
    number (`node`) must number them one-to-one (Note [ord]): the walks meet
    on numbers."""
    from torchtalk.errors import EngineError

    cols = program.decls[rel].columns
    rules = program.rules_for(rel)
    # the column pairs (symbol, its number) every rule of the relation fills
    pairs = set.intersection(*(set(_ord_columns(r)) for r in rules)) if rules else set()
    for i, j in sorted(pairs):
        sym, num = q(cols[i].name), q(cols[j].name)
        clash = con.execute(f"SELECT {num}, min({sym}), max({sym}) FROM {table_of(rel)} GROUP BY {num} "
                            f"HAVING count(DISTINCT {sym}) > 1 LIMIT 1").fetchone()
        if clash:
            raise EngineError(f"ord() gives {clash[1]!r} and {clash[2]!r} the same number {clash[0]} in '{rel}'",
                              hint="the walks would confuse them; report it (Note [ord])")


def stored(con: Any) -> dict[str, str]:
    """Relation -> fingerprint of the tables in `derived` (none in a DB indexed
    before them), read once per connection."""
    from torchtalk.connmemo import per_connection

    return per_connection(con, "derived.catalog", _read_catalog)


def _read_catalog(con: Any) -> dict[str, str]:
    """relation -> fingerprint of the stored relations ({} without any). A
    missing catalog is asked of DuckDB's own tables, not by a query that
    fails: a failed query aborts the transaction an update reads it in."""
    if not con.execute("SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() "
                       "AND schema_name = ? AND table_name = 'catalog'", [SCHEMA]).fetchone()[0]:
        return {}
    return dict(con.execute(f"SELECT relation, fingerprint FROM {CATALOG}").fetchall())


def current(con: Any, library: A.Program) -> bool:
    """`con`'s stored relations are exactly those `library` would store."""
    return stored(con) == fingerprints(library)


def use_derived(program: A.Program, con: Any, library: A.Program | None = None) -> tuple[A.Program, dict[str, str]]:
    """(program', tables): `program` with each stored relation whose
    fingerprint in `library` (default: `program`) matches made an input read
    from its table, and its rules dropped. Cached per (program, matches)."""
    prints = fingerprints(library or program)
    have = stored(con)
    present = {r.head.name for r in program.rules}
    use = frozenset(rel for rel, fp in have.items() if rel in present and prints.get(rel) == fp)
    if not use:
        return program, {}

    def inputs_from_tables():
        from torchtalk.datalog.transform.use_stored import use_stored

        return use_stored(program, use), {rel: table_of(rel) for rel in use}

    return program.cached(("use_derived", use), inputs_from_tables)


def is_argument(program, rel: str) -> bool:
    """`rel` is a seed or option input of some named query (Note [Named
    queries]), or one the query layer gives per answer: the rows shown
    (`<query>_shown`) and whether they are all of them (Note [Chains for
    the page] in rules/chains.dl)."""
    from torchtalk.query.chains import ALL_SHOWN

    if rel == ALL_SHOWN:
        return True
    for suffix in ("_arg", "_from", "_to", "_like", "_like_probe", "_shown"):
        if rel.endswith(suffix) and rel[: -len(suffix)] in program.decls:
            return True
    head, _, _ = rel.rpartition("_")
    while head:
        if head in program.decls and f"{rel}_default" in program.decls:
            return True
        head, _, _ = head.rpartition("_")
    return False
