"""The watcher (Note [Watching]) on a small tree: a burst of writes is one
batch, only source files count, and a change during an update is the next batch."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from torchtalk.watch import Watcher, relevant


def _tree(tmp_path: Path) -> Path:
    for d in ("aten/src", "torch/nn", ".git/objects"):
        (tmp_path / d).mkdir(parents=True)
    return tmp_path


class Batches:
    def __init__(self, hold: float = 0.0) -> None:
        self.got: list[frozenset[str]] = []
        self.done = threading.Event()
        self.hold = hold

    def __call__(self, files: frozenset[str]) -> None:
        time.sleep(self.hold)  # an update that takes a while
        self.got.append(files)
        self.done.set()

    def wait(self, n: int, timeout: float = 20.0) -> None:
        end = time.monotonic() + timeout
        while len(self.got) < n and time.monotonic() < end:
            time.sleep(0.02)


def test_relevant_keeps_source_files_only(tmp_path):
    assert relevant(tmp_path, str(tmp_path / "aten/src/a.cpp")) == "aten/src/a.cpp"
    assert relevant(tmp_path, str(tmp_path / "torch/nn/__pycache__/f.py")) is None
    assert relevant(tmp_path, str(tmp_path / "torch/nn/notes.txt")) is None
    assert relevant(tmp_path, str(tmp_path / ".git/objects/x.py")) is None
    assert relevant(tmp_path, "/elsewhere/a.cpp") is None


def test_a_burst_of_writes_is_one_batch(tmp_path):
    root = _tree(tmp_path)
    batches = Batches()
    w = Watcher(root, batches, quiet=0.5, max_delay=10, quiet_one=0.5)
    w.start()
    try:
        time.sleep(0.2)
        names = [f"aten/src/f{i}.cpp" for i in range(200)] + [f"torch/nn/m{i}.py" for i in range(50)]
        for name in names:
            (root / name).write_text("int x;\n")
        (root / "torch/nn/README.txt").write_text("not a source file")
        (root / ".git/objects/y.py").write_text("")
        batches.wait(1)
        time.sleep(1.0)  # no second batch follows
        assert batches.got == [frozenset(names)]
        assert w.pending.files == ()
    finally:
        w.stop()


def test_one_file_waits_the_short_window(tmp_path):
    """Note [Quiet window]: a batch of one file is handed over after
    `quiet_one`, not `quiet`; two files written together are still one batch."""
    root = _tree(tmp_path)
    batches = Batches()
    w = Watcher(root, batches, quiet=3.0, max_delay=10)
    w.start()
    try:
        time.sleep(0.2)
        t = time.monotonic()
        (root / "aten/src/a.cpp").write_text("int a;\n")
        batches.wait(1)
        assert batches.got == [frozenset({"aten/src/a.cpp"})]
        assert time.monotonic() - t < 2.0  # the 3 s window would have held it
        (root / "aten/src/b.cpp").write_text("int b;\n")
        (root / "torch/nn/c.py").write_text("c = 1\n")
        batches.wait(2)
        assert batches.got[1:] == [frozenset({"aten/src/b.cpp", "torch/nn/c.py"})]
    finally:
        w.stop()


def test_changes_during_an_update_make_the_next_batch(tmp_path):
    root = _tree(tmp_path)
    batches = Batches(hold=1.0)
    w = Watcher(root, batches, quiet=0.1, max_delay=10)
    w.start()
    try:
        time.sleep(0.2)
        (root / "aten/src/a.cpp").write_text("int a;\n")
        end = time.monotonic() + 10
        while not w.pending.updating and time.monotonic() < end:
            time.sleep(0.01)
        assert w.pending.updating == ("aten/src/a.cpp",)
        (root / "aten/src/b.cpp").write_text("int b;\n")
        time.sleep(0.3)
        assert w.pending.files == ("aten/src/b.cpp",)  # waits for the update to end
        batches.wait(2)
        assert batches.got == [frozenset({"aten/src/a.cpp"}), frozenset({"aten/src/b.cpp"})]
    finally:
        w.stop()


def test_watched_dirs_of_a_torch_tree_and_of_an_extension(tmp_path):
    """A PyTorch tree: its layers' top dirs; an extension (torchvision's
    shape: a package and a test/ dir): its whole root."""
    from torchtalk.watch import watched_dirs

    torch_root = _tree(tmp_path / "pytorch")
    (torch_root / "test").mkdir()
    assert watched_dirs(torch_root) == [torch_root / "aten", torch_root / "torch", torch_root / "test"]
    ext = tmp_path / "vision"
    for d in ("torchvision/csrc", "test"):
        (ext / d).mkdir(parents=True)
    assert watched_dirs(ext) == [ext]


def test_watch_stops_cleanly_on_sigterm(tree, tmp_path, runtime_dir):
    """`kill` (SIGTERM) stops `torchtalk watch` as Ctrl-C does: exit 0, the
    index of an edit made before it in place, the socket it answered
    `torchtalk query` at removed (Note [Query server])."""
    import os
    import subprocess
    import sys

    from tests.test_mcp_server import _mini_tree
    from tests.test_update_real import _rows

    src = _mini_tree(tree, tmp_path / "mini")
    db = tmp_path / "db" / "mini.duckdb"
    run = runtime_dir
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "XDG_RUNTIME_DIR": str(run)}
    proc = subprocess.Popen([sys.executable, "-m", "torchtalk", "watch", "--source", str(src), "--db", str(db),
                             "--layers", "ops"], env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout.readline().startswith("built (ops ran) in ")
        assert proc.stdout.readline() == f"watching {src.resolve()} (Ctrl-C to stop)\n"
        serving = proc.stdout.readline()
        assert serving.startswith(f"serving `torchtalk query` for {db} at {run / 'torchtalk'}/")
        sock = Path(serving.rsplit(" at ", 1)[1].strip())
        assert sock.exists()
        assert proc.stdout.readline() == "ready for edits\n"  # its build ran every layer: nothing to warm
        yaml = src / "aten/src/ATen/native/native_functions.yaml"
        yaml.write_text(yaml.read_text() + "\n- func: tt_watched(Tensor self) -> Tensor\n")
        assert proc.stdout.readline().startswith("aten/src/ATen/native/native_functions.yaml: updated (ops ran) in ")
    finally:
        proc.terminate()
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = "still running 30 s after SIGTERM"
    assert (code, proc.stderr.read()) == (0, "")
    assert not sock.exists()
    assert _rows(db, "select name from op where name = 'tt_watched'", []) == [("tt_watched",)]


def test_the_gc_between_updates_frees_a_frozen_cycle_in_its_full_collection():
    """Note [GC between updates]: a cycle frozen by one collection that
    became garbage since is left by the next ones, which walk only new
    objects, and freed by the full one."""
    import gc
    import weakref

    from torchtalk.watch import collect_between_updates

    class Node:
        pass

    was = gc.isenabled()
    gc.disable()
    try:
        a, b = Node(), Node()
        a.other, b.other = b, a
        gone = weakref.ref(a)
        collect_between_updates(full=False)  # alive: frozen
        gc.disable()  # as the next update leaves it
        del a, b
        collect_between_updates(full=False)
        assert gone() is not None  # frozen: not walked
        gc.disable()
        collect_between_updates(full=True)
        assert gone() is None and gc.isenabled()
    finally:
        gc.unfreeze()
        if not was:
            gc.disable()


def test_the_gc_between_updates_collects_before_it_freezes():
    """Note [GC between updates]: cyclic garbage an update left is freed,
    not frozen; the survivors are frozen and the GC runs again."""
    import gc
    import weakref

    from torchtalk.watch import collect_between_updates

    class Node:
        pass

    was = gc.isenabled()
    gc.disable()  # as an update leaves it
    try:
        a, b = Node(), Node()
        a.other, b.other = b, a  # a cycle: only the cyclic GC frees it
        gone = weakref.ref(a)
        kept = Node()
        del a, b
        collect_between_updates()
        assert gone() is None and gc.isenabled() and gc.get_freeze_count() > 0
        assert kept is not None
    finally:
        gc.unfreeze()
        if not was:
            gc.disable()
