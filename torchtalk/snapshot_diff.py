"""`snapshot diff A B`: what changed between two fact DBs.

Note [Diff identity]: a fact is compared by what it says, not where it was
found: an op by its name (changed when its schema or dispatch table differs),
a kernel by its name, a registration by (op or stub, key, kernel), a call edge
by (caller, callee). File and line are ignored, so code that only moved is no
difference.

Example:
    >>> diff_dbs(Path("a.duckdb"), Path("b.duckdb"))["ops"]["added"][:1]
    ['_foo']
"""

from __future__ import annotations

from pathlib import Path

# category -> SQL giving (key, payload) rows from the DB attached as {s}
CATEGORIES: dict[str, str] = {
    "ops": """
        select o.op as key, any_value(o.schema) || ' | ' || coalesce(
            string_agg(distinct d.key || ':' || d.kernel, ',' order by d.key || ':' || d.kernel), ''
        ) as payload
        from {s}.op o left join {s}.dispatch d on d.op = o.op group by o.op""",
    "kernels": "select distinct kernel as key, '' as payload from {s}.kernel",
    "registrations": """
        select distinct 'dispatch ' || op || ' [' || key || '] ' || kernel as key, '' as payload from {s}.dispatch
        union select distinct 'stub ' || stub || ' [' || key || '] ' || fn, '' from {s}.stub_register
        union select distinct 'library ' || ns || '::' || op || ' [' || key || '] ' || fn, '' from {s}.lib_impl""",
    "call_edges": "select distinct caller || ' -> ' || callee as key, '' as payload from {s}.calls",
}


def diff_dbs(a: Path, b: Path) -> dict[str, dict[str, list[str]]]:
    """Per category: `added` (in b only), `removed` (in a only), `changed`
    (in both, saying something else), each sorted."""
    import duckdb

    from torchtalk.store import open_db

    for p in (a, b):
        open_db(p).close()  # one-line StoreError for a missing or foreign file
    con = duckdb.connect()
    try:
        con.execute(f"attach '{_sql_str(a)}' as a (read_only)")
        con.execute(f"attach '{_sql_str(b)}' as b (read_only)")
        return {cat: _diff_category(con, sql) for cat, sql in CATEGORIES.items()}
    finally:
        con.close()


def _diff_category(con, sql: str) -> dict[str, list[str]]:
    qa, qb = sql.format(s="a"), sql.format(s="b")
    rows = con.execute(
        f"""
        with qa as ({qa}), qb as ({qb})
        select 'added', qb.key from qb where qb.key not in (select key from qa)
        union all select 'removed', qa.key from qa where qa.key not in (select key from qb)
        union all select 'changed', qa.key from qa join qb using (key) where qa.payload <> qb.payload
        order by 1, 2"""
    ).fetchall()
    out: dict[str, list[str]] = {"added": [], "removed": [], "changed": []}
    for what, key in rows:
        out[what].append(key)
    return out


def _sql_str(p: Path) -> str:
    return str(p).replace("'", "''")
