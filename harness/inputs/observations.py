"""Observations: what a scenario reads off the brokers themselves besides the messages, each a number per variant
that its `expect:` rules can check as ``observed.<name>``. Some defects leave the messages alone and show only
there: an exception the revive thread logs twice a second, a metric that never moves.

- ``{log: pop.log, pattern: "revive error"}``: lines matching the regular expression in the variant's server logs
  whose file name matches ``log`` (a glob: ``broker.log``, ``pop*.log``, ``*.out`` for what a JVM printed), over the
  whole run, from the archive's copies. With ``how: max`` or ``how: growth`` the pattern captures one number per
  line (one group) and the observation is the largest of them, or the largest rise of one file's (one JVM's) from
  its first line to its last: a memory defect read off the JVMs' own GC logs, which every server the harness starts
  writes (``gc-<role>-<pid>.log``, role ``broker`` for every JVM that hosts a broker, the local-mode proxy
  included), e.g. the brokers' heap after each collection, in MB:
  ``{log: "gc-broker-*.log", pattern: "Pause.* [0-9]+M->([0-9]+)M", how: growth}``.
- ``{metric: rocketmq_messages_out_total, labels: {consumer_group: G}}``: a broker Prometheus series summed over the
  variant's brokers and the series whose labels match (a value naming the scenario's topic or group means its name
  on the wire), read when the load starts and when it ends: its increase (``how: increase``, the default) or its
  value at the end (``how: last``). A series the broker never exported reads 0.
- ``{runtime: msgGetTotalTodayNow}``: a figure of the brokers' runtime info (GET_BROKER_RUNTIME_INFO), summed over
  them, read the same way.

``per: deliveries`` (or any of the run's counts) divides the number by that count of the variant's events, so a
rule reads as a share ("messages out per delivery >= 0.95"); a count of zero leaves it without a value (no data).
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Discriminator, Field, StringConstraints, Tag, field_validator, model_validator

from harness.inputs.expectations import COUNTS
from harness.inputs.fields import Strict

ObservationName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9_]{1,64}$")]
Per = Literal[COUNTS]  # type: ignore[valid-type]
How = Literal["increase", "last"]
LogHow = Literal["count", "max", "growth"]


class LogLines(Strict):
    log: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.*?\[\]-]{1,64}$")] = Field(
        description="the log files' names, a glob (broker.log, pop*.log, *.out)")
    pattern: str = Field(min_length=1, description="a regular expression (Python's re) a line must contain")
    how: LogHow = Field("count", description="count: the matching lines; max: the largest number the pattern's "
                        "group captured; growth: the largest rise of one file's captured numbers, first to last")
    per: Per | None = None

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, v: str) -> str:
        try:
            re.compile(v)
        except re.error as e:
            raise ValueError(f"not a regular expression: {e}") from None
        return v

    @model_validator(mode="after")
    def _captures(self) -> LogLines:
        groups = re.compile(self.pattern).groups
        if self.how != "count" and groups != 1:
            raise ValueError(f"how: {self.how} takes the number the pattern captures: give it exactly one group "
                             f"(it has {groups}), e.g. \"->([0-9]+)M\"")
        return self


class MetricSeries(Strict):
    metric: Annotated[str, StringConstraints(pattern=r"^[a-zA-Z_:][a-zA-Z0-9_:]{0,199}$")]
    labels: dict[Annotated[str, StringConstraints(pattern=r"^[a-zA-Z_][a-zA-Z0-9_]{0,99}$")], str] = Field(
        default_factory=dict, description="label values a series must have (the scenario's topic or group names)")
    how: How = "increase"
    per: Per | None = None


class RuntimeFigure(Strict):
    runtime: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_]{1,100}$")] = Field(
        description="a key of GET_BROKER_RUNTIME_INFO's table (msgGetTotalTodayNow, msgPutTotalTodayNow, ...)")
    how: How = "increase"
    per: Per | None = None


KINDS = ("log", "metric", "runtime")  # the key that says which kind an observation is


def _kind(v: object) -> str | None:
    if isinstance(v, dict):
        return next((k for k in KINDS if k in v), None)
    return {LogLines: "log", MetricSeries: "metric", RuntimeFigure: "runtime"}.get(type(v))


Observation = Annotated[
    Annotated[LogLines, Tag("log")] | Annotated[MetricSeries, Tag("metric")] | Annotated[RuntimeFigure, Tag("runtime")],
    Discriminator(_kind, custom_error_type="observation_kind",
                  custom_error_message="an observation is {log: FILES, pattern: REGEX}, {metric: NAME, labels: {...}} "
                  "or {runtime: KEY}")]
