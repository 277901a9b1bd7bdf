"""A local variant's fault targets: one state for all of a variant's processes, so a start that waits for
another process (a cluster-mode proxy restarting while a fault starts its name server again) sees that
process's new PID and waits for it instead of failing on the old one's exit (CI, 2026-11-28: "restart proxy
failed: the namesrv process exited during start-up", the name server killed 10 s before and still starting)."""

import socket
import threading
import time
from pathlib import Path

import pytest

from harness.core.errors import HarnessError
from harness.core.waiting import Deadline
from harness.deploy.local import config, startup
from harness.deploy.local.launcher import LocalBackend
from harness.deploy.local.ports import VariantPorts
from harness.deploy.local.state import LocalVariant
from harness.inputs.brokers import Topology

DEAD_PID = 2**22 + 17  # above Linux's pid_max default: never a live process


def _variant(root: Path, namesrv_port: int) -> LocalVariant:
    ports = VariantPorts(0, namesrv=namesrv_port, broker=1, proxy_remoting=2, grpc=3, metrics=4)
    lv = LocalVariant(name="v1", version="5.3.3", ports=ports, dirs=config.VariantDirs(root / "v1"), token="t/v1/1",
                      pids={"namesrv": DEAD_PID, "broker": DEAD_PID, "proxy": DEAD_PID}, started_at=time.time(),
                      topology=Topology(proxy="cluster"))
    lv.dirs.root.mkdir(parents=True)
    lv.save()
    return lv


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_targets_of_one_variant_share_its_state(tmp_path: Path):
    _variant(tmp_path, _free_port())
    backend = LocalBackend(tmp_path, log=lambda _: None)
    namesrv, proxy = backend.process("v1", "namesrv"), backend.process("v1", "proxy")
    assert namesrv.lv is proxy.lv
    namesrv.lv.pids["namesrv"] = 4242  # what a start records ...
    assert proxy.lv.pids["namesrv"] == 4242  # ... the proxy's start reads


def test_a_start_again_waits_for_a_process_someone_else_is_starting(tmp_path: Path):
    port = _free_port()
    lv = _variant(tmp_path, port)
    # Its own process gone: the wait ends at once, with the reason.
    with pytest.raises(HarnessError, match="namesrv process exited during start-up"):
        startup.wait_process(lv, "namesrv", Deadline(5))
    # Another's: waited for until it listens (here after 0.5 s), whatever PID the state held meanwhile.
    server = socket.socket()

    def listen_later() -> None:
        time.sleep(0.5)
        server.bind(("127.0.0.1", port))
        server.listen()

    t = threading.Thread(target=listen_later)
    t.start()
    try:
        began = time.monotonic()
        startup.wait_process(lv, "namesrv", Deadline(10), own=False)
        assert time.monotonic() - began >= 0.4
    finally:
        t.join()
        server.close()
