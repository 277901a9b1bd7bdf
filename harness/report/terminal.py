"""The results in the terminal: one printer per kind of result (a run's summary, a comparison, a matrix, a
sweep, a bisection, a calibration, the history), over the dicts the run and the analysis write. Only prints."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from harness.contracts.endpoints import Endpoints
from harness.contracts.verdict import IMPROVEMENT, INCONCLUSIVE, NOT_ENOUGH, REGRESSION, SHARE, STATISTIC
from harness.contracts.workers import DEFAULT_GRPC_CLIENT
from harness.core.errors import one_line
from harness.core.publish import json_safe
from harness.report import formats
from harness.report.finding import sentence
from harness.report.records import COMPARISON_FIELDS, SUMMARY_FIELDS, comparison_records, summary_record

# How results print: tables for people, or rows for programs on stdout (progress then goes to stderr).
TABLE, TSV, JSON = "table", "tsv", "json"
FORMATS = (TABLE, TSV, JSON)
# Piped output with no COLUMNS (a file, a pipe into less) gets wide lines; a terminal its own width, and COLUMNS
# wins wherever it is set (CI logs set it to the width they show): rich reads both itself when given no width.
PIPED_WIDTH = 160


def _width(stream: object) -> int | None:
    return None if stream.isatty() or os.environ.get("COLUMNS", "").strip().isdigit() else PIPED_WIDTH


console = Console(highlight=False, width=_width(sys.stdout))
err_console = Console(stderr=True, highlight=False, width=_width(sys.stderr))


COLOUR = {IMPROVEMENT: "green", REGRESSION: "red", NOT_ENOUGH: "yellow", INCONCLUSIVE: "yellow"}


def line(label: str, colour: str, message: object) -> Text:
    """``label message`` as one line, the message as written: not rich markup ('[/]', '[a-z0-9]'), no emoji codes
    (':cat:'), line breaks escaped."""
    return Text.assemble((label, colour), " ", one_line(message))


def log(text: str) -> None:
    """A progress line, dimmed, wrapped at the width; taken as written (a PID list is no markup)."""
    console.print(Text(one_line(text), style="dim"))


def log_to(out: Console) -> Callable[[str], None]:
    """``log`` onto ``out``: stdout beside the tables, stderr when stdout carries rows (--format tsv|json)."""
    return lambda text: out.print(Text(one_line(text), style="dim"))


def progress_console(fmt: str) -> Console:
    """Where a command's progress goes when its results print as ``fmt``: rows for programs keep stdout."""
    return console if fmt == TABLE else err_console


def labelled(label: str, colour: str, message: object) -> Table:
    """``label message`` wrapped at the width under the message's first word (a hanging indent): a wrapped
    warning still reads as one, its first line starting with its label; the message as written (``line``)."""
    grid = Table.grid(padding=(0, 1, 0, 0))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    grid.add_row(Text(label, style=colour), Text(one_line(message)))
    return grid


def warn(text: str) -> None:
    err_console.print(labelled("warning:", "yellow", text))


def place(path: str | Path) -> str:
    """A path as the reader can use it from here: relative when under the working directory (shorter lines); a
    URI (s3://) as it is."""
    if "://" in str(path):
        return str(path)
    p = Path(path)
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(p)


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


# A cell wraps (on spaces) past this many columns, or past its column's name when that is longer: names and
# figures stay whole, and a long cell (a fault's open wait) takes lines, not the width of the others.
CELL_WIDTH = 18


def _text(cell: str | Text) -> Text:
    return cell if isinstance(cell, Text) else Text(cell)


def _column_width(header: str, cells: Sequence[str | Text]) -> int:
    """A column's width on the screen: its name whole (each line of it), its cells up to CELL_WIDTH."""
    name = max(Text(part).cell_len for part in header.split("\n"))
    return max(name, min(CELL_WIDTH, max((_text(c).cell_len for c in cells), default=0)))


def _chunks(label_width: int, widths: Sequence[int], room: int) -> list[range]:
    """The columns in runs that fit ``room`` beside the label column (at least one a run): a run's width is
    its columns' and the label column's, plus padding (2) and a border (1) each, plus the last border."""
    runs, start, used = [], 0, label_width + 4
    for i, w in enumerate(widths):
        if i > start and used + w + 3 > room:
            runs.append(range(start, i))
            start, used = i, label_width + 4
        used += w + 3
    runs.append(range(start, len(widths)))
    return runs


