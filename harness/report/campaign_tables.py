"""What a campaign shows in the terminal, a table each, printed whole: a matrix of scenarios and variants, a
ramp's steps, a calibration of the verdict rule, the change points of the history, a sweep over releases with
its defects, and a bisection's steps."""

from __future__ import annotations

from rich.table import Table

from harness.contracts.verdict import POWER, RATIO, SHARE, STATISTIC
from harness.report import console, formats
from harness.report.run_tables import print_hybrids, variant_label
from harness.report.tables import print_whole


def print_matrix(summary: dict) -> None:
    t = Table(title=f"scenario x variant (verdicts against {summary['baseline']})")
    for col in ("scenario", "variant", "expectations", "wakeup p50", "lost", "dup", "cross", "DLQ", "verdict",
                "not met"):
        t.add_column(col, justify="left" if col in ("scenario", "variant", "verdict", "not met") else "right")
    for r in summary["overview"]:
        colour = "red" if r["failing"] else "green"
        t.add_row(r["scenario"], r["variant"], f"[{colour}]{r['expectations']}[/]", formats.ms(r["wakeup_p50_ms"]),
                  str(r["lost"]), str(r["duplicated"]), str(r["cross_topic"]), str(r["dead_lettered"]), r["verdict"],
                  "; ".join(r["failing"]) or "-")
    print_whole(t)
    for s, why in summary["failed_runs"].items():
        console.console.print(f"[red]scenario {s}: run failed:[/] {why}")
    console.console.print(f"report: {summary['report']}\nsummary: {summary['out']}/summary.json")


def _cpu_cell(cpu: dict) -> str:
    """The machine's busy share and the busiest Locust process's cores, means over the load (what is judged);
    red where it ran out."""
    if not cpu.get("sampled_s"):
        return "not measured"
    out = cpu.get("ran_out", {})
    machine = f"machine {cpu['machine']['mean_busy']:.0%}"
    locust = f"Locust {(cpu.get('busiest_locust_process') or {}).get('mean_cores', 0.0):.2f} core"
    return (f"[red]{machine}[/]" if out.get("machine") else machine) + ", " + (
        f"[red]{locust}[/]" if out.get("load_generator") else locust)


def print_ramp(result: dict) -> None:
    """Each step's state per variant, then per variant the highest rate held and where it broke."""
    names = [v["variant"] for v in result["variants"]]
    t = Table(title=f"ramp of {result['scenario']}: {'; '.join(result['rules'])}")
    t.add_column("offered /s", justify="right")
    for n in names:
        t.add_column(n)
    t.add_column("CPU, mean over the load")
    for step in result["steps"]:
        cells = []
        for n in names:
            j = step["variants"].get(n)
            colour = {"holds": "green", "breaks": "red"}.get(j["state"], "yellow") if j else "white"
            cells.append("-" if j is None else f"[{colour}]{j['state']}[/] ({j['reached_per_s']:g}/s)"
                         + (f": {'; '.join(j['failing'])}" if j["state"] == "breaks" else "")
                         + (f"; no data: {', '.join(j['no_data'])}" if j.get("no_data") else ""))
        t.add_row(f"{step['rate']:g}", *cells, _cpu_cell(step.get("cpu", {})))
    print_whole(t)
    for v in result["variants"]:
        held = "no rate asked" if v["holds_up_to_per_s"] is None else f"{v['holds_up_to_per_s']:g} messages/s"
        broke = f"; breaks at {v['breaks_at_per_s']:g}/s ({'; '.join(v['why'])})" if v["breaks_at_per_s"] else ""
        console.console.print(f"[bold]{v['variant']}[/]: holds up to {held}{broke}"
                              + (f"; {v['note']}" if v["note"] else ""))
    for rate, why in result["failed"].items():
        console.console.print(f"[red]step at {rate}/s: run failed:[/] {why}")


def print_calibration(result: dict) -> None:
    """A row per scenario and one pooled over them (files before the gate set's calibration: the pooled one only):
    A/A false verdicts, the detections of a 2x change planted into the A/A runs, each planted delay's."""
    def pct(r: dict | None, claim: str = "upper") -> str:
        """A rate with the bound its claim quotes: at most (false verdicts), at least (detections)."""
        if not r or r["rate"] is None:
            return "-"
        bound = f"; at {'most' if claim == 'upper' else 'least'} {r[claim]:.1%}" if r.get(claim) is not None else ""
        return f"{r['rate']:.0%} ({r['k']}/{r['n']}{bound})"

    def detectable(r: dict) -> str:
        """The regression one run detects with 80% power, median over the A/A runs (a ratio or a difference)."""
        d = r["aa"].get("detectable_regression")
        if not d:
            return "-"
        size = f"{d['median']:.2f}x" if d["effect"] == RATIO else f"+{d['median']:.2f}"
        # Runs whose spread could not be sized (endless or zero levels) are not in the median: said.
        return size if d["runs"] == r["aa"]["n"] else f"{size} ({d['runs']} of {r['aa']['n']} runs)"

    delays = [s["delay_ms"] for s in result["shifts"]]
    t = Table(title=f"the verdict rule on {result['variant']}, each run judged on its own (bounds: one-sided 95%)")
    for col in ("scenario", "A/A: false verdicts", f"a run detects ({POWER:.0%})",
                f"{result.get('power_factor', 2.0):g}x planted: detected",
                *(f"+{ms} ms on every wakeup: detected" for ms in delays)):
        t.add_column(col)
    sections = [*result.get("per_scenario", {}).items(), ("all" if result.get("per_scenario") else "", result)]
    for name, r in sections:
        shifts = {s["delay_ms"]: s for s in r["shifts"]}
        t.add_row(name, pct(r["aa"]), detectable(r), pct(r.get("power_2x"), "lower"),
                  *(pct(shifts.get(ms), "lower") for ms in delays))
    print_whole(t)
    effect = result["aa"].get("order_effect")
    if effect:
        console.console.print(f"order: the variant brought up second was {effect['second_over_first']:.3g}x the "
                              f"first (95% CI {effect['ci'][0]:.3g}-{effect['ci'][1]:.3g}; slower in "
                              f"{effect['second_slower_in']} of {effect['runs']} A/A runs)")


