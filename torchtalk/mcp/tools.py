"""The TorchTalk tools: one typed function per tool; its docstring is the description.

Every tool goes through the facade (`torchtalk.api`) and `run_tool`. Names are
written as people type them (`gemm`, `cpublas::gemm`, `torch.matmul`,
`F.gelu`, `add.Tensor`, `at::gelu`, `gelu_out_cpu`, any id an answer printed)
and resolved by the query DSL's one resolver (torchtalk/query/resolve.py). An
ambiguous name is answered for each of its definitions (Note [Ambiguous names
for agents]); an unknown name is a tool error with the nearest names. The set of tools is `TOOL_NAMES`; the integration files
(.mcp.json, SKILL.md, .claude/commands) must name exactly these
(tests/test_mcp_files.py checks it).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from torchtalk.errors import QueryError
from torchtalk.lookup import Table
from torchtalk.mcp.answer import BUDGET, MAX_BUDGET, MOST_ROWS, Answer, More
from torchtalk.mcp.server import run_tool
from torchtalk.query.run import MAX_DEPTH

TOOL_NAMES = (
    "get_status", "trace", "search", "impact", "calls", "called_by", "cuda_kernels",
    "trace_module", "list_modules", "find_similar_tests", "list_test_utils",
    "test_file_info", "query", "affected", "coverage",
)

Result = Annotated[CallToolResult, Answer]
Budget = Annotated[int | None, Field(ge=200, le=MAX_BUDGET, description=(
    f"tokens the answer may take (default {BUDGET}); a cut answer names the call that shows more"))]
# rows of a query read for one answer (grouped and cut to the budget after)
FETCH_ROWS = 20000
# or, where an answer's rows can be sized so, the first of each section:
# as many as any budget shows (Note [Rows per section] in torchtalk/query/output.py)
PER_SECTION = MOST_ROWS


def _name(name: str, what: str = "name") -> str:
    """A symbol argument as DSL text: bare (resolved, with candidates) or an exact quoted id."""
    from torchtalk.query.dsl import value_text

    n = (name or "").strip()
    if not n:
        raise QueryError(f"empty {what}", hint="e.g. 'matmul', 'torch.matmul', 'at::native::cpublas::gemm'")
    if _NOT_IN_IDS.search(n):  # no id TorchTalk prints holds these
        raise QueryError(f"{what} {n[:60]!r} is not a symbol name", hint="e.g. 'torch.matmul' or 'add.Tensor'")
    return value_text(n)


_NOT_IN_IDS = re.compile(r"[;\"'`\\\n\r\t]")


def _table(result: Any, title: str) -> Table:
    """An `api.query` result as a Table (rows as dicts or a Table already)."""
    if isinstance(result, Table):
        return result
    columns = getattr(result, "columns", None)
    rows = getattr(result, "rows", None)
    if columns is not None and rows is not None:
        rows = [tuple(r.values()) if isinstance(r, dict) else tuple(r) for r in rows]
        total = getattr(result, "total", len(rows))
        notes = tuple(getattr(result, "notes", ()) or ())
        return Table(getattr(result, "title", title) or title, tuple(columns), tuple(rows), total, notes,
                     getattr(result, "counts", None), getattr(result, "one_value", None))
    dicts = list(result)
    cols: tuple[str, ...] = tuple(dicts[0].keys()) if dicts else ()
    order = [c for c in cols if c not in ("file", "line")] + [c for c in ("file", "line") if c in cols]
    return Table(title, tuple(order), tuple(tuple(d.get(c) for c in order) for d in dicts), len(dicts))


def _dsl(ctx: Context, con, text: str, limit: int | None = FETCH_ROWS, pick=None,
         per: int | None = None) -> Table:
    """Evaluate a query-DSL text through the facade (with the server's --rules
    dirs); `pick`: `chains_for` (Note [Chains for the rows read]); `per`:
    the first rows of each section only (Note [Rows per section])."""
    from torchtalk import api

    rules = ctx.request_context.lifespan_context.rules
    return _table(api.query(text, con=con, limit=limit, rules=rules, chains_for=pick, per_section=per), text)


def _fitted(budget: int, name: str | None = None):
    """`chains_for` of an answer cut to `budget` tokens (of definition
    `name`'s, its overloads merged, `_merged`): the rows it can show. Fitted
    without their chains, which only make rows longer, so these are all the
    rows it shows with them (Note [Chains for the rows read])."""
    from torchtalk.mcp.answer import fit

    def pick(columns, rows) -> list[int]:
        rows_as = _ids_as(name) if name is not None else None
        keys = rows_as(rows) if rows_as else [tuple(r) for r in rows]
        firsts = tuple(dict.fromkeys(keys))
        counts = getattr(rows, "counts", None) if rows_as is None else None
        table = Table("", tuple(columns), firsts, rows.total if counts is not None else len(firsts),
                      counts=counts, one_value=getattr(rows, "one_value", None) if counts is not None else None)
        kept = {tuple(r) for r in fit(table, budget)[1]}
        if not kept <= set(firsts):  # a group of overloads: no row of its own
            return list(range(len(rows)))
        return [i for i, k in enumerate(keys) if k in kept]

    return pick


# Note [Ambiguous names for agents]: an agent that asks about `gemm` wants an
# answer, not a turn spent on "ambiguous". In the tools (not in the DSL, where
# `--all` asks for it) a name with several definitions is answered for each:
# the most central first (Resolver.central: public namespace, most callers),
# GROUPS of them in full, each headed by its id, file:line and callers, the
# first with the largest share of the token budget (Note [Answer size]); the
# rest are named with the exact call that asks about one. The structured rows
# (those the text shows) carry a `definition` column.
GROUPS = 3
GROUP_BUDGET = (0.45, 0.2, 0.2)  # shares of the budget


def _each(ctx: Context, con, name: str, dsl: Callable[[str], str],
          budget: int | None = None) -> Table | CallToolResult:
    """The answer of `dsl(NAME)`; for an ambiguous name, one per definition
    (Note [Ambiguous names for agents]), within `budget` tokens."""
    from torchtalk.query.resolve import Ambiguous

    try:
        return _dsl(ctx, con, dsl(_name(name)), pick=_fitted(budget or BUDGET), per=PER_SECTION)
    except Ambiguous as amb:
        return _per_definition(ctx, con, amb.resolution, dsl, budget or BUDGET)


def _merged(table: Table, name: str) -> Table:
    """`table` (the answer for one definition, `name`) with the ids of
    `name`'s overloads written as `name`, and the rows that become equal
    once (Note [Overload ids]: the overloads of one name are one definition
    here, so gemm's ten overloads do not answer ten times over), in the
    rows' chains too: a walk's rows differ by the overload their chain ends
    at (impact(cpublas::gemm)'s 3,100 Python rows, each of its 10 overloads').
    Rows equal but for their chain are one, the first's (Note [Chains for
    the rows read]: only the rows shown have theirs)."""
    from dataclasses import replace

    from torchtalk.query.chains import COLUMN

    rows_as = _ids_as(name)
    if rows_as is None:
        return table
    c = table.columns.index(COLUMN) if COLUMN in table.columns else None
    merged: dict[tuple, tuple] = {}
    for row in rows_as(table.rows):
        merged.setdefault(row if c is None else row[:c] + row[c + 1:], row)
    rows = tuple(merged.values())
    return table if len(rows) == len(table.rows) else replace(table, rows=rows, total=table.total - len(table.rows) + len(rows))


def _ids_as(name: str):
    """The function that writes, in rows, the id of each of `name`'s
    overloads as `name`, in a cell or a chain's steps (`_merged`); None when
    `name` is one overload's id. It works column by column, on each
    distinct string once: impact(gemm)'s three definitions are 60,000 rows."""
    from dataclasses import replace

    from extractors.cpp.names import split_sig
    from torchtalk.query.chains import Chain

    if split_sig(name)[1]:
        return None
    ids: dict[str, str] = {}  # each string seen, as written out (one split_sig per distinct string)

    def one_id(v):
        if not isinstance(v, str):
            return v
        out = ids.get(v)
        if out is None:  # only a string that starts with `name` can be one of its overloads
            out = ids[v] = name if v.startswith(name) and v.endswith(")") and split_sig(v)[0] == name else v
        return out

    def one(v):  # an overload's id as `name`, in a column or in a chain's steps
        if isinstance(v, str):
            return one_id(v)
        if isinstance(v, Chain) and any(one_id(s.src) is not s.src or one_id(s.dst) is not s.dst for s in v):
            return Chain(replace(s, src=one_id(s.src), dst=one_id(s.dst)) for s in v)
        return v

    def column(col: tuple) -> tuple | list:  # a column holds one type (its .decl's), or chains and None
        if type(col[0]) is str:
            renamed = {v: w for v in set(col) if v.startswith(name) and (w := one_id(v)) is not v}
            return [renamed.get(v, v) for v in col] if renamed else col
        return col if isinstance(col[0], int | float) else list(map(one, col))

    def rows_as(rows) -> list[tuple]:
        return list(zip(*map(column, zip(*rows, strict=True)), strict=True)) if rows else []

    return rows_as


