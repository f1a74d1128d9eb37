"""What a C++ Index holds, to compare two (Note [Index patched] in extractors/cpp/resolve.py)."""

from __future__ import annotations

# memos a lookup fills as it goes, and the LookupKey (a function of the inline namespaces)
_MEMOS = frozenset({"key", "_closure", "_targets"})


def contents(ix) -> dict:
    """`ix`'s tables as plain values, an empty entry (a lookup of a missing
    key in a defaultdict) left out: what resolving reads of it."""
    return {name: _plain(value) for name, value in vars(ix).items() if name not in _MEMOS}


def _plain(value):
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if not (isinstance(v, (set, frozenset, dict)) and not v)}
    if hasattr(value, "__dict__") and not isinstance(value, type):  # the Aliases
        return {name: _plain(v) for name, v in vars(value).items()}
    return value
