"""Work run in a thread while the caller goes on (`Meanwhile`).

Used where the rest of a short process waits on something else: the
kernel's file stats (Note [Stale note meanwhile] in torchtalk/cli/query.py)
or DuckDB, which releases the GIL (Note [DB opened meanwhile] in
torchtalk/api.py). The function run must import nothing the caller may be
importing at the same time: two threads importing one package can each hold
a module's lock the other waits for, and Python then hands one of them the
partly initialized module (an ImportError, seen once in 1,308 tests). Import
what it reads first, in the caller's thread.

Example:
    >>> Meanwhile(lambda: 6 * 7).result()
    42
"""

from __future__ import annotations

import threading


class Meanwhile:
    """`fn()` run in a thread from now on; `result()` joins it and gives its
    value or raises its exception. When no thread can be started, `result()`
    calls `fn` itself."""

    def __init__(self, fn, name: str = "torchtalk-meanwhile") -> None:
        self._fn, self._out = fn, []
        self._thread: threading.Thread | None = threading.Thread(target=self._run, name=name, daemon=True)
        try:
            self._thread.start()
        except RuntimeError:
            self._thread = None

    def _run(self) -> None:
        try:
            self._out.append((self._fn(), None))
        except BaseException as exc:  # noqa: BLE001 - raised again by result(), in the caller's thread
            self._out.append((None, exc))

    def join(self) -> None:
        if self._thread is not None:
            self._thread.join()

    def result(self):
        if self._thread is None:
            return self._fn()
        self._thread.join()
        value, exc = self._out[0]
        if exc is not None:
            raise exc
        return value
