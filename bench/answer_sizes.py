"""Answer sizes of the TorchTalk skill's workflows, as an agent receives them.

Runs each call of WORKFLOWS (parsed from the skill's "Common Workflows" in
.claude/skills/torchtalk-analyzer/SKILL.md and the /trace command's example in
.claude/commands/trace.md) through the SDK's stdio client on an
indexed tree, and prints per call: error or not, the text's characters,
approximate tokens (characters / 4), the structured output's characters, and
the answer's first line.

    .venv/bin/python bench/answer_sizes.py [--source PATH | --db FILE] [--markdown]

tests/test_sizes.py imports WORKFLOWS and checks each answer's size and first facts.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

# this directory holds mcp.py: keep it off sys.path so `import mcp` finds the SDK
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

ROOT = Path(__file__).resolve().parents[1]
SKILL = ROOT / ".claude/skills/torchtalk-analyzer/SKILL.md"
COMMAND = ROOT / ".claude/commands/trace.md"
# `- **question** `tool(args)`` in SKILL.md's "Common Workflows"
_WORKFLOW = re.compile(r"^- \*\*(?P<question>[^*]+)\*\* `(?P<call>\w+\(.*?\))`", re.M)
# `- `tool(args)`` in the /trace command's example
_EXAMPLE = re.compile(r"^- `(?P<call>\w+\(.*?\))`", re.M)


def parse_call(text: str) -> tuple[str, dict]:
    """`impact("gemm", depth=4)` -> ("impact", {"name": "gemm", "depth": 4}): positional
    arguments named as the tool's parameters (torchtalk/mcp/tools.py)."""
    import ast
    import inspect

    from torchtalk.mcp import tools

    node = ast.parse(text, mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"not a tool call: {text}")
    tool = node.func.id
    if tool not in tools.TOOL_NAMES:
        raise ValueError(f"{tool!r} is no TorchTalk tool: {text}")
    params = [p for p in inspect.signature(getattr(tools, tool)).parameters if p != "ctx"]
    args = dict(zip(params, (ast.literal_eval(a) for a in node.args), strict=False))
    args.update({k.arg: ast.literal_eval(k.value) for k in node.keywords})
    return tool, args


def workflows(skill: Path = SKILL, command: Path = COMMAND) -> tuple[tuple[str, str, dict], ...]:
    """(question, tool, arguments) of each call the skill's "Common Workflows"
    teaches (the first call after each question) and of the /trace command's example."""
    text = skill.read_text()
    section = text.split("## Common Workflows", 1)[1].split("\n## ", 1)[0]
    out = [(m["question"], *parse_call(m["call"])) for m in _WORKFLOW.finditer(section)]
    example = command.read_text().split("Example", 1)[1]
    name = re.search(r"`/trace ([^`]+)`", example).group(1)
    out += [(f"/trace {name}: {m['call']}", *parse_call(m["call"])) for m in _EXAMPLE.finditer(example)]
    return tuple(out)


WORKFLOWS = workflows()


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
