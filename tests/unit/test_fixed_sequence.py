"""spark.comparison.analyse on samples made by hand: a scenario's family is tested in a fixed sequence (the
primary alone at alpha, the secondary metrics only once it was significant), and a variant the time cap
stopped short of cycles.at_least is said so."""

import numpy as np
import pandas as pd
import pytest

from harness.contracts.verdict import EQUIVALENT, INCONCLUSIVE, REGRESSION, VerdictRule
from harness.inputs.catalogue import load_scenario
from spark.comparison import Collected, analyse
from tests.unit.by_hand import collected

RULE = VerdictRule(bootstrap=300)
LEDGER = {"lost": 0, "never_received": 0, "retries_never_redelivered": 0, "duplicated": 0, "cross_topic": 0,
          "duplicate_deliveries": 0}


def _at_levels(levels: dict[tuple[str, str], list[float]], cycles: dict[str, int] | None = None,
               scenario: str = "burst", ledgers: dict[str, dict] | None = None) -> Collected:
    """One run of ``scenario``; ``levels``: (variant, metric) -> each cycle's values (8 retries at that level)."""
    rows = [{"scenario": scenario, "variant": v, "run_id": "r1", "cycle": k, "metric": m, "value": x}
            for (v, m), per_cycle in levels.items() for k, level in enumerate(per_cycle) for x in [level] * 8]
    variants = sorted({v for v, _ in levels} | set(ledgers or {}))
    per_variant = [{"scenario": scenario, "variant": v, "runs": 1, "cycles": (cycles or {}).get(v, 20),
                    "sent": 320, "errors": 0, "ledger": {**LEDGER, **(ledgers or {}).get(v, {})}} for v in variants]
    samples = pd.DataFrame(rows, columns=["scenario", "variant", "run_id", "cycle", "metric", "value"])
    return collected(scenarios={scenario: load_scenario(scenario)}, per_variant=per_variant, samples=samples)


def _by_metric(summary: dict) -> dict[str, dict]:
    return {x["metric"]: x for x in summary["comparisons"]}


def test_secondary_metrics_are_not_tested_while_the_primary_is_not_significant():
    rng = np.random.default_rng(3)
    same = {(v, "wakeup_ms"): list(10 + rng.normal(0, 1, 10)) for v in ("a", "b")}
    # The secondary metric is far slower on b, but the primary (wakeup) does not move: no test, no verdict.
    slow = {("a", "redelivery_ms"): [1000.0] * 10, ("b", "redelivery_ms"): [5000.0] * 10}
    summary = analyse(_at_levels({**same, **slow}), "a", "b", RULE)
    by = _by_metric(summary)
    assert by["wakeup_ms"]["primary"] and by["wakeup_ms"]["tested"]
    assert by["wakeup_ms"]["verdict"] in (EQUIVALENT, INCONCLUSIVE)
    assert not by["redelivery_ms"]["tested"] and by["redelivery_ms"]["p_adjusted"] is None
    assert by["redelivery_ms"]["verdict"] == INCONCLUSIVE and "not tested: wakeup_ms" in by["redelivery_ms"]["reason"]
    assert summary["family"] == {"burst": 1} and summary["verdict"] != REGRESSION


def test_a_significant_primary_opens_the_secondary_metrics_to_holm_among_themselves():
    slow = {("a", "wakeup_ms"): [10.0 + k for k in range(10)], ("b", "wakeup_ms"): [100.0 + k for k in range(10)],
            ("a", "redelivery_ms"): [1000.0 + k for k in range(10)],
            ("b", "redelivery_ms"): [3000.0 + k for k in range(10)]}
    summary = analyse(_at_levels(slow), "a", "b", RULE)
    by = _by_metric(summary)
    # The primary alone at alpha: its exact p (10 vs 10 cycles, fully separated) is 2 / C(20, 10), unadjusted.
    assert by["wakeup_ms"]["p_adjusted"] == pytest.approx(2 / 184_756)
    assert by["wakeup_ms"]["verdict"] == REGRESSION
    assert by["redelivery_ms"]["tested"] and by["redelivery_ms"]["verdict"] == REGRESSION
    assert summary["family"] == {"burst": 2} and summary["verdict"] == REGRESSION


def test_four_cycles_a_side_reach_the_level_when_the_primary_stands_alone():
    # 4 vs 4 fully separated: 2 / C(8, 4) = 0.029 < 0.05; Holm over two comparisons would have needed 0.025.
    four = {("a", "wakeup_ms"): [10.0, 11.0, 12.0, 13.0], ("b", "wakeup_ms"): [100.0, 101.0, 102.0, 103.0]}
    by = _by_metric(analyse(_at_levels(four, cycles={"a": 4, "b": 4}), "a", "b", RULE))
    assert by["wakeup_ms"]["p_adjusted"] == pytest.approx(2 / 70)
    assert by["wakeup_ms"]["verdict"] == REGRESSION


def test_a_variant_the_cap_stopped_short_of_its_cycles_is_said_so():
    levels = {(v, "wakeup_ms"): [10.0 + k for k in range(5)] for v in ("a", "b")}
    by = _by_metric(analyse(_at_levels(levels, cycles={"a": 5, "b": 12}), "a", "b", RULE))
    sc = load_scenario("burst")
    assert sc.cycles.at_least > 5, "burst asks for more cycles than this run had"
    assert f"a ran 5 of {sc.cycles.at_least} cycles ({sc.cycles.at_least} a run" in by["wakeup_ms"]["reason"]
    assert "b ran" not in by["wakeup_ms"]["reason"]


@pytest.mark.parametrize(("base_dup", "cand_dup", "verdict"), [
    (3, 3, EQUIVALENT),      # the same duplicates (#9583 on both): nothing worse
    (3, 6, INCONCLUSIVE),    # more of what the baseline also has: less complete, not a loss it never had
    (0, 2, REGRESSION),      # duplicates the baseline never made
])
def test_a_scenario_without_retries_is_judged_by_its_ledger(base_dup, cand_dup, verdict):
    assert not load_scenario("ack-after-extend").retries_expected
    c = _at_levels({}, scenario="ack-after-extend", ledgers={"a": {"duplicated": base_dup},
                                                             "b": {"duplicated": cand_dup}})
    summary = analyse(c, "a", "b", RULE)
    primary = next(x for x in summary["comparisons"] if x["primary"])
    assert primary["verdict"] == verdict and summary["verdict"] == verdict
    assert verdict == REGRESSION or "no retries by design" in primary["reason"]