def _per_definition(ctx: Context, con, res, dsl: Callable[[str], str], budget: int) -> CallToolResult:
    from torchtalk.connmemo import remember, session_memo
    from torchtalk.mcp.answer import fit, tokens
    from torchtalk.query.dsl import value_text
    from torchtalk.query.resolve import Resolver

    # the ranking reads the whole call graph (three group-bys): once per
    # connection's DB and set of matches (Note [DB info cache] in torchtalk/connmemo.py)
    memo = session_memo(con, "central")
    key = res.matches
    ranked = memo.get(key) if memo is not None else None
    if ranked is None:
        ranked = Resolver(con).central(res)
        if memo is not None:
            remember(memo, key, ranked)
    head = (f"{res.text!r} names {len(ranked)} definitions; each is answered, the most central "
            f"first (public namespace, most callers)")
    texts, rows, columns, total, notes = [head], [], (), 0, []
    for i, (m, callers) in enumerate(ranked[:GROUPS]):
        share = max(100, int(budget * GROUP_BUDGET[min(i, len(GROUP_BUDGET) - 1)]))
        table = _merged(_dsl(ctx, con, dsl(value_text(m.id)), pick=_fitted(share, m.id)), m.id)
        columns, total = table.columns, total + table.total
        texts.append(f"\n[{i + 1}] {m.id}  {m.where()}  ({callers} caller{'s' if callers != 1 else ''})")
        text, kept = fit(table, share, _more("query", lambda i=m.id: dsl(value_text(i)), dsl=dsl(value_text(m.id))))
        texts.append(text)
        rows += [{"definition": m.id, **dict(zip(table.columns, r, strict=True))} for r in kept]
    for m, callers in ranked[GROUPS:]:
        notes.append(f"also {m.id}  {m.where()}  ({callers} callers): {dsl(value_text(m.id))}")
    for k, n in enumerate(notes):  # as many as the budget leaves room for
        line = f"note: {n}"
        if tokens("\n".join([*texts, line])) > budget - 20:
            texts.append(f"note: … and {len(notes) - k} more definitions")
            break
        texts.append(line)
    answer = Answer(title=dsl(res.text), columns=["definition", *columns], rows=rows, total=total,
                    truncated=len(rows) < total, notes=[head, *notes])
    return CallToolResult(content=[TextContent(type="text", text="\n".join(texts))],
                          structured_content=answer.model_dump(mode="json"))


