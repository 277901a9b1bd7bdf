"""One wait: it returns what the probe found, gives up naming the last state seen, and stops early when what it
waits for died."""

import pytest

from harness.core.errors import HarnessError
from harness.core.waiting import Deadline, Pending, wait_until


def test_returns_what_the_probe_found_once_it_is_so():
    answers = iter([Pending("starting"), Pending("listening"), {"ready": True}])
    assert wait_until("x", lambda: next(answers), 5, interval_s=0.001) == {"ready": True}


def test_gives_up_naming_what_how_long_and_the_last_state_seen():
    states = iter(f"{n} of 3 registered" for n in range(100))
    with pytest.raises(HarnessError, match=r"waited 0 s for the brokers to register; last seen: \d of 3") as e:
        wait_until("the brokers to register", lambda: Pending(next(states)), 0.05, interval_s=0.01,
                   detail=lambda: "log tail")
    assert e.value.detail == "log tail"


def test_stops_when_what_it_waits_for_died():
    def alive() -> None:
        raise HarnessError("the broker exited during start-up")

    with pytest.raises(HarnessError, match="exited during start-up"):
        wait_until("the broker", lambda: Pending(), 60, alive=alive)


def test_waits_share_one_deadline():
    d = Deadline(0.05)
    with pytest.raises(HarnessError):
        wait_until("a", lambda: Pending(), d, interval_s=0.01)
    with pytest.raises(HarnessError):  # the second gets no time of its own
        wait_until("b", lambda: Pending(), d, interval_s=10)
    assert d.passed() and d.left() == 0
