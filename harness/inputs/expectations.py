"""Expectations: what a CORRECT broker shows in a scenario, written in the scenario as `expect:` rules
such as ``wakeup_ms.p50 < 1000`` or ``ledger.lost == 0``, and checked against each variant's summary.

A rule is ``<metric> <op> <number>``. Metrics are the summary's numbers (docs/summary.md): the
distributions' ``n``, ``p50``, ``p90``, ``p99``, ``max``; the ledger's classes and counts; the run's
counts; the wakeup probe's counters. A rule whose metric has no value (a quantile of no retries, a probe
counter of a run without the probe) is ``no data``: shown, never met.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

# The distributions every summary holds (ms; harness.measure.latency defines each), in this order.
DISTRIBUTIONS = ("wakeup_ms", "pickup_ms", "redelivery_ms", "nack_retry_ms")
STATISTICS = ("n", "p50", "p90", "p99", "max")
LEDGER = ("sent", "received", "acked", "never_received", "unknown_received", "duplicate_deliveries",
          "retries_expected", "retries_never_redelivered", "owed", "dead_lettered", "duplicated", "acked_first",
          "acked_after_retry", "late", "lost", "cross_topic", "unknown", "dlq_early", "dlq_late", "tag_changed")
# The client calls whose failures are also counted on their own (an error event's detail begins "<call>:").
ERROR_CALLS = ("send", "receive", "ack", "nack", "extend")
# cycles_timed_out: cycles the run stopped waiting for (their drain_timeout_s ran out) with pairs still owed: what
# the ledger calls lost or never redelivered in them was not back by then, late or lost alike.
COUNTS = ("cycles", "cycles_timed_out", "sent", "deliveries", "retry_deliveries", "acks", "nacks", "empty_polls",
          "errors", "refused", "renamed_deliveries", *(f"{c}_errors" for c in ERROR_CALLS))
# The pop-wakeup-probe's counters (runs with --probe), summed over the scenario's groups: wakeups of
# suspended pops by cause, and (empty_<cause>) those that found nothing and suspended again.
PROBE_CAUSES = ("retry_owner", "retry_other", "message", "lag_callback", "timeout", "other")
# Per nack (each nack owes one retry): wakeups of groups that do not own the retry, and wakeups that found
# nothing, whatever woke them: the cost of one retry in wasted work (the groups-scaling curve).
PER_NACK = ("retry_other_per_nack", "empty_per_nack")
# Which retry topic pops read (brokers with V2 names and retrieveMessageFromPopRetryTopicV1 read one of the two
# by a coin), and the pops suspended after reading one while the other held messages for the group (nothing
# will wake them for those: they wait for the poll to run out).
RETRY_READS = ("retry_reads_v1", "retry_reads_v2", "suspends_unread_retry")
COUNTED = PROBE_CAUSES + tuple(f"empty_{c}" for c in PROBE_CAUSES) + ("wakeups", "empty_wakeups") + RETRY_READS
PROBE = COUNTED + PER_NACK
# FIFO runs (harness.measure.ordering): messages, those out of send order or delivered while the one before was in
# flight, and how long a nack blocked its message group (ms).
FIFO = ("messages", "out_of_order", "overtaken", "block_n", "block_p50", "block_p90", "block_max")
# Retries asked for, those that stalled (harness.measure.latency.stalled), and their share.
STALLED = ("retries", "count", "share")
# What the groups left unconsumed when the load stopped (harness.run.offsets): committed offsets against queue ends.
OFFSETS = ("lag",)
METRICS = (tuple(f"{d}.{s}" for d in DISTRIBUTIONS for s in STATISTICS) + tuple(f"ledger.{k}" for k in LEDGER)
           + tuple(f"stalled.{k}" for k in STALLED) + tuple(f"offsets.{k}" for k in OFFSETS)
           + tuple(f"probe.{k}" for k in PROBE) + tuple(f"fifo.{k}" for k in FIFO) + COUNTS)
# What a scenario reads off the brokers (harness.inputs.observations): observed.<name>, a name its `observe:` gives.
OBSERVED = "observed"
# The deliveries a scenario selects by their attributes (harness.inputs.selections): selected.<name>.<stat>.
SELECTED = "selected"
SELECTION_STATS = ("deliveries", "messages")  # the matching deliveries, the distinct messages among them
OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le, ">=": operator.ge, "==": operator.eq, "!=": operator.ne, "<": operator.lt, ">": operator.gt}
_RULE = re.compile(r"^\s*([a-z_]+(?:\.[a-z0-9_]+){0,2})\s*(<=|>=|==|!=|<|>)\s*(-?\d+(?:\.\d+)?)\s*$")

MET, FAILED, NO_DATA = "met", "failed", "no data"


@dataclass(frozen=True)
class Expectation:
    metric: str
    op: str
    bound: float
    text: str  # as written (numbers keep their digits)

    def __str__(self) -> str:
        return self.text


def parse(rule: str) -> Expectation:
    """One rule; ValueError naming what is wrong (the scenario's validator adds the file and field)."""
    m = _RULE.match(rule)
    if not m:
        raise ValueError(f"{rule!r} is not '<metric> <op> <number>' (op one of {' '.join(OPS)})")
    metric, op, bound = m.groups()
    parts = metric.split(".")
    if parts[0] == SELECTED:
        if len(parts) != 3 or parts[2] not in SELECTION_STATS:
            raise ValueError(f"{metric!r}: a selection's check is selected.<name>.deliveries or "
                             "selected.<name>.messages")
    elif parts[0] == OBSERVED:
        if len(parts) != 2:
            raise ValueError(f"{metric!r}: an observation's check is observed.<name>")
    elif metric not in METRICS:
        close = [k for k in METRICS if k.split(".")[0] == metric.split(".")[0]][:8]
        hint = f"; {metric.split('.')[0]} has {', '.join(close)}" if close else ""
        raise ValueError(f"unknown metric {metric!r}{hint} (docs/summary.md lists them all)")
    return Expectation(metric, op, float(bound), f"{metric} {op} {bound}")


def value(summary: Mapping[str, object], metric: str) -> float | None:
    """The metric's value in one variant's summary row (as summary.json nests it), None when absent."""
    node: object = summary
    for part in metric.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    if node is None or node == "inf":
        return math.inf if node == "inf" else None
    return float(node)


def check(rule: Expectation, summary: Mapping[str, object]) -> dict[str, object]:
    v = value(summary, rule.metric)
    status = NO_DATA if v is None else (MET if OPS[rule.op](v, rule.bound) else FAILED)
    return {"rule": str(rule), "metric": rule.metric, "value": v, "status": status}


def evaluate(rules: Sequence[str], summary: Mapping[str, object]) -> dict[str, object]:
    """Every rule of a scenario checked against one variant's summary row: the checks and their tally."""
    checks = [check(parse(r), summary) for r in rules]
    return {"met": sum(c["status"] == MET for c in checks), "failed": sum(c["status"] == FAILED for c in checks),
            "no_data": sum(c["status"] == NO_DATA for c in checks), "checks": checks}


# A scenario's defect on one build, from its rules (what a correct broker shows): present when a rule failed,
# absent when every rule was met, no data otherwise; a build the scenario cannot ask is not applicable.
PRESENT, ABSENT, NOT_APPLICABLE, RUN_FAILED = "present", "absent", "not applicable", "run failed"


def defect(tally: Mapping[str, object]) -> str:
    """Whether an evaluated scenario (``evaluate``'s tally) shows its defect on the build it ran on."""
    if tally["failed"]:
        return PRESENT
    return ABSENT if tally["checks"] and tally["met"] == len(tally["checks"]) else NO_DATA


def describe(checked: Mapping[str, object]) -> str:
    """One check as a line for tables: the rule, its status and the value it saw."""
    v = checked["value"]
    if v is None:
        return f"{checked['rule']} ({checked['status']})"
    x = float(v)
    if not math.isfinite(x):
        shown = "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
    else:
        shown = f"{x:.0f}" if x.is_integer() or abs(x) >= 100 else f"{x:.3g}"
    return f"{checked['rule']} ({checked['status']}: {shown})"


def probe_counts(samples: Sequence[Mapping[str, object]], groups: Sequence[str]) -> dict[str, float]:
    """The probe's samples of one variant (as the manifest keeps them) -> the ``probe.*`` counters (the
    per-nack ratios come from ``per_nack`` once the counters of every run are summed)."""
    out = dict.fromkeys(COUNTED, 0.0)
    for s in samples:
        if s.get("group") not in groups:
            continue
        if s["name"] == "rmq_probe_pop_retry_reads_total" and s.get("read") in ("v1", "v2"):
            out[f"retry_reads_{s['read']}"] += float(s["value"])
        elif s["name"] == "rmq_probe_pop_suspends_unread_retry_total":
            out["suspends_unread_retry"] += float(s["value"])
        elif s.get("cause") not in PROBE_CAUSES:
            continue
        elif s["name"] == "rmq_probe_pop_wakeups_total":
            out[str(s["cause"])] += float(s["value"])
            out["wakeups"] += float(s["value"])
        elif s["name"] == "rmq_probe_pop_empty_wakeups_total":
            out[f"empty_{s['cause']}"] += float(s["value"])
            out["empty_wakeups"] += float(s["value"])
    return out


def per_nack(probe: Mapping[str, float], nacks: float) -> dict[str, float | None]:
    """The ``probe.*_per_nack`` ratios; None (no data) without nacks."""
    if not nacks:
        return dict.fromkeys(PER_NACK, None)
    return {"retry_other_per_nack": probe["retry_other"] / nacks, "empty_per_nack": probe["empty_wakeups"] / nacks}
