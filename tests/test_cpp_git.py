"""Git-aware change detection of the fast tier (Note [Git-aware digests])."""

from __future__ import annotations

import subprocess
from pathlib import Path

from extractors import cpp
from extractors.base import ExtractContext
from extractors.cpp import cache
from extractors.cpp.gitinfo import blob_id, clean_blobs


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), "-c", "user.email=t@t", "-c", "user.name=t", *args],
                   check=True, capture_output=True)


def _tree(root: Path) -> Path:
    (root / "aten/src").mkdir(parents=True)
    (root / "aten/src/a.cpp").write_text("namespace at { void g() {} void f() { g(); } }\n")
    (root / "aten/src/b.cpp").write_text("namespace at { void h() { g(); } }\n")
    return root


def test_blob_id_is_gits(tmp_path):
    root = _tree(tmp_path / "t")
    out = subprocess.run(["git", "hash-object", str(root / "aten/src/a.cpp")], capture_output=True, text=True)
    assert blob_id((root / "aten/src/a.cpp").read_bytes()) == out.stdout.strip()


def test_clean_blobs_skips_modified_and_needs_a_checkout(tmp_path, monkeypatch):
    root = _tree(tmp_path / "t")
    assert clean_blobs(root, ("aten",)) is None  # not a git checkout
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "commit", "-qm", "init")
    (root / "aten/src/b.cpp").write_text("namespace at { void h() { g(); g(); } }\n")
    blobs = clean_blobs(root, ("aten",))
    assert blobs == {"aten/src/a.cpp": blob_id((root / "aten/src/a.cpp").read_bytes())}

    # the git path gives the same digests as reading every file, and reads only b.cpp
    read: list[str] = []
    real_read = Path.read_bytes

    def spy(self):
        read.append(self.name)
        return real_read(self)

    monkeypatch.setattr(Path, "read_bytes", spy)
    digests, _ = cpp._current_digests(root, ["aten/src/a.cpp", "aten/src/b.cpp"], {})
    assert read == ["b.cpp"]
    monkeypatch.setattr(Path, "read_bytes", real_read)
    assert digests == {rel: cache.digest_of((root / rel).read_bytes(), rel) for rel in digests}


def test_git_checkout_indexes_like_a_plain_tree(tmp_path):
    plain = _tree(tmp_path / "plain")
    repo = _tree(tmp_path / "repo")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "init")
    a = cpp.run(ExtractContext(plain, tmp_path / "c1", jobs=1)).rows
    b = cpp.run(ExtractContext(repo, tmp_path / "c2", jobs=1)).rows
    assert a == b and ("at::h", "at::g", "aten/src/b.cpp", 1, "scope") in a["calls"]
