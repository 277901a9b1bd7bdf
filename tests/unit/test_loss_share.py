"""A scenario whose defect is loss (subscription-mismatch) is judged by the share of owed messages lost per
cycle: spark.analysis.outcome_samples makes the values from the tallies, spark.comparison.analyse compares them
as a difference of shares, exact through their ties."""

import pandas as pd
import pytest

from harness.contracts.verdict import INCONCLUSIVE, NOT_ENOUGH, REGRESSION, VerdictRule, per_value
from harness.inputs.catalogue import load_scenario
from spark.analysis import outcome_samples
from spark.comparison import Collected, analyse
from tests.unit.by_hand import collected

GATE = VerdictRule(bootstrap=300, one_sided=True)


def _tallies(lost: dict[str, list[int]], owed: int = 16) -> pd.DataFrame:
    """One run, per variant and cycle: ``owed`` pairs owed, the given number lost, every nacked retry back."""
    rows = []
    for v, per_cycle in lost.items():
        for k, n in enumerate(per_cycle):
            for name, value in (("sent", owed), ("ledger_owed", owed), ("ledger_lost", n),
                                ("ledger_retries_expected", 2)):
                rows.append({"run_id": "r1", "scenario": "subscription-mismatch", "variant": v, "cycle": k,
                             "name": name, "value": value})
    return pd.DataFrame(rows)


def _losing(lost: dict[str, list[int]]) -> Collected:
    """One run of subscription-mismatch whose variants lost ``lost`` owed messages in each cycle."""
    samples = outcome_samples(_tallies(lost))
    per_variant = [{"scenario": "subscription-mismatch", "variant": v, "runs": 1, "cycles": len(c), "sent": 16 * len(c),
                    "errors": 0, "ledger": {"lost": sum(c)}} for v, c in lost.items()]
    return collected(scenarios={"subscription-mismatch": load_scenario("subscription-mismatch")},
                     per_variant=per_variant, samples=samples)


def test_each_owed_pair_is_one_value_of_the_loss_share_in_its_cycle():
    s = outcome_samples(_tallies({"a": [12, 0]}))
    # A row per cycle and value (how many: its count), not one per owed pair: what the driver holds grows with the
    # cycles, not with the messages.
    assert s[s["metric"] == "lost"][["cycle", "value", "count"]].values.tolist() == [[0, 1.0, 12], [0, 0.0, 4],
                                                                                   [1, 0.0, 16]]
    every = per_value(s)
    lost = every[every["metric"] == "lost"].groupby("cycle")["value"].agg(["size", "mean"])
    assert lost["size"].tolist() == [16, 16] and lost["mean"].tolist() == [0.75, 0.0]


def test_the_gate_scenario_of_loss_judges_the_share_lost_not_the_endless_wakeups():
    sc = load_scenario("subscription-mismatch")
    assert sc.verdict_metric == "lost" and sc.cycles.at_least >= 8
    # Every build loses most messages; a candidate losing every owed message in each of 8 cycles is worse.
    summary = analyse(_losing({"a": [11, 14, 12, 12, 13, 11, 12, 14], "b": [16] * 8}), "a", "b", GATE)
    by = {x["metric"]: x for x in summary["comparisons"]}
    lost = by["lost"]
    assert lost["primary"] and lost["statistic"] == "share" and lost["effect"] == "difference"
    # Exact one-sided p of 8 vs 8 fully separated cycles: 1 / C(16, 8).
    assert lost["p_value"] == pytest.approx(1 / 12_870)
    assert lost["difference"] == pytest.approx(1 - 99 / 128) and lost["verdict"] == REGRESSION


def test_shares_that_tie_across_four_cycles_cannot_reach_the_level_but_eight_can():
    # 6 of 8 cycles lose 12 of 16: whatever the arrangement, p >= P(b has both odd cycles) = C(6,2)/C(8,4).
    four = {x["metric"]: x for x in analyse(_losing({"a": [12] * 4, "b": [12, 12, 13, 14]}), "a", "b",
                                                        GATE)["comparisons"]}["lost"]
    assert four["p_floor"] == pytest.approx(15 / 70) and four["verdict"] == NOT_ENOUGH
    eight = {x["metric"]: x for x in analyse(_losing({"a": [12] * 8, "b": [12] * 4 + [13, 14, 13, 14]}), "a",
                                                         "b", GATE)["comparisons"]}["lost"]
    assert eight["tested"] and eight["p_floor"] < 0.05 and eight["verdict"] in (INCONCLUSIVE, REGRESSION)
