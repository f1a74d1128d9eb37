"""Snapshots (issue 9): save/load/list/export/import and `snapshot diff` on real inputs.

The ops layer of the real 2.6.0 tree is indexed from a copy of its YAML files
(a "mini tree"), which the tests then edit for real: drop an op, change a
dispatch kernel, add an op. The diff must report exactly those edits. The 2.6.0
tree against the torch==2.13.0 wheel is checked against the op names read
straight from both native_functions.yaml files.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from torchtalk import api
from torchtalk.errors import InputError, StoreError

YAMLS = (
    "aten/src/ATen/native/native_functions.yaml",
    "aten/src/ATen/native/tags.yaml",
    "tools/autograd/derivatives.yaml",
    "version.txt",
)
NATIVE = YAMLS[0]


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHTALK_CACHE_DIR", str(tmp_path / "cache"))


def _mini_tree(tree: Path, dest: Path) -> Path:
    for rel in YAMLS:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(tree / rel, dest / rel)
    return dest


def _index(src: Path, db: Path) -> Path:
    api.index(src, db, layers=["ops"])
    return db


def _yaml_op_names(path: Path) -> set[str]:
    """`func:` names straight from the text: `- func: add.Tensor(...)` -> add.Tensor."""
    names = set()
    for line in path.read_text().splitlines():
        m = re.match(r"- func: ([\w.]+)\(", line)
        if m:
            names.add(m.group(1))
    return names


def _run_cli(*argv: str, env_cache: Path) -> subprocess.CompletedProcess:
    import os

    env = {**os.environ, "TORCHTALK_CACHE_DIR": str(env_cache)}
    return subprocess.run([sys.executable, "-m", "torchtalk", *argv], capture_output=True, text=True, env=env)


@pytest.mark.real_tree
def test_diff_reports_real_edits(tree, tmp_path):
    mini = _mini_tree(tree, tmp_path / "t")
    before = _index(mini, tmp_path / "before.duckdb")
    api.snapshot_save("before", db=before)

    native = mini / NATIVE
    text = native.read_text()
    # 1. drop the whole `- func: fmax(...)` entry (fmax has no other overloads)
    text, n = re.subn(r"\n- func: fmax\(Tensor self, Tensor other\) -> Tensor\n(?:  .*\n)+", "\n", text)
    assert n == 1
    # 2. point gelu's CPU/CUDA kernel elsewhere
    assert "    CPU: gelu_out_cpu\n" in text
    text = text.replace("    CPU: gelu_out_cpu\n", "    CPU: gelu_out_cpu_v2\n")
    # 3. a new op with a CPU kernel
    text += "\n- func: torchtalk_new_op(Tensor self) -> Tensor\n  dispatch:\n    CPU: torchtalk_new_op_cpu\n"
    native.write_text(text)
    after = _index(mini, tmp_path / "after.duckdb")
    api.snapshot_save("after", db=after)

    diff = api.snapshot_diff("before", "after")
    assert diff["ops"] == {
        "added": ["torchtalk_new_op"],
        "removed": ["fmax"],
        "changed": ["gelu.out"],
    }
    assert diff["registrations"]["added"] == [
        "dispatch gelu.out [CPU] gelu_out_cpu_v2",
        "dispatch torchtalk_new_op [CPU] torchtalk_new_op_cpu",
    ]
    # fmax is structured_delegate'd (no dispatch table of its own): only gelu's entry goes
    assert diff["registrations"]["removed"] == ["dispatch gelu.out [CPU] gelu_out_cpu"]
    assert diff["registrations"]["changed"] == []
    assert diff["kernels"] == diff["call_edges"] == {"added": [], "removed": [], "changed": []}


@pytest.mark.real_tree
def test_diff_tree_against_wheel_matches_yaml(tree, torch_wheel, tmp_path):
    site = Path(torch_wheel.__file__).parents[1]
    a = _index(tree, tmp_path / "a.duckdb")
    b = _index(site / "torch", tmp_path / "b.duckdb")
    diff = api.snapshot_diff(str(a), str(b))
    old = _yaml_op_names(tree / NATIVE)
    new = _yaml_op_names(site / "torchgen/packaged/ATen/native/native_functions.yaml")
    assert diff["ops"]["added"] == sorted(new - old)
    assert diff["ops"]["removed"] == sorted(old - new)
    assert len(diff["ops"]["added"]) > 10 and len(diff["ops"]["removed"]) > 10


@pytest.mark.real_tree
def test_save_list_load_export_import_roundtrip(tree, tmp_path):
    mini = _mini_tree(tree, tmp_path / "t")
    db = _index(mini, tmp_path / "t.duckdb")
    info = api.snapshot_save("base", db=db)
    assert info.version == (tree / "version.txt").read_text().strip()
    assert info.relations["op"] == len(_yaml_op_names(mini / NATIVE))
    assert [s.name for s in api.snapshot_list()] == ["base"]

    archive = api.snapshot_export("base", tmp_path / "base.tar.gz")
    imported = api.snapshot_import(archive, "copy")
    assert imported.relations == info.relations
    assert [s.name for s in api.snapshot_list()] == ["base", "copy"]

    # load replaces the tree's DB; the diff against the snapshot is then empty
    target = tmp_path / "loaded.duckdb"
    loaded, path = api.snapshot_load("copy", source=mini, db=target)
    assert loaded.name == "copy" and path == target
    empty = {"added": [], "removed": [], "changed": []}
    assert api.snapshot_diff(str(target), "base") == {
        "ops": empty, "kernels": empty, "registrations": empty, "call_edges": empty,
    }
    # --nearest: the same version and source path beat a newer snapshot of another
    # tree; equals tie on age (an import keeps its creation time), then by name
    other = _mini_tree(tree, tmp_path / "other")
    (other / "version.txt").write_text("9.9.9\n")
    api.snapshot_save("zz-newer", db=_index(other, tmp_path / "other.duckdb"))
    nearest, _ = api.snapshot_load(None, source=mini, db=target, nearest=True)
    assert nearest.name == "base"
    nearest, _ = api.snapshot_load(None, source=other, db=target, nearest=True)
    assert nearest.name == "zz-newer"


def test_unknown_snapshot_names_candidates(tmp_path):
    (tmp_path / "cache/snapshots/v2.6.0-base").mkdir(parents=True)
    (tmp_path / "cache/snapshots/v2.6.0-base/snapshot.json").write_text(json.dumps({
        "name": "v2.6.0-base", "created": "2026-01-01T00:00:00+00:00", "source": "/x",
        "version": "2.6.0", "git_commit": "", "fingerprint": "f", "relations": {},
    }))
    with pytest.raises(InputError) as err:
        api.snapshot_diff("v2.6.0-bsae", "v2.6.0-base")
    assert str(err.value) == "error: no snapshot named 'v2.6.0-bsae' (did you mean 'v2.6.0-base'?)"


def test_import_rejects_a_file_that_is_not_a_snapshot(tmp_path):
    bogus = tmp_path / "bogus.tar.gz"
    bogus.write_bytes(b"not a tarball at all")
    proc = _run_cli("snapshot", "import", str(bogus), env_cache=tmp_path / "cache")
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"torchtalk: store error: not a snapshot archive: {bogus} (")
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_diff_of_a_foreign_file_is_one_line(tmp_path):
    junk = tmp_path / "junk.duckdb"
    junk.write_bytes(b"\0" * 4096)
    with pytest.raises(StoreError) as err:
        api.snapshot_diff(str(junk), str(junk))
    assert str(err.value).startswith(f"store error: cannot read the database {junk}:")
