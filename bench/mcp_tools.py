"""Fewer, broader tools or the current ones? The skill's workflows run both ways.

Issue 19: "whether fewer, broader tools serve agents better is measured, not
assumed" (the upstream TorchTalk cut 12 tools to 6). Each workflow below is
the question an agent asks, the calls it makes with the current 15 tools, and
the calls it would make with a reduced set of six (trace, search, impact,
calls, tests, status), where `trace` also answers modules (trace_module) and
CUDA kernels (`focus='cuda'`), `impact(depth=1)` stands for called_by, `search`
for list_modules and test_file_info, and `tests(X)` is today's
`query('tests(X)')`. Both run through the SDK's stdio client on one server,
and the bench prints per workflow and in total, side by side: calls made,
answer characters and ~tokens (characters / 4), errors, and whether the
answers hold the facts the workflow promises (an agent follows an answer's
"… N more: <call>" until they do, at most FOLLOW more calls, each counted); plus the size of the tool list
an agent loads either way (names, descriptions and input schemas).

    .venv/bin/python bench/mcp_tools.py [--source PATH | --db FILE]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

# this directory holds mcp.py: keep it off sys.path so `import mcp` finds the SDK
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

REDUCED = ("trace", "search", "impact", "calls", "query", "get_status")  # `query` stands in for `tests`

# (question, facts the answers must hold, calls with the current tools, calls with the reduced set)
WORKFLOWS: tuple[tuple[str, tuple[str, ...], tuple, tuple], ...] = (
    ("what breaks if I modify GEMM?", ("torch.mm",),
     (("impact", {"name": "gemm", "depth": 4}),), (("impact", {"name": "gemm", "depth": 4}),)),
    ("who calls gemm?", ("addmm_impl_cpu_",),
     (("called_by", {"name": "gemm"}),), (("impact", {"name": "gemm", "depth": 1}),)),
    ("where is conv2d for CUDA?", ("at::native::conv2d",),
     (("trace", {"name": "conv2d", "focus": "dispatch"}),), (("trace", {"name": "conv2d", "focus": "dispatch"}),)),
    ("how does matmul work?", ("at::native::matmul",),
     (("trace", {"name": "matmul"}),), (("trace", {"name": "matmul"}),)),
    ("what does matmul call?", ("_matmul_impl", "  mm  ", "  mv  ", "  dot  ", "  bmm  "),
     (("calls", {"name": "matmul"}),), (("calls", {"name": "matmul"}),)),
    ("how does nn.Linear work?", ("torch.nn.functional.linear", "addmm"),
     (("trace_module", {"name": "Linear"}),), (("trace", {"name": "Linear"}),)),
    ("which CUDA kernels does softmax reach?", ("cunn_SoftMaxForward",),
     (("cuda_kernels", {"name": "softmax"}),), (("trace", {"name": "softmax", "focus": "cuda"}),)),
    ("conv2d pieces serving CUDA", ("conv2d",),
     (("search", {"query": "conv2d", "backend": "CUDA"}),), (("search", {"query": "conv2d", "backend": "CUDA"}),)),
    ("what is indexed?", ("python",), (("get_status", {}),), (("get_status", {}),)),
    ("which optimizers exist?", ("torch.optim.adam.Adam",),
     (("list_modules", {"category": "optim"}),), (("search", {"query": "torch.optim.adam"}),)),
    ("what does test_linalg.py hold?", ("test/test_linalg.py",),
     (("test_file_info", {"path": "test/test_linalg.py"}),), (("search", {"query": "test_linalg"}),)),
    ("which tests cover softmax?", ("test/",),
     (("query", {"dsl": "tests(softmax)"}),), (("query", {"dsl": "tests(softmax)"}),)),
    ("/trace interpolate", ("upsample",),
     (("trace", {"name": "torch.nn.functional.interpolate"}),),
     (("trace", {"name": "torch.nn.functional.interpolate"}),)),
    ("/trace interpolate: CUDA", ("upsample",),
     (("trace", {"name": "torch.nn.functional.interpolate", "focus": "CUDA"}),
      ("cuda_kernels", {"name": "interpolate"})),
     (("trace", {"name": "torch.nn.functional.interpolate", "focus": "CUDA"}),)),
)


async def run(params) -> tuple[list[dict], dict[str, int]]:
    """Each workflow both ways; and the tool list's size for each set."""
    from mcp import Client

    out = []
    async with Client(params) as client:
        listed = (await client.list_tools()).tools
        sizes = {name: sum(len(json.dumps(t.model_dump(mode="json", exclude_none=True))) for t in listed
                           if keep is None or t.name in keep)
                 for name, keep in (("current", None), ("reduced", REDUCED))}
        sizes["current_tools"], sizes["reduced_tools"] = len(listed), len(REDUCED)
        for question, facts, current, reduced in WORKFLOWS:
            row = {"question": question}
            for way, calls in (("current", current), ("reduced", reduced)):
                row[way] = await _ask(client, calls, facts, SECTION.get(question, ""))
                row[way]["how"] = " + ".join(f"{t}({', '.join(f'{k}={v!r}' for k, v in a.items())})" for t, a in calls)
            out.append(row)
    return out, sizes


