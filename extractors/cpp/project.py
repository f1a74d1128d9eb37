"""A tree's `.torchtalk.toml`: macros a project defines for itself (Note [Project macros]).

Note [Project macros]: an extension may wrap PyTorch's registration macros
in its own (vLLM: `#define TORCH_LIBRARY_EXPAND(NAME, MODULE)
TORCH_LIBRARY(NAME, MODULE)`) and name its library with a build-time macro
(`TORCH_EXTENSION_NAME`). The fast tier does not expand macros, so the
project says what they mean, in `.torchtalk.toml` at the tree's root:

    [cpp.macros]
    TORCH_LIBRARY_EXPAND = "TORCH_LIBRARY"
    TORCH_LIBRARY_IMPL_EXPAND = "TORCH_LIBRARY_IMPL"
    TORCH_EXTENSION_NAME = "_C"

Each identifier is replaced, as a whole word, by its text (one line, so
every line keeps its number) before a C++ file is scanned, and the
replacements are part of each file's cache digest. Nothing about any one
project is written in the extractors.

Example:
    >>> apply_macros(b"TORCH_LIBRARY_EXPAND(NAME, m) {", {"TORCH_LIBRARY_EXPAND": "TORCH_LIBRARY"})
    b'TORCH_LIBRARY(NAME, m) {'
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from pathlib import Path

FILE = ".torchtalk.toml"
_IDENT = re.compile(r"[A-Za-z_]\w*")


def load_macros(root: Path) -> tuple[dict[str, str], list[tuple[str, int, str]]]:
    """({identifier: replacement} of `root`'s `.torchtalk.toml` [cpp.macros],
    warnings (file, line, message) for what it cannot use)."""
    path = root / FILE
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return {}, []
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line = int(m.group(1)) if (m := re.search(r"line (\d+)", str(exc))) else 1
        return {}, [(FILE, line, f"not valid TOML: {exc}")]
    table = doc.get("cpp", {}).get("macros", {}) if isinstance(doc.get("cpp", {}), dict) else {}
    macros, warnings = {}, []
    for name, value in (table.items() if isinstance(table, dict) else ()):
        if not _IDENT.fullmatch(name) or not isinstance(value, str) or "\n" in value:
            warnings.append((FILE, _line_of(text, name), f"[cpp.macros] {name}: want an identifier = \"one line\""))
            continue
        macros[name] = value
    return macros, warnings


def _line_of(text: str, name: str) -> int:
    for i, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith(name):
            return i
    return 1


def apply_macros(data: bytes, macros: dict[str, str]) -> bytes:
    """`data` with each macro identifier replaced by its text (whole words)."""
    if not macros:
        return data
    pattern = re.compile(rb"\b(" + b"|".join(re.escape(k.encode()) for k in sorted(macros, key=len, reverse=True))
                         + rb")\b")
    return pattern.sub(lambda m: macros[m.group(1).decode()].encode(), data)


def macros_digest(digest: str, macros: dict[str, str]) -> str:
    """A file's cache digest with the project's macros mixed in (itself without any)."""
    if not macros:
        return digest
    h = hashlib.sha1(digest.encode())
    for k in sorted(macros):
        h.update(f"\0{k}={macros[k]}".encode())
    return h.hexdigest()
