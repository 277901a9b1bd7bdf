"""The calibration plan: which variants a calibration run puts side by side, and the rates it reports."""

import pytest

from harness.campaigns import calibrate
from harness.cli.main import main
from harness.core.errors import ConfigError
from harness.inputs.variants import DELAY_JAR, load_variants


def test_plan_puts_the_build_its_copy_and_one_delayed_copy_per_shift_side_by_side():
    base = load_variants()["patched"]
    p = calibrate.plan(base, [50, 3, 50])
    assert [v.name for v in p.variants] == ["patched", "patched-copy", "patched-plus50ms", "patched-plus3ms"]
    assert p.copy.agents == base.agents and p.copy.version == base.version
    delayed = p.shifted[3].agents
    assert delayed[:-1] == base.agents
    assert delayed[-1].jar == DELAY_JAR and delayed[-1].options == "delay_ms=3"


@pytest.mark.parametrize("ms", [0, -5, calibrate.MAX_SHIFT_MS + 1])
def test_a_shift_the_delay_agent_cannot_apply_is_refused(ms):
    with pytest.raises(ConfigError, match=f"--shift-ms {ms}"):
        calibrate.plan(load_variants()["patched"], [ms])


def test_an_out_of_range_shift_is_one_line_and_exit_2(capsys):
    assert main(["calibrate", "--variant", "patched", "--runs", "1", "--shift-ms", "2001"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--shift-ms 2001" in err and "\n" not in err


def test_rate_carries_an_exact_interval_that_contains_the_rate():
    r = calibrate.rate(1, 20)
    assert r["rate"] == 0.05
    low, high = r["ci"]
    assert 0 < low < 0.05 < high < 0.3
    assert calibrate.rate(0, 0)["rate"] is None
