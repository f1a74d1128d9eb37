"""Note [Literal-first patterns]: the scanner's whole-file regexes are written
to start with a literal, for speed; each must find what the plain pattern it
stands for finds, at the same offsets, with the same groups.

The strings are drawn (with a fixed seed) from the tokens the patterns are
about, so that near misses (a `#` inside a line, a name inside a longer one,
a macro's arguments over lines) come up often.
"""

from __future__ import annotations

import random
import re

from extractors.cpp import macros, preprocess, scan


def _strings(tokens: list[str], n: int = 20000, most: int = 24, seed: int = 0) -> list[str]:
    rnd = random.Random(seed)
    return ["".join(rnd.choice(tokens) for _ in range(rnd.randint(0, most))) for _ in range(n)]


_DIRECTIVE_TOKENS = ["#", "define", "undef", "include", "if", "ifdef", "else", "endif", " ", "\t", "\n",
                     "\\\n", "(", ")", "x", "y,z", "<a>", '"', "//"]


def test_directive_patterns_find_what_the_line_anchored_ones_do():
    patterns = [preprocess._EMPTY_IF_RE, preprocess._DIRECTIVE_RE, macros._DEFINE_RE, macros._DEFINE_SPAN_RE,
                macros._UNDEF_RE, scan._INCLUDE_RE, scan._DIRECTIVE_LINES]
    found = 0
    for text in _strings(_DIRECTIVE_TOKENS):
        src = text.encode()
        for pat in patterns:
            plain = re.compile(rb"^[ \t]*" + pat.pattern, re.M)
            want = [(m.start(), m.end(), m.groups()) for m in plain.finditer(src)]
            assert [(start, m.end(), m.groups()) for start, m in preprocess.directives(pat, src)] == want
            assert preprocess.blank_directives(pat, src) == plain.sub(lambda m: re.sub(rb"[^\n]", b" ", m.group(0)),
                                                                      src)
            found += len(want)
    assert found > 1000  # the strings do hold directives


def test_blanked_macros_are_those_of_the_plain_pattern():
    plain = re.compile(preprocess.BLANK_PATTERN)
    tokens = ["TORCH_API", "C10_API", "_API", "XTORCH_API", "C10_HOST_DEVICE", "C10_DEVICE", "__global__", "__restrict__",
              "__restrict", "C10_LAUNCH_BOUNDS_1", "C10_LAUNCH_BOUNDS_", "__launch_bounds__", "alignas", "xalignas",
              "__ubsan_ignore_undefined__", "END_HANDLE_TH_ERRORS", "END_HANDLE_TH_ERRORS_RET", "HANDLE_TH_ERRORS",
              "(", ")", "(a, (b))", " ", "\n", "x", "_", "a", "<<<", ">>>", "<T>", "1, 2", ";", "GPU_LAMBDA"]
    found = 0
    for text in _strings(tokens, most=12):
        src = text.encode()
        want = [(m.start(), m.end()) for m in plain.finditer(src)]
        assert [(m.start(), m.end()) for m in preprocess._BLANK_RE.finditer(src)] == want, src
        assert [(m.start(), m.end()) for m in preprocess.blank_matches(src)] == want, src  # Note [Blank anchors]
        found += len(want)
    assert found > 1000


def test_namespace_patterns_find_what_the_plain_ones_do():
    ns = re.compile(rb"\b(inline\s+)?namespace\s+([\w:]*)\s*\{|[{}]")
    inline = re.compile(r"\binline\s+namespace\s+(\w+)")
    tokens = ["inline", "namespace", " ", "\n", "{", "}", "x", "::", "_", "\x1c", "\xa0", "é", "a", "ninline"]
    for text in _strings(tokens, most=16):
        src = text.encode()
        want = [(m.start(), m.end(), m.group(2)) for m in ns.finditer(src)]
        assert [(m.start(), m.end(), m.group(1) if m.group(1) is not None else m.group(2))
                for m in scan._NS_RE.finditer(src)] == want
        assert scan._INLINE_NS_RE.findall(text) == inline.findall(text)
