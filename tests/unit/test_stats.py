import numpy as np
import pytest

from harness.contracts.verdict import (
    COMPARED,
    EQUIVALENT,
    IMPROVEMENT,
    INCONCLUSIVE,
    NOT_ENOUGH,
    REGRESSION,
    SHARE,
    STATISTIC,
    VerdictRule,
)
from spark.stats import (
    compare,
    completeness,
    cycles_needed,
    decide,
    holm,
    min_p_value,
    overall,
    rank_sum_test,
    stratified_rank_sum_test,
    tarone,
)

RULE = VerdictRule(bootstrap=400)


def _runs(rng, draw, cycles=8, runs=1, per_cycle=32):
    return [[draw(rng, per_cycle) for _ in range(cycles)] for _ in range(runs)]


def _verdict(base, cand, rule=RULE, family=1):
    r = compare(base, cand, rule)
    return r, decide(r, r["p_value"], family, rule)


def test_seconds_to_milliseconds_is_an_improvement_counted_in_cycles():
    rng = np.random.default_rng(1)
    r, (verdict, _) = _verdict(_runs(rng, lambda g, n: g.uniform(14_000, 20_000, n), cycles=5),
                               _runs(rng, lambda g, n: g.exponential(30, n), cycles=12))
    assert verdict == IMPROVEMENT
    assert (r["unit"], r["n_baseline"], r["n_candidate"], r["retries_candidate"]) == ("cycle", 5, 12, 12 * 32)
    assert r["p_value"] == pytest.approx(min_p_value(5, 12))  # full separation: the exact test's floor
    assert r["rank_biserial"] == pytest.approx(-1.0) and r["ci"][1] < 0.01


def test_a_burst_is_one_sample_however_many_retries_it_has():
    # 1000 retries in one cycle each side: as much evidence as one cycle, which is none.
    rng = np.random.default_rng(2)
    r, (verdict, reason) = _verdict([[rng.normal(100, 5, 1000)]], [[rng.normal(300, 5, 1000)]])
    assert verdict == NOT_ENOUGH and "1/1 cycles" in reason and r["p_value"] == 1.0


def test_stalls_are_judged_by_their_share_where_a_median_says_nothing():
    # Each retry of a cycle stalls with probability 0.4 on the baseline, never on the candidate: every
    # cycle's median is 0 on both sides (most retries did not stall), its share is not.
    rng = np.random.default_rng(5)
    base = _runs(rng, lambda g, n: (g.random(n) < 0.4).astype(float), cycles=12, per_cycle=5)
    cand = _runs(rng, lambda g, n: np.zeros(n), cycles=12, per_cycle=5)
    by_median, by_share = compare(base, cand, RULE), compare(base, cand, RULE, SHARE)
    assert by_share["statistic"] == "share" and by_share["median_candidate"] == 0.0
    assert by_share["median_baseline"] == pytest.approx(np.mean([np.mean(c) for c in base[0]]))
    # the difference of shares, candidate - baseline: about 40 points fewer stalled
    assert by_share["effect"] == "difference" and by_share["ci"][1] < -RULE.share_margin
    assert decide(by_share, by_share["p_value"], 1, RULE)[0] == IMPROVEMENT
    assert decide(by_median, by_median["p_value"], 1, RULE)[0] != IMPROVEMENT
    # The same shares on both sides are no change.
    same = _runs(rng, lambda g, n: (g.random(n) < 0.4).astype(float), cycles=12, per_cycle=5)
    r = compare(base, same, RULE, SHARE)
    # (12 cycles of 5 retries cannot pin a share to within 5 points: not "equivalent", only "inconclusive")
    verdict, why = decide(r, r["p_value"], 1, RULE)
    assert verdict == INCONCLUSIVE and why.startswith("not significant, interval reaches past the margin; could have "
                                                      "seen a difference below -0.")


def test_every_compared_metric_has_a_statistic_and_the_scenarios_verdict_metrics_are_them():
    from typing import get_args

    from harness.inputs.scenario import Scenario

    verdict_metrics = get_args(Scenario.model_fields["verdict_metric"].annotation)
    assert set(verdict_metrics) == set(STATISTIC) and set(COMPARED) <= set(STATISTIC)


def test_slower_candidate_is_a_regression():
    rng = np.random.default_rng(3)
    _, (verdict, _) = _verdict(_runs(rng, lambda g, n: g.normal(100, 5, n)),
                               _runs(rng, lambda g, n: g.normal(150, 5, n)))
    assert verdict == REGRESSION


