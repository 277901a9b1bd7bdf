from functools import partial

import pandas as pd
import pytest

from harness.measure.ordering import fifo_counts, fifo_rows
from tests.events import MS, event

# The columns the FIFO code reads: every message in group mg0 unless said.
_ev = partial(event, message_group="mg0")


def test_in_order_deliveries_with_a_blocked_group():
    ev = pd.DataFrame([
        _ev("sent", "a", t_ms=0), _ev("sent", "b", t_ms=1), _ev("sent", "c", t_ms=2, message_group="mg1"),
        _ev("received", "a", t_ms=10), _ev("nacked", "a", t_ms=11),
        # another message group goes on
        _ev("received", "c", t_ms=12, message_group="mg1"), _ev("acked", "c", t_ms=13, message_group="mg1"),
        _ev("received", "a", t_ms=2_500, attempt=2), _ev("acked", "a", t_ms=2_501),  # mg0 blocked until a's retry
        _ev("received", "b", t_ms=2_510), _ev("acked", "b", t_ms=2_511),
    ])
    rows = fifo_rows(ev).set_index("ledger_id")
    assert rows.loc["b", "seq"] == 1 and not rows["out_of_order"].any() and not rows["overtaken"].any()
    assert rows.loc["a", "block_ms"] == pytest.approx(2_489) and pd.isna(rows.loc["b", "block_ms"])
    c = fifo_counts(fifo_rows(ev))
    assert (c["messages"], c["out_of_order"], c["overtaken"], c["block_n"]) == (3, 0, 0, 1)
    assert c["block_p50"] == pytest.approx(2_489)


def test_a_message_delivered_while_the_one_before_is_in_flight_overtakes_it():
    ev = pd.DataFrame([
        _ev("sent", "a", t_ms=0), _ev("sent", "b", t_ms=1), _ev("sent", "c", t_ms=2),
        _ev("received", "a", t_ms=10), _ev("nacked", "a", t_ms=11),
        _ev("received", "b", t_ms=20), _ev("acked", "b", t_ms=21),  # b while a waits for its retry: FIFO broken
        _ev("received", "a", t_ms=2_000, attempt=2), _ev("acked", "a", t_ms=2_001),
        _ev("received", "c", t_ms=2_500), _ev("acked", "c", t_ms=2_501),  # c after b was acked: in order
    ])
    rows = fifo_rows(ev).set_index("ledger_id")
    assert list(rows["overtaken"]) == [False, True, False]
    assert rows.loc["a", "block_ms"] == pytest.approx(9)  # the next delivery in mg0 came 9 ms after the nack
    late = pd.DataFrame([_ev("sent", "a", t_ms=0), _ev("sent", "b", t_ms=1), _ev("received", "b", t_ms=5),
                         _ev("acked", "b", t_ms=6), _ev("received", "a", t_ms=7), _ev("acked", "a", t_ms=8)])
    assert fifo_counts(fifo_rows(late))["out_of_order"] == 1


def test_runs_without_message_groups_have_no_fifo_rows():
    ev = pd.DataFrame([{**_ev("sent", "a", t_ms=0), "message_group": None},
                       {**_ev("received", "a", t_ms=1), "message_group": None}])
    assert fifo_rows(ev).empty and fifo_rows(ev.drop(columns="message_group")).empty


def test_a_delivery_inside_the_previous_acks_round_trip_is_not_an_overtaking():
    # The case the matrix found (5.3.3, patched): b's ack was sent at 100 ms and returned at 105 ms; the
    # broker freed the message group in between and c arrived at 104 ms. With the ack timed at its start
    # that is in order; a delivery before the ack was even sent still overtakes.
    def acked(lid, started_ms, returned_ms):
        return {**_ev("acked", lid, t_ms=returned_ms), "started_ns": started_ms * MS}

    ev = pd.DataFrame([
        _ev("sent", "b", t_ms=0), _ev("sent", "c", t_ms=1), _ev("sent", "d", t_ms=2),
        _ev("received", "b", t_ms=90), acked("b", 100, 105),
        _ev("received", "c", t_ms=104), acked("c", 110, 112),
        _ev("received", "d", t_ms=109), acked("d", 120, 121),
    ])
    assert list(fifo_rows(ev).set_index("ledger_id")["overtaken"]) == [False, False, True]
    # Archives from before the ack's start time was kept judge by its return, as they did.
    old = ev.drop(columns="started_ns")
    assert list(fifo_rows(old).set_index("ledger_id")["overtaken"]) == [False, True, True]
