"""Resolve the names of every file's FileFacts against the whole tree.

Note [Call resolution]: a call never gets a guessed edge. In order:
  1. qualified `a::b::f`: `S::a::b::f` for the caller's enclosing scopes S,
     innermost first, else the unique definition whose name ends in `a::b::f`;
  2. unqualified `f` (and `this->f`): `S::f` for the enclosing scopes S
     (classes, then namespaces), else the unique free function named `f`;
  3. member `x.f()` / `p->f()` where `x` is a parameter or local declared
     with class type T (`const Tensor& self`; `->` on a shared_ptr<T> /
     intrusive_ptr<T> reaches T): `f` in T or its base classes, T looked up
     like a qualified name; a T that is no class of the tree (std::vector)
     or has no such method in the tree is external ("type");
  4. `e.f()` where `e` is a call (`self.options().dtype()`) or an `auto`
     variable initialized by one: `e`'s type is the declared return type of
     the function `e` calls, resolved the same way (Note [Receiver
     expressions]); then as in 3 ("type");
  5. other member calls: the unique method named `f` in the tree ("member"),
     unless `f` is also a method of the C++ standard library (size, push_back,
     find, get, ... see STD_METHODS): on a receiver of unknown type that could
     be either, so no row at all (counted as "std_like_member_calls").
Names are looked up through aliases (Note [Aliases]): using-declarations,
`using namespace` (after the names declared in a scope), namespace and type
aliases. Anonymous and inline namespaces are transparent for lookup. Several
candidates give a `call_ambiguous` row with their number; none (std::,
CUDA runtime, third-party, macros) gives nothing and is counted as external.
`via` is "qualified", "scope", "unique", "type", "member", prefixed "macro-" when the
call sits inside a macro argument (an AT_DISPATCH_* lambda, TORCH_CHECK...).

Note [Overload edges]: several candidates that are all one name (one lookup
key) are overloads the fast tier cannot choose between: the call gets an edge
to each, `via` "overload" (a guess, rules/graph.dl's resolution), instead of
a `call_ambiguous` row. Overloads that the argument count leaves are told
apart by the argument types where the source shows them (Note [Typed
overloads], extractors/cpp/argtypes.py): one left is `via` "typed" (the
lookup's `via` when that was by name alone, "unique" or "member").

Example:
    >>> rows, stats, _ = resolve([scan_file("a.cpp", b"namespace at { void g(){} void f(){ g(); } }")])
    >>> rows["calls"]
    [('at::f', 'at::g', 'a.cpp', 1, 'scope')]
"""

from __future__ import annotations

import pickle
from collections import defaultdict
from collections.abc import Callable, Iterable
from itertools import compress
from operator import itemgetter
from pathlib import Path

from extractors.base import source_digest
from extractors.cpp import aten as _aten
from extractors.cpp import cache as _cache
from extractors.cpp.aten import EMPTY, AtenNames, base_name, op_of_call
from extractors.cpp.constructs import FALLBACK
from extractors.cpp.names import ANON, is_internal_part, split_sig
from extractors.cpp.overloads import Overloads
from extractors.cpp.scan import (
    ARG,
    FREE,
    GLOBAL,
    IN_MACRO,
    KERNEL,
    LAUNCH,
    MEMBER,
    NARGS_SHIFT,
    OBJ,
    OPER,
    RECV,
    STATIC,
    TYPED,
    FileFacts,
)

# Launch helpers (aten/src/ATen/native/cuda/Loops.cuh, CUDALoops.cuh, Reduce.cuh,
# JitLoops.cuh, IndexKernel.cu ...): a call launches the `__global__` kernels
# the helper's own definition reaches (Note [Helper launches]).
LAUNCH_HELPERS = frozenset({
    "gpu_kernel", "gpu_kernel_nocast", "gpu_kernel_with_scalars", "gpu_kernel_multiple_outputs",
    "opmath_gpu_kernel_with_scalars", "opmath_symmetric_gpu_kernel_with_scalars",
    "gpu_kernel_with_index", "gpu_reduce_kernel", "gpu_index_kernel", "jitted_gpu_kernel",
    "opmath_jitted_gpu_kernel_with_scalars", "launch_kernel", "launch_legacy_kernel",
    "launch_vectorized_kernel", "launch_unrolled_kernel",
})
# keys the resolved-rows cache: the resolver's source, and the scanner's through cache.VERSION (Note [Code in the cache key] in cache.py)
RESOLVE_VERSION = "resolve-45-" + source_digest(("resolve.py", "overloads.py", "incremental.py"),
                                                Path(__file__).parent) + "-" + _cache.VERSION
_HELPER_DEPTH = 8
# Lookups by name alone (a guess, rules/graph.dl): an overload the argument
# types pick keeps their `via` (Note [Typed overloads]).
_GUESSED_LOOKUPS = frozenset({"unique", "member"})
# Method names of the standard library's containers, strings, smart pointers,
# optionals, atomics and streams (Note [Call resolution], step 5).
STD_METHODS = frozenset("""
size empty begin end cbegin cend rbegin rend front back data at push_back pop_back
emplace_back emplace push_front pop_front insert erase clear reserve resize capacity
find count contains lower_bound upper_bound equal_range swap assign append c_str str
substr compare length get reset release lock unlock try_lock value has_value value_or
load store exchange fetch_add fetch_sub wait notify_one notify_all join detach
first second key operator() write read flush close open good fail what merge
extract sort unique reverse fill shrink_to_fit max_size use_count expired
""".split())
_POINTERS = frozenset({"shared_ptr", "unique_ptr", "intrusive_ptr", "weak_intrusive_ptr", "MaybeOwned", "optional"})
# Note [Op call resolution]: the classes whose methods and operators are ATen
# ops (TensorBody.h, TensorBase.h), and the type of a call of a generated op.
TENSOR_CLASSES = frozenset({"at::Tensor", "at::TensorBase"})
_TENSOR_ONLY = frozenset({"at::Tensor"})
_TENSOR = (("at", "Tensor"), (), "_")
_NO_TYPE = ("", (), "")
_MISS = object()  # an alias that names no one type: found, and unknown
_BUILTINS = frozenset("""
void bool char short int long unsigned signed float double size_t ssize_t ptrdiff_t
intptr_t uintptr_t half auto
""".split())

_CONTAINERS = frozenset({"vector", "SmallVector", "ArrayRef", "array", "List", "IListRef", "deque", "OptionalArrayRef"})


def _builtin(name: str) -> bool:
    return name in _BUILTINS or (name.endswith("_t") and name.lstrip("u").startswith("int"))


class LookupKey:
    """`qual` without its transparent parts: anonymous and inline namespaces
    and a static function's file part (Note [Internal linkage ids]:
    `at::native::CPU_CAPABILITY::(anonymous:F)::f` is looked up as `at::native::f`).

    Note [Lookup keys kept]: a key, and a scope's list, is a function of the
    name and the transparent namespaces alone, so a new Index (a function
    added: Note [Incremental resolution]) takes the last one's LookupKey
    with its memo when the tree's inline namespaces are the same: the
    tree's 72,000 keys were computed again, 0.06 s of its 0.4 s.
    """

    def __init__(self, inline: Iterable[str] = ()) -> None:
        self.transparent = frozenset({ANON, *inline})
        self.memo: dict[str, str] = {}
        self.scopes: dict[str, list[str]] = {}  # _scopes' memo

    def __call__(self, qual: str) -> str:
        hit = self.memo.get(qual)
        if hit is None:
            parts = split_sig(qual)[0].split("::")  # Note [Overload ids]: the suffix too
            if "(" in qual or self.transparent & set(parts):
                hit = "::".join(p for p in parts if p not in self.transparent and not is_internal_part(p))
            else:
                hit = qual
            self.memo[qual] = hit
        return hit