def test_same_distribution_is_no_change():
    rng = np.random.default_rng(4)
    _, (verdict, _) = _verdict(_runs(rng, lambda g, n: g.normal(100, 10, n), cycles=20),
                               _runs(rng, lambda g, n: g.normal(100, 10, n), cycles=20))
    assert verdict == EQUIVALENT


def test_significant_effect_inside_the_margin_is_no_change():
    rng = np.random.default_rng(5)
    r, (verdict, reason) = _verdict(_runs(rng, lambda g, n: g.normal(100, 1, n), cycles=30),
                                    _runs(rng, lambda g, n: g.normal(97, 1, n), cycles=30))
    assert r["p_value"] < 0.05 and verdict == EQUIVALENT
    assert reason.startswith("effect within the margin; could have seen a ratio below 0.") and "(80% power)" in reason


def test_retries_that_never_came_back_are_endless_waits():
    rng = np.random.default_rng(6)
    base = _runs(rng, lambda g, n: g.exponential(40, n), cycles=10)
    # Fast when it delivers, but most retries of every cycle never come back.
    fast = _runs(rng, lambda g, n: g.exponential(4, n), cycles=10)
    cand = [[np.concatenate([c[:5], np.full(27, np.inf)]) for c in run] for run in fast]
    r, (verdict, _) = _verdict(base, cand)
    assert r["median_candidate"] == np.inf and verdict == REGRESSION


def test_the_interval_follows_alpha():
    rng = np.random.default_rng(7)
    base = _runs(rng, lambda g, n: g.normal(100, 20, n), cycles=10)
    cand = _runs(rng, lambda g, n: g.normal(110, 20, n), cycles=10)
    wide = compare(base, cand, VerdictRule(alpha=0.01, bootstrap=400))["ci"]
    narrow = compare(base, cand, VerdictRule(alpha=0.2, bootstrap=400))["ci"]
    assert wide[0] < narrow[0] < narrow[1] < wide[1]
    assert "99% hierarchical" in VerdictRule(alpha=0.01).describe()


def test_the_bootstrap_interval_widens_with_run_to_run_variation():
    # Same cycles, but spread over runs whose levels differ: the hierarchical interval must see it.
    rng = np.random.default_rng(8)
    base = _runs(rng, lambda g, n: g.normal(100, 5, n), cycles=4, runs=4)
    steady = _runs(rng, lambda g, n: g.normal(100, 5, n), cycles=4, runs=4)
    shifty = [[c * f for c in run] for run, f in zip(_runs(rng, lambda g, n: g.normal(100, 5, n), cycles=4, runs=4),
                                                    (0.6, 0.9, 1.1, 1.5), strict=True)]
    a, b = compare(base, steady, RULE)["ci"], compare(base, shifty, RULE)["ci"]
    assert b[1] - b[0] > 2 * (a[1] - a[0])


def test_holm_adjusts_in_order_and_keeps_monotone():
    assert holm([0.01, 0.04, None, 0.03]) == pytest.approx([0.03, 0.06, None, 0.06])
    assert holm([]) == []


def test_cycles_needed_reaches_alpha_and_one_fewer_does_not():
    for alpha in (0.05, 0.025, 0.01, 0.001):
        n = cycles_needed(alpha)
        assert min_p_value(n, n) < alpha <= min_p_value(n - 1, n - 1)
    assert decide({"n_baseline": 4, "n_candidate": 4, "ci": [0.1, 0.2]}, 0.03, 2, RULE)[0] == NOT_ENOUGH


def test_completeness_blocks_an_improvement_and_flags_losses():
    base = {"sent": 100, "never_received": 0, "retries_never_redelivered": 0, "duplicate_deliveries": 0, "errors": 0}
    assert completeness(base, dict(base)) == (None, [])
    assert completeness(base, {**base, "errors": 2})[0] == INCONCLUSIVE
    verdict, why = completeness(base, {**base, "retries_never_redelivered": 3})
    assert verdict == REGRESSION and why == ["retries never redelivered 3 vs 0"]
    for defect in ("lost", "duplicated", "cross_topic"):  # the ledger's defects are regressions as well
        assert completeness(base, {**base, defect: 1})[0] == REGRESSION
    # Fewer sends, same count: a higher rate is still worse.
    assert completeness({**base, "errors": 1}, {**base, "sent": 50, "errors": 1})[0] == INCONCLUSIVE


