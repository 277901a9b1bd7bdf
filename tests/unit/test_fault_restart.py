"""A process a fault stopped that exits while it starts again (a cluster-mode proxy whose system-topic request timed
out on a loaded machine) is started once more within the same deadline, and the log says so; one that keeps exiting
is an error."""

from types import SimpleNamespace

import pytest

from harness.deploy.local import faults, startup


def _process(tmp_path, monkeypatch, exits: int) -> tuple[faults.LocalProcess, list[str], list[int]]:
    said: list[str] = []
    spawned: list[int] = []
    backend = SimpleNamespace(ready_timeout_s=60.0, attached=True, log=said.append)
    lv = SimpleNamespace(name="v", pids={"proxy": 1}, token="t",
                         dirs=SimpleNamespace(stdout=lambda role: tmp_path / f"{role}.out"))
    monkeypatch.setattr(faults.process, "alive", lambda pid, token: False)
    monkeypatch.setattr(startup, "spawn_when_ready", lambda *a, **k: spawned.append(1))

    def wait_process(lv, role, deadline, own=True):
        if len(spawned) <= exits:
            raise startup.ExitedDuringStartup(f"{lv.name}: the proxy process exited during start-up")

    monkeypatch.setattr(startup, "wait_process", wait_process)
    monkeypatch.setattr(startup, "check_agents", lambda *a: {})
    return faults.LocalProcess(backend, lv, "proxy", "proxy"), said, spawned


def test_a_process_that_exits_while_starting_again_is_started_once_more_and_said(tmp_path, monkeypatch):
    proc, said, spawned = _process(tmp_path, monkeypatch, exits=1)
    proc.start()
    assert len(spawned) == 2
    assert said == ["v: proxy exited while starting again after the fault (v: the proxy process exited during "
                    f"start-up); started once more (2 of {faults.START_TRIES})"]


def test_one_that_keeps_exiting_is_an_error_after_its_tries(tmp_path, monkeypatch):
    proc, said, spawned = _process(tmp_path, monkeypatch, exits=faults.START_TRIES)
    with pytest.raises(startup.ExitedDuringStartup):
        proc.start()
    assert len(spawned) == faults.START_TRIES and len(said) == faults.START_TRIES - 1
