"""The traffic of a scenario: the topics and groups it creates, how it produces (a burst or a steady rate), how
its pop consumers receive and which delivery attempts they nack, the cycles it repeats, and the series a file
can make of it (one scenario per number of groups)."""

from __future__ import annotations

import zlib
from typing import Annotated, Literal

from pydantic import Field, model_validator

from harness.contracts.workers import ReceiveOptions
from harness.inputs.fields import ALL_TAGS, ResourceName, Strict, TagFilter, TagName, tag_matches


class Topic(Strict):
    name: ResourceName
    queues: int = Field(4, ge=1, le=64)
    message_type: Literal["NORMAL", "FIFO", "PRIORITY", "LITE"] = Field(
        "NORMAL", description="FIFO: messages carry a message group and are delivered in order within it; PRIORITY "
        "(RIP-80, 5.4.0; remoting): messages carry a priority (produce.priorities), the broker queues each by it and "
        "pops the highest first; LITE (RIP-83, 5.5.0; remoting): a parent of lite topics, each its own FIFO queue "
        "(produce.message_groups names them), consumed by clients subscribed to them")

    @property
    def lite(self) -> bool:
        return self.message_type == "LITE"


class Group(Strict):
    name: ResourceName
    topic: ResourceName = Field(description="the topic this group subscribes to")
    consumers: int = Field(2, ge=1, le=256, description="pop consumers in this group (Locust users)")
    retry_max_times: int = Field(16, ge=0, le=64, description="the group's retryMaxTimes on the broker")
    read_dlq: bool = Field(False, description="read the group's dead-letter queue (%DLQ%<group>) with a reader "
                           "of its own, so the ledger tells dead-lettered from lost")
    tags: TagFilter = Field(ALL_TAGS, description="the group's tag filter: '*' or 'TagA||TagB'")
    fifo: bool = Field(False, description="a FIFO group (consumeMessageOrderly): a message group is blocked "
                       "until its message in flight is acked")
    consumer_tags: list[TagFilter] = Field(
        default_factory=list, description="per consumer (round robin), a filter of its own instead of tags: "
        "consumers of one group that disagree on their subscription")
    nacks: bool = Field(True, description="false: this group acks every delivery whatever nack: says (a "
                        "bystander on the topic, e.g. to count the wakeups another group's retries cause)")

    def consumer_filter(self, index: int) -> str:
        """The tag filter of this group's ``index``-th consumer."""
        return self.consumer_tags[index % len(self.consumer_tags)] if self.consumer_tags else self.tags

    def wants(self, tag: str | None) -> bool:
        """Whether a message tagged ``tag`` is owed to this group: some consumer of it filters for it."""
        filters = self.consumer_tags or [self.tags]
        return any(tag_matches(f, tag) for f in filters)

    @property
    def dlq_topic(self) -> str:
        return f"%DLQ%{self.name}"

    @property
    def dlq_reader(self) -> str:
        """The reader's own consumer group. Its retryMaxTimes must exceed the dead-lettered messages'
        reconsume times (the group's retryMaxTimes + 2), or the proxy forwards them on to the reader's DLQ."""
        return f"{self.name}_dlq_reader"

    @property
    def dlq_reader_retry_max_times(self) -> int:
        return self.retry_max_times + 16


class Produce(Strict):
    pattern: Literal["burst", "steady"]
    topic: ResourceName | None = Field(None, description="default: the first topic")
    count: int = Field(32, ge=0, le=1_000_000, description="burst: messages sent at once, then silence")
    rate: float = Field(1.0, gt=0, le=100_000, description="steady: messages per second, per producer")
    delay_s: float = Field(
        3.0, ge=0, le=600, description="seconds to wait before producing, so consumers are already polling"
    )
    producers: int = Field(1, ge=1, le=64)
    tags: list[TagName] = Field(default_factory=list, description="tags given to the messages in turn "
                                "(message i gets tags[i % n]); none: untagged")
    message_groups: int = Field(0, ge=0, le=10_000, description="FIFO topics: messages spread over this many "
                                "message groups in turn (message i in group i % n); LITE topics: over this many lite "
                                "topics, named as the groups would be; 0: none")

    priorities: list[Annotated[int, Field(ge=0, le=1_000)]] = Field(
        default_factory=list, description="PRIORITY topics: priorities given to the messages in turn (the "
        "_SYS_MSG_PRIORITY_ property; the broker queues a message at min(priority, queues - 1))")

    def tag(self, index: int) -> str | None:
        return self.tags[index % len(self.tags)] if self.tags else None

    def priority(self, index: int) -> int | None:
        return self.priorities[index % len(self.priorities)] if self.priorities else None

    def message_group(self, index: int) -> str | None:
        return f"mg{index % self.message_groups}" if self.message_groups else None


