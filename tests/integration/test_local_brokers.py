"""Real RocketMQ servers from Maven Central jars, started, used and stopped on this machine."""

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

from harness.client.registry import driver
from harness.core import process
from harness.core.errors import ConfigError, HarnessError
from harness.deploy.agents import DELAY_JAR
from harness.deploy.local import LocalBackend
from harness.deploy.local.ports import port_free
from harness.inputs.variants import load_variants, parse_variants
from harness.run.site import RUN_BROKER_STOP_S


def _listeners(pid: int) -> dict[int, str]:
    return {c.laddr.port: c.laddr.ip for c in psutil.Process(pid).net_connections("tcp") if c.status == "LISTEN"}


@pytest.fixture(scope="module")
def unpatched(detached_unpatched):
    """The session's brokers of `brokers up` (integration/conftest.py; test_external_run measures them too)."""
    _, backend, ep = detached_unpatched
    return backend, ep


def test_up_is_healthy_and_loopback_bound(unpatched):
    backend, ep = unpatched
    [health] = backend.status()
    assert health.healthy, health.detail
    assert backend.endpoints() == [ep]
    [lv] = backend._states()
    # Every listener is on loopback: bindAddress where RocketMQ has it, the loopback-bind agent elsewhere.
    assert set(_listeners(lv.pids["namesrv"]).values()) == {"127.0.0.1"}
    proxy = _listeners(lv.pids["proxy"])
    for port in (lv.ports.broker, lv.ports.broker - 2, lv.ports.broker + 1, lv.ports.grpc, lv.ports.proxy_remoting,
                 lv.ports.metrics):
        assert proxy.get(port) == "127.0.0.1", (port, proxy)
    assert set(proxy.values()) == {"127.0.0.1"}, proxy
    broker_conf = (lv.dirs.conf / "broker.conf").read_text()
    assert "enableRetryTopicV2=false" in broker_conf and "enableNotifyBeforePopCalculateLag=false" in broker_conf


def test_pop_nack_retry_and_ack_through_the_remoting_driver(unpatched):
    _, ep = unpatched
    topic, group, picky = f"R_{uuid.uuid4().hex[:8]}", f"G_{uuid.uuid4().hex[:8]}", f"P_{uuid.uuid4().hex[:8]}"
    d = driver("remoting", ep)
    try:
        d.create_topic(topic, queues=4)
        d.create_group(group, retry_max_times=16)
        d.create_group(picky, retry_max_times=16)
        consumer = d.pop_consumer(group, topic, long_poll_s=3)
        tag_b = d.pop_consumer(picky, topic, long_poll_s=3, tags="TagB")
        t0 = time.time()
        empty = consumer.receive(16, 10)
        assert empty.deliveries == [] and time.time() - t0 > 2  # a long poll, not an instant answer
        producer = d.producer(topic)
        ids = [producer.send(json.dumps({"i": i}).encode(), tag="TagA" if i % 2 else "TagB") for i in range(6)]
        first = _drain(consumer, 6)
        assert sorted(m.message_id for m in first) == sorted(ids)
        assert all(m.delivery_attempt == 1 and t0 - 1 <= m.store_ts_ms / 1000 <= time.time() + 1 for m in first)
        assert {m.tag for m in first} == {"TagA", "TagB"}
        nacked = first[0]
        consumer.change_invisible(nacked, 1)
        for m in first[1:]:
            consumer.ack(m)
        # The retry: the same message, second attempt, a later store time (the revived copy).
        [retry] = _drain(consumer, 1, deadline_s=40)
        assert (retry.message_id, retry.delivery_attempt, retry.tag) == (nacked.message_id, 2, nacked.tag)
        assert retry.store_ts_ms > nacked.store_ts_ms
        # More time, then an ack with the handle the change returned: the message never comes back.
        consumer.change_invisible(retry, 3)
        consumer.ack(retry)
        assert _drain(consumer, 1, deadline_s=12) == []
        # A group filtering TagB gets the three TagB messages only.
        assert sorted(m.tag for m in _drain(tag_b, 3)) == ["TagB"] * 3
    finally:
        d.close()


