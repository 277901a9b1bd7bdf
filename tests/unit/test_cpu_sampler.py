"""harness.run.cpu: what a run's processes took of the machine's CPU, grouped by kind and variant, and whose ran
out. The sampler reads real processes (a child that spins, one that sleeps); classification and the judgement
are pure."""

import subprocess
import sys
import time

import pytest

from harness.run import cpu

VARIANTS = ["unpatched", "patched"]


@pytest.mark.parametrize(("cmdline", "cwd", "expected"), [
    (["java", "-Xmx1g", "-Duser.home=/w/.work/r/brokers/patched/broker-b", "-cp", "x",
      "org.apache.rocketmq.broker.BrokerStartup"], "/", (cpu.SERVERS, "patched", "broker")),
    (["java", "-Duser.home=/w/brokers/unpatched/proxy", "org.apache.rocketmq.proxy.ProxyStartup"], "/",
     (cpu.SERVERS, "unpatched", "proxy")),
    (["java", "-Duser.home=/elsewhere/x/namesrv", "org.apache.rocketmq.namesrv.NamesrvStartup"], "/",
     (cpu.SERVERS, None, "namesrv")),  # not one of the run's variants: counted, not attributed
    (["/venv/bin/python", "-m", "harness.workload.launch", "-f", "lf.py", "--worker", "--master-host", "h"],
     "/w/.work/r/locust/patched", (cpu.LOAD, "patched", "worker")),
    (["/venv/bin/python", "-m", "harness.workload.launch", "-f", "lf.py", "--master"],
     "/w/.work/r/locust/unpatched", (cpu.LOAD, "unpatched", "master")),
    (["/opt/prometheus-2.53/prometheus", "--config.file=p.yml"], "/", (cpu.PROMETHEUS, None, "prometheus")),
    (["sleep", "1"], "/", (cpu.OTHER, None, "sleep")),
])
def test_each_process_is_put_down_to_its_kind_and_variant(cmdline, cwd, expected):
    assert cpu.classify(cmdline, cwd, VARIANTS) == expected


def test_a_spinning_child_is_measured_near_one_core_and_a_sleeping_one_near_none(tmp_path):
    spin = tmp_path / "locust" / "patched"
    spin.mkdir(parents=True)
    s = cpu.CpuSampler(VARIANTS, interval_s=0.5)
    s.start()
    # The spinner uses one CPU-second however long the machine takes to give it one (make test shares the cores
    # with brokers and other tests: a spinner of two wall seconds got 0.22 of a core there, 2026-12-07).
    busy = subprocess.Popen([sys.executable, "-c", "import time\nwhile time.process_time() < 1.0: pass",
                             "harness.workload.launch", "--worker"], cwd=spin)
    idle = subprocess.Popen(["sleep", "2"])
    time.sleep(2.2)
    busy.wait()
    idle.wait()
    out = s.stop()
    assert 1.0 < out["sampled_s"] < 60
    # Its CPU-second as the sampler saw it: less only the part in the interval it exited in (half a second of
    # sampling at most), never more; never above one core.
    load = out["variants"]["patched"][cpu.LOAD]
    assert 0.45 <= load["mean_cores"] * out["sampled_s"] <= 1.05, (load, out["sampled_s"])
    assert load["mean_cores"] <= 1.05
    assert out["kinds"][cpu.OTHER]["mean_cores"] < 0.1 and cpu.HARNESS in out["kinds"]  # the sleeper; this process
    assert out["busiest_locust_process"]["process"].startswith("patched worker ")
    assert 0 < out["machine"]["mean_busy"] <= 1.0
    assert s.stop() == out or s.stop()["sampled_s"] == out["sampled_s"]  # stopping again changes nothing


def test_stopping_a_sampler_never_started_gives_nothing_measured():
    out = cpu.CpuSampler(VARIANTS).stop()
    assert out["sampled_s"] == 0 and out["ran_out"]["line"] == "CPU not measured"


def test_a_peak_is_the_busiest_ten_seconds_not_a_one_second_burst():
    u = cpu._GroupCpu()
    for s in range(30):
        u.add(1.0 if s == 3 else 0.2, 1.0)  # one second at a full core among 0.2
    f = u.figures(30.0)
    assert f["peak_cores"] == pytest.approx(0.28) and f["mean_cores"] == pytest.approx(0.227, abs=1e-3)


@pytest.mark.parametrize(("machine", "locust", "load", "full"), [
    (0.5, 0.3, False, False), (0.95, 0.3, False, True), (0.6, 0.92, True, False), (0.97, 0.99, True, True)])
def test_who_ran_out(machine, locust, load, full):
    c = {"cores": 2, "sampled_s": 30.0, "machine": {"mean_busy": machine, "peak_busy": machine},
         "kinds": {"servers": {"mean_cores": 1.1, "peak_cores": 1.3},
                   "load generator": {"mean_cores": locust, "peak_cores": locust}},
         "busiest_locust_process": {"process": "p worker 1", "mean_cores": locust, "peak_cores": locust}}
    out = cpu.ran_out(c)
    assert (out["load_generator"], out["machine"]) == (load, full)
    assert ("no CPU ran out" in out["line"]) == (not load and not full)
