"""Dump what torchgen generates for the ufuncs of a tree as JSON (run with PYTHONPATH=<tree>).

Usage: python torchgen_ufunc.py TREE
Prints {"dtype_classes": {class: [dtype]}, "ufuncs": {op: {"loops": {key: [name, [dtype]]},
"registrations": [[key, stub, fn, file]]}}}: for each structured group whose out=
op has `ufunc_inner_loop:`, the REGISTER_DISPATCH lines of the code torchgen
generates (CPU: compute_ufunc_cpu_kernel, CUDA: compute_ufunc_cuda), the kernel
qualified as at::native::[(anonymous:FILE)::]NAME, and the generated file FILE holding it
(from torchgen's own --output-dependencies lists).
"""

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import torchgen.dest as dest
from torchgen.gen import get_grouped_native_functions, parse_native_yaml
from torchgen.model import DTYPE_CLASSES, NativeFunctionsGroup

tree = Path(sys.argv[1])
native = tree / "aten/src/ATen/native/native_functions.yaml"
parsed = parse_native_yaml(str(native), str(tree / "aten/src/ATen/native/tags.yaml"))
groups = [g for g in get_grouped_native_functions(parsed.native_functions)
          if isinstance(g, NativeFunctionsGroup) and g.out.ufunc_inner_loop]

with tempfile.TemporaryDirectory() as out:
    subprocess.run(
        [sys.executable, "-m", "torchgen.gen", "--source-path", str(tree / "aten/src/ATen"),
         "--install_dir", out, "--dry-run", "--generate", "sources",
         "--output-dependencies", f"{out}/deps.txt"],
        check=True, capture_output=True)
    files = {k: re.findall(r"/(Ufunc\w+\.\w+)", (Path(out) / name).read_text())
             for k, name in (("CPU", "cpu_vec_deps.txt"), ("CUDA", "cuda_deps.txt"))}


def registrations(g: NativeFunctionsGroup, key: str, code: str) -> list:
    rows, anonymous, ns = [], False, {}
    for line in code.splitlines():
        anonymous = (anonymous or line.strip() == "namespace {") and "anonymous namespace" not in line
        m = re.match(r"void (\w+)\(TensorIteratorBase& iter", line)
        if m:
            ns[m.group(1)] = anonymous
        m = re.match(r"REGISTER_DISPATCH\((\w+), &(\w+)\)", line)
        if m:
            stub, fn = m.groups()
            name = str(g.functional.func.name.name)
            (gen_file,) = [f for f in files[key] if f.endswith(f"_{name}.cpp") or f.endswith(f"_{name}.cu")]
            qual = f"at::native::(anonymous:{gen_file})::{fn}" if ns[fn] else f"at::native::{fn}"
            rows.append([key, f"at::native::{stub}", qual, gen_file])
    return rows


ufuncs = {}
for g in groups:
    loops = {str(k): [v.name, [str(d) for d in v.supported_dtypes]] for k, v in g.out.ufunc_inner_loop.items()}
    regs = (registrations(g, "CPU", dest.compute_ufunc_cpu_kernel(g))
            + registrations(g, "CUDA", dest.compute_ufunc_cuda(g)))
    ufuncs[str(g.out.func.name)] = {"loops": loops, "registrations": regs}
classes = {k: [str(d) for d in v] for k, v in DTYPE_CLASSES.items()}
print(json.dumps({"dtype_classes": classes, "ufuncs": ufuncs}, sort_keys=True))
