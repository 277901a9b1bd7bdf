"""The canary's rolling ledger: overdue, late, lost, duplicates, and memory held to its cap."""

from __future__ import annotations

import pytest

from harness.workload.rolling import FIRST, RETRY, RollingLedger


def test_a_message_on_time_is_never_overdue_and_leaves_the_ledger_when_acked():
    led = RollingLedger(grace_s=10, lost_after_s=60, cap=100)
    led.sent(1, 0.0)
    assert led.sweep(5.0).overdue == {FIRST: 0, RETRY: 0}
    assert led.delivered(1, 1, 6.0, invisible_s=15) == FIRST
    led.acked(1, 6.1)
    assert len(led) == 0 and led.sweep(100.0).lost == {FIRST: 0, RETRY: 0}


def test_a_nacked_message_is_owed_back_at_its_new_deadline_plus_the_grace():
    led = RollingLedger(grace_s=10, lost_after_s=60, cap=100)
    led.sent(1, 0.0)
    led.delivered(1, 1, 1.0, invisible_s=15)
    led.nacked(1, 1.5, invisible_s=5)
    assert led.due(1) == 6.5
    assert led.sweep(16.0).overdue[RETRY] == 0  # 6.5 + 10 s of grace: not yet
    assert led.sweep(17.0).overdue[RETRY] == 1
    # It comes back after all: late, no longer overdue, and a retry.
    assert led.delivered(1, 2, 18.0, invisible_s=15) == RETRY
    assert led.late() == {FIRST: 0, RETRY: 1} and led.late() == {FIRST: 0, RETRY: 0}
    assert led.sweep(19.0).overdue == {FIRST: 0, RETRY: 0}


def test_an_overdue_message_is_lost_once_lost_after_s_past_its_grace_and_counted_once():
    led = RollingLedger(grace_s=10, lost_after_s=60, cap=100)
    led.sent(1, 0.0)
    led.sent(2, 0.0)
    led.delivered(2, 1, 0.5, invisible_s=15)
    led.nacked(2, 0.5, invisible_s=1)
    assert led.sweep(70.0).lost == {FIRST: 0, RETRY: 0}  # 70 - 0 - 10 = 60: not past
    swept = led.sweep(72.0)
    assert swept.lost == {FIRST: 1, RETRY: 1} and swept.overdue == {FIRST: 0, RETRY: 0}
    assert led.sweep(200.0).lost == {FIRST: 0, RETRY: 0} and len(led) == 0
    assert led.delivered(1, 1, 201.0, invisible_s=15) == "unknown"  # forgotten: a stranger now


def test_a_delivery_neither_acked_nor_nacked_is_owed_back_when_its_invisible_time_runs_out():
    led = RollingLedger(grace_s=0, lost_after_s=60, cap=100)
    led.sent(1, 0.0)
    led.delivered(1, 1, 1.0, invisible_s=15)  # a lapse: no ack, no change
    assert led.due(1) == 16.0
    assert led.sweep(15.0).overdue[RETRY] == 0 and led.sweep(17.0).overdue[RETRY] == 1


def test_a_delivery_after_the_ack_is_a_duplicate_while_remembered():
    led = RollingLedger(grace_s=10, lost_after_s=60, cap=100)
    led.sent(1, 0.0)
    led.delivered(1, 1, 1.0, invisible_s=15)
    led.acked(1, 1.0)
    assert led.delivered(1, 2, 5.0, invisible_s=15) == "duplicate"
    led.sweep(100.0)  # acks are remembered lost_after_s
    assert led.delivered(1, 3, 101.0, invisible_s=15) == "unknown"


def test_memory_is_held_to_the_cap_the_oldest_counted_lost_with_its_stage():
    led = RollingLedger(grace_s=10, lost_after_s=60, cap=3)
    led.sent(1, 0.0)
    led.delivered(1, 1, 0.1, invisible_s=15)
    led.nacked(1, 0.1, invisible_s=1)
    for key in (2, 3, 4, 5):
        led.sent(key, 1.0)
    assert len(led) == 3
    assert led.sweep(2.0).lost == {FIRST: 1, RETRY: 1}
    assert led.delivered(1, 2, 2.0, invisible_s=15) == "unknown"


def test_nonsense_settings_are_refused():
    with pytest.raises(ValueError):
        RollingLedger(grace_s=-1, lost_after_s=60, cap=3)
    with pytest.raises(ValueError):
        RollingLedger(grace_s=1, lost_after_s=60, cap=0)


def test_a_message_whose_send_failed_is_forgotten():
    led = RollingLedger(grace_s=0, lost_after_s=60, cap=10)
    led.sent(1, 0.0)
    led.forget(1)
    assert len(led) == 0 and led.sweep(100.0).lost == {FIRST: 0, RETRY: 0}