GEVENT_SCRIPT = """
import json, sys, time
from gevent import monkey
monkey.patch_all(thread=False, queue=False)  # as harness.workload.launch patches a Locust worker
import gevent
from harness.client.registry import driver
from harness.contracts.endpoints import Endpoints
ep = Endpoints(**json.loads(sys.argv[1]))
topic, group = sys.argv[2], sys.argv[3]
d = driver("remoting", ep)
d.create_topic(topic, queues=4)
d.create_group(group, retry_max_times=16)
consumer = d.pop_consumer(group, topic, long_poll_s=3)
producer = d.producer(topic)
ticks = []
ticker = gevent.spawn(lambda: [ticks.append(time.monotonic()) or gevent.sleep(0.1) for _ in range(30)])
poll = gevent.spawn(consumer.receive, 16, 10)  # a long poll on its own connection, while the burst goes out
ids = [g.get() for g in [gevent.spawn(producer.send, b"x") for _ in range(16)]]
got = poll.get().deliveries
while len(got) < 16:
    got += consumer.receive(16, 10).deliveries
for m in got:
    consumer.ack(m)
ticker.join()
gaps = [b - a for a, b in zip(ticks, ticks[1:])]
print(json.dumps({"sent": len(set(ids)), "received": len({m.message_id for m in got}), "max_gap_s": max(gaps)}))
d.close()
"""


