"""Per-TU parse cache, keyed by content hashes.

Note [Precise cache]: one JSON file per TU under `<cache_dir>/tu/`. An entry
holds the TU's `TuResult`, the hash of the main file, the hash of its flags,
and the hash of every file the TU read. It is reused only when all of them
still match, so editing a header re-parses exactly the TUs that include it
(issue 9's `affected` reads the same deps, `TuCache.deps`, to map a header to
its TUs). Entries are written to a temp file and renamed, so a killed run
never leaves a half-written entry.

Note [Shared dependency sets]: most of what a TU reads is the same for
hundreds of TUs: the files of the common PCH (~830), those the op map was
read from (api.py), the SDK and standard-library headers. Repeating them in
every entry made a run after one edit check 6.7M stored hashes in 1,828
entries (12.7 s). So an entry lists these by reference: `sets` holds the ids
of dependency sets, each a `{file: hash}` stored once in `tu/sets/<id>.json`,
its id the hash of its content (so a set never changes once written, and
writing it is idempotent); `deps` holds only the TU's own files of the tree
and of the generated headers (and the result no longer repeats them as its
`includes`: half of a large entry). The shared sets are the PCH's and the op map's
(given by the caller) and the TU's includes outside the tree and the
generated headers (system, standard library, SDKs: many TUs include the
same ones beyond the PCH). A run checks each set once and hashes each
distinct file once (FileHashes).
An entry of the previous layout (layout 1: every dep inline, the walk's
version under "version") is still read and checked as it was, then
rewritten in this layout, so a cache built before the change is not parsed
again; a layout-2 entry keeps the walk's version under "walk", so that code
which knows only layout 1 (and would not check the sets) ignores it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path

from extractors.clang.worker import TuResult
from torchtalk.atomic import atomic_open

VERSION = 16  # bump when the walk's output changes (4: op calls, launches, call sites, .cu TUs; 5: operator lines; 6: internal-linkage ids; 7: overload ids, always with the parameter list; 8: `operator_1_norm` is no operator; 9: skipped ranges, members of class templates through dependent objects; 10: calls qualified by a dependent class template; 11: dependent operators, constructions, functors, lambdas and external members; 12: dependent_external counted apart; 13: using-declarations, qualified names in macros, aliases of templates, functor fields; 14: a using-declaration expanded only when all candidates are; 15: headers parsed as their own main file, status "incomplete"; 16: temporaries written with their class's name are constructor edges)
FORMAT = 2  # the entry layout (Note [Shared dependency sets]); an entry with "version" is layout 1


class FileHashes:
    """Content hashes of files, each file read once per run."""

    def __init__(self) -> None:
        self._memo: dict[str, str | None] = {}

    def __call__(self, path: str) -> str | None:
        got = self._memo.get(path, "")
        if got == "":
            try:
                data = Path(path).read_bytes()
            except OSError:
                got = None
            else:
                got = hashlib.blake2b(data, digest_size=16).hexdigest()
            self._memo[path] = got
        return got


def set_id(deps: Mapping[str, str | None]) -> str:
    """The id of a dependency set: a hash of its sorted content."""
    text = json.dumps(sorted(deps.items()), separators=(",", ":"))
    return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


class TuCache:
    """Cached `TuResult`s of one tree (Note [Precise cache], Note [Shared
    dependency sets]).

    `own_roots`: directories (with a trailing "/") whose files are a TU's
    own deps, kept in its entry; a file elsewhere goes in a shared set.

    Example:
        >>> cache = TuCache(ctx.cache_dir / "tu", FileHashes(), (str(root) + "/",))
        >>> cache.get(path, flags_key) is None   # first run
        True
    """

    def __init__(self, directory: Path, hashes: FileHashes, own_roots: tuple[str, ...] = ()) -> None:
        self.dir = directory
        self.hashes = hashes
        self.own_roots = own_roots
        self._set_ok: dict[str, bool] = {}  # set id -> all its files unchanged (checked once per run)
        self._ids: dict[int, tuple[Mapping, str]] = {}  # id(shared dict) -> (it, its set id)

    def entry_path(self, path: str) -> Path:
        """The entry file of the TU at `path`."""
        return self.dir / (hashlib.blake2b(path.encode(), digest_size=12).hexdigest() + ".json")

    _entry = entry_path  # the name bench/precise.py and older callers use

    def _read(self, path: str) -> dict | None:
        try:
            entry = json.loads(self.entry_path(path).read_text())
        except (OSError, ValueError):
            return None
        return entry if isinstance(entry, dict) else None

    def get(self, path: str, flags_key: str, shared: Iterable[Mapping[str, str | None]] = ()) -> TuResult | None:
        """The cached result for the TU at `path` if nothing it read changed.
        A current entry of layout 1 is rewritten in layout 2 with `shared`
        (the sets `put` would be given)."""
        entry = self._read(path)
        if entry is None:
            return None
        fmt = 1 if "version" in entry else entry.get("format")
        if (fmt not in (1, FORMAT) or entry.get("version" if fmt == 1 else "walk") != VERSION
                or entry.get("path") != path or entry.get("flags") != flags_key
                or entry.get("main") != self.hashes(path)):
            return None
        try:
            if fmt == 1:
                ok = self._same(entry["deps"])
            else:
                ok = all(self._check_set(s) for s in entry["sets"]) and self._same(entry["deps"])
            result = _from_json(entry["result"]) if ok else None
        except (KeyError, TypeError, AttributeError):
            return None  # not an entry this code wrote: parsed again
        if result is not None and fmt == 1:
            self.put(path, flags_key, result, shared)
        return result

    def _same(self, deps: Mapping[str, str | None]) -> bool:
        hashes = self.hashes
        return all(hashes(dep) == digest for dep, digest in deps.items())

    def _check_set(self, sid: str) -> bool:
        got = self._set_ok.get(sid)
        if got is None:
            try:
                deps = json.loads((self.dir / "sets" / f"{sid}.json").read_text())
                got = isinstance(deps, dict) and self._same(deps)
            except (OSError, ValueError):
                got = False
            self._set_ok[sid] = got
        return got

    def _store_set(self, deps: Mapping[str, str | None], sid: str | None = None) -> str:
        """Write the set `deps` (if not there yet) and return its id."""
        sid = sid or set_id(deps)
        if sid not in self._set_ok:
            where = self.dir / "sets" / f"{sid}.json"
            if not where.is_file():
                with atomic_open(where, "w") as fh:
                    json.dump(dict(deps), fh)
            self._set_ok[sid] = True  # written from this run's hashes
        return sid

    def _shared_id(self, deps: Mapping[str, str | None]) -> str:
        known = self._ids.get(id(deps))
        if known is None or known[0] is not deps:
            known = self._ids[id(deps)] = (deps, self._store_set(deps))
        return known[1]

    def put(self, path: str, flags_key: str, result: TuResult,
            shared: Iterable[Mapping[str, str | None]] = ()) -> None:
        """Store `result` with the hashes of the main file and its includes;
        `shared`: dependency sets of many TUs that it also read (the PCH's
        files, the op map's), stored once (Note [Shared dependency sets])."""
        if result.status in ("timeout", "crash"):
            return  # retried next run
        shared = [s for s in shared if s]
        sets = [self._shared_id(s) for s in shared]
        own: dict[str, str | None] = {}
        outside: dict[str, str | None] = {}
        for dep in result.includes:
            if any(dep in s for s in shared):
                continue
            if dep.startswith(self.own_roots):
                own[dep] = self.hashes(dep)
            else:
                outside[dep] = self.hashes(dep)
        if outside:
            sets.append(self._store_set(outside))
        entry = {
            "format": FORMAT,
            "walk": VERSION,  # not "version": code that reads layout 1 must not take this entry
            "path": path,
            "flags": flags_key,
            "main": self.hashes(path),
            "sets": sets,
            "deps": own,
            "result": {**dataclasses.asdict(result), "includes": []},  # they are the deps: not twice
        }
        with atomic_open(self.entry_path(path), "w") as fh:
            json.dump(entry, fh)

    def deps(self, path: str) -> dict[str, str]:
        """{file: hash} of everything recorded for the TU at `path`, its shared
        sets included ({} if not cached)."""
        entry = self._read(path)
        if entry is None:
            return {}
        try:
            out: dict[str, str] = {}
            for sid in entry.get("sets", ()):
                out.update(json.loads((self.dir / "sets" / f"{sid}.json").read_text()))
            out.update(entry["deps"])
            return out
        except (OSError, ValueError, KeyError, TypeError):
            return {}


def _from_json(d: dict) -> TuResult:
    return TuResult(
        rel=d["rel"],
        status=d["status"],
        edges=tuple(tuple(e) for e in d["edges"]),
        ops=tuple(tuple(o) for o in d["ops"]),
        launches=tuple(tuple(k) for k in d["launches"]),
        sites=d["sites"],
        dropped=d["dropped"],
        includes=tuple(d["includes"]),
        unresolved=tuple(tuple(u) for u in d["unresolved"]),
        errors=d["errors"],
        fatal=tuple(d["fatal"]) if d["fatal"] else None,
        seconds=d["seconds"],
        skipped=tuple(tuple(r) for r in d["skipped"]),
    )
