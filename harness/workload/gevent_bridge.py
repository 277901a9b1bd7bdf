"""Calling the RocketMQ gRPC client from a Locust greenlet without blocking the gevent hub.

The client runs its own asyncio loop on a real thread; with threads monkey-patched that thread becomes
a greenlet and start-up hangs, so threads stay real (see harness.workload.launch). Its ``*_async``
methods are no way out either: they hand back asyncio futures bound to a loop that never runs in a
Locust worker, so their callbacks never fire (and ack_async returns None). Each blocking call therefore
runs on a real thread of gevent's pool, and only the calling greenlet waits for it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import gevent

T = TypeVar("T")


def ensure_threads(n: int) -> None:
    """Let at least ``n`` blocking calls run at once (each consumer's long poll holds one thread)."""
    pool = gevent.get_hub().threadpool
    if pool.maxsize < n:
        pool.maxsize = n


def call(fn: Callable[..., T], *args: object) -> tuple[T, int]:
    """Run ``fn(*args)`` on a pool thread; return its result and the wall clock (ns) when it returned.

    The time is taken on the pool thread, so hand-off back to the greenlet adds nothing to it.
    """

    def timed() -> tuple[T, int]:
        result = fn(*args)
        return result, time.time_ns()

    return gevent.get_hub().threadpool.apply(timed)