def _transposed(title: str, labels: Sequence[str], columns: Sequence[tuple[str, Sequence[str | Text]]]) -> None:
    """Figures as rows (``labels``), one column per name (a variant, a metric, a fault): at every width each name
    whole, never cut (rich would ellipsize a squeezed column: 'patch…'); the columns that do not fit beside
    the first ones go to tables below, each with the row labels."""
    label_width = max((Text(label).cell_len for label in labels), default=0)
    widths = [_column_width(header, cells) for header, cells in columns]
    for n, run in enumerate(_chunks(label_width, widths, console.width)):
        t = Table(title=title if n == 0 else None, title_justify="left")
        t.add_column("", no_wrap=True, overflow="fold")
        for i in run:
            t.add_column(columns[i][0], justify="right", overflow="fold", min_width=min(widths[i], console.width),
                         max_width=widths[i])
        for r, label in enumerate(labels):
            t.add_row(label, *(_text(columns[i][1][r]) for i in run))
        console.print(t)


def _whole(t: Table) -> None:
    """A wide table (a sweep, a matrix, a ramp) as wide as its cells need when the console is narrower: a long
    line rather than a figure or a verdict cut to 'improvem…' (the run's own tables are transposed instead)."""
    need = Measurement.get(console, console.options.update(width=10_000), t).maximum
    narrow = console.width
    console.width = max(need, narrow)  # print caps its width= at the console's own
    try:
        console.print(t)
    finally:
        console.width = narrow


def note(text: str) -> None:
    """What a table's figures mean, under it: dimmed, wrapped at the width."""
    console.print(Text(text, style="dim"))


def _several(items: Iterable[str]) -> bool:
    return len(set(items)) > 1


def _stalled(r: Mapping) -> str:
    """Retries that waited for a poll to run out, of those asked for (archives before summary schema 4: -)."""
    return "-" if r["stalled"] is None else f"{r['stalled']}/{r['stalled_of']}"


# The rows of a run's summary table: a figure's name, and how a record (harness.report.records) spells it.
SUMMARY_ROWS: tuple[tuple[str, Callable[[Mapping], str]], ...] = (
    ("cycles", lambda r: str(r["cycles"])),
    ("sent", lambda r: str(r["sent"])),
    ("retries", lambda r: str(r["retries"])),
    ("wakeup n", lambda r: str(r["wakeup_n"])),
    ("wakeup p50", lambda r: formats.ms(r["wakeup_p50_ms"])),
    ("wakeup p90", lambda r: formats.ms(r["wakeup_p90_ms"])),
    ("wakeup max", lambda r: formats.ms(r["wakeup_max_ms"])),
    ("pickup n", lambda r: str(r["pickup_n"])),
    ("pickup p50", lambda r: formats.ms(r["pickup_p50_ms"])),
    ("redelivery p50", lambda r: formats.ms(r["redelivery_p50_ms"])),
    ("nack -> retry p50", lambda r: formats.ms(r["nack_retry_p50_ms"])),
    ("stalled", _stalled),
    ("never redelivered", lambda r: f"{r['never_redelivered']}/{r['retries_expected']}"),
    ("lost", lambda r: str(r["lost"])),
    ("duplicated", lambda r: str(r["duplicated"])),
    ("cross-topic", lambda r: str(r["cross_topic"])),
    ("errors", lambda r: str(r["errors"])),
)
SUMMARY_NOTE = ("wakeup: receive - the retry copy's store time, for a poll already waiting; pickup: the same, for a "
                "poll that started later; redelivery: receive - nack due; nack -> retry: receive - nack (the "
                "seed's measure); stalled: retries that waited for a poll to run out.")


def print_summary(summary: Sequence[dict]) -> None:
    """A run's figures per variant: one column a variant (its scenario above its name when they differ)."""
    records = [summary_record(s) for s in summary]
    several = _several(r["scenario"] for r in records)
    columns = [((f"{r['scenario']}\n" if several else "") + variant_label(r["variant"], r["hybrid"]),
                [spell(r) for _, spell in SUMMARY_ROWS]) for r in records]
    title = "per variant" if several or not records else f"{records[0]['scenario']}, per variant"
    _transposed(title, [label for label, _ in SUMMARY_ROWS], columns)
    note(SUMMARY_NOTE)
    print_hybrids({s["variant"]: s.get("hybrid") for s in summary})
    print_grpc_clients({s["variant"]: s.get("grpc_client") for s in summary})


