"""What a run shows in the terminal: its brokers' endpoints, its figures per variant (one column a variant),
what each fault did, the broker-side probe's wakeups, and the lines that say which variants are hybrid
releases or were driven by another gRPC client."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from rich.markup import escape
from rich.table import Table

from harness.contracts.endpoints import Endpoints
from harness.contracts.workers import DEFAULT_GRPC_CLIENT
from harness.report import console, formats
from harness.report.records import summary_record
from harness.report.tables import note, print_transposed, several


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
        console.console.print(title)
        console.console.print(grid, soft_wrap=True)


def _stalled(r: Mapping) -> str:
    """Retries that waited for a poll to run out, of those asked for (archives before summary schema 4: -)."""
    return "-" if r["stalled"] is None else f"{r['stalled']}/{r['stalled_of']}"


# The rows of a run's summary table: a figure's name, and how a record (harness.report.records) spells it.
SUMMARY_ROWS: tuple[tuple[str, Callable[[Mapping], str]], ...] = (
    ("cycles", lambda r: f"{r['cycles']} ({r['cycles_timed_out']} timed out)" if r["cycles_timed_out"]
     else str(r["cycles"])),
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
    by_scenario = several(r["scenario"] for r in records)
    columns = [((f"{r['scenario']}\n" if by_scenario else "") + variant_label(r["variant"], r["hybrid"]),
                [spell(r) for _, spell in SUMMARY_ROWS]) for r in records]
    title = "per variant" if by_scenario or not records else f"{records[0]['scenario']}, per variant"
    print_transposed(title, [label for label, _ in SUMMARY_ROWS], columns)
    note(SUMMARY_NOTE)
    print_timeouts(records)
    print_hybrids({s["variant"]: s.get("hybrid") for s in summary})
    print_grpc_clients({s["variant"]: s.get("grpc_client") for s in summary})


def print_timeouts(records: Sequence[Mapping]) -> None:
    """A line per variant whose losses may be late arrivals: cycles the run stopped waiting for while pairs were
    still owed (their cycles.drain_timeout_s ran out)."""
    for r in records:
        if r["cycles_timed_out"] and (r["lost"] or r["never_redelivered"]):
            note(f"{r['variant']}: {r['cycles_timed_out']} of {r['cycles']} cycles timed out (cycles.drain_timeout_s "
                 f"ran out): their lost and never redelivered were not back when the run stopped waiting, late or "
                 f"lost alike; a longer drain_timeout_s tells which.")


def print_grpc_clients(clients: Mapping[str, str | None]) -> None:
    """A line under a table when its gRPC variants were not all driven by the official client alone: which
    client drove each, and a warning when they differ (a difference may then be the clients')."""
    used = {name: c for name, c in clients.items() if c}
    if not used or set(used.values()) == {DEFAULT_GRPC_CLIENT}:
        return
    which = ", ".join(f"{name} {c}" for name, c in used.items())
    if len(set(used.values())) == 1:
        console.console.print(f"gRPC client: {which} (--grpc-client)")
    else:
        console.console.print(f"[yellow]gRPC clients differ: {which}[/] (a difference between these variants may "
                              "be the clients')")


def variant_label(name: str, hybrid: str | None) -> str:
    """A variant's name in a table, marked when it is a hybrid release (print_hybrids says of what)."""
    return f"{name} (hybrid)" if hybrid else name


def print_hybrids(notes: Mapping[str, str | None]) -> None:
    """One line per hybrid release under a table: which of its modules came from which release."""
    for name, text in notes.items():
        if text:
            console.console.print(f"[yellow]{name} is a {text}[/] (its own are not on Maven Central; the manifest "
                                  "lists every module jar with its sha256)")


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
    print_transposed("faults", [label for label, _ in FAULT_ROWS], columns)
    note(FAULT_NOTE)


def print_expectations(checked: Mapping[str, Sequence[dict]]) -> None:
    """The scenario's expect: rules checked against each variant's row (variant -> its checks, in the rules' order,
    harness.inputs.expectations.evaluate): the value and whether a correct broker's rule holds."""
    if not checked or not next(iter(checked.values())):
        return
    t = Table(title="what a correct broker shows (expect:)", title_justify="left")
    t.add_column("rule", overflow="fold")
    for variant in checked:
        t.add_column(escape(variant), justify="right")
    for i, first in enumerate(next(iter(checked.values()))):
        cells = [f"{c[i]['status']} {'-' if c[i]['value'] is None else formats.number(c[i]['value'])}"
                 for c in checked.values()]
        t.add_row(escape(first["rule"]), *cells)
    console.console.print(t)


ACTION_NOTE = ("an action is an admin request of the scenario (actions:), made on every variant at the same moment of "
               "its load; at: when it began after the load started.")


def print_actions(summary: Sequence[dict]) -> None:
    """Per action and variant: when it was carried out and what the brokers answered, or what went wrong."""
    rows = [a for s in summary for a in s.get("actions") or []]
    if not rows:
        return
    t = Table(title="actions", title_justify="left")
    for col in ("variant", "action", "planned", "at", "answer"):
        t.add_column(col, overflow="fold")
    for a in rows:
        at = "-" if a.get("at_s") is None else f"{a['at_s']:.1f} s"
        answer = f"[red]error: {escape(a['error'])}[/red]" if a.get("error") else escape(a.get("result") or "-")
        t.add_row(escape(a["variant"]), escape(a["label"]), a["when"], at, answer)
    console.console.print(t)
    note(ACTION_NOTE)


def print_probes(probes: dict[str, list[dict]]) -> None:
    """Wakeups seen by the broker-side probe, per variant, group and cause."""
    t = Table(title="long-poll wakeups inside the broker (pop-wakeup-probe)", title_justify="left")
    t.add_column("variant", no_wrap=True, overflow="fold",
                 min_width=min(max(map(len, probes), default=1), console.console.width // 2))
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
    console.console.print(t)
