"""The shared HTTP server's slow lane, in a process of its own.

Note [Slow lane process]: the slow tools (`affected`, `impact`, `query`,
`coverage`; Note [Lanes] in cache.py) walk the call graph in Python, in the
in-memory engine (Note [In-memory evaluation]), for tens of milliseconds
to seconds. In the server's own process they hold the GIL that the quick
calls' threads and the event loop need too: with `affected` calls running,
a `called_by` of 5 ms waited p95 120-230 ms (bench/load.py --slow). So
`mcp-serve --transport http` runs its slow lane in a child process: the
same server, `torchtalk mcp-serve --transport stdio --db DB --no-watch`,
that its own lifespan reads into memory (Note [Warm queries] in db.py),
reached through the SDK's stdio client. A slow call is checked and looked
up in the answers kept here, as every call (Note [Answer cache]), then
sent there; its answer or tool error comes back as the child gave it.
The tools that build a whole answer from several queries (`trace`,
`trace_module`, `cuda_kernels`) go to whichever process has fewer calls
running (Note [Either process]).

- Cancelled here (the client cancelled or left, Note [Disconnect cancels]),
  the stdio client sends the child `notifications/cancelled`, and the
  child interrupts its query as for any cancelled call (Note [Stopped
  calls] in server.py).
- The child's stdin is this process's pipe: when this process ends, even
  killed, the child reads end-of-file and ends too.
- Until a DB exists (the server indexes first, Note [Serving while
  indexing]), or if the child fails to start or dies, slow calls run in
  this process as before; `get_status` says which.

The stdio transport serves one agent, whose calls come one at a time: it
keeps its slow lane in process (no second copy of the tables in memory).
$TORCHTALK_MCP_SLOW_PROCESS=0 keeps it in process over HTTP too.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio

from torchtalk.mcp.cache import SLOW_TOOLS
from torchtalk.paths import switched_on

ENV = "TORCHTALK_MCP_SLOW_PROCESS"
# the tools whose calls the child answers (Note [Slow lane process])
CHILD_TOOLS = SLOW_TOOLS
# the tools whose calls go to whichever process has fewer calls running (Note [Either process])
EITHER_TOOLS = frozenset({"trace", "trace_module", "cuda_kernels"})
POLL_S = 1.0  # how often to look for a DB to serve while none exists

# Note [Either process]: `trace`, `trace_module` and `cuda_kernels` build a
# whole answer from several queries: 2-45 ms of Python each, between the
# quick lookups (1-6 ms) and the slow tools. All sent to the child, they
# left its GIL the busier one whenever the slow tools were idle, and each
# paid the second hop (the stdio client here, the server there: the
# server's CPU a call, 9.9 ms, against 7.6-8.0 ms with them here); all kept
# here, this process's GIL, which also runs every call's HTTP transport,
# was the busy one. So each such call goes where fewer calls are running
# (`SlowProcess.running` there, `App.running` here), the child on a tie (this
# process has the transport besides): the two GILs share the load as it
# comes, whatever the mix. The slow tools always go there, so a quick call
# never waits behind one (bench/load.py --slow).


def wanted() -> bool:
    """Whether an HTTP server runs its slow lane in a process ($TORCHTALK_MCP_SLOW_PROCESS)."""
    return switched_on(ENV)


class SlowProcess:
    """The child process serving the slow lane (Note [Slow lane process]).

    `run` (a task of the lifespan's task group) starts the child once the
    DB exists and keeps its client session open; `call` sends it a call.
    """

    def __init__(self, db_path, rules: tuple[Path, ...] = ()) -> None:
        self._db_path = db_path  # () -> the DB file, or None while none exists
        self._rules = rules
        self.client: Any = None
        self.state = "starting"  # then "waiting for the index", "serving" or "stopped (why)"
        self.pid: int | None = None
        self.running = 0  # calls sent and not yet answered (Note [Either process])

    @property
    def ready(self) -> bool:
        return self.client is not None

    def command(self, db: Path) -> list[str]:
        rules = [a for d in self._rules for a in ("--rules", str(d))]
        return [sys.executable, "-m", "torchtalk", "mcp-serve", "--transport", "stdio", "--db", str(db),
                "--no-watch", "--no-compiler-tier", *rules]

    async def run(self) -> None:
        """Start the child when a DB exists, and keep its session until cancelled."""
        from mcp import Client
        from mcp.client.stdio import StdioServerParameters

        while (db := self._db_path()) is None:
            self.state = "waiting for the index"
            await anyio.sleep(POLL_S)
        command = self.command(db)
        # the child keeps no answers (this process does, Note [Answer cache]), nor
        # answers `torchtalk query` (this process does, Note [Query server])
        params = StdioServerParameters(command=command[0], args=command[1:],
                                       env={**os.environ, "TORCHTALK_MCP_CACHE": "0", ENV: "0", "TORCHTALK_SERVER": "0"})
        try:
            async with Client(params) as client:
                self.client, self.state = client, "serving"
                self.pid = _child_pid(command)
                await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as err:  # noqa: BLE001 - the lane falls back to this process, and says why
            self.state = f"stopped ({type(err).__name__}: {err}); slow calls run in the server's process"
            print(f"torchtalk mcp: slow lane process {self.state}", file=sys.stderr)
        finally:
            self.client = None

    async def call(self, name: str, args: dict):
        """`name(**args)` in the child -> its CallToolResult (an error one for a tool error)."""
        self.running += 1
        try:
            return await self.client.call_tool(name, {k: v for k, v in args.items() if v is not None})
        finally:
            self.running -= 1

    def note(self) -> str:
        """One line for get_status (called in a worker thread of the event
        loop's): where the slow lane runs and, when it serves, its own
        connections in use (a leak there would show, as in Note [Stopped calls])."""
        where = f" (pid {self.pid})" if self.pid and self.ready else ""
        line = (f"slow lane ({', '.join(sorted(CHILD_TOOLS))}; and {', '.join(sorted(EITHER_TOOLS))} when it runs "
                f"fewer calls): in its own process{where}: {self.state}")
        if not self.ready:
            return line
        try:
            status = anyio.from_thread.run(self.call, "get_status", {})
        except Exception as err:  # noqa: BLE001 - the status says so rather than failing
            return f"{line}; its status: {type(err).__name__}: {err}"
        text = "\n".join(getattr(c, "text", "") for c in status.content)
        used = next((ln.split("connections: ", 1)[1] for ln in text.splitlines() if "connections: " in ln), None)
        return f"{line}; its connections: {used}" if used else line


def _child_pid(command: list[str]) -> int | None:
    """The pid of this process's child running `command` (the stdio server
    just started; the server may have others, a background index), if the
    OS says."""
    try:
        kids = Path(f"/proc/self/task/{os.getpid()}/children").read_text().split()
    except OSError:
        return None
    for kid in reversed(kids):  # newest first
        try:
            if Path(f"/proc/{kid}/cmdline").read_bytes().split(b"\0")[:-1] == [os.fsencode(a) for a in command]:
                return int(kid)
        except OSError:
            continue
    return None
