"""Compiler flags for each translation unit: the tree's compile_commands.json
when it has one, otherwise flags synthesized without a build.

Note [Synthesized flags]: a PyTorch tree that was never built lacks the
headers its build generates. We make them under the layer's cache dir, never
in the tree: `ATen/ops/*.h`, `ATen/core/TensorBody.h`, ... by the tree's own
torchgen (`python -m torchgen.gen ... --per-operator-headers --generate
headers`, run with the tree on PYTHONPATH and as cwd so its torchgen, not an
installed one, is used), and the configured headers (`c10/macros/
cmake_macros.h`, `ATen/Config.h`, ...) from their `.h.in` templates, set as a
CPU-only build with BLAS/LAPACK and native parallelism. The directory is keyed
by a hash of everything that shapes it, so an edited native_functions.yaml
regenerates it. Per-arch kernels (`native/cpu/*.cpp`) are parsed as their
DEFAULT capability.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from torchtalk.errors import ExtractError, SrcLoc

CPU_CAPABILITY = "DEFAULT"

# The configured headers: template (relative to the tree) -> output (relative
# to the generated include dir).
TEMPLATES = {
    "c10/macros/cmake_macros.h.in": "c10/macros/cmake_macros.h",
    "aten/src/ATen/Config.h.in": "ATen/Config.h",
    "aten/src/ATen/cuda/CUDAConfig.h.in": "ATen/cuda/CUDAConfig.h",
    "c10/cuda/impl/cuda_cmake_macros.h.in": "c10/cuda/impl/cuda_cmake_macros.h",
    "c10/xpu/impl/xpu_cmake_macros.h.in": "c10/xpu/impl/xpu_cmake_macros.h",
    # TORCH_VERSION_MAJOR/MINOR/PATCH from the tree's version.txt (tree_version)
    "torch/csrc/api/include/torch/version.h.in": "torch/version.h",
}
VERSION_FILE = "version.txt"
# Note [Build configuration]: a `#if AT_X_ENABLED()` branch the compiler tier
# does not take has no edges (the fast tier reads both), so the configured
# headers follow the build the answers are about: torch 2.6.0's Linux x86-64
# wheel, whose torch.__config__.show() says USE_MKL=ON (oneAPI MKL 2024.2),
# USE_MKLDNN=ON, USE_NNPACK=ON, LAPACK from MKL. Of these the tier turns on
# what it has headers for: MKL (`torchtalk fetch mkl`). MKLDNN's ideep and
# NNPACK are submodules the source package lacks, so they stay off, and with
# MKL on, pocketfft is off as in the wheel. Measured by bench/runtime_oracle.py
# on a compiler-tier DB: with MKL off, the runtime's `_fft_c2c -> permute`
# (mkl/SpectralOps.cpp:452, under `#elif AT_MKL_ENABLED()`) had no path.
# These @VARS@ are 1, every other one is 0; these #cmakedefines are set.
CONFIG_ON = frozenset({"AT_BUILD_WITH_BLAS", "AT_BUILD_WITH_LAPACK", "AT_PARALLEL_NATIVE", "AT_MKL_ENABLED"})
CMAKEDEFINE_ON = frozenset({"C10_BUILD_SHARED_LIBS"})

DEFINES = (
    "-DAT_PER_OPERATOR_HEADERS",
    f"-DCPU_CAPABILITY={CPU_CAPABILITY}",
    f"-DCPU_CAPABILITY_{CPU_CAPABILITY}",
)
INCLUDE_DIRS = (
    "aten/src", ".", "torch/csrc/api/include", "third_party",
    # QNNPACK's own headers, as its CMake target exports them to the quantized kernels
    "aten/src/ATen/native/quantized/cpu/qnnpack/include",
    "aten/src/ATen/native/quantized/cpu/qnnpack/src",
    # the XPU oneDNN kernels', as aten/src/ATen/CMakeLists.txt adds them to ATen_XPU_INCLUDE
    "aten/src/ATen/native/mkldnn/xpu", "aten/src/ATen/native/mkldnn/xpu/detail",
    # libshm.h (torch/csrc/Module.cpp), as torch/CMakeLists.txt adds it to TORCH_PYTHON_INCLUDE_DIRECTORIES
    "torch/lib/libshm",
    # miniz.h (inductor/aoti_package), vendored in the tree; caffe2/CMakeLists.txt adds it to torch_cpu's
    "third_party/miniz-3.0.2",
)

# How torchgen is run (part of the generated dir's key); the optional flags
# only when the tree's torchgen/gen.py knows them (older trees lack some).
TORCHGEN_ARGS = ("--per-operator-headers", "--generate", "headers", "sources")
TORCHGEN_OPTIONAL = ("--mps", "--xpu")

# torch/csrc's code generator, and how the build runs it.
AUTOGRAD_SCRIPT = "tools/setup_helpers/generate_code.py"
AUTOGRAD_ARGS = ("--native-functions-path", "aten/src/ATen/native/native_functions.yaml",
                 "--tags-path", "aten/src/ATen/native/tags.yaml", "--gen-lazy-ts-backend", "--per-operator-headers")

# Where a tree keeps its compilation database, if it was built.
COMPILE_DB_PLACES = ("compile_commands.json", "build/compile_commands.json")
# Options of a recorded command that make no sense for a syntax-only parse.
_DROP_WITH_ARG = frozenset({"-o", "-MF", "-MT", "-MQ"})
_DROP = frozenset({"-c", "-MD", "-MMD", "-M", "-MM", "-MP"})


@dataclass(frozen=True)
class Command:
    """How to parse one TU: libclang arguments and the directory to parse in."""

    args: tuple[str, ...]
    directory: str

    def key(self) -> str:
        """A hash of the flags (part of the cache key)."""
        return _digest(json.dumps([self.args, self.directory]).encode())


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def libclang_major() -> int:
    """The major version of the loaded libclang (18 for the pip wheel 18.1.1)."""
    from clang import cindex as ci

    fn = ci.conf.lib.clang_getClangVersion
    fn.argtypes, fn.restype = [], ci._CXString
    text = ci.conf.lib.clang_getCString(fn())
    text = text.decode() if isinstance(text, bytes) else str(text)
    m = re.search(r"version (\d+)", text)
    return int(m.group(1)) if m else 0


def find_resource_dir() -> str:
    """A clang resource directory with the builtin headers (stddef.h, the
    x86 intrinsics): the one of libclang's own version if installed, else the
    newest older one (an older clang's intrinsic headers name builtins that
    newer clangs removed, so the closest version wins).

    Example:
        >>> find_resource_dir()
        '/usr/lib/llvm-16/lib/clang/16'
    """
    found: dict[int, str] = {}
    for stddef in Path("/usr/lib").glob("llvm-*/lib/clang/*/include/stddef.h"):
        m = re.match(r"(\d+)", stddef.parents[1].name)
        if m:
            found[int(m.group(1))] = str(stddef.parents[1])
    if not found:
        raise ExtractError(
            "no clang resource directory with builtin headers (stddef.h) under /usr/lib/llvm-*",
            hint="install Debian's libclang-common-16-dev (scripts/setup does)",
        )
    want = libclang_major()
    older = [v for v in found if v <= want]
    return found[max(older) if older else min(found)]


def load_compile_db(root: Path) -> dict[str, Command] | None:
    """{absolute source path: Command} from the tree's compile_commands.json, or None."""
    for place in COMPILE_DB_PLACES:
        path = root / place
        if path.is_file():
            return _read_compile_db(path)
    return None


