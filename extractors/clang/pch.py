"""A precompiled header of the headers nearly every ATen TU includes.

Note [Common PCH]: about 830 of the ~1,100 files an ATen native TU includes
are the same for 90% of TUs (c10, ATen/core, TensorIterator, the standard
library), and so are the ~80 more that every per-op header `ATen/ops/<op>.h`
pulls in (OP_HEADER_INCLUDES). With synthesized flags (one set of flags for every TU) we parse
them once into a PCH and give each TU `-include-pch`: measured under load,
cpu/airy_ai.cpp 4.1 s -> 0.7 s, LinearAlgebra.cpp 9.9 s -> 6.0 s. The PCH is
processed before the TU's own first line, so a TU's leading `#define
TORCH_ASSERT_ONLY_METHOD_OPERATORS` no longer reaches those headers; that
macro only turns on include checks, not declarations. The PCH is rebuilt
when any file it includes changes (its deps are recorded beside it, and are
added to each TU's cache deps, since libclang does not list a PCH's files
among the TU's includes). If the PCH cannot be built, TUs are parsed without
it. TUs of torch/csrc get a larger PCH (CSRC_COMMON_HEADERS).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from multiprocessing import get_context
from pathlib import Path

from extractors.clang.flags import Command
from extractors.workers import watched
from torchtalk.atomic import atomic_open

# What every generated per-op header `ATen/ops/<op>.h` includes (torchgen's
# Function.h template): a TU that calls any `at::<op>` reads these, and
# Context.h and DeviceGuard.h bring in IValue, the JIT types and the device
# guards, ~80 headers heavy in templates. In the PCH, measured interleaved on
# 6 TUs under load (load average ~8): parse 15.2 s -> 1.2-3.2 s, same rows.
OP_HEADER_INCLUDES = (
    "ATen/Context.h", "ATen/DeviceGuard.h", "ATen/TracerMode.h", "ATen/core/Generator.h",
    "ATen/core/Reduction.h", "c10/core/Scalar.h", "c10/core/Storage.h", "c10/core/TensorOptions.h",
    "c10/util/Deprecated.h", "ATen/core/ivalue.h",
)
COMMON_HEADERS = (
    "ATen/core/Tensor.h", "ATen/Dispatch.h", "ATen/Parallel.h", "ATen/TensorUtils.h",
    "c10/util/irange.h", "ATen/native/DispatchStub.h", "ATen/TensorIterator.h", "ATen/TensorMeta.h",
    *OP_HEADER_INCLUDES,
)
# A TU of torch/csrc reads, beyond COMMON_HEADERS, the dispatcher, the
# op-registration API and the autograd Variable (64-82% of them, by the files
# each read in a whole-scope run), and 32-53% of them the JIT IR, the JIT
# module and interpreter, and ATen/ATen.h (every op's declarations). Their
# parse took 82% of the compiler tier's time (735 of 1,803 TUs, 4.0 s each
# against 0.7 s for an ATen TU); so they get a PCH of their own with these
# too: on 30 TUs drawn at random, 46.9 s -> 17.2 s of parsing, the same rows
# (a TU with a missing header resolves a few more calls). None of them
# brings in Python.h, whose macros would reach TUs that never include it.
CSRC_COMMON_HEADERS = (
    *COMMON_HEADERS, "ATen/core/dispatch/Dispatcher.h", "torch/library.h", "torch/csrc/autograd/variable.h",
    "torch/csrc/jit/ir/ir.h", "ATen/ATen.h", "torch/csrc/jit/api/module.h", "torch/csrc/jit/runtime/interpreter.h",
)
# A `.cu` TU's PCH (Note [CUDA host parse]): the same, parsed as CUDA, with
# the CUDA context most of them include (measured: MultiMarginLoss.cu 2.4 s
# -> 0.7 s, ReflectionPad.cu 2.4 s -> 0.6 s).
CUDA_COMMON_HEADERS = (*COMMON_HEADERS, "ATen/cuda/CUDAContext.h")
_FOR_SERIALIZATION = 0x10
BUILD_TIMEOUT_S = 600.0


def _build_child(header: str, out: str, args: list[str], conn, tmpdir: str) -> None:
    os.environ["TMPDIR"] = tmpdir
    try:
        from clang import cindex as ci

        index = ci.Index.create()
        if args[:2] == ["-x", "cuda"]:  # no cuda-header input kind: a CUDA TU asked to emit a PCH
            args = [*args, "-Xclang", "-emit-pch"]
        else:
            args = ["-x", "c++-header", *args]
        tu = index.parse(header, args=args, options=(ci.TranslationUnit.PARSE_INCOMPLETE | _FOR_SERIALIZATION))
        bad = [d for d in tu.diagnostics if d.severity >= ci.Diagnostic.Error]
        if bad:
            conn.send(f"{bad[0].location.file}:{bad[0].location.line}: {bad[0].spelling}")
        else:
            tu.save(out)
            conn.send(sorted({inc.include.name for inc in tu.get_includes()}))
    except Exception as exc:
        conn.send(f"{type(exc).__name__}: {exc}")
    conn.close()


def _build(header: Path, out: Path, args: list[str], tmpdir: str) -> list[str] | str:
    """Parse and save the PCH in a child process: its includes, or an error."""
    return in_child(_build_child, (str(header), str(out), args), tmpdir, "PCH build")


def in_child(target, args: tuple, tmpdir: str, what: str, timeout: float = BUILD_TIMEOUT_S) -> object:
    """What `target(*args, conn, tmpdir)` sends back from a forked child (a
    libclang crash or hang there cannot take this process down), or a
    message string: "<what> timed out" / "<what> process died"."""
    ctx = get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    # Note [Workers die with their parent]
    proc = ctx.Process(target=watched, args=(os.getpid(), target, *args, send, tmpdir), daemon=True)
    proc.start()
    send.close()
    got: object = f"{what} timed out"
    if recv.poll(timeout):
        try:
            got = recv.recv()
        except EOFError:
            got = f"{what} process died"
    proc.kill()
    proc.join()
    return got


def with_pch(command: Command, cache_dir: Path, hashes, tmpdir: str, log=lambda m: None,
             headers: tuple[str, ...] = COMMON_HEADERS) -> tuple[Command, dict[str, str]]:
    """`command` plus `-include-pch` of the common PCH (built or reused), and
    the PCH's deps {file: hash}; `command` unchanged and {} if it fails.

    Example:
        >>> cmd, deps = with_pch(synthesized(root, gen, res), cache, FileHashes(), tmp)
        >>> cmd.args[-2]
        '-include-pch'
    """
    base = list(command.args)
    digest = hashlib.blake2b(json.dumps([base, headers]).encode(), digest_size=12).hexdigest()
    pdir = cache_dir / "pch"
    pch, meta = pdir / f"{digest}.pch", pdir / f"{digest}.json"
    try:
        deps = json.loads(meta.read_text())
        if pch.is_file() and all(hashes(p) == h for p, h in deps.items()):
            return Command((*base, "-include-pch", str(pch)), command.directory), deps
    except (OSError, ValueError):
        pass
    pdir.mkdir(parents=True, exist_ok=True)
    header = pdir / f"{digest}.h"
    header.write_text("".join(f"#include <{h}>\n" for h in headers))
    log("precise: building the common precompiled header")
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".pch", dir=pdir)
    os.close(fd)
    got = _build(header, Path(tmp), base, tmpdir)
    if isinstance(got, str):
        Path(tmp).unlink(missing_ok=True)
        log(f"precise: no PCH ({got}); parsing without it")
        return command, {}
    deps = {p: hashes(p) for p in got if p != str(header)}
    os.replace(tmp, pch)
    with atomic_open(meta, "w") as fh:
        json.dump(deps, fh)
    return Command((*base, "-include-pch", str(pch)), command.directory), deps