# Durations the client sends travel as whole seconds (rocketmq-python-client sets Duration.seconds only).
class Consume(Strict):
    invisible_s: int = Field(15, gt=0, le=43_200, description="invisible duration requested on receive, s")
    long_poll_s: int = Field(20, gt=0, le=300, description="long-polling timeout of each receive, s")
    batch: int = Field(16, ge=1, le=32, description="max messages per receive")
    processing_s: float = Field(0.0, ge=0, le=3_600, description="time spent on each delivery before ack/nack")
    extend_s: int | None = Field(None, ge=1, le=43_200, description="before each ack, ask for more time first "
                                 "(ChangeInvisibleDuration to extend_s) and ack with the handle that returns")
    delay_s: float = Field(0.0, ge=0, le=3_600, description="seconds the consumers wait before their first "
                           "receive, so a backlog builds up first (a drain)")
    after_sends: bool = Field(False, description="consumers start once every producer's first burst is sent and "
                              "stored (each send acknowledged; told by the run's master), then wait delay_s: a "
                              "drain whose backlog is complete before it starts, however fast this machine fills it")
    receives: int = Field(0, ge=0, le=1_000_000, description="0: consumers receive until the run ends; N: each "
                          "stops after its Nth receive that returned messages (what the broker committed then "
                          "stays: a consumer that went away)")
    grpc_deadline: bool = Field(True, description="gRPC: false sends each ReceiveMessage without a deadline (no "
                                "grpc-timeout header), as a hand-written client may; the consumer still gives up "
                                "waiting after long_poll_s plus its request timeout. The native gRPC client does it "
                                "(the scenario's grpc_client: native)")
    one_client: bool = Field(False, description="lite topics (remoting): a worker's consumers of a group are one "
                             "client (one client id, one subscription) receiving on several pollers at once, as a "
                             "push consumer's threads do: the broker's event queue for the client is theirs together")
    auto_renew: bool = Field(False, description="gRPC: each ReceiveMessage asks the proxy to renew what it pops "
                             "while the consumer holds it (auto_renew, as push consumers do): the proxy pops with "
                             "its own invisible time (its defaultInvisibleTimeMills), renews it in the background, and "
                             "maps the handle the consumer acks with to the renewed one. The native gRPC client "
                             "does it (grpc_client: native)")

    @property
    def receive_options(self) -> ReceiveOptions:
        """What the consumers' receives do beyond batch and invisible time (harness.client.driver)."""
        return ReceiveOptions(deadline=self.grpc_deadline, auto_renew=self.auto_renew, one_client=self.one_client)


class Nack(Strict):
    attempts: list[Annotated[int, Field(ge=1, le=64)]] = Field(
        default_factory=lambda: [1], description="delivery attempts (1 = first delivery) that are nacked"
    )
    how: Literal["change_invisible", "lapse", "same_deadline"] = Field(
        "change_invisible",
        description="change_invisible: ChangeInvisibleDuration to delay_s; lapse: neither ack nor change, "
        "so the message reappears when its invisible time runs out; same_deadline (remoting): changes whose new "
        "deadline is the old one to the millisecond (apache/rocketmq#10276), so it reappears when the receive's "
        "invisible time runs out",
    )
    delay_s: int = Field(1, ge=0, le=43_200, description="change_invisible: the new invisible duration, s")
    suspend: bool = Field(False, description="change_invisible over remoting: ask the broker to keep the reconsume "
                          "times (ChangeInvisibleTime's suspend flag, new in 5.5.0, apache/rocketmq#10050); the retry "
                          "then comes back as the same delivery attempt, so each message is nacked once")
    fraction: float = Field(1.0, gt=0, le=1, description="the share of messages nacked, chosen by ledger id "
                            "(a hash), so every variant and every run nacks the same share")

    def applies(self, attempt: int, ledger_id: str | None) -> bool:
        """Whether this delivery attempt of this message is nacked."""
        if attempt not in self.attempts:
            return False
        if self.fraction >= 1:
            return True
        return ledger_id is not None and zlib.crc32(ledger_id.encode()) % 10_000 < self.fraction * 10_000


class Cycles(Strict):
    """The unit of replication: a scenario repeats its produce-and-nack pattern, and a verdict compares
    cycles, never single messages (the retries of one burst are released together)."""

    count: int = Field(0, ge=0, le=100_000,
                       description="0: start cycles until duration_s has passed; K: exactly K cycles")
    spacing: Literal["drained"] | Annotated[float, Field(gt=0, le=3_600)] = Field(
        "drained",
        description="burst: 'drained' starts the next cycle once every message of this one is acked (plus "
        "settle_s), a number of seconds starts one every that often; steady: the length of a cycle's window")
    settle_s: float = Field(1.0, ge=0, le=600, description="drained: pause before the next burst, so the "
                            "consumers are back in a long poll when it comes")
    drain_timeout_s: float = Field(60.0, gt=0, le=3_600, description="drained: a cycle not drained by then "
                                   "is closed as timed out; every scenario: how long the run's drain phase (no "
                                   "new sends) waits for the open cycles before what is not acked counts as lost")
    linger_s: float = Field(0.0, ge=0, le=3_600, description="after the drain phase, how long consumers go on "
                            "before the run ends, so a late redelivery of something acked shows as a duplicate")
    # A verdict needs cycles, not seconds: a variant that stalls runs few cycles in duration_s (an unpatched
    # broker's burst cycle waits ~20 s for the poll to run out), so a gate scenario keeps starting them until
    # it has enough, within a cap.
    at_least: int = Field(0, ge=0, le=100_000, description="drained bursts with count 0: past duration_s, each "
                          "variant keeps starting cycles until it has run this many, never after cap_s")
    cap_s: float | None = Field(None, gt=0, le=86_400, description="with at_least: no cycle starts after this "
                                "many seconds, however few have run (the report says how many did)")


class Series(Strict):
    """One file, several scenarios: it runs once per number of groups on its topic, to draw a cost as a
    curve. A point keeps the groups listed first and makes up the number with copies of the last one."""

    groups: list[Annotated[int, Field(ge=1, le=256)]] = Field(min_length=1, description="the numbers of groups")
    of: ResourceName | None = Field(None, description="set on each point by the loader: the series' name")

    @model_validator(mode="after")
    def _increasing(self) -> Series:
        if self.groups != sorted(set(self.groups)):
            raise ValueError(f"groups: {self.groups} must be increasing, each number once")
        return self

