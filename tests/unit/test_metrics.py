import shutil
import subprocess

import pytest
from prometheus_client import generate_latest

from harness.contracts import metrics
from harness.workload.runtime import GroupMetrics

DESIGN_NAMES = {
    "rmq_harness_retry_wakeup_seconds", "rmq_harness_redelivery_delay_seconds", "rmq_harness_poll_wait_seconds",
    "rmq_harness_messages_sent_total", "rmq_harness_deliveries_total", "rmq_harness_acks_total",
    "rmq_harness_nacks_total", "rmq_harness_empty_polls_total", "rmq_harness_cross_topic_deliveries_total",
    "rmq_harness_duplicate_deliveries_total", "rmq_harness_cycle", "rmq_harness_producers_sending",
}


def _exposition() -> str:
    m = metrics.create()
    labels = {"variant": "unpatched", "scenario": "burst", "protocol": "grpc", "group": "G"}
    for h in (m.retry_wakeup, m.redelivery_delay, m.poll_wait):
        h.labels(**labels).observe(0.3)
    for c in (m.sent, m.deliveries, m.acks, m.nacks, m.empty_polls, m.cross_topic, m.duplicates):
        c.labels(**labels).inc()
    m.errors.labels(**labels, operation="send").inc()
    worker = {k: labels[k] for k in metrics.WORKER_LABELS}
    m.cycle.labels(**worker).set(3)
    m.producers_sending.labels(**worker).inc()
    return generate_latest(m.registry).decode()


def test_the_design_metric_names_are_exported():
    samples = {line.split("{")[0] for line in _exposition().splitlines() if not line.startswith("#")}
    for name in DESIGN_NAMES:
        assert name in samples or f"{name}_bucket" in samples, name


def test_promtool_check_metrics_is_clean():
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool not found: run `make setup` (installs Debian's prometheus package)")
    out = subprocess.run([promtool, "check", "metrics"], input=_exposition(), capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip() == "" and out.stderr.strip() == ""


def test_a_groups_kept_metrics_are_the_labelled_series_and_appear_only_once_used():
    m = metrics.create()
    labels = {"variant": "v", "scenario": "s", "protocol": "grpc", "group": "G"}
    kept = GroupMetrics(m, labels)
    assert kept.deliveries is m.deliveries.labels(**labels) and kept.deliveries is kept.deliveries
    assert "rmq_harness_retry_wakeup_seconds_count" not in generate_latest(m.registry).decode()
    kept.retry_wakeup.observe(0.5)
    assert 'rmq_harness_retry_wakeup_seconds_count{group="G"' in generate_latest(m.registry).decode()
    for name in ("errors", "cycle", "producers_sending"):  # labelled by operation too, or without a group
        with pytest.raises(AttributeError):
            getattr(kept, name)