class Index:
    """Definitions of the tree by lookup key and by short name.

    Note [Index patched]: a function added, removed or retyped changes what
    the Index reads of its file, so the last run's Index no longer serves
    (its key digests every file's Parts.index, Note [Incremental
    resolution]). Built again from every file, it took 0.64 s of a new
    function's 1.3 s cpp layer in a watcher (profiled, the 2.6.0 tree), and a
    new process read every file's FileFacts for it first. When the edit
    changed definitions only (its files' classes, stubs, inline namespaces,
    aliases and includes as they were: the same Parts.shape), `patch` makes
    the last Index the new one:
      - each table keyed by a name (by_key, the by-name and kernel tables,
        returns, internal, header_only, tparam_uses, api_arity) holds, per
        name, a function of that name's definitions: the entries of the
        names the edit's files define, before or after, are computed again
        from the files that define them now (`_def_files`, kept for this),
        whose FileFacts alone are read;
      - what reads across names is computed again where the edit reaches
        it: the twins (`twin_sigs`) of the lookup keys it touched; the
        scopes (`namespaces`), whole only when a key lost its last
        definition; the header aliases, which look names up in `by_key` and
        `namespaces`, resolved again (after their additions to `by_key` are
        taken out).
    The Index reads names without their overload suffix, so it does not
    depend on which names are overloaded; the Overloads are patched alike
    (`Overloads.patched`: a name's overloads are a function of its
    definitions). A watcher's Index is patched in place, out of its memo
    until it is the new key's. tests/test_cpp.py checks every kind of edit,
    in a watcher and in a new process, against the Index built from every
    file and the rows of a fresh run; tests/test_cpp_real.py the same on the
    real tree.
    """

    def __init__(self, facts: list[FileFacts], key: LookupKey | None = None) -> None:
        """`key`: a LookupKey of the last Index, taken with what it computed
        when its inline namespaces are these facts' (its answers are a
        function of them: Note [Lookup keys kept])."""
        inline = [n for f in facts for n in f.inline_ns]
        if key is None or key.transparent != frozenset({ANON, *inline}):
            key = LookupKey(inline)
        self.key = _lookup_key = key
        self.by_key: dict[str, set[str]] = defaultdict(set)
        self.free_by_name: dict[str, set[str]] = defaultdict(set)
        self.methods_by_name: dict[str, set[str]] = defaultdict(set)
        self.kernels: dict[str, set[str]] = defaultdict(set)  # lookup key -> quals
        self.kernels_by_name: dict[str, set[str]] = defaultdict(set)
        self.stubs: dict[str, set[str]] = defaultdict(set)
        self.stubs_by_name: dict[str, set[str]] = defaultdict(set)
        classes: set[str] = set()
        self.class_by_name: dict[str, set[str]] = defaultdict(set)
        self.bases: dict[str, set[tuple[str, ...]]] = defaultdict(set)
        self.fields: dict[str, dict[str, tuple]] = defaultdict(dict)
        defs: list[tuple[str, str, int]] = []
        self.returns: dict[str, set[tuple]] = defaultdict(set)
        global_rows: list[tuple] = []
        # Note [Internal linkage]: fns and class keys of a source file's anonymous
        # namespace or `static`, by the files defining them; a header's are seen
        # by every file. Where a name has several candidates, one defined in
        # headers only counts only for the files whose #includes reach one of
        # them (GridSampler.cpp calls GridSampler.h's static within_bounds_3d,
        # not cuda/GridSampler.cuh's)
        self.internal: dict[str, set[str]] = defaultdict(set)
        self.internal_cls: dict[str, set[str]] = defaultdict(set)
        # fns defined in headers only (fn -> headers): a file sees them through its #includes
        def_files: dict[str, set[str]] = defaultdict(set)
        self._includes = [(f.file, f.includes) for f in facts]
        self._targets: dict[str, tuple[str, ...]] | None = None
        self._closure: dict[str, frozenset[str]] = {}
        public: set[str] = set()
        public_cls: set[str] = set()
        self.tparam_uses: dict[str, dict[int, set[str]]] = defaultdict(lambda: defaultdict(set))
        for f in facts:  # Note [Overload ids]: resolution works on the plain names
            for (qual, _n, _l, _fl), ret in zip(f.defs, f.returns, strict=True):
                self.returns[split_sig(qual)[0]].add(ret)
            for cls, (bases, fields) in f.classes:
                key = _lookup_key(cls)
                classes.add(key)
                if "(anonymous" in cls and not f.file.endswith(HEADERS):
                    self.internal_cls[key].add(f.file)
                else:
                    public_cls.add(key)
                self.class_by_name[key.rpartition("::")[2]].add(key)
                self.bases[key].update(bases)
                for name, parts, inner in fields:
                    self.fields[key].setdefault(name, (parts, inner))
            for qual, name, _line, flags in f.defs:
                qual = split_sig(qual)[0]
                defs.append((qual, name, flags))
                if (flags & STATIC or "(anonymous" in qual) and not f.file.endswith(HEADERS):
                    self.internal[qual].add(f.file)
                else:  # external linkage, or a header's: seen by every file (that includes it)
                    public.add(qual)
                def_files[qual].add(f.file)
            for stub, _line in (*f.stub_decls, *f.stub_defines):
                key = _lookup_key(stub)
                self.stubs[key].add(stub)
                self.stubs_by_name[key.rpartition("::")[2]].add(stub)
            if f.aliases and f.file.endswith(HEADERS):
                global_rows.extend(a for a in f.aliases if not a[5])
            for i, pidx, names in f.tparam_uses:
                self.tparam_uses[split_sig(f.defs[i][0])[0]][pidx].update(names)
        for qual, name, flags in defs:
            key = _lookup_key(qual)
            self.by_key[key].add(qual)
            container = key.rpartition("::")[0]
            (self.methods_by_name if container in classes else self.free_by_name)[name].add(qual)
            if flags & KERNEL:
                self.kernels[key].add(qual)
                self.kernels_by_name[name].add(qual)
        self.classes = classes
        public |= public_cls
        for qual in public & self.internal.keys():
            del self.internal[qual]
        for key in public & self.internal_cls.keys():
            del self.internal_cls[key]
        self._public_cls = frozenset(public_cls)  # Note [Index patched]: what a patch reads of the classes
        self._def_files = {q: _defined(fs) for q, fs in def_files.items()}
        self._global_rows = global_rows
        self.internal = dict(self.internal)
        self.twin_sigs = _twin_sigs(facts, self.by_key, self.internal, _lookup_key)
        self.header_only = {q: frozenset(fs) for q, fs in def_files.items() if all(x.endswith(HEADERS) for x in fs)}
        self.internal_cls = dict(self.internal_cls)
        self.namespaces = _scopes_of((*self.by_key, *classes))  # every scope that holds a definition or class
        self.tparam_uses = {k: dict(v) for k, v in self.tparam_uses.items()}  # plain dicts: it pickles
        self.api_arity = _api_arity(facts)
        self.aliases = Aliases(global_rows, self, None)
        for key, quals in self.aliases.fn.items():  # a header's using-declarations are everyone's
            self.by_key[key] |= quals

    def patch(self, before: list[FileFacts], after: list[FileFacts],
              facts_of: Callable[[Iterable[str]], list[FileFacts]]) -> None:
        """Make this Index the one of the tree where the files of `before`
        are now `after` (renamed FileFacts, as the Index's), when only their
        definitions changed: their classes, stubs, inline namespaces,
        aliases and includes are as they were (Note [Index patched]).
        `facts_of(files)`: the tree's FileFacts of those files now."""
        key = self.key
        plains = {split_sig(d[0])[0] for f in (*before, *after) for d in f.defs}
        old_names: dict[str, set[str]] = defaultdict(set)
        for f in before:
            for qual, name, _line, _flags in f.defs:
                old_names[split_sig(qual)[0]].add(name)
        files = {f.file for f in (*before, *after)}
        old_pre = self._pre_alias()  # by_key as it was before the aliases joined it
        keys = {key(q) for q in plains}
        was_twin = {q for k in keys for q in self._twins(old_pre, k)}
        for q in plains:  # which files define each name now
            now = {x for x in _files(self._def_files.get(q)) if x not in files}
            now.update(f.file for f in after if any(split_sig(d[0])[0] == q for d in f.defs))
            if now:
                self._def_files[q] = _defined(now)
            else:
                self._def_files.pop(q, None)
        by_file = {f.file: f for f in facts_of(sorted({x for q in plains for x in _files(self._def_files.get(q))}))}
        defs: dict[str, list[tuple]] = defaultdict(list)  # plain -> (file, qual, name, flags, return, sig, tparams)
        for f in by_file.values():
            tparams: dict[int, list] = defaultdict(list)
            for i, pidx, names in f.tparam_uses:
                tparams[i].append((pidx, names))
            for i, ((qual, name, _line, flags), ret, sig) in enumerate(
                    zip(f.defs, f.returns, f.sigs or ((),) * len(f.defs), strict=True)):
                plain = split_sig(qual)[0]
                if plain in plains:
                    defs[plain].append((f.file, qual, name, flags, ret, sig, tparams.get(i, ())))
        by_key = old_pre
        spaces = {"at", *(f"at::{ns}" for ns in _aten.BACKEND_NS)}
        for q in plains:
            k, ds = key(q), defs.get(q, [])
            container = k.rpartition("::")[0]
            by_name = self.methods_by_name if container in self.classes else self.free_by_name
            for name in old_names.get(q, set()) | {d[2] for d in ds}:
                _discard(by_name, name, q)
                _discard(self.kernels_by_name, name, q)
            _discard(by_key, k, q)
            _discard(self.kernels, k, q)
            for table in (self.returns, self.internal, self.header_only, self.tparam_uses, self.api_arity):
                table.pop(q, None)
            if not ds:
                continue
            by_key[k].add(q)
            for _file, _qual, name, flags, ret, _sig, tparams in ds:
                by_name[name].add(q)
                self.returns[q].add(ret)
                if flags & KERNEL:
                    self.kernels[k].add(q)
                    self.kernels_by_name[name].add(q)
                for pidx, names in tparams:
                    self.tparam_uses.setdefault(q, {}).setdefault(pidx, set()).update(names)
            private = [d[0] for d in ds if (d[3] & STATIC or "(anonymous" in d[1]) and not d[0].endswith(HEADERS)]
            if len(private) == len(ds) and q not in self._public_cls:
                self.internal[q] = set(private)
            if all(d[0].endswith(HEADERS) for d in ds):
                self.header_only[q] = frozenset(d[0] for d in ds)
            if q.rpartition("::")[0] in spaces:
                self.api_arity[q] = frozenset((s[1], s[2]) if s else (0, -1) for *_x, s, _t in ds)
        # Note [Internal linkage]: the twins of the keys the edit touched
        now_twin = {q for k in keys for q in self._twins(by_key, k)}
        for q in was_twin - now_twin:
            self.twin_sigs.pop(q, None)
        todo = now_twin - (was_twin - plains)
        self.twin_sigs.update(_def_sigs(facts_of(sorted({x for q in todo for x in _files(self._def_files[q])})), todo))
        if any(k not in by_key for k in keys):  # a scope may have lost its last definition
            self.namespaces = _scopes_of((*by_key, *self.classes))
        else:
            self.namespaces |= _scopes_of(keys)
        self.by_key = by_key
        self.aliases = Aliases(self._global_rows, self, None)
        for k, quals in self.aliases.fn.items():
            self.by_key[k] |= quals

    def _pre_alias(self) -> defaultdict[str, set[str]]:
        """by_key without what the header aliases added (Note [Index patched])."""
        key = self.key
        for k in self.aliases.fn:
            kept = {q for q in self.by_key.get(k, ()) if q in self._def_files and key(q) == k}
            if kept:
                self.by_key[k] = kept
            else:
                self.by_key.pop(k, None)
        return self.by_key

    def _twins(self, by_key: dict[str, set[str]], k: str) -> set[str]:
        """The definitions under key `k` whose parameter lists `twin_sigs` holds."""
        quals = by_key.get(k, ())
        if len(quals) > 1 and any(q in self.internal for q in quals):
            return set(quals)
        return set()


    def included(self, file: str) -> frozenset[str]:
        """`file` and the tree files its #include closure reaches (Note [Internal linkage])."""
        hit = self._closure.get(file)
        if hit is None:
            if self._targets is None:
                self._targets = _include_targets(self._includes)
            seen, todo = {file}, [file]
            while todo:
                for t in self._targets.get(todo.pop(), ()):
                    if t not in seen:
                        seen.add(t)
                        todo.append(t)
            hit = self._closure[file] = frozenset(seen)
        return hit


