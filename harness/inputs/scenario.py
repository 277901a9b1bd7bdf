"""Scenarios: the shape of a load, read from workloads/scenarios/*.yaml and validated.

A scenario says what to create (topics, groups), how to produce (a burst or a steady rate), how pop
consumers behave (long poll, invisible time, which delivery attempts they nack and how), and for how
long. It says nothing about brokers: the same scenario runs against every variant.
"""

from __future__ import annotations

import re
import zlib
from pathlib import Path
from typing import Annotated, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StringConstraints,
    ValidationError,
    model_validator,
)

from harness.contracts import schemas
from harness.core.errors import ConfigError, one_line
from harness.core.paths import REPO_ROOT
from harness.core.yamlfile import read_yaml
from harness.inputs import expectations
from harness.inputs.variants import BrokerOverrides, ProxyOverrides

SCENARIO_DIR = REPO_ROOT / "workloads" / "scenarios"
SCHEMA_VERSION = schemas.SCENARIO.version


def _rule(text: str) -> str:
    expectations.parse(text)
    return text


Rule = Annotated[str, AfterValidator(_rule)]

ALL_TAGS = "*"
TagName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
# A consumer's tag filter: '*' (everything) or tags joined by '||' (RocketMQ's TAG expression).
TagFilter = Annotated[str, StringConstraints(pattern=r"^(\*|[A-Za-z0-9_-]{1,64}(\|\|[A-Za-z0-9_-]{1,64})*)$")]


def tag_matches(expression: str, tag: str | None) -> bool:
    """Whether a consumer filtering on ``expression`` is meant to get a message tagged ``tag``."""
    if expression == ALL_TAGS:
        return True
    return tag is not None and tag in expression.split("||")

ProtocolName = Literal["grpc", "remoting"]
PROTOCOLS: tuple[str, ...] = get_args(ProtocolName)

# The proxy's limits for gRPC consumers (ProxyConfig, rocketmq-facts.md): a receive's invisible duration
# must be at least 10 s; its long-polling timeout is clamped to 5..20 s.
GRPC_MIN_INVISIBLE_S = 10
GRPC_LONG_POLL_RANGE_S = (5, 20)

# RocketMQ topic / group names: letters, digits, '_', '-', '%', '|' (TopicValidator); no '+' so V2 retry
# names parse.
ResourceName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{1,100}$")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Topic(_Strict):
    name: ResourceName
    queues: int = Field(4, ge=1, le=64)
    message_type: Literal["NORMAL", "FIFO", "PRIORITY"] = Field(
        "NORMAL", description="FIFO: messages carry a message group and are delivered in order within it; PRIORITY "
        "(RIP-80, 5.4.0; remoting): messages carry a priority (produce.priorities), the broker queues each by it and "
        "pops the highest first")


class Group(_Strict):
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


class Produce(_Strict):
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
                                "message groups in turn (message i in group i % n); 0: none")

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
class Consume(_Strict):
    invisible_s: int = Field(15, gt=0, le=43_200, description="invisible duration requested on receive, s")
    long_poll_s: int = Field(20, gt=0, le=300, description="long-polling timeout of each receive, s")
    batch: int = Field(16, ge=1, le=32, description="max messages per receive")
    processing_s: float = Field(0.0, ge=0, le=3_600, description="time spent on each delivery before ack/nack")
    extend_s: int | None = Field(None, ge=1, le=43_200, description="before each ack, ask for more time first "
                                 "(ChangeInvisibleDuration to extend_s) and ack with the handle that returns")
    delay_s: float = Field(0.0, ge=0, le=3_600, description="seconds the consumers wait before their first "
                           "receive, so a backlog builds up first (a drain)")
    receives: int = Field(0, ge=0, le=1_000_000, description="0: consumers receive until the run ends; N: each "
                          "stops after its Nth receive that returned messages (what the broker committed then "
                          "stays: a consumer that went away)")


class Nack(_Strict):
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


class Cycles(_Strict):
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


