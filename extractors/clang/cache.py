"""Per-TU parse cache, keyed by content hashes.

Note [Precise cache]: one JSON file per TU under `<cache_dir>/tu/`. An entry
holds the TU's `TuResult`, the hash of the main file, the hash of its flags,
and the hash of every file the TU included. It is reused only when all of them
still match, so editing a header re-parses exactly the TUs that include it
(issue 9's `affected` can read the same `deps` to map a header to its TUs).
File hashes are memoized for one run: a header shared by 400 TUs is read once.
Entries are written to a temp file and renamed, so a killed run never leaves a
half-written entry.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

from extractors.clang.worker import TuResult
from torchtalk.atomic import atomic_open

VERSION = 9  # bump when the walk's output changes (4: op calls, launches, call sites, .cu TUs; 5: operator lines; 6: internal-linkage ids; 7: overload ids, always with the parameter list; 8: `operator_1_norm` is no operator; 9: skipped ranges, members of class templates through dependent objects)


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


class TuCache:
    """Cached `TuResult`s of one tree (Note [Precise cache]).

    Example:
        >>> cache = TuCache(ctx.cache_dir / "tu", FileHashes())
        >>> cache.get(path, flags_key) is None   # first run
        True
    """

    def __init__(self, directory: Path, hashes: FileHashes) -> None:
        self.dir = directory
        self.hashes = hashes

    def _entry(self, path: str) -> Path:
        return self.dir / (hashlib.blake2b(path.encode(), digest_size=12).hexdigest() + ".json")

    def get(self, path: str, flags_key: str) -> TuResult | None:
        """The cached result for the TU at `path` if nothing it read changed."""
        try:
            entry = json.loads(self._entry(path).read_text())
        except (OSError, ValueError):
            return None
        if (entry.get("version") != VERSION or entry.get("path") != path
                or entry.get("flags") != flags_key or entry.get("main") != self.hashes(path)):
            return None
        for dep, digest in entry["deps"].items():
            if self.hashes(dep) != digest:
                return None
        return _from_json(entry["result"])

    def put(self, path: str, flags_key: str, result: TuResult, extra_deps: dict[str, str] | None = None) -> None:
        """Store `result` with the hashes of the main file and its includes
        (plus `extra_deps`: the files of the PCH it was parsed with)."""
        if result.status in ("timeout", "crash"):
            return  # retried next run
        entry = {
            "version": VERSION,
            "path": path,
            "flags": flags_key,
            "main": self.hashes(path),
            "deps": {**(extra_deps or {}), **{dep: self.hashes(dep) for dep in result.includes}},
            "result": dataclasses.asdict(result),
        }
        with atomic_open(self._entry(path), "w") as fh:
            json.dump(entry, fh)

    def deps(self, path: str) -> dict[str, str]:
        """{included file: hash} recorded for the TU at `path` ({} if not cached)."""
        try:
            return json.loads(self._entry(path).read_text())["deps"]
        except (OSError, ValueError, KeyError):
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