def _call(tool: str, **args: Any) -> str:
    """The exact call an agent makes: `trace(name='conv2d', focus='tests')`."""
    return f"{tool}(" + ", ".join(f"{k}={v!r}" for k, v in args.items() if v is not None) + ")"


def _more(tool: str, query_text: Callable[[], str] | None = None, **args: Any) -> More:
    """How to see more of `tool(**args)`: a cut section through `query` with
    the section as a column filter (`impact(gemm, kind=python)`;
    `query_text()` is the answer's query, called only when the answer is
    rendered), the rest
    with a larger budget."""
    def section(col: str, value: Any) -> str:
        text = query_text() if query_text is not None else ""
        if not text.endswith(")"):
            return _call(tool, **args, budget=MAX_BUDGET)
        return _call("query", dsl=f"{text[:-1]}, {col}={value})")

    return More(section, lambda b: _call(tool, **args, budget=b))


# Note [Trace focus]: `focus` names a part of a trace answer (issue 19), not
# a substring: the parts are sets of the `step`s of rules/trace.dl, and a
# dispatch key keeps that key's kernels, stub implementations (and, for a
# CUDA-family key, the CUDA kernels launched). Lowercase part names win over
# keys, so `cuda` is the CUDA kernels and `CUDA` the CUDA key.
FOCUS_PARTS: dict[str, tuple[str, ...]] = {
    "dispatch": ("kernel", "unlinked", "delegate"),
    "kernels": ("kernel", "unlinked", "delegate"),
    "cuda": ("cuda_kernel",),
    "stubs": ("stub", "stub_impl", "ufunc_loop"),
    "python": ("python",),
    "derivatives": ("derivative",),
    "decomp": ("decomp",),
    "tests": ("test",),
    "schema": ("op", "tag", "delegate"),
}
# the part a trace step is shown by (for "… N more: trace(..., focus=...)")
PART_OF_STEP = {step: part for part, steps in reversed(FOCUS_PARTS.items()) for step in steps}
PART_OF_STEP.update({"kernel": "dispatch", "unlinked": "dispatch", "delegate": "dispatch"})


