"""Calling the RocketMQ gRPC client from a Locust greenlet without blocking the gevent hub.

The client runs its own asyncio loop on a real thread; with threads monkey-patched that thread becomes
a greenlet and start-up hangs, so threads stay real (see harness.workload.launch). Each blocking call
therefore runs on a real thread of gevent's pool, and only the calling greenlet waits for it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import gevent

T = TypeVar("T")


def ensure_threads(n: int) -> None:
    """Let at least ``n`` blocking calls run at once (each consumer's long poll holds one thread)."""
    pool = gevent.get_hub().threadpool
    if pool.maxsize < n:
        pool.maxsize = n


def offload(fn: Callable[[], T]) -> T:
    """Run ``fn()`` on a pool thread; the calling greenlet waits, the hub does not."""
    return gevent.get_hub().threadpool.apply(fn)
