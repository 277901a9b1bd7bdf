"""A driver that speaks to a cluster the harness does not own under names unique to the run: every topic and
group the run creates or uses gets the endpoints' suffix on the wire (Endpoints.physical), and nothing above the
driver sees it (events, the ledger and reports keep the scenario's names, so an external variant compares with
a local one name for name)."""

from __future__ import annotations

from collections.abc import Sequence

from harness.client.driver import PLAIN, Driver, PopConsumer, Producer, ReceiveOptions
from harness.contracts.endpoints import Endpoints


class SuffixedDriver:
    """``inner`` with the endpoints' suffix on every topic and group (``endpoints.physical``)."""

    def __init__(self, inner: Driver, endpoints: Endpoints) -> None:
        self.inner, self.endpoints = inner, endpoints
        self.protocol = inner.protocol

    def create_topic(self, name: str, queues: int, message_type: str = "NORMAL") -> None:
        self.inner.create_topic(self.endpoints.physical(name), queues, message_type)

    def create_group(self, name: str, retry_max_times: int, orderly: bool = False,
                     lite_bind_topic: str | None = None) -> None:
        self.inner.create_group(self.endpoints.physical(name), retry_max_times, orderly,
                                None if lite_bind_topic is None else self.endpoints.physical(lite_bind_topic))

    def producer(self, topic: str, lite: bool = False) -> Producer:
        return self.inner.producer(self.endpoints.physical(topic), lite)

    def pop_consumer(self, group: str, topic: str, long_poll_s: int, tags: str = "*",
                     lite_topics: Sequence[str] = (), options: ReceiveOptions = PLAIN) -> PopConsumer:
        return self.inner.pop_consumer(self.endpoints.physical(group), self.endpoints.physical(topic), long_poll_s,
                                       tags, lite_topics, options)

    def close(self) -> None:
        self.inner.close()