class Series(_Strict):
    """One file, several scenarios: it runs once per number of groups on its topic, to draw a cost as a
    curve. A point keeps the groups listed first and makes up the number with copies of the last one."""

    groups: list[Annotated[int, Field(ge=1, le=256)]] = Field(min_length=1, description="the numbers of groups")
    of: ResourceName | None = Field(None, description="set on each point by the loader: the series' name")

    @model_validator(mode="after")
    def _increasing(self) -> Series:
        if self.groups != sorted(set(self.groups)):
            raise ValueError(f"groups: {self.groups} must be increasing, each number once")
        return self


# Processes a fault can hit, by what they are in RocketMQ. With the proxy in local mode the broker and the
# proxy are one JVM, so only `broker` names it.
FaultTarget = Literal["namesrv", "broker", "broker-b", "slave", "proxy"]
FAULT_TARGETS: tuple[str, ...] = get_args(FaultTarget)
FaultAction = Literal["kill9", "sigstop", "restart"]
FAULT_ACTIONS: tuple[str, ...] = get_args(FaultAction)


class Topology(_Strict):
    """The shape of every variant's deployment. A scenario holds it, not a variant: a comparison judges
    builds, so both sides must run on the same shape."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    proxy: Literal["local", "cluster"] = Field(
        "local", description="local: the broker runs inside the proxy's JVM (upstream's `mqbroker --enable-proxy`); "
        "cluster: a broker JVM per broker and one proxy JVM of its own in front of them")
    masters: int = Field(1, ge=1, le=2, description="master brokers in the cluster (broker, broker-b)")
    slave: bool = Field(False, description="a slave of the first master that acts as master while it is down "
                        "(enableSlaveActingMaster, RIP-32)")

    @model_validator(mode="after")
    def _shape(self) -> Topology:
        if self.proxy == "local" and (self.masters > 1 or self.slave):
            what = "two masters" if self.masters > 1 else "a slave"
            raise ValueError(f"proxy: local runs one broker inside the proxy's JVM; {what} needs proxy: cluster")
        return self

    @property
    def targets(self) -> tuple[str, ...]:
        """The processes a fault can name in this topology."""
        out = ["namesrv", "broker"]
        if self.masters > 1:
            out.append("broker-b")
        if self.slave:
            out.append("slave")
        if self.proxy == "cluster":
            out.append("proxy")
        return tuple(out)


# One broker inside the proxy's JVM: upstream's `mqbroker --enable-proxy`, what every scenario ran before topologies.
SINGLE = Topology()


class Fault(_Strict):
    """One fault, injected into every variant at the same moment of the load."""

    at_s: float = Field(ge=0, le=86_400, description="seconds after the load starts (Locust started)")
    action: FaultAction = Field(description="kill9: SIGKILL, started again after duration_s; sigstop: SIGSTOP, "
                                "SIGCONT after duration_s; restart: SIGTERM, wait for the exit, start again")
    target: FaultTarget
    duration_s: float | None = Field(None, ge=0, le=3_600, description="sigstop: how long it stays stopped "
                                     "(required); kill9: how long it stays dead before it is started again "
                                     "(default 0: at once, as a supervisor would)")

    @model_validator(mode="after")
    def _duration(self) -> Fault:
        if self.action == "sigstop" and self.duration_s is None:
            raise ValueError("duration_s: sigstop needs how long the process stays stopped")
        if self.action == "restart" and self.duration_s is not None:
            raise ValueError("duration_s: a restart starts the process again as soon as it exited")
        return self

    @property
    def hold_s(self) -> float:
        """How long the fault keeps its target away, as planned (a restart: only as long as it takes)."""
        return self.duration_s or 0.0

    @property
    def label(self) -> str:
        return f"{self.action} {self.target}" + (f" {self.duration_s:g} s" if self.duration_s else "")


# What retry_topic and observer_effect decide: a scenario's `broker:` may not set them a second way.
DECIDED_BROKER_KEYS = ("enableRetryTopicV2", "enableNotifyBeforePopCalculateLag")
_RELEASE_PREFIX = re.compile(r"^(\d+)\.(\d+)\.(\d+)")


class Applies(_Strict):
    """The releases a scenario can ask at all: a defect in a feature is not "absent" from a release that lacks
    the feature, it is not applicable there."""

    since: Annotated[str, StringConstraints(pattern=r"^\d+\.\d+\.\d+$")] = Field(
        description="the first release that has what the scenario needs (MAJOR.MINOR.PATCH)")
    why: str = Field(min_length=1, description="what releases before it lack (said when one is left out)")


class Plant(_Strict):
    """A failure planted in a broker method by the pop-fault agent (broker-patches): for defects upstream reports
    after a failure (a revive whose read fails, a record that cannot be written), the failure is planted and the
    defect is what the broker does next. Never a fix; every variant of the run gets the same plant."""

    method: Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][\w.$]*#[A-Za-z_]\w*$")] = Field(
        description="the broker method, org.apache.rocketmq.<...>.Class#method (every overload of that name)")
    mode: Literal["throw", "fail", "false", "delay"] = Field(
        description="throw: it throws on entry; fail: its CompletableFuture completes exceptionally; false: it "
        "returns false without running; delay: it runs after a sleep of delay_ms on entry")
    delay_ms: int | None = Field(None, ge=1, le=600_000, description="mode delay only, and required there: how "
                                 "long each planted call sleeps on entry, ms")
    thread: Annotated[str, StringConstraints(pattern=r"^[^,;=]{1,100}$")] | None = Field(
        None, description="only calls on a thread whose name contains this qualify (others pass, not counted)")
    calls: int = Field(1, ge=1, le=1_000_000, description="how many calls fail (or are delayed)")
    skip: int = Field(0, ge=0, le=1_000_000, description="qualifying calls let through before the first failure")
    after_s: float = Field(0.0, ge=0, le=86_400, description="calls within this many seconds of the broker's "
                           "start pass (not counted): start-up is not the failure's moment")
    exception: Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][\w.$]*$")] | None = Field(
        None, description="mode throw or fail only: the planted exception's class (fully qualified, e.g. "
        "org.apache.rocketmq.client.exception.MQBrokerException), made from the planted class's loader with the "
        "constructor (String), or (int, String) with code; default RuntimeException (also when it cannot be made: "
        "the agent says so once)")
    code: int | None = Field(None, ge=-2**31, le=2**31 - 1, description="with exception only: the int its "
                             "(int, String) constructor gets (e.g. a ResponseCode)")

    @model_validator(mode="after")
    def _delay_ms_with_delay(self) -> Plant:
        if self.mode == "delay" and self.delay_ms is None:
            raise ValueError("delay_ms: required with mode delay")
        if self.mode != "delay" and self.delay_ms is not None:
            raise ValueError(f"delay_ms: only for mode delay (not mode {self.mode})")
        if self.exception is not None and self.mode not in ("throw", "fail"):
            raise ValueError(f"exception: only for mode throw or fail (not mode {self.mode})")
        if self.code is not None and self.exception is None:
            raise ValueError("code: only with exception (it goes to the exception's (int, String) constructor)")
        return self

    @property
    def options(self) -> str:
        opts = (f"method={self.method},mode={self.mode},calls={self.calls},skip={self.skip},"
                f"after_ms={round(self.after_s * 1000)}")
        if self.delay_ms is not None:
            opts += f",delay_ms={self.delay_ms}"
        if self.thread is not None:
            opts += f",thread={self.thread}"
        if self.exception is not None:
            opts += f",exception={self.exception}"
        if self.code is not None:
            opts += f",code={self.code}"
        return opts


class Scenario(_Strict):
    schema_version: Literal[tuple(sorted(schemas.SCENARIO.known))] = SCHEMA_VERSION  # type: ignore[valid-type]
    name: ResourceName
    description: str = ""
    reference: str = Field("", description="where the behaviour comes from: an upstream issue, a seed document")
    expect: list[Rule] = Field(default_factory=list, description="what a CORRECT broker shows: rules such as "
                               "'wakeup_ms.p50 < 1000' or 'ledger.lost == 0' (harness.inputs.expectations)")
    gate: bool = Field(False, description="in the gate set (`matrix --scenario gate`): the fast scenarios that "
                       "together cover every primary behaviour, run on every pull request")
    upstream: bool = Field(False, description="in the upstream-defects set (`sweep --scenario upstream`): a pop "
                           "defect upstream reported, checked per release (docs/findings/upstream-defects.md)")
    verdict_metric: Literal["wakeup_ms", "redelivery_ms", "stalled", "lost"] = Field(
        "wakeup_ms", description="what the verdict judges (the primary comparison): the retry wakeup's median "
        "(default), the redelivery's, the share of retries that stalled (waited for a poll to run out), or the "
        "share of owed messages lost (for a scenario whose defect is loss, where most retries never come back)")
    protocol: ProtocolName = Field(
        "grpc", description="grpc: through the proxy (its limits: invisible >= 10 s, poll 5..20 s); remoting: pop "
        "straight from the broker, as the Java remoting client in pop mode does (the broker's own limits)")
    retry_topic: Literal["v1", "v2"] = Field("v1", description="retry topic naming: sets enableRetryTopicV2")
    topics: list[Topic] = Field(min_length=1)
    groups: list[Group] = Field(min_length=1)
    produce: Produce
    consume: Consume = Field(default_factory=Consume)
    nack: Nack = Field(default_factory=Nack)
    observer_effect: bool = Field(
        False,
        description="true: each scrape of the broker's lag gauges force-wakes suspended pops (upstream's "
        "default enableNotifyBeforePopCalculateLag=true), which caps a stuck retry at the scrape interval",
    )
    cycles: Cycles
    duration_s: float = Field(60.0, gt=0, le=86_400,
                              description="how long Locust runs; with cycles.count 0, how long new cycles start")
    workers: int = Field(2, ge=1, le=64, description="Locust worker processes")
    series: Series | None = Field(None, description="run once per number of groups (see Series); a point of "
                                  "it has one number and names the series in `of`")
    topology: Topology = Field(default_factory=Topology, description="the deployment every variant runs on")
    broker: BrokerOverrides = Field(
        default_factory=dict, description="broker settings the scenario needs (a feature such as the KV pop service): "
        "set on every variant it runs against; a variant that sets one otherwise is refused, and a release that does "
        "not know one does not run it (not applicable)")
    proxy: ProxyOverrides = Field(
        default_factory=dict, description="proxy settings the scenario needs (rmq-proxy.json), set on every variant; "
        "a variant that sets one otherwise is refused")
    plant: list[Plant] = Field(default_factory=list, description="failures planted in every broker's methods "
                               "(the pop-fault agent), for defects that follow a failure")
    applies: Applies | None = Field(None, description="the releases the scenario can ask: {since: 5.5.0, why: ...}; "
                                    "earlier ones are not applicable")
    faults: list[Fault] = Field(default_factory=list, description="faults injected during the load, into every "
                                "variant at once (harness.run.faults); each is in the manifest and the events")
    _source: str = PrivateAttr("scenario")

    @model_validator(mode="before")
    @classmethod
    def _default_cycles(cls, data: object) -> object:
        """Without `cycles:`, a burst is one cycle and steady traffic has 10 s windows."""
        if isinstance(data, dict) and "cycles" not in data:
            steady = isinstance(data.get("produce"), dict) and data["produce"].get("pattern") == "steady"
            data = {**data, "cycles": {"count": 0, "spacing": 10.0} if steady else {"count": 1}}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        c = self.cycles
        if c.at_least and not (self.drains and c.count == 0):
            raise ValueError("cycles.at_least: only for bursts with spacing 'drained' and count 0 (count K already "
                             "runs exactly K cycles)")
        if c.at_least and (c.cap_s is None or c.cap_s < self.duration_s):
            raise ValueError(f"cycles.cap_s: at_least {c.at_least} needs a cap of at least duration_s "
                             f"({self.duration_s:g} s), the time after which no cycle starts")
        if c.cap_s is not None and not c.at_least:
            raise ValueError("cycles.cap_s: a cap on at_least, which is not set")
        topics = {t.name for t in self.topics}
        if len(topics) != len(self.topics):
            raise ValueError("topics: names must be unique")
        groups = [g.name for g in self.groups]
        if len(set(groups)) != len(groups):
            raise ValueError("groups: names must be unique")
        for i, g in enumerate(self.groups):
            if g.topic not in topics:
                raise ValueError(f"groups.{i}.topic: {g.topic!r} is not one of topics ({', '.join(sorted(topics))})")
        if self.produce.topic is not None and self.produce.topic not in topics:
            raise ValueError(f"produce.topic: {self.produce.topic!r} is not one of topics")
        fifo_topic = next(t for t in self.topics if t.name == self.produce_topic).message_type == "FIFO"
        if fifo_topic != bool(self.produce.message_groups):
            kind = "FIFO" if fifo_topic else "NORMAL"
            raise ValueError(f"produce.message_groups: {self.produce.message_groups} for the {kind} topic "
                             f"{self.produce_topic} (a FIFO topic takes messages with a message group, and only it)")
        priority_topic = next(t for t in self.topics if t.name == self.produce_topic).message_type == "PRIORITY"
        if priority_topic != bool(self.produce.priorities):
            kind = "PRIORITY" if priority_topic else "non-PRIORITY"
            given = "none" if priority_topic else self.produce.priorities
            raise ValueError(f"produce.priorities: {given} for the {kind} topic {self.produce_topic} (a PRIORITY "
                             "topic takes messages with a priority, and only it)")
        if any(t.message_type == "PRIORITY" for t in self.topics) and self.protocol != "remoting":
            raise ValueError("topics: a PRIORITY topic's messages carry their priority as a property, which only the "
                             "remoting driver sends (protocol remoting)")
        if self.series and self.series.of is None:
            points = ", ".join(f"{self.name}@{n}" for n in self.series.groups)
            raise ValueError(f"series: {self.name} is a series of scenarios ({points}): run one point "
                             f"(--scenario {self.name}@{self.series.groups[-1]}), or all of them with "
                             f"rmq-harness matrix --scenario {self.name}")
        if self.produce.pattern == "steady" and self.cycles.spacing == "drained":
            raise ValueError("cycles.spacing: steady traffic never drains; give the window length in seconds")
        if self.nack.suspend and (self.protocol != "remoting" or self.nack.how != "change_invisible"
                                  or self.workers != 1):
            raise ValueError("nack.suspend: a change_invisible nack over protocol remoting with workers: 1 (the "
                             "worker remembers which messages it nacked: the attempt number no longer tells)")
        if self.nack.how == "same_deadline" and self.protocol != "remoting":
            raise ValueError("nack.how: same_deadline aims each change at the broker's millisecond, which only a "
                             "request straight to the broker can (protocol remoting)")
        if self.protocol == "remoting" and any(g.fifo for g in self.groups):
            i = next(i for i, g in enumerate(self.groups) if g.fifo)
            raise ValueError(f"groups.{i}.fifo: FIFO pop over remoting (order=true) is not built yet; "
                             "use protocol grpc")
        self._check_topology()
        decided = sorted(set(self.broker) & set(DECIDED_BROKER_KEYS))
        if decided:
            raise ValueError(f"broker.{decided[0]}: decided by retry_topic / observer_effect; set it there")
        if self.protocol == "grpc":
            lo, hi = GRPC_LONG_POLL_RANGE_S
            if not lo <= self.consume.long_poll_s <= hi:
                raise ValueError(f"consume.long_poll_s: {self.consume.long_poll_s} outside the gRPC proxy's "
                                 f"range {lo}..{hi} s")
            if self.consume.invisible_s < GRPC_MIN_INVISIBLE_S:
                raise ValueError(f"consume.invisible_s: {self.consume.invisible_s} under the gRPC proxy's "
                                 f"minimum of {GRPC_MIN_INVISIBLE_S} s")
        return self

    def _check_topology(self) -> None:
        topo = self.topology
        if self.protocol == "remoting" and (topo.masters > 1 or topo.slave):
            raise ValueError("topology: the remoting driver pops from the first master only; run two masters or "
                             "a slave over protocol grpc")
        for i, f in enumerate(self.faults):
            if f.target not in topo.targets:
                why = {"proxy": "the proxy runs inside the broker's JVM (topology.proxy: local); set "
                                "topology.proxy: cluster for a proxy of its own, or target broker",
                       "broker-b": "the topology has one master (topology.masters: 2 adds broker-b)",
                       "slave": "the topology has no slave (topology.slave: true)"}[f.target]
                raise ValueError(f"faults.{i}.target: {f.target}: {why}")
            if f.at_s + f.hold_s >= self.duration_s:
                raise ValueError(f"faults.{i}: {f.label} at {f.at_s:g} s ends after the load's duration_s "
                                 f"({self.duration_s:g} s); faults happen while the load runs")
        by_target: dict[str, list[tuple[int, Fault]]] = {}
        for i, f in enumerate(self.faults):
            by_target.setdefault(f.target, []).append((i, f))
        for target, faults in by_target.items():
            faults.sort(key=lambda x: x[1].at_s)
            # Faults on one target run one after another (a later one waits until its target is back).
            for (_, a), (j, b) in zip(faults, faults[1:], strict=False):
                if b.at_s < a.at_s + a.hold_s:
                    raise ValueError(f"faults.{j}: {b.label} at {b.at_s:g} s overlaps {a.label} at {a.at_s:g} s "
                                     f"on {target}")

    @property
    def expectations(self) -> list[expectations.Expectation]:
        return [expectations.parse(r) for r in self.expect]

    def owed_groups(self, topic: str, tag: str | None) -> list[str]:
        """The groups a message sent to ``topic`` with ``tag`` is owed to."""
        return [g.name for g in self.groups if g.topic == topic and g.wants(tag)]

    def subscriptions(self) -> dict[str, dict[str, list[str]]]:
        """Each topic -> its groups -> their consumers' tag filters (whom a message sent to it is owed)."""
        out: dict[str, dict[str, list[str]]] = {t.name: {} for t in self.topics}
        for g in self.groups:
            out[g.topic][g.name] = list(g.consumer_tags or [g.tags])
        return out

    def allowed_deliveries(self) -> dict[str, int]:
        """Each group -> how many deliveries a message may get before it is dead-lettered."""
        return {g.name: g.retry_max_times + 1 for g in self.groups}

    @property
    def produce_topic(self) -> str:
        return self.produce.topic or self.topics[0].name

    @property
    def consumer_count(self) -> int:
        """Every consuming Locust user: the groups' consumers and one DLQ reader per group that reads it."""
        return sum(g.consumers + int(g.read_dlq) for g in self.groups)

    @property
    def source(self) -> str:
        """The file this scenario came from (for messages that name it)."""
        return self._source

    @property
    def drains(self) -> bool:
        """Cycles that end when every message is acked (bursts with spacing 'drained')."""
        return self.produce.pattern == "burst" and self.cycles.spacing == "drained"

    @property
    def retries_expected(self) -> bool:
        """Whether any consumer gives a delivery back (a scenario without, e.g. ack-after-extend, has no retry
        latency to judge: its verdict is its ledger's)."""
        return bool(self.nack.attempts) and any(g.nacks for g in self.groups)

    @property
    def late_after_ms(self) -> float | None:
        """After how long from its send an ack is late (harness.measure.ledger's ``late``): a drained cycle gives
        up on its messages drain_timeout_s after its burst; None where cycles do not drain (a window's messages
        are waited for until the run's drain phase ends, and what is not acked then is lost)."""
        return self.cycles.drain_timeout_s * 1000 if self.drains else None

    def starts_another(self, ran: int, elapsed_s: float) -> bool:
        """Whether a producer that has run ``ran`` cycles in ``elapsed_s`` starts one more: exactly count
        cycles, or every cycle that starts within duration_s, and past it up to at_least cycles by cap_s."""
        c = self.cycles
        if c.count:
            return ran < c.count
        if elapsed_s < self.duration_s:
            return True
        return ran < c.at_least and elapsed_s < (c.cap_s or 0.0)

    @property
    def run_time_s(self) -> float:
        """How long Locust may run at most: cycles start until duration_s, and the last may take until it
        drains or times out. A run whose cycles are all done ends before."""
        c = self.cycles
        if self.produce.pattern == "steady":
            sending = c.count * float(c.spacing) if c.count else self.duration_s
            return self.produce.delay_s + sending + c.drain_timeout_s + c.linger_s
        if self.drains:
            per_cycle = c.drain_timeout_s + c.settle_s
            if c.count == 0:
                starting = max(self.duration_s, c.cap_s or 0.0) if c.at_least else self.duration_s
                return self.produce.delay_s + starting + per_cycle + c.linger_s
            return self.produce.delay_s + c.count * per_cycle + c.linger_s
        # Spaced bursts: the last starts by duration_s (or after count spacings), then the drain phase.
        sending = self.duration_s + float(c.spacing) if c.count == 0 else c.count * float(c.spacing)
        return self.produce.delay_s + sending + c.drain_timeout_s + c.linger_s

    def not_applicable(self, version: str | None) -> str | None:
        """Why a build of ``version`` cannot be asked this scenario (it predates ``applies.since``), or None.
        A version that is not MAJOR.MINOR.PATCH-like (an external cluster not yet asked) is not judged here."""
        m = _RELEASE_PREFIX.match(version or "")
        if self.applies is None or m is None:
            return None
        since = tuple(int(x) for x in self.applies.since.split("."))
        if tuple(int(x) for x in m.groups()) >= since:
            return None
        return (f"scenario {self.name} needs RocketMQ {self.applies.since} or later ({self.applies.why}); this is "
                f"{version}")

    def required_settings(self) -> set[str]:
        """The broker settings a build must know to run the scenario at all: its own `broker:` ones, and the
        decided ones it turns on."""
        return set(self.broker) | {k for k, v in self.broker_overrides().items() if v is True}

    def broker_overrides(self) -> dict[str, bool | int | float | str]:
        """Broker settings the scenario decides: its own `broker:` ones, the retry topic naming it is about, and
        whether scrapes may force-wake pops. A variant that sets one of them differently is refused (see
        conflicts)."""
        return {**self.broker, "enableRetryTopicV2": self.retry_topic == "v2",
                "enableNotifyBeforePopCalculateLag": self.observer_effect}

    def conflicts(self, broker: dict[str, object], proxy: dict[str, object] | None = None) -> list[str]:
        """The scenario's broker (and proxy) settings that a variant's overrides set otherwise."""
        def norm(v: object) -> str:
            return str(v).lower()

        def clashes(theirs: dict[str, object], ours: dict[str, object], where: str) -> list[str]:
            return [f"{where}{k}={norm(theirs[k])} (the scenario needs {norm(v)})"
                    for k, v in ours.items() if k in theirs and norm(theirs[k]) != norm(v)]

        return clashes(broker, self.broker_overrides(), "") + clashes(proxy or {}, self.proxy, "proxy ")


