"""Bench: PyTorch's own runtime as the oracle of TorchTalk's C++ call graph and dispatch facts.

In a side venv with the exact release the tree is (torch==2.6.0, the CUDA
12.4 wheel; it runs on a CPU-only machine), a collector runs every OpInfo of
`common_methods_invocations.op_db` on CPU under `torch.profiler` and records
op -> op nesting (aten::X ran directly inside aten::Y), the kernel the
dispatcher runs for CPU for every op seen, and every dispatch key's aten
registrations. The result is cached as JSON keyed by the torch version
(~/.cache/torchtalk/oracle-2.6.0.json; --refresh redoes it). Then, on the
indexed tree:

  dispatch    per key, precision and recall of the `dispatch` facts and of
              rules/dispatch.dl's `dispatch_registered` against the runtime
              registrations; the misses grouped by what the facts say about them
  call graph  the share of runtime edges Y -> X (Y != X, by op name) that the
              static graph has: bench/runtime_oracle.dl walks rules/graph.dl's
              down walk from Y's CPU and composite kernels (CPU or unbound
              state), and X is found when a reached function calls op X through
              the ATen API (calls_op; the call is one more step) or is one of X's
              kernels, within --depth steps. Denominator: those edges less the
              ones that are no C++ call of the tree (a profiler scope that is no
              operator; nesting seen only while Autograd / ADInplaceOrView
              kernels run, i.e. gone under inference_mode; a Y whose CPU kernel
              is Python), counted apart. Ops called from Python are profiler
              roots, never edges. Misses are grouped by cause: a deeper walk
              (--extra-depth), a walk from Y's structured meta function, the
              facts about Y's kernels, and Y's kernel's source text.

Usage: .venv/bin/python bench/runtime_oracle.py [--source TREE | --db FILE]
           [--venv DIR] [--no-install] [--refresh] [--depth 6] [--examples 3] [--json]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TORCH_VERSION = "2.6.0"
PIP_PACKAGES = (f"torch=={TORCH_VERSION}", "expecttest", "hypothesis", "packaging", "numpy")
CACHE = Path.home() / ".cache" / "torchtalk"
FORMAT = 2  # of the cached oracle JSON; a cache of another format is collected again
# The keys whose kernels a call of an op on dense CPU tensors runs (the
# dispatcher's CPU entry is the op's CPU kernel, else its composite one).
WALK_KEYS = ("CPU", "CompositeImplicitAutograd", "CompositeExplicitAutograd",
             "CompositeExplicitAutogradNonFunctional")
# The keys of the dispatch comparison named first; any other key with aten
# registrations at runtime follows.
DISPATCH_KEYS = ("CPU", "CUDA", "Meta", "MPS", "XPU", "SparseCPU", "SparseCUDA", "SparseCsrCPU",
                 "SparseCsrCUDA", "QuantizedCPU", "QuantizedCUDA", "NestedTensorCPU",
                 "NestedTensorCUDA", "MkldnnCPU", "CompositeImplicitAutograd",
                 "CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional")


class UserError(Exception):
    """A one-line error for the user (exit 2)."""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ------------------------------------------------------------------ collector
# Runs in the side venv (`python runtime_oracle.py --collect OUT`): imports
# nothing of TorchTalk, and nothing but the standard library at module level.


def op_id(runtime_name: str) -> str:
    """A runtime operator name as TorchTalk's op id: "aten::add.Tensor" ->
    "add.Tensor", "aten::relu" -> "relu" (the empty overload)."""
    return runtime_name[len("aten::"):] if runtime_name.startswith("aten::") else runtime_name


def aten_children(event):
    """(child, via) for the aten events nested directly in `event`: its
    profiler children named aten::*, and through a child that is no aten op
    (a record_function scope) the aten events below it, `via` naming it."""
    for child in event.cpu_children:
        if child.name.startswith("aten::"):
            yield child, ""
        else:
            for grand, via in aten_children(child):
                yield grand, via or child.name


def nesting_edges(events) -> dict[tuple[str, str], str]:
    """{(Y, X): via} for every aten event Y of a profile and each aten event X
    nested directly in it (names without "aten::"; `via` as aten_children)."""
    out: dict[tuple[str, str], str] = {}
    for e in events:
        if e.name.startswith("aten::"):
            for child, via in aten_children(e):
                out.setdefault((op_id(e.name), op_id(child.name)), via)
    return out


def _sample_dtype(opinfo, torch):
    dtypes = opinfo.supported_dtypes("cpu")
    if torch.float32 in dtypes:
        return torch.float32
    order = sorted(dtypes, key=str)
    return order[0] if order else None


def _profile_opinfo(opinfo, torch, samples: int):
    """(edges {(Y, X): {"via", "autograd"}}, aten ops seen {name: count},
    samples whose inference_mode rerun raised) of a few samples of one OpInfo."""
    from torch.profiler import ProfilerActivity, profile

    dtype = _sample_dtype(opinfo, torch)
    if dtype is None:
        raise RuntimeError("no dtype supported on CPU")
    inputs = []
    for i, s in enumerate(opinfo.sample_inputs("cpu", dtype, requires_grad=False)):
        if i >= samples:
            break
        inputs.append(s)
    edges: dict[tuple[str, str], dict] = {}
    seen: collections.Counter = collections.Counter()
    errors = bare_errors = 0
    for s in inputs:
        try:
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                opinfo(s.input, *s.args, **s.kwargs)
        except Exception:
            errors += 1
            continue
        try:  # again without the Autograd and ADInplaceOrView keys: what only
            # the first run nests came from their kernels
            with torch.inference_mode(), profile(activities=[ProfilerActivity.CPU]) as bare:
                opinfo(s.input, *s.args, **s.kwargs)
            below = nesting_edges(bare.events())
        except Exception:
            below = None  # unknown: the edges count as not from autograd
            bare_errors += 1
        events = prof.events()
        for k, v in nesting_edges(events).items():
            only_above = below is not None and k not in below
            old = edges.get(k)
            edges[k] = {"via": v, "autograd": (old is None or old["autograd"]) and only_above}
        seen.update(op_id(e.name) for e in events if e.name.startswith("aten::"))
    if inputs and errors == len(inputs):
        raise RuntimeError("every sample raised")
    return edges, seen, bare_errors


def _cpu_kernels(torch, names: set[str]) -> dict[str, list[list[str]]]:
    """For each op name seen (base name), each overload's runtime CPU entry:
    [overload id, kind, where] ("kernel" / "default backend kernel" / "math
    kernel"; the registering file). A name the dispatcher does not know
    (a profiler scope such as aten::..., not an operator) gets no entry."""
    from dispatch_vs_runtime import short_path

    by_name: dict[str, list[str]] = collections.defaultdict(list)
    for full in torch._C._dispatch_get_all_op_names():
        if full.startswith("aten::"):
            oid = op_id(full)
            by_name[oid.split(".", 1)[0]].append(full)
    out: dict[str, list[list[str]]] = {}
    for name in sorted(names):
        rows = []
        for full in sorted(by_name.get(name, ())):
            for line in torch._C._dispatch_dump_table(full).splitlines():
                key, _, rest = line.partition(": ")
                if key == "CPU":
                    kind = rest[rest.rfind("[") + 1:-1] if rest.endswith("]") else "?"
                    where = rest.split("registered at ", 1)[1].split(" ", 1)[0] if "registered at " in rest else "?"
                    rows.append([op_id(full), kind, short_path(where.rsplit(":", 1)[0])])
        out[name] = rows
    return out


def _registered_at(torch, registrations: dict[str, list[str]]) -> dict[str, dict[str, str]]:
    """{key: {op id: the file that registered its kernel}} for the registrations listed."""
    from dispatch_vs_runtime import short_path

    wanted = {(k, op) for k, ops in registrations.items() for op in ops}
    out: dict[str, dict[str, str]] = collections.defaultdict(dict)
    for full in torch._C._dispatch_get_all_op_names():
        if not full.startswith("aten::"):
            continue
        for line in torch._C._dispatch_dump(full).splitlines():
            key, _, rest = line.partition(": registered at ")
            if rest and (key, op_id(full)) in wanted:
                out[key][op_id(full)] = short_path(rest.split(" ", 1)[0].rsplit(":", 1)[0])
    return out


def collect(out: Path, samples: int = 3) -> None:
    """Profile every OpInfo on CPU and dump the dispatcher's registrations: JSON at `out`."""
    sys.path.insert(0, str(HERE))
    import warnings

    warnings.filterwarnings("ignore")
    import torch
    from dispatch_vs_runtime import runtime_registrations
    from torch.testing._internal.common_methods_invocations import op_db

    torch.set_num_threads(1)  # nested ops stay on the profiled thread
    t0 = time.perf_counter()
    edges: dict[tuple[str, str], dict] = {}
    seen: collections.Counter = collections.Counter()
    failures: dict[str, str] = {}
    bare_errors = 0
    for i, opinfo in enumerate(op_db):
        label = opinfo.name + (f".{opinfo.variant_test_name}" if opinfo.variant_test_name else "")
        if i % 50 == 0:
            log(f"  [{i}/{len(op_db)}] {label} ({time.perf_counter() - t0:.0f} s, {len(edges)} edges)")
        try:
            got, ops, bare = _profile_opinfo(opinfo, torch, samples)
        except Exception as err:  # one OpInfo never stops the run
            failures[label] = f"{type(err).__name__}: {str(err).splitlines()[0][:160] if str(err) else ''}"
            continue
        seen.update(ops)
        bare_errors += bare
        for (y, x), info in got.items():
            e = edges.setdefault((y, x), {"caller": y, "callee": x, "opinfos": [], "via": info["via"],
                                          "autograd": True})
            e["opinfos"].append(label)
            e["autograd"] = e["autograd"] and info["autograd"]
    t_ops = time.perf_counter() - t0
    keys = list(DISPATCH_KEYS) + sorted(k for k in torch._C.DispatchKey.__members__ if k not in DISPATCH_KEYS)
    registrations = {}
    for key in keys:
        try:
            regs = runtime_registrations(torch, key)
        except Exception:  # an alias or range key the dispatcher does not list
            continue
        if regs:
            registrations[key] = sorted(regs)
    names = {y for y, _ in edges} | {x for _, x in edges}
    data = {
        "format": FORMAT,
        "torch_version": torch.__version__,
        "opinfos": len(op_db),
        "samples_per_opinfo": samples,
        "seconds": round(t_ops, 1),
        "failures": failures,
        "inference_mode_failures": bare_errors,
        "ops_seen": dict(sorted(seen.items())),
        "edges": sorted(edges.values(), key=lambda e: (e["caller"], e["callee"])),
        "cpu_kernels": _cpu_kernels(torch, names),
        "aten_ops": sorted(op_id(n) for n in torch._C._dispatch_get_all_op_names() if n.startswith("aten::")),
        "registrations": registrations,
        "registered_at": _registered_at(torch, registrations),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=0))
    tmp.replace(out)
    log(f"  {len(op_db) - len(failures)}/{len(op_db)} OpInfos ran, {len(edges)} edges, in {t_ops:.0f} s")