def _scopes_of(keys: Iterable[str]) -> set[str]:
    """Every scope that encloses one of `keys` (`a::b::f`: a::b, a)."""
    out: set[str] = set()
    for k in keys:
        k = k.rpartition("::")[0]
        while k and k not in out:
            out.add(k)
            k = k.rpartition("::")[0]
    return out


def _defined(files: set[str]) -> str | tuple[str, ...]:
    """An `Index._def_files` value: the one file (most names have one), else the files in order."""
    return next(iter(files)) if len(files) == 1 else tuple(sorted(files))


def _files(defined: str | tuple[str, ...] | None) -> tuple[str, ...]:
    """The files of an `Index._def_files` value."""
    return () if defined is None else (defined,) if isinstance(defined, str) else defined


def _discard(table: dict[str, set[str]], k: str, q: str) -> None:
    """`q` out of `table[k]`, and `k` out of `table` once its set is empty."""
    quals = table.get(k)
    if quals is not None:
        quals.discard(q)
        if not quals:
            del table[k]


def _include_targets(includes: list[tuple[str, tuple[str, ...]]]) -> dict[str, tuple[str, ...]]:
    """file -> the tree files its `#include`s name: the includer's own
    directory first, else every file whose path ends with the include (a bare
    name only in the includer's directory: `<vector>` is none of the tree's)."""
    files = {rel for rel, _ in includes}
    by_tail: dict[str, list[str]] = defaultdict(list)
    for rel in files:
        parts = rel.split("/")
        for k in range(1, len(parts)):
            by_tail["/".join(parts[k:])].append(rel)
        by_tail[rel].append(rel)
    out: dict[str, tuple[str, ...]] = {}
    for rel, incs in includes:
        here = rel.rpartition("/")[0]
        targets: list[str] = []
        for inc in incs:
            local = f"{here}/{inc}" if here else inc
            targets.extend([local] if local in files else by_tail.get(inc, ()) if "/" in inc else ())
        out[rel] = tuple(targets)
    return out


HEADERS = (".h", ".hpp", ".cuh", ".hh", ".inl")


class Aliases:
    """Note [Aliases]: the aliases in force, by the lookup key they declare.

    A header's namespace-scope aliases hold wherever it is included (the
    Index's, for every file); those of a source file, and those written in a
    function body, hold in that file only (a Resolver's `local`).
      type_alias  `using N = T;` / `typedef T N;`, and `using a::C;` of a type
      fn          `using a::b::f;` of functions: N::f -> the definitions of a::b::f
      ns_alias    `namespace n = a::b;`: N::n -> a::b
      using_ns    `using namespace a::b;` in N: N -> {a::b}, for a second
                  lookup pass after the names declared in N itself
    """

    def __init__(self, rows: Iterable[tuple], ix: Index, base: Aliases | None) -> None:
        key = ix.key
        self.type_alias: dict[str, set[tuple]] = defaultdict(set)  # key -> (target parts, inner, scope)
        self.alias_by_name: dict[str, set[str]] = defaultdict(set)
        self.fn: dict[str, set[str]] = defaultdict(set)
        self.ns_alias: dict[str, set[tuple[str, ...]]] = defaultdict(set)
        self.using_ns: dict[str, set[str]] = defaultdict(set)
        using = []
        for kind, scope, name, target, inner, _local in rows:
            at = f"{scope}::{name}" if scope else name
            if kind == "type":
                self.type_alias[key(at)].add((target, inner, scope))
                self.alias_by_name[name].add(key(at))
            elif kind == "using":
                using.append((scope, name, target))
            elif kind == "namespace":
                self.ns_alias[key(at)].add(target)
            elif kind == "using-namespace":
                ns = _namespace_of(target, scope, ix)
                if ns is not None:
                    self.using_ns[key(scope)].add(ns)
        for _ in range(2):  # twice, for chains
            for scope, name, target in using:
                k = key(f"{scope}::{name}" if scope else name)
                hit = _by_scope(ix.by_key, _scopes(f"{scope}::_" if scope else "_", key), "::".join(target))
                if hit is None and base is not None:
                    hit = _by_scope(base.fn, _scopes(f"{scope}::_" if scope else "_", key), "::".join(target))
                if hit and not hit <= self.fn[k]:
                    self.fn[k] |= hit
        for scope, name, target in using:  # `using c10::IntArrayRef;`: no function, so a type
            k = key(f"{scope}::{name}" if scope else name)
            if not self.fn.get(k) and k not in ix.classes and not self.type_alias.get(k):
                self.type_alias[k].add((target, (), scope))
                self.alias_by_name[name].add(k)
        self.ns_alias_names = frozenset(k.rpartition("::")[2] for k in self.ns_alias)


def _namespace_of(target: tuple[str, ...], scope: str, ix: Index) -> str | None:
    """The namespace `using namespace target;` written in `scope` names."""
    written = "::".join(target)
    for s in _scopes(f"{scope}::_" if scope else "_", ix.key):
        k = f"{s}::{written}" if s else written
        if k in ix.namespaces:
            return k
    return None


def _scopes(caller: str, key: LookupKey) -> list[str]:
    """Enclosing scopes of `caller`'s body, innermost first, ending with ""."""
    hit = key.scopes.get(caller)
    if hit is None:
        parts = key(caller).split("::")[:-1]
        hit = key.scopes[caller] = ["::".join(parts[:k]) for k in range(len(parts), -1, -1)]
    return hit


def _by_scope(table: dict[str, set[str]], scopes: list[str], name: str) -> set[str] | None:
    for s in scopes:
        hit = table.get(f"{s}::{name}" if s else name)
        if hit:
            return hit
    return None


def _suffix(cands: set[str], written: str, key: LookupKey) -> set[str]:
    tail = "::" + written
    return {q for q in cands if key(q).endswith(tail) or key(q) == written}