def _keys(con) -> dict[str, str]:
    """Dispatch keys by lowercase name: those of the dispatch table and of stub registrations."""
    rows = con.execute("select distinct key from dispatch union select distinct key from stub_register").fetchall()
    return {k.lower(): k for (k,) in rows if k}


def _focus_rows(con, table: Table, focus: str) -> tuple[tuple, str]:
    """The rows of a trace `table` in the part `focus` names (Note [Trace focus]),
    and a note saying what was kept."""
    f = focus.strip()
    cols = table.columns
    step, detail = cols.index("step"), cols.index("detail")
    if f in FOCUS_PARTS:
        steps = FOCUS_PARTS[f]
        rows = tuple(r for r in table.rows if r[step] in steps)
        return rows, f"focus {f!r}: the {', '.join(steps)} rows, {len(rows)} of {table.total}"
    keys = _keys(con)
    key = keys.get(f.lower())
    if key is None:
        from torchtalk.errors import did_you_mean

        choices = [*FOCUS_PARTS, *sorted(keys.values())]
        hint = did_you_mean(f, choices) or ""
        raise QueryError(f"focus {f!r} is not a part of a trace" + (f" ({hint})" if hint else ""),
                         hint=f"parts: {', '.join(FOCUS_PARTS)}; or a dispatch key: "
                              + ", ".join(sorted(keys.values())[:12]) + ", ...")
    device = "CUDA" if key.endswith("CUDA") else key  # as rules/graph.dl's key_device_known
    rows = tuple(r for r in table.rows
                 if (r[step] in ("kernel", "unlinked", "stub_impl", "ufunc_loop")
                     and str(r[detail]).split(" ", 1)[0] == key)
                 or (r[step] == "cuda_kernel" and device == "CUDA"))
    launched = ", and the CUDA kernels launched" if device == "CUDA" else ""
    return rows, f"focus {f!r}: the {key} kernels and stub implementations{launched}, {len(rows)} of {table.total}"


def _traced(ctx: Context, con, name: str, focus: str | None) -> Table:
    """trace(name), kept to the part `focus` names (Note [Trace focus])."""
    text = f"trace({_name(name)})"
    table = _dsl(ctx, con, text)  # read whole: its rows group overloads (Note [Rows per section])
    if not focus:
        return table
    rows, note = _focus_rows(con, table, focus)
    return Table(f"{table.title} focus={focus.strip()}", table.columns, rows, len(rows), (*table.notes, note))


def _trace_more(name: str, focus: str | None) -> More:
    def section(col: str, value: Any) -> str:
        part = PART_OF_STEP.get(value)
        if part is None or part == focus:
            return _call("query", dsl=f"trace({_name(name)}, step={value})")
        return _call("trace", name=name, focus=part)

    return More(section, lambda b: _call("trace", name=name, focus=focus, budget=b))


def register(server: MCPServer) -> None:
    """Register every tool of TOOL_NAMES on `server`."""
    ro = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
    for fn in (
        get_status, trace, search, impact, calls, called_by, cuda_kernels, trace_module,
        list_modules, find_similar_tests, list_test_utils, test_file_info, query,
        affected, coverage,
    ):
        desc = " ".join(inspect.cleandoc(fn.__doc__ or "").split())
        server.add_tool(fn, description=desc, annotations=ro, structured_output=True)