def test_the_remoting_driver_shares_a_connection_between_greenlets_without_blocking_them(unpatched):
    # A burst's greenlets send through one producer connection while a consumer long-polls: every send
    # lands, and the worker's loop keeps running (a thread lock there once froze a worker).
    _, ep = unpatched
    topic, group = f"GV_{uuid.uuid4().hex[:8]}", f"GV_{uuid.uuid4().hex[:8]}"
    out = subprocess.run([sys.executable, "-c", GEVENT_SCRIPT, json.dumps(ep.as_dict()), topic, group],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["sent"] == result["received"] == 16
    # A 100 ms ticker never stalled for the poll's length (3 s); under 2 s leaves room for a loaded machine.
    assert result["max_gap_s"] < 2.0, result


def _drain(consumer, n: int, deadline_s: float = 30) -> list:
    got: list = []
    deadline = time.monotonic() + deadline_s
    while len(got) < n and time.monotonic() < deadline:
        got += consumer.receive(16, 10).deliveries
    return got


def test_send_and_pop_through_the_grpc_driver(unpatched, tmp_path: Path):
    _, ep = unpatched
    topic, group = f"T_{uuid.uuid4().hex[:8]}", f"G_{uuid.uuid4().hex[:8]}"
    d = driver("grpc", ep, log_file=tmp_path / "client.log")
    try:
        d.create_topic(topic, queues=4)
        d.create_group(group, retry_max_times=16)
        consumer = d.pop_consumer(group, topic, long_poll_s=5)
        producer = d.producer(topic)
        sent = {}
        for i in range(5):
            sent[i] = time.time()
            assert producer.send(json.dumps({"i": i}).encode())
        got: dict[int, int] = {}
        deadline = time.monotonic() + 60
        while len(got) < 5 and time.monotonic() < deadline:
            received = consumer.receive(16, 15)
            assert abs(received.at_ns / 1e9 - time.time()) < 1
            for m in received.deliveries:
                got[json.loads(m.body)["i"]] = m.store_ts_ms
                assert m.delivery_attempt == 1 and m.message_id
                consumer.ack(m)
        assert sorted(got) == list(range(5))
        for i, store_ms in got.items():
            # The broker's store time lies between our send and now (1 s slack for clock granularity).
            assert sent[i] - 1 <= store_ms / 1000 <= time.time() + 1
    finally:
        d.close()
    assert (tmp_path / "client.log").exists()


def test_the_native_client_without_a_deadline_and_with_auto_renew_against_a_real_proxy(unpatched, tmp_path: Path):
    """What the proxy does with a receive the official clients never send: without a gRPC deadline it fails at once
    (apache/rocketmq PR #11139: its remaining time is unboxed before the pop); with auto_renew it pops with its own
    invisible time (defaultInvisibleTimeMills, 60 s by default), not the request's, and the handle it gives acks."""
    from harness.client.grpc_wire import ProxyError
    from harness.contracts.workers import ReceiveOptions

    _, ep = unpatched
    topic, group = f"N_{uuid.uuid4().hex[:8]}", f"G_{uuid.uuid4().hex[:8]}"
    d = driver("grpc", ep, log_file=tmp_path / "client.log", client="native")
    try:
        d.create_topic(topic, queues=1)
        d.create_group(group, retry_max_times=16)
        started = time.monotonic()
        with pytest.raises(ProxyError, match="NullPointerException"):
            d.pop_consumer(group, topic, long_poll_s=5, options=ReceiveOptions(deadline=False)).receive(16, 15)
        assert time.monotonic() - started < 5  # refused at once, not long-polled
        producer = d.producer(topic)
        assert producer.send(b'{"i": 1}')
        consumer = d.pop_consumer(group, topic, long_poll_s=5, options=ReceiveOptions(auto_renew=True))
        got = []
        deadline = time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            got = consumer.receive(16, 15).deliveries
        [m] = got
        # ReceiptHandle: start offset, pop time, invisible time (ms), ...: the proxy's 60 s, not the 15 s asked.
        assert int(m.handle.handle.split(" ")[2]) == 60_000
        consumer.ack(m)  # the proxy maps the handle it gave to the one it holds
    finally:
        d.close()


def test_collect_copies_logs_and_configs(unpatched, tmp_path: Path):
    backend, ep = unpatched
    backend.collect(tmp_path)
    assert (tmp_path / "unpatched" / "conf" / "broker.conf").is_file()
    assert (tmp_path / "unpatched" / "proxy" / "broker.log").stat().st_size > 0
    assert (tmp_path / "unpatched" / "namesrv" / "namesrv.log").is_file()


def test_second_up_of_a_running_variant_is_refused(unpatched):
    backend, _ = unpatched
    with pytest.raises(HarnessError, match="already up"):
        backend.up([load_variants()["unpatched"]])


def test_down_leaves_nothing(unpatched):
    # The session's brokers, started by `brokers up` and stopped here as a user's `brokers down` stops them
    # (gracefully, not a run's quick stop): the last of this module's tests, after test_external_run's (the two
    # modules run in that order on one worker; the fixture's own teardown then finds nothing left to stop).
    shared, _ = unpatched
    backend = LocalBackend(shared.workdir, log=lambda s: None)
    [lv] = backend._states()
    assert backend.down() == ["unpatched"]
    assert process.find_owned(backend.token_prefix) == []
    assert not any(psutil.pid_exists(p) and process.alive(p, lv.token) for p in lv.pids.values())
    assert all(port_free(p) for p in lv.ports.all().values())
    assert backend.status() == []


def test_failed_start_carries_log_tail_and_leaves_nothing(tmp_path: Path):
    broken = parse_variants({"variants": {"broken": {"version": "5.3.3", "jvm_options": ["-XX:+NoSuchHarnessOpt"]}}})
    backend = LocalBackend(tmp_path, log=lambda s: None)
    with pytest.raises(HarnessError) as e:
        backend.up([broken["broken"]])
    assert "proxy process exited during start-up" in str(e.value)
    assert "NoSuchHarnessOpt" in e.value.detail
    assert process.find_owned(backend.token_prefix) == []


def test_a_variant_whose_agent_refuses_to_install_is_refused_and_leaves_nothing(tmp_path: Path):
    # A broker that starts with an agent that did not install would be measured as if it were patched.
    bad = parse_variants({"variants": {"badagent": {
        "version": "5.3.3", "agents": [{"jar": DELAY_JAR, "options": "delay_ms=oops"}]}}})["badagent"]
    # As a run starts it (where it matters most).
    backend = LocalBackend(tmp_path, attached=True, log=lambda s: None, stop_timeout_s=RUN_BROKER_STOP_S)
    with pytest.raises(HarnessError) as e:
        backend.up([bad])
    assert "badagent: agents not active" in str(e.value) and "pop-wakeup-delay.jar" in str(e.value)
    assert "not installed" in str(e.value)
    assert process.find_owned(backend.token_prefix) == []


def test_unknown_version_is_named(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("RMQ_HARNESS_CACHE", str(tmp_path / "cache"))
    bogus = parse_variants({"variants": {"bogus": {"version": "9.9.9"}}})["bogus"]
    with pytest.raises(ConfigError, match=r"RocketMQ 9\.9\.9 cannot be assembled: rocketmq-broker 9\.9\.9 not "
                                          r"published on Maven Central"):
        LocalBackend(tmp_path / "w", log=lambda s: None).up([bogus])


def test_harness_killed_mid_up_then_down_cleans_up(tmp_path: Path):
    env = {**os.environ, "RMQ_HARNESS_STATE": str(tmp_path)}
    cli = [sys.executable, "-m", "harness.cli.main"]
    up = subprocess.Popen([*cli, "brokers", "up"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    state = tmp_path / "brokers" / "unpatched" / "state.json"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if state.exists() and "proxy" in json.loads(state.read_text())["pids"]:
            break
        time.sleep(0.1)
    else:
        up.kill()
        pytest.fail("the proxy never started")
    up.send_signal(signal.SIGKILL)
    up.wait(10)
    pids = json.loads(state.read_text())["pids"]
    assert all(psutil.pid_exists(p) for p in pids.values())  # detached servers outlive a killed harness
    done = subprocess.run([*cli, "brokers", "down"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "unpatched" in done.stdout
    token_prefix = LocalBackend(tmp_path / "brokers").token_prefix
    assert process.find_owned(token_prefix) == []