# ------------------------------------------------------------------ side venv and cache


def venv_ready(venv: Path) -> bool:
    """`venv` holds an installed torch of TORCH_VERSION."""
    return any(venv.glob(f"lib/python*/site-packages/torch-{TORCH_VERSION}*.dist-info"))


def _run(cmd: list[str], what: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        lines = [ln for ln in (proc.stderr + proc.stdout).splitlines()
                 if ln.strip() and not ln.startswith("WARNING: Location")]
        raise UserError(f"{what} failed (exit {proc.returncode}): {lines[-1] if lines else 'no output'}")


def ensure_venv(venv: Path, install: bool) -> Path:
    """The python of the side venv, created and filled with PIP_PACKAGES once."""
    py = venv / "bin" / "python"
    if py.exists() and venv_ready(venv):
        return py
    if not install:
        raise UserError(f"no torch {TORCH_VERSION} venv at {venv} (drop --no-install to create it, ~5 GB)")
    log(f"installing {' '.join(PIP_PACKAGES)} into {venv} (the CUDA wheel, ~5 GB: minutes)")
    if not py.exists():
        _run([sys.executable, "-m", "venv", str(venv)], "python -m venv")
    _run([str(py), "-m", "pip", "install", "-q", *PIP_PACKAGES], "pip install")
    if not venv_ready(venv):
        raise UserError(f"pip installed no torch {TORCH_VERSION} into {venv}")
    return py


def cached_oracle(path: Path) -> dict | None:
    """The oracle cached at `path`, if it is of this format and torch version."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if data.get("format") != FORMAT or not str(data.get("torch_version", "")).startswith(TORCH_VERSION):
        return None
    return data


def run_collector(py: Path, out: Path, samples: int) -> None:
    """Run `collect` in the side venv, passing its progress lines through."""
    proc = subprocess.Popen([str(py), str(Path(__file__).resolve()), "--collect", str(out), str(samples)],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, cwd=str(HERE))
    tail: collections.deque = collections.deque(maxlen=5)
    for line in proc.stderr:
        tail.append(line.rstrip())
        if line.startswith("  "):
            log(line.rstrip())
    if proc.wait() != 0:
        raise UserError(f"the collector failed (exit {proc.returncode}): {' | '.join(tail)}")


# ------------------------------------------------------------------ the index


def open_index(source: str | None, db: str | None):
    """(db path, tree root, connection) of the indexed tree; UserError when
    nothing is indexed or the C++ layer is missing."""
    from torchtalk import api
    from torchtalk.errors import TorchTalkError

    try:
        path = api.resolve_db(source=source, db=db)
        con = api.open_db(db=path)
        meta = api.status(db=path)["meta"]
    except TorchTalkError as err:
        raise UserError(err.headline()) from None
    funcs, ops = con.execute("SELECT (SELECT count(*) FROM func), (SELECT count(*) FROM calls_op)").fetchone()
    if not funcs or not ops:
        raise UserError(f"{path}: the C++ layer is not indexed (func, calls_op empty); "
                        f"run `torchtalk index --source {meta.get('source', 'TREE')} --layers cpp`")
    return path, Path(meta.get("source") or "."), con


# ------------------------------------------------------------------ dispatch


def precision_recall(static: set[str], runtime: set[str]) -> dict:
    """Precision and recall of `static` against `runtime`: 1.0 over an empty
    set, None (not measured) for both when the runtime has nothing for the key."""
    both = len(static & runtime)
    measured = bool(runtime)
    return {"static": len(static), "runtime": len(runtime), "both": both,
            "precision": (both / len(static) if static else 1.0) if measured else None,
            "recall": (both / len(runtime)) if measured else None}


def dispatch_miss_cause(op: str, key: str, facts: dict, where: str = "?") -> str:
    """Why runtime registers a kernel of `op` for `key` that no `dispatch` fact
    names, as the facts tell it. `facts`: "ops" (yaml op ids), "autogen"
    (ops generated by `autogen:`), "lib_def", "table_keys" (keys with
    dispatch rows), per key "lib_impl" and "registered" ({op: hows} of
    rules/dispatch.dl), "py_meta" (ops with a Python meta / decomposition
    fact). `where`: the file the runtime says registered it, named only when
    no fact explains it."""
    if op in facts["lib_impl"].get(key, ()):
        return "hand-written TORCH_LIBRARY_IMPL in C++ (lib_impl)"
    hows = facts["registered"].get(key, {}).get(op)
    if hows:
        return f"not in the yaml's dispatch table; rules/dispatch.dl derives it ({', '.join(sorted(hows))})"
    if op in facts["autogen"]:
        return "op generated by `autogen:` (autogen), no dispatch table of its own"
    if op not in facts["ops"]:
        return "op not in native_functions.yaml" + (" (TORCH_LIBRARY m.def: lib_def)" if op in facts["lib_def"] else "")
    if key not in facts["table_keys"]:
        return "no dispatch-table entry has this key (torchgen generates its kernels per op, or a C++ fallback)"
    if key == "Meta" and op in facts["py_meta"]:
        return "registered from Python (register_meta / decomposition facts)"
    return f"no fact explains it (runtime: registered in {where})"


def dispatch_extra_cause(op: str, key: str, runtime_ops: set[str], runtime: dict[str, set[str]]) -> str:
    """Why a `dispatch` fact names a kernel the runtime did not register."""
    if not runtime.get(key):
        return "the wheel's build registers no kernel for this key at all"
    if op not in runtime_ops:
        return "op unknown to the runtime dispatcher"
    return "op known, no kernel for the key at runtime"


def dispatch_facts(con, db: Path) -> tuple[dict, dict[str, set[str]]]:
    """(facts for dispatch_miss_cause, {key: op ids with a `dispatch` row})."""
    from torchtalk import api

    table: dict[str, set[str]] = collections.defaultdict(set)
    for o, k in con.execute("SELECT DISTINCT op, key FROM dispatch").fetchall():
        table[k].add(o)
    registered: dict[str, dict[str, set[str]]] = collections.defaultdict(lambda: collections.defaultdict(set))
    for o, k, how in api.eval_program(ROOT / "rules/dispatch.dl", db=db, outputs=["dispatch_registered"])["dispatch_registered"]:
        registered[k][o].add(how)
    lib_impl: dict[str, set[str]] = collections.defaultdict(set)
    for o, k in con.execute("SELECT op, key FROM lib_impl WHERE ns = 'aten'").fetchall():
        lib_impl[k].add(o)
    facts = {
        "ops": {r[0] for r in con.execute("SELECT op FROM op").fetchall()},
        "autogen": {r[0] for r in con.execute("SELECT generated FROM autogen").fetchall()},
        "lib_def": {r[0] for r in con.execute("SELECT op FROM lib_def WHERE ns = 'aten'").fetchall()},
        "table_keys": set(table),
        "lib_impl": lib_impl,
        "registered": registered,
        "py_meta": {r[0] for r in con.execute(
            "SELECT op FROM py_op_impl WHERE registry = 'register_meta' UNION SELECT op FROM decomp").fetchall()},
    }
    return facts, table


def compare_dispatch(oracle: dict, con, db: Path, examples: int) -> dict:
    """Per key: precision/recall of `dispatch` and of `dispatch_registered`, and the misses by cause."""
    facts, table = dispatch_facts(con, db)
    runtime = {k: set(v) for k, v in oracle["registrations"].items()}
    runtime_ops = set(oracle["aten_ops"])
    keys = [k for k in DISPATCH_KEYS if k in runtime or k in table]
    keys += sorted((set(runtime) | set(table)) - set(keys))
    rows, causes = [], {}
    for key in keys:
        rt, st = runtime.get(key, set()), table.get(key, set())
        reg = set(facts["registered"].get(key, {}))
        rows.append({"key": key, "dispatch": precision_recall(st, rt), "registered": precision_recall(reg, rt)})
        groups: dict[str, list[str]] = collections.defaultdict(list)
        where = oracle["registered_at"].get(key, {})
        for op in sorted(rt - st):
            groups["missing: " + dispatch_miss_cause(op, key, facts, where.get(op, "?"))].append(op)
        for op in sorted(st - rt):
            groups["extra: " + dispatch_extra_cause(op, key, runtime_ops, runtime)].append(op)
        if groups:
            causes[key] = grouped(groups, examples)
    return {"keys": rows, "causes": causes}


def grouped(groups: dict[str, list], examples: int) -> dict[str, dict]:
    """{cause: {"count", "examples"}}, the largest group first."""
    return {c: {"count": len(v), "examples": v[:examples]}
            for c, v in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))}


# ------------------------------------------------------------------ call graph

OUTPUTS = ("oracle", "oracle_kernel", "oracle_unlinked")
PY_KERNEL = "Y's CPU kernel is Python (registered from a torch/*.py file)"
AUTOGRAD = "nested only while Autograd / ADInplaceOrView kernels run (gone under inference_mode)"
SCOPE = "a profiler scope named aten::*, not an operator the dispatcher knows"


def not_cpp_cause(edge: dict, cpu_kernels: dict, runtime_names: set[str]) -> str | None:
    """Why runtime edge Y -> X is no C++ call of the tree at all, or None."""
    y, x = edge["caller"].split(".", 1)[0], edge["callee"].split(".", 1)[0]
    if y not in runtime_names or x not in runtime_names:
        return SCOPE
    if edge.get("autograd"):
        return AUTOGRAD
    rows = cpu_kernels.get(y) or []
    if rows and all(where.endswith(".py") for _, _, where in rows):
        return PY_KERNEL
    return None


def evaluate_walk(con, edges: list[tuple[str, str]], depth: int, batch: int) -> dict[str, list[tuple]]:
    """The OUTPUTS of bench/runtime_oracle.dl for `edges` at `depth`, by
    TorchTalk's engine, `batch` callers per evaluation."""
    from torchtalk.datalog import evaluate
    from torchtalk.datalog.parser import parse_file
    from torchtalk.lookup import tables
    from torchtalk.query.derived import use_derived
    from torchtalk.query.run import prune

    library = parse_file(HERE / "runtime_oracle.dl")
    program = prune(library, frozenset({"oracle_arg", "oracle_depth"}), tables(con))
    program, stored = use_derived(program, con, library)  # Note [Derived at index time]
    callers = sorted({y for y, _ in edges})
    out: dict[str, list[tuple]] = {rel: [] for rel in OUTPUTS}
    for i in range(0, len(callers), batch):
        part = set(callers[i:i + batch])
        facts = {"oracle_arg": [e for e in edges if e[0] in part], "oracle_depth": [(depth,)]}
        rows = evaluate(program, con, outputs=list(OUTPUTS), facts=facts, tables=stored)
        for rel in OUTPUTS:
            out[rel].extend(rows.get(rel, []))
    return out


def best_hits(rows: list[tuple], depth: int) -> dict[tuple[str, str, str], tuple[int, str]]:
    """{(Y, X, seed): (steps, res)}: the fewest steps at which the walk from
    Y's `seed` finds X (a calls_op row of a function d steps down is step
    d + 1; X's kernel d steps down is step d), at most `depth`; res is
    "resolved" when some path within depth has no name guess."""
    best: dict[tuple[str, str, str], tuple[int, str]] = {}
    for y, x, seed, how, d, res in rows:
        steps = d + 1 if how == "calls_op" else d
        if steps > depth:
            continue
        k = (y, x, seed)
        old_steps, old_res = best.get(k, (depth + 1, "guess"))
        best[k] = (min(old_steps, steps), "resolved" if "resolved" in (old_res, res) else "guess")
    return best


def operator_ops(tree: Path) -> dict[str, str]:
    """{op name: C++ operator} for the Tensor operators of the tree's
    ATen/TensorOperators.h (`_(*, x.mul(y), y.mul(x))`) and the member
    operators of ATen/templates/TensorBody.h (`operator-=` returns sub_)."""
    import re

    out: dict[str, str] = {}
    try:
        ops_h = (tree / "aten/src/ATen/TensorOperators.h").read_text()
        body_h = (tree / "aten/src/ATen/templates/TensorBody.h").read_text()
    except OSError:
        return out
    for m in re.finditer(r"_\(([^\s,]+),((?:[^()]|\([^()]*\))*)\)[ \t]*(?:\\|$)", ops_h, re.MULTILINE):
        for name in re.findall(r"(?:\.|::at::)(\w+)\(", m.group(2)):
            out.setdefault(name, m.group(1))
    for m in re.finditer(r"operator(\S+?)\([^)]*\)\s*(?:const\s*)?\{\s*return (?:this->)?(\w+)\(", body_h):
        if not m.group(2).startswith("operator"):
            out.setdefault(m.group(2), m.group(1))
    return out


def named_call(text: str, name: str) -> str | None:
    """How `text` (C++ source) calls op `name` as a function or method:
    "symint" (name_symint(...)), "plain" (name(, at::name(, x.name(), or None."""
    import re

    if re.search(rf"(?<!\w){re.escape(name)}_symint\s*\(", text):
        return "symint"
    if re.search(rf"(?<!\w){re.escape(name)}\s*\(", text):
        return "plain"
    return None


def kernel_texts(con, tree: Path, fns: set[str]) -> dict[str, str]:
    """{fn: its source text}: from its definition's line to the next definition in the file."""
    if not fns:
        return {}
    rows = con.execute("SELECT fn, file, line FROM func WHERE fn IN (SELECT unnest(?))", [sorted(fns)]).fetchall()
    files = {f for _, f, _ in rows}
    starts = collections.defaultdict(list)
    for f, ln in con.execute("SELECT file, line FROM func WHERE file IN (SELECT unnest(?))", [sorted(files)]).fetchall():
        starts[f].append(ln)
    out: dict[str, str] = collections.defaultdict(str)
    for fn, f, ln in rows:
        try:
            lines = (tree / f).read_text(errors="replace").splitlines()
        except OSError:
            continue
        end = min((s for s in starts[f] if s > ln), default=len(lines) + 1)
        out[fn] += "\n".join(lines[ln - 1:end - 1]) + "\n"
    return out


def graph_miss_cause(y: str, x: str, ctx: dict, depth: int, deep: int) -> str:
    """Why the walk from Y's kernels did not find X within `depth`, as the
    facts tell it. ctx: "yaml_names", "kernels" ({name: kernel fns}),
    "unlinked" (names with a generated kernel), "cpu_rows" (runtime CPU
    entries by name), "called" (names calls_op has), "operators" (op name ->
    C++ operator), "named" ({(Y, X): named_call form} of Y's kernel text),
    "hits" (best_hits of the walk to `deep`)."""
    if y not in ctx["yaml_names"]:
        return "Y is not in native_functions.yaml (no kernel facts)"
    if not ctx["kernels"].get(y):
        if not ctx["cpu_rows"].get(y):
            return "Y has no CPU or composite kernel at runtime (it ran under another key: sparse inputs, ...)"
        if y in ctx["unlinked"]:
            return "Y's CPU/composite kernel is generated by torchgen (the yaml names it, the tree has no definition)"
        return "Y has no CPU/composite kernel linked in the tree"
    meta, kern = ctx["hits"].get((y, x, "meta")), ctx["hits"].get((y, x, "kernel"))
    if meta and meta[0] <= depth:
        return "X is reached from Y's structured meta function (TORCH_META_FUNC), where the walk does not start"
    if kern:
        return f"beyond depth {depth} (found within {deep} steps)"
    if meta:
        return f"X is reached from Y's structured meta function, beyond depth {depth}"
    if x not in ctx["called"]:
        return "X is never called through the ATen API in the tree (no calls_op row names it)"
    form = ctx["named"].get((y, x))
    if form == "symint":
        return "Y's kernel calls X_symint(...) (source text), which calls_op does not map to op X"
    if form:
        return "Y's kernel calls X(...) (source text), but calls_op has no row for that call"
    if x in ctx["operators"]:
        return "X is the op of a C++ Tensor operator (a * b is mul: TensorOperators.h); no calls_op row below Y names it"
    return f"no static path: X is called elsewhere in the tree, not within {deep} steps below Y's kernels"


def compare_graph(oracle: dict, con, tree: Path, args) -> dict:
    """The share of runtime edges the static graph has, and the rest by cause."""
    t0 = time.perf_counter()
    runtime_names = {o.split(".", 1)[0] for o in oracle["aten_ops"]}
    edges = [e for e in oracle["edges"] if e["caller"] != e["callee"]]
    not_cpp: dict[str, list[str]] = collections.defaultdict(list)
    measured: list[tuple[str, str]] = []
    for e in edges:
        cause = not_cpp_cause(e, oracle["cpu_kernels"], runtime_names)
        if cause:
            not_cpp[cause].append(f"{e['caller']} -> {e['callee']}")
        else:  # by op name: a profiler that names the overload ("aten::add.Tensor") gives its name too
            measured.append((e["caller"].split(".", 1)[0], e["callee"].split(".", 1)[0]))
    measured = sorted(set(measured))
    out = evaluate_walk(con, measured, args.depth, args.batch)
    hits = best_hits(out["oracle"], args.depth)
    found = {e: hits[(*e, "kernel")] for e in measured if (*e, "kernel") in hits}
    missed = [e for e in measured if e not in found]
    t_walk = time.perf_counter() - t0
    deep = args.depth + args.extra_depth
    deep_rows = evaluate_walk(con, missed, deep, args.batch)["oracle"] if missed else []
    ctx = miss_context(con, tree, oracle, out, missed)
    ctx["hits"] = best_hits(deep_rows, deep)
    misses: dict[str, list[str]] = collections.defaultdict(list)
    for y, x in missed:
        misses[graph_miss_cause(y, x, ctx, args.depth, deep)].append(f"{y} -> {x}")
    by_steps = collections.Counter(s for s, _ in found.values())
    resolved = sum(1 for _, r in found.values() if r == "resolved")
    return {
        "depth": args.depth, "runtime_edges": len(oracle["edges"]), "self_edges": len(oracle["edges"]) - len(edges),
        "not_cpp": grouped(not_cpp, args.examples), "denominator": len(measured),
        "found": len(found), "share": len(found) / len(measured) if measured else 1.0,
        "found_resolved": resolved, "share_resolved": resolved / len(measured) if measured else 1.0,
        "by_steps": dict(sorted(by_steps.items())),
        "misses": grouped(misses, args.examples),
        "seconds": {"walk": round(t_walk, 2), "diagnose": round(time.perf_counter() - t0 - t_walk, 2)},
    }


def miss_context(con, tree: Path, oracle: dict, out: dict, missed: list[tuple[str, str]]) -> dict:
    """The facts graph_miss_cause reads (all but "hits")."""
    kernels: dict[str, set[str]] = collections.defaultdict(set)
    for n, _k, fn in out["oracle_kernel"]:
        kernels[n].add(fn)
    callers = {y for y, _ in missed}
    texts = kernel_texts(con, tree, {fn for y in callers for fn in kernels.get(y, ())})
    named = {}
    for y, x in missed:
        forms = {named_call(texts.get(fn, ""), x) for fn in kernels.get(y, ())} - {None}
        if forms:
            named[(y, x)] = "symint" if "symint" in forms else "plain"
    return {
        "yaml_names": {r[0] for r in con.execute("SELECT DISTINCT name FROM op").fetchall()},
        "kernels": kernels,
        "unlinked": {n for n, _k, _kn in out["oracle_unlinked"]},
        "cpu_rows": oracle["cpu_kernels"],
        "called": {r[0] for r in con.execute("SELECT DISTINCT name FROM calls_op").fetchall()},
        "operators": operator_ops(tree),
        "named": named,
    }


# ------------------------------------------------------------------ report


def load_oracle(args, timings: dict) -> tuple[dict, bool]:
    """(oracle, cached): the cached oracle, else one collected in the side venv."""
    cache = Path(args.cache).expanduser()
    data = None if args.refresh else cached_oracle(cache)
    if data is not None:
        return data, True
    t = time.perf_counter()
    py = ensure_venv(Path(args.venv).expanduser(), not args.no_install)
    timings["venv"] = time.perf_counter() - t
    t = time.perf_counter()
    log(f"collecting the runtime oracle with {py} (every OpInfo, {args.samples} samples each)")
    run_collector(py, cache, args.samples)
    timings["collect"] = time.perf_counter() - t
    data = cached_oracle(cache)
    if data is None:
        raise UserError(f"the collector wrote no usable oracle to {cache}")
    return data, False


def oracle_summary(data: dict, cache: Path, cached: bool, examples: int) -> dict:
    fails = data["failures"]
    return {"torch_version": data["torch_version"], "path": str(cache), "cached": cached,
            "opinfos": data["opinfos"], "ran": data["opinfos"] - len(fails), "failed": len(fails),
            "failure_examples": dict(list(sorted(fails.items()))[:examples]),
            "samples_per_opinfo": data["samples_per_opinfo"], "collect_seconds": data["seconds"],
            "aten_ops_seen": len(data["ops_seen"]), "edges": len(data["edges"]),
            "inference_mode_failures": data["inference_mode_failures"]}


def _groups(groups: dict[str, dict], indent: str = "  ") -> None:
    for cause, g in groups.items():
        more = " ..." if g["count"] > len(g["examples"]) else ""
        print(f"{indent}{g['count']:>5}  {cause}: {', '.join(g['examples'])}{more}")


def _ratio(x: float | None) -> str:
    return f"{x:>6.3f}" if x is not None else f"{'-':>6}"


def print_report(rep: dict) -> None:
    o, g, d = rep["oracle"], rep["call_graph"], rep["dispatch"]
    print(f"runtime oracle: torch {o['torch_version']} ({'cached' if o['cached'] else 'collected'}: {o['path']})")
    print(f"  OpInfos {o['opinfos']}: ran {o['ran']}, failed {o['failed']} "
          f"({'; '.join(f'{k}: {v}' for k, v in o['failure_examples'].items())}); "
          f"{o['samples_per_opinfo']} samples each on CPU, {o['collect_seconds']} s")
    print(f"  aten ops seen {o['aten_ops_seen']}; nesting edges Y -> X {o['edges']} ({g['self_edges']} with Y = X, left out); "
          f"{o['inference_mode_failures']} samples failed their inference_mode rerun")
    print(f"\ncall graph: {g['found']}/{g['denominator']} runtime edges found within {g['depth']} steps = "
          f"{g['share']:.1%} ({g['found_resolved']} = {g['share_resolved']:.1%} by paths without a name guess)")
    print(f"  denominator: the {g['runtime_edges'] - g['self_edges']} edges with Y != X, less "
          f"{sum(v['count'] for v in g['not_cpp'].values())} that are no C++ call of the tree:")
    _groups(g["not_cpp"], "    ")
    if not g["not_cpp"]:
        print("    (none)")
    print("  found at step: " + ", ".join(f"{s}: {n}" for s, n in g["by_steps"].items()))
    print(f"  missed {g['denominator'] - g['found']}, by cause:")
    _groups(g["misses"], "    ")
    print("\ndispatch: `dispatch` facts and rules/dispatch.dl's dispatch_registered vs the runtime registrations")
    print(f"  {'key':<40} {'runtime':>7} | {'dispatch':>8} {'both':>5} {'prec':>6} {'recall':>6} | "
          f"{'registered':>10} {'prec':>6} {'recall':>6}")
    for row in d["keys"]:
        a, b = row["dispatch"], row["registered"]
        print(f"  {row['key']:<40} {a['runtime']:>7} | {a['static']:>8} {a['both']:>5} {_ratio(a['precision'])} "
              f"{_ratio(a['recall'])} | {b['static']:>10} {_ratio(b['precision'])} {_ratio(b['recall'])}")
    print("  `dispatch` misses (runtime kernels no dispatch fact names) and extras, by cause:")
    for key, groups in d["causes"].items():
        print(f"    {key}:")
        _groups(groups, "      ")
    print("\ntimings: " + ", ".join(f"{k} {v:.1f} s" for k, v in rep["timings"].items()))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", help="indexed PyTorch tree (default: the fetched 2.6.0 tree)")
    ap.add_argument("--db", help="fact DB file instead of --source")
    ap.add_argument("--venv", default=str(CACHE / f"oracle-venv-{TORCH_VERSION}"), help="side venv with torch==2.6.0")
    ap.add_argument("--cache", default=str(CACHE / f"oracle-{TORCH_VERSION}.json"), help="oracle JSON cache")
    ap.add_argument("--no-install", action="store_true", help="fail rather than create the side venv")
    ap.add_argument("--refresh", action="store_true", help="collect the oracle again")
    ap.add_argument("--samples", type=int, default=5, help="sample inputs per OpInfo")
    ap.add_argument("--depth", type=int, default=6, help="steps below Y's kernels")
    ap.add_argument("--extra-depth", type=int, default=4, help="further steps searched to explain misses")
    ap.add_argument("--batch", type=int, default=400, help="callers per engine evaluation")
    ap.add_argument("--examples", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    try:
        if args.depth < 1 or args.samples < 1 or args.batch < 1:
            raise UserError("--depth, --samples and --batch must be >= 1")
        rep = run(args)
    except UserError as err:
        print(f"runtime_oracle: error: {err}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(rep, indent=2))
    else:
        print_report(rep)
    return 0


def run(args) -> dict:
    timings: dict[str, float] = {}
    t = time.perf_counter()
    db, tree, con = open_index(args.source, args.db)  # before any download: a missing index fails at once
    timings["open index"] = time.perf_counter() - t
    oracle, cached = load_oracle(args, timings)
    t = time.perf_counter()
    log("comparing the dispatch facts")
    dispatch = compare_dispatch(oracle, con, db, args.examples)
    timings["dispatch"] = time.perf_counter() - t
    log("walking the static graph from the runtime callers (bench/runtime_oracle.dl)")
    graph = compare_graph(oracle, con, tree, args)
    timings["graph walk"], timings["graph diagnose"] = graph["seconds"]["walk"], graph["seconds"]["diagnose"]
    con.close()
    return {"oracle": oracle_summary(oracle, Path(args.cache).expanduser(), cached, args.examples),
            "call_graph": graph, "dispatch": dispatch, "timings": {k: round(v, 2) for k, v in timings.items()}}


if __name__ == "__main__":
    if sys.argv[1:2] == ["--collect"]:
        collect(Path(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 3)
        sys.stdout.flush()
        os._exit(0)  # skip torch's teardown
    sys.exit(main())