async def get_status(ctx: Context) -> Result:
    """What TorchTalk has indexed: the PyTorch tree and version, rows per relation,
    which layers (ops, cpp, python, tests, precise) are present, missing or
    still being built. Call it first, and when an answer looks incomplete."""
    from torchtalk.mcp.status import status_table

    app = ctx.request_context.lifespan_context
    return await run_tool(ctx, "get_status", lambda con: status_table(app, con), optional_db=True)


async def trace(
    ctx: Context,
    name: Annotated[str, Field(description=(
        "a Python API, op, nn module, C++ function, CUDA kernel or dispatch stub: 'torch.matmul', "
        "'add.Tensor', 'gelu', 'torch.nn.Linear', 'softmax_warp_forward', 'add_stub'"))],
    focus: Annotated[str | None, Field(description=(
        "one part of the answer: 'dispatch' (or 'kernels': the kernel per dispatch key), 'cuda' (CUDA "
        "kernels launched), 'stubs' (dispatch stubs and their implementations per key), 'python' (Python "
        "APIs), 'derivatives', 'decomp', 'tests', 'schema' (declaration, tags, delegate); or a dispatch key "
        "('CUDA', 'CPU', 'MPS', ...): that key's kernels and stub implementations"))] = None,
    budget: Budget = None,
) -> Result:
    """How does X work: the path from a Python API down to ATen ops, their dispatch
    entries per backend, structured delegates, C++ kernels, dispatch stubs and CUDA
    kernels, with derivative formulas and covering tests, each step at file:line.
    For an nn module it is trace_module's answer; for a C++ function, CUDA kernel
    or stub: its callers and launching hosts, the ops and APIs that reach it, and
    what it calls and launches. The answer opens with the op's schema and kernel per key; each part is capped
    with the call that shows the rest (`focus` picks one part). Use it to
    understand or modify an operator."""
    return await run_tool(ctx, "trace", lambda con: _traced(ctx, con, name, focus),
                          budget=budget, more=_trace_more(name, focus),
                          args=dict(name=name, focus=focus, budget=budget))


async def search(
    ctx: Context,
    query: Annotated[str, Field(description="part of a name: 'softmax', 'layer_norm', 'gemm'")],
    backend: Annotated[str | None, Field(description="a dispatch key to keep only what serves it: 'CPU', 'CUDA', 'MPS'")] = None,
    budget: Budget = None,
) -> Result:
    """Find ops, C++ functions, CUDA kernels, dispatch stubs, Python functions and
    APIs, nn modules, tests and test utilities by part of their name, in any case;
    rank 0 (the name is it) first, then 1 (starts with it), then 2 (holds it). Use it
    when you do not know the exact name to give to the other tools."""
    from torchtalk import api

    def work(con) -> Table:
        return _dsl(ctx, con, api.search_dsl(query, backend))

    return await run_tool(ctx, "search", work, budget=budget,
                          more=_more("search", lambda: api.search_dsl(query, backend), query=query, backend=backend),
                          args=dict(query=query, backend=backend, budget=budget))


async def impact(
    ctx: Context,
    name: Annotated[str, Field(description="a C++ function, op or kernel: 'at::native::cpublas::gemm', 'gemm'")],
    depth: Annotated[int | None, Field(ge=1, le=MAX_DEPTH, description=f"how many caller levels to follow, 1 to "
                                       f"{MAX_DEPTH} (default: impact's own, as on the command line)")] = None,
    budget: Budget = None,
) -> Result:
    """What breaks if I change X: the transitive callers of a function up to `depth`
    levels, the ops and Python APIs that reach it. Use before changing a C++
    function or kernel to see who depends on it."""
    opt = "" if depth is None else f", depth={depth}"

    def dsl(n: str) -> str:
        return f"impact({n}{opt})"

    return await run_tool(ctx, "impact", lambda con: _each(ctx, con, name, dsl, budget), budget=budget,
                          more=_more("impact", lambda: dsl(_name(name)), name=name, depth=depth),
                          args=dict(name=name, depth=depth, budget=budget))


