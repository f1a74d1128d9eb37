"""Answer sizes of the TorchTalk skill's workflows, as an agent receives them.

Runs each call of WORKFLOWS (the skill's "Common Workflows" as issue 19 lists
them, and the /trace command's calls) through the SDK's stdio client on an
indexed tree, and prints per call: error or not, the text's characters,
approximate tokens (characters / 4), the structured output's characters, and
the answer's first line.

    .venv/bin/python bench/answer_sizes.py [--source PATH | --db FILE] [--markdown]

tests/test_sizes.py imports WORKFLOWS and checks each answer's size and first facts.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

# this directory holds mcp.py: keep it off sys.path so `import mcp` finds the SDK
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

# (question the workflow answers, tool, arguments)
WORKFLOWS: tuple[tuple[str, str, dict], ...] = (
    ("what breaks if I modify GEMM?", "impact", {"name": "gemm", "depth": 4}),
    ("who calls gemm?", "called_by", {"name": "gemm"}),
    ("how does nn.Linear work?", "trace_module", {"name": "Linear"}),
    ("where is conv2d for CUDA?", "trace", {"name": "conv2d", "focus": "dispatch"}),
    ("how does matmul work?", "trace", {"name": "matmul"}),
    ("what does matmul call?", "calls", {"name": "matmul"}),
    ("which CUDA kernels does softmax reach?", "cuda_kernels", {"name": "softmax"}),
    ("conv2d on CUDA, by name", "search", {"query": "conv2d", "backend": "CUDA"}),
    ("what is indexed?", "get_status", {}),
    ("which optimizers exist?", "list_modules", {"category": "optim"}),
    ("what does test_linalg.py hold?", "test_file_info", {"path": "test/test_linalg.py"}),
    ("/trace torch.nn.functional.interpolate", "trace", {"name": "torch.nn.functional.interpolate"}),
    ("/trace: the CUDA kernels", "cuda_kernels", {"name": "interpolate"}),
)


def tokens(chars: int) -> int:
    """Approximate tokens of a text of `chars` characters (4 characters a token)."""
    return (chars + 3) // 4


async def measure(params) -> list[dict]:
    """One dict per workflow call: tool, args, error, chars, tokens, struct_chars, first line."""
    from mcp import Client

    out = []
    async with Client(params) as client:
        for question, tool, args in WORKFLOWS:
            r = await client.call_tool(tool, args)
            text = "\n".join(c.text for c in r.content if c.type == "text")
            struct = json.dumps(r.structured_content) if r.structured_content else ""
            out.append({"question": question, "tool": tool, "args": args, "error": bool(r.is_error),
                        "chars": len(text), "tokens": tokens(len(text)), "struct_chars": len(struct),
                        "first": text.splitlines()[0] if text else ""})
    return out


def call_text(tool: str, args: dict) -> str:
    """`tool(a=1, b="x")` as the skill writes it."""
    return f"{tool}(" + ", ".join(f"{k}={v!r}" for k, v in args.items()) + ")"


def main() -> int:
    import anyio
    from mcp.client.stdio import StdioServerParameters

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path)
    ap.add_argument("--db", type=Path)
    ap.add_argument("--markdown", action="store_true", help="a markdown table")
    args = ap.parse_args()
    where = ["--db", str(args.db)] if args.db else (["--source", str(args.source)] if args.source else [])
    params = StdioServerParameters(command=sys.executable, args=["-m", "torchtalk", "mcp-serve", *where])
    rows = anyio.run(measure, params)
    if args.markdown:
        print("| call | error | chars | ~tokens | structured chars |\n|---|---|---|---|---|")
    for r in rows:
        call = call_text(r["tool"], r["args"])
        if args.markdown:
            print(f"| `{call}` | {'yes' if r['error'] else ''} | {r['chars']:,} | {r['tokens']:,} "
                  f"| {r['struct_chars']:,} |")
        else:
            print(f"{call:<62} {'ERROR ' if r['error'] else ''}{r['chars']:>7,} chars {r['tokens']:>6,} tok "
                  f"{r['struct_chars']:>8,} struct  | {r['first'][:70]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
