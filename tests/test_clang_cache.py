"""The compiler tier's per-TU cache (extractors/clang/cache.py, Note [Shared
dependency sets]): an edit re-parses exactly the TU it touches, shared
dependency sets are stored once and referenced, and a cache written in the
previous layout (every dep inline) is read, not re-parsed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_clang import A_CPP, B_CPP, RowSink

C_CPP = """\
#include <vector>
#include <cstddef>
int c() { std::vector<int> v; v.push_back(1); return static_cast<int>(v.size()); }
"""


@pytest.fixture
def tree3(tmp_path: Path) -> Path:
    """Three TUs with a compile_commands.json: a.cpp and c.cpp include the
    same standard headers (one shared set), b.cpp includes nothing."""
    from tests.test_clang import UTIL_H

    root = tmp_path / "tree"
    root.mkdir()
    for name, text in {"util.h": UTIL_H, "a.cpp": A_CPP, "b.cpp": B_CPP, "c.cpp": C_CPP}.items():
        (root / name).write_text(text)
    db = [{"directory": str(root), "file": n, "arguments": ["clang++", "-std=c++17", "-c", n]}
          for n in ("a.cpp", "b.cpp", "c.cpp")]
    (root / "compile_commands.json").write_text(json.dumps(db))
    return root


def _run(root: Path, cache: Path, monkeypatch) -> tuple[RowSink, object, list[str]]:
    """Run the layer over the three TUs: rows, stats, the TUs parsed."""
    from extractors.base import ExtractContext
    from extractors.clang import run, worker

    parsed: list[str] = []
    real_jobs = worker.run_jobs

    def spy(jobs, *args):
        jobs = list(jobs)
        parsed.extend(j.rel for j in jobs)
        return real_jobs(jobs, *args)

    monkeypatch.setattr(worker, "run_jobs", spy)
    sink = RowSink()
    stats = run(ExtractContext(root, cache, jobs=2), sink, [root / n for n in ("a.cpp", "b.cpp", "c.cpp")])
    return sink, stats, sorted(parsed)


def _entries(cache: Path) -> dict[str, dict]:
    return {e["path"].rsplit("/", 1)[1]: e for e in
            (json.loads(p.read_text()) for p in (cache / "tu").glob("*.json"))}


def test_edit_reparses_exactly_that_tu(tree3: Path, tmp_path: Path, monkeypatch) -> None:
    cache = tmp_path / "cache"
    first, stats, parsed = _run(tree3, cache, monkeypatch)
    assert parsed == ["a.cpp", "b.cpp", "c.cpp"] and stats.ok == 3
    entries = _entries(cache)
    # the standard headers a.cpp and c.cpp read outside the tree: one set, stored once
    assert entries["a.cpp"]["sets"] == entries["c.cpp"]["sets"] and len(entries["a.cpp"]["sets"]) == 1
    assert entries["b.cpp"]["sets"] == [] and entries["b.cpp"]["deps"] == {}
    assert [p.stem for p in (cache / "tu" / "sets").glob("*.json")] == entries["a.cpp"]["sets"]
    assert list(entries["a.cpp"]["deps"]) == [str(tree3 / "util.h")]  # the tree's files stay inline
    (tree3 / "c.cpp").write_text(C_CPP + "int c2() { return c(); }\n")
    again, stats, parsed = _run(tree3, cache, monkeypatch)
    assert parsed == ["c.cpp"] and stats.cached == 2
    assert ("c2", "c", "c.cpp", 4) in again.rows
    assert sorted(r for r in again.rows if r[2] != "c.cpp") == sorted(r for r in first.rows if r[2] != "c.cpp")
    _, stats, parsed = _run(tree3, cache, monkeypatch)
    assert parsed == [] and stats.cached == 3


def test_changed_file_of_a_shared_set_reparses_its_tus(tree3: Path, tmp_path: Path, monkeypatch) -> None:
    """A file of a shared set that changed invalidates every entry that
    references the set (checked once in the run)."""
    from extractors.clang.cache import FileHashes

    cache = tmp_path / "cache"
    _run(tree3, cache, monkeypatch)
    sid = _entries(cache)["a.cpp"]["sets"][0]
    set_file = cache / "tu" / "sets" / f"{sid}.json"
    deps = json.loads(set_file.read_text())
    some = sorted(deps)[0]
    deps[some] = "0" * 32  # as if that header had changed since
    set_file.write_text(json.dumps(deps))
    assert FileHashes()(some) != deps[some]
    _, stats, parsed = _run(tree3, cache, monkeypatch)
    assert parsed == ["a.cpp", "c.cpp"] and stats.cached == 1


def test_old_layout_cache_is_read_then_rewritten(tree3: Path, tmp_path: Path, monkeypatch) -> None:
    """An entry of layout 1 (no "format", every dep inline, as written before
    Note [Shared dependency sets]) is reused, not re-parsed, and rewritten in
    the new layout; one that is stale or not an entry is parsed again."""
    from extractors.clang.cache import TuCache

    cache = tmp_path / "cache"
    first, _, _ = _run(tree3, cache, monkeypatch)
    old = TuCache(cache / "tu", None)
    for name in ("a.cpp", "b.cpp", "c.cpp"):
        path = old.entry_path(str(tree3 / name))
        entry = json.loads(path.read_text())
        entry["deps"] = old.deps(str(tree3 / name))  # the sets' files inline again
        entry["result"]["includes"] = sorted(entry["deps"])  # layout 1 kept them in the result too
        entry["version"] = entry.pop("walk")
        del entry["format"], entry["sets"]
        path.write_text(json.dumps(entry))
    for f in (cache / "tu" / "sets").glob("*.json"):
        f.unlink()
    again, stats, parsed = _run(tree3, cache, monkeypatch)
    assert parsed == [] and stats.cached == 3
    assert sorted(again.rows) == sorted(first.rows)
    entries = _entries(cache)
    assert {e["format"] for e in entries.values()} == {2}
    assert not any("version" in e for e in entries.values())  # code that reads only layout 1 ignores them
    assert entries["a.cpp"]["sets"] == entries["c.cpp"]["sets"]
    assert (cache / "tu" / "sets" / f"{entries['a.cpp']['sets'][0]}.json").is_file()

    stale = json.loads(old.entry_path(str(tree3 / "a.cpp")).read_text())
    stale["deps"] = old.deps(str(tree3 / "a.cpp"))
    stale["version"] = stale.pop("walk")
    del stale["format"], stale["sets"]
    stale["deps"][str(tree3 / "util.h")] = "0" * 32
    old.entry_path(str(tree3 / "a.cpp")).write_text(json.dumps(stale))
    old.entry_path(str(tree3 / "b.cpp")).write_text("[1, 2")  # torn or foreign: not an entry
    old.entry_path(str(tree3 / "c.cpp")).write_text(json.dumps({**entries["c.cpp"], "format": 99}))
    _, stats, parsed = _run(tree3, cache, monkeypatch)
    assert parsed == ["a.cpp", "b.cpp", "c.cpp"] and stats.cached == 0 and stats.ok == 3
