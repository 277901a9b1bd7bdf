import pandas as pd
import pytest

from harness.inputs import timing
from harness.measure.ledger import CLASSES, classify
from tests.events import SUBS, counts
from tests.events import ledger_event as _ev
from tests.events import sent as _sent


def _ledger(rows):
    led = classify(pd.DataFrame(rows), SUBS, {"G": 3, "H": 3, "A": 3, "B": 3})
    return led, {(r.ledger_id, r.group): r["class"] for _, r in led.iterrows()}


def test_every_pair_gets_exactly_one_class():
    rows = [
        _sent("first"), _ev("received", "first", 1, 10), _ev("acked", "first", 1, 11),
        _sent("retried"), _ev("received", "retried", 1, 10), _ev("nacked", "retried", 1, 11),
        _ev("received", "retried", 2, 2000), _ev("acked", "retried", 2, 2001),
        _sent("never"),
        _sent("unacked"), _ev("received", "unacked", 1, 10),
        _sent("dlq"), _ev("received", "dlq", 1, 10), _ev("nacked", "dlq", 1, 11), _ev("dlq_seen", "dlq", None, 50),
    ]
    led, cls = _ledger(rows)
    assert cls == {("first", "G"): "acked_first", ("retried", "G"): "acked_after_retry", ("never", "G"): "lost",
                   ("unacked", "G"): "lost", ("dlq", "G"): "dead_lettered"}
    assert led.set_index("ledger_id").loc["retried", "retries"] == 1
    assert led.set_index("ledger_id").loc["never", "why"] == "never delivered"
    assert led.set_index("ledger_id").loc["unacked", "why"] == "delivered, never acked"
    c = counts(led)
    assert set(c) == {"owed", *CLASSES, "dlq_early", "dlq_late", "tag_changed", "duplicate_deliveries"}
    assert c["owed"] == 5 and c["lost"] == 2 and c["cross_topic"] == 0
    assert (c["dlq_early"], c["dlq_late"]) == (1, 0)  # dead-lettered after 1 of the 3 deliveries allowed


def test_dead_letters_are_checked_against_the_deliveries_the_group_allows():
    def dead_after(n, lid):
        rows = [_sent(lid)]
        for a in range(1, n + 1):
            rows += [_ev("received", lid, a, a * 1000), _ev("nacked", lid, a, a * 1000 + 1)]
        return [*rows, _ev("dlq_seen", lid, None, 99_000)]

    led, _ = _ledger(dead_after(3, "ok") + dead_after(4, "late") + dead_after(2, "early"))
    c = counts(led)
    assert (c["dead_lettered"], c["dlq_early"], c["dlq_late"]) == (3, 1, 1)


@pytest.mark.parametrize("extra, why", [
    ([_ev("received", "x", 2, 20_000)], "an attempt came back without a nack"),  # processing outlived it
    ([_ev("received", "x", 1, 12)], "an attempt delivered twice"),
    ([_ev("nacked", "x", 1, 11), _ev("received", "x", 2, 3000), _ev("acked", "x", 2, 3001),
      _ev("received", "x", 3, 9000)], "delivered again after its ack"),
])
def test_duplicates_are_deliveries_the_nacks_do_not_explain(extra, why):
    led, cls = _ledger([_sent("x"), _ev("received", "x", 1, 10), *extra, _ev("acked", "x", 1, 30_000)])
    assert cls == {("x", "G"): "duplicated"}
    assert why in led.iloc[0]["why"]


def test_a_failed_nack_explains_the_next_attempt_a_failed_ack_does_not():
    nack_failed = [_sent("x"), _ev("received", "x", 1, 10), _ev("error", "x", 1, 11, detail="nack: timeout"),
                   _ev("received", "x", 2, 15_000), _ev("acked", "x", 2, 15_001)]
    assert _ledger(nack_failed)[1] == {("x", "G"): "acked_after_retry"}
    ack_failed = [_sent("x"), _ev("received", "x", 1, 10), _ev("error", "x", 1, 11, detail="ack: expired"),
                  _ev("received", "x", 2, 15_000), _ev("acked", "x", 2, 15_001)]
    assert _ledger(ack_failed)[1] == {("x", "G"): "duplicated"}


