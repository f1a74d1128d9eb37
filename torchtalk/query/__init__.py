"""The query DSL: text → named relation of the rule library → rows.

Pipeline (one way): dsl (textX grammar → `Query`) → library (rules/*.dl +
user rules → `Program`, Note [Named queries]) → resolve (names → ids) →
run (bind seeds/options/filters, evaluate) → explain (derivations) →
output (table, JSON).

Example:
    >>> from torchtalk.query import query
    >>> query("callees(matmul)", con).columns
    ('fn', 'callee', 'via', 'file', 'line')
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from torchtalk.datalog.gcpause import gc_paused


@gc_paused()  # Note [No GC in a run]: its parse, runs, chains and rows
def query(
    text: str,
    con,
    *,
    rules: tuple[Path, ...] = (),
    user_rules: bool = True,
    limit: int | None = None,
    all_matches: bool = False,
    engine: str | None = None,
    explain: int | None = None,
    dump_passes: Path | None = None,
    chains_for=None,
    per_section: int | None = None,
):
    """Run DSL `text` on fact DB connection `con`; a `run.Result`.

    `explain=N` adds the derivation trees of the first N rows
    (`result.explanations`, see torchtalk.query.explain). `dump_passes=DIR`
    writes the program after each pass into DIR (`NN-<pass>.dl`).
    `chains_for(columns, rows)`: the indices of the rows a reader shows, the
    only ones that get their chain (Note [Chains for the rows read]).
    `per_section=N` (a table's reader): the first N rows of each section,
    with the counts of all, where the rows can be sized so (Note [Rows per
    section]); `limit` applies otherwise. `engine`: the connection's
    (Note [Engine per session] in torchtalk/connmemo.py) unless given.

    Example:
        >>> query("impact(cpublas::gemm, depth=2)", con, limit=5).total
        153
    """
    from torchtalk.connmemo import engine_of
    from torchtalk.errors import QueryError
    from torchtalk.query.dsl import parse_query
    from torchtalk.query.library import load_library_notes
    from torchtalk.query.resolve import Resolver
    from torchtalk.query.run import Result, bind, evaluate_bound

    engine = engine or engine_of(con)
    program, left_out = load_library_notes(tuple(rules), user=user_rules)
    q = parse_query(text)
    if q.name not in program.decls and left_out:
        from torchtalk.errors import did_you_mean
        from torchtalk.query.library import query_names

        hint = did_you_mean(q.name, query_names(program)) or left_out[0]
        raise QueryError(f"no query or relation named {q.name!r}", hint=hint)
    resolver = Resolver(con)
    q, routed = route(q, resolver)
    b = bind(q, program, resolver, all_matches=all_matches)
    tables = frozenset(resolver.tables)
    dump = None
    if dump_passes is not None:
        from torchtalk.datalog.transform.pipeline import dump_to

        dump = dump_to(Path(dump_passes))
    pick = None if chains_for is None else (lambda rows: chains_for(b.sig.columns, rows))
    shown = evaluate_bound(b, program, con, engine=engine, tables=tables, limit=limit, dump=dump, pick=pick,
                           per=per_section)
    from torchtalk.query.chains import COLUMN, wants_chain
    from torchtalk.query.run import _notes

    extra = (COLUMN,) if wants_chain(program, b.sig.name) else ()  # Note [Chains]
    result = Result(b.sig.name, (*b.sig.columns, *extra), (*b.sig.types, *extra), tuple(shown),
                    shown.total, b.resolutions, (*left_out, *routed, *_notes(b), *_tier_notes(con, program, b)),
                    counts=getattr(shown, "counts", None), one_value=getattr(shown, "one_value", None))
    if getattr(con, "history", None) is not None:  # a server's connection (Note [Warm from history])
        from torchtalk.history import record

        record(con.history, text)
    if explain:
        from torchtalk.query.explain import explain as _explain
        from torchtalk.query.run import prune

        pruned = prune(program, frozenset(b.facts), tables)
        n = len(b.sig.columns)
        trees = tuple(_explain(pruned, con, b.sig.name, r[:n], b.facts, engine=engine)
                      for r in shown[:explain])
        result = dataclasses.replace(result, explanations=trees)
    return result


def _tier_notes(con, program, b) -> tuple[str, ...]:
    """A note when the answer reads C++ calls and some TUs wait for the
    compiler tier (Note [Compiler tier catching up] in torchtalk/index.py)."""
    from torchtalk.datalog.analysis.strata import needed_relations
    from torchtalk.lookup import db_info
    from torchtalk.store import tier_note

    rows = db_info(con).rows
    if not rows.get("precise_pending") or "precise_file" not in needed_relations(program, [b.sig.name]):
        return ()
    return (tier_note(rows),)


# Note [Trace of anything]: `trace(X)` answers for whatever X names. An op,
# or a Python API or kernel that names ops, is traced by `trace`; an nn
# module, optimizer or scheduler by `trace_module`; a C++ function, CUDA
# kernel or dispatch stub by `trace_node` (rules/trace.dl: its callers, the
# ops and APIs that reach it, what it calls and launches). `route` asks the
# resolver in that order and says in a note which it took; every surface
# (CLI, API, MCP) goes through `query`, so all route alike.
TRACES = (("module_class", "trace_module", "an nn module, optimizer or scheduler"),
          ("fn", "trace_node", "a C++ function, CUDA kernel or dispatch stub"))


def route(q, resolver):
    """`q`, or the trace query that fits what its one argument names
    (Note [Trace of anything]); -> (query, notes)."""
    import dataclasses

    from torchtalk.errors import QueryError

    if len(q.args) != 1 or q.path is not None or q.args[0].quoted:
        return q, ()
    if q.name in OP_LEVEL:
        return route_callees(q, resolver)
    if q.name != "trace":
        return q, ()
    text = str(q.args[0].value)
    if _probe(resolver, text, "op") is not None:
        return q, ()
    order = TRACES[::-1] if "::" in text else TRACES  # `ns::name` is C++ before it is Python
    for ns, name, what in order:
        if _probe(resolver, text, ns) is None:
            continue
        routed = dataclasses.replace(q, name=name, text=q.text.replace("trace", name, 1))
        return routed, (f"{text!r} names no ATen op but {what}: {routed.text}",)
    try:
        resolver.resolve(text, "op")  # the miss, with its did-you-mean
    except QueryError as miss:
        if miss.hint is None:
            miss.hint = "trace takes an op, a Python API, an nn module, a C++ function, a CUDA kernel or a stub"
        raise miss from None
    return q, ()


def _probe(resolver, text: str, ns: str):
    """`text` resolved in `ns`, or None (no error built: a router's probe)."""
    from torchtalk.errors import QueryError

    try:
        return resolver.find(text, ns)
    except QueryError:
        return None


# Note [Op-level callees]: "what does matmul call" asks about the op, not
# about the C++ function at::native::matmul alone: `callees(X)` where X
# spells an ATen op (a name, an id, a Python API, a C++ API name such as
# at::mm) answers `op_callees` (rules/calls.dl): the ops its kernels call,
# per dispatch key, through the helpers in between (matmul → _matmul_impl →
# mm, mv, dot, bmm), each with its chain; `callers(X)` answers `op_callers`,
# the ops whose kernels call X (mm ← _matmul_impl ← matmul). A C++
# function's id, or a kernel's name (at::native::matmul, matmul_out_cpu: the
# tiers that name a function, not an op), keeps the one-step `callees` /
# `callers`. Every surface goes through `query`, so the CLI, the API and
# MCP's `calls` / `called_by` route alike.
FUNCTION_TIERS = ("kernel", "impl_func")  # op tiers that read a C++ function's name
# the one-step query, its op-level query, and what the op-level one answers
OP_LEVEL = {"callees": ("op_callees", "the ops its kernels call"),
            "callers": ("op_callers", "the ops whose kernels call it")}


def route_callees(q, resolver):
    """`q` (callees(X) or callers(X)), or op_callees(X) / op_callers(X) when X
    spells an ATen op (Note [Op-level callees]); -> (query, notes)."""
    import dataclasses

    from torchtalk.query.dsl import value_text

    text = str(q.args[0].value)
    res = _probe(resolver, text, "op")
    if res is None or res.tier.split(",")[0] in FUNCTION_TIERS:
        return q, ()
    name, what = OP_LEVEL[q.name]
    routed = dataclasses.replace(q, name=name, text=q.text.replace(q.name, name, 1))
    note = f"{text!r} names an ATen op: {what}, per key ({routed.text})"
    fn = _probe(resolver, text, "fn")
    if fn is not None and not fn.ambiguous:
        from extractors.cpp.names import split_sig

        note += f"; the C++ function's own {q.name}: {q.name}({value_text(split_sig(fn.ids[0])[0])})"
    return routed, (note,)
