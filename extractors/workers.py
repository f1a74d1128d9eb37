"""Worker processes that die with the index that started them.

Note [Workers die with their parent]: the layers parse files in forked worker
processes (the cpp layer's Pool, the python corpus's ProcessPoolExecutor,
libclang's one process per TU). A `kill -9` of `torchtalk index` gives its
workers no chance to be told: re-parented to init, they used to go on
parsing for the rest of their batch. Each worker therefore asks the kernel
(prctl PR_SET_PDEATHSIG, Linux) for SIGKILL when its parent dies, and checks
that the parent it was forked by is still its parent (the parent may have
died between the fork and the prctl). Elsewhere than Linux the check alone
remains. tests/reliability/test_kill_index.py kills an index among its
workers and finds none left.

Note [Workers leave the parent's heap alone]: a worker is forked from an
index that may already hold hundreds of MB of objects (the cpp layer's
FileFacts and rows when the python and tests layers start their pools). Each
of the worker's cyclic-GC passes walked that inherited heap again, and
touched every page of it (copy-on-write): the tests layer's `ast.parse` ran
at a third of its speed. A pool's worker therefore freezes what it inherits
(gc.freeze: moved to a generation no pass scans) before its first job; the
objects it makes itself are collected as usual. Each job (one file's scan or
summary) also runs with the GC paused (extractors.base.paused_gc, Note [No
GC in an update]): the file's syntax tree grows for the whole job and a pass
every 700 allocations re-scanned it, a third of a test file's summary
(summarize over every other file of test/: 5.8 -> 3.6 s CPU); what the job
leaves behind is collected once it ends. A layer that pauses the GC while
it builds its rows (cpp, python, tests) forks its pools with it off; the
worker turns it on again for its own garbage.

Example:
    >>> Pool(2, initializer=pool_worker, initargs=(os.getpid(),))
"""

from __future__ import annotations

import ctypes
import gc
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent(parent: int) -> None:
    """In a worker forked by process `parent`: be killed when it dies (and
    leave at once if it is gone already)."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # no prctl in this libc: the check below remains
            pass
    if os.getppid() != parent:
        os._exit(1)


def pool_worker(parent: int) -> None:
    """A forked pool's initializer: `die_with_parent(parent)`, and the
    inherited heap frozen (Note [Workers leave the parent's heap alone])."""
    die_with_parent(parent)
    gc.freeze()
    gc.enable()  # forked from a layer that paused it: the worker collects between its jobs


def watched(parent: int, target, *args) -> None:
    """A forked Process's target: `target(*args)` once `die_with_parent(parent)`.

    Example:
        >>> ctx.Process(target=watched, args=(os.getpid(), _child, job, send, tmpdir))
    """
    die_with_parent(parent)
    target(*args)
