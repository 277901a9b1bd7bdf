"""`rmq-harness sweep`: every assemblable release of a range, in batches side by side, each scenario in turn,
then one Spark job over all the archives (spark/jobs/sweep.py) and one report.

A batch is as many releases as run side by side on this machine (--batch); batches are balanced, oldest
releases first, so adjacent releases share a run wherever a batch boundary does not fall between them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from harness.campaigns.loop import Campaign, Failed, Outcome
from harness.inputs.scenario import Scenario
from harness.inputs.variants import Variant

# Measured here: four variants side by side (calibrate) keep a burst's wakeups within ~1 ms of running alone.
DEFAULT_BATCH = 4


def batches(items: Sequence[Variant], size: int) -> list[list[Variant]]:
    """``items`` in order, cut into the fewest batches of at most ``size``, their sizes differing by at most one."""
    if not items:
        return []
    n = math.ceil(len(items) / size)
    base, extra = divmod(len(items), n)
    out, i = [], 0
    for k in range(n):
        take = base + (1 if k < extra else 0)
        out.append(list(items[i:i + take]))
        i += take
    return out


def run_all(plan: Sequence[Scenario], releases: Sequence[Variant], size: int, campaign: Campaign) -> Outcome:
    """Each batch runs every scenario; a release the scenario cannot ask (it lacks a setting the scenario needs,
    or predates the scenario's ``applies``) leaves that run (the rest run again without it); a run that fails
    fails its batch's releases for that scenario only."""
    groups = batches(releases, size)
    for b, group in enumerate(groups):
        for i, sc in enumerate(plan):
            done = campaign.run(sc, group, f"batch {b + 1}/{len(groups)}, scenario {i + 1}/{len(plan)}: {sc.name}")
            if isinstance(done, Failed):
                campaign.outcome.failed.update({f"{sc.name}@{v.name}": done.why for v in done.variants})
    out = campaign.finish()
    campaign.log(f"sweep runs done in {out.wall_s / 60:.1f} min: {len(out.archives)} archived, "
                 f"{len(out.failed)} failed, {len(out.not_applicable)} not applicable")
    return out
