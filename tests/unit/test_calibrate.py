"""The calibration plan: which variants a calibration run puts side by side, and the rates it reports."""

import pytest

from harness.campaigns import calibrate
from harness.cli.main import main
from harness.core.errors import ConfigError
from harness.deploy.agents import DELAY_JAR
from harness.inputs.variants import load_variants


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


def test_every_run_is_two_variants_and_each_shift_has_runs_of_its_own():
    p = calibrate.plan(load_variants()["patched"], [50, 3])
    pairs = p.pairs(runs=3, shift_runs=2)
    assert [(what, [v.name for v in vs]) for what, vs in pairs] == [
        ("aa", ["patched", "patched-copy"]), (50, ["patched", "patched-plus50ms"]), (3, ["patched", "patched-plus3ms"]),
        ("aa", ["patched", "patched-copy"]), (50, ["patched", "patched-plus50ms"]), (3, ["patched", "patched-plus3ms"]),
        ("aa", ["patched", "patched-copy"])]


@pytest.mark.parametrize(("k", "n", "upper"), [(0, 20, 0.1391), (0, 59, 0.0495), (1, 93, 0.049994), (0, 58, 0.0503)])
def test_the_one_sided_bound_is_what_a_false_alarm_claim_can_say(k, n, upper):
    # 0 of 20 does not support "at most 5%"; 0 of 59 or 1 of 93 do (the figures)
    assert calibrate.rate(k, n)["upper"] == pytest.approx(upper, abs=1e-4)
    assert (calibrate.rate(k, n)["upper"] <= 0.05) == (upper <= 0.05)


def _record(order: list[str], base_ms: float, cand_ms: float) -> dict:
    return {"variant_order": {"names": order, "how": "random", "seed": 1}, "baseline": "patched",
            "candidate": "patched-copy", "primary": {"median_baseline": base_ms, "median_candidate": cand_ms}}


def test_the_order_effect_is_the_second_up_over_the_first_whoever_was_the_baseline():
    # The second up is 1.2x the first in every run, half of them with the copy first.
    records = [_record(["patched", "patched-copy"], 10.0, 12.0), _record(["patched-copy", "patched"], 12.0, 10.0),
               _record(["patched", "patched-copy"], 20.0, 24.0), _record(["patched-copy", "patched"], 24.0, 20.0)]
    effect = calibrate.order_effect(records)
    assert effect["runs"] == 4 and effect["second_slower_in"] == 4
    assert effect["second_over_first"] == pytest.approx(1.2)
    assert calibrate.order_effect(records[:2]) is None  # too few to say
    given = [{**r, "variant_order": {**r["variant_order"], "how": "given"}} for r in records]
    assert calibrate.order_effect(given) is None  # only a random order says anything about order


def test_a_calibration_of_several_scenarios_runs_them_round_by_round_and_delays_only_those_judged_on_the_wakeup():
    from harness.inputs.catalogue import load_scenario

    burst, whole_poll = load_scenario("burst"), load_scenario("v2-whole-poll")  # wakeup_ms; stalled
    p = calibrate.plan(load_variants()["patched"], [50])

    class Recorder:  # the campaign's two calls, recorded (the runs themselves are the integration layer's)
        def __init__(self):
            self.runs = []

        def check(self, scenarios, variants):
            self.checked = [s.name for s in scenarios]

        def run(self, scenario, variants, label):
            self.runs.append((scenario.name, [v.name for v in variants][1]))

        def finish(self):
            return type("Done", (), {"archives": [f"a{i}" for i in range(len(self.runs))]})()

    campaign = Recorder()
    assert len(calibrate.run_all(p, [burst, whole_poll], 2, 1, campaign)) == 5
    assert campaign.checked == ["burst", "v2-whole-poll"]
    assert campaign.runs == [("burst", "patched-copy"), ("burst", "patched-plus50ms"),
                             ("v2-whole-poll", "patched-copy"),
                             ("burst", "patched-copy"), ("v2-whole-poll", "patched-copy")]


def _judged(scenario: str, control, verdict: str, doubled: str) -> dict:
    return {"control": control, "scenario": scenario, "verdict": verdict, "variant_order": None,
            "doubled": doubled and {"verdict": doubled},
            "primary": {"n_baseline": 10, "n_candidate": 10, "ratio_of_medians": 1.0, "median_baseline": 10.0,
                        "median_candidate": 10.0}}


