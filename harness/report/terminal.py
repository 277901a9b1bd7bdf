"""The results in the terminal: one printer per kind of result (a run's summary, a comparison, a matrix, a
sweep, a bisection, a calibration, the history), over the dicts the run and the analysis write. Only prints."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from harness.contracts.endpoints import Endpoints
from harness.contracts.verdict import IMPROVEMENT, INCONCLUSIVE, NOT_ENOUGH, REGRESSION, SHARE, STATISTIC
from harness.core.errors import one_line
from harness.report import formats

# Piped output (CI logs, files) gets wide lines rather than tables squeezed to 80 columns.
console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
err_console = Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 160)


COLOUR = {IMPROVEMENT: "green", REGRESSION: "red", NOT_ENOUGH: "yellow", INCONCLUSIVE: "yellow"}


def line(label: str, colour: str, message: object) -> Text:
    """``label message`` as one line, the message as written: not rich markup ('[/]', '[a-z0-9]'), no emoji codes
    (':cat:'), line breaks escaped."""
    return Text.assemble((label, colour), " ", one_line(message))


def log(text: str) -> None:
    """A progress line, dimmed."""
    console.print(f"[dim]{text}[/]")


def warn(text: str) -> None:
    err_console.print(line("warning:", "yellow", text), soft_wrap=True)


def print_endpoints(rows: Sequence[Endpoints], health: dict[str, tuple[bool, str]] | None = None) -> None:
    # One block per variant: endpoints are long and a wide table wraps them unreadably.
    for ep in rows:
        title = f"[bold]{ep.variant}[/] (RocketMQ {ep.version})"
        if health is not None:
            ok, detail = health[ep.variant]
            title += f"  [green]healthy[/] [dim]{detail}[/]" if ok else f"  [red]unhealthy:[/] {detail}"
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="dim")
        grid.add_column()
        for label, value in (("gRPC proxy", ep.grpc), ("remoting proxy", ep.remoting), ("broker", ep.broker),
                             ("name server", ep.namesrv), ("metrics", ep.metrics)):
            grid.add_row(label, value)
        console.print(title)
        console.print(grid, soft_wrap=True)


def _stalled(st: dict | None) -> str:
    """Retries that waited for a poll to run out, of those asked for (archives before summary schema 4: -)."""
    return f"{st['count']}/{st['retries']}" if st else "-"


def print_summary(summary: Sequence[dict]) -> None:
    t = Table(title="retry wakeup (receive - retry copy's store time, for a poll already waiting), pickup (the same, "
                    "for a poll that started later), redelivery (receive - nack due) and nack -> retry (receive - "
                    "nack, the seed's measure)")
    for col in ("scenario", "variant", "cycles", "sent", "retries", "wakeup n", "p50", "p90", "max", "pickup n",
                "p50 ", "redelivery p50", "nack->retry p50", "stalled", "never redelivered", "lost", "dup", "cross",
                "errors"):
        t.add_column(col, justify="left" if col in ("scenario", "variant") else "right")
    for s in summary:
        w, p, r, ledger = s["wakeup_ms"], s["pickup_ms"], s["redelivery_ms"], s["ledger"]
        nr = s.get("nack_retry_ms") or {}
        t.add_row(s["scenario"], variant_label(s["variant"], s.get("hybrid")), str(s["cycles"]), str(s["sent"]),
                  str(s["retry_deliveries"]),
                  str(w["n"]), formats.ms(w["p50"]), formats.ms(w["p90"]), formats.ms(w["max"]), str(p["n"]),
                  formats.ms(p["p50"]),
                  formats.ms(r["p50"]), formats.ms(nr.get("p50")), _stalled(s.get("stalled")),
                  f"{ledger['retries_never_redelivered']}/{ledger['retries_expected']}",
                  str(ledger["lost"]), str(ledger["duplicated"]), str(ledger["cross_topic"]), str(s["errors"]))
    console.print(t)
    print_hybrids({s["variant"]: s.get("hybrid") for s in summary})


def variant_label(name: str, hybrid: str | None) -> str:
    """A variant's name in a table, marked when it is a hybrid release (print_hybrids says of what)."""
    return f"{name} (hybrid)" if hybrid else name


def print_hybrids(notes: Mapping[str, str | None]) -> None:
    """One line per hybrid release under a table: which of its modules came from which release."""
    for name, note in notes.items():
        if note:
            console.print(f"[yellow]{name} is a {note}[/] (its own are not on Maven Central; the manifest lists "
                          "every module jar with its sha256)")


