import numpy as np
import pytest

from spark.stats import IMPROVEMENT, NO_CHANGE, REGRESSION, VerdictRule, compare

RULE = VerdictRule(bootstrap=500)


def test_seconds_to_milliseconds_is_an_improvement():
    rng = np.random.default_rng(1)
    base = rng.uniform(14_000, 20_000, 64)
    cand = rng.exponential(30, 64)
    r = compare(base, cand, RULE)
    assert r["verdict"] == IMPROVEMENT
    assert r["p_value"] < 1e-10 and r["ci95"][1] < 0.01
    assert r["rank_biserial"] == pytest.approx(-1.0)
    assert r["ratio_of_medians"] == pytest.approx(np.median(cand) / np.median(base))


def test_slower_candidate_is_a_regression():
    rng = np.random.default_rng(2)
    r = compare(rng.normal(100, 5, 200), rng.normal(150, 5, 200), RULE)
    assert r["verdict"] == REGRESSION and r["ci95"][0] > 1.1


def test_same_distribution_is_no_change():
    rng = np.random.default_rng(3)
    r = compare(rng.normal(100, 10, 300), rng.normal(100, 10, 300), RULE)
    assert r["verdict"] == NO_CHANGE


def test_small_but_significant_effect_inside_the_margin_is_no_change():
    rng = np.random.default_rng(4)
    r = compare(rng.normal(100, 1, 2000), rng.normal(97, 1, 2000), RULE)
    assert r["p_value"] < 0.05 and r["verdict"] == NO_CHANGE and r["reason"] == "effect within the margin"


def test_too_few_samples():
    r = compare(np.array([1.0, 2.0]), np.array([1.0, 2.0, 3.0, 4.0, 5.0]), RULE)
    assert r["verdict"] == NO_CHANGE and "fewer than" in r["reason"]


def test_the_rule_is_stated():
    assert "p < 0.05" in RULE.describe() and "0.9" in RULE.describe()