def print_grpc_clients(clients: Mapping[str, str | None]) -> None:
    """A line under a table when its gRPC variants were not all driven by the official client alone: which
    client drove each, and a warning when they differ (a difference may then be the clients')."""
    used = {name: c for name, c in clients.items() if c}
    if not used or set(used.values()) == {DEFAULT_GRPC_CLIENT}:
        return
    which = ", ".join(f"{name} {c}" for name, c in used.items())
    if len(set(used.values())) == 1:
        console.print(f"gRPC client: {which} (--grpc-client)")
    else:
        console.print(f"[yellow]gRPC clients differ: {which}[/] (a difference between these variants may be "
                      "the clients')")


def variant_label(name: str, hybrid: str | None) -> str:
    """A variant's name in a table, marked when it is a hybrid release (print_hybrids says of what)."""
    return f"{name} (hybrid)" if hybrid else name


def print_hybrids(notes: Mapping[str, str | None]) -> None:
    """One line per hybrid release under a table: which of its modules came from which release."""
    for name, text in notes.items():
        if text:
            console.print(f"[yellow]{name} is a {text}[/] (its own are not on Maven Central; the manifest lists "
                          "every module jar with its sha256)")


def _open_ms(ms: float | None, still_open: bool | None, how: str) -> str:
    """A duration that may have no end in sight: at least this long, and ``how`` it ended."""
    return "-" if ms is None else f">= {formats.ms(ms)} ({how})" if still_open else formats.ms(ms)


def _count(v: int | None) -> str:
    return "-" if v is None else str(v)


FAULT_ROWS: tuple[tuple[str, Callable[[Mapping], str]], ...] = (
    ("away", lambda f: "-" if f["window_s"] is None else f"{f['window_s']:.1f} s"),
    ("in flight", lambda f: _count(f["exposed"])),
    ("lost", lambda f: _count(f["lost"])),
    ("duplicated", lambda f: _count(f["duplicated"])),
    ("dead-lettered", lambda f: _count(f["dead_lettered"])),
    ("acked after retry", lambda f: _count(f["acked_after_retry"])),
    ("longest wait", lambda f: _open_ms(f["longest_wait_ms"], f["longest_wait_open"], "never delivered")),
    ("sends stopped", lambda f: _open_ms(f.get("send_gap_ms"), f.get("send_gap_open"), "none since")),
    ("deliveries stopped", lambda f: _open_ms(f.get("delivery_gap_ms"), f.get("delivery_gap_open"), "none since")),
    ("error", lambda f: f["error"] or "-"),
)
FAULT_NOTE = ("in flight: the (message, group) pairs sent before the target was back and not yet acked when the "
              "fault began; longest wait: for a delivery of one of them; sends and deliveries stopped: the longest "
              "gap between successful ones, overlapping the fault.")


def print_faults(summary: Sequence[dict]) -> None:
    """Per fault and variant (a column each): how long its target was away, what happened to the messages in
    flight, and how long sends and deliveries stopped."""
    rows = [f for s in summary for f in s.get("faults") or []]
    if not rows:
        return
    columns = [(f"{f['variant']}\n{f['label']}\nat {f['at_s']:g} s", [spell(f) for _, spell in FAULT_ROWS])
               for f in rows]
    _transposed("faults", [label for label, _ in FAULT_ROWS], columns)
    note(FAULT_NOTE)