def test_overall_verdict():
    imp = {"primary": True, "verdict": IMPROVEMENT}
    assert overall([imp, {"primary": False, "verdict": INCONCLUSIVE}], {"s": (None, [])}) == IMPROVEMENT
    assert overall([imp, {"primary": False, "verdict": REGRESSION}], {"s": (None, [])}) == REGRESSION
    assert overall([imp], {"s": (REGRESSION, ["x"])}) == REGRESSION
    assert overall([{"primary": True, "verdict": NOT_ENOUGH}], {}) == NOT_ENOUGH


def test_the_rule_is_stated():
    text = RULE.describe()
    assert "unit: the cycle" in text and "Holm" in text and "0.9" in text and "95%" in text


@pytest.mark.parametrize(("cand", "base", "p"), [
    # all tied within a side, the sides apart: the one arrangement of each tail of C(n, k)
    (np.zeros(5), np.ones(5), 2 / 252),
    (np.zeros(15), np.ones(5), 2 / 15504),
    (np.ones(5), np.zeros(15), 2 / 15504),
    (np.zeros(3), np.ones(3), 2 / 20),
    # the stall share: a zero-stall candidate against a baseline with some stall-free cycles. Ranks: the 7
    # zeros share 4, the three 0.4s 9, the two 0.6s 11.5; the tail P(S <= 16) takes the 4 candidates among
    # the zeros: C(7, 4) / C(12, 4) = 35/495.
    (np.zeros(4), np.array([0, 0, 0, 0.4, 0.4, 0.4, 0.6, 0.6]), 2 * 35 / 495),
    (np.zeros(5), np.zeros(5), 1.0),  # nothing to tell apart
])
def test_ties_give_the_exact_permutation_p_value_never_below_it(cand, base, p):
    exact, floor = rank_sum_test(cand, base)
    assert exact == pytest.approx(p, rel=1e-9)
    assert floor <= exact
    # scipy's normal approximation goes below it (the defect this replaces)
    if 0 < p < 1:
        from scipy.stats import mannwhitneyu

        assert mannwhitneyu(cand, base, method="asymptotic").pvalue < p


def test_without_ties_the_exact_test_is_scipys():
    from scipy.stats import mannwhitneyu

    rng = np.random.default_rng(11)
    for n1, n2 in ((5, 12), (8, 8), (3, 40), (20, 30)):
        x, y = rng.normal(0, 1, n1), rng.normal(0.8, 1, n2)
        p, floor = rank_sum_test(x, y)
        assert p == pytest.approx(mannwhitneyu(x, y, method="exact").pvalue, rel=1e-9)
        assert floor == pytest.approx(min_p_value(n1, n2), rel=1e-9)


def test_ties_that_cannot_reach_the_level_are_not_enough_data():
    # 6 cycles a side would do without ties (2/924); with 5 of 6 candidate shares tied to the baseline's
    # zeros no arrangement gets below 0.05.
    cand, base = np.array([0, 0, 0, 0, 0, 1.0]), np.array([0, 0, 0, 0, 0, 0.5])
    p, floor = rank_sum_test(cand, base)
    assert floor > 0.05
    r = {"n_baseline": 6, "n_candidate": 6, "ci": [0.0, 0.0], "p_floor": floor}
    verdict, reason = decide(r, p, 1, RULE)
    assert verdict == NOT_ENOUGH and "smallest possible p" in reason


def test_a_zero_stall_baseline_is_judged_by_the_difference_of_shares():
    # The ratio would be [inf, inf] and clear any margin; the difference says how many points more stalled.
    rng = np.random.default_rng(12)
    base = _runs(rng, lambda g, n: np.zeros(n), cycles=12, per_cycle=8)
    worse = _runs(rng, lambda g, n: (g.random(n) < 0.5).astype(float), cycles=12, per_cycle=8)
    slightly = [[np.where(np.arange(c.size) == 0, 1.0, 0.0) if i == 0 else c for i, c in enumerate(run)]
                for run in _runs(rng, lambda g, n: np.zeros(n), cycles=12, per_cycle=8)]
    r = compare(base, worse, RULE, SHARE)
    assert r["effect"] == "difference" and r["difference"] == pytest.approx(r["median_candidate"])
    assert r["ci"][0] > RULE.share_margin and decide(r, r["p_value"], 1, RULE)[0] == REGRESSION
    r = compare(base, slightly, RULE, SHARE)  # one stalled retry of 96: 1 point, inside the 5-point margin
    assert 0 <= r["ci"][0] <= r["ci"][1] <= RULE.share_margin
    assert decide(r, r["p_value"], 1, RULE)[0] == EQUIVALENT