def _open_ms(ms: float | None, still_open: bool | None, how: str) -> str:
    """A duration that may have no end in sight: at least this long, and ``how`` it ended."""
    return "-" if ms is None else f">= {formats.ms(ms)} ({how})" if still_open else formats.ms(ms)


def print_faults(summary: Sequence[dict]) -> None:
    """Per fault and variant: how long its target was away, what happened to the messages in flight, and how
    long sends and deliveries stopped."""
    rows = [f for s in summary for f in s.get("faults") or []]
    if not rows:
        return
    t = Table(title="faults: the (message, group) pairs in flight across each (sent before its target was back, "
                    "not yet acked when it began), the longest wait for a delivery, and the longest gaps between "
                    "successful sends and between deliveries, overlapping it")
    for col in ("fault", "at", "variant", "away", "in flight", "lost", "dup", "dlq", "acked after retry",
                "longest wait", "sends stopped", "deliveries stopped", "error"):
        t.add_column(col, justify="left" if col in ("fault", "variant", "error") else "right")
    for f in rows:
        away = "-" if f["window_s"] is None else f"{f['window_s']:.1f} s"
        counts = (str(f[k]) if f[k] is not None else "-"
                  for k in ("exposed", "lost", "duplicated", "dead_lettered", "acked_after_retry"))
        t.add_row(f["label"], f"{f['at_s']:g} s", f["variant"], away, *counts,
                  _open_ms(f["longest_wait_ms"], f["longest_wait_open"], "never delivered"),
                  _open_ms(f.get("send_gap_ms"), f.get("send_gap_open"), "none since"),
                  _open_ms(f.get("delivery_gap_ms"), f.get("delivery_gap_open"), "none since"), f["error"] or "")
    console.print(t)


def print_probes(probes: dict[str, list[dict]]) -> None:
    """Wakeups seen by the broker-side probe, per variant, group and cause."""
    t = Table(title="pop long-poll wakeups seen inside the broker (pop-wakeup-probe)")
    for col in ("variant", "group", "cause", "wakeups", "found nothing, re-suspended"):
        t.add_column(col, justify="right" if col in ("wakeups", "found nothing, re-suspended") else "left")
    for variant, samples in probes.items():
        rows: dict[tuple[str, str], list[float]] = {}
        for s in samples:
            if s["name"] in ("rmq_probe_pop_wakeups_total", "rmq_probe_pop_empty_wakeups_total"):
                cell = rows.setdefault((s["group"], s["cause"]), [0.0, 0.0])
                cell[0 if s["name"] == "rmq_probe_pop_wakeups_total" else 1] += s["value"]
        for (group, cause), (woken, empty) in sorted(rows.items()):
            t.add_row(variant, group, cause, f"{woken:.0f}", f"{empty:.0f}")
    console.print(t)


def print_comparison(summary: dict) -> None:
    level = f"{1 - summary['rule']['alpha'] * (2 if summary['rule'].get('one_sided') else 1):.0%}"
    t = Table(title=f"{summary['candidate']} against {summary['baseline']} (unit: the cycle)")
    for col in ("scenario", "metric", "cycles b/c", "baseline", "candidate", "ratio", f"{level} interval", "p (adj.)",
                "verdict"):
        t.add_column(col, justify="left" if col in ("scenario", "metric", "verdict") else "right")
    for c in summary["comparisons"]:
        ci = f"{formats.number(c['ci'][0])}-{formats.number(c['ci'][1])}" if c["ci"] else "-"
        ratio = formats.number(c["ratio_of_medians"])
        p = formats.p_value(c["p_adjusted"])
        colour = COLOUR.get(c["verdict"], "white")
        level_of = formats.share if c.get("statistic") == "share" else formats.ms
        t.add_row(c["scenario"], c["metric"] + (" (primary)" if c["primary"] else ""),
                  f"{c['n_baseline']}/{c['n_candidate']}", level_of(c["median_baseline"]),
                  level_of(c["median_candidate"]), ratio, ci, p, f"[{colour}]{c['verdict']}[/] ({c['reason']})")
    console.print(t)
    colour = {IMPROVEMENT: "green", REGRESSION: "red"}.get(summary["verdict"], "yellow")
    console.print(f"verdict: [bold {colour}]{summary['verdict']}[/]   rule: {summary['rule']['text']}")
    console.print(f"report: {summary['report']}\nsummary: {summary['out']}/summary.json")


