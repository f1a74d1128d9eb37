"""SDK and third-party headers for the precise tier: which ones, pinned to
which versions, where their headers live, and fetching them.

Note [SDK headers]: ATen's CUDA `.cpp` files (native/cuda/Blas.cpp,
cuda/linalg/*, sparse/cuda/*, ...) include the CUDA toolkit's headers
(cuda_runtime_api.h, cublas_v2.h, cusparse.h, cusolverDn.h, cufft.h,
nvrtc.h), mostly through ATen/cuda/CUDAContext.h, and the XPU ones
(native/mkldnn/xpu/*) include SYCL's and oneDNN's; without them they do not
parse. So do the TUs that include what a build takes from outside the tree:
cuDNN (ATen/cudnn), CUTLASS and CuTe (the attention kernels), pybind11 and
Python.h (torch/csrc's bindings), MKL (ATen/mkl), nlohmann/json
(torch.export's schema types, AOTInductor). The vendors ship those headers in
pip wheels (NVIDIA's `nvidia-*-cu12` under `nvidia/<lib>/include/`, Intel's
under `<wheel>.data/data/include/`, `nvidia-cutlass`, `pybind11` and
`nlohmann-json` under their package), so `torchtalk fetch NAME` (cuda, xpu,
cudnn, cutlass, pybind11, mkl, nlohmann) downloads the pinned wheels with
`pip download --no-deps`, unpacks only their headers into `<cache>/sdk/
<name>/include` and drops the wheels (for CUDA ~1 GB of libraries for ~10 MB of
headers). The directory is made under a temp name and renamed into place,
with the pins written beside it: a killed fetch leaves nothing half-made, a
second fetch is a no-op, and a change of pins fetches again (only the added
wheels when pins were only added). Python.h is not fetched: it is the
running interpreter's (python_include). Kineto's and ITT's headers have no
pinned wheel or release tarball (the `ittapi` wheel has no headers), so the
TUs that include Kineto's ActivityType.h (through profiler/kineto_shim.h:
torch/csrc/Module.cpp, autograd/profiler_kineto.cpp, profiler/*) and
itt_wrapper.cpp stay reported failures. Synthesized
flags add every fetched SDK as `-isystem` (flags.synthesized); a TU that
still misses an SDK header is reported with the SDK's name and the command
that fetches it (`hint`).
"""

from __future__ import annotations

import fnmatch
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from torchtalk.atomic import replace_dir
from torchtalk.errors import InputError


@dataclass(frozen=True)
class Sdk:
    """One SDK: its pip wheels (pinned), where a wheel keeps its headers (a
    regex whose group 1 is the path under the include dir), a header that
    shows it is there, the headers (names or leading dirs) it owns, and
    include subdirs its headers expect on the path too."""

    name: str
    title: str
    wheels: tuple[str, ...]
    layout: str
    marker: str
    headers: tuple[str, ...]  # names, leading dirs, or fnmatch patterns ("curand*.h")
    subdirs: tuple[str, ...] = ()

    def owns(self, header: str) -> bool:
        """Whether `header` (as written in an #include) comes from this SDK."""
        return any(header == h or header.startswith(h + "/") or ("*" in h and fnmatch.fnmatchcase(header, h))
                   for h in self.headers)