def test_the_margin_is_symmetric_on_the_log_scale():
    low, high = RULE.margin("ratio")
    assert low * high == pytest.approx(1.0) and high == pytest.approx(1 + RULE.min_effect)
    r = {"n_baseline": 20, "n_candidate": 20, "effect": "ratio", "p_floor": 1e-9}
    # a candidate 1.1x faster counts as one 1.1x slower does: 0.905 is below 1/1.1 (0.909), an improvement (the
    # bound was 0.9, which asked more of a faster build than of a slower one)
    assert decide({**r, "ci": [0.85, 0.905]}, 0.001, 1, RULE)[0] == IMPROVEMENT
    assert decide({**r, "ci": [0.91, 0.95]}, 0.001, 1, RULE)[0] == EQUIVALENT
    assert decide({**r, "ci": [0.80, 0.95]}, 0.001, 1, RULE) == (
        INCONCLUSIVE, "significant, interval reaches past the margin; the change these cycles could detect cannot be "
                      "sized (endless or zero levels in the bootstrap)")


def test_comparisons_that_cannot_reach_the_level_leave_the_family_before_testing():
    # Three comparisons: two with floors far below alpha, one whose ties keep it above alpha / 2.
    assert tarone([1e-5, 1e-4, 0.04], 0.05) == [True, True, False]
    # Holm over the two tested is then alpha / 2 for the smaller, not alpha / 3.
    assert tarone([1e-5, 1e-4, 1e-3], 0.05) == [True, True, True]
    assert tarone([0.2, 0.5], 0.05) == [False, False]  # none can
    assert tarone([None, 1e-5], 0.05) == [False, True]  # no data is never tested
    r = {"n_baseline": 6, "n_candidate": 6, "ci": [0.5, 2.0], "p_floor": 0.04, "effect": "ratio"}
    verdict, reason = decide(r, None, 2, RULE, tested=False)
    assert verdict == NOT_ENOUGH and "left out of the family" in reason


def test_the_test_stratified_by_run_is_the_rank_sum_test_within_one_run():
    rng = np.random.default_rng(21)
    x, y = rng.normal(0, 1, 6), rng.normal(1, 1, 9)
    assert stratified_rank_sum_test([(x, y)]) == pytest.approx(rank_sum_test(x, y))
    assert stratified_rank_sum_test([(y, x)]) == pytest.approx(rank_sum_test(y, x))  # the larger side first
    # Two runs, each wholly separated, 5 vs 5: the extremes of the convolved distribution, (1/252)^2 a tail.
    sep = [(np.arange(5.0), np.arange(5.0) + 10), (np.arange(5.0) + 100, np.arange(5.0) + 110)]
    assert stratified_rank_sum_test(sep) == pytest.approx((2 / 252**2, 2 / 252**2))
    assert stratified_rank_sum_test([(np.array([]), np.ones(3))]) == (1.0, 1.0)  # nothing to compare


def test_a_level_both_variants_of_a_run_share_does_not_make_a_difference():
    # Run A is a fast instance, run B a slow one, for both variants alike; the candidate has most of its cycles
    # in B, the baseline most of its in A. Pooled, the candidate looks slower; run by run it is the same.
    rng = np.random.default_rng(22)
    a_base, a_cand = rng.normal(100, 5, 8), rng.normal(100, 5, 2)
    b_base, b_cand = rng.normal(200, 5, 2), rng.normal(200, 5, 8)
    pooled, _ = rank_sum_test(np.concatenate([a_cand, b_cand]), np.concatenate([a_base, b_base]))
    stratified, _ = stratified_rank_sum_test([(a_cand, a_base), (b_cand, b_base)])
    assert pooled < 0.05 < stratified


def test_sides_from_the_same_runs_are_compared_run_by_run_and_others_are_flagged():
    rng = np.random.default_rng(23)
    # Three runs whose levels differ (instances), both variants alike in each: no difference run by run.
    base = [[rng.normal(m, 3, 16) for _ in range(5)] for m in (100, 140, 180)]
    cand = [[rng.normal(m, 3, 16) for _ in range(5)] for m in (100, 140, 180)]
    ids = ["r1", "r2", "r3"]
    paired = compare(base, cand, RULE, runs=(ids, ids))
    assert paired["paired"] is True
    strata = [(np.array([np.median(c) for c in cr]), np.array([np.median(c) for c in br]))
              for br, cr in zip(base, cand, strict=True)]
    assert paired["p_value"] == pytest.approx(stratified_rank_sum_test(strata)[0])
    # The paired interval does not carry the runs' spread: it is narrower than the pooled one.
    pooled = compare(base, cand, RULE)
    assert pooled["paired"] is None
    assert paired["ci"][1] - paired["ci"][0] < pooled["ci"][1] - pooled["ci"][0]
    assert compare(base, cand, RULE, runs=(ids, ["s1", "s2", "s3"]))["paired"] is False  # a sweep's batches
    assert compare(base[:1], cand[:1], RULE, runs=(["r1"], ["r1"]))["paired"] is None  # one run: nothing to pair


