"""The tree-sitter C++ grammar's field ids the scanner reads, looked up once.

Note [Field ids]: `node.child_by_field_name("type")` looks the name up among
the grammar's field names on every call; `node.child_by_field_id(F_TYPE)`
does not (about a third less per call, and the scan makes some 4.7 million
of them over the PyTorch tree). Both give the same child.

Example:
    >>> LANG.field_name_for_id(F_DECLARATOR)
    'declarator'
"""

from __future__ import annotations

import tree_sitter as ts
import tree_sitter_cpp as tsc

LANG = ts.Language(tsc.language())


def _field(name: str) -> int:
    fid = LANG.field_id_for_name(name)
    if fid is None:
        raise ValueError(f"the C++ grammar has no field {name!r}")
    return fid


F_ALTERNATIVE = _field("alternative")
F_ARGUMENT = _field("argument")
F_ARGUMENTS = _field("arguments")
F_BODY = _field("body")
F_CONSEQUENCE = _field("consequence")
F_DECLARATOR = _field("declarator")
F_DEFAULT_VALUE = _field("default_value")
F_FIELD = _field("field")
F_FUNCTION = _field("function")
F_INDICES = _field("indices")
F_LEFT = _field("left")
F_NAME = _field("name")
F_OPERATOR = _field("operator")
F_PARAMETERS = _field("parameters")
F_RIGHT = _field("right")
F_TYPE = _field("type")
F_VALUE = _field("value")