# The CUDA 12.4 wheels torch==2.6.0 depends on (its default build), plus two
# that are part of the same toolkit: nvcc's crt/ headers (cuda_runtime_api.h
# includes crt/host_defines.h) and CCCL's nv/target (cuda_fp16.hpp includes
# it; 12.4.127 was yanked for lacking nv/, 12.4.127.post1 has it). cuRAND's
# headers are needed by `.cu` files (curand_kernel.h) and by clang's own CUDA
# wrapper (__clang_cuda_runtime_wrapper.h includes curand_mtgp32_kernel.h).
# NVTX's (nvToolsExt.h: torch/csrc/cuda/shared/nvtx.cpp, the profiler) are
# torch 2.6.0's pin too; added last, so a fetched SDK gets only that wheel.
CUDA = Sdk(
    name="cuda",
    title="CUDA 12.4",
    wheels=(
        "nvidia-cuda-runtime-cu12==12.4.127",
        "nvidia-cuda-nvcc-cu12==12.4.131",
        "nvidia-cuda-cccl-cu12==12.4.127.post1",
        "nvidia-cuda-nvrtc-cu12==12.4.127",
        "nvidia-cublas-cu12==12.4.5.8",
        "nvidia-cusparse-cu12==12.3.1.170",
        "nvidia-cusolver-cu12==11.6.1.9",
        "nvidia-cufft-cu12==11.2.1.3",
        "nvidia-curand-cu12==10.3.5.147",
        "nvidia-nvtx-cu12==12.4.127",
    ),
    layout=r"nvidia/[^/]+/include/(.+)",
    marker="cuda_runtime_api.h",
    headers=(
        "cuda.h", "cuda_runtime.h", "cuda_runtime_api.h", "cuda_fp16.h", "cuda_bf16.h",
        "cublas_v2.h", "cublas.h", "cublasLt.h", "cusparse.h", "cusolverDn.h", "cusolver_common.h",
        "cufft.h", "cufftXt.h", "nvrtc.h", "curand*.h", "crt", "nv", "thrust", "cub",
        "nvToolsExt*.h", "nvtx3",
    ),
)
# The XPU build's SYCL runtime headers (oneAPI 2025.0, the DPC++ release of
# PyTorch 2.6's XPU builds) and oneDNN 3.6 with its SYCL interop (the XPU
# build compiles oneDNN 3.x from source; the wheel of the same oneAPI release
# has the headers). DPC++ puts both include/ and include/sycl/ on the path.
XPU = Sdk(
    name="xpu",
    title="XPU (SYCL and oneDNN, oneAPI 2025.0)",
    wheels=("intel-sycl-rt==2025.0.4", "onednn-devel==2025.0.1"),
    layout=r"[^/]+\.data/data/include/(.+)",
    marker="sycl/sycl.hpp",
    headers=("sycl", "oneapi/dnnl", "dnnl.hpp", "dnnl.h"),
    subdirs=("sycl",),
)
# cuDNN 9.1.0.70, the wheel torch==2.6.0 pins for CUDA 12.4 (ATen/cudnn/*,
# native/cudnn/*, torch/csrc/cuda/shared/cudnn.cpp). Its own SDK, not a CUDA
# pin: the wheel is ~660 MB for ~1 MB of headers, and most TUs never need it.
CUDNN = Sdk(
    name="cudnn",
    title="cuDNN 9.1",
    wheels=("nvidia-cudnn-cu12==9.1.0.70",),
    layout=r"nvidia/[^/]+/include/(.+)",
    marker="cudnn.h",
    headers=("cudnn*.h",),
)
# CUTLASS and CuTe (flash attention's and mem-efficient attention's kernels,
# RowwiseScaledMM.cu, nested/cuda/NestedTensorMatmul.cu): header-only, vendored
# by torch as the third_party/cutlass submodule. NVIDIA's `nvidia-cutlass` wheel
# ships the release's include/ and tools/util/include/ (cutlass/util/*.h) under
# cutlass_library/source/. The version is a labelled guess: 3.5.1, the last
# CUTLASS release before torch 2.6's branch cut (December 2024; pytorch#123458
# moved the submodule to 3.5.1, the 3.6 -> 3.7 move of pytorch#145818 came in
# 2025, and the 3.6.0 wheel was built 2024-12-30); every cutlass/ and cute/
# header the 2.6.0 tree includes is in it.
CUTLASS = Sdk(
    name="cutlass",
    title="CUTLASS 3.5.1",
    wheels=("nvidia-cutlass==3.5.1.0",),
    layout=r"cutlass_library/source/(?:tools/util/)?include/(.+)",
    marker="cutlass/cutlass.h",
    headers=("cutlass", "cute"),
)
# pybind11 2.13.6, the version of torch 2.6.0's third_party/pybind11 submodule
# (pytorch#136087, September 2024); torch/csrc's Python bindings include it
# (with Python.h, which comes from the running interpreter: python_include).
PYBIND11 = Sdk(
    name="pybind11",
    title="pybind11 2.13.6",
    wheels=("pybind11==2.13.6",),
    layout=r"pybind11/include/(.+)",
    marker="pybind11/pybind11.h",
    headers=("pybind11",),
)
# MKL's headers (aten/src/ATen/mkl/*, native/mkl/*: mkl.h, mkl_dfti.h,
# mkl_spblas.h). 2024.2.0: torch 2.6.0's wheel reports "oneAPI Math Kernel
# Library Version 2024.2" (torch.__config__.show()); the patch level is a
# labelled guess. The interfaces these TUs use are older than it.
MKL = Sdk(
    name="mkl",
    title="MKL 2024.2",
    wheels=("mkl-include==2024.2.0",),
    layout=r"[^/]+\.data/data/include/(.+)",
    marker="mkl_dfti.h",
    headers=("mkl*.h", "fftw"),
)
# nlohmann/json 3.11.3, the version of torch 2.6.0's third_party/nlohmann
# submodule (a labelled guess: the release current at 2.6's branch cut):
# torch/csrc/utils/generated_serialization_types.h (torch.export's schema) and
# the c10d flight recorder include it. The `nlohmann-json` wheel repackages
# the release's single-include headers under nlohmann_json/include/.
NLOHMANN = Sdk(
    name="nlohmann",
    title="nlohmann/json 3.11.3",
    wheels=("nlohmann-json==3.11.3",),
    layout=r"nlohmann_json/include/(.+)",
    marker="nlohmann/json.hpp",
    headers=("nlohmann",),
)
SDKS = {sdk.name: sdk for sdk in (CUDA, XPU, CUDNN, CUTLASS, PYBIND11, MKL, NLOHMANN)}
_PINS = "pins.txt"


