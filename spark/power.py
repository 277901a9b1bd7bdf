"""What an equivalent or inconclusive comparison could have seen: the smallest change its cycles' spread lets the rule
(spark.stats) call an improvement or a regression with POWER, from the bootstrap's own draws. Pure functions."""

from __future__ import annotations

import numpy as np
from scipy.stats import norm

from harness.contracts.verdict import DIFFERENCE, POWER, RATIO, VerdictRule


def detectable_change(draws: np.ndarray | None, rule: VerdictRule, effect: str = RATIO) -> list[float | None] | None:
    """[below, above]: how far the effect would have to lie, with the spread these cycles showed, for the rule to
    call it an improvement (below) or a regression (above) with probability POWER; None for a side the rule does
    not test (improvements, one-sided) and altogether when the spread cannot be sized (no draws, or endless or
    zero levels among them).

    The interval is the draws' percentile interval; its end moves with the effect by about z(1 - tail) standard
    errors of the draws (on the log scale for a ratio). It clears the margin with probability POWER when the
    effect lies z(1 - tail) + z(POWER) standard errors beyond it. The test's own reach (too few cycles) is
    "not enough data", said before this is asked."""
    if draws is None or draws.size < 2:
        return None
    values = np.log(draws) if effect == RATIO else draws
    if effect == RATIO and not (np.all(np.isfinite(draws)) and np.all(draws > 0)):
        return None
    se = float(np.std(values, ddof=1))
    reach = (float(norm.ppf(1 - rule.tail)) + float(norm.ppf(POWER))) * se
    low, high = rule.margin(effect)
    if effect == RATIO:
        below, above = low * float(np.exp(-reach)), high * float(np.exp(reach))
    else:
        below, above = low - reach, high + reach
    return [None if rule.one_sided else below, above]


def detectable_phrase(result: dict, rule: VerdictRule) -> str:
    """What an equivalent or inconclusive comparison could have seen (``detectable_change``), in words."""
    d = result.get("detectable")
    if not d:
        return "the change these cycles could detect cannot be sized (endless or zero levels in the bootstrap)"
    what = "a difference" if result.get("effect") == DIFFERENCE else "a ratio"
    sign = "+" if result.get("effect") == DIFFERENCE else ""
    above = f"above {sign}{d[1]:.3g}"
    sides = above if d[0] is None else f"below {d[0]:.3g} or {above}"
    return f"could have seen {what} {sides} ({POWER:.0%} power)"