def test_the_rates_are_given_per_scenario_and_pooled_over_the_set():
    from harness.inputs.catalogue import load_scenario

    scenarios = [load_scenario("burst"), load_scenario("lapse")]
    p = calibrate.plan(load_variants()["patched"], [50])
    runs = ([_judged("burst", "aa", "inconclusive", "regression")] * 9
            + [_judged("burst", "aa", "regression", "regression")]
            + [_judged("lapse", "aa", "equivalent", "inconclusive")] * 10
            + [_judged("burst", 50, "regression", None)] * 3)
    result = calibrate.summarise({"rule": {}, "power_factor": 2.0, "per_run": runs}, p, scenarios)
    assert (result["aa"]["k"], result["aa"]["n"]) == (1, 20)  # pooled: what a claim about the set quotes
    burst, lapse = result["per_scenario"]["burst"], result["per_scenario"]["lapse"]
    assert (burst["aa"]["k"], burst["aa"]["n"], lapse["aa"]["k"], lapse["aa"]["n"]) == (1, 10, 0, 10)
    assert (burst["power_2x"]["k"], lapse["power_2x"]["k"], result["power_2x"]["n"]) == (10, 0, 20)
    assert [(s["delay_ms"], s["k"], s["n"]) for s in burst["shifts"]] == [(50, 3, 3)] and lapse["shifts"] == []
    assert [s["name"] for s in result["scenarios"]] == ["burst", "lapse"]
    assert result["aa"]["detectable_regression"] is None  # runs judged before it was kept
    with pytest.raises(ConfigError, match="--scenario lapse"):  # archives of a scenario not named
        calibrate.summarise({"rule": {}, "power_factor": 2.0, "per_run": runs}, p, scenarios[:1])


def test_a_planted_2x_doubles_a_latency_and_a_side_s_share():
    import numpy as np

    from spark.calibration import planted

    def values(cycles):
        return [c.tolist() for c in cycles]

    assert values(planted([np.array([10.0, 20.0]), np.array([5.0])], "median")) == [[20.0, 40.0], [10.0]]
    share = planted([np.array([1.0, 0.0, 0.0]), np.array([1.0, 0.0, 0.0])], "share")
    assert [len(c) for c in share] == [3, 3] and np.concatenate(share).mean() == 2 * 2 / 6
    # Cycles of one retry each (v2-whole-poll): no cycle can be doubled alone, the side's share is.
    ones = planted([np.array([v]) for v in (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0)], "share")
    assert sum(c.sum() for c in ones) == 4 and [len(c) for c in ones] == [1] * 8
    assert values(planted([np.array([1.0, 1.0]), np.array([0.0])], "share")) == [[1.0, 1.0], [1.0]]  # capped
    assert values(planted([np.array([0.0, 0.0])], "share")) == [[0.0, 0.0]]  # nothing to double
    assert planted([], "share") == []
    # The level compared is the mean of the cycles' shares (spark.stats): doubled as such whatever their sizes.
    uneven = [np.array([0.0]), np.r_[np.ones(10), np.zeros(90)], np.array([1.0, 0.0, 0.0, 0.0])]
    before = np.mean([c.mean() for c in uneven])
    after = np.mean([c.mean() for c in planted(uneven, "share")])
    assert abs(after - 2 * before) <= 0.5 / 100 + 1e-9 and [len(c) for c in planted(uneven, "share")] == [1, 100, 4]


def test_each_scenario_says_how_large_a_regression_one_run_detects_and_mixed_effects_are_not_pooled():
    from harness.inputs.catalogue import load_scenario

    def run(scenario: str, statistic: str, above: float) -> dict:
        r = _judged(scenario, "aa", "inconclusive", "regression")
        return {**r, "primary": {**r["primary"], "statistic": statistic, "detectable": [None, above]}}

    scenarios = [load_scenario("burst"), load_scenario("v2-whole-poll")]
    p = calibrate.plan(load_variants()["patched"], [50])
    runs = [run("burst", "median", d) for d in (1.5, 2.0, 3.0)] + [run("v2-whole-poll", "share", 0.3)] * 2
    result = calibrate.summarise({"rule": {}, "power_factor": 2.0, "per_run": runs}, p, scenarios)
    assert result["per_scenario"]["burst"]["aa"]["detectable_regression"] == {"median": 2.0, "runs": 3,
                                                                             "effect": "ratio"}
    assert result["per_scenario"]["v2-whole-poll"]["aa"]["detectable_regression"]["effect"] == "difference"
    assert result["aa"]["detectable_regression"] is None
