"""Actions: what an operator does to the cluster while the load runs (admin requests, not process faults), the same
on every variant at the same moment of its load: reset a group's offsets, change a broker setting at runtime,
change a subscription group, create or resize a topic, delete one. Each is carried out by
harness.run.actions, recorded in the manifest and the events, and shown in the report.

A moment is ``at_s`` seconds after the variant's producers start sending (as a fault's), or ``after_s`` seconds
after they start cycle ``at_cycle`` (counted from 0): a defect that needs "a reset while a pop is outstanding" is
timed by the traffic, not by the clock.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from harness.inputs.fields import ResourceName, Strict
from harness.inputs.variants import BrokerOverrides


def spelled(value: object) -> str:
    """A setting as RocketMQ writes it (Java's booleans are lower case)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


class Moment(Strict):
    """When an action happens on each variant."""

    at_s: float | None = Field(None, ge=0, le=86_400, description="seconds after the variant's producers start "
                               "sending (its first cycle), as faults' at_s")
    at_cycle: int | None = Field(None, ge=0, le=100_000, description="when the variant's producers start this "
                                 "cycle (0: the first); with after_s, that many seconds later")
    after_s: float = Field(0.0, ge=0, le=3_600, description="with at_cycle: seconds after the cycle starts")

    @model_validator(mode="after")
    def _one_moment(self) -> Moment:
        if (self.at_s is None) == (self.at_cycle is None):
            raise ValueError("give the moment as at_s (seconds after the load starts) or at_cycle (a cycle's start), "
                             "one of them")
        if self.after_s and self.at_cycle is None:
            raise ValueError("after_s: counts from a cycle's start (at_cycle); with at_s give the whole time there")
        return self

    @property
    def when(self) -> str:
        if self.at_cycle is None:
            return f"at {self.at_s:g} s"
        return f"cycle {self.at_cycle}" + (f" + {self.after_s:g} s" if self.after_s else "")


class ResetOffset(Moment):
    """The broker's server-side offset reset (INVOKE_BROKER_TO_RESET_OFFSET; useServerSideResetOffset, on by
    default since 5.1) of a group on a topic, every queue, on every master."""

    do: Literal["reset_offset"]
    group: ResourceName
    topic: ResourceName | None = Field(None, description="default: the group's topic")
    to: Literal["earliest", "latest", "time"] = Field(description="earliest: the queues' first messages; latest: "
                                                      "their ends; time: the first message stored ago_s before")
    ago_s: float | None = Field(None, ge=0, le=86_400, description="with to: time, how long before the action")

    @model_validator(mode="after")
    def _ago(self) -> ResetOffset:
        if (self.to == "time") != (self.ago_s is not None):
            raise ValueError("ago_s: goes with to: time (and only with it): how many seconds before the action")
        return self

    @property
    def label(self) -> str:
        to = f"{self.ago_s:g} s ago" if self.to == "time" else self.to
        return f"reset_offset {self.group} to {to}"


class BrokerConfig(Moment):
    """Broker settings changed at runtime (UPDATE_BROKER_CONFIG) on every broker of the variant, then read back:
    a key the broker does not know, or one it does not take at runtime, is an error of the action, not a silence."""

    do: Literal["broker_config"]
    set: BrokerOverrides = Field(min_length=1)

    @property
    def label(self) -> str:
        return "broker_config " + ", ".join(f"{k}={spelled(v)}" for k, v in self.set.items())


class GroupConfig(Moment):
    """A subscription group changed (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP) on every master; what is not given keeps
    the value the run created the group with."""

    do: Literal["group_config"]
    group: ResourceName
    retry_max_times: int | None = Field(None, ge=0, le=100)
    fifo: bool | None = Field(None, description="consumeMessageOrderly")
    consume_enabled: bool | None = Field(None, description="consumeEnable: false stops the group's pops")

    @model_validator(mode="after")
    def _something(self) -> GroupConfig:
        if self.retry_max_times is None and self.fifo is None and self.consume_enabled is None:
            raise ValueError("group_config changes nothing: give retry_max_times, fifo or consume_enabled")
        return self

    @property
    def label(self) -> str:
        changes = {"retry_max_times": self.retry_max_times, "fifo": self.fifo, "consume_enabled": self.consume_enabled}
        return f"group_config {self.group} " + ", ".join(f"{k}={spelled(v)}" for k, v in changes.items()
                                                        if v is not None)


class TopicQueues(Moment):
    """A topic created, or its queue count changed (UPDATE_AND_CREATE_TOPIC), on every master."""

    do: Literal["topic_queues"]
    topic: ResourceName
    queues: int = Field(ge=1, le=64)

    @property
    def label(self) -> str:
        return f"topic_queues {self.topic} = {self.queues}"


class DeleteTopic(Moment):
    """A topic deleted on every master and its route on the name server (DELETE_TOPIC_IN_BROKER, _IN_NAMESRV)."""

    do: Literal["delete_topic"]
    topic: ResourceName

    @property
    def label(self) -> str:
        return f"delete_topic {self.topic}"


Action = Annotated[ResetOffset | BrokerConfig | GroupConfig | TopicQueues | DeleteTopic, Field(discriminator="do")]