def _describe(err: ValidationError, source: str) -> str:
    first = err.errors()[0]
    loc = one_line(".".join(str(p) for p in first["loc"]))  # keys are the user's: they may hold line breaks
    msg = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        msg = "unknown field"
    return f"{source}: {loc + ': ' if loc else ''}{msg}"


def parse_scenario(data: object, source: str = "scenario") -> Scenario:
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as e:
        raise ConfigError(_describe(e, source)) from None
    scenario._source = source
    return scenario


def resolve_path(name_or_path: str) -> Path:
    """A scenario file path, or the name of one in workloads/scenarios/."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.exists():
        return p
    return SCENARIO_DIR / f"{name_or_path}.yaml"


def builtin_names() -> list[str]:
    """The built-in scenarios' names (files in workloads/scenarios/), sorted."""
    return sorted(p.stem for p in SCENARIO_DIR.glob("*.yaml"))


def _read(path: Path) -> object:
    known = ", ".join(builtin_names())
    return read_yaml(path, "scenario file", f"no such scenario file (built-in scenarios: {known})")


def _points(data: dict, source: str) -> dict[int, dict]:
    """A series file -> each number of groups -> the plain scenario (as data) of that point."""
    try:
        series = Series.model_validate(data["series"])
    except ValidationError as e:
        raise ConfigError(_describe(e, f"{source}: series")) from None
    groups = data.get("groups")
    if not isinstance(groups, list) or not groups or not all(isinstance(g, dict) and "name" in g for g in groups):
        raise ConfigError(f"{source}: groups: a series needs its groups listed, each with a name")
    last = groups[-1]
    out = {}
    for n in series.groups:
        made = groups[:n] + [{**last, "name": f"{last['name']}{i}"} for i in range(2, n - len(groups) + 2)]
        out[n] = {**data, "name": f"{data.get('name')}-{n}", "groups": made,
                  "series": {"groups": [n], "of": data.get("name")}}
    return out


def load_scenarios(name_or_path: str) -> list[Scenario]:
    """The scenario, or every point of a series (one scenario per number of groups)."""
    path = resolve_path(name_or_path)
    data = _read(path)
    if isinstance(data, dict) and data.get("series") is not None:
        return [parse_scenario(d, f"{path} (series point {n})") for n, d in _points(data, str(path)).items()]
    return [parse_scenario(data, str(path))]


def on_protocol(scenario: Scenario, protocol: str) -> Scenario:
    """The scenario over ``protocol``: itself when it is its own, else its form over the other one, named
    NAME-PROTOCOL and otherwise the same. A ConfigError says why a form does not apply (FIFO over remoting,
    a remoting case under the gRPC proxy's limits)."""
    if protocol == scenario.protocol:
        return scenario
    data = scenario.model_dump()
    data.update(name=f"{scenario.name}-{protocol}", protocol=protocol,
                description=f"{scenario.description} (the {protocol} form of {scenario.name})".strip())
    if scenario.series is not None:
        data["series"] = {**data["series"], "of": f"{scenario.series.of}-{protocol}"}
    return parse_scenario(data, f"{scenario.source} (over {protocol})")


def load_scenario(name_or_path: str) -> Scenario:
    """One scenario; ``NAME@N`` is the point of the series NAME with N groups."""
    named_point = "@" in name_or_path and not Path(name_or_path).is_file()  # a file's path may hold an '@'
    base, at, point = name_or_path.rpartition("@") if named_point else (name_or_path, "", "")
    path = resolve_path(base)
    data = _read(path)
    if not at:
        return parse_scenario(data, str(path))
    if not isinstance(data, dict) or data.get("series") is None:
        raise ConfigError(f"{name_or_path}: {path} is not a series; name it without '@{point}'")
    points = _points(data, str(path))
    if not point.isdigit() or int(point) not in points:
        raise ConfigError(f"{name_or_path}: {path} has no point {point!r} (its numbers of groups: "
                          f"{', '.join(map(str, points))})")
    return parse_scenario(points[int(point)], f"{path} (series point {point})")