class Resolver:
    """Resolves written names from a given scope; memoized per (name, scope)."""

    def __init__(self, index: Index) -> None:
        self.ov = Overloads({})  # resolve() sets the tree's (Note [Overload ids])
        self.ix = index
        self.aten: AtenNames = EMPTY
        self.local: Aliases | None = None
        self.file = ""
        self._shared = self._memos = {}  # (table, key) -> result, for every file
        self._per_file: dict = {}  # results that depend on the file (Note [Internal linkage])
        self._file_bound = False  # the computation under way read something only some files see
        self._computing: set = set()
        self._set_aliases()

    def _memo(self, key: tuple, compute, *args):
        """compute(*args), memoized by `key`: for every file, or for this file
        only when the computation met a definition of internal linkage."""
        hit = self._memos.get(key, _MISS)
        if hit is not _MISS:
            return hit
        hit = self._per_file.get(key, _MISS)
        if hit is not _MISS:
            self._file_bound = True
            return hit
        if key in self._computing:  # a cycle (of aliases): no answer
            return None
        outer, self._file_bound = self._file_bound, False
        self._computing.add(key)
        try:
            hit = compute(*args)
        finally:
            self._computing.discard(key)
        (self._per_file if self._file_bound else self._memos)[key] = hit
        self._file_bound = outer or self._file_bound
        return hit

    def _seen(self, quals: set[str] | None) -> set[str] | None:
        """The definitions among `quals` the current file sees (Note [Internal linkage])."""
        if not quals:
            return quals
        internal = self.ix.internal
        if internal.keys().isdisjoint(quals):
            return self._included(quals) if len(quals) > 1 else quals
        self._file_bound = True
        seen = {q for q in quals if q not in internal or self.file in internal[q]}
        own = {q for q in seen if q in internal}
        if own and own != seen and self._hides(own, seen - own):
            return own
        return self._included(seen) if len(seen) > 1 else seen

    def _hides(self, own: set[str], others: set[str]) -> bool:
        """The file's own internal definitions `own` take every parameter list
        `others` take: C++ would find such a pair ambiguous, so the file sees
        only its own (mode_kernel_impl in TensorCompareKernel.cpp's anonymous
        namespace, not cuda/TensorModeKernel.cpp's at::native one); an
        overload of another parameter list stays a candidate."""
        sigs = self.ix.twin_sigs
        mine = set().union(*(sigs.get(q, {"?"}) for q in own))
        return "?" in mine or all(sigs.get(q, {"?"}) <= mine | {"?"} for q in others)

    def _included(self, quals: set[str]) -> set[str]:
        """Of several candidates, those defined in headers only when the
        current file's #includes reach one of those headers; all of them when
        that leaves none (Note [Internal linkage])."""
        hdr = self.ix.header_only
        if hdr.keys().isdisjoint(quals):
            return quals
        self._file_bound = True
        inc = self.ix.included(self.file)
        kept = {q for q in quals if q not in hdr or not hdr[q].isdisjoint(inc)}
        return kept or quals

    def _class_seen(self, k: str) -> bool:
        files = self.ix.internal_cls.get(k)
        if files is None:
            return True
        self._file_bound = True
        return self.file in files

    def use_file(self, f: FileFacts | None) -> None:
        """Resolve from file `f` on (None: from no file): its own aliases (a
        source file's, and those in bodies, Note [Aliases]) join the headers';
        memos are kept per such file (the shared ones hold for every file without)."""
        self.file = f.file if f is not None else ""
        self._per_file = {}
        rows = [a for a in f.aliases if a[5] or not f.file.endswith(HEADERS)] if f is not None else ()
        if rows:
            self.local = Aliases(rows, self.ix, self.ix.aliases)
            self._memos = {}
            self._set_aliases()
        elif self.local is not None:
            self.local = None
            self._memos = self._shared
            self._set_aliases()

    def _aliases(self) -> tuple[Aliases, ...]:
        return self._alias_sets

    def _set_aliases(self) -> None:
        sets = (self.local, self.ix.aliases) if self.local is not None else (self.ix.aliases,)
        self._alias_sets = sets
        self._dirs = [a.using_ns for a in sets if a.using_ns]
        self._ns_names = frozenset().union(*(a.ns_alias_names for a in sets))
        self._type_aliases = [a.type_alias for a in sets]

    def _directed(self, scopes: list[str], parts: tuple[str, ...], probe):
        """The first probe(k) hit for `parts` found through a `using namespace`
        of an enclosing scope (C++ looks there after the names declared)."""
        dirs = self._dirs
        if not dirs:
            return None
        head = "::".join(parts[:-1])
        for s in scopes:
            at = f"{s}::{head}" if s and head else s or head
            for d in dirs:
                got = d.get(at)
                for ns in sorted(got) if got else ():
                    hit = probe(f"{ns}::{parts[-1]}")
                    if hit:
                        return hit
        return None

    def cls(self, parts: tuple[str, ...], scope_of: str) -> str | None:
        """The tree class written `parts` inside `scope_of`, or None; through
        type aliases and using-declarations (Note [Aliases])."""
        found = self.type_of_name(parts, scope_of)
        return found[0] if found and found[0] in self.ix.classes else None

    def type_of_name(self, parts: tuple[str, ...], scope_of: str, strict: bool = False) -> tuple | None:
        """(class key or the final written parts, template arg parts, their
        scope) of the type written `parts` inside `scope_of`, aliases
        followed; None when no class or alias of the tree has that name.
        `strict`: a bare name must be found from the scope (not as the one
        class of that name anywhere: a local alias may shadow it)."""
        key = ("type", parts, scope_of.rpartition("::")[0], strict)
        hit = self._memos.get(key, _MISS)
        return hit if hit is not _MISS else self._memo(key, self._type_of_name, parts, scope_of, strict)

    def _type_of_name(self, parts: tuple[str, ...], scope_of: str, strict: bool) -> tuple | None:
        parts = self.unalias_ns(parts, scope_of)
        written = "::".join(parts)
        scopes = _scopes(scope_of, self.ix.key)
        found = None
        for s in scopes:
            found = self._type_at(f"{s}::{written}" if s else written)
            if found is not None:
                break
        if found is None:
            found = self._directed(scopes, parts, self._type_at)
        if found is None and not (strict and len(parts) == 1):
            tail = "::" + written
            cands = {c for c in self.ix.class_by_name.get(parts[-1], ())
                     if (c.endswith(tail) or c == written) and self._class_seen(c)}
            if len(cands) == 1:
                found = (next(iter(cands)), (), "")
            elif not cands:
                aliases = {k for a in self._aliases() for k in a.alias_by_name.get(parts[-1], ())
                           if k.endswith(tail) or k == written}
                found = self._follow(next(iter(aliases))) if len(aliases) == 1 else None
        return found

    def _type_at(self, k: str) -> tuple | None:
        """The type lookup key `k` names: a class, or what an alias `k` names."""
        if k in self.ix.classes and self._class_seen(k):
            return (k, (), "")
        if any(k in t for t in self._type_aliases):
            return self._follow(k) or _NO_TYPE
        return None

    def _follow(self, alias: str) -> tuple | None:
        """What type alias `alias` names; one alias written in several headers
        (at::TensorList in ATen_fwd.h and TensorBody.h) must name one type. A
        cycle of aliases names nothing (type_of_name's guard)."""
        found = set()
        for target, inner, scope in sorted(next(a.type_alias[alias] for a in self._aliases() if alias in a.type_alias)):
            at = f"{scope}::_" if scope else "_"
            hit = self.type_of_name(target, at)
            if hit is None:  # an alias of a type outside the tree (std::vector<T>)
                found.add(("::".join(target), inner, at))
            else:
                found.add((hit[0], hit[1] or inner, hit[2] if hit[1] else at))
        if len({(k, i) for k, i, _s in found}) != 1:
            return None
        return min(found)

    def _norm(self, parts: tuple[str, ...], inner: tuple[str, ...], scope: str) -> tuple:
        """(parts, inner, scope) of a declared type with its alias followed
        when it has no template argument of its own (TensorList -> ArrayRef<Tensor>)."""
        if inner or not parts:
            return parts, inner, scope
        hit = self.type_of_name(parts, scope)
        if hit is None or not hit[1]:
            return parts, inner, scope
        return tuple(hit[0].split("::")), hit[1], hit[2]

    def unalias_ns(self, parts: tuple[str, ...], scope_of: str) -> tuple[str, ...]:
        """`F::gelu` where `namespace F = torch::nn::functional;` is visible: torch::nn::functional::gelu."""
        if len(parts) < 2 or parts[0] not in self._ns_names:
            return parts
        for s in _scopes(scope_of, self.ix.key):
            for a in self._aliases():
                hit = a.ns_alias.get(f"{s}::{parts[0]}" if s else parts[0])
                if hit:
                    return (*next(iter(hit)), *parts[1:]) if len(hit) == 1 else parts
        return parts

    def kind(self, parts: tuple[str, ...], scope_of: str) -> tuple[str | None, str]:
        """Note [Op call resolution]: ("tensor", class) when the type written
        `parts` is at::Tensor / at::TensorBase (or derives from one), ("other",
        class) when it is known to be another type (a tree class, std::, a
        builtin), (None, "") when unknown (a template parameter, a type outside
        the tree)."""
        found = self.type_of_name(parts, scope_of, strict=True)
        if found is None:  # a Tensor class found only by its name anywhere still counts
            loose = self.type_of_name(parts, scope_of)
            if loose is not None and loose[0] in self.ix.classes and self.is_tensor(loose[0]):
                found = loose
        if found is not None:
            if found[0] in self.ix.classes:
                return ("tensor" if self.is_tensor(found[0]) else "other"), found[0]
            parts = tuple(found[0].split("::"))
        if parts[0] == "std" or (len(parts) == 1 and _builtin(parts[0])):
            return "other", ""
        return None, ""

    def generated_call(self, cls: str, name: str) -> str:
        """Note [Op call resolution]: what `t.name()` on a `cls` (at::Tensor
        or a subclass) calls when `name` is a method torchgen generates into
        class Tensor: "op" (the generated method, which hides TensorBase's
        own `name`: TensorBase::fill_, ::to), "both" (class Tensor also
        defines `name` in the tree: a hand-written overload, Tensor::to(TypeMeta),
        may be the one called), "tree" (class Tensor brings TensorBase's in,
        `using TensorBase::size;`: size(int64_t) is the tree's), or "" (not a
        generated method, or not a Tensor)."""
        if name not in self.aten.generated or not self.is_tensor(cls, _TENSOR_ONLY):
            return ""

        def own(c: str) -> str | None:
            quals = self.ix.by_key.get(f"{c}::{name}") if c not in TENSOR_CLASSES or c == "at::Tensor" else None
            if not quals:
                return None
            return "both" if any(self.ix.key(q).rpartition("::")[0] == c for q in quals) else "tree"

        hits = self._in_class_graph(cls, own)
        return "op" if not hits else "both" if "both" in hits else "tree"

    def is_tensor(self, cls: str, which: frozenset[str] = TENSOR_CLASSES) -> bool:
        """`cls` is one of `which` or derives from one."""
        return self._memo(("tensor", cls, which), lambda: bool(self._in_class_graph(cls, lambda c: c in which)))

    def _typed(self, parts: tuple[str, ...], scope_of: str) -> tuple[str, int, str]:
        return self.method_of(self.cls(parts[:-1], scope_of), parts[-1])

    def method_of(self, cls: str | None, name: str) -> tuple[str, int, str]:
        """Method `name` of class `cls` or of its bases: the nearest level of
        the base-class graph that has one; several there is ambiguous."""
        def compute() -> tuple[str, int, str]:
            hits = self._in_class_graph(cls, lambda c: self._seen(self.ix.by_key.get(f"{c}::{name}")))
            return _pick(set().union(*hits), "type") if hits else ("", 0, "type")

        return self._memo(("method", cls, name), compute)

    def _in_class_graph(self, cls: str | None, probe) -> list:
        """probe(c) results, non-empty, for the classes of the first level
        (cls, then its bases, then theirs...) where any is non-empty."""
        seen, frontier = set(), [cls] if cls else []
        for _ in range(8):
            found, nxt = [], []
            for c in sorted(set(frontier) - seen):
                seen.add(c)
                hit = probe(c)
                if hit:
                    found.append(hit)
                for base in sorted(self.ix.bases.get(c) or self.aten.class_bases.get(c, ())):
                    b = self.cls(base, f"{c}::_")
                    if b:
                        nxt.append(b)
            if found:
                return found
            frontier = nxt
        return []

    def function(self, parts: tuple[str, ...], member: int, scope_of: str) -> tuple[str, int, str]:
        """(callee, candidate count, via) for a call written `parts` inside
        `scope_of` (a fn, or a scope + "::_"); callee "" when unresolved."""
        key = ("fn", parts, member, scope_of.rpartition("::")[0])
        hit = self._memos.get(key, _MISS)
        return hit if hit is not _MISS else self._memo(key, self._function, parts, member, scope_of)

    def _function(self, parts: tuple[str, ...], member: int, scope_of: str) -> tuple[str, int, str]:
        ix = self.ix
        name = parts[-1]
        if member not in (TYPED, MEMBER):
            parts = self.unalias_ns(parts, scope_of)
        if member == TYPED:
            return self._typed(parts, scope_of)
        if member == RECV:
            raise ValueError("RECV calls go through Resolver.receiver_call")
        if member == MEMBER:
            cands = self._seen(ix.methods_by_name.get(name, set()))
            if len(cands) == 1 and name in STD_METHODS:
                return "", 0, "std"
            return _pick(cands, "member")
        return _pick(*self._free_candidates(parts, scope_of))

    def _free_candidates(self, parts: tuple[str, ...], scope_of: str) -> tuple[set[str], str]:
        """(the definitions a call `parts` (no member access) written inside
        `scope_of` may name, via): those of the innermost scope that has any."""
        ix = self.ix
        scopes = _scopes(scope_of, self.ix.key)
        written = "::".join(parts)
        seen = lambda k: self._seen(ix.by_key.get(k))  # noqa: E731
        hit = (self.local is not None and _by_scope(self.local.fn, scopes, written)) or self._by_scope(scopes, written)
        if not hit:
            hit = self._directed(scopes, parts, seen)
        if not hit and len(parts) > 1:  # `C::m(...)` with m a method of C's base (C++ qualified lookup in a class)
            cls = self.cls(parts[:-1], scope_of)
            hits = self._in_class_graph(cls, lambda c: self._seen(ix.by_key.get(f"{c}::{parts[-1]}"))) if cls else ()
            hit = set().union(*hits) if hits else None
        if hit:
            return hit, "qualified" if len(parts) > 1 else "scope"
        if len(parts) > 1:
            cands = ix.free_by_name.get(parts[-1], set()) | ix.methods_by_name.get(parts[-1], set())
            return self._seen(_suffix(cands, written, ix.key)), "qualified"
        return self._seen(ix.free_by_name.get(parts[-1], set())), "unique"

    def overloads(self, parts: tuple[str, ...], member: int, scope_of: str) -> set[str]:
        """Note [Overload edges]: the candidates of an ambiguous call `parts`
        (no member access) when they are all one name (one lookup key: a
        file's `static` overload beside a public one, a header's internal
        function per CPU_CAPABILITY header), else the empty set."""
        if member in (TYPED, MEMBER, RECV):
            return set()
        cands = self._free_candidates(self.unalias_ns(parts, scope_of), scope_of)[0] or set()
        return cands if len({self.ix.key(c) for c in cands}) == 1 else set()

    # Note [Constructor calls]: `C(args)` where no function of the tree is
    # named C but class C is constructs a C: the call is an edge to C's
    # constructor (via "scope" / "qualified", as the class was found), when
    # the argument count or types choose one constructor; a class with
    # several fitting constructors (IValue, Scalar, Vectorized) gets no edge
    # rather than a guess per constructor. A name of the generated ATen API
    # (`at::complex(...)`, the op, beside the class c10::complex) is the op.
    def constructor(self, parts: tuple[str, ...], scope_of: str) -> tuple[str, int]:
        """(constructor, candidate count) of `C(...)` where no function is
        named C but class C of the tree is: its constructors, all overloads
        of one id (Note [Constructor calls]); ("", 0) when none is defined."""
        cls = self.cls(parts, scope_of)
        if cls is None:
            return "", 0
        quals = self._seen(self.ix.by_key.get(f"{cls}::{cls.rpartition('::')[2]}"))
        return _pick(quals or set(), "")[:2]

    def global_function(self, parts: tuple[str, ...]) -> tuple[str, int, str]:
        """(callee, candidate count, via) of a call written `::parts(...)`:
        only the global namespace's (and its using-declarations') `parts` is
        named, never a function of the same name in another namespace
        (`::exp(x)` is the C library's, not at::exp)."""
        return _pick(self._by_scope([""], "::".join(parts)) or set(), "qualified")

    def directed_inside(self, parts: tuple[str, ...], scope_of: str) -> bool:
        """Some definition of `parts` is reached through a `using namespace`
        written in a namespace enclosing `scope_of` (not the global one)."""
        scopes = _scopes(scope_of, self.ix.key)[:-1]
        return bool(self._directed(scopes, parts, lambda k: self._seen(self.ix.by_key.get(k))))

    def _by_scope(self, scopes: list[str], name: str) -> set[str] | None:
        """_by_scope on the tree's definitions the current file sees: another
        source file's internal `f` is no declaration of the scope. An
        unqualified name in a class's scope is found in its bases too (C++
        class scope lookup: `build()` in a method of a TensorIteratorBase
        subclass is TensorIteratorBase::build), the bases of the classes
        torchgen generates for structured kernels included."""
        unqualified = "::" not in name
        for s in scopes:
            if unqualified and (s in self.ix.classes or s in self.aten.class_bases):  # Note [Structured kernel classes]
                hits = self._in_class_graph(s, lambda c: self._seen(self.ix.by_key.get(f"{c}::{name}")))
                hit = set().union(*hits) if hits else None
            else:  # a written inline namespace is transparent as in the keys (`CPU_CAPABILITY::abs_kernel`)
                hit = self._seen(self.ix.by_key.get(self.ix.key(f"{s}::{name}" if s else name)))
            if hit:
                return hit
        return None

    def receiver_call(self, name: str, recv: tuple, caller: str) -> tuple[str, int, str]:
        """`e.name()` with receiver encoding `recv` = (arrow, enc), from `caller`."""
        def compute() -> tuple[str, int, str]:
            cls = self._class_of(recv, caller, 0)
            return self.method_of(cls, name) if cls else self.function((name,), MEMBER, caller)

        return self._memo(("recv", name, recv, caller.rpartition("::")[0]), compute)

    def _class_of(self, recv: tuple, caller: str, depth: int) -> str | None:
        """The tree class of receiver (arrow, enc), or None when unknown."""
        typed = self.recv_type(recv, caller, depth)
        return self.cls(typed[0], typed[2]) if typed else None

    def recv_type(self, recv: tuple, caller: str, depth: int = 0) -> tuple | None:
        """(type parts, scope they are written in) of receiver (arrow, enc): a
        smart pointer's pointee for `->`; None when unknown."""
        arrow, enc = recv
        typed = self._type_of(enc, caller, depth)
        if typed is None:
            return None
        parts, inner, scope = self._norm(*typed) if arrow else typed
        if arrow and inner and parts[-1] in _POINTERS:
            parts = inner
        elif arrow and parts:  # `x->f()` on a class with operator-> (TensorArg -> const Tensor*)
            op, _n, _v = self.method_of(self.cls(parts, scope), "operator->")
            rets = self.ix.returns.get(op, ()) if op else ()
            if len(rets) == 1 and next(iter(rets)):
                parts, scope = next(iter(rets))[0], op
        return (parts, (), scope) if parts else None

    def _type_of(self, enc: tuple, caller: str, depth: int) -> tuple | None:
        """(type parts, template arg parts, scope they are written in) of enc."""
        if depth > 4:
            return None
        kind = enc[0]
        if kind == "this":
            container = self.ix.key(caller).rpartition("::")[0]
            return (tuple(container.split("::")), (), "") if container in self.ix.classes else None
        if kind == "v":
            return enc[1], enc[2], caller
        if kind == "m":
            return self._field_type(self._class_of((False, enc[1]), caller, depth + 1), enc[2])
        if kind == "i":
            sub = self._type_of(enc[1], caller, depth + 1)
            if sub is None:
                return None
            sub = self._norm(*sub)
            if not sub[1] or sub[0][-1] not in _CONTAINERS:
                return _TENSOR if self.kind(sub[0], sub[2])[0] == "tensor" else None  # t[i]
            return sub[1], (), sub[2]
        if kind == "d":  # *p: a smart pointer's pointee, a class's operator*, else p's own type
            sub = self._type_of(enc[1], caller, depth + 1)
            if sub is None:
                return None
            parts, inner, scope = self._norm(*sub)
            if inner and parts[-1] in _POINTERS:
                return inner, (), scope
            op, _n, _v = self.method_of(self.cls(parts, scope), "operator*")
            rets = self.ix.returns.get(op, ()) if op else ()
            if len(rets) == 1 and next(iter(rets)):
                return (*next(iter(rets)), op)
            return None if op else (parts, inner, scope)
        if kind == "o":  # a Tensor operator's result is a Tensor
            kinds = [self.enc_kind(e, caller) for e in enc[2:]]
            return _TENSOR if "tensor" in kinds else None
        if kind != "c":
            return None
        _c, parts, code, sub, nargs = enc
        if code == FREE:
            fn, _n, _via = self.function(parts, FREE, caller)
            if not fn:  # `Foo(...)`: a constructor call gives a Foo; `at::empty(...)` a Tensor
                cls = self.cls(parts, caller)
                if cls:
                    return tuple(cls.split("::")), (), ""
                op = op_of_call(parts, self.aten)
                spelled = op == parts[-1]  # at::max(...), not at::max_out(...): no out= overload
                return _TENSOR if op and self.aten.one_tensor(op, nargs if spelled else None) else None
        else:
            typed = self.recv_type(sub, caller, depth + 1)
            cls = self.cls(typed[0], typed[2]) if typed else None
            fn = self.method_of(cls, parts[-1])[0] if cls else ""
            n = nargs + 1 if nargs is not None else None  # self counted
            if cls and self.aten.one_tensor(parts[-1], n) and self.is_tensor(cls) and (
                    not fn or self.generated_call(cls, parts[-1]) in ("op", "both")):
                return _TENSOR  # t.mul(2): a generated Tensor method
        rets = self.ix.returns.get(fn, set()) if fn else set()
        if len(rets) != 1:
            return None
        ret = next(iter(rets))
        return (ret[0], ret[1], fn) if ret else None

    def enc_kind(self, enc: tuple | None, caller: str) -> str | None:
        """kind() of the type of receiver encoding `enc` ("tensor", "other", None)."""
        if enc is None:
            return None
        def compute() -> str | None:
            typed = self.recv_type((False, enc), caller)
            return self.kind(typed[0], typed[2])[0] if typed else None

        return self._memo(("kind", enc, caller.rpartition("::")[0]), compute)

    def _field_type(self, cls: str | None, name: str) -> tuple | None:
        """(type parts, template arg parts, scope) of field `name` of `cls` or
        of its nearest base that has one (several there: unknown)."""
        hits = self._in_class_graph(cls, lambda c: (c, self.ix.fields[c][name]) if name in self.ix.fields.get(c, {}) else None)
        if len({h[1] for h in hits}) != 1:
            return None
        c, (parts, inner) = hits[0]
        return parts, inner, f"{c}::_"

    def named(self, table: dict[str, set[str]], by_name: dict[str, set[str]],
              parts: tuple[str, ...], scope_of: str) -> str:
        """A kernel or stub written `parts` inside `scope_of`, or ""."""
        written = "::".join(parts)
        hit = None
        for s in _scopes(scope_of, self.ix.key):
            hit = self._seen(table.get(f"{s}::{written}" if s else written))
            if hit:
                break
        if not hit:
            hit = self._seen(_suffix(by_name.get(parts[-1], set()), written, self.ix.key))
        return next(iter(hit)) if hit and len(hit) == 1 else ""


