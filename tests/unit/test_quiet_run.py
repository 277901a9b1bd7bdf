"""A good run says nothing that is not news: not a thrown-away broker killed after its grace, not the Spark
JVM's start-up banner, not Maven's colour codes."""

from __future__ import annotations

import subprocess
import sys
import time
from types import SimpleNamespace


def test_a_thrown_away_broker_killed_after_its_grace_is_no_news(tmp_path, monkeypatch):
    """A run's brokers (attached) are killed when RocketMQ's shutdown hooks outlast the grace (a 5.3.3 proxy
    needs ~10 s): said only for brokers started by hand, whose stores are kept."""
    from harness.deploy.local import launcher

    monkeypatch.setattr(launcher.process, "stop", lambda targets, timeout_s: [pid for pid, _ in targets])
    said = {}
    for attached in (True, False):
        lines: list[str] = []
        backend = launcher.LocalBackend(tmp_path / str(attached), attached=attached, log=lines.append)
        monkeypatch.setattr(backend, "_slots", SimpleNamespace(release=lambda slot: None))
        lv = SimpleNamespace(processes=["namesrv", "proxy"], pids={"namesrv": 1, "proxy": 2}, token="t",
                             dirs=SimpleNamespace(root=tmp_path), ports=SimpleNamespace(slot=0))
        backend._stop([lv])
        said[attached] = lines
    assert said[True] == []
    assert said[False] and all("no exit within" in line for line in said[False])


def test_thrown_away_brokers_get_no_grace_and_kept_or_restarted_ones_theirs(tmp_path, monkeypatch):
    """A run's brokers are killed at once (their stores are deleted next; a 5.3.3 proxy's shutdown hooks take
    ~10 s, so a grace only ran out); brokers started by hand and a fault's restart keep their SIGTERM grace."""
    from harness.deploy.local import faults, launcher

    graces: list[float] = []
    monkeypatch.setattr(launcher.process, "stop", lambda targets, timeout_s: graces.append(timeout_s) or [])
    monkeypatch.setattr(launcher.process, "exit_code", lambda pid: None)
    for attached in (True, False):
        backend = launcher.LocalBackend(tmp_path / str(attached), attached=attached, log=lambda s: None,
                                        stop_timeout_s=5.0)
        monkeypatch.setattr(backend, "_slots", SimpleNamespace(release=lambda slot: None))
        lv = SimpleNamespace(processes=["namesrv", "proxy"], pids={"namesrv": 1, "proxy": 2}, token="t",
                             dirs=SimpleNamespace(root=tmp_path), ports=SimpleNamespace(slot=0))
        graces.clear()
        backend._stop([lv])
        assert graces == ([launcher.DISCARD_GRACE_S] if attached else [5.0, 5.0]), attached
        graces.clear()
        faults.LocalProcess(backend, lv, "proxy", "proxy").terminate()  # a fault's restart
        assert graces == [5.0], attached


def test_the_spark_jvms_start_up_note_is_dropped_and_the_rest_of_its_stderr_passes(capfd):
    from spark.session import stderr_filtered

    script = ("import sys; sys.stderr.write('WARNING: Using incubator modules: jdk.incubator.vector\\n"
              "a real error\\n')")
    with stderr_filtered():
        child = subprocess.Popen([sys.executable, "-c", script])
    child.wait(5)
    deadline = time.monotonic() + 5
    err = ""
    while "a real error" not in err and time.monotonic() < deadline:  # the filter forwards on its own thread
        time.sleep(0.05)
        err += capfd.readouterr().err
    assert "a real error" in err and "incubator" not in err


def test_spark_logs_warnings_only_unless_the_user_says_how(tmp_path):
    from spark.session import CONF_DIR, logging_conf

    props = (CONF_DIR / "log4j2.properties").read_text()
    assert "rootLogger.level = warn" in props
    assert "org.apache.hadoop.util.NativeCodeLoader\nlogger.nativecode.level = error" in props
    assert logging_conf({}) == f"-Dlog4j2.configurationFile=file://{CONF_DIR}/log4j2.properties"
    (tmp_path / "conf").mkdir()
    for theirs in ({"SPARK_CONF_DIR": "/theirs"}, {"SPARK_HOME": str(tmp_path)}):
        assert logging_conf(theirs) is None


def test_maven_runs_without_colour_codes():
    from harness.deploy.local.maven import maven_env

    assert maven_env({"MAVEN_OPTS": "-Xmx1g"})["MAVEN_OPTS"] == "-Xmx1g -Djansi.noreset=true"
    assert maven_env({})["MAVEN_OPTS"] == "-Djansi.noreset=true"