ONE_SIDED = VerdictRule(bootstrap=400, one_sided=True)


def test_one_sided_the_p_value_is_the_upper_tail_exact_also_with_ties():
    low, high = np.array([1.0, 2.0, 3.0, 4.0]), np.array([11.0, 12.0, 13.0, 14.0])
    assert rank_sum_test(high, low, "greater") == pytest.approx((1 / 70, 1 / 70))
    assert rank_sum_test(low, high, "greater")[0] == pytest.approx(1.0)
    # Tied within each side (5 vs 5): the one-sided exact p is 1 / C(10, 5), half the two-sided 2 / 252.
    assert rank_sum_test(np.full(5, 3.0), np.full(5, 1.0), "greater") == pytest.approx((1 / 252, 1 / 252))
    # Stratified by run: two runs of 3 vs 3 fully separated, 1/20 each, so 1/400 together.
    runs = [(np.array([10.0, 11.0, 12.0]), np.array([1.0, 2.0, 3.0]))] * 2
    assert stratified_rank_sum_test(runs, "greater")[0] == pytest.approx(1 / 400)


def test_a_regression_gate_calls_a_slower_candidate_a_regression_and_claims_no_improvement():
    rng = np.random.default_rng(11)
    base = _runs(rng, lambda r, n: r.normal(100, 5, n), cycles=4)
    slow = _runs(rng, lambda r, n: r.normal(300, 5, n), cycles=4)
    fast = _runs(rng, lambda r, n: r.normal(30, 5, n), cycles=4)
    r, (verdict, _) = _verdict(base, slow, rule=ONE_SIDED)
    assert verdict == REGRESSION and r["p_value"] == pytest.approx(1 / 70)  # two-sided it would be 2/70
    r, (verdict, reason) = _verdict(base, fast, rule=ONE_SIDED)
    assert verdict == INCONCLUSIVE and "one side only" in reason and r["p_value"] == pytest.approx(1.0)
    # Three cycles a side cannot reach 0.05 even one-sided (1/20 is not below it): 4 are needed.
    r, (verdict, reason) = _verdict(*[_runs(rng, lambda r, n: r.normal(100, 5, n), cycles=3)] * 2, rule=ONE_SIDED)
    assert verdict == NOT_ENOUGH and "at least 4 per side" in reason


def test_the_gate_option_makes_the_rule_one_sided_and_says_so():
    import argparse

    from harness.contracts.verdict import add_gate_option, add_rule_options

    p = argparse.ArgumentParser()
    add_rule_options(p)
    add_gate_option(p)
    rule = VerdictRule.from_args(p.parse_args(["--fail-on-regression"]))
    assert rule.one_sided and rule.level == pytest.approx(0.90) and "--one-sided" in rule.as_args()
    assert VerdictRule.from_args(p.parse_args(rule.as_args())) == rule
    assert not VerdictRule.from_args(p.parse_args([])).one_sided and RULE.level == pytest.approx(0.95)
    assert "one-sided" in rule.describe()


def test_pairing_is_over_the_runs_both_sides_have():
    rng = np.random.default_rng(5)
    base = _runs(rng, lambda r, n: r.normal(100, 5, n), cycles=4, runs=3)
    cand = _runs(rng, lambda r, n: r.normal(100, 5, n), cycles=4, runs=2)
    r = compare(base, cand, RULE, runs=(["r1", "r2", "r3"], ["r1", "r3"]))
    assert r["paired"] is True and r["runs_baseline"] == 2 and r["n_baseline"] == 12  # level over all 12 cycles
    assert compare(base, [], RULE, runs=(["r1", "r2", "r3"], []))["paired"] is None  # a side without values
    assert compare(base, cand, RULE, runs=(["r1", "r2", "r3"], ["r4", "r5"]))["paired"] is False


