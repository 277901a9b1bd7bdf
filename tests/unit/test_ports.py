import socket

import pytest

from harness.core.errors import HarnessError
from harness.deploy.local.ports import MAX_SLOTS, VariantPorts, allocate, port_free


def test_slots_never_share_a_port():
    seen: dict[int, int] = {}
    for slot in range(MAX_SLOTS):
        for port in VariantPorts.for_slot(slot).all().values():
            assert port not in seen, f"port {port} in slots {seen.get(port)} and {slot}"
            seen[port] = slot
    assert max(seen) < 32768  # below the ephemeral range


def test_slot_layout_keeps_rocketmq_digits():
    p = VariantPorts.for_slot(1)
    assert (p.namesrv, p.broker, p.grpc, p.proxy_remoting, p.metrics) == (20176, 20111, 20181, 20180, 20157)
    assert p.all()["broker fast remoting"] == 20109 and p.all()["broker HA"] == 20112
    assert p.node("slave").listen == 20121 and p.node("broker-b").metrics == 20137


def test_allocate_skips_taken_and_busy_slots():
    busy = {VariantPorts.for_slot(1).grpc}
    chosen = allocate(3, taken_slots=[0], is_free=lambda port: port not in busy)
    assert [c.slot for c in chosen] == [2, 3, 4]


def test_allocate_reports_when_nothing_is_free():
    with pytest.raises(HarnessError, match="no free port slot"):
        allocate(1, is_free=lambda port: False)


def test_port_free_sees_a_listener():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert not port_free(port)
    assert port_free(port)


def test_two_harnesses_starting_at_once_never_take_the_same_slot(tmp_path):
    """The other harness's brokers do not listen yet: only the slot lock keeps the two apart, in two processes."""
    import subprocess
    import sys

    from harness.deploy.local.ports import SlotLocks

    mine = SlotLocks(tmp_path)
    [first] = allocate(1, is_free=lambda port: True, take=mine.take)
    script = ("import sys; from pathlib import Path; from harness.deploy.local.ports import SlotLocks, allocate; "
              "[p] = allocate(1, is_free=lambda port: True, take=SlotLocks(Path(sys.argv[1])).take); print(p.slot)")
    other = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, check=True)
    assert (first.slot, int(other.stdout)) == (0, 1)
    mine.release(first.slot)  # gone with its brokers: the slot is free again
    again = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, check=True)
    assert int(again.stdout) == 0