def _twin_sigs(facts: list[FileFacts], by_key: dict[str, set[str]], internal: dict[str, set[str]],
               key: LookupKey) -> dict[str, frozenset[str]]:
    """{plain id: its definitions' parameter lists ("?" unknown)} of the
    functions that share a lookup key with a source file's internal one
    (Note [Internal linkage]: which of them the file sees)."""
    keys = {key(q) for q in internal}
    return _def_sigs(facts, {q for k in keys for q in by_key.get(k, ()) if len(by_key[k]) > 1})


def _def_sigs(facts: Iterable[FileFacts], wanted: set[str]) -> dict[str, frozenset[str]]:
    """{plain id: the parameter lists ("?" unknown) of its definitions in `facts`} of the ids of `wanted`."""
    out: dict[str, set[str]] = defaultdict(set)
    for f in facts:
        for (qual, _n, _l, _fl), sig in zip(f.defs, f.sigs or ((),) * len(f.defs), strict=True):
            plain = split_sig(qual)[0]
            if plain in wanted:
                out[plain].add(sig[0] if sig else "?")
    return {q: frozenset(v) for q, v in out.items()}


def _api_arity(facts: list[FileFacts]) -> dict[str, frozenset[tuple[int, int]]]:
    """{plain id: its definitions' (fewest, most or -1) arguments} of the
    tree's functions in the namespaces of the generated API (`at`, `at::cpu`,
    ...: Note [Generated API beside the tree's]); (0, -1) when a definition's
    parameter list is unknown."""
    spaces = {"at", *(f"at::{ns}" for ns in _aten.BACKEND_NS)}
    out: dict[str, set[tuple[int, int]]] = defaultdict(set)
    for f in facts:
        for (qual, _n, _l, _fl), sig in zip(f.defs, f.sigs or ((),) * len(f.defs), strict=True):
            plain = split_sig(qual)[0]
            if plain.rpartition("::")[0] in spaces:
                out[plain].add((sig[1], sig[2]) if sig else (0, -1))
    return {k: frozenset(v) for k, v in out.items()}


