"""`run --ui` (issue 32): Locust's own web UI per variant, on 127.0.0.1 here and through the load-test Service in
the cluster, without changing how the run goes."""

import pytest

from harness.cli.main import main
from harness.contracts.options import RunOptions
from harness.deploy.k8s import naming
from harness.deploy.k8s.remote import run_args
from harness.workload.fleet import LOCAL_UI, ui_options


def test_headless_unless_asked_and_then_loopback_started_at_once_and_quitting_by_itself():
    assert ui_options(None) == ["--headless"]
    ui = ui_options(8089)
    assert ui[ui.index("--web-host") + 1] == "127.0.0.1" and ui[ui.index("--web-port") + 1] == "8089"
    # Starts without a click and quits when its run time is up, as a headless master does.
    assert "--autostart" in ui and ui[ui.index("--autoquit") + 1] == "0" and "--headless" not in ui


def test_in_the_cluster_each_variant_has_a_fixed_port_the_service_forwards_and_more_variants_are_refused(capsys):
    assert [naming.ui_port(n) for n in range(naming.UI_PORTS)] == [8089, 8090, 8091, 8092]
    with pytest.raises(ValueError, match="for 4 variants"):
        naming.ui_port(naming.UI_PORTS)
    assert LOCAL_UI.host == "127.0.0.1" and LOCAL_UI.port(0) != LOCAL_UI.port(0)  # free ports here
    assert run_args("r", "s.yaml", ["a"], RunOptions(ui=True))[-1] == "--ui"
    assert "--ui" not in run_args("r", "s.yaml", ["a"], RunOptions())
    five = [a for v in ("a", "b", "c", "d", "e") for a in ("--variant", v)]
    assert main(["k8s", "run", *five, "--ui"]) == 2
    err = capsys.readouterr().err
    assert "--ui with 5 variants" in err and "at most 4" in err and len(err.strip().splitlines()) == 1
