"""A calibration's runs judged one by one (spark.calibration): each run's build against the other variant it ran
beside, with the levels it was judged on, from that run's data alone."""

import pytest

from harness.contracts.verdict import VerdictRule
from harness.core.errors import ConfigError
from spark.calibration import judge_runs
from tests import synth


def test_each_run_is_judged_on_its_own_against_the_control_it_ran_beside(spark, tmp_path):
    runs = tmp_path / "runs"
    aa = synth.archive(runs, "aa-1", {"patched": synth.fast, "patched-copy": synth.fast}, messages=40, seed=3)
    slow = synth.archive(runs, "plus-1", {"patched": synth.fast, "patched-plus50ms": synth.slow}, messages=40, seed=4)
    judged = judge_runs([aa, slow], "patched", {"patched-copy": "aa", "patched-plus50ms": 50}, VerdictRule(),
                        log=lambda s: None)
    by = {r["run_id"]: r for r in judged["per_run"]}
    assert set(by) == {"aa-1", "plus-1"} and judged["rule"] == VerdictRule().as_dict()
    assert (by["aa-1"]["control"], by["aa-1"]["candidate"]) == ("aa", "patched-copy")
    assert (by["plus-1"]["control"], by["plus-1"]["verdict"]) == (50, "regression")
    # Each run judged again with a 2x change planted into its candidate's cycles: the power on its own spread.
    doubled, primary = by["aa-1"]["doubled"], by["aa-1"]["primary"]
    assert judged["power_factor"] == 2.0 and doubled["verdict"] in ("regression", "inconclusive")
    assert doubled["ratio_of_medians"] == pytest.approx(2.0 * primary["ratio_of_medians"])
    assert by["aa-1"]["scenario"] == by["plus-1"]["scenario"] is not None
    # What it was judged on: the primary metric's level of every cycle of that run alone, per side.
    levels = by["plus-1"]["cycle_levels"]
    assert len(levels["baseline"]) == by["plus-1"]["primary"]["n_baseline"] == 8
    assert min(levels["candidate"]) > max(levels["baseline"])
    with pytest.raises(ConfigError, match="is no calibration run of unpatched"):
        judge_runs([aa], "unpatched", {"unpatched-copy": "aa"}, VerdictRule(), log=lambda s: None)
