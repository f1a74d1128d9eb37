"""Dump the view_copy kernels torchgen generates for a tree as JSON (run with PYTHONPATH=<tree>).

Usage: python torchgen_viewcopy.py TREE
Prints {"kernels": {view_copy op: [kernel, [op names its body calls through at::_ops]]}}:
what GenCompositeViewCopyKernel writes into CompositeViewCopyKernels.cpp for
each view group (torchgen/gen_functionalization_type.py), the op names read
off the generated C++ (`at::_ops::<name>::call`, and methods such as `.clone(`
or `.reshape_symint(`), as base names ("slice" for at::_ops::slice_Tensor).
"""

import json
import re
import sys
from pathlib import Path

from torchgen.gen import get_grouped_by_view_native_functions, parse_native_yaml
from torchgen.gen_functionalization_type import GenCompositeViewCopyKernel
from torchgen.model import DispatchKey, NativeFunctionsViewGroup

tree = Path(sys.argv[1])
parsed = parse_native_yaml(str(tree / "aten/src/ATen/native/native_functions.yaml"),
                           str(tree / "aten/src/ATen/native/tags.yaml"))
index = parsed.backend_indices[DispatchKey.CompositeExplicitAutogradNonFunctional]
gen = GenCompositeViewCopyKernel(index)
base = {f.func.name.unambiguous_name(): str(f.func.name.name) for f in parsed.native_functions}
out = {}
for g in get_grouped_by_view_native_functions(parsed.native_functions):
    if not isinstance(g, NativeFunctionsViewGroup):
        continue
    code = gen(g)
    if not code:
        continue
    kernel = index.get_kernel(g.view_copy).kernel
    ops = {base[n] for n in re.findall(r"at::_ops::(\w+)::call", code)}
    # methods called with arguments: clone(/*memory_format=*/...), reshape_symint(size);
    # not the accessors size() / sym_numel(), which dispatch nothing
    methods = {m.removesuffix("_symint") for m in re.findall(r"\.(\w+)\((?!\))", code)} & set(base.values())
    calls = sorted(ops | methods)
    out[str(g.view_copy.func.name)] = [kernel, calls]
print(json.dumps({"kernels": out}, sort_keys=True))
