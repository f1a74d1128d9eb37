"""A text argument as the case-insensitive patterns and probes a rule matches with.

Note [Text arguments]: the Datalog subset has `contains` (case as written) and
`match` (a whole-string regex), but no string functors (no `lower`, no `cat`),
and Soufflé's regexes (C++ std::regex, ECMAScript) have no `(?i)` flag. So a
rule cannot fold case itself. For a query `q` that declares the inputs
`q_like(text, exact, prefix, anywhere)` and `q_like_probe(text, role, probe)`,
the query layer gives, for each text argument of `q_arg`, the regexes of
`like` (letters as `[aA]`, regex syntax escaped) and the strings of `probes`;
both engines match them the same way.

Note [Probes]: DuckDB compiles a regex that is not a constant of the SQL once
per row (5-10 us a row: 0.7 s over every name of the tree), while `contains`
with a given string costs 20 ns. So the rules test strings first, and the
regexes only where the strings cannot decide (search(Gemm): 40 ms, not 700):
  "a", "b"  every case variant of two windows of the text; a name holding
            the text, in any case, holds one of each as written, and
            candidates hold both. DuckDB tests every name for each string,
            so there "a" is the first pair of characters with the fewest
            letters (at most 4 strings, a cheap scan) and "b" the last
            three characters (at most 8, tried on what "a" kept). The
            in-memory engine finds a window's names once for every case
            (Note [Text scans] in torchtalk/datalog/engines/memrule.py), so
            there "a" is the three characters fewest names hold, counted in
            a sample of them (`name_sample`), and "b" the rarest three apart
            from them, else a pair.
  "case"    the text as typed, lower-case, upper-case, and with its first
            letter changed: a candidate holding one holds the text (no regex);
            the others (LayerNorm for "layernorm") are matched by `anywhere`.
  "head"    "." or ":" followed by a case variant of the text's first
            characters: a name whose last component starts with the text
            holds one, or has no separator at all (the only names `prefix`
            is tried on). A text with a separator of its own gets the head ""
            (every name).

Example:
    >>> like("Gemm")[0]
    '(.*[.:])?[gG][eE][mM][mM]'
    >>> sorted(p for role, p in probes("a.b") if role == "b")
    ['A.B', 'A.b', 'a.B', 'a.b']
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import product

# the characters a regex gives a meaning to, escaped in both dialects (RE2, ECMAScript)
_SPECIAL = frozenset("\\^$.|?*+()[]{}")
# a name's components are separated by "." (Python, op overloads) or "::" (C++, tests)
_SEPARATORS = ".:"
_LAST = "(.*[.:])?"
_IN_LAST = "[^.:]*"
WINDOW = 3


def _letter(c: str) -> bool:
    return c.isascii() and c.isalpha()


def _pattern(text: str) -> str:
    """`text` as a regex matching it in any case (ASCII letters)."""
    out = []
    for c in text:
        if _letter(c):
            out.append(f"[{c.lower()}{c.upper()}]")
        elif c in _SPECIAL:
            out.append("\\" + c)
        else:
            out.append(c)
    return "".join(out)


def like(text: str) -> tuple[str, str, str]:
    """Whole-string regexes matching, in any case: (exact, prefix, anywhere).

    exact:    the last name component (after the last "." or ":") is `text`
              (the name ends with it after a separator, when `text` has one);
    prefix:   the last component starts with it;
    anywhere: the name holds it.
    """
    p = _pattern(text)
    return f"{_LAST}{p}", f"{_LAST}{p}{_IN_LAST}", f".*{p}.*"


def _ascii(text: str, case) -> str:
    """`text` with its ASCII letters changed by `case` (the regexes fold those only)."""
    return "".join(case(c) if _letter(c) else c for c in text)


def name_sample(con) -> str | None:
    """About one name in SAMPLE of the index (search's entities), each in
    lower case, one per line: how common a window is among names, for
    `probes` (read once per connection); None without them."""
    from torchtalk.connmemo import per_connection
    from torchtalk.datalog.engines.duckdb import db_tables
    from torchtalk.datalog.engines.memrule import FOLD

    def read(c) -> str | None:
        if not db_tables(c, [_NAMES]):
            return None
        rows = c.execute(f"SELECT id FROM {_NAMES} WHERE hash(id) % {SAMPLE} = 0").fetchall()
        return "\n".join(r[0] for r in rows).translate(FOLD)

    return per_connection(con, "name-sample", read)


def rarity_in(sample: str | None) -> Callable[[str], int] | None:
    """`probes`' rarity: how often a window occurs in `sample` (`name_sample`), in any case."""
    from torchtalk.datalog.engines.memrule import FOLD

    return None if not sample else (lambda w: sample.count(w.translate(FOLD)))


_NAMES = 'derived."search_entity"'
SAMPLE = 64


def _letters(window: str) -> int:
    return sum(map(_letter, window))


def _variants(window: str) -> list[str]:
    choices = [(c.lower(), c.upper()) if _letter(c) else (c,) for c in window]
    return sorted({"".join(p) for p in product(*choices)})


def probes(text: str, rarity: Callable[[str], int] | None = None) -> tuple[tuple[str, str], ...]:
    """(role, string) pairs of Note [Probes]; none for an empty text.
    `rarity(window)`: about how many names hold the window in any case
    (`name_sample`), for the in-memory engine's windows; without it,
    DuckDB's."""
    if not text:
        return ()
    n = min(WINDOW, len(text))
    if rarity is None:  # the fewest strings: "a" the first pair with the fewest letters, "b" the last three
        a = min((text[i:i + 2] for i in range(max(1, len(text) - 1))), key=_letters)
        b = text[-n:]
    else:  # the rarest windows: "a" three characters, "b" three more apart, else a pair outside "a"
        def best(windows: list[tuple[int, str]]) -> tuple[int, str]:  # the first of the rarest
            return min(windows, key=lambda w: (rarity(w[1]), _letters(w[1])))

        at, a = best([(i, text[i:i + n]) for i in range(len(text) - n + 1)])
        apart = [(i, text[i:i + n]) for i in range(len(text) - n + 1) if i + n <= at or i >= at + n]
        outside = [(i, text[i:i + 2]) for i in range(len(text) - 1) if not at <= i <= at + n - 2]
        b = best(apart or outside or [(0, text[:2])])[1]
    out = [("a", v) for v in _variants(a)] + [("b", v) for v in _variants(b)]
    lower, upper = _ascii(text, str.lower), _ascii(text, str.upper)
    cases = {text, lower, upper, upper[:1] + text[1:], lower[:1] + text[1:]}
    out += [("case", c) for c in sorted(cases)]
    if any(c in _SEPARATORS for c in text):
        out.append(("head", ""))
    else:
        out += [("head", sep + v) for sep in _SEPARATORS for v in _variants(text[:n])]
    return tuple(out)
