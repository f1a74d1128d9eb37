"""The TorchTalk MCP server's parts: the lifespan, the server class, and
`run_tool`, through which every tool runs (the tools are in tools.py; the
server is assembled by serve.py's `build_server`).

Note [One DB per server]: the lifespan opens nothing heavy; it sets up the
`FactDB` holder (a pool of read-only connections, opened on the first call
and reopened when `torchtalk index` replaces the file, Note [Connection
pool]) and, when asked or when nothing is indexed yet, the background
`Indexer` (see Note [Serving while indexing]). Every tool goes through
`run_tool`, which leases a connection, bounds the time, and turns TorchTalk
errors into tool errors.

Example:
    >>> await run_tool(ctx, "trace", lambda con: answer(con))  # doctest: +SKIP
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult

from torchtalk.errors import StoreError, TorchTalkError
from torchtalk.lookup import Table
from torchtalk.mcp.answer import More, to_result
from torchtalk.mcp.cache import (
    SLOW_TOOLS,
    UNCACHED_TOOLS,
    AnswerCache,
    LibraryKey,
    enabled,
    freeze,
    slow_lane_size,
)
from torchtalk.mcp.db import (
    POOL_SIZE,
    Call,
    FactDB,
    Indexer,
    call_timeout,
    compiler_available,
    default_log,
)
from torchtalk.mcp.slowlane import CHILD_TOOLS, EITHER_TOOLS, SlowProcess
from torchtalk.paths import source_db

CHILD_GRACE_S = 2.0  # how much longer than its own limit a call in the slow lane's process may take

INSTRUCTIONS = """\
TorchTalk answers questions about the PyTorch source tree from an index of \
facts (ops, dispatch tables, C++ call graph, dispatch stubs, CUDA kernels, \
Python bindings, tests), every answer with file:line. Start with get_status \
(what is indexed); use trace for 'how does X work', impact/affected for \
'what breaks if I change X', calls/called_by for the call graph, search when \
you only know part of a name."""


@dataclass
class App:
    """What the lifespan yields to the tools: the DB, the background index,
    the answers kept (Note [Answer cache]) and the lanes calls run in (Note
    [Lanes]; made in the lifespan: anyio's limiters need its event loop)."""

    db: FactDB
    indexer: Indexer | None
    rules: tuple[Path, ...] = ()  # user rule dirs for `query` (besides the config dir's)
    cache: AnswerCache | None = None  # None: answers are not kept
    lanes: dict[str, anyio.CapacityLimiter] = field(default_factory=dict)  # "fast"/"slow"
    library: LibraryKey | None = None  # the rule library's key, for the cache
    slow: SlowProcess | None = None  # the slow lane's own process (Note [Slow lane process]), HTTP only
    running: int = 0  # calls computing in this process (Note [Either process])

    def __post_init__(self) -> None:
        if self.library is None:
            self.library = LibraryKey(self.rules)

    def in_child(self, tool: str) -> bool:
        """Whether a call of `tool` goes to the slow lane's process (Note
        [Slow lane process]): a slow tool's always, one of EITHER_TOOLS when
        no more calls run there than here (Note [Either process])."""
        if self.slow is None or not self.slow.ready:
            return False
        return tool in CHILD_TOOLS or (tool in EITHER_TOOLS and self.slow.running <= self.running)

    def lane(self, tool: str) -> anyio.CapacityLimiter | None:
        """The lane `tool`'s calls run in (None: anyio's default threads)."""
        return self.lanes.get("slow" if tool in SLOW_TOOLS else "fast")


def lanes() -> dict[str, anyio.CapacityLimiter]:
    """The fast and slow lanes (Note [Lanes]): the slow one runs
    slow_lane_size() calls at once, the fast one the pool's other connections."""
    slow = slow_lane_size()
    return {"slow": anyio.CapacityLimiter(slow), "fast": anyio.CapacityLimiter(max(1, POOL_SIZE - slow))}


def _lifespan(source: Path | None, db: Path | None, reindex: bool, rules: tuple[Path, ...], watch: bool = True,
              compiler: bool = False, slow_process: bool = False):
    @asynccontextmanager
    async def lifespan(_server: MCPServer) -> AsyncIterator[App]:
        facts = FactDB(source, db)
        facts.start_warm(rules)
        queries = serve_queries(facts, db if db is not None else source and source_db(source))
        indexer = None
        if source is not None:
            indexer = Indexer(source, db, default_log(source), compiler=compiler and compiler_available())
            if reindex or facts.path() is None:
                indexer.start()  # the compiler tier follows the stages
            else:
                indexer.catch_up()
            if watch:
                indexer.watch()
        try:
            async with anyio.create_task_group() as tasks:
                slow = SlowProcess(facts.path, rules) if slow_process else None
                if slow is not None:
                    tasks.start_soon(slow.run)
                try:
                    yield App(facts, indexer, rules, AnswerCache() if enabled() else None, lanes(), slow=slow)
                finally:
                    tasks.cancel_scope.cancel()  # the slow lane's process ends with the server
        finally:
            if queries is not None:
                queries.stop()
            if indexer is not None:
                indexer.stop()
            facts.close()

    return lifespan


def serve_queries(facts: FactDB, db: Path | None):
    """Answer `torchtalk query` for `db` from the tools' pool too (Note [Query
    server] in torchtalk/qserver.py), unless TORCHTALK_SERVER=0: the
    `QueryServer`, or None (off, or another process serves that DB)."""
    from torchtalk import qclient
    from torchtalk.qserver import QueryServer

    if db is None or not qclient.enabled():
        return None
    server = QueryServer(facts, db)
    why = server.start()
    if why is not None:
        print(f"torchtalk mcp: not answering `torchtalk query` for {db}: {why}", file=sys.stderr)
        return None
    return server


class TorchTalkServer(MCPServer):
    """MCPServer whose argument errors read as one line, without pydantic's text.

    The SDK checks a call's arguments against the tool's signature before the
    tool runs and reports pydantic's message (the model name, the error type,
    a URL). `call_tool` (the SDK's public entry for a call) says the same in
    one line: `impact: depth must be 1 to 20, got 99 (parameters: name, depth)`.
    """

    async def call_tool(self, name, arguments, context=None):
        from pydantic import ValidationError

        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if not isinstance(exc.__cause__, ValidationError):
                raise
            tool = self._tool_manager.get_tool(name)
            props = (tool.parameters if tool else {}).get("properties", {})
            raise ToolError(argument_error(name, exc.__cause__, list(props), props)) from None


def argument_error(tool: str, err, params: list[str], schemas: dict | None = None) -> str:
    """One line for a pydantic ValidationError of `tool`'s arguments (first
    problem only); a number out of a range the parameter's JSON schema
    (`schemas[name]`) bounds on both sides is said as the range, in the
    CLI's words (Note [Depth bound] in torchtalk/query/run.py).

    Example:
        >>> argument_error("impact", exc, ["name", "depth"], props)
        'Error executing tool impact: error: depth must be 1 to 20, got 99 (parameters: name, depth)'
    """
    e = err.errors()[0]
    field = ".".join(str(x) for x in e.get("loc", ())) or "arguments"
    got, ctx, kind = e.get("input"), e.get("ctx") or {}, e.get("type", "")
    shown = repr(got) if len(repr(got)) <= 40 else repr(got)[:37] + "..."
    lo, hi = _bounds((schemas or {}).get(field, {}))
    if kind in ("less_than_equal", "greater_than_equal") and lo is not None and hi is not None:
        ctx, kind = {}, "range"
    what = {
        "range": f"must be {lo} to {hi}, got {shown}",
        "missing": "is required",
        "less_than_equal": f"must be at most {ctx.get('le')}, got {shown}",
        "less_than": f"must be less than {ctx.get('lt')}, got {shown}",
        "greater_than_equal": f"must be at least {ctx.get('ge')}, got {shown}",
        "greater_than": f"must be more than {ctx.get('gt')}, got {shown}",
        "too_short": "must not be empty",
        "too_long": "is too long",
        "list_type": f"must be a list, got {shown}",
    }.get(kind)
    if what is None:
        kinds = {"int": "an integer", "string": "a string", "bool": "true or false", "float": "a number"}
        want = next((v for k, v in kinds.items() if kind.startswith(k)), "a valid value")
        what = f"must be {want}, got {shown}"
    more = f" ({len(err.errors()) - 1} more)" if len(err.errors()) > 1 else ""
    return f"Error executing tool {tool}: error: {field} {what}{more} (parameters: {', '.join(params)})"


def _bounds(schema: dict) -> tuple:
    """(minimum, maximum) of a parameter's JSON schema (an optional one's
    number schema is under `anyOf`); None where unbounded."""
    for sub in (schema, *schema.get("anyOf", ())):
        if "minimum" in sub or "maximum" in sub:
            return sub.get("minimum"), sub.get("maximum")
    return None, None


def _pooled(app: App, work: Callable[[object], Table | CallToolResult], optional_db: bool, call: Call,
            budget: int | None = None, more: More | None = None) -> CallToolResult | None:
    """`work(con)` on a connection leased from the pool (Note [Connection pool]),
    unless the call was stopped before, as a tool result (fitted to `budget`
    here, off the event loop); `call` knows the connection and the DB
    generation it reads meanwhile."""
    with app.db.lease(optional=optional_db) as con:
        if not call.start(con):
            return None
        call.generation = app.db.served() if con is not None and app.cache is not None else None
        try:
            table = work(con)
            # a tool may build its result itself (an answer per definition, torchtalk/mcp/tools.py)
            return table if isinstance(table, CallToolResult) else to_result(table, budget, more)
        finally:
            call.finish()
            app.db.answered.set()  # warming may start (Note [Warm queries])


async def run_tool(
    ctx, name: str, work: Callable[[object], Table | CallToolResult], optional_db: bool = False,
    budget: int | None = None, more: More | None = None, args: dict | None = None,
) -> CallToolResult:
    """Run `work(con)` in a worker thread on a pooled connection, in `name`'s
    lane (Note [Lanes]); bounded in time.

    TorchTalk errors become tool errors with their hint (did you mean ...);
    an overlong query is interrupted and reported, never left hanging.
    `optional_db`: call `work(None)` when nothing is indexed yet. The answer
    fits `budget` tokens, `more` saying how to ask for the rest (Note [Answer size]).
    `args`, the call's arguments, make the answer kept for the same call on
    the same DB (Note [Answer cache]); None: never kept.
    """
    app: App = ctx.request_context.lifespan_context
    key = _cache_key(app, name, args)
    kept = app.cache.get((key, app.db.generation())) if key is not None else None
    if kept is not None:
        if isinstance(kept, str):
            raise ToolError(kept)
        return kept
    limit = call_timeout()
    if app.in_child(name) and args is not None:
        return await _in_child(app, name, args, key, limit)
    call = Call(app.db, limit)
    app.running += 1
    try:
        with anyio.fail_after(limit):
            result = await anyio.to_thread.run_sync(_pooled, app, work, optional_db, call, budget, more,
                                                    abandon_on_cancel=True, limiter=app.lane(name))
    except TimeoutError:
        call.stop()
        raise ToolError(f"{name}: gave up after {limit:g} s; narrow the question") from None
    except anyio.get_cancelled_exc_class():  # the client cancelled the call, or left
        call.stop()
        raise
    except TorchTalkError as err:
        text = _error_text(err)
        if not isinstance(err, StoreError):  # the question's fault, as lasting as an answer
            _keep(app, key, call.generation, text)
        raise ToolError(text) from None
    except ToolError:
        raise
    except Exception as err:  # a bug, not the user's fault: say what, keep serving
        from torchtalk.store import database_error

        bad_db = database_error(err, getattr(app.db, "explicit", None))
        if bad_db is not None:  # a truncated or corrupt DB, found when a query reads it
            raise ToolError(_error_text(bad_db)) from None
        print(f"torchtalk mcp: {name} failed: {err!r}", file=sys.stderr)
        raise ToolError(f"{name}: internal error: {type(err).__name__}: {err}") from err
    finally:
        app.running -= 1
    _keep(app, key, call.generation, result)
    return result


async def _in_child(app: App, name: str, args: dict, key, limit: float) -> CallToolResult:
    """`name(**args)` in the slow lane's process (Note [Slow lane process]),
    bounded in time here too (a little past the child's own limit, so its
    message comes through); a cancel here cancels it there."""
    generation = app.db.generation()
    try:
        with anyio.fail_after(limit + CHILD_GRACE_S):
            result = await app.slow.call(name, args)
    except TimeoutError:
        raise ToolError(f"{name}: gave up after {limit:g} s; narrow the question") from None
    # an error is not kept: a timeout or a DB error reads the same as an unknown name from here
    if not result.is_error and generation == app.db.generation():
        _keep(app, key, generation, result)
    return result


def _cache_key(app: App, name: str, args: dict | None):
    """The key of `name(**args)`'s answer besides the DB generation: the tool,
    its arguments and the rule library's key; None when it is not kept."""
    if app.cache is None or args is None or name in UNCACHED_TOOLS:
        return None
    return name, freeze(args), app.library.get()


def _keep(app: App, key, generation, answer: CallToolResult | str) -> None:
    """Keep `answer` (a result, or a tool error's text) read from `generation`."""
    if key is not None and generation is not None and app.cache is not None:
        app.cache.put((key, generation), answer)


def _error_text(err: TorchTalkError, max_lines: int = 40) -> str:
    """The error as the agent reads it: headline, then candidates / source caret (capped)."""
    lines = err.render().splitlines()
    if len(lines) > max_lines:
        lines = lines[:max_lines] + [f"... and {len(lines) - max_lines} more lines"]
    return "\n".join(lines)