def _pick(cands: set[str], via: str) -> tuple[str, int, str]:
    if len(cands) == 1:
        return next(iter(cands)), 1, via
    return "", len(cands), via


def resolve(facts: list[FileFacts], digests: dict[str, str] | None = None,
            previous: dict | None = None, aten: AtenNames = EMPTY, memo: dict | None = None,
            index_cache: Path | None = None) -> tuple[dict[str, list[tuple]], dict[str, int], dict]:
    """All rows of the cpp layer (relation -> sorted rows), counts for the
    report, and the state to pass as `previous` next time: `resolve_tree` of
    extractors/cpp/incremental.py (Note [Incremental resolution]) over `facts`."""
    from extractors.cpp.incremental import TreeFacts, resolve_tree

    rows, stats, state = resolve_tree(TreeFacts.of(facts), digests, previous, aten, memo, index_cache)
    return {rel: sorted(rs) for rel, rs in rows.items()}, stats, state


def _overload_rows(ov: Overloads, rows) -> None:
    """overload and overload_param rows (Note [Overload ids]), by name: in
    the same order whether `ov` was computed or patched."""
    for plain, ids in sorted(ov.table.items()):
        for fn in ids:
            sig = fn[len(plain):]
            types = sig[1:-1].split(", ") if sig != "()" else []
            rows["overload"].append((fn, plain, len(types)))
            rows["overload_param"].extend((fn, pos, t) for pos, t in enumerate(types))


def _cached_index(cache: Path, key: str) -> Index | None:
    try:
        with open(cache / f"index-{key}.pkl", "rb") as fh:
            ix = pickle.load(fh)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, ValueError, TypeError):
        return None
    return ix if isinstance(ix, Index) else None


def _keep_index(cache: Path, key: str, ix: Index) -> None:
    """Pickle `ix` as the cache's one Index (atomically; older ones removed)."""
    from torchtalk.atomic import atomic_open

    for old in cache.glob("index-*.pkl"):
        old.unlink(missing_ok=True)
    if ix._targets is None:  # every run needs them: kept with it
        ix._targets = _include_targets(ix._includes)
    with atomic_open(cache / f"index-{key}.pkl") as fh:
        pickle.dump(ix, fh, protocol=pickle.HIGHEST_PROTOCOL)


def _file_rows(f: FileFacts, rv: Resolver) -> tuple[dict, dict, list]:
    """(rows by relation, counts, launch-helper call sites) of one file."""
    rows: dict[str, list[tuple]] = defaultdict(list)
    stats: dict[str, int] = defaultdict(int)
    helper_sites: list[tuple[str, str, str, int]] = []
    rv.use_file(f)
    _defs_rows(f, rows)
    _calls_rows(f, rv, rows, stats, helper_sites)
    _construct_rows(f, rv, rows)
    stats["files"] += 1
    stats["files_with_errors"] += f.errors > 0
    return dict(rows), dict(stats), helper_sites


def _defs_rows(f: FileFacts, rows) -> None:
    for qual, name, line, flags in f.defs:
        rows["func"].append((qual, name, f.file, line, f.lang))
        if flags & KERNEL:
            rows["kernel"].append((qual, name, f.file, line))