def test_a_gate_whose_data_go_the_other_way_is_not_stopped_by_the_ties_of_the_wrong_tail():
    # v2-whole-poll on the fix: the baseline stalls a third of its one-message cycles, the candidate none. The
    # upper tail cannot reach 0.05 (its floor is the chance the candidate held every stall: ties), yet the
    # interval says the candidate is lower: no regression, and not "not enough data".
    base = [[np.array([1.0 if k % 3 == 0 else 0.0]) for k in range(19)]]
    cand = [[np.array([0.0]) for _ in range(57)]]
    r = compare(base, cand, ONE_SIDED, statistic=SHARE)
    assert r["p_floor"] >= 0.05 and r["ci"][1] < -0.05
    verdict, reason = decide(r, r["p_value"], 1, ONE_SIDED)
    assert verdict == INCONCLUSIVE and "one side only" in reason


def test_the_detectable_change_lies_beyond_the_margin_by_the_spread_the_draws_show():
    from spark.power import detectable_change, detectable_phrase

    z = 1.959964 + 0.841621  # two-sided 95% interval's end, and 80% power
    draws = np.exp(np.random.default_rng(1).normal(0.0, 0.1, 20_000))
    below, above = detectable_change(draws, RULE)
    assert above == pytest.approx(1.1 * np.exp(z * 0.1), rel=0.02)
    assert below == pytest.approx(np.exp(-z * 0.1) / 1.1, rel=0.02)
    # Wider spread, larger change needed; a gate tests regressions only; shares by points.
    assert detectable_change(draws ** 2, RULE)[1] > above
    assert detectable_change(draws, VerdictRule(one_sided=True))[0] is None
    shares = np.random.default_rng(2).normal(0.0, 0.02, 20_000)
    assert detectable_change(shares, RULE, "difference")[1] == pytest.approx(0.05 + z * 0.02, rel=0.02)
    # An endless level in a draw (inf) or too few draws: no size, and the phrase says why.
    assert detectable_change(np.append(draws, np.inf), RULE) is None and detectable_change(None, RULE) is None
    assert detectable_phrase({"effect": "ratio", "detectable": [0.62, 1.61]}, RULE) == (
        "could have seen a ratio below 0.62 or above 1.61 (80% power)")
    assert detectable_phrase({"effect": "difference", "detectable": [None, 0.09]}, RULE) == (
        "could have seen a difference above +0.09 (80% power)")


def test_a_candidate_as_far_off_as_the_detectable_change_is_called_a_regression_about_that_often():
    """The stated change is what the rule would catch with POWER (80%): candidates drawn that far from the
    baseline's spread are called regressions in most trials, and one at the margin rarely (seeded: the same
    trials every time)."""
    rule = VerdictRule(bootstrap=150)

    def side(g: np.random.Generator, scale: float) -> list[list[np.ndarray]]:
        return [[g.lognormal(np.log(100 * scale), 0.3, 6) for _ in range(12)]]

    probe = compare(side(np.random.default_rng(7), 1.0), side(np.random.default_rng(8), 1.0), rule)
    far = probe["detectable"][1]
    caught = {scale: 0 for scale in (1.0, far)}
    for trial in range(16):
        for scale in caught:
            g = np.random.default_rng(1000 + trial)
            r = compare(side(g, 1.0), side(g, scale), rule)
            caught[scale] += decide(r, r["p_value"], 1, rule)[0] == REGRESSION
    assert caught[1.0] <= 1 and caught[far] >= 10, (far, caught)


def test_the_flat_bootstrap_draw_has_the_hierarchical_draws_distribution():
    """spark.bootstrap.BootstrapSide draws runs, then cycles in each, then values in each cycle, with
    replacement, as the per-cycle loop it replaced did (kept here as the reference): the same distribution of
    levels, and the same medians of ties and endless waits."""
    from spark.bootstrap import BootstrapSide as _Side

    def reference(runs, rng, agg):
        stats = []
        for r in rng.integers(0, len(runs), len(runs)):
            for c in rng.integers(0, len(runs[r]), len(runs[r])):
                values = runs[r][c]
                stats.append(agg(values[rng.integers(0, values.size, values.size)]))
        return float(agg(stats))

    gen = np.random.default_rng(7)
    runs = [[gen.exponential(30, gen.integers(1, 40)) for _ in range(gen.integers(3, 12))] for _ in range(4)]
    for statistic, agg in (("median", np.median), ("share", np.mean)):
        data = runs if statistic == "median" else [[(c > 30).astype(float) for c in run] for run in runs]
        side, rng_a, rng_b = _Side(data), np.random.default_rng(1), np.random.default_rng(2)
        flat = np.array([side.draw(rng_a, statistic) for _ in range(3000)])
        loop = np.array([reference(data, rng_b, agg) for _ in range(3000)])
        # Within Monte Carlo error of 3,000 draws each (seeded: the same every time); a draw that skipped a level
        # of the hierarchy would move the spread far more.
        for q in (0.05, 0.5, 0.95):
            assert abs(np.quantile(flat, q) - np.quantile(loop, q)) <= 0.25 * np.std(loop), (statistic, q)
        assert 0.9 < np.std(flat) / np.std(loop) < 1.1, statistic
    # Every draw of a side whose values are all alike is that value; an endless wait in a cycle's middle is endless.
    assert _Side([[np.full(5, 4.0), np.full(2, 4.0)]]).draw(np.random.default_rng(0)) == 4.0
    assert _Side([[np.array([np.inf, np.inf, 1.0])]]).draw(np.random.default_rng(3)) in (1.0, np.inf)
    assert _Side([[np.array([np.inf])], [np.array([np.inf])]]).draw(np.random.default_rng(3)) == np.inf


