"""`rmq-harness sweep`: every assemblable release of a range, in batches side by side, each scenario in turn,
then one Spark job over all the archives (spark/jobs/sweep.py) and one report.

A batch is as many releases as run side by side on this machine (--batch); batches are balanced, oldest
releases first, so adjacent releases share a run wherever a batch boundary does not fall between them.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.core.errors import HarnessError, NotApplicable
from harness.inputs.scenario import Scenario
from harness.inputs.variants import Variant
from harness.run.sequence import Run

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


@dataclass
class Outcome:
    archives: list[Path] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # "scenario@variant" -> why
    not_applicable: dict[str, str] = field(default_factory=dict)  # "scenario@variant" -> why
    wall_s: float = 0.0


def run_all(plan: Sequence[Scenario], releases: Sequence[Variant], size: int, runs_dir: Path | str, probe: bool,
            log: Callable[[str], None], make_run: Callable[..., Run] = Run,
            on_result: Callable[[list[dict]], None] = lambda summary: None) -> Outcome:
    """Each batch runs every scenario; a release the scenario cannot ask (it lacks a setting the scenario needs,
    or predates the scenario's ``applies``) leaves that run (the rest run again without it); a run that fails
    fails its batch's releases for that scenario only."""
    out = Outcome()
    t0 = time.monotonic()
    groups = batches(releases, size)
    for b, group in enumerate(groups):
        for i, sc in enumerate(plan):
            left = list(group)
            while left:
                names = ", ".join(v.name for v in left)
                log(f"batch {b + 1}/{len(groups)}, scenario {i + 1}/{len(plan)}: {sc.name} on {names} "
                    f"(elapsed {(time.monotonic() - t0) / 60:.1f} min)")
                try:
                    result = make_run(left, sc, runs_dir, log=log, probe=probe).execute()
                except NotApplicable as e:
                    out.not_applicable[f"{sc.name}@{e.variant}"] = str(e)
                    log(f"not applicable: {e}")
                    left = [v for v in left if v.name != e.variant]
                    continue
                except HarnessError as e:  # brokers that would not start: the other runs still run
                    why = str(e).splitlines()[0][:300]
                    out.failed.update({f"{sc.name}@{v.name}": why for v in left})
                    log(f"scenario {sc.name} on {names}: run failed: {why}")
                    break
                out.archives.append(result.archive)
                on_result(result.summary)
                break
    out.wall_s = time.monotonic() - t0
    log(f"sweep runs done in {out.wall_s / 60:.1f} min: {len(out.archives)} archived, {len(out.failed)} failed, "
        f"{len(out.not_applicable)} not applicable")
    return out
