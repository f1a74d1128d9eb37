"""What a backend package's readers share (Python: backend_pkg.py, C++:
backend_cpp.py): an op reference at file:line, and how an op string is read."""

from __future__ import annotations

from dataclasses import dataclass

from torchtalk.errors import SrcLoc

PACKET = "*"  # the overload of a ref naming every overload of an op


@dataclass(frozen=True, order=True)
class BackendRef:
    """One ATen op named by the package's op table, at file:line (relative to the package dir)."""

    name: str
    overload: str  # "" = default overload, PACKET = every overload
    file: str
    line: int
    key: str = ""  # the dispatch key an m.impl / torch.library impl registers it for ("" = a keyless op table)

    @property
    def loc(self) -> SrcLoc:
        return SrcLoc(self.file, self.line)

    @property
    def spelled(self) -> str:
        """The op as `aten.<name>[.<overload>]` (".default" for the empty overload)."""
        if self.overload == PACKET:
            return f"aten.{self.name}"
        return f"aten.{self.name}.{self.overload or 'default'}"


def parse_op_string(text: str, ns_default: str | None = None) -> tuple[str, str] | None:
    """`"aten::add.Tensor"` → ("add", "Tensor"); `"aten::relu"` → ("relu", "").

    `ns_default` is the namespace of a bare `"add.Tensor"` (a Library's ns).

    Example:
        >>> parse_op_string("aten::add.Tensor")
        ('add', 'Tensor')
    """
    if "::" in text:
        ns, _, rest = text.partition("::")
    else:
        ns, rest = ns_default or "", text
    if ns != "aten" or not rest or not rest.replace(".", "").replace("_", "").isalnum():
        return None
    name, _, overload = rest.partition(".")
    if not name or "." in overload:
        return None
    return name, ("" if overload == "default" else overload)