def test_draws_in_blocks_of_runs_with_unlike_cycles_have_the_single_draws_distribution(monkeypatch):
    """BootstrapSide.draws takes many draws at once, a block at a time: runs with unlike numbers of cycles (each
    draw's median found by sorting within it) and blocks of one draw or of many give the distribution of draws
    taken one at a time, for medians and shares; paired sides drawing the same runs stay paired."""
    import spark.bootstrap as bootstrap

    gen = np.random.default_rng(21)
    runs = [[gen.exponential(30, gen.integers(1, 30)) for _ in range(k)] for k in (2, 9, 4, 13)]
    for statistic in ("median", "share"):
        data = runs if statistic == "median" else [[(c > 30).astype(float) for c in run] for run in runs]
        side = bootstrap.BootstrapSide(data)
        single = np.array([side.draw(np.random.default_rng(i), statistic) for i in range(3000)])
        for block in (1, 200, 100_000):  # a draw a block; 7 draws a block; every draw in one block
            monkeypatch.setattr(bootstrap, "BLOCK_CYCLES", block)
            many = side.draws(np.random.default_rng(block), 3000, statistic)
            assert many.shape == (3000,)
            for q in (0.05, 0.5, 0.95):
                assert abs(np.quantile(many, q) - np.quantile(single, q)) <= 0.25 * np.std(single), (statistic, q)
            # (The spread of these levels, whose runs are drawn too, moves by up to 12 % between seeds.)
            assert 0.85 < np.std(many) / np.std(single) < 1.18, (statistic, block)
    # The same runs drawn for two copies of one side give the same levels: the runs are all that varies here.
    alike = bootstrap.BootstrapSide([[np.full(3, float(r))] for r in range(5)])
    drawn = alike.draw_runs(np.random.default_rng(0), 50)
    a = alike.draws(np.random.default_rng(1), 50, "median", drawn)
    b = alike.draws(np.random.default_rng(2), 50, "median", drawn)
    assert np.array_equal(a, b) and np.array_equal(a, np.median(drawn, axis=1))


def test_samples_grouped_once_are_each_sides_runs_of_cycles_in_order():
    """spark.comparison.grouped sorts the samples once into every side's runs of cycles: what filtering the
    samples for each side and grouping them by run and cycle gave (runs and cycles in order, a cycle's values in
    the samples' order)."""
    import pandas as pd

    from spark.comparison import grouped

    gen = np.random.default_rng(4)
    n = 2000
    samples = pd.DataFrame({"scenario": gen.choice(["burst", "lapse"], n), "variant": gen.choice(["a", "b"], n),
                            "metric": gen.choice(["wakeup_ms", "stalled"], n), "run_id": gen.choice(["r2", "r1"], n),
                            "cycle": gen.integers(0, 12, n), "value": gen.random(n)})
    got = grouped(samples)
    for (scenario, variant, metric), sub in samples.groupby(["scenario", "variant", "metric"]):
        want = {r: [g["value"].to_numpy() for _, g in run.groupby("cycle", sort=True)]
                for r, run in sub.groupby("run_id", sort=True)}
        side = got[(scenario, variant, metric)]
        assert list(side) == list(want) == sorted(want)
        assert all(len(side[r]) == len(want[r])
                   and all(np.array_equal(x, y) for x, y in zip(side[r], want[r], strict=True)) for r in want)
    assert grouped(samples.iloc[:0]) == {}