def test_deliveries_nobody_owed_are_cross_topic_or_unknown():
    rows = [
        _sent("a"), _ev("received", "a", 1, 10), _ev("nacked", "a", 1, 11),
        # the retry reaches the group of another topic (a shared V1 retry topic)
        _ev("received", "a", 2, 2000, group="H", topic="U"), _ev("acked", "a", 2, 2001, group="H", topic="U"),
        _ev("received", "ghost", 1, 50),
        _ev("received", None, 1, 60, message_id="0A0B"),
    ]
    led, cls = _ledger(rows)
    assert cls[("a", "G")] == "lost" and cls[("a", "H")] == "cross_topic"
    assert cls[("ghost", "G")] == "unknown" and cls[("message:0A0B", "G")] == "unknown"
    assert counts(led)["cross_topic"] == 1 and counts(led)["unknown"] == 2


def test_a_message_for_every_subscriber_is_owed_to_each():
    rows = [_sent("m", topic="F", intended="*"), _ev("received", "m", 1, 10, group="A", topic="F", intended="*"),
            _ev("acked", "m", 1, 11, group="A", topic="F", intended="*")]
    assert _ledger(rows)[1] == {("m", "A"): "acked_first", ("m", "B"): "lost"}


def test_variants_and_runs_do_not_mix():
    a = [_sent("m"), _ev("received", "m", 1, 10), _ev("acked", "m", 1, 11)]
    b = [{**r, "variant": "w"} for r in a[:1]]  # the same ledger id in another variant, never received there
    led, _ = _ledger(a + b)
    assert dict(zip(led.variant, led["class"], strict=True)) == {"v": "acked_first", "w": "lost"}


def test_a_tagged_message_is_owed_to_the_groups_filtering_for_it_and_must_keep_its_tag():
    def got(lid, group, tag, t):
        return [_ev("received", lid, 1, t, group=group, topic="X", intended="*", tag=tag),
                _ev("acked", lid, 1, t + 1, group=group, topic="X", intended="*", tag=tag)]

    rows = [_sent("a", topic="X", intended="*", tag="TagA"), *got("a", "A", "TagA", 10),
            _sent("c", topic="X", intended="*", tag="TagC"), *got("c", "B", "TagC", 10),
            *got("c", "A", "TagC", 20),  # A filters TagA only: a TagC message there is nobody's business
            _sent("z", topic="X", intended="*", tag="TagZ"),  # no group filters for it: owed to none
            _sent("k", topic="X", intended="*", tag="TagB"), *got("k", "B", None, 30)]  # the tag was lost
    led, cls = _ledger(rows)
    assert cls == {("a", "A"): "acked_first", ("c", "B"): "acked_first", ("c", "A"): "cross_topic",
                   ("k", "B"): "acked_first"}
    assert counts(led)["tag_changed"] == 1 and led.set_index("ledger_id").loc["k", "tag_changed"]


def test_a_dead_letter_nobody_was_owed_is_not_dropped_and_times_stay_exact():
    rows = [_sent("a"), _ev("received", "a", 1, 10), _ev("acked", "a", 1, 11),
            _ev("dlq_seen", "a", None, 50, group="H", topic="U")]  # in another group's DLQ, never delivered there
    led, cls = _ledger(rows)
    assert cls == {("a", "G"): "acked_first", ("a", "H"): "cross_topic"}
    t = 1_795_000_000_123_456_789  # beyond float64's exact integers
    exact = [{**_sent("b"), "t_client_ns": t}, {**_ev("received", "b", 1), "t_client_ns": t + 1}]
    led, _ = _ledger(exact)
    assert int(led.iloc[0]["sent_ns"]) == t and int(led.iloc[0]["first_received_ns"]) == t + 1