def _calls_rows(f: FileFacts, rv: Resolver, rows, stats, helper_sites) -> None:
    ix = rv.ix
    for idx, parts, member, line, flags, recv, argt in f.calls:
        caller = f.defs[idx][0]
        if member == OPER:
            for op in _operator_ops(rv, parts[0], recv, caller):
                rows["calls_op"].append((caller, op, f.file, line, "typed"))
            continue
        if member == ARG:  # Note [Stub arguments]
            if parts[-1] in ix.stubs_by_name:
                stub = rv.named(ix.stubs, ix.stubs_by_name, parts, caller)
                if stub:
                    rows["stub_call"].append((caller, stub, f.file, line))
            continue
        if member == OBJ:
            via = "macro-functor" if flags & IN_MACRO else "functor"
            for callee in _functor_calls(rv, parts, recv, caller):
                ids = rv.ov.pick(callee, None)[0]
                v = via if len(ids) == 1 else via + "-overload"  # each of several: a guess
                rows["calls"].extend((caller, i, f.file, line, v) for i in ids)
            continue
        stats["call_sites"] += 1
        name = parts[-1]
        if member not in (MEMBER, TYPED) and name in ix.stubs_by_name:
            stub = rv.named(ix.stubs, ix.stubs_by_name, parts, caller)
            if stub:
                rows["stub_call"].append((caller, stub, f.file, line))
                continue
        nargs = (flags >> NARGS_SHIFT) - 1 if flags >> NARGS_SHIFT else None
        if flags & LAUNCH:
            kernel = rv.named(ix.kernels, ix.kernels_by_name, parts, caller)
            kernels = rv.ov.pick(kernel, nargs)[0] if kernel and _visible(ix, kernel, f.file) else ("::".join(parts),)
            rows["launches"].extend((caller, k, f.file, line, "<<<>>>") for k in kernels)
        if member == RECV:
            callee, n, via = rv.receiver_call(name, recv, caller)
        elif flags & GLOBAL:
            callee, n, via = rv.global_function(parts)
        else:
            callee, n, via = rv.function(parts, member, caller)
        ctor = False
        if not callee and n == 0 and member == FREE and not _aten_op(rv, parts, member, "", 0, via, recv, caller)[0]:
            callee, n = rv.constructor(parts, caller)  # `AdvancedIndex(self, indices)`: a construction
            ctor = bool(callee or n)
            via = via if not ctor else "qualified" if len(parts) > 1 else "scope"
        if callee and not _visible(ix, callee, f.file):
            callee, n = "", 0  # another source file's static / anonymous-namespace function
        if callee and member == FREE and not flags & GLOBAL:
            op, op_via = _generated_beside(rv, parts, callee, nargs, caller)
            if op_via == "qualified":
                callee, n = "", 0  # the tree's function is hidden or takes no such count
        else:
            scope = "" if flags & GLOBAL else caller  # `::f(...)` is not looked up in the caller's namespaces
            op, op_via = _aten_op(rv, parts, member, callee, n, via, recv, scope)
        if op:
            if op_via == "typed+tree":  # the op, and the tree's own overload of it (Tensor::to(TypeMeta))
                op_via, callee_too = "typed", True
            else:
                callee_too = False
            rows["calls_op"].append((caller, op, f.file, line, op_via))
            if callee and (via == "member" or op_via == "typed") and not callee_too:
                continue  # Note [ATen API calls]: t.mm() is Tensor::mm, not the tree's TensorBase::mm
        if callee or n > 1:
            same = {callee} if callee else rv.overloads(parts, member, caller)  # Note [Overload edges]
            ids = sorted({i for c in same for i in rv.ov.pick(c, nargs)[0]})
            if len(ids) > 1 and argt and not op:  # Note [Typed overloads]: the argument types may
                typed, one = rv.ov.by_types(tuple(ids), argt)
                ids = list(typed)
                if one:
                    stats["typed_overload_calls"] += 1
                    via = via if via in _GUESSED_LOOKUPS else "typed"
            if ctor and (len(ids) != 1 or not callee and via != "typed"):
                continue  # Note [Constructor calls]: only a constructor the count or the types choose
            if len(ids) > 1 or not callee and via != "typed":  # Note [Overload ids]: the count did not choose
                via = "overload"
            if flags & IN_MACRO:
                via = "macro-" + via
            rows["calls"].extend((caller, c, f.file, line, via) for c in ids)
            if name in LAUNCH_HELPERS:
                helper_sites.extend((caller, c, f.file, line) for c in ids)
            if not ids:
                rows["call_ambiguous"].append((caller, "::".join(parts), n, f.file, line))
        elif via == "std":
            stats["std_like_member_calls"] += 1
        else:
            stats["external_call_sites"] += 1
            if name in LAUNCH_HELPERS:
                helper_sites.append((caller, "", f.file, line))


def _aten_op(rv: Resolver, parts: tuple[str, ...], member: int, callee: str, n: int, via: str,
             recv: tuple | None, caller: str) -> tuple[str | None, str]:
    """(the op an ATen API call names, how it is known: calls_op's `via`)
    (Note [ATen API calls], Note [Op call resolution]), or (None, "")."""
    if member in (MEMBER, RECV, TYPED):
        name = parts[-1]
        if name not in rv.aten.methods and name.endswith("_symint"):
            name = name.removesuffix("_symint")  # t.expand_symint(size) is Tensor::expand's SymInt spelling
        if name not in rv.aten.methods:
            return None, ""
        if member == TYPED:
            kind, cls = rv.kind(parts[:-1], caller)
        elif member == RECV:
            typed = rv.recv_type(recv, caller)
            kind, cls = rv.kind(typed[0], typed[2]) if typed else (None, "")
        else:
            kind, cls = None, ""
        if kind == "tensor":
            if not callee:
                return name, "typed"
            how = rv.generated_call(cls, name)
            return (name, "typed" if how == "op" else "typed+tree") if how in ("op", "both") else (None, "")
        if kind == "other":
            return None, ""
        unresolved = not callee and n <= 1 and via != "std"
        return (name, "guess") if unresolved or via == "member" else (None, "")
    if callee:
        return None, ""
    op = op_of_call(parts, rv.aten)
    if op is None and len(parts) == 1 and n == 0 and member == FREE and caller.startswith("at::"):
        op = base_name(parts[0], rv.aten)  # `aminmax(self)` in namespace at: no tree function, so at::aminmax
    return op, "qualified"


# Note [Generated API beside the tree's]: torchgen declares `at::X` for every
# op X with a function variant (Functions.h), so a free call that names X
# and resolves to a function of the tree may still call the op:
#   - `at::X(...)` (or `at::cpu::X(...)`, ...) naming a tree function in that
#     same namespace (NumericUtils.h's `at::exp(T)`, Functions.h's
#     `at::var(const Tensor&, int)`) calls one of an overload set holding
#     both. When no tree definition takes the call's argument count, it is
#     the op's (calls_op "qualified", no calls row: at::var(self, dim,
#     unbiased, keepdim)); else which one is up to the argument types: the op
#     is a "guess" beside the tree's calls row (at::exp(target)).
#   - `X(...)` unqualified inside namespace at, resolved to a function outside
#     namespace at (the global `rsqrt` of a test header): C++'s lookup stops
#     at the innermost scope declaring X, and at::X is declared before the
#     global namespace is reached, so the call is the op's ("qualified"),
#     unless a `using namespace` of an enclosing namespace reaches another X,
#     which C++ sees beside at::X (GridSamplerKernel.cpp's `using namespace
#     at::vec` and clamp_min(Vec(0), in)): then a "guess", the tree's X kept.
#     A tree function found in `at` itself is the overload set above; one in
#     a scope inside `at` (at::native::X) hides at::X and stays the callee;
#     one of another namespace (a using-declaration) is a "guess".


def _generated_beside(rv: Resolver, parts: tuple[str, ...], callee: str, nargs: int | None,
                      caller: str) -> tuple[str | None, str]:
    """(op X, "qualified" when the call is the op's alone, "guess" when it
    may be the op's or the tree's `callee`), or (None, "") when the call is
    the tree's (Note [Generated API beside the tree's])."""
    plain = split_sig(callee)[0]
    if len(parts) == 1:
        op = base_name(parts[0], rv.aten)
        if op not in rv.aten.functions or not rv.ix.key(caller).startswith("at::"):
            return None, ""
        scope = rv.ix.key(plain).rpartition("::")[0]
        if scope == "at":
            return _by_arity(rv, op, plain, nargs)
        if scope.split("::")[0] == "at":
            return None, ""
        if scope:  # another namespace: a using-declaration in at?
            return op, "guess"
        return op, "guess" if rv.directed_inside(parts, caller) else "qualified"
    op = op_of_call(parts, rv.aten)
    if op not in rv.aten.functions:
        return None, ""
    return _by_arity(rv, op, plain, nargs)


def _by_arity(rv: Resolver, op: str, plain: str, nargs: int | None) -> tuple[str | None, str]:
    """(op, "qualified") when no tree definition of `plain` takes `nargs`
    arguments, else (op, "guess"); (None, "") when `plain` is no function of
    the generated API's namespaces."""
    arities = rv.ix.api_arity.get(plain)
    if arities is None:
        return None, ""
    if nargs is not None and not any(lo <= nargs and (hi < 0 or nargs <= hi) for lo, hi in arities):
        return op, "qualified"
    return op, "guess"


def _visible(ix: Index, fn: str, file: str) -> bool:
    """Note [Internal linkage]: a `static` or anonymous-namespace function of
    a source file is seen by that file only (a header's by its includers: all);
    lookups never find another file's, so this is only a last check."""
    files = ix.internal.get(fn)
    return not files or file in files


def _functor_calls(rv: Resolver, callee: tuple[str, ...], obj: tuple, caller: str) -> set[str]:
    """Note [Functor arguments]: `f(C{...}, ...)` / `f(C(...), ...)` with C a
    class of the tree passes an object f calls on the caller's behalf: the
    methods f's body calls on that parameter when f is a function template
    whose parameter has a template parameter's type (sortCommon(Sorter sorter)
    calls `sorter.sort(...)`: C::sort), else C::operator() (gpu_kernel(iter,
    Functor()), std::sort(b, e, Less{})). One calls row per method, via "functor".
    An explicit template argument `f<C, RNG>(...)` (index < 0, scan.py's
    _TARG) counts only through f's uses of that template parameter
    (`K<RNG>()(self, p, gen)` in bernoulli_impl_: BernoulliStub::operator();
    `F::compute_indices_weights(...)` in upsample_generic_Nd_kernel_impl:
    HelperInterpNearest::compute_indices_weights)."""
    index, parts, braced = obj
    cls = rv.cls(parts, caller)
    if cls is None:
        return set()
    if not braced:  # `C(...)`: a construction only if no function is named C
        fn, n, _via = rv.function(parts, FREE, caller)
        if fn or n > 1:
            return set()
    target, _n, _via = rv.function(callee, FREE, caller)
    uses = rv.ix.tparam_uses[target].get(index, ()) if target and target in rv.ix.tparam_uses else ()
    found = {rv.method_of(cls, m)[0] for m in uses or (("operator()",) if index >= 0 else ())}
    return {fn for fn in found if fn and _visible(rv.ix, fn, rv.file)}