def sdk_root() -> Path:
    """Where fetched SDKs live: `<user cache>/sdk` (TORCHTALK_CACHE_DIR moves it)."""
    from torchtalk.paths import cache_dir

    return cache_dir() / "sdk"


def include_dir(sdk: Sdk) -> Path | None:
    """The fetched include dir of `sdk`, or None if it was not fetched."""
    inc = sdk_root() / sdk.name / "include"
    return inc if (inc / sdk.marker).is_file() else None


def fetched_pins(sdk: Sdk) -> list[str]:
    """The pins `sdk` was fetched with ([] if it was not fetched); equal to
    `list(sdk.wheels)` when it is current."""
    if include_dir(sdk) is None:
        return []
    return (_read(sdk_root() / sdk.name / _PINS) or "").splitlines()


def include_dirs() -> tuple[Path, ...]:
    """The include dirs of every fetched SDK, in a fixed order.

    Example:
        >>> include_dirs()
        (PosixPath('/root/.cache/torchtalk/sdk/cuda/include'),)
    """
    out: list[Path] = []
    for sdk in SDKS.values():
        inc = include_dir(sdk)
        if inc is not None:
            out += [inc, *(inc / sub for sub in sdk.subdirs)]
    py = python_include()
    return tuple(out) + ((py,) if py is not None else ())


def python_include() -> Path | None:
    """The running interpreter's include dir (Python.h, for torch/csrc's
    bindings), or None when it has no Python.h (no -dev package): not
    fetched, the interpreter that runs torchtalk is the one a build of the
    tree would use.

    Example:
        >>> python_include()
        PosixPath('/usr/include/python3.11')
    """
    import sysconfig

    inc = Path(sysconfig.get_paths()["include"])
    return inc if (inc / "Python.h").is_file() else None


