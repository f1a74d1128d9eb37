"""Dump torchgen's view of native_functions.yaml as JSON (run with PYTHONPATH=<tree>).

Usage: python torchgen_dump.py NATIVE_YAML TAGS_YAML [--gen]
Prints {"ops": {op: {"line": N, "dispatch": {key: kernel}}}}; with --gen, the
ops torchgen adds itself (autogen) are included and listed in "generated".
"""

import json
import sys

from torchgen.gen import parse_native_yaml

native, tags = sys.argv[1], sys.argv[2]
gen = "--gen" in sys.argv
parsed = parse_native_yaml(native, tags, skip_native_fns_gen=not gen)
ops = {}
for f in parsed.native_functions:
    ops[str(f.func.name)] = {"line": f.loc.line, "dispatch": {}}
for key, index in parsed.backend_indices.items():
    for name, meta in index.index.items():
        kernel = meta.kernel if meta.cpp_namespace == "at::native" else f"{meta.cpp_namespace}::{meta.kernel}"
        ops[str(name)]["dispatch"][str(key)] = kernel
print(json.dumps({"ops": ops}, sort_keys=True))