def _operator_ops(rv: Resolver, sym: str, encs: tuple, caller: str) -> tuple[str, ...]:
    """The ops a C++ operator calls when an operand is a Tensor (Note [Tensor
    operators]); () when none is known to be one (never a guess)."""
    lhs = rv.enc_kind(encs[0], caller) if encs[0] is not None else None
    if sym in _aten.BINARY_OPS:  # `Scalar op Tensor` when only the right one is
        if lhs == "tensor":
            ops = _aten.BINARY_OPS[sym][0]
        elif encs[1] is not None and rv.enc_kind(encs[1], caller) == "tensor":
            ops = _aten.BINARY_OPS[sym][1]
        else:
            return ()
    elif lhs != "tensor":
        return ()
    elif sym[0] == "u":
        ops = _aten.UNARY_OPS.get(sym[1:], ())
    elif sym in _aten.COMPOUND_OPS:
        ops = _aten.COMPOUND_OPS[sym]
    else:  # t[i], t[i] = v
        rhs = rv.enc_kind(encs[1], caller) if encs[1] is not None else None
        if sym == "[]":
            ops = _aten.INDEX_BY_TENSOR_OPS if rhs == "tensor" else _aten.INDEX_OPS
        else:
            ops = _aten.INDEX_OPS + _aten.ASSIGN_OPS["tensor" if rhs == "tensor" else "scalar"]
    return tuple(op for op in ops if op in rv.aten.ops)
    if lhs != "tensor":
        return ()
    rhs = rv.enc_kind(encs[1], caller) if encs[1] is not None and sym in ("[]", "=[]") else None
    if sym in _aten.BINARY_OPS:
        pass
    elif sym.startswith("u"):
        ops = _aten.UNARY_OPS.get(sym[1:], ()) if lhs == "tensor" else ()
    elif sym in _aten.COMPOUND_OPS:
        ops = _aten.COMPOUND_OPS[sym] if lhs == "tensor" else ()
    elif sym == "[]":
        ops = (_aten.INDEX_BY_TENSOR_OPS if rhs == "tensor" else _aten.INDEX_OPS) if lhs == "tensor" else ()
    elif sym == "=[]":
        ops = _aten.INDEX_OPS + _aten.ASSIGN_OPS["tensor" if rhs == "tensor" else "scalar"] if lhs == "tensor" else ()
    else:
        ops = ()
    return tuple(op for op in ops if op in rv.aten.ops)


def aten_visible(facts: list[FileFacts]) -> set[str]:
    """Note [Who can call ops]: the files that see ATen's C++ API: their
    #include closure reaches the definition of at::Tensor / at::TensorBase or
    a header torchgen generates (an `ATen/...` or `torch/...` include no file
    of the tree answers). The others (all of c10/) cannot call an op, whatever
    a method they call is named. A file without any #include is a fragment
    compiled in its includer's context, and counts as seeing it; in a tree
    that does not define at::Tensor at all, every file does.

    Example:
        >>> aten_visible([scan_file("c10/a.cpp", b'#include <c10/b.h>')])
        set()
    """
    files = {f.file for f in facts}
    by_tail: dict[str, list[str]] = defaultdict(list)
    for rel in files:
        parts = rel.split("/")
        for k in range(len(parts)):
            by_tail["/".join(parts[k:])].append(rel)
    includers: dict[str, list[str]] = defaultdict(list)
    seeds: set[str] = set()
    for f in facts:
        if any(c in TENSOR_CLASSES for c, _info in f.classes):
            seeds.add(f.file)
        here = f.file.rpartition("/")[0]
        for inc in f.includes:
            local = f"{here}/{inc}" if here else inc
            # `<vector>`, `<cuda.h>`: a bare name is a file of the includer's own directory or none of the tree's
            targets = [local] if local in files else by_tail.get(inc, ()) if "/" in inc else ()
            if not targets and inc.startswith(("ATen/", "torch/")):
                seeds.add(f.file)
            for t in targets:
                includers[t].append(f.file)
    if not any(c in TENSOR_CLASSES for f in facts for c, _info in f.classes):
        return files  # a tree without ATen's Tensor (a snippet): no file can be ruled out
    seen, frontier = set(seeds), list(seeds)
    while frontier:
        nxt = []
        for t in frontier:
            for inc in includers.get(t, ()):
                if inc not in seen:
                    seen.add(inc)
                    nxt.append(inc)
        frontier = nxt
    return seen | {f.file for f in facts if not f.includes}  # a fragment, in its includer's context


def _construct_rows(f: FileFacts, rv: Resolver, rows) -> None:
    ix = rv.ix

    def fn_of(parts: tuple[str, ...], scope: str) -> tuple[str, ...]:
        """The function a construct names: each overload of it (Note [Overload ids])."""
        if parts in (("<lambda>",), ("nullptr",)) or parts[0].startswith("<"):
            return parts[:1]
        callee, _n, _via = rv.function(parts, 0, f"{scope}::_" if scope else "_")
        return rv.ov.pick(callee, None)[0] if callee else ("::".join(parts),)

    for py, target, line, scope in f.binds:
        rows["binds"].extend((py, fn, "pybind", f.file, line) for fn in fn_of(target, scope))
    for ns, op, schema, line in f.lib_defs:
        rows["lib_def"].append((ns, op, schema, f.file, line))
    for ns, op, key, target, line, scope in f.lib_impls:
        if op == FALLBACK:  # Note [Fallback rows]
            rows["lib_fallback"].extend((ns, key, fn, f.file, line) for fn in fn_of(target, scope))
        else:
            rows["lib_impl"].extend((ns, op, key, fn, f.file, line) for fn in fn_of(target, scope))
    for name, kind, fn, line in f.impl_funcs:
        rows["impl_func"].append((name, kind, fn, f.file, line))
    for stub, line in f.stub_decls:
        rows["stub_decl"].append((stub, f.file, line))
    for stub, line in f.stub_defines:
        rows["stub_define"].append((stub, f.file, line))
    for stub_parts, key, fn, line, scope in f.stub_regs:
        stub = rv.named(ix.stubs, ix.stubs_by_name, stub_parts, f"{scope}::_" if scope else "_")
        rows["stub_register"].extend((stub or "::".join(stub_parts), key, g, f.file, line) for g in fn_of(fn, scope))


def _helper_launches(sites, rows, known: tuple | None = None) -> tuple:
    """Note [Helper launches]: a call of a launch helper (`gpu_kernel(iter,
    lambda)`) launches whatever `__global__` kernels the helper's definition
    reaches through resolved non-member calls between CUDA-file functions and
    `<<<>>>` launches (for gpu_kernel:
    vectorized_elementwise_kernel, unrolled_elementwise_kernel,
    elementwise_kernel); one `launches` row per kernel, `how` = the helper.

    Returns (the functions the walks read the calls of, helper -> the
    kernels it reaches, sorted): `known`, the last run's, is used instead of
    walking again when it holds every helper of `sites` (Note [Helper
    launches kept] in incremental.py says when the caller may pass it)."""
    # the three relations are in `rows` (a defaultdict), with or without rows, either way
    func, calls, out = rows["func"], rows["calls"], rows["launches"]
    if known is not None and all(helper in known[1] for _c, helper, _f, _l in sites if helper):
        walked, memo = known
    else:
        walked, memo = _helper_walks(sites, func, calls, out)
    for caller, helper, file, line in sites:
        if not helper:
            continue
        how = split_sig(helper)[0].rpartition("::")[2]
        for kernel in memo[helper]:
            out.append((caller, kernel, file, line, how))
    return walked, memo


def _helper_walks(sites, func, calls, launches) -> tuple[frozenset[str], dict[str, tuple[str, ...]]]:
    """(the functions whose calls a walk from a helper reads, helper -> the
    kernels it reaches) for the helpers of `sites`, over the tree's rows."""
    cuda_fns = set(map(itemgetter(0), compress(func, map("cuda".__eq__, map(itemgetter(4), func)))))
    helpers = {helper for _c, helper, _f, _l in sites if helper}
    # a walk from a helper reads the steps of the helpers and of the CUDA functions
    # it reaches only: those calls are picked in C's loops (230K calls, 40 -> 8 ms)
    walked = frozenset(cuda_fns | helpers)
    succ: dict[str, set[str]] = defaultdict(set)
    for caller, callee, _f, _l, via in compress(calls, map(walked.__contains__, map(itemgetter(0), calls))):
        if callee in cuda_fns and "member" not in via:
            succ[caller].add(callee)
    launched: dict[str, set[str]] = defaultdict(set)
    for host, kernel, _f, _l, _how in launches:
        launched[host].add(kernel)
    memo = {helper: tuple(sorted(_reach_kernels(helper, succ, launched))) for helper in helpers}
    return walked, memo


def _reach_kernels(start: str, succ, launched) -> set[str]:
    seen, frontier, found = {start}, [start], set()
    for _ in range(_HELPER_DEPTH):
        nxt = []
        for fn in frontier:
            found |= launched.get(fn, set())
            for c in succ.get(fn, ()):
                if c not in seen:
                    seen.add(c)
                    nxt.append(c)
        frontier = nxt
    return found