async def calls(
    ctx: Context,
    name: Annotated[str, Field(description=(
        "an op or Python API ('matmul', 'torch.matmul', 'add.Tensor'), or a C++ function "
        "('at::native::matmul', 'at::native::_matmul_impl', 'cpublas::gemm')"))],
    budget: Budget = None,
) -> Result:
    """What X calls. For an op (or Python API): the ops its kernels call, per
    dispatch key, through the helpers in between (matmul -> _matmul_impl -> mm,
    mv, dot, bmm), each with its call site file:line and chain. For a C++/CUDA
    function's id: its direct callees at their call sites. Use to walk down
    from an op to the ops it is built on, or down the call graph one step."""
    def dsl(n: str) -> str:
        return f"callees({n})"

    return await run_tool(ctx, "calls", lambda con: _each(ctx, con, name, dsl, budget), budget=budget,
                          more=_more("calls", lambda: dsl(_name(name)), name=name),
                          args=dict(name=name, budget=budget))


async def called_by(
    ctx: Context,
    name: Annotated[str, Field(description=(
        "a C++ function ('gemm', 'at::native::cpublas::gemm') or an op ('mm', 'aten::mm')"))],
    budget: Budget = None,
) -> Result:
    """Who calls X. For a C++/CUDA function: its direct callers, each at its call
    site file:line; `impact` follows them transitively. For an op: the ops whose
    kernels call it, per dispatch key, through the helpers in between (mm <-
    _matmul_impl <- matmul), each with its chain."""
    def dsl(n: str) -> str:
        return f"callers({n})"

    return await run_tool(ctx, "called_by", lambda con: _each(ctx, con, name, dsl, budget), budget=budget,
                          more=_more("called_by", lambda: dsl(_name(name)), name=name),
                          args=dict(name=name, budget=budget))


async def cuda_kernels(
    ctx: Context,
    name: Annotated[str | None, Field(description="an op, C++ function or kernel name; omit for the kernel count per file")] = None,
    budget: Budget = None,
) -> Result:
    """CUDA __global__ kernels: for a kernel name, where it is defined and which host
    functions launch it (<<<>>>, gpu_kernel, ...); for an op or C++ function, the
    kernels it reaches on CUDA; with no name, which files hold the most kernels."""
    from torchtalk import api

    def work(con) -> Table:
        if not name:
            return _table(api.cuda_kernels(None, con=con), "CUDA kernels per file")
        n = _name(name)
        try:  # a kernel's own name: where it is defined and launched (rules/lookups.dl)
            table = _table(api.cuda_kernels(n, con=con), f"CUDA kernel {n}")
        except QueryError:
            table = None
        return table if table is not None and table.total else _each(ctx, con, name, lambda k: f"kernels({k})", budget)

    return await run_tool(ctx, "cuda_kernels", work, budget=budget, more=_more("cuda_kernels", name=name),
                          args=dict(name=name, budget=budget))


async def trace_module(
    ctx: Context,
    name: Annotated[str, Field(description="an nn module or optimizer: 'torch.nn.Linear', 'Linear', 'Adam'")],
    budget: Budget = None,
) -> Result:
    """How does an nn.Module or optimizer work: its class and bases, its forward,
    step and __init__ methods, what they call, and the ATen ops they reach, each at
    file:line."""
    def dsl(n: str) -> str:
        return f"trace_module({n})"

    return await run_tool(ctx, "trace_module", lambda con: _each(ctx, con, name, dsl, budget), budget=budget,
                          more=_more("trace_module", lambda: dsl(_name(name)), name=name),
                          args=dict(name=name, budget=budget))


async def list_modules(
    ctx: Context,
    category: Annotated[str, Field(description="'nn', 'optim', 'lr_scheduler', ...; 'all' lists the categories")],
    budget: Budget = None,
) -> Result:
    """List torch.nn modules, optimizers, LR schedulers... of a category with their
    definitions at file:line. 'all' gives the categories and counts."""
    from torchtalk import api

    title = "module categories" if category in ("", "all", "*") else f"modules in category {category!r}"
    return await run_tool(ctx, "list_modules", lambda con: _table(api.list_modules(category, con=con), title),
                          budget=budget, more=_more("list_modules", category=category),
                          args=dict(category=category, budget=budget))


