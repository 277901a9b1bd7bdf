from functools import partial

import numpy as np
import pandas as pd
import pytest

from harness.measure.latency import derive, retry_outcomes
from tests.events import MS, event
from tests.synth import own_summary

SUBS = {"T": {"G": ["*"]}}
ALLOWED = {"G": 17}
POLL_MS = 20_000


# The columns the latency code reads; by default a receive's poll started long before the store (it waited).
_ev = partial(event, topic="T", store_ts_ms=None, invisible_ms=None, poll_started_ns=0, cycle=0)


def test_wakeup_and_redelivery_of_a_nacked_message():
    ev = pd.DataFrame([
        _ev("sent", "a", t_ms=0),
        _ev("received", "a", 1, t_ms=10, store_ts_ms=5),
        _ev("nacked", "a", 1, t_ms=20, invisible_ms=1000),
        _ev("received", "a", 2, t_ms=18_000, store_ts_ms=3_500),  # retry copy stored at 3.5 s, seen at 18 s
        _ev("acked", "a", 2, t_ms=18_001),
    ])
    d = derive(ev)
    retry = d[(d.kind == "received") & (d.delivery_attempt == 2)].iloc[0]
    assert retry.wakeup_ms == pytest.approx(14_500)
    assert retry.redelivery_ms == pytest.approx(18_000 - (20 + 1000))
    assert retry.nack_retry_ms == pytest.approx(18_000 - 20)  # the seed's measure: delay, revive and wait
    first = d[(d.kind == "received") & (d.delivery_attempt == 1)].iloc[0]
    assert np.isnan(first.wakeup_ms) and np.isnan(first.redelivery_ms) and np.isnan(first.nack_retry_ms)


def test_lapse_uses_receive_time_plus_invisible_time():
    ev = pd.DataFrame([
        _ev("received", "a", 1, t_ms=100, store_ts_ms=90),
        _ev("nacked", "a", 1, t_ms=100, invisible_ms=15_000),
        _ev("received", "a", 2, t_ms=17_600, store_ts_ms=17_590),
    ])
    d = derive(ev)
    assert d.loc[2, "redelivery_ms"] == pytest.approx(17_600 - 15_100)
    assert d.loc[2, "wakeup_ms"] == pytest.approx(10)


def test_latest_nack_wins_and_variants_and_groups_do_not_mix():
    ev = pd.DataFrame([
        _ev("nacked", "a", 1, t_ms=0, invisible_ms=1000),
        _ev("nacked", "a", 1, t_ms=500, invisible_ms=1000),  # a duplicate delivery nacked again
        _ev("nacked", "a", 1, t_ms=0, invisible_ms=9000, variant="w"),
        _ev("nacked", "a", 1, t_ms=0, invisible_ms=7000, group="H"),
        _ev("received", "a", 2, t_ms=4000, store_ts_ms=3990),
        _ev("received", "a", 2, t_ms=4000, store_ts_ms=3990, variant="w"),
    ])
    d = derive(ev)
    assert d.loc[4, "redelivery_ms"] == pytest.approx(4000 - 1500)
    assert d.loc[5, "redelivery_ms"] == pytest.approx(4000 - 9000)


def test_retry_without_a_seen_nack_has_no_redelivery():
    d = derive(pd.DataFrame([_ev("received", "a", 3, t_ms=50, store_ts_ms=40)]))
    assert d.loc[0, "wakeup_ms"] == pytest.approx(10) and np.isnan(d.loc[0, "redelivery_ms"])


def test_summary_counts_ledger_and_quantiles():
    rows = [_ev("sent", x) for x in "abcd"]
    wakeups = [100, 200, 300]
    for i, (x, w) in enumerate(zip("abc", wakeups, strict=True)):
        rows += [_ev("received", x, 1, t_ms=1, store_ts_ms=1), _ev("nacked", x, 1, t_ms=1, invisible_ms=0),
                 _ev("received", x, 2, t_ms=1000 + w, store_ts_ms=1000), _ev("acked", x, 2, t_ms=2000 + i)]
    rows += [_ev("received", "c", 2, t_ms=5000, store_ts_ms=4000)]  # duplicate delivery of c's attempt 2
    rows += [_ev("empty_poll", None), _ev("error", None)]
    [s] = own_summary(derive(pd.DataFrame(rows)), SUBS, ALLOWED, POLL_MS)
    assert (s["sent"], s["deliveries"], s["retry_deliveries"], s["acks"], s["nacks"]) == (4, 7, 4, 3, 3)
    assert (s["empty_polls"], s["errors"]) == (1, 1)
    assert s["ledger"] == {"sent": 4, "received": 3, "acked": 3, "never_received": 1, "unknown_received": 0,
                           "duplicate_deliveries": 1, "retries_expected": 3, "retries_never_redelivered": 0,
                           # the message ledger: b and a retried and acked, c's retry came twice, d never came
                           "owed": 4, "acked_first": 0, "acked_after_retry": 2, "late": 0, "duplicated": 1, "lost": 1,
                           "dead_lettered": 0, "cross_topic": 0, "unknown": 0, "dlq_early": 0, "dlq_late": 0,
                           "tag_changed": 0}
    all_wakeups = [100, 200, 300, 1000]
    assert s["wakeup_ms"]["n"] == 4
    assert s["wakeup_ms"]["p50"] == pytest.approx(np.quantile(all_wakeups, 0.5))
    assert s["wakeup_ms"]["p90"] == pytest.approx(np.quantile(all_wakeups, 0.9))
    assert s["wakeup_ms"]["max"] == 1000
    assert s["stalled"] == {"retries": 3, "count": 0, "share": 0.0}  # every first retry came within 300 ms


