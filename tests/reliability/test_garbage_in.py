"""Bad input at scale (issue 18, deliverable 3): hypothesis-generated garbage
through the query DSL, the `.dl` parser and the MCP tools' arguments is
always a one-line TorchTalkError (or a clean MCP tool error), never another
exception or a hang. Examples are few enough for CI (a few seconds each).
"""

from __future__ import annotations

import time

import anyio
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from torchtalk.errors import TorchTalkError

FAST = settings(max_examples=150, deadline=2000, suppress_health_check=[HealthCheck.too_slow],
                derandomize=True)
SLOW = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                HealthCheck.function_scoped_fixture], derandomize=True)


def pieces(*vocab: str) -> st.SearchStrategy[str]:
    """Text made of the grammar's own tokens, names and garbage, glued with or without spaces."""
    token = st.one_of(st.sampled_from(vocab), st.from_regex(r"[A-Za-z_][A-Za-z0-9_:.]{0,12}", fullmatch=True),
                      st.integers(-10**12, 10**12).map(str), st.text(max_size=6))
    return st.lists(st.tuples(token, st.sampled_from(["", " ", "\n", "\t"])), max_size=20).map(
        lambda parts: "".join(t + sep for t, sep in parts))


def one_line(err: TorchTalkError) -> None:
    assert isinstance(err, TorchTalkError)
    assert err.headline() and "\n" not in err.headline(), repr(err.headline())


DSL_TOKENS = ("trace", "impact", "paths", "search", "callers", "kernels", "(", ")", ",", "=", "->", '"', "'",
              ";", "depth", "key", "::", "(anonymous)", "operator()", "<", ">", "*", "&", "~", "\\", "\x00")


@FAST
@given(st.one_of(st.text(max_size=80), pieces(*DSL_TOKENS)))
def test_the_query_parser_answers_or_raises_one_line(text):
    from torchtalk.query.dsl import parse_query

    try:
        parse_query(text)
    except TorchTalkError as err:
        one_line(err)


DL_TOKENS = (".decl", ".input", ".output", ".type", ".functor", "#include", "#define", "(", ")", ":-", ",",
             ".", "!", ";", ":", "number", "symbol", "float", "unsigned", '"', "_", "$", "=", "!=", "<",
             "count", "sum", "min", ":", "{", "}", "/*", "*/", "//", "as(", "\\", "\x00", "@", "x", "y")


@FAST
@given(st.one_of(st.text(max_size=120), pieces(*DL_TOKENS)))
@example("")
@example("  // nothing but a comment\n")
def test_the_dl_parser_answers_or_raises_one_line(tmp_path_factory, text):
    from torchtalk.datalog.parser import parse_text

    try:
        parse_text(text, "garbage.dl", base=tmp_path_factory.getbasetemp())
    except TorchTalkError as err:
        one_line(err)


@FAST
@given(st.binary(max_size=200), st.sampled_from(["inc.dl", "sub", "missing.dl"]))
@example(b"", "inc.dl")
@example(b"\x80", "inc.dl")
def test_a_dl_include_of_garbage_bytes_is_one_line(tmp_path_factory, data, name):
    """`#include` of a file of any bytes, of a directory, of nothing."""
    from torchtalk.datalog.parser import parse_text

    base = tmp_path_factory.mktemp("inc")
    (base / "inc.dl").write_bytes(data)
    (base / "sub").mkdir()
    try:
        parse_text(f'#include "{name}"\n', "main.dl", base=base)
    except TorchTalkError as err:
        one_line(err)


def test_an_empty_program_is_empty_not_the_file_of_its_name(tmp_path, monkeypatch):
    """textX reads `file_name` from disk when given an empty string."""
    from torchtalk.datalog.parser import parse_text

    monkeypatch.chdir(tmp_path)
    (tmp_path / "rules.dl").write_text(".decl p(x: number)\np(1).\n")
    assert parse_text("", "rules.dl").rules == parse_text("\n", "other.dl").rules == ()
    assert not parse_text("/* only a comment */", "rules.dl").decls


# --- the MCP tools, in process, on the real tree's DB ----------------------

TEXT = st.one_of(st.text(max_size=40), pieces(*DSL_TOKENS),
                 st.from_regex(r"(at::native::|torch\.|aten::)?[a-z_]{1,12}[.:]?[a-zA-Z_]{0,8}", fullmatch=True))
GARBAGE = st.one_of(st.text(max_size=40), pieces(*DSL_TOKENS), st.integers(), st.none(), st.booleans(),
                    st.floats(allow_nan=True), st.lists(st.text(max_size=10), max_size=3),
                    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2))
# the tools with the arguments they take (torchtalk/mcp/tools.py); `coverage`
# (a whole report) and `affected` of many names are slow by design: few examples
ARGS = {
    "trace": ("name", "focus"), "search": ("query", "backend"), "impact": ("name", "depth"),
    "calls": ("name",), "called_by": ("name",), "cuda_kernels": ("name",), "trace_module": ("name",),
    "list_modules": ("category",), "find_similar_tests": ("query",), "list_test_utils": ("category",),
    "test_file_info": ("path",), "query": ("dsl",),
}


@pytest.fixture(scope="module")
def portal_client(real_db):
    """An in-process MCP session on the real DB, driven from the test thread."""
    from mcp import Client

    from torchtalk.mcp.serve import build_server

    with anyio.from_thread.start_blocking_portal() as portal:
        with portal.wrap_async_context_manager(Client(build_server(None, real_db))) as client:
            yield portal, client


@SLOW
@given(st.sampled_from(sorted(ARGS)), st.data())
def test_garbage_tool_arguments_are_answered_or_one_clean_error(portal_client, tool, data):
    portal, client = portal_client
    first, *more = ARGS[tool]
    # mostly text where text is asked for (it reaches the tool), else anything at all
    args = {first: data.draw(st.one_of(TEXT, TEXT, TEXT, GARBAGE), label=first)}
    for k in data.draw(st.lists(st.sampled_from([*more, "bogus"]), unique=True, max_size=2), label="more"):
        args[k] = data.draw(GARBAGE, label=k)
    t0 = time.monotonic()

    async def call():
        with anyio.fail_after(20):  # a hang is a failure, not a wait
            return await client.call_tool(tool, args)

    result = portal.call(call)
    assert time.monotonic() - t0 < 20
    if result.is_error:
        text = result.content[0].text
        assert "internal error" not in text and "Traceback" not in text, text
        assert "pydantic" not in text and "errors.pydantic.dev" not in text, text