FOLLOW = 3  # "… N more: <call>" calls an agent follows when the facts are not there yet
# the cut section an agent follows first, for a question about it (else in the answer's order)
SECTION = {"what breaks if I modify GEMM?": "python", "who calls gemm?": "cpublas::gemm"}
_MORE = re.compile(r"… .*?: (\w+\(.*\))$", re.M)


async def _ask(client, calls, facts, section: str = "") -> dict:
    """Make `calls`, then follow the answers' "… N more: <call>" until the facts
    are there (at most FOLLOW more calls): calls made, characters, errors, facts found."""
    import ast

    texts, errors, todo, made = [], 0, list(calls), 0
    while todo:
        tool, args = todo.pop(0)
        r = await client.call_tool(tool, args)
        made += 1
        text = "\n".join(c.text for c in r.content if c.type == "text")
        texts.append(text)
        errors += bool(r.is_error)
        if not todo and not all(f in "\n".join(texts) for f in facts) and made < len(calls) + FOLLOW:
            more = sorted(_MORE.finditer(text), key=lambda m: section not in m.group(0))
            for m in more:
                call = ast.parse(m.group(1), mode="eval").body
                todo.append((call.func.id, {k.arg: ast.literal_eval(k.value) for k in call.keywords}))
            todo = todo[:len(calls) + FOLLOW - made]
    text = "\n".join(texts)
    return {"calls": made, "chars": len(text), "tokens": (len(text) + 3) // 4, "errors": errors,
            "facts": all(f in text for f in facts)}


def report(rows: list[dict], sizes: dict[str, int]) -> None:
    """The side-by-side table and the totals."""
    print(f"{'workflow':<40} | {'current: calls chars ~tok err facts':<36} | reduced: calls chars ~tok err facts")
    for r in rows:
        cells = []
        for way in ("current", "reduced"):
            c = r[way]
            cells.append(f"{c['calls']:>5} {c['chars']:>6,} {c['tokens']:>5,} {c['errors']:>3} {'yes' if c['facts'] else 'NO':>5}")
        print(f"{r['question'][:40]:<40} | {cells[0]:<36} | {cells[1]}")
    for way in ("current", "reduced"):
        calls = sum(r[way]["calls"] for r in rows)
        chars = sum(r[way]["chars"] for r in rows)
        errors = sum(r[way]["errors"] for r in rows)
        missed = [r["question"] for r in rows if not r[way]["facts"]]
        print(f"{way}: {sizes[way + '_tools']} tools, tool list {sizes[way]:,} chars (~{(sizes[way] + 3) // 4:,} tokens); "
              f"{calls} calls, {chars:,} chars (~{(chars + 3) // 4:,} tokens), {errors} errors, "
              f"facts missing in {len(missed)}" + (f": {'; '.join(missed)}" if missed else ""))
    for r in rows:
        if r["current"]["how"] != r["reduced"]["how"]:
            print(f"  {r['question']}: {r['current']['how']}  ->  {r['reduced']['how']}")


def main() -> int:
    import anyio
    from mcp.client.stdio import StdioServerParameters

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path)
    ap.add_argument("--db", type=Path)
    args = ap.parse_args()
    where = ["--db", str(args.db)] if args.db else (["--source", str(args.source)] if args.source else [])
    params = StdioServerParameters(command=sys.executable, args=["-m", "torchtalk", "mcp-serve", *where])
    rows, sizes = anyio.run(run, params)
    report(rows, sizes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