def test_summary_of_no_retries_has_empty_distributions():
    ev = derive(pd.DataFrame([_ev("sent", "a"), _ev("received", "a", 1, t_ms=5, store_ts_ms=4)]))
    [s] = own_summary(ev, SUBS, ALLOWED, POLL_MS)
    assert s["wakeup_ms"] == {"n": 0, "p50": None, "p90": None, "p99": None, "max": None}
    assert s["stalled"] == {"retries": 0, "count": 0, "share": None}


def test_a_retry_taken_by_a_poll_started_after_its_store_is_a_pickup_not_a_wakeup():
    d = derive(pd.DataFrame([
        _ev("received", "a", 2, t_ms=5000, store_ts_ms=4000, poll_started_ns=3000 * MS),  # waiting since 3 s: woken
        # started at the store: still waiting
        _ev("received", "b", 2, t_ms=5000, store_ts_ms=4000, poll_started_ns=4000 * MS),
        _ev("received", "c", 2, t_ms=5000, store_ts_ms=4000, poll_started_ns=4500 * MS),  # started after: busy consumer
    ]))
    assert list(d.wakeup_ms.fillna(-1)) == [1000, 1000, -1]
    assert list(d.pickup_ms.fillna(-1)) == [-1, -1, 1000]
    [s] = own_summary(d, SUBS, ALLOWED, POLL_MS)
    assert (s["wakeup_ms"]["n"], s["pickup_ms"]["n"]) == (2, 1)


def test_retry_outcomes_find_the_nacks_that_never_came_back_per_group():
    ev = derive(pd.DataFrame([
        _ev("nacked", "a", 1, cycle=0), _ev("received", "a", 2, t_ms=10, store_ts_ms=5),
        _ev("nacked", "b", 1, cycle=1),  # never redelivered
        _ev("nacked", "a", 1, group="H", cycle=0),  # another group's retry of the same message: not seen
        _ev("nacked", "a", 1, t_ms=5, cycle=0),  # the same attempt nacked twice expects one retry
    ]))
    out = retry_outcomes(ev, ALLOWED).sort_values(["group", "ledger_id"]).reset_index(drop=True)
    assert out[["group", "ledger_id", "delivery_attempt", "cycle", "redelivered"]].values.tolist() == [
        ["G", "a", 2, 0, True], ["G", "b", 2, 1, False], ["H", "a", 2, 0, False]]
    [s] = own_summary(ev, SUBS, ALLOWED, POLL_MS)
    assert (s["ledger"]["retries_expected"], s["ledger"]["retries_never_redelivered"]) == (3, 2)


def test_a_retry_stalls_when_it_waited_half_a_poll_after_its_store_or_never_came():
    ev = derive(pd.DataFrame([
        _ev("nacked", "a", 1), _ev("received", "a", 2, t_ms=4_010, store_ts_ms=4_000),  # woken at once
        _ev("nacked", "b", 1), _ev("received", "b", 2, t_ms=13_999, store_ts_ms=4_000),  # 9.999 s: under half
        _ev("nacked", "c", 1),
        _ev("received", "c", 2, t_ms=24_000, store_ts_ms=4_000, poll_started_ns=4_080 * MS),  # a pickup
        _ev("received", "c", 2, t_ms=44_000, store_ts_ms=4_000),  # its duplicate does not count again
        _ev("nacked", "d", 1),  # never came back
    ]))
    out = retry_outcomes(ev, ALLOWED, POLL_MS).set_index("ledger_id")
    assert out["wait_ms"].fillna(-1).tolist() == [10, 9_999, 20_000, -1]
    assert out["stalled"].tolist() == [False, False, True, True]
    [s] = own_summary(ev, SUBS, ALLOWED, POLL_MS)
    assert s["stalled"] == {"retries": 4, "count": 2, "share": 0.5}
    assert "stalled" not in retry_outcomes(ev, ALLOWED)  # without a long poll there is no such judgement


def test_a_nack_of_the_last_allowed_delivery_expects_the_dlq_not_a_retry():
    ev = derive(pd.DataFrame([_ev("nacked", "a", 1), _ev("received", "a", 2, t_ms=10, store_ts_ms=5),
                              _ev("nacked", "a", 2)]))
    assert retry_outcomes(ev, {"G": 2})["delivery_attempt"].tolist() == [2]  # attempt 2 was the last allowed
    assert retry_outcomes(ev, {"G": 3})["delivery_attempt"].tolist() == [2, 3]