async def find_similar_tests(
    ctx: Context,
    query: Annotated[str, Field(description="words about what to test: 'softmax backward', 'matmul out'")],
    budget: Budget = None,
) -> Result:
    """Find existing tests like the one you want to write: tests whose names or
    covered ops match the words, best first, at file:line. Use before adding a
    test to follow the conventions of its neighbours."""
    from torchtalk import api

    return await run_tool(ctx, "find_similar_tests", lambda con: api.find_similar_tests(query, con=con),
                          budget=budget, more=_more("find_similar_tests", query=query),
                          args=dict(query=query, budget=budget))


async def list_test_utils(
    ctx: Context,
    category: Annotated[str, Field(description="'decorator', 'base_class', 'helper', ...; 'all' lists the categories")],
    budget: Budget = None,
) -> Result:
    """List the test utilities of torch/testing/_internal (decorators such as
    @dtypes/@onlyCUDA, base classes, helpers) of a category, at file:line."""
    from torchtalk import api

    title = "test utility categories" if category in ("", "all", "*") else f"test utilities in category {category!r}"
    return await run_tool(ctx, "list_test_utils", lambda con: _table(api.list_test_utils(category, con=con), title),
                          budget=budget, more=_more("list_test_utils", category=category),
                          args=dict(category=category, budget=budget))


async def test_file_info(
    ctx: Context,
    path: Annotated[str, Field(description="a test file: 'test/test_linalg.py' or 'test_linalg.py'")],
    budget: Budget = None,
) -> Result:
    """What a test file holds: its test classes and functions at file:line, and the
    ops it covers most. Use to find where a new test belongs."""
    from torchtalk import api

    def work(con) -> Table:
        result = api.test_file_info(path, con=con)
        return _table(result, f"tests in {result.notes[0].split(':', 1)[0]}")

    return await run_tool(ctx, "test_file_info", work,
                          budget=budget, more=_more("test_file_info", path=path),
                          args=dict(path=path, budget=budget))


async def query(
    ctx: Context,
    dsl: Annotated[str, Field(description="a query: 'callers(gemm)', 'paths(softmax_warp_forward -> python)', 'tests(softmax)', or a user rule 'my_rel(x)'")],
    budget: Budget = None,
) -> Result:
    """Run any TorchTalk query: a named query of the rule library (trace, impact,
    callers, callees, kernels, paths, tests, affected, coverage, search) or a
    relation of a user rule file, with arguments as in 'impact(gemm, depth=2)'."""
    def work(con) -> Table:
        text = (dsl or "").strip()
        if not text:
            raise QueryError("empty query", hint="e.g. 'callers(gemm)'")
        return _dsl(ctx, con, text)

    return await run_tool(ctx, "query", work, budget=budget, more=_more("query", lambda: (dsl or "").strip(), dsl=dsl),
                          args=dict(dsl=dsl, budget=budget))


async def affected(
    ctx: Context,
    functions: Annotated[list[str], Field(min_length=1, description="changed C++/Python functions: ['at::native::cpublas::gemm']")],
    budget: Budget = None,
) -> Result:
    """Which ops, Python APIs and tests are affected by a change to these functions
    (e.g. the functions of a diff). Use to pick the tests to run after a change."""
    def work(con) -> Table:
        return _dsl(ctx, con, "affected(" + ", ".join(_name(f, "function") for f in functions) + ")")

    return await run_tool(ctx, "affected", work, budget=budget, more=_more("affected", functions=functions),
                          args=dict(functions=functions, budget=budget))


async def coverage(
    ctx: Context,
    key: Annotated[str | None, Field(description="a dispatch key: 'CPU', 'CUDA', 'MPS', 'Meta'; omit for all keys")] = None,
    budget: Budget = None,
) -> Result:
    """Backend coverage: for a dispatch key, how many ops have a kernel (directly,
    through a structured delegate or a composite), the share of the core ATen opset,
    and the ops still missing; without a key, the summary per key."""
    from torchtalk import api

    return await run_tool(ctx, "coverage", lambda con: api.coverage_table(key, con=con),
                          budget=budget, more=_more("coverage", key=key),
                          args=dict(key=key, budget=budget))
