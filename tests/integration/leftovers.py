"""What a real run must leave behind: nothing running and no work directory. One test, which each module that
makes (or reads) a real run takes as its last test (``test_nothing_is_left_running =
leftovers.test_nothing_is_left_running``); its ``archive`` fixture is that module's run."""

from __future__ import annotations

from pathlib import Path

import psutil

from harness.core import process
from harness.deploy.local import LocalBackend


def test_nothing_is_left_running(archive: Path) -> None:
    """No broker of the run (nor one a fault started again), no process naming its runs directory (Locust), and
    its work directory removed."""
    work = archive.parent / ".work" / archive.name
    assert process.find_owned(LocalBackend(work / "brokers").token_prefix) == []
    runs_dir = str(archive.parent)
    locusts = [p.pid for p in psutil.process_iter(["cmdline"]) if any(runs_dir in a for a in p.info["cmdline"] or ())]
    assert locusts == []
    assert not work.exists()
