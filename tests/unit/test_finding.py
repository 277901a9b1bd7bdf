"""The report's one sentence (harness.report.finding): what the primary comparison found, and the losses."""

from harness.report.finding import sentence


def _summary(comparisons: list[dict], ledgers: dict[tuple[str, str], tuple[int, int]]) -> dict:
    return {"baseline": "base", "candidate": "cand", "comparisons": comparisons,
            "per_variant": [{"scenario": s, "variant": v, "ledger": {"lost": lost, "duplicated": dup}}
                            for (s, v), (lost, dup) in ledgers.items()]}


def _comparison(scenario: str, metric: str, base: object, cand: object, verdict: str, **extra: object) -> dict:
    return {"scenario": scenario, "metric": metric, "primary": True, "statistic": extra.pop("statistic", "median"),
            "median_baseline": base, "median_candidate": cand, "verdict": verdict, "reason": "", **extra}


def test_one_scenario_says_both_levels_the_verdict_and_that_nothing_was_lost() -> None:
    s = _summary([_comparison("burst", "wakeup_ms", 16920.0, 11.0, "improvement"),
                  {**_comparison("burst", "redelivery_ms", 1.0, 1.0, "equivalent"), "primary": False}],
                 {("burst", "base"): (0, 0), ("burst", "cand"): (0, 0)})
    assert sentence(s) == ("cand wakes a poll already waiting for a retry in 11 ms against 16.92 s for base "
                           "(improvement); nothing lost or duplicated on either side.")


def test_losses_are_named_per_side_and_a_never_redelivered_level_reads_never() -> None:
    s = _summary([_comparison("burst", "wakeup_ms", 10.0, "inf", "regression")],
                 {("burst", "base"): (0, 0), ("burst", "cand"): (3, 1), ("burst", "other"): (9, 9)})
    assert sentence(s) == ("wakeup_ms of cand never against 10 ms for base (never: a retry was not redelivered) "
                           "(regression); cand lost 3 and duplicated 1.")


def test_several_scenarios_are_each_named_and_not_enough_data_says_why() -> None:
    s = _summary([_comparison("a", "wakeup_ms", 5.0, 6.0, "equivalent"),
                  _comparison("b", "stalled", 0.5, 0.0, "not enough data", statistic="share",
                              reason="2 cycles, 5 needed")], {})
    said = sentence(s)
    assert said.startswith("a: cand wakes")
    assert "b: cand leaves waiting for a poll to run out 0% of retries against 50% for base (not enough data to " \
           "judge: 2 cycles, 5 needed)" in said
