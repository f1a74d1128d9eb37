"""How fast the machine is while a benchmark runs.

These VMs' CPU speed drifts: the same build's figures vary by up to 1.7x
within an hour. Each benchmark prints this reference beside its figures (a
fixed pure-Python loop, best of three; lower is faster), so two runs can be
compared: figures from a run with a higher reference were taken on a slower
machine.
"""

from __future__ import annotations

import time


def reference_ms() -> float:
    """Milliseconds of a fixed pure-Python loop, best of three."""
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        s = 0
        for i in range(1_000_000):
            s += i * i
        best = min(best, time.perf_counter() - t)
    return best * 1000


def reference_line() -> str:
    return f"machine reference: {reference_ms():.0f} ms (a fixed Python loop, best of 3; lower = faster machine)"


def stop(proc) -> None:
    """Stop a `torchtalk watch` child as `kill` does (SIGTERM: it ends as on
    Ctrl-C), killed if it has not ended within 60 s. Not SIGINT: a benchmark
    run as a background job has SIGINT ignored, and so has its child."""
    import signal
    import subprocess

    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise
