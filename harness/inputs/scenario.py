"""Scenarios: the shape of a load, read from workloads/scenarios/*.yaml and validated.

A scenario says what to create (topics, groups), how to produce (a burst or a steady rate), how pop
consumers behave (long poll, invisible time, which delivery attempts they nack and how), and for how
long. It says nothing about brokers: the same scenario runs against every variant.

This module holds the top model, the rules across its parts and the facts derived from them; the parts are in
harness.inputs.traffic (the load) and harness.inputs.brokers (topology, faults, plants, releases). How long a
run of it lasts is harness.inputs.timing's; the broker settings it decides, harness.inputs.needs'; its files and
forms, harness.inputs.catalogue's.
"""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import AfterValidator, Field, PrivateAttr, ValidationError, model_validator

from harness.contracts import schemas
from harness.contracts.workers import GRPC_CLIENTS
from harness.core.errors import ConfigError, one_line
from harness.inputs import expectations
from harness.inputs.actions import Action
from harness.inputs.brokers import Applies, Fault, Plant, Topology
from harness.inputs.fields import ResourceName, Strict
from harness.inputs.observations import Observation, ObservationName
from harness.inputs.selections import Selection, SelectionName
from harness.inputs.traffic import Consume, Cycles, Group, Nack, Produce, Series, Topic
from harness.inputs.variants import BrokerOverrides, ProxyOverrides

SCHEMA_VERSION = schemas.SCENARIO.version


def _rule(text: str) -> str:
    expectations.parse(text)
    return text


Rule = Annotated[str, AfterValidator(_rule)]

ProtocolName = Literal["grpc", "remoting"]
PROTOCOLS: tuple[str, ...] = get_args(ProtocolName)

# The proxy's limits for gRPC consumers (ProxyConfig, rocketmq-facts.md): a receive's invisible duration
# must be at least 10 s; its long-polling timeout is clamped to 5..20 s.
GRPC_MIN_INVISIBLE_S = 10
GRPC_LONG_POLL_RANGE_S = (5, 20)

# What retry_topic and observer_effect decide: a scenario's `broker:` may not set them a second way.
DECIDED_BROKER_KEYS = ("enableRetryTopicV2", "enableNotifyBeforePopCalculateLag")


class Scenario(Strict):
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
    grpc_client: Literal[GRPC_CLIENTS] | None = Field(  # type: ignore[valid-type]
        None, description="gRPC: the client the workers drive, when the scenario needs what only one does (the native "
        "one sends receives without a deadline, consume.grpc_deadline); the run says so. Default: the run's "
        "(--grpc-client)")
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
    actions: list[Action] = Field(default_factory=list, description="admin requests during the load (reset a "
                                  "group's offsets, change a broker setting, a group or a topic), the same on every "
                                  "variant at the same moment (harness.run.actions); each in the manifest and events")
    observe: dict[ObservationName, Observation] = Field(
        default_factory=dict, description="numbers read off the brokers (log lines, Prometheus series, runtime "
        "figures), each checked by expect: rules as observed.<name> (harness.inputs.observations)")
    select: dict[SelectionName, Selection] = Field(
        default_factory=dict, description="deliveries chosen by their attributes (attempt, renamed, tag, queue, "
        "message group, group), each checked by expect: rules as selected.<name>.deliveries or .messages "
        "(harness.inputs.selections)")
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
        kind = next(t for t in self.topics if t.name == self.produce_topic).message_type
        if (kind in ("FIFO", "LITE")) != bool(self.produce.message_groups):
            raise ValueError(f"produce.message_groups: {self.produce.message_groups} for the {kind} topic "
                             f"{self.produce_topic} (a FIFO topic takes messages with a message group, a LITE topic "
                             "with a lite topic, and only they)")
        self._check_lite()
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
        if self.consume.after_sends and self.produce.pattern != "burst":
            raise ValueError("consume.after_sends: consumers wait for the first burst's sends; steady traffic has "
                             "none (use consume.delay_s)")
        if self.nack.suspend and (self.protocol != "remoting" or self.nack.how != "change_invisible"
                                  or self.workers != 1):
            raise ValueError("nack.suspend: a change_invisible nack over protocol remoting with workers: 1 (the "
                             "worker remembers which messages it nacked: the attempt number no longer tells)")
        if self.grpc_client and self.protocol != "grpc":
            raise ValueError(f"grpc_client: {self.grpc_client} drives gRPC scenarios only (protocol grpc); drop it")
        if not self.consume.grpc_deadline and self.grpc_client != "native":
            raise ValueError("consume.grpc_deadline: false is sent by the native gRPC client only: add grpc_client: "
                             "native (protocol grpc)")
        if self.consume.one_client and not any(t.lite for t in self.topics):
            raise ValueError("consume.one_client: consumers sharing one client are built for lite topics only "
                             "(a LITE topic, protocol remoting)")
        if self.consume.auto_renew and self.grpc_client != "native":
            raise ValueError("consume.auto_renew: true is sent by the native gRPC client only: add grpc_client: "
                             "native (protocol grpc)")
        if self.nack.how == "same_deadline" and self.protocol != "remoting":
            raise ValueError("nack.how: same_deadline aims each change at the broker's millisecond, which only a "
                             "request straight to the broker can (protocol remoting)")
        if self.protocol == "remoting" and any(g.fifo for g in self.groups):
            i = next(i for i, g in enumerate(self.groups) if g.fifo)
            raise ValueError(f"groups.{i}.fifo: FIFO pop over remoting (order=true) is not built yet; "
                             "use protocol grpc")
        self._check_topology()
        self._check_actions(topics, set(groups))
        for i, rule in enumerate(self.expectations):
            kind, _, name = rule.metric.partition(".")
            if kind == expectations.OBSERVED and name not in self.observe:
                declared = ", ".join(sorted(self.observe)) or "none"
                raise ValueError(f"expect.{i}: {rule.metric}: observe: declares no {name!r} (it declares {declared})")
            name = name.partition(".")[0]
            if kind == expectations.SELECTED and name not in self.select:
                declared = ", ".join(sorted(self.select)) or "none"
                raise ValueError(f"expect.{i}: {rule.metric}: select: declares no {name!r} (it declares {declared})")
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

    def _check_lite(self) -> None:
        lite = {t.name for t in self.topics if t.lite}
        if not lite:
            return
        if self.protocol != "remoting":
            raise ValueError("topics: a LITE topic's messages are popped with the broker's lite requests, which only "
                             "the remoting driver sends (protocol remoting; the proxy's lite clients are not built)")
        for i, g in enumerate(self.groups):
            if g.topic not in lite:
                continue
            if g.tags != "*" or g.consumer_tags or g.read_dlq:
                raise ValueError(f"groups.{i}: a lite topic's group takes every message (no tag filter) and has no "
                                 "dead-letter queue of the broker's to read")
        if self.nack.how == "same_deadline":
            raise ValueError("nack.how: same_deadline aims at a checkpoint's deadline; lite messages have none")
        if self.workers != 1:
            raise ValueError("workers: a lite message's attempts are counted by the consumers of one worker (the "
                             "broker's consume counts do not name their messages); run it with workers: 1")

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

    def _check_actions(self, topics: set[str], groups: set[str]) -> None:
        for i, a in enumerate(self.actions):
            for name, known, kind in ((getattr(a, "group", None), groups, "groups"),
                                      (getattr(a, "topic", None), topics, "topics")):
                if name is not None and name not in known:
                    field = "group" if kind == "groups" else "topic"
                    raise ValueError(f"actions.{i}.{field}: {name!r} is not one of {kind} "
                                     f"({', '.join(sorted(known))}); an action changes the run's own")
            if a.at_s is not None and a.at_s >= self.duration_s:
                raise ValueError(f"actions.{i}: {a.label} at {a.at_s:g} s is after the load's duration_s "
                                 f"({self.duration_s:g} s); actions happen while the load runs")
            if a.at_cycle is not None and self.cycles.count and a.at_cycle >= self.cycles.count:
                raise ValueError(f"actions.{i}.at_cycle: {a.at_cycle}, but the scenario runs {self.cycles.count} "
                                 "cycle(s), counted from 0")

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

    def topic(self, name: str) -> Topic:
        return next(t for t in self.topics if t.name == name)

    def lite_topics(self, topic: str) -> list[str]:
        """The lite topics the producers send to under ``topic`` (a LITE parent), none for another topic."""
        if not self.topic(topic).lite or topic != self.produce_topic:
            return []
        return [self.produce.message_group(i) or "" for i in range(self.produce.message_groups)]

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


def invalid_message(err: ValidationError, source: str) -> str:
    """The first thing validation found wrong, on one line: ``SOURCE: FIELD: WHAT``."""
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
        raise ConfigError(invalid_message(e, source)) from None
    scenario._source = source
    return scenario