def cuda_path() -> Path | None:
    """The fetched CUDA headers as a directory clang takes for `--cuda-path`
    (None if not fetched). Clang accepts an install only with `include/` and
    `bin/` (it reads the version from include/cuda.h and never runs bin/
    under `-nocudalib --cuda-host-only`): the empty `bin/` is made here.

    Example:
        >>> cuda_path()
        PosixPath('/root/.cache/torchtalk/sdk/cuda')
    """
    inc = include_dir(CUDA)
    if inc is None:
        return None
    (inc.parent / "bin").mkdir(exist_ok=True)
    return inc.parent


def hint(message: str) -> str | None:
    """For a fatal "'X' file not found" naming an SDK header: which SDK is
    missing and how to get it; else None.

    Example:
        >>> hint("'cuda_runtime_api.h' file not found")
        'the CUDA 12.4 headers are missing: run `torchtalk fetch cuda`'
    """
    m = re.search(r"'([^']+)' file not found", message)
    if not m:
        return None
    for sdk in SDKS.values():
        if sdk.owns(m.group(1)):
            return f"the {sdk.title} headers are missing: run `torchtalk fetch {sdk.name}`"
    if m.group(1) == "Python.h":
        return "the Python headers are missing: install the -dev package of the Python that runs torchtalk"
    return None


def fetch(name: str, log=lambda msg: None) -> Path:
    """Fetch SDK `name`'s headers (Note [SDK headers]); its include dir.
    A no-op when the same pins are already there; when pins were only added,
    only the new wheels are downloaded.

    Example:
        >>> fetch("cuda")
        PosixPath('/root/.cache/torchtalk/sdk/cuda/include')
    """
    sdk = SDKS.get(name)
    if sdk is None:
        raise InputError(f"unknown SDK {name!r}", hint=f"one of: {', '.join(sorted(SDKS))}")
    final = sdk_root() / sdk.name
    pins = "\n".join(sdk.wheels) + "\n"
    had = fetched_pins(sdk)
    if had == list(sdk.wheels):
        return final / "include"
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{sdk.name}-", dir=final.parent))
    try:
        todo = sdk.wheels
        if had and set(had) <= set(sdk.wheels):  # pins only added: keep what is there
            shutil.copytree(final / "include", tmp / "include", symlinks=True)
            todo = tuple(w for w in sdk.wheels if w not in had)
        log(f"downloading the {sdk.title} header wheels ({len(todo)}) ...")
        wheels = _download(todo, tmp / "wheels")
        for wheel in wheels:
            _unpack_includes(wheel, sdk.layout, tmp / "include")
        shutil.rmtree(tmp / "wheels")
        if not (tmp / "include" / sdk.marker).is_file():
            raise InputError(f"the {sdk.title} wheels have no {sdk.marker}")
        (tmp / _PINS).write_text(pins)
        replace_dir(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final / "include"


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _download(wheels: tuple[str, ...], dest: Path) -> list[Path]:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--disable-pip-version-check", "--no-cache-dir", "-q", "-d", str(dest), *wheels]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("ERROR")]
        last = (errors or proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise InputError(f"pip could not download the SDK wheels: {last}",
                         hint="check that pip reaches the package index")
    return sorted(dest.glob("*.whl"))


def _unpack_includes(wheel: Path, layout: str, dest: Path) -> None:
    """Copy the wheel's headers (the files matching `layout`, no `__init__.py`) into `dest`."""
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            m = re.fullmatch(layout, info.filename)
            if not m or info.is_dir() or m.group(1).endswith("__init__.py"):
                continue
            rel = Path(m.group(1))
            if rel.is_absolute() or ".." in rel.parts:
                continue
            out = dest / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(out, "wb") as dst:
                shutil.copyfileobj(src, dst)
