"""Dump torchgen's native C++ parameter types of every dispatch-table kernel of a tree as JSON (run with PYTHONPATH=<tree>).

Usage: python torchgen_native.py TREE
Prints [[func, kernel, [type, ...]]]: for each native_functions.yaml entry and
each kernel name its dispatch table names (the default composite one when it
has none), the C++ type of each parameter of NativeSignature (torchgen/api/native.py),
as torchgen spells it, with the entry's use_const_ref_for_mutable_tensors and
the kernel's symint-ness as torchgen decides them.
"""

import json
import sys
from pathlib import Path

import yaml
from torchgen import local
from torchgen.api import native
from torchgen.model import FunctionSchema

tree = Path(sys.argv[1])
entries = yaml.load((tree / "aten/src/ATen/native/native_functions.yaml").read_text(), Loader=yaml.CSafeLoader)
out = []
for e in entries:
    f = FunctionSchema.parse(e["func"])
    kernels = sorted({str(k) for k in (e.get("dispatch") or {}).values()}) or [""]
    for k in kernels:
        with local.parametrize(use_const_ref_for_mutable_tensors=e.get("use_const_ref_for_mutable_tensors", False),
                               use_ilistref_for_tensor_lists=False):
            types = [a.nctype.type.cpp_type() for a in native.arguments(f, symint="_symint" in k)]
        out.append([e["func"], k, types])
json.dump(out, sys.stdout)
