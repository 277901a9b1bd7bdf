"""One Locust worker process: its client driver, Prometheus metrics, event log, and what its users share.

Built once per worker when the locustfile is imported (before the worker connects to its master, so no
user can start ahead of it) and closed when the test stops.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections import deque
from collections.abc import Callable, Hashable
from typing import Any

from gevent.pywsgi import WSGIServer
from prometheus_client import disable_created_metrics, make_wsgi_app

from harness.client.registry import driver
from harness.contracts import metrics
from harness.contracts.events import EventLog
from harness.contracts.metrics import HarnessMetrics
from harness.workload import gevent_bridge
from harness.workload.cycles import DrainSignals
from harness.workload.spec import WorkloadSpec

# Producers send a burst through at most this many concurrent calls (each holds a real thread).
BURST_CONCURRENCY = 64
# At most this many messages go in one send_all (a burst's chunk; a steady producer catching up).
SEND_CHUNK = 32


class RecentKeys:
    """The keys added in the last ``window_s`` seconds (a set that forgets), so a long run's worker keeps its
    memory flat: what the live duplicate counter remembers of the acks."""

    def __init__(self, window_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.window_s = window_s
        self._clock = clock
        self._keys: set[Hashable] = set()
        self._order: deque[tuple[float, Hashable]] = deque()

    def add(self, key: Hashable) -> None:
        now = self._clock()
        if key not in self._keys:
            self._keys.add(key)
            self._order.append((now, key))
        while self._order and self._order[0][0] < now - self.window_s:
            self._keys.discard(self._order.popleft()[1])

    def __contains__(self, key: Hashable) -> bool:
        return key in self._keys

    def __len__(self) -> int:
        return len(self._keys)


# How long a worker remembers an ack for the live duplicate counter: a redelivery after an ack comes within
# about one invisible time (the ack was lost), or after a broker restart (tens of seconds). The archive's
# ledger counts every duplicate, whenever it came.
ACK_MEMORY_MIN_S = 120.0


# HarnessMetrics's group-labelled metrics: not errors (labelled by operation too), nor the worker's cycle signal.
_GROUP_METRICS = frozenset(f.name for f in dataclasses.fields(HarnessMetrics)) - {
    "registry", "errors", "cycle", "producers_sending"}


class GroupMetrics:
    """One group's labelled metrics, each looked up on first use and then kept: ``labels()`` builds and checks its
    key on every call, which a consumer would pay several times per delivery. A metric's child for a label set
    never changes, so it is the same series either way; and a series first appears when first used, as before
    (a histogram no retry reached stays out of the scrape). Not ``errors``, which is labelled by operation too, nor
    the worker's ``cycle`` and ``producers_sending``, which have no group."""

    def __init__(self, metrics: HarnessMetrics, labels: dict[str, str]) -> None:
        self._metrics = metrics
        self._labels = labels

    def __getattr__(self, name: str) -> Any:  # only for what is not kept yet
        if name not in _GROUP_METRICS:
            raise AttributeError(name)
        child = getattr(self._metrics, name).labels(**self._labels)
        setattr(self, name, child)
        return child


class WorkerRuntime:
    def __init__(self, spec: WorkloadSpec) -> None:
        self.spec = spec
        scenario = spec.scenario
        self.protocol = scenario.protocol
        # The worker's labels (its cycle signal's); each group's add the group.
        self.run_labels = {"variant": spec.variant, "scenario": scenario.name, "protocol": self.protocol}
        disable_created_metrics()  # the *_created series only add noise to every scrape and export
        self.metrics = metrics.create()
        # Every label set exists from the start (zero), so dashboards show 0 rather than "no data".
        for g in scenario.groups:
            for c in (self.metrics.sent, self.metrics.deliveries, self.metrics.acks, self.metrics.nacks,
                      self.metrics.empty_polls, self.metrics.cross_topic, self.metrics.duplicates):
                c.labels(**self.labels(g.name))
        if spec.metrics_port:
            # Served by greenlets on the hub: prometheus_client's threaded server would use gevent-patched
            # sockets from foreign threads ("Cannot switch to a different thread" under frequent scrapes).
            WSGIServer((spec.metrics_host, spec.metrics_port), make_wsgi_app(self.metrics.registry), log=None,
                       error_log=None).start()
        self.log = EventLog(directory=spec.events_dir, stem=spec.worker,
                            common={"run_id": spec.run_id, "variant": spec.variant, "scenario": scenario.name,
                                    "worker": spec.worker, "protocol": self.protocol})
        # Each consumer's long poll holds a thread for its whole wait; a burst holds up to BURST_CONCURRENCY.
        gevent_bridge.ensure_threads(scenario.consumer_count
                                     + scenario.produce.producers * BURST_CONCURRENCY + 8)
        self.driver = driver(self.protocol, spec.endpoints, offload=gevent_bridge.offload,
                             log_file=spec.client_log_dir / f"{spec.worker}.log", client=spec.grpc_client)
        # (group, ledger_id) acked by this worker lately (the live duplicate counter's memory)
        self.acked = RecentKeys(max(ACK_MEMORY_MIN_S, 2 * scenario.consume.invisible_s + 60))
        self.nack_due_ms: dict[tuple, float] = {}  # (group, ledger_id, next attempt) -> due time, ms
        self.nacked_once: set[tuple[str, str]] = set()  # (group, ledger_id) nacked with suspend (nack.suspend)
        self.newest_cycle = -1  # the newest cycle a producer of this worker started (the cycle gauge)
        self._seq = itertools.count()
        self._indexes: dict[str, int] = {}
        self._group_metrics: dict[str, GroupMetrics] = {}
        self.drains = DrainSignals()  # attached to the worker's runner when Locust fires init
        self._closed = False

    def labels(self, group: str) -> dict[str, str]:
        return {**self.run_labels, "group": group}

    def group_metrics(self, group: str) -> GroupMetrics:
        """``group``'s metrics with its labels (the ``errors`` counter, labelled by operation too, is not here)."""
        found = self._group_metrics.get(group)
        if found is None:
            found = self._group_metrics[group] = GroupMetrics(self.metrics, self.labels(group))
        return found

    def next_id(self, prefix: str) -> str:
        return f"{self.spec.worker}-{prefix}{next(self._seq)}"

    def next_index(self, key: str) -> int:
        """0, 1, 2, ... per key within this worker (e.g. the consumers of one group)."""
        self._indexes[key] = self._indexes.get(key, -1) + 1
        return self._indexes[key]

    def close(self) -> None:
        """Shut the clients down and write the remaining events (test_stop and quitting both call it)."""
        try:
            if not self._closed:
                self._closed = True
                self.driver.close()
        finally:
            self.log.close()
