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
    back as to compute); and not intermediates, read only by other stored
    relations (`link_reach` under `op_cuda_kernel`), which a query computes
    when it names one."""
    args = {n for n in program.inputs if is_argument(program, n)}
    derived = {r.head.name for r in program.rules} - set(program.inputs)
    views = _views(program)
    free = {rel for rel in derived - views if not (needed_relations(program, [rel]) & args)}
    readers: dict[str, set[str]] = {}  # other relations whose rules read it
    for e in dependency_edges(program):
        if e.body != e.head:
            readers.setdefault(e.body, set()).add(e.head)
    return sorted(rel for rel in free if not readers.get(rel) or not readers[rel] <= free)


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
            keyed: dict[str, tuple[int, frozenset[str]]] | None = None) -> dict[str, int]:
    """Recompute, on the writable `con` of a DB updated in place, the stored
    relations that read (transitively) a fact relation in `changed` in a
    column whose values moved (`moved(relation, columns)`, default: any
    change moves every column), or whose fingerprint is no longer the
    library's; the others are read from their tables (Note [Derived in
    place]). -> rows per recomputed relation.

    Note [Derived in place]: an update that changes the rows of a few fact
    relations (torchtalk/update.py) leaves every stored relation whose rules
    read none of them as it is: its rows are a function of unchanged inputs.
    The rest are dropped and evaluated again by the same program as at a cold
    index, with the kept ones as inputs read from their tables, so the stored
    rows equal a cold index's. A catalog that lists other relations than the
    library would store (the library changed) is rebuilt whole. A relation
    reads only some columns of a fact relation (`needed_columns`: `node`
    reads calls' caller and callee, not its line): when the rows of that
    relation changed but their projection on those columns, as a set, did
    not (a line inserted above a call moves its line only), the stored
    relation is kept too. A rule that reads a fact relation in `empty`
    (without rows before the update and after it) derives nothing either
    way, so the columns only it reads are not needed (a fast-tier DB has
    no precise_skipped rows: the line of a call it compares is not read).
    `values(relation, column, columns)`: the values at that column of a
    changed fact relation's rows that went or came (whose projection on
    `columns`, those a stored relation reads, did); given, a relation whose rows
    changed only in some files (or at some ops, PART_COLUMNS) is updated
    there alone (Note [Rows changed by file] in
    torchtalk/datalog/analysis/partition.py; `by_part` gets the column and
    the number of its values of each). `keyed`: changed relations whose
    rows changed only by keys that came or went, relation -> (its key
    column, the types of the fact columns its keys are the values of)
    (Note [Names that come and go]).

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
    the rule reads (it joins `node`), and a name that went, in a row that
    went. So `node` counts as unchanged for it: the relation is kept, or
    updated in some files only, as those fact rows say. A relation that
    reads `node` otherwise (a name from a constant or a query's argument,
    every number) sees it changed. On the 2.6.0 tree, the yaml entry of
    bench/incremental.py (a new kernel name) now keeps node_card; a new C++
    function changes `func`, which the steps read under a negation
    (fn_device), so the step relations are computed whole either way.
    """
    prints = fingerprints(program)
    have = _read_catalog(con)
    if set(have) != set(prints):
        con.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
        return materialize(con, program, tables)
    seen: dict = {}

    def moves(rel: str, cols: frozenset[int]) -> bool:
        if (rel, cols) not in seen:
            seen[rel, cols] = True if moved is None else moved(rel, cols)
        return seen[rel, cols]

    from torchtalk.datalog.analysis.drawn import numbers_drawn_names
    from torchtalk.datalog.transform.prune import prune

    live = program.cached(("empty", empty), lambda: prune(program, empty)) if empty else program

    def moves_for(target: str):
        """`moves` as stored relation `target` sees it (Note [Names that come and go])."""
        unseen = frozenset(rel for rel, (key, types) in (keyed or {}).items()
                           if numbers_drawn_names(live, target, rel, key, tables, types))
        return (lambda rel, cols: rel not in unseen and moves(rel, cols)) if unseen else moves

    def reads_a_change(rel: str) -> bool:
        needs, seen_by = needed_columns(live, rel), moves_for(rel)
        return any(seen_by(c, needs[c]) for c in sorted(changed) if c in needs)

    affected = {rel for rel in prints if have[rel] != prints[rel] or reads_a_change(rel)}
    if not affected:
        return {}
    from torchtalk.datalog.engines.duckdb import DuckDBEngine
    kept = frozenset(prints) - affected
    done: dict[str, tuple[str, int, int]] = {}  # updated by part: (column, values, rows)
    if values is not None:
        same = frozenset(rel for rel in affected if have[rel] == prints[rel])  # rows of a changed rule: all again
        done = _by_part(con, _reading(program, tables, kept), same, frozenset(changed), moves_for, values, kept)
        if by_part is not None:
            by_part.update({rel: (name, n) for rel, (name, n, _rows) in done.items()})
    counts = {rel: rows for rel, (_name, _n, rows) in done.items()}
    whole = affected - set(done)
    for rel in sorted(whole):
        con.execute(f"DROP TABLE IF EXISTS {table_of(rel)}")
    if whole:
        read = kept | set(done)
        counts |= DuckDBEngine().materialize(_reading(program, tables, read), con,
                                             {rel: table_of(rel) for rel in sorted(whole)},
                                             {rel: table_of(rel) for rel in read})
    for rel in affected:
        _check_one_to_one(con, program, rel)
    con.executemany(f"UPDATE {CATALOG} SET fingerprint = ?, rows = ? WHERE relation = ?",
                    [(prints[rel], counts[rel], rel) for rel in sorted(affected)])
    return counts


# the input of the values whose rows are computed again (Note [Rows changed by file])
PART = "tt_changed_part"
PART_TABLE = "_tt_changed_part"
# the columns a stored relation's rows may be updated by, the first that can
# be (Note [Rows changed by file]): a test file's edit moves the rows of its
# file, a Python module's edit the rows of the ops whose APIs it changed
PART_COLUMNS = ("file", "op")


def _by_part(con, live: A.Program, rels: frozenset[str], changed: frozenset[str], moves_for, values,
             kept: frozenset[str]) -> dict[str, tuple[str, int, int]]:
    """Update those of `rels` (stored relations of `live`, the library with
    the kept ones as inputs) whose rows changed only at some values of one
    of their PART_COLUMNS: their rows of those values deleted and computed
    again (Note [Rows changed by file]); `moves_for(rel)`: what moved, as
    `rel` sees it. -> relation: (column, values, rows now)."""
    from torchtalk.datalog.compile import SQL_TYPES
    from torchtalk.datalog.engines.duckdb import DuckDBEngine
    from torchtalk.datalog.transform.restrict import restrict

    out: dict[str, tuple[str, int, int]] = {}
    for rel in sorted(rels):
        moves = moves_for(rel)

        def moved(src: str, cols: frozenset[int], moves=moves) -> bool:
            return src in changed and moves(src, cols)

        found = _part_column(live, rel, moved)
        if found is None:
            continue
        name, col, sources = found
        table = table_of(rel)
        if not sources:  # no rule reads what changed, in the columns it reads: the same rows
            out[rel] = (name, 0, con.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
            continue
        needs = needed_columns(live, rel)  # what changed counts as seen through what it reads
        parts = sorted({v for src, c in sources for v in values(src, c, needs.get(src))})
        column = live.decls[rel].columns[col]
        con.execute(f"CREATE OR REPLACE TEMP TABLE {PART_TABLE} (v {SQL_TYPES[column.type]})")
        if parts:
            con.executemany(f"INSERT INTO {PART_TABLE} VALUES (?)", [(v,) for v in parts])
        part = table_of(f"{rel}__{PART}")
        con.execute(f"DROP TABLE IF EXISTS {part}")
        DuckDBEngine().materialize(restrict(live, rel, col, PART), con, {rel: part},
                                   {**{r: table_of(r) for r in kept}, PART: f"temp.main.{PART_TABLE}"})
        con.execute(f"DELETE FROM {table} WHERE {q(name)} IN (SELECT v FROM {PART_TABLE})")
        con.execute(f"INSERT INTO {table} SELECT * FROM {part}")
        con.execute(f"DROP TABLE {part}")
        out[rel] = (name, len(parts), con.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    con.execute(f"DROP TABLE IF EXISTS temp.main.{PART_TABLE}")
    return out


def _part_column(live: A.Program, rel: str, moved) -> tuple[str, int, frozenset] | None:
    """(name, index, sources) of the first of `rel`'s PART_COLUMNS its rows
    can be updated by (partition_sources), or None."""
    from torchtalk.datalog.analysis.partition import partition_sources

    names = [c.name for c in live.decls[rel].columns]
    for name in PART_COLUMNS:
        if name in names:
            sources = partition_sources(live, rel, names.index(name), moved)
            if sources is not None:
                return name, names.index(name), sources
    return None


def needed_columns(program: A.Program, rel: str) -> dict[str, frozenset[int]]:
    """Relation -> the columns of it whose values `rel`'s rows can depend on,
    for every relation in `rel`'s closure (Note [Derived in place]). A column
    is not needed where every rule that reads the relation has a wildcard
    there, or a variable used nowhere else (in that rule, and at a head
    column not needed itself); a negated atom, an aggregate's body and a
    term other than a variable need every column they touch."""
    return program.cached(("needed_columns", rel), lambda: _needed_columns(program, rel))


def _needed_columns(program: A.Program, rel: str) -> dict[str, frozenset[int]]:
    need: dict[str, set[int]] = {rel: set(range(program.decls[rel].arity))}
    todo = [rel]
    while todo:
        head = todo.pop()
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
    duckdb = lean_duckdb()  # Note [Lean DuckDB import]

    try:
        return dict(con.execute(f"SELECT relation, fingerprint FROM {CATALOG}").fetchall())
    except duckdb.CatalogException:
        return {}


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