_FAULT_SPEC = re.compile(r"^(?P<action>[a-z0-9]+):(?P<target>[a-z-]+)@(?P<at>[0-9.]+)(\+(?P<duration>[0-9.]+))?$")


def parse_fault(spec: str) -> Fault:
    """``ACTION:TARGET@AT_S[+DURATION_S]`` (e.g. kill9:broker@30+10) -> a Fault; ConfigError naming what is wrong."""
    m = _FAULT_SPEC.match(spec)
    if not m:
        raise ConfigError(f"--fault {spec!r}: expected ACTION:TARGET@AT_S[+DURATION_S], e.g. kill9:broker@30+10 "
                          f"(actions: {', '.join(FAULT_ACTIONS)}; targets: {', '.join(FAULT_TARGETS)})")
    data = {"action": m["action"], "target": m["target"], "at_s": m["at"]}
    if m["duration"] is not None:
        data["duration_s"] = m["duration"]
    try:
        return Fault.model_validate(data)
    except ValidationError as e:
        raise ConfigError(_describe(e, f"--fault {spec}")) from None


def with_faults(scenario: Scenario, faults: list[Fault]) -> Scenario:
    """The scenario with ``faults`` instead of its own, named after them (NAME-ACTION-TARGET...), so archives of
    different fault schedules are never pooled as one scenario."""
    data = scenario.model_dump()
    suffix = "-".join(f"{f.action}-{f.target}" for f in faults) or "nofaults"
    data.update(name=f"{scenario.name}-{suffix}"[:100], faults=[f.model_dump() for f in faults])
    return parse_scenario(data, f"{scenario.source} (with --fault)")