def print_matrix(summary: dict) -> None:
    t = Table(title=f"scenario x variant (verdicts against {summary['baseline']})")
    for col in ("scenario", "variant", "expectations", "wakeup p50", "lost", "dup", "cross", "dlq", "verdict",
                "not met"):
        t.add_column(col, justify="left" if col in ("scenario", "variant", "verdict", "not met") else "right")
    for r in summary["overview"]:
        colour = "red" if r["failing"] else "green"
        t.add_row(r["scenario"], r["variant"], f"[{colour}]{r['expectations']}[/]", formats.ms(r["wakeup_p50_ms"]),
                  str(r["lost"]), str(r["duplicated"]), str(r["cross_topic"]), str(r["dead_lettered"]), r["verdict"],
                  "; ".join(r["failing"]) or "-")
    console.print(t)
    for s, why in summary["failed_runs"].items():
        console.print(f"[red]scenario {s}: run failed:[/] {why}")
    console.print(f"report: {summary['report']}\nsummary: {summary['out']}/summary.json")


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
    console.print(t)
    for v in result["variants"]:
        held = "no rate asked" if v["holds_up_to_per_s"] is None else f"{v['holds_up_to_per_s']:g} messages/s"
        broke = f"; breaks at {v['breaks_at_per_s']:g}/s ({'; '.join(v['why'])})" if v["breaks_at_per_s"] else ""
        console.print(f"[bold]{v['variant']}[/]: holds up to {held}{broke}" + (f"; {v['note']}" if v["note"] else ""))
    for rate, why in result["failed"].items():
        console.print(f"[red]step at {rate}/s: run failed:[/] {why}")


def print_calibration(result: dict) -> None:
    def pct(r: dict) -> str:
        if r["rate"] is None:
            return "-"
        bound = f"; at most {r['upper']:.1%} (one-sided 95%)" if r.get("upper") is not None else ""
        return f"{r['rate']:.0%} ({r['k']}/{r['n']}; 95% CI {r['ci'][0]:.0%}-{r['ci'][1]:.0%}{bound})"

    t = Table(title=f"the verdict rule on {result['variant']}, each run judged on its own")
    for col in ("control", "what counts", "rate", "verdicts"):
        t.add_column(col)
    aa = result["aa"]
    t.add_row("A/A: two identical builds", "improvement or regression (false)", pct(aa),
              ", ".join(f"{k} {v}" for k, v in aa["verdicts"].items()))
    for s in result["shifts"]:
        t.add_row(f"+{s['delay_ms']} ms on every wakeup", "regression (detected)", pct(s),
                  ", ".join(f"{k} {v}" for k, v in s["verdicts"].items()))
    console.print(t)
    effect = aa.get("order_effect")
    if effect:
        console.print(f"order: the variant brought up second was {effect['second_over_first']:.3g}x the first "
                      f"(95% CI {effect['ci'][0]:.3g}-{effect['ci'][1]:.3g}; slower in {effect['second_slower_in']} "
                      f"of {effect['runs']} A/A runs)")


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
    console.print(t)
    for s in summary["over_releases"]:
        if s["change_points"]:
            console.print(f"{s['scenario']} {s['metric']} over releases: " + ", ".join(
                f"{c['direction']} at {c['version']}" for c in s["change_points"]))
    for s in summary["regressions"]:
        c = s["newest_starts_regression"]
        console.print(f"[red]regression starting at run {c['run_id']}[/]: {s['scenario']} / {s['variant']} / "
                      f"{s['metric']}")
    console.print(f"{len(summary['runs_added'])} run(s) added; report: {summary['report']}")


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
        console.print(t)
        print_hybrids({r["version"] or r["variant"]: r.get("hybrid") for r in sc["releases"]})
        for r in sc["releases"]:
            if r.get("probe_note"):
                console.print(f"[yellow]{name} on {r['version']}: no wakeup counts[/]: {r['probe_note']}")
    print_defects(summary)
    for v, why in summary["skipped"].items():
        console.print(f"[yellow]not run: RocketMQ {v}[/]: {why}")
    for s, why in summary["failed_runs"].items():
        console.print(f"[red]run failed: {s}[/]: {why}")
    for s, why in summary["not_applicable"].items():
        console.print(f"[yellow]not applicable: {s}[/]: {why}")
    console.print(f"report: {summary['report']}\nsummary: {summary['out']}/summary.json")


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
    console.print(t)


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
    console.print(t)
    if result.outcome == "found":
        console.print(f"[bold]first build behaving like {result.points[-1]}: {result.first}[/] "
                      f"(the one before it, {result.last_like_older}, behaves like {result.points[0]})")
    else:
        console.print(f"[yellow]bisect ended: {result.outcome}[/]")
