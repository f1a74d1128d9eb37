"""The cyclic GC paused while a query runs (Note [No GC in a run])."""

from __future__ import annotations

import contextlib
import gc
import threading

# Note [No GC in a run]: a query makes tens of thousands of tuples (its
# rows, kept in sets) and lists (index buckets), none of them in a cycle,
# and each 700 of them start a collection of the young generation, each
# 10 of those one of the middle: 10% of kernels(add)'s 28 ms walked what
# reference counting frees anyway. So the cyclic GC is paused while a
# query runs (torchtalk.query.query) and while the in-memory engine
# evaluates: the first of the process's to start pauses it (if it was on)
# and the last to end resumes it, so concurrent ones (a server's threads)
# never resume it under one another. Cycles made meanwhile (a parsed
# query's model) are found at the next collection after.
_GC_LOCK = threading.Lock()
_GC_RUNS = [0, False]  # runs evaluating now; whether the first one found the GC on


@contextlib.contextmanager
def gc_paused():
    """The cyclic GC off inside, as Note [No GC in a run] says."""
    with _GC_LOCK:
        if _GC_RUNS[0] == 0:
            _GC_RUNS[1] = gc.isenabled()
            gc.disable()
        _GC_RUNS[0] += 1
    try:
        yield
    finally:
        with _GC_LOCK:
            _GC_RUNS[0] -= 1
            if _GC_RUNS[0] == 0 and _GC_RUNS[1]:
                gc.enable()
