"""The process-wide caches: bounded, and safe to fill from two threads."""

from __future__ import annotations

import threading

from torchtalk.connmemo import remember


def test_remember_drops_the_oldest_entry_at_its_size():
    cache: dict = {}
    for k in range(5):
        assert remember(cache, k, k * 10, size=3) == k * 10
    assert cache == {2: 20, 3: 30, 4: 40}
    remember(cache, 3, 31, size=3)  # an existing key is replaced, nothing dropped
    assert cache == {2: 20, 3: 31, 4: 40}


def test_remember_from_threads_keeps_the_bound():
    cache: dict = {}
    errors = []

    def fill(base: int) -> None:
        try:
            for k in range(2000):
                remember(cache, (base, k), k, size=64)
        except Exception as exc:  # noqa: BLE001  (collected for the assert)
            errors.append(exc)

    threads = [threading.Thread(target=fill, args=(b,)) for b in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(cache) == 64