def test_samples_with_counts_are_grouped_and_levelled_as_their_values_one_a_row():
    """A row standing for ``count`` equal values (harness.contracts.verdict.SAMPLE_COUNT: the share metrics' 0s and
    1s, the endless wakeups) gives the sides and the history's cycle levels that its values one a row give."""
    import pandas as pd

    from harness.contracts.verdict import STATISTIC, per_value
    from spark.comparison import grouped
    from spark.history import cycle_levels

    gen = np.random.default_rng(5)
    n = 600
    samples = pd.DataFrame({"scenario": "burst", "variant": gen.choice(["a", "b"], n),
                            "metric": gen.choice(["wakeup_ms", "stalled", "lost"], n),
                            "run_id": gen.choice(["r1", "r2"], n),
                            "cycle": gen.integers(0, 9, n), "count": gen.integers(1, 5, n)})
    share = samples["metric"] != "wakeup_ms"
    samples["value"] = np.where(share, gen.integers(0, 2, n), np.where(gen.random(n) < 0.1, np.inf, gen.random(n)))
    every = per_value(samples)
    assert len(every) == samples["count"].sum() > len(samples) and "count" not in every
    got, want = grouped(samples), grouped(every)
    assert got.keys() == want.keys()
    assert all(list(got[k]) == list(want[k]) and all(np.array_equal(x, y) for x, y in zip(
        [c for r in got[k].values() for c in r], [c for r in want[k].values() for c in r], strict=True)) for k in want)
    pd.testing.assert_frame_equal(cycle_levels(samples, STATISTIC), cycle_levels(every, STATISTIC))


def test_a_cycles_resampled_median_and_share_are_drawn_with_the_resamples_own_distribution():
    """spark.bootstrap.BootstrapSide draws a cycle's resampled median from the order statistics of uniforms
    and its share from a binomial, without drawing values: each outcome (a value, or the mean of two) as often
    as resampling gives it, for odd and even sizes, endless waits among the values."""
    from collections import Counter

    from spark.bootstrap import BootstrapSide as _Side

    gen = np.random.default_rng(11)
    for n in (2, 3, 8):  # even, odd, and an even size with an endless wait among its values
        values = np.round(gen.exponential(10.0, n), 1)
        values[-1] = np.inf if n == 8 else values[-1]
        side, rng, direct = _Side([[values]]), np.random.default_rng(n), np.random.default_rng(100 + n)
        drawn = Counter(side.draw(rng) for _ in range(10_000))
        resampled = Counter(float(np.median(values[direct.integers(0, n, n)])) for _ in range(10_000))
        gap = max(abs(drawn[o] - resampled[o]) / 10_000 for o in drawn.keys() | resampled.keys())
        assert gap < 0.025, (n, gap)  # seeded; about three standard errors of a frequency of 10,000 draws
    ones = np.array([1.0, 0.0, 0.0, 1.0, 0.0])
    side, rng = _Side([[ones]]), np.random.default_rng(5)
    draws = np.array([side.draw(rng, "share") for _ in range(10_000)])
    assert abs(draws.mean() - 0.4) < 0.01 and abs(draws.std() - np.sqrt(0.4 * 0.6 / 5)) < 0.01


def test_runs_without_values_on_one_side_are_left_out_of_the_pairing():
    """A run both sides ran, but where one side has no value of the metric, says nothing about the difference
    within it: the comparison pairs over the other runs, as it would without that run at all (it once stayed
    'paired' while the bootstrap silently dropped the run on one side only)."""
    gen = np.random.default_rng(3)
    base = [[gen.exponential(10, 8) for _ in range(5)] for _ in range(3)]
    cand = [[gen.exponential(12, 8) for _ in range(5)] for _ in range(2)] + [[np.array([])]]
    ids = ["r1", "r2", "r3"]
    with_empty = compare(base, cand, RULE, runs=(ids, ids))
    without = compare(base[:2], cand[:2], RULE, runs=(ids[:2], ids[:2]))
    assert with_empty["paired"] is True
    assert with_empty["ci"] == without["ci"] and with_empty["p_value"] == without["p_value"]


def test_row_medians_are_numpys_medians():
    """spark.bootstrap.row_medians (one partition a row) gives np.median's values, bit for bit, for rows of odd
    and even length, ties and endless waits among them."""
    from spark.bootstrap import row_medians

    gen = np.random.default_rng(9)
    for width in (1, 2, 3, 8, 11, 64):
        rows = np.round(gen.exponential(10.0, (200, width)), 0)
        rows[gen.random(rows.shape) < 0.2] = np.inf
        assert np.array_equal(row_medians(rows), np.median(rows, axis=1)), width