def _read_compile_db(path: Path) -> dict[str, Command]:
    try:
        entries = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ExtractError(f"cannot read compilation database: {exc}", SrcLoc(str(path), 1)) from None
    out: dict[str, Command] = {}
    for entry in entries:
        directory = entry.get("directory", str(path.parent))
        argv = entry.get("arguments") or shlex.split(entry.get("command", ""))
        if argv and Path(argv[0]).name.startswith("nvcc"):
            continue  # nvcc's options are not clang's: such a .cu gets synthesized flags
        src = str(Path(directory, entry["file"]).resolve())
        out[src] = Command(tuple(_clean(argv[1:], entry["file"])), directory)
    return out


def _clean(argv: list[str], src: str) -> list[str]:
    """Drop the output, dependency-file and compile-only options and the source."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in _DROP_WITH_ARG:
            skip = True
        elif arg in _DROP or arg == src or arg.startswith("-o"):
            continue
        else:
            out.append(arg)
    return out


def synthesized(root: Path, gen_dir: Path, resource_dir: str, sdk_dirs: Sequence[Path] = ()) -> Command:
    """Flags for a never-built tree (Note [Synthesized flags]), with the
    fetched SDKs' include dirs `sdk_dirs` as system dirs.

    Example:
        >>> synthesized(tree, gen, "/usr/lib/llvm-16/lib/clang/16").args[:3]
        ('-x', 'c++', '-std=c++17')
    """
    incs = [f"-I{gen_dir}"] + [f"-I{root / d}" for d in INCLUDE_DIRS if (root / d).is_dir()]
    incs += [arg for d in sdk_dirs for arg in ("-isystem", str(d))]
    args = ["-x", "c++", "-std=c++17", "-resource-dir", resource_dir, *incs, *DEFINES,
            "-fsyntax-only", "-Wno-everything", "-ferror-limit=0"]
    return Command(tuple(args), str(root))


# ----------------------------------------------------------------- CUDA host code

# Note [CUDA host parse]: a `.cu` TU is parsed as CUDA host code: `-x cuda
# --cuda-host-only` with the fetched CUDA headers as the install
# (`--cuda-path`, sdk.cuda_path) and no libdevice (`-nocudalib`). Clang then
# force-includes its own __clang_cuda_runtime_wrapper.h (from the resource
# dir), which defines __global__, threadIdx, <<<>>>'s configuration call, and
# includes cuda_runtime.h, as nvcc does. Kernels' and __device__ functions'
# bodies are parsed too (clang checks both sides), with __CUDA_ARCH__ unset.
# One fix-up, CUDA_PRELUDE, is force-included after the wrapper: CUDA's
# crt/host_defines.h defines `__noinline__` as `__attribute__((noinline))`,
# which breaks libstdc++ 12's `__attribute__((__noinline__))`
# (bits/shared_ptr_base.h:196, "use of undeclared identifier 'noinline'");
# clang knows `__noinline__` as a CUDA keyword, so the macro is undefined.
CUDA_PRELUDE = "#undef __noinline__\n"


def cuda_host(command: Command, cuda_path: Path, prelude_dir: Path) -> Command:
    """`command` (synthesized C++ flags) turned into flags for a `.cu` TU
    (Note [CUDA host parse]); the prelude is written into `prelude_dir`.

    Example:
        >>> cuda_host(cmd, Path("/root/.cache/torchtalk/sdk/cuda"), cache).args[:2]
        ('-x', 'cuda')
    """
    prelude = prelude_dir / "cuda_host_prelude.h"
    if not prelude.is_file() or prelude.read_text() != CUDA_PRELUDE:
        prelude_dir.mkdir(parents=True, exist_ok=True)
        prelude.write_text(CUDA_PRELUDE)
    args = list(command.args)
    if args[:2] == ["-x", "c++"]:
        args = args[2:]
    args = ["-x", "cuda", "--cuda-host-only", f"--cuda-path={cuda_path}", "-nocudalib",
            *args, "-include", str(prelude)]
    return Command(tuple(args), command.directory)


# ----------------------------------------------------------------- generated headers


def _inputs_digest(root: Path) -> str:
    h = hashlib.blake2b(digest_size=16)
    h.update(json.dumps([TORCHGEN_ARGS, TORCHGEN_OPTIONAL, sorted(CONFIG_ON), sorted(CMAKEDEFINE_ON),
                         AUTOGRAD_ARGS]).encode())
    paths = [root / "aten/src/ATen/native/native_functions.yaml", root / "aten/src/ATen/native/tags.yaml",
             root / "aten/src/ATen/native/ts_native_functions.yaml", root / AUTOGRAD_SCRIPT]
    paths += [root / t for t in TEMPLATES] + [root / VERSION_FILE]
    paths += sorted((root / "aten/src/ATen/templates").glob("*"))
    paths += sorted((root / "torchgen").rglob("*.py"))
    paths += sorted(p for p in (root / "tools/autograd").rglob("*") if p.is_file())
    for p in paths:
        if p.is_file():
            h.update(p.relative_to(root).as_posix().encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def generated_dir(root: Path, cache_dir: Path, log=lambda msg: None) -> Path:
    """The generated include dir for `root`, made once (~10 s) and reused
    while its inputs are unchanged. Never writes into the tree."""
    base = cache_dir / "gen"
    final = base / _inputs_digest(root)
    if (final / "ATen/core/TensorBody.h").is_file():
        return final
    base.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=base))
    try:
        log("generating ATen headers with the tree's torchgen")
        _run_torchgen(root, tmp)
        _run_autograd_codegen(root, tmp, log)
        values = tree_version(root)
        for template, out in TEMPLATES.items():
            if (root / template).is_file():
                dest = tmp / out
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_text(configure((root / template).read_text(), values))
        os.replace(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for old in base.iterdir():
        if old != final and not old.name.startswith(".tmp-"):
            shutil.rmtree(old, ignore_errors=True)
    return final


def _run_torchgen(root: Path, out: Path) -> None:
    if not (root / "torchgen/gen.py").is_file():
        raise ExtractError(f"{root} has no torchgen/gen.py: cannot generate the ATen headers",
                           hint="give a PyTorch source tree, or one with compile_commands.json")
    known = (root / "torchgen/gen.py").read_text()
    cmd = [sys.executable, "-m", "torchgen.gen", "--source-path", "aten/src/ATen",
           "--install_dir", str(out / "ATen"), *TORCHGEN_ARGS,
           *(flag for flag in TORCHGEN_OPTIONAL if f'"{flag}"' in known)]
    if '"--aoti-install-dir"' in known:  # by default torchgen writes the AOTI shims into the tree
        cmd += ["--aoti-install-dir", str(out / ".aoti")]
    env = dict(os.environ, PYTHONPATH=str(root), PYTHONDONTWRITEBYTECODE="1")  # no .pyc in the tree
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise ExtractError(f"torchgen failed (exit {proc.returncode}): {last}",
                           SrcLoc("torchgen/gen.py", 1))
    shutil.rmtree(out / ".aoti", ignore_errors=True)
    for path in (out / "ATen").rglob("*"):
        if path.is_file() and path.suffix not in (".h", ".hpp"):
            path.unlink()  # generated sources: only their headers are included


def _run_autograd_codegen(root: Path, out: Path, log) -> None:
    """torch/csrc's generated headers (autograd/generated/variable_factories.h,
    VariableType.h, python_functions.h, ...; lazy/generated/LazyIr.h, ...)
    by the tree's tools/setup_helpers/generate_code.py, as the build runs it
    (~5 s). A tree without it, or a failure, leaves them out: the torch/csrc
    TUs that include them then report the missing header."""
    if not (root / AUTOGRAD_SCRIPT).is_file():
        return
    cmd = [sys.executable, AUTOGRAD_SCRIPT, "--install_dir", str(out / "torch/csrc"), *AUTOGRAD_ARGS]
    env = dict(os.environ, PYTHONPATH=str(root), PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        log(f"precise: torch/csrc's code generation failed (exit {proc.returncode}): {last}")
    for path in (out / "torch").rglob("*"):
        if path.is_file() and path.suffix not in (".h", ".hpp"):
            path.unlink()  # generated sources and Python: only the headers are included


def tree_version(root: Path) -> dict[str, str]:
    """TORCH_VERSION_MAJOR/MINOR/PATCH of the tree, from its version.txt
    ("2.6.0a0" -> 2, 6, 0), as the build's cmake/public/utils.cmake reads
    them; {} when the file is missing or unreadable.

    Example:
        >>> tree_version(tree)
        {'TORCH_VERSION_MAJOR': '2', 'TORCH_VERSION_MINOR': '6', 'TORCH_VERSION_PATCH': '0'}
    """
    try:
        text = (root / VERSION_FILE).read_text()
    except OSError:
        return {}
    m = re.match(r"\s*(\d+)\.(\d+)\.(\d+)", text)
    if not m:
        return {}
    return dict(zip(("TORCH_VERSION_MAJOR", "TORCH_VERSION_MINOR", "TORCH_VERSION_PATCH"), m.groups(), strict=True))


def configure(text: str, values: dict[str, str] | None = None) -> str:
    """Fill a CMake `.h.in` template as the wheel's build (Note [Build configuration]): an @VAR@ named in
    `values` gets its value, any other is 1 if on (CONFIG_ON) else 0.

    Example:
        >>> configure("#define AT_NNPACK_ENABLED() @AT_NNPACK_ENABLED@\\n#cmakedefine C10_USE_GLOG")
        '#define AT_NNPACK_ENABLED() 0\\n/* #undef C10_USE_GLOG */'
    """
    values = values or {}

    def at_var(m: re.Match) -> str:
        if m.group(1) in values:
            return values[m.group(1)]
        return "1" if m.group(1) in CONFIG_ON else "0"

    def cmakedefine(m: re.Match) -> str:
        name = m.group(2)
        if m.group(1) == "01":
            return f"#define {name} {1 if name in CMAKEDEFINE_ON else 0}"
        return f"#define {name}" if name in CMAKEDEFINE_ON else f"/* #undef {name} */"

    text = re.sub(r"#cmakedefine(01)?\s+(\w+)[^\n]*", cmakedefine, text)
    text = re.sub(r'"@(\w+)@"', '""', text)
    return re.sub(r"@(\w+)@", at_var, text)