def test_an_ack_after_the_drain_timeout_is_late_not_lost_and_not_on_time():
    rows = [
        _sent("on-time"), _ev("received", "on-time", 1, 10), _ev("nacked", "on-time", 1, 11),
        _ev("received", "on-time", 2, 59_000), _ev("acked", "on-time", 2, 59_001),
        _sent("late"), _ev("received", "late", 1, 10), _ev("nacked", "late", 1, 11),
        _ev("received", "late", 2, 61_000), _ev("acked", "late", 2, 61_001),
        _sent("late-dup"), _ev("received", "late-dup", 1, 10), _ev("acked", "late-dup", 1, 61_000),
        _ev("received", "late-dup", 1, 62_000),  # delivered twice: a duplicate before anything else
        _sent("lost"), _ev("received", "lost", 1, 10),
    ]
    led = classify(pd.DataFrame(rows), SUBS, {"G": 3}, late_after_ms=60_000)
    cls = {r.ledger_id: r["class"] for _, r in led.iterrows()}
    assert cls == {"on-time": "acked_after_retry", "late": "late", "late-dup": "duplicated", "lost": "lost"}
    assert led.set_index("ledger_id").loc["late", "why"] == "acked after the drain timeout"
    assert counts(led)["late"] == 1
    # Without a timeout (cycles that do not drain) nothing is late: the same ack is acked after a retry.
    assert "late" not in set(classify(pd.DataFrame(rows), SUBS, {"G": 3})["class"])


def test_only_scenarios_whose_cycles_drain_have_a_late_threshold():
    from harness.inputs.catalogue import load_scenario

    burst, steady = load_scenario("burst"), load_scenario("steady")
    assert timing.late_after_ms(burst) == burst.cycles.drain_timeout_s * 1000 and timing.late_after_ms(steady) is None


def test_a_suspended_nack_expects_the_same_attempt_back_and_a_raised_one_is_not_explained():
    from harness.measure.latency import retry_outcomes

    rows = [
        # Back as the same attempt, as the suspend flag asks: a retry, not a repeat.
        _sent("kept"), _ev("received", "kept", 1, 10), _ev("nacked", "kept", 1, 11, detail="change_invisible, suspend"),
        _ev("received", "kept", 1, 2000), _ev("acked", "kept", 1, 2001),
        # Back with its reconsume times raised after all (apache/rocketmq#10465): nothing asked for attempt 2.
        _sent("raised"), _ev("received", "raised", 1, 10),
        _ev("nacked", "raised", 1, 11, detail="change_invisible, suspend"),
        _ev("received", "raised", 2, 2000), _ev("acked", "raised", 2, 2001),
        # Delivered a third time as the same attempt: one more than the suspended nack asked for.
        _sent("thrice"), _ev("received", "thrice", 1, 10),
        _ev("nacked", "thrice", 1, 11, detail="change_invisible, suspend"),
        _ev("received", "thrice", 1, 2000), _ev("received", "thrice", 1, 3000), _ev("acked", "thrice", 1, 3001),
        # An ordinary nack is unchanged: attempt 2 is its retry, attempt 1 again a repeat.
        _sent("plain"), _ev("received", "plain", 1, 10), _ev("nacked", "plain", 1, 11),
        _ev("received", "plain", 1, 500), _ev("received", "plain", 2, 2000), _ev("acked", "plain", 2, 2001),
    ]
    led, cls = _ledger(rows)
    assert cls == {("kept", "G"): "acked_after_retry", ("raised", "G"): "duplicated",
                   ("thrice", "G"): "duplicated", ("plain", "G"): "duplicated"}
    why = led.set_index("ledger_id")["why"]
    assert why["raised"] == "an attempt came back without a nack"
    assert why["thrice"] == why["plain"] == "an attempt delivered twice"
    # No retry delivery (attempt > 1) can show a suspended nack's return: only the plain nack expects one.
    out = retry_outcomes(pd.DataFrame(rows), {"G": 3})
    assert list(out["ledger_id"]) == ["plain"] and out["redelivered"].all()