def print_history(summary: dict) -> None:

    t = Table(title=f"change points over runs ({summary['method']['name']}, window {summary['method']['window']}, "
                    f"p < {summary['method']['max_pvalue']})")
    for col in ("scenario", "variant", "metric", "runs", "change points"):
        t.add_column(col, justify="right" if col == "runs" else "left")
    for s in summary["over_runs"]:
        fmt = formats.share if s["statistic"] == "share" else formats.ms
        cps = "; ".join(f"{c['direction']} at {c['run_id']} ({fmt(c['before'])} -> {fmt(c['after'])})"
                        for c in s["change_points"]) or "-"
        t.add_row(s["scenario"], s["variant"], s["metric"], str(len(s["points"])), cps)
    print_whole(t)
    for s in summary["over_releases"]:
        if s["change_points"]:
            console.console.print(f"{s['scenario']} {s['metric']} over releases: " + ", ".join(
                f"{c['direction']} at {c['version']}" for c in s["change_points"]))
    for s in summary["regressions"]:
        c = s["newest_starts_regression"]
        console.console.print(f"[red]regression starting at run {c['run_id']}[/]: {s['scenario']} / {s['variant']} / "
                              f"{s['metric']}")
    console.console.print(f"{len(summary['runs_added'])} run(s) added; report: {summary['report']}")


def print_sweep(summary: dict) -> None:

    for name, sc in summary["scenarios"].items():
        share = sc["releases"][0]["statistic"] == "share"
        t = Table(title=f"{name}: {sc['metric']} per release (level = median of cycle medians"
                        f"{', mean share' if share else ''}; interval 95%)")
        for col in ("release", "cycles", "level", "interval", "p90", "lost", "dup", "cross-topic", "never redelivered",
                    "other groups woken / nack", "change from the release before"):
            t.add_column(col, justify="left" if col in ("release", "change from the release before") else "right")
        steps = {s["newer"]: s for s in sc["steps"]}
        fmt = formats.share if share else formats.ms
        for r in sc["releases"]:
            s = steps.get(r["variant"])
            ci = r["ci"]
            woken = r["probe_retry_other_per_nack"]
            t.add_row(variant_label(r["version"] or r["variant"], r.get("hybrid")), str(r["cycles"]), fmt(r["level"]),
                      f"{fmt(ci[0])}-{fmt(ci[1])}" if ci else "-", formats.ms(r["p90"]), str(r["lost"]),
                      str(r["duplicated"]), str(r["cross_topic"]), str(r["retries_never_redelivered"]),
                      "-" if woken is None else f"{woken:.2f}", s["verdict"] if s else "-")
        print_whole(t)
        print_hybrids({r["version"] or r["variant"]: r.get("hybrid") for r in sc["releases"]})
        for r in sc["releases"]:
            if r.get("probe_note"):
                console.console.print(f"[yellow]{name} on {r['version']}: no wakeup counts[/]: {r['probe_note']}")
    print_defects(summary)
    for v, why in summary["skipped"].items():
        console.console.print(f"[yellow]not run: RocketMQ {v}[/]: {why}")
    for s, why in summary["failed_runs"].items():
        console.console.print(f"[red]run failed: {s}[/]: {why}")
    for s, why in summary["not_applicable"].items():
        console.console.print(f"[yellow]not applicable: {s}[/]: {why}")
    console.console.print(f"report: {summary['report']}\nsummary: {summary['out']}/summary.json")


def print_defects(summary: dict) -> None:
    """The defect table of a sweep: per scenario, whether each release shows what its rules say a correct broker
    does not (summary schema 10; older summaries have none)."""
    rows = summary.get("defects") or []
    if not rows:
        return
    facts = {f["name"]: f for f in summary.get("variant_facts", [])}
    t = Table(title="defects per release (present: a rule of the scenario failed; absent: every rule met)")
    t.add_column("scenario")
    for v in summary["variants"]:
        f = facts.get(v, {})
        t.add_column(variant_label(f.get("version") or v, f.get("hybrid")))
    style = {"present": "[red]present[/]", "absent": "[green]absent[/]"}
    for r in rows:
        cells = [r["releases"].get(v, {}).get("state", "-") for v in summary["variants"]]
        t.add_row(r["scenario"], *[style.get(c, c) for c in cells])
    print_whole(t)


def print_bisect(result: object, scenario: str) -> None:

    t = Table(title=f"bisect on {scenario}: each step run beside both ends")
    for col in ("step", "build", "behaves like", "older->point", "newer->point", "point level", "why"):
        t.add_column(col)
    for i, s in enumerate(result.steps):
        v, ev = s.judged.verdicts, s.judged.evidence
        e = ev.get("older->point") or ev.get("older->newer") or {}
        fmt = formats.share if STATISTIC.get(e.get("metric")) == SHARE else formats.ms
        t.add_row(str(i), s.point, s.like, v.get("older->point", "-"), v.get("newer->point", "-"),
                  fmt(e.get("median_candidate")), s.why)
    print_whole(t)
    if result.outcome == "found":
        console.console.print(f"[bold]first build behaving like {result.points[-1]}: {result.first}[/] "
                              f"(the one before it, {result.last_like_older}, behaves like {result.points[0]})")
    else:
        console.console.print(f"[yellow]bisect ended: {result.outcome}[/]")
