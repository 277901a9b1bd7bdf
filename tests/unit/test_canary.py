"""The canary's logic with a driver that answers from a list (the real brokers are tests/integration's): what
it nacks, acks and counts, and the command's refusals before anything starts."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from harness.cli.main import main
from harness.client.driver import Delivery
from harness.contracts.metrics import create
from harness.inputs.catalogue import load_scenario
from harness.inputs.scenario import parse_scenario
from harness.workload.canary import BODY_PREFIX, Canary, CanaryPlan, refusal


class _Consumer:
    def __init__(self) -> None:
        self.acked: list[str] = []
        self.nacked: list[tuple[str, int]] = []

    def ack(self, d: Delivery) -> None:
        self.acked.append(d.message_id)

    def change_invisible(self, d: Delivery, invisible_s: int, suspend: bool = False) -> None:
        self.nacked.append((d.message_id, invisible_s))


def _delivery(key: int | None, attempt: int, store_ms: int) -> Delivery:
    body = b"someone else's" if key is None else BODY_PREFIX + str(key).encode()
    return Delivery(body=body, message_id=f"m{key}-{attempt}", delivery_attempt=attempt, store_ts_ms=store_ms,
                    born_ts_ms=None, handle=None)


def _value(metric, **labels) -> float:  # noqa: ANN001
    want = {"variant": "v", "scenario": "steady", "protocol": "grpc", "group": "PopSteadyGroup", **labels}
    return sum(s.value for m in metric.collect() for s in m.samples
               if s.name.endswith(("_total", "_count", "_messages")) and s.labels == want)


def test_first_deliveries_are_nacked_by_the_policy_retries_acked_and_their_wait_measured():
    scenario = load_scenario("steady")  # nacks attempt 1 with change_invisible to 1 s
    now = [100.0]
    metrics = create()
    canary = Canary(CanaryPlan("v", scenario, grace_s=30, lost_after_s=300, cap=100), driver=None, metrics=metrics,
                    clock=lambda: now[0])
    consumer = _Consumer()
    canary.ledger.sent(7, 100.0)
    # First delivery: nacked for the scenario's delay_s.
    canary._handle(consumer, _delivery(7, 1, 100_000), poll_started_ns=int(99.9e9), received_ns=int(100.1e9))
    assert consumer.nacked == [("m7-1", scenario.nack.delay_s)] and canary.ledger.due(7) == 100.0 + 1
    # Its retry, stored at 101.2 s while a poll waited since 101.0 s, received at 101.25 s: a 50 ms wakeup, acked.
    now[0] = 101.25
    canary._handle(consumer, _delivery(7, 2, 101_200), poll_started_ns=int(101.0e9), received_ns=int(101.25e9))
    assert consumer.acked == ["m7-2"] and len(canary.ledger) == 0
    assert _value(metrics.retry_wakeup) == 1 and _value(metrics.retry_pickup) == 0
    assert _value(metrics.redelivery_delay) == 1
    wakeup_sum = sum(s.value for m in metrics.retry_wakeup.collect() for s in m.samples if s.name.endswith("_sum"))
    assert abs(wakeup_sum - 0.05) < 1e-6
    # The same message again after its ack: a duplicate, acked; another topic's message: counted, acked.
    canary._handle(consumer, _delivery(7, 3, 101_300), poll_started_ns=int(101.3e9), received_ns=int(101.4e9))
    canary._handle(consumer, _delivery(None, 1, 101_300), poll_started_ns=int(101.3e9), received_ns=int(101.4e9))
    assert _value(metrics.duplicates) == 1 and _value(metrics.cross_topic) == 1
    assert consumer.acked == ["m7-2", "m7-3", "mNone-1"] and _value(metrics.nacks) == 1


def test_a_sweep_publishes_overdue_lost_and_late_by_stage():
    scenario = load_scenario("steady")
    now = [0.0]
    metrics = create()
    canary = Canary(CanaryPlan("v", scenario, grace_s=10, lost_after_s=60, cap=100), driver=None, metrics=metrics,
                    clock=lambda: now[0])
    canary.ledger.sent(1, 0.0)
    canary.ledger.sent(2, 0.0)
    now[0] = 11.0
    canary.sweep()
    assert _value(metrics.overdue, stage="first") == 2 and _value(metrics.overdue, stage="retry") == 0
    canary._handle(_Consumer(), _delivery(1, 1, 11_000), poll_started_ns=int(10e9), received_ns=int(11e9))
    now[0] = 80.0
    canary.sweep()
    assert _value(metrics.late, stage="first") == 1 and _value(metrics.lost, stage="first") == 1
    assert _value(metrics.overdue, stage="first") == 0


def test_what_the_canary_cannot_drive_is_named():
    assert refusal(load_scenario("steady")) is None
    assert "steady load" in refusal(load_scenario("burst"))
    fifo = load_scenario("fifo")
    steady_fifo = parse_scenario({**fifo.model_dump(), "produce": {**fifo.produce.model_dump(), "pattern": "steady"},
                                  "cycles": {"spacing": 10}}, "test")
    assert "fifo topic; the canary drives a normal one" in refusal(steady_fifo)


def test_a_burst_scenario_is_refused_in_one_line_before_anything_starts(tmp_path: Path, capsys):
    assert main(["canary", "--variant", "patched", "--scenario", "burst", "--workdir", str(tmp_path / "w")]) == 2
    err = capsys.readouterr().err.strip()
    assert "sends in bursts" in err and "\n" not in err and not (tmp_path / "w").exists()


def test_a_metrics_port_in_use_is_refused_before_any_broker_starts(tmp_path: Path, capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert main(["canary", "--variant", "patched", "--metrics-port", str(port),
                     "--workdir", str(tmp_path / "w")]) == 2
    err = capsys.readouterr().err.strip()
    assert f"--metrics-port {port}" in err and "\n" not in err and not (tmp_path / "w").exists()


class _Producer:
    """Its send hands the message to a waiting poll before it returns (or fails, when told)."""

    def __init__(self, canary: Canary, consumer: _Consumer, fail: bool = False) -> None:
        self.canary, self.consumer, self.fail = canary, consumer, fail

    def send(self, body: bytes, tag: str | None = None, message_group: str | None = None) -> str:
        self.canary.stop.set()  # one send, then the loop ends
        if self.fail:
            raise OSError("broker busy")
        key = int(body[len(BODY_PREFIX):])
        self.canary._handle(self.consumer, _delivery(key, 1, 0), poll_started_ns=0, received_ns=int(1e9))
        return "id"


def _sending(fail: bool) -> tuple[Canary, _Consumer]:
    import threading

    scenario = load_scenario("steady")
    canary = Canary(CanaryPlan("v", scenario, grace_s=30, lost_after_s=300, cap=100), driver=None, metrics=create())
    consumer = _Consumer()
    canary.stop = threading.Event()
    canary._send_loop(_Producer(canary, consumer, fail), canary.stop)
    return canary, consumer


def test_a_message_delivered_before_its_send_returns_is_the_canarys_and_nacked():
    canary, consumer = _sending(fail=False)
    assert consumer.nacked == [("m1-1", 1)] and canary.ledger.due(1) is not None


def test_a_message_whose_send_failed_is_not_owed():
    canary, _ = _sending(fail=True)
    assert len(canary.ledger) == 0 and _value(canary.metrics.errors, operation="send") == 1


def test_a_loop_that_fails_stops_the_canary_and_says_which():
    import threading

    canary = Canary(CanaryPlan("v", load_scenario("steady"), grace_s=30, lost_after_s=300, cap=100), driver=None,
                    metrics=create())
    stop = threading.Event()

    def broken(_: threading.Event) -> None:
        raise KeyError("oops")

    canary._guarded("sweep", broken, stop)
    assert stop.is_set() and canary.failure == "the canary's sweep loop failed: KeyError: 'oops'"


@pytest.mark.parametrize(("flags", "says"), [
    (["--for-s", "-0.5"], "--for-s -0.5: give a number of seconds, at least 0"),
    (["--lost-after-s", "nan"], "--lost-after-s nan: give a number of seconds"),
    (["--grace-s", "inf"], "--grace-s inf: give a number of seconds"),
    (["--metrics-port", "70000"], "70000 is not a port"),
])
def test_bad_numbers_are_refused_in_one_line_before_anything_starts(tmp_path: Path, capsys, flags, says):
    try:
        code = main(["canary", "--variant", "patched", *flags, "--workdir", str(tmp_path / "w")])
    except SystemExit as e:  # argparse's own refusal
        code = e.code
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert says in err and not (tmp_path / "w").exists()
