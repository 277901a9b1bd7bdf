"""Every metric the harness exports: the one place their names, labels and buckets live.

Dashboards and the chart's scrape config are checked against these names. Labels are bounded:
variant, scenario, protocol and group come from config files, never from message data. Most are per group;
the cycle signal the run follows (``cycle``, ``producers_sending``) is per worker.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

PREFIX = "rmq_harness"
WORKER_LABELS = ("variant", "scenario", "protocol")
LABELS = (*WORKER_LABELS, "group")
# Retry waits span milliseconds (woken at once) to the long-poll timeout (up to 20 s through the proxy).
LATENCY_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 7.5, 10.0,
                     12.5, 15.0, 17.5, 20.0, 25.0, 30.0, 60.0)


@dataclass(frozen=True)
class HarnessMetrics:
    registry: CollectorRegistry
    retry_wakeup: Histogram
    retry_pickup: Histogram
    redelivery_delay: Histogram
    poll_wait: Histogram
    sent: Counter
    deliveries: Counter
    acks: Counter
    nacks: Counter
    empty_polls: Counter
    cross_topic: Counter
    duplicates: Counter
    errors: Counter
    cycle: Gauge  # per worker (WORKER_LABELS), as is producers_sending
    producers_sending: Gauge
    # The canary's rolling ledger (harness.workload.rolling), per group and stage (first delivery, retry).
    overdue: Gauge
    lost: Counter
    late: Counter


def create(registry: CollectorRegistry | None = None) -> HarnessMetrics:
    """Create the metrics in ``registry`` (a fresh one by default, so tests never collide)."""
    reg = registry or CollectorRegistry()

    def hist(name: str, doc: str) -> Histogram:
        return Histogram(f"{PREFIX}_{name}", doc, LABELS, buckets=LATENCY_BUCKETS_S, registry=reg)

    def counter(name: str, doc: str, labels: tuple[str, ...] = LABELS) -> Counter:
        return Counter(f"{PREFIX}_{name}", doc, labels, registry=reg)

    return HarnessMetrics(
        registry=reg,
        retry_wakeup=hist("retry_wakeup_seconds",
                          "Receive time of a retry delivery minus the store time of its retry copy, when the poll "
                          "that returned it was already waiting at that store time."),
        retry_pickup=hist("retry_pickup_seconds",
                          "Receive time of a retry delivery minus the store time of its retry copy, when the poll "
                          "that returned it started after the store (the consumer was busy)."),
        redelivery_delay=hist("redelivery_delay_seconds",
                              "Receive time of a retry delivery minus (nack time + requested invisible duration); "
                              "only when this worker nacked the previous attempt."),
        poll_wait=hist("poll_wait_seconds", "How long each receive (long poll) call took."),
        sent=counter("messages_sent", "Messages sent by producers."),
        deliveries=counter("deliveries", "Messages received by pop consumers (every delivery attempt)."),
        acks=counter("acks", "Deliveries acknowledged."),
        nacks=counter("nacks", "Deliveries nacked (invisible duration changed, or left to lapse)."),
        empty_polls=counter("empty_polls", "Receive calls that returned no message."),
        cross_topic=counter("cross_topic_deliveries",
                            "Deliveries whose body names another origin topic or intended group than the consumer's."),
        duplicates=counter("duplicate_deliveries", "Deliveries of a message this worker had acked within the last "
                           "two minutes or more (the ledger counts every duplicate)."),
        errors=counter("errors", "Client operations that failed.", (*LABELS, "operation")),
        cycle=Gauge(f"{PREFIX}_cycle", "The index of the newest cycle a producer of this worker started (absent on a "
                    "worker without producers).", WORKER_LABELS, registry=reg),
        producers_sending=Gauge(f"{PREFIX}_producers_sending", "Producers of this worker that have not entered "
                                "their drain phase.", WORKER_LABELS, registry=reg),
        overdue=Gauge(f"{PREFIX}_overdue_messages", "Canary: messages owed now by more than the grace (stage first: "
                      "sent, never delivered; retry: nacked, not back after its invisible duration).",
                      (*LABELS, "stage"), registry=reg),
        lost=counter("lost_messages", "Canary: messages still owed lost_after_s past their grace, then forgotten.",
                     (*LABELS, "stage")),
        late=counter("late_messages", "Canary: messages delivered after they had been counted overdue.",
                     (*LABELS, "stage")),
    )
