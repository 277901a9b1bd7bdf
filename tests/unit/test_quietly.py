"""tools/quietly.sh: a talkative set-up step (apt, Maven) says one line; its output goes to a log, named and its
last lines shown when it fails."""

import subprocess
from pathlib import Path

from harness.core.paths import REPO_ROOT

QUIETLY = str(REPO_ROOT / "tools" / "quietly.sh")


def test_a_step_that_succeeds_says_one_line_and_keeps_its_output_in_the_log(tmp_path: Path):
    log = tmp_path / "logs" / "apt.log"
    done = subprocess.run([QUIETLY, str(log), "installing maven with apt", "sh", "-c",
                           "for i in $(seq 300); do echo Selecting package $i; done"],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout.splitlines() == [f"installing maven with apt (log: {log})"]
    assert len(log.read_text().splitlines()) == 300


def test_a_step_that_fails_names_its_log_and_shows_its_last_lines(tmp_path: Path):
    log = tmp_path / "maven.log"
    done = subprocess.run([QUIETLY, str(log), "building the agents with Maven", "sh", "-c",
                           "for i in $(seq 50); do echo line $i; done; echo BUILD FAILURE >&2; exit 7"],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 7
    err = done.stderr.splitlines()
    assert err[0] == ("error: building the agents with Maven failed (exit 7); its last lines, the whole output in "
                      f"{log}:")
    assert err[-1] == "BUILD FAILURE" and "line 32" in err and "line 31" not in err  # the last 20 lines
    assert "line 1" in log.read_text().splitlines()
