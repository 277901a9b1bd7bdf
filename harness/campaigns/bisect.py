"""`rmq-harness bisect`: the first point of an ordered list of builds (releases oldest first, or local builds
in the order given) that behaves like the newer end, by binary search.

Every step runs the two ends beside the point under test, in one run, and judges with the comparison rule
(spark.comparison.analyse, the cycle as the unit) on that run alone: the ends are the step's own
controls. First the ends must differ (newer against older: an improvement or a regression, the change D).
A point behaves like the newer end when it differs from the older end by D and not from the newer end; like
the older end when it differs from the newer end as the older end does and not from the older end; anything
else ends the search as undecided, with the evidence, rather than guessing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness.contracts.options import RunOptions
from harness.contracts.verdict import CHANGED
from harness.core.errors import HarnessError
from harness.inputs.scenario import Scenario
from harness.inputs.variants import Variant

OLDER, NEWER, UNDECIDED = "older", "newer", "undecided"


@dataclass
class Judged:
    """Primary verdicts of one step's run (candidate against baseline): older->newer, older->point, newer->point,
    newer->older, and the levels behind them; ``archive`` the run."""

    archive: str
    verdicts: dict[str, str]
    evidence: dict[str, dict] = field(default_factory=dict)


@dataclass
class Step:
    point: str
    like: str  # OLDER, NEWER or UNDECIDED
    why: str
    judged: Judged


@dataclass
class Result:
    points: list[str]
    change: str | None  # D: the newer end against the older
    first: str | None  # the first point behaving like the newer end
    last_like_older: str | None
    steps: list[Step]
    outcome: str  # "found", "ends do not differ", "undecided"

    def as_dict(self) -> dict:
        return asdict(self)


def classify(j: Judged, change: str) -> tuple[str, str]:
    """Which end a point behaves like, from its step's verdicts."""
    v = j.verdicts
    from_older, from_newer, back = v["older->point"], v["newer->point"], v["newer->older"]
    if v["older->newer"] != change:
        return UNDECIDED, f"the ends of this run compare as {v['older->newer']}, not {change}: no control"
    if from_older == change and from_newer not in CHANGED:
        return NEWER, f"{change} from the older end, no change from the newer"
    if from_newer == back and from_older not in CHANGED:
        return OLDER, f"no change from the older end, {back} from the newer (as the older end)"
    return UNDECIDED, f"{from_older} from the older end and {from_newer} from the newer"


def search(points: Sequence[Variant], judge: Callable[[Variant | None], Judged],
           log: Callable[[str], None] = print) -> Result:
    """``points`` oldest first, the ends included; ``judge(point)`` runs the ends and the point (None: the ends
    alone) and returns the step's verdicts."""
    if len(points) < 2:
        raise HarnessError("bisect needs two different builds: --good and --bad")
    names = [p.name for p in points]
    ends = judge(None)
    change = ends.verdicts["older->newer"]
    steps = [Step(f"{names[0]} vs {names[-1]}", NEWER if change in CHANGED else UNDECIDED,
                  f"the newer end against the older: {change}", ends)]
    log(f"bisect: {names[-1]} against {names[0]}: {change}")
    if change not in CHANGED:
        return Result(names, change, None, None, steps, "ends do not differ")
    lo, hi = 0, len(points) - 1  # points[lo] behaves like the older end, points[hi] like the newer
    while hi - lo > 1:
        mid = (lo + hi) // 2
        j = judge(points[mid])
        like, why = classify(j, change)
        steps.append(Step(names[mid], like, why, j))
        log(f"bisect: {names[mid]} behaves like the {like} end ({why}); {hi - lo - 1} point(s) were left")
        if like == UNDECIDED:
            return Result(names, change, None, names[lo], steps, "undecided")
        if like == NEWER:
            hi = mid
        else:
            lo = mid
    return Result(names, change, names[hi], names[lo], steps, "found")


PAIRS = {"older->newer": ("older", "newer"), "older->point": ("older", "point"),
         "newer->point": ("newer", "point"), "newer->older": ("newer", "older")}


def spark_judge(older: Variant, newer: Variant, scenario: Scenario, runs_dir: Path | str, options: RunOptions,
                rule: object, log: Callable[[str], None], make_run: Callable[..., object] | None = None
                ) -> Callable[[Variant | None], Judged]:
    """A judge that runs [older, point, newer] side by side (one run) and compares them on Spark (one session
    for every step)."""
    from harness.run.sequence import Run
    from spark.comparison import analyse, collect
    from spark.io import load_archives
    from spark.session import local_session

    state: dict[str, object] = {}

    def judge(point: Variant | None) -> Judged:
        side = {"older": older, "newer": newer, **({"point": point} if point else {})}
        variants = [older, *([point] if point else []), newer]
        result = (make_run or Run)(variants, scenario, runs_dir, options, log=log).execute()
        if "spark" not in state:
            state["spark"] = local_session("local[*]", app="rmq-harness-bisect")
        archives = load_archives([str(result.archive)], warn=log)
        c = collect(state["spark"], archives, [v.name for v in variants], seed=rule.seed)
        try:
            out = Judged(str(result.archive), {})
            for key, (base, cand) in PAIRS.items():
                if base not in side or cand not in side:
                    continue
                res = analyse(c, side[base].name, side[cand].name, rule)
                x = next(x for x in res["comparisons"] if x["primary"] and x["scenario"] == scenario.name)
                out.verdicts[key] = x["verdict"]
                out.evidence[key] = {k: x[k] for k in ("metric", "median_baseline", "median_candidate",
                                                       "ratio_of_medians", "ci", "p_adjusted", "n_baseline",
                                                       "n_candidate", "reason")}
                out.evidence[key]["completeness"] = res["completeness"].get(scenario.name, {})
            return out
        finally:
            c.close()

    return judge


def order(good: Variant, bad: Variant, between: Sequence[Variant]) -> list[Variant]:
    """Releases oldest first; local builds (or a mix) in the order given: --good, --between..., --bad."""
    points = [good, *between, bad]
    if all(p.jars is None for p in points):
        from harness.campaigns.releases import parse

        points = sorted(points, key=lambda p: parse(p.version))
    names = [p.name for p in points]
    if len(set(names)) < len(names):
        raise HarnessError(f"bisect: a build is given twice ({', '.join(names)})")
    return points


def write(result: dict, out: Path) -> Path:
    """The bisection's evidence as JSON, written atomically and never over an existing file."""
    from harness.core.publish import publish_json

    return publish_json(result, out, "bisection results")
