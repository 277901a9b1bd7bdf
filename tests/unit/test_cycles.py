"""The master's bookkeeping of cycles (the Locust messaging around it runs in the integration tests)."""

from harness.workload.cycles import CycleBook


def test_a_cycle_drains_when_every_group_acked_every_message_sent():
    book = CycleBook(groups=["A", "B"], producers=1)
    assert book.final(0, "A", ["m1"]) == []  # an ack can overtake the producer's report
    assert book.sent(0, {"A": ["m1", "m2"], "B": ["m1", "m2"]}) == []
    assert book.final(0, "A", ["m2"]) == []  # B has acked nothing yet
    assert book.final(0, "B", ["m1", "m2"]) == [0]
    assert book.final(0, "B", ["m2"]) == []  # announced once


def test_every_producer_must_have_reported():
    book = CycleBook(groups=["A"], producers=2)
    assert book.sent(3, {"A": ["a1"]}) == []
    assert book.final(3, "A", ["a1"]) == []
    assert book.sent(3, {"A": ["b1"]}) == []
    assert book.final(3, "A", ["b1"]) == [3]
    assert not book.done() and book.done()


def test_a_cycles_sends_are_complete_once_every_producer_reported_them_and_said_once():
    book = CycleBook(groups=["A"], producers=2)
    book.sent(0, {"A": ["a1"]})
    assert not book.newly_all_sent(0)  # one producer of two: the consumers after_sends keep waiting
    book.sent(0, {"A": ["b1"]})
    assert book.newly_all_sent(0) and not book.newly_all_sent(0)  # told once
    book.sent(1, {"A": ["a2"]})
    assert not book.newly_all_sent(1) and book.sends_over(0) == [] and book.newly_all_sent(1)  # b stopped at 0


def test_a_worker_learns_when_a_cycles_sends_are_complete():
    from types import SimpleNamespace

    from harness.workload.cycles import ALL_SENT, DrainSignals

    signals, handlers = DrainSignals(), {}
    signals.attach(SimpleNamespace(register_message=lambda kind, f: handlers.setdefault(kind, f)))
    assert not signals.wait_sent(0, 0.01)
    handlers[ALL_SENT](None, SimpleNamespace(data={"cycle": 0}))
    assert signals.wait_sent(0, 0.01) and not signals.wait_sent(1, 0.01)


def test_a_cycle_whose_sends_all_failed_drains_at_once():
    assert CycleBook(groups=["A"], producers=1).sent(0, {}) == [0]


def test_a_cycle_only_some_producers_reached_drains_once_the_others_stopped_sending():
    book = CycleBook(groups=["A"], producers=2)
    assert book.sent(0, {"A": ["a0"]}) == [] and book.sent(0, {"A": ["b0"]}) == []
    assert book.final(0, "A", ["a0", "b0"]) == [0]
    assert book.sent(1, {"A": ["a1"]}) == []  # producer a ran one cycle longer than b
    assert book.final(1, "A", ["a1"]) == []  # still waiting for b's report of cycle 1
    assert book.sends_over(0) == [1]  # b's last was 0: cycle 1 needs a's report only
    assert book.sends_over(1) == []


def test_a_group_waits_only_for_the_messages_it_is_owed():
    book = CycleBook(groups=["A", "B"], producers=1)  # e.g. A filters TagA, B filters TagB
    assert book.sent(0, {"A": ["a1"], "B": ["b1"]}) == []
    assert book.final(0, "A", ["a1"]) == []
    assert book.final(0, "B", ["b1"]) == [0]


def test_a_drained_cycle_forgets_its_ids_and_ignores_late_acks():
    from harness.workload.cycles import CycleBook

    book = CycleBook(["G"], producers=1)
    assert book.sent(0, {"G": ["a", "b"]}) == []
    assert book.final(0, "G", ["a", "b"]) == [0]
    assert book._sent == {} and book._final == {}  # a long run's master keeps only the open cycles
    assert book.final(0, "G", ["a"]) == [] and book._final == {}  # a duplicate's ack after the drain


def test_recent_keys_forget_what_is_older_than_their_window():
    from harness.workload.runtime import RecentKeys

    now = [0.0]
    keys = RecentKeys(10.0, clock=lambda: now[0])
    keys.add("a")
    now[0] = 5.0
    keys.add("b")
    assert "a" in keys and "b" in keys
    now[0] = 12.0
    keys.add("c")  # "a" is 12 s old now
    assert "a" not in keys and "b" in keys and len(keys) == 2
