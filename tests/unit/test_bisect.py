"""Bisection's search and its reading of each step's verdicts (pure; the judge is given)."""

from __future__ import annotations

import pytest

from harness.campaigns import bisect
from harness.campaigns.releases import release_variant
from harness.core.errors import HarnessError

POINTS = [release_variant(v) for v in ("5.0.0", "5.1.0", "5.1.1", "5.2.0", "5.3.3", "5.4.0", "5.5.0")]


def judge_for(first_new: int, change: str = "improvement", calls: list | None = None, broken: set | None = None):
    """A judge over POINTS whose points from ``first_new`` on behave like the newer end."""
    back = {"improvement": "regression", "regression": "improvement"}[change]

    def judge(point):
        if calls is not None:
            calls.append(point.name if point else None)
        v = {"older->newer": change, "newer->older": back}
        if point is not None:
            i = [p.name for p in POINTS].index(point.name)
            new = i >= first_new
            v["older->point"] = change if new else "no change"
            v["newer->point"] = "no change" if new else back
            if broken and point.name in broken:
                v["older->point"] = v["newer->point"] = "no change"
        return bisect.Judged("runs/x", v)

    return judge


@pytest.mark.parametrize("first_new", range(1, len(POINTS)))
@pytest.mark.parametrize("change", ["improvement", "regression"])
def test_the_search_finds_the_first_point_like_the_newer_end_in_log2_steps(first_new, change):
    calls: list = []
    r = bisect.search(POINTS, judge_for(first_new, change, calls), log=lambda s: None)
    assert r.outcome == "found" and r.change == change
    assert r.first == POINTS[first_new].name and r.last_like_older == POINTS[first_new - 1].name
    assert calls[0] is None  # the ends first, alone
    assert len(calls) - 1 <= 3  # 5 points between the ends: at most ceil(log2(6)) steps


def test_ends_that_do_not_differ_end_the_search_at_once():
    def judge(point):
        return bisect.Judged("runs/x", {"older->newer": "no change", "newer->older": "no change"})

    r = bisect.search(POINTS, judge, log=lambda s: None)
    assert (r.outcome, r.first, len(r.steps)) == ("ends do not differ", None, 1)


def test_a_point_like_neither_end_is_undecided_not_a_guess():
    r = bisect.search(POINTS, judge_for(2, broken={"rocketmq-5.2.0"}), log=lambda s: None)
    assert r.outcome == "undecided" and r.first is None
    assert r.steps[-1].point == "rocketmq-5.2.0" and r.steps[-1].like == bisect.UNDECIDED


def test_a_step_whose_own_ends_do_not_differ_is_undecided():
    j = bisect.Judged("r", {"older->newer": "no change", "newer->older": "no change", "older->point": "improvement",
                            "newer->point": "no change"})
    assert bisect.classify(j, "improvement")[0] == bisect.UNDECIDED


def test_releases_are_ordered_oldest_first_whichever_end_is_good():
    good, bad = release_variant("5.4.0"), release_variant("5.3.3")
    assert [p.version for p in bisect.order(good, bad, [])] == ["5.3.3", "5.4.0"]
    with pytest.raises(HarnessError, match="given twice"):
        bisect.order(good, good, [])
    with pytest.raises(HarnessError, match="two different builds"):
        bisect.search(POINTS[:1], judge_for(1), log=lambda s: None)