def print_probes(probes: dict[str, list[dict]]) -> None:
    """Wakeups seen by the broker-side probe, per variant, group and cause."""
    t = Table(title="long-poll wakeups inside the broker (pop-wakeup-probe)", title_justify="left")
    t.add_column("variant", no_wrap=True, overflow="fold",
                 min_width=min(max(map(len, probes), default=1), console.width // 2))
    for col in ("group", "cause"):
        t.add_column(col, overflow="fold")
    for col in ("wakeups", "found nothing, re-suspended"):
        t.add_column(col, justify="right")
    for variant, samples in probes.items():
        rows: dict[tuple[str, str], list[float]] = {}
        for s in samples:
            if s["name"] in ("rmq_probe_pop_wakeups_total", "rmq_probe_pop_empty_wakeups_total"):
                cell = rows.setdefault((s["group"], s["cause"]), [0.0, 0.0])
                cell[0 if s["name"] == "rmq_probe_pop_wakeups_total" else 1] += s["value"]
        for (group, cause), (woken, empty) in sorted(rows.items()):
            t.add_row(variant, group, cause, f"{woken:.0f}", f"{empty:.0f}")
    console.print(t)


def _interval(r: Mapping) -> str:
    return "-" if r["ci_low"] is None else f"{formats.number(r['ci_low'])}-{formats.number(r['ci_high'])}"


def print_comparison(summary: dict) -> None:
    """A comparison: one column a metric, its figures as rows; why each verdict, and where the report went."""
    rule = summary["rule"]
    level = f"{1 - rule['alpha'] * (2 if rule.get('one_sided') else 1):.0%}"
    base, cand = summary["baseline"], summary["candidate"]
    records = comparison_records(summary)
    several = _several(r["scenario"] for r in records)
    labels = ["cycles b/c", f"{base} (baseline)", f"{cand} (candidate)", "ratio", f"{level} interval", "p (adj.)",
              "verdict"]
    columns = []
    for r in records:
        name = (f"{r['scenario']}\n" if several else "") + r["metric"] + (" (primary)" if r["primary"] else "")
        columns.append((name, [f"{r['cycles_baseline']}/{r['cycles_candidate']}",
                               formats.level(r["level_baseline"], r["statistic"]),
                               formats.level(r["level_candidate"], r["statistic"]), formats.number(r["ratio"]),
                               _interval(r), formats.p_value(r["p_adjusted"]),
                               Text(r["verdict"], style=COLOUR.get(r["verdict"], "white"))]))
    _transposed(f"{cand} against {base}, per cycle", labels, columns)
    for r in records:
        note(f"{r['scenario'] + ' ' if several else ''}{r['metric']}: {r['reason']}")
    print_grpc_clients({r["variant"]: r.get("grpc_client") for r in summary.get("per_variant", [])
                        if r["variant"] in (base, cand)})
    colour = {IMPROVEMENT: "green", REGRESSION: "red"}.get(summary["verdict"], "yellow")
    # The rule in full is in summary.json and the report (README: "The verdict rule"): not four lines here.
    console.print(Text.assemble("verdict: ", (summary["verdict"], f"bold {colour}")))
    console.print(sentence(summary), markup=False)
    console.print(f"report: {place(summary['report'])}", markup=False)
    console.print(f"summary: {place(Path(summary['out']) / 'summary.json')}", markup=False)


def print_records(records: Sequence[Mapping], fields: Sequence[str], fmt: str, **about: object) -> None:
    """Rows for programs, on stdout as written (never wrapped): ``tsv``, a header line and a line per record
    (empty for none), then a blank line, so that the blocks of one command stay apart; ``json``, one document
    a line with ``about`` and the records as ``rows``."""
    if fmt == JSON:
        doc = {**about, "rows": [{k: r[k] for k in fields} for r in records]}
        sys.stdout.write(json.dumps(json_safe(doc), allow_nan=False) + "\n")
    else:
        sys.stdout.write("\t".join(fields) + "\n")
        for r in records:
            sys.stdout.write("\t".join(_tsv(r[k]) for k in fields) + "\n")
        sys.stdout.write("\n")
    sys.stdout.flush()


def _tsv(v: object) -> str:
    """A TSV field: empty for none, six significant digits for a figure, text with tabs and breaks as spaces."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float):
        return format(v, ".6g")
    return " ".join(str(v).split())


def print_summary_as(summary: Sequence[dict], fmt: str, archive: str | Path | None = None) -> None:
    """A run's figures per variant as ``fmt`` (a table, or rows for programs)."""
    if fmt == TABLE:
        print_summary(summary)
        return
    print_records([summary_record(s) for s in summary], SUMMARY_FIELDS, fmt, kind="variants",
                  **({"run_archive": str(archive)} if archive is not None else {}))


def print_comparison_as(summary: dict, fmt: str) -> None:
    """A comparison as ``fmt`` (a table, or rows for programs)."""
    if fmt == TABLE:
        print_comparison(summary)
        return
    print_records(comparison_records(summary), COMPARISON_FIELDS, fmt, kind="comparison",
                  verdict=summary["verdict"], report=summary["report"],
                  summary=str(Path(summary["out"]) / "summary.json"))


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
    _whole(t)
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
    _whole(t)
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
    _whole(t)
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
    _whole(t)
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
        _whole(t)
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
    _whole(t)


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
    _whole(t)
    if result.outcome == "found":
        console.print(f"[bold]first build behaving like {result.points[-1]}: {result.first}[/] "
                      f"(the one before it, {result.last_like_older}, behaves like {result.points[0]})")
    else:
        console.print(f"[yellow]bisect ended: {result.outcome}[/]")
