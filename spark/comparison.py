"""A comparison over run archives, as a library: ``collect`` (Spark: archives -> the per-variant table and the
per-cycle samples), ``analyse`` (pure: samples -> the comparisons, their verdicts and the overall verdict),
as Apache Otava keeps them apart. The jobs (spark/jobs/), `rmq-harness calibrate` and `bisect` call them;
spark.outputs writes what they found.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from harness.contracts.verdict import (
    COMPARED,
    EQUIVALENT,
    IMPROVEMENT,
    INCONCLUSIVE,
    NOT_ENOUGH,
    REGRESSION,
    STATISTIC,
    VerdictRule,
    sample_counts,
)
from harness.core.errors import ConfigError
from harness.inputs.expectations import evaluate
from harness.inputs.scenario import Scenario
from harness.measure import ordering
from harness.measure.enrich import enrich
from harness.measure.ordering import fifo_counts
from harness.measure.tally import nest, table
from spark import facts
from spark.facts import unreadable_file
from spark.io import Archive, ArchiveError, scenario_of
from spark.stats import compare, completeness, decide, holm, overall, tarone

SAMPLE_CAP = 500_000  # values per (scenario, variant) brought to the driver for statistics


PLOT_CAP = 20_000
# Work from which a comparison's bootstraps are spread over Spark's tasks (the cycles of all its sides): below it,
# the tasks would cost more than they save (the first job of Python tasks took 1-3 s to start here; 2,000 draws
# of a side of 5,000 cycles take about 2 s).
SPREAD_CYCLES = 5_000
Mapper = Callable[[Callable[[dict], dict], list[dict]], list[dict]]


def serially(f: Callable[[dict], dict], items: list[dict]) -> list[dict]:
    return [f(x) for x in items]


def on_executors(spark: object) -> Mapper:
    """Independent pure work (a comparison's bootstrap) as Spark tasks, a task an item: the executors' cores,
    on whatever nodes they are, rather than the driver's one."""
    def spread(f: Callable[[dict], dict], items: list[dict]) -> list[dict]:
        if len(items) < 2:
            return serially(f, items)
        return spark.sparkContext.parallelize(items, len(items)).map(f).collect()

    return spread


def compare_one(args: dict) -> dict:
    """compare() of one comparison's arguments (sides_of's, the rule and the statistic): what a task runs."""
    return compare(**args)


def check_variants(archives: Sequence[Archive], wanted: Sequence[str], roles: Sequence[str] = ()) -> None:
    present = sorted({v for a in archives for v in a.variants})
    for i, name in enumerate(wanted):
        if name not in present:
            role = roles[i] if i < len(roles) else "variant"
            raise ConfigError(f"{role} {name!r} is not in the archives; variants present: {', '.join(present)}")
    if len(set(wanted)) < len(wanted):
        raise ConfigError("--baseline and --candidate name the same variant")


@dataclass
class Collected:
    """What Spark computed. ``parts`` (every fact, spark.facts.PARTS_SCHEMA) stays on the executors, cached,
    with the retry and ledger rows a report writes from it (spark.outputs), until ``close``; everything else is
    small and plain Python: per (scenario, variant) figures, the verdict's samples (at most SAMPLE_CAP values a
    pair)."""

    archives: list[Archive]
    scenarios: dict[str, Scenario]  # by name, as the newest archive of it ran it
    per_variant: list[dict]  # nested, per (scenario, variant)
    per_run: list[dict]  # nested, per (run_id, scenario, variant)
    samples: pd.DataFrame  # scenario, variant, run_id, cycle, metric, value (inf: never redelivered), count
    plot: pd.DataFrame  # scenario, variant, t_client_ns, wakeup_ms, redelivery_ms (a sample)
    per_variant_table: pd.DataFrame  # flat, per (scenario, variant): per_variant.parquet
    parts: object | None = None  # the Spark DataFrame of every fact (None: nothing kept)
    # Runs with faults: traffic per second (spark.analysis.TIMELINE); empty without faults.
    timeline: pd.DataFrame = field(default_factory=pd.DataFrame)
    spread: Mapper = serially  # how analyse runs its comparisons' bootstraps (on_executors where Spark is)

    def close(self) -> None:
        if self.parts is not None:
            self.parts.unpersist()
            self.parts = None


def _capped(df: pd.DataFrame, cap: int, seed: int) -> pd.DataFrame:
    """Every row, or a uniform sample of ``cap`` rows when there are more."""
    return df if len(df) <= cap else df.sample(n=cap, random_state=seed)


def collect(spark: object, archives: list[Archive], variants: Sequence[str], seed: int = 1,
            per_run: bool = False) -> Collected:
    from spark.analysis import (
        distributions,
        dlq_reader_errors,
        drawn_sample,
        fault_impacts,
        fifo,
        measured_samples,
        message_facts,
        outcome_samples,
        read_events,
        retry_sample,
        routing,
        summed_tallies,
    )

    # The driver holds about SAMPLE_CAP retry rows a (scenario, variant) (two values a row at the most: wakeup
    # and redelivery), drawn on the executors, whatever the number of retries.
    pairs = len(variants) * len({scenario_of(a).name for a in archives})
    parts = message_facts(spark, archives, variants, routing(archives), sample_rows=SAMPLE_CAP * max(1, pairs) // 2,
                          seed=seed).persist()
    try:
        try:
            tallies = summed_tallies(parts)
        except Exception as e:
            bad = unreadable_file(e)
            if bad is None:
                raise
            raise ArchiveError(bad) from None
        by = ["scenario", "variant"]
        count = int(tallies.loc[tallies["name"] == "retry_deliveries", "value"].sum())
        cap = SAMPLE_CAP * max(1, len(tallies[by].drop_duplicates())) // 2
        fraction = 1.0 if count <= cap else cap / count

        def draw() -> pd.DataFrame:
            got = drawn_sample(parts, fraction)
            # Fewer retries than the tasks drew for: drawn again from all of them.
            return retry_sample(parts, facts.SAMPLE_COLUMNS, fraction, seed) if got is None else got

        # The sample is drawn while the percentiles are computed: two Spark jobs side by side.
        with ThreadPoolExecutor(1, thread_name_prefix="sample") as pool:
            drawing = pool.submit(draw)
            flat = table(tallies, None, by, distributions(parts, by))
            runs = (table(tallies, None, ["run_id", *by], distributions(parts, ["run_id", *by])).to_dict("records")
                    if per_run else [])
            sample = drawing.result()
        rows = flat.to_dict("records")
        measured = _capped(measured_samples(sample), SAMPLE_CAP * max(1, len(rows)), seed)
        samples = pd.concat([measured, outcome_samples(tallies)], ignore_index=True)
        plot = _capped(sample[["scenario", "variant", "t_client_ns", "wakeup_ms", "redelivery_ms"]],
                       PLOT_CAP * max(1, len(rows)), seed)
        del sample
        impacts, timeline = fault_impacts(archives, parts, variants)
        # Strings compared per comparison below: as categories, a comparison of small integers.
        samples = samples.astype({c: "category" for c in ("scenario", "variant", "metric")})
        checks = tallies.groupby("name")["value"].sum()
        # Two more passes over the events, only where the tasks saw something for them to check.
        if checks.get("fifo_events", 0) or checks.get("dlq_reader_errors", 0):
            events = read_events(spark, archives, variants)
        fifo_rows = (fifo(events).toPandas() if checks.get("fifo_events", 0)
                     else ordering.SCHEMA.empty_table().to_pandas())
        dlq_errors = ([r.asDict() for r in dlq_reader_errors(events).collect()]
                      if checks.get("dlq_reader_errors", 0) else [])
    except BaseException:
        parts.unpersist()
        raise
    newest = sorted(archives, key=lambda a: a.record.started_at)
    scenarios = {sc.name: sc for sc in map(scenario_of, newest)}
    nested = enrich([nest(r) for r in rows], [a.record for a in archives])
    add_fifo(fifo_rows, nested)
    for r in nested:
        mine = [f for f in impacts if (f["scenario"], f["variant"]) == (r["scenario"], r["variant"])]
        if mine:
            r["faults"] = mine
    for r in nested:
        r["dlq_reader_errors"] = [{k: e[k] for k in ("group", "errors", "example")} for e in dlq_errors
                                  if (e["scenario"], e["variant"]) == (r["scenario"], r["variant"])]
    return Collected(archives, scenarios, nested, [nest(r) for r in runs], samples, plot, flat, parts,
                     timeline, on_executors(spark))


def add_fifo(rows_of_fifo: pd.DataFrame, rows: list[dict]) -> None:
    """The ``fifo.*`` metrics (harness.measure.ordering) into the rows of (scenario, variant)s that ran FIFO."""
    for r in rows:
        mine = rows_of_fifo[(rows_of_fifo["scenario"] == r["scenario"]) & (rows_of_fifo["variant"] == r["variant"])]
        if not mine.empty:
            r["fifo"] = fifo_counts(mine)


Sides = dict[tuple[str, str, str], dict[str, list[np.ndarray]]]  # (scenario, variant, metric) -> run -> cycles


def grouped(samples: pd.DataFrame) -> Sides:
    """Every side's runs of cycles of values at once: (scenario, variant, metric) -> run id -> its cycles' values
    (runs and cycles in order, a cycle's values in the samples' order). One sort of the samples rather than a
    filter of them per comparison (8 s of a 10M-event comparison, measured)."""
    keys = ["scenario", "variant", "metric", "run_id", "cycle"]
    if samples.empty:
        return {}
    ordered = samples.sort_values(keys, kind="stable")
    values = ordered["value"].to_numpy(dtype=float)
    codes = np.stack([pd.factorize(ordered[k])[0] for k in keys])
    cuts = np.flatnonzero((np.diff(codes, axis=1) != 0).any(axis=0)) + 1
    starts = np.concatenate([[0], cuts])
    count = sample_counts(ordered)
    if (count != 1).any():  # a row for several equal values: each repeated, the cycles cut where their rows end
        values, cuts = np.repeat(values, count), np.cumsum(count)[cuts - 1]
    # Only each cycle's first row made Python values (a string column of a million rows costs a second).
    heads = zip(*(ordered[k].iloc[starts].to_numpy() for k in keys[:4]), np.split(values, cuts), strict=True)
    out: Sides = {}
    for scenario, variant, metric, run_id, cycle in heads:
        out.setdefault((scenario, variant, metric), {}).setdefault(run_id, []).append(cycle)
    return out


def nested_runs(samples: pd.DataFrame | Sides, scenario: str, variant: str, metric: str) -> list[list[np.ndarray]]:
    """runs -> cycles -> values of one side of one comparison (runs in the order of their ids)."""
    return list(runs_by_id(samples, scenario, variant, metric).values())


def runs_by_id(samples: pd.DataFrame | Sides, scenario: str, variant: str, metric: str) -> dict[str, list[np.ndarray]]:
    """run id -> cycles -> values of one side of one comparison (of the samples, or of them ``grouped``)."""
    sides = grouped(samples) if isinstance(samples, pd.DataFrame) else samples
    return sides.get((scenario, variant, metric), {})


def sides_of(samples: pd.DataFrame | Sides, scenario: str, baseline: str, candidate: str, metric: str) -> dict:
    """compare()'s arguments for one comparison: both sides' runs, and which runs they are."""
    sides = grouped(samples) if isinstance(samples, pd.DataFrame) else samples
    b, c = (runs_by_id(sides, scenario, v, metric) for v in (baseline, candidate))
    return {"base": list(b.values()), "cand": list(c.values()), "runs": (list(b), list(c))}


def _judge(comparisons: Sequence[dict], tested: Sequence[bool], adjusted: Sequence[float | None], rule: VerdictRule,
           of: int, gated: str | None = None) -> None:
    """Each comparison's verdict, given whether it was tested and its adjusted p (``decide``)."""
    family = sum(tested)
    for x, t, p in zip(comparisons, tested, adjusted, strict=True):
        x["tested"], x["p_adjusted"] = t, p
        x["verdict"], x["reason"] = decide(x, p, family, rule, tested=t, of=of, gated=gated)


def expectations(c: Collected, rows: Sequence[dict]) -> list[dict]:
    """Each (scenario, variant) row checked against its scenario's expect: rules."""
    out = []
    for r in rows:
        sc = c.scenarios.get(r["scenario"])
        rules = sc.expect if sc else []
        out.append({"scenario": r["scenario"], "variant": r["variant"], "reference": sc.reference if sc else "",
                    **evaluate(rules, r)})
    return out


def analyse(c: Collected, baseline: str, candidate: str, rule: VerdictRule, run_id: str | None = None) -> dict:
    """The comparisons, their verdicts and the overall verdict (pure). ``run_id``: one run's data only."""
    samples = grouped(c.samples if run_id is None else c.samples[c.samples["run_id"] == run_id])
    table = c.per_variant if run_id is None else [r for r in c.per_run if r["run_id"] == run_id]
    sides = {(r["scenario"], r["variant"]): r for r in table}
    scenarios = sorted({s for s, v in sides if v == baseline} & {s for s, v in sides if v == candidate})
    wanted = [(s, m, m == primary) for s in scenarios for primary in [c.scenarios[s].verdict_metric]
              for m in dict.fromkeys([primary, *COMPARED])]
    args = [{"rule": rule, "statistic": STATISTIC[m], **sides_of(samples, s, baseline, candidate, m)}
            for s, m, _ in wanted]
    cycles = sum(len(run) for a in args for side in ("base", "cand") for run in a[side])
    done = (c.spread if cycles >= SPREAD_CYCLES else serially)(compare_one, args)
    comparisons = [{"scenario": s, "metric": m, "primary": p, **r} for (s, m, p), r in zip(wanted, done, strict=True)]
    # One family per scenario, so a scenario's verdict does not move with what else the report holds, tested in a
    # fixed sequence: the primary comparison alone at alpha, the secondary ones (Holm among them) only when it
    # was significant, which keeps the family-wise error at alpha and lets the primary reach the level with the
    # fewest cycles. Comparisons that cannot reach the level are left out before testing (Tarone).
    families = {}
    for s in scenarios:
        primary, *secondary = [x for x in comparisons if x["scenario"] == s]  # the primary first, as built above
        assert primary["primary"], "the primary comparison of each scenario comes first"
        testable = primary["p_value"] is not None and tarone([primary["p_floor"]], rule.alpha)[0]
        _judge([primary], [testable], [primary["p_value"] if testable else None], rule, of=1)
        families[s] = int(testable)
        if testable and primary["p_value"] < rule.alpha:
            tested = tarone([x["p_floor"] if x["p_value"] is not None else None for x in secondary], rule.alpha)
            _judge(secondary, tested, holm([x["p_value"] if t else None for x, t in zip(secondary, tested,
                                                                                        strict=True)]),
                   rule, of=len(secondary))
            families[s] += sum(tested)
        else:
            why = "had too few cycles" if primary["verdict"] == NOT_ENOUGH else "was not significant"
            _judge(secondary, [False] * len(secondary), [None] * len(secondary), rule, of=len(secondary),
                   gated=f"{primary['metric']}, the primary comparison, {why}")
        for x in (primary, *secondary):
            if x["paired"] is False:  # nothing cancels what each run did to both of its variants: said
                x["reason"] += "; sides from different runs, compared pooled"
            elif x["paired"]:
                x["reason"] += f"; paired by run ({x['runs_baseline']} runs)"
            cyc = c.scenarios[s].cycles
            wanted = {v: cyc.at_least * sides[(s, v)].get("runs", 1) for v in (baseline, candidate)}
            short = [f"{v} ran {sides[(s, v)].get('cycles', 0)} of {wanted[v]}" for v in (baseline, candidate)
                     if sides[(s, v)].get("cycles", 0) < wanted[v]]
            if short:  # the cap stopped a variant before the cycles its scenario asks for
                x["reason"] += (f"; {', '.join(short)} cycles ({cyc.at_least} a run; cap "
                                f"{cyc.cap_s or 0:g} s)")
    blocked = {}
    for s in scenarios:
        base, cand = ({**sides[(s, v)]["ledger"], "sent": sides[(s, v)]["sent"], "errors": sides[(s, v)]["errors"]}
                      for v in (baseline, candidate))
        verdict, why = completeness(base, cand)
        blocked[s] = (verdict, why)
        for x in comparisons:
            if x["scenario"] != s or not x["primary"]:
                continue
            untimed = (not c.scenarios[s].retries_expected and x["p_value"] is None
                       and base["sent"] > 0 and cand["sent"] > 0)
            if verdict == REGRESSION:
                x["verdict"], x["reason"] = REGRESSION, "loses what the baseline does not: " + "; ".join(why)
            elif untimed:  # nothing to time by design (nothing is nacked): the ledger is the verdict
                x["verdict"], x["reason"] = ((INCONCLUSIVE, "no retries by design; less complete: " + "; ".join(why))
                                             if verdict else
                                             (EQUIVALENT, "no retries by design: judged by the ledger, no class "
                                                          "worse than the baseline's"))
            elif verdict and x["verdict"] == IMPROVEMENT:
                x["verdict"], x["reason"] = INCONCLUSIVE, "faster but less complete: " + "; ".join(why)
    return {
        "baseline": baseline,
        "candidate": candidate,
        "verdict": overall(comparisons, blocked),
        "rule": rule.as_dict(),
        "family": families,
        "completeness": {s: {"verdict": v, "why": w} for s, (v, w) in blocked.items()},
        "comparisons": comparisons,
        "expectations": expectations(c, [r for r in table if r["variant"] in (baseline, candidate)]),
    }


