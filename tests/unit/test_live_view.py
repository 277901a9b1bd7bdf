"""`run --ui` (issue 32): Locust's own web UI per variant, on 127.0.0.1, without changing how the run goes."""

from harness.cli.main import main
from harness.workload.fleet import ui_options


def test_headless_unless_asked_and_then_loopback_started_at_once_and_quitting_by_itself():
    assert ui_options(None) == ["--headless"]
    ui = ui_options(8089)
    assert ui[ui.index("--web-host") + 1] == "127.0.0.1" and ui[ui.index("--web-port") + 1] == "8089"
    # Starts without a click and quits when its run time is up, as a headless master does.
    assert "--autostart" in ui and ui[ui.index("--autoquit") + 1] == "0" and "--headless" not in ui


def test_k8s_run_with_ui_is_refused_in_one_line(capsys):
    assert main(["k8s", "run", "--variant", "unpatched", "--ui"]) == 2
    err = capsys.readouterr().err
    assert "--ui" in err and "the chart does not expose it yet" in err and len(err.strip().splitlines()) == 1
