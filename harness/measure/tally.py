"""What the events of a set of whole messages add to a summary, and the summary made of them.

``slice_facts`` takes events holding every event of each message they hold (a whole run, or the slice of a
run's messages one Spark task reads) and returns the retry deliveries (harness.measure.latency.retry_rows), the
ledger rows (harness.measure.ledger.classify) and additive tallies per (run, scenario, variant, cycle). A summary
over any number of slices is the sum of their tallies and the quantiles of their retry rows
(``totals``, ``nest``): the run's own summary (``SlicesSummary``) adds up the slices its archive's merge
hands it, the Spark analysis the slices of many archives. One definition of every count, whichever engine adds them up.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa

from harness.inputs import timing
from harness.inputs.expectations import COUNTS, DISTRIBUTIONS, ERROR_CALLS, LEDGER, SELECTED
from harness.inputs.scenario import Scenario
from harness.inputs.selections import Selection
from harness.measure import frames, ledger, ordering
from harness.measure.fault_impact import TIMES as FAULT_TIMES
from harness.measure.fault_impact import impact
from harness.measure.latency import QUANTILES, column, retry_outcomes, retry_rows, stall_counts

BY_RUN = ["run_id", "scenario", "variant"]
# Events of these kinds are counted under these names.
KIND_TALLIES = {"sent": "sent", "received": "deliveries", "acked": "acks", "nacked": "nacks",
                "empty_poll": "empty_polls", "error": "errors", "refused": "refused"}
TALLIES = (*[c for c in COUNTS if c != "cycles"], *[f"ledger_{k}" for k in LEDGER], "stalled_count")
TALLY_SCHEMA = pa.schema([("run_id", pa.string()), ("scenario", pa.string()), ("variant", pa.string()),
                          ("cycle", pa.int32()), ("name", pa.string()), ("value", pa.int64())])
# The tallies counted per message (each message once, whatever its groups).
MESSAGE_TALLIES = ("ledger_sent", "ledger_received", "ledger_acked", "ledger_never_received",
                   "ledger_unknown_received")
# Counted besides TALLIES, not summarised: events of FIFO messages, errors reading a dead-letter queue.
CHECKS = ("fifo_events", "dlq_reader_errors")
STATISTICS = ("n", *[f"p{round(q * 100)}" for q in QUANTILES], "max")


@dataclass(frozen=True)
class Facts:
    retries: pd.DataFrame  # harness.measure.latency.RETRY_SCHEMA
    ledger: pd.DataFrame  # harness.measure.ledger.SCHEMA
    tallies: pd.DataFrame  # TALLY_SCHEMA, long: one row per (run, scenario, variant, cycle, name)


def _sums(keys: pd.DataFrame, values: Mapping[str, np.ndarray | pd.Series]) -> pd.DataFrame:
    """Per distinct row of ``keys`` (a null is a value of its own): the sums of ``values`` and ``rows``, the
    number of rows (numpy over harness.measure.frames' integer per row)."""
    dense, frame = frames.levels(keys, list(keys.columns), frames.codes(keys, list(keys.columns)))
    frame["rows"] = np.bincount(dense, minlength=len(frame)).astype(np.int64)
    for name, v in values.items():
        sums = np.bincount(dense, weights=np.asarray(v, dtype=float), minlength=len(frame))
        frame[name] = np.rint(sums).astype(np.int64)
    return frame


def _long(frame: pd.DataFrame, names: Sequence[str]) -> pd.DataFrame:
    """Per-(run, scenario, variant, cycle) columns ``names`` -> TALLY_SCHEMA rows (zeros left out)."""
    out = frame.melt(id_vars=[*BY_RUN, "cycle"], value_vars=list(names), var_name="name", value_name="value")
    return out[out["value"] != 0]


def _kinds(ev: pd.DataFrame) -> pd.DataFrame:
    per = _sums(ev[[*BY_RUN, "cycle", "kind"]], {})
    per["kind"] = per["kind"].map(KIND_TALLIES)
    return per.dropna(subset=["kind"]).pivot_table(index=[*BY_RUN, "cycle"], columns="kind", values="rows",
                                                   aggfunc="sum", fill_value=0, dropna=False).reset_index()


def _messages(ev: pd.DataFrame, keys: np.ndarray) -> pd.DataFrame:
    """Per message (``keys``: ledger.message_keys): sent, received, acked; counted in its first cycle."""
    kind = ev["kind"]
    seen = kind.isin(["sent", "received", "acked"]).to_numpy()
    dense, first = frames.levels(ev, BY_RUN, keys[seen], np.flatnonzero(seen))
    flags = {k: np.bincount(dense, weights=(kind == k).to_numpy(dtype=float)[seen], minlength=len(first)) > 0
             for k in ("sent", "received", "acked")}
    first["cycle"] = pd.Series(ev["cycle"].to_numpy()[seen]).groupby(dense).min().to_numpy()
    sent, received, acked = flags["sent"], flags["received"], flags["acked"]
    return _sums(first, {"ledger_sent": sent, "ledger_received": sent & received, "ledger_acked": sent & acked,
                         "ledger_never_received": sent & ~received, "ledger_unknown_received": ~sent & received})


@dataclass(frozen=True)
class Routing:
    """What a run's facts depend on besides its events, from its scenario: whom a message sent to a topic is owed
    (topic -> groups -> their consumers' tag filters), how many deliveries each group allows (retryMaxTimes + 1),
    the long poll a stalled retry waited out (ms), and when an ack is late (harness.inputs.timing.late_after_ms)."""

    subscriptions: ledger.Subscriptions
    allowed_deliveries: Mapping[str, int]
    long_poll_ms: float
    late_after_ms: float | None = None
    selections: Mapping[str, Selection] = field(default_factory=dict)  # the scenario's select:

    @classmethod
    def of(cls, scenario: Scenario) -> Routing:
        return cls({t: {g: list(f) for g, f in gs.items()} for t, gs in scenario.subscriptions().items()},
                   dict(scenario.allowed_deliveries()), scenario.consume.long_poll_s * 1000,
                   timing.late_after_ms(scenario), dict(scenario.select))


def slice_facts(events: pd.DataFrame, routing: Routing) -> Facts:
    """The facts of ``events`` (whole messages of one scenario; any runs and variants of it)."""
    subscriptions, allowed_deliveries = routing.subscriptions, routing.allowed_deliveries
    long_poll_ms, late_after_ms = routing.long_poll_ms, routing.late_after_ms
    ev = events.copy(deep=False)  # a column added below must not reach the caller's frame
    ev["cycle"] = (ev["cycle"] if "cycle" in ev.columns else pd.Series(0, index=ev.index)).fillna(0)
    keys = ledger.message_keys(ev)
    # latency.message_codes from the keys at hand (the ledger id's factorisation is the costly part): the
    # same equalities, and -1 wherever a key column is missing.
    messages = frames.codes(pd.DataFrame({"key": keys, "group": ev["group"]}), ["key", "group"], nulls=False)
    messages[pd.DataFrame({c: ev[c] for c in [*BY_RUN, "ledger_id"]}).isna().any(axis=1).to_numpy()] = -1
    retries = retry_rows(ev, messages)
    outcomes = retry_outcomes(ev, allowed_deliveries, long_poll_ms, retries, messages)
    rows = ledger.classify(ev, subscriptions, allowed_deliveries, keys, late_after_ms)
    by_cycle = [*BY_RUN, "cycle"]
    kinds = _kinds(ev)
    led = ledger.tallies(rows.assign(cycle=rows["cycle"].fillna(0)), by_cycle).add_prefix("ledger_").reset_index()
    out = _sums(outcomes[by_cycle], {"ledger_retries_never_redelivered": ~outcomes["redelivered"],
                                     "stalled_count": outcomes["stalled"]})
    parts = [
        _long(kinds, [c for c in kinds.columns if c in KIND_TALLIES.values()]),
        _long(_sums(retries[by_cycle], {}).rename(columns={"rows": "retry_deliveries"}), ["retry_deliveries"]),
        _long(_messages(ev, keys), MESSAGE_TALLIES),
        _long(led, [c for c in led.columns if c.startswith("ledger_")]),
        _long(out.rename(columns={"rows": "ledger_retries_expected"}),
              ["ledger_retries_expected", "ledger_retries_never_redelivered", "stalled_count"]),
    ]
    # What tells the analysis whether the FIFO and dead-letter reader checks have anything to look at.
    fifo = column(ev, "message_group").notna().to_numpy()
    is_error = (ev["kind"] == "error").to_numpy()
    errors = np.zeros(len(ev), dtype=bool)
    if is_error.any():
        topics = column(ev, "topic")[is_error].astype(object).fillna("")
        errors[is_error] = topics.str.startswith("%DLQ%").to_numpy(dtype=bool)
    # Deliveries under another topic name than the one popped (harness.client.driver.Delivery.topic).
    renamed = column(ev, "delivered_topic").notna().to_numpy() & (ev["kind"] == "received").to_numpy()
    if renamed.any():
        parts.append(_long(_sums(ev[by_cycle], {"renamed_deliveries": renamed}), ["renamed_deliveries"]))
    if is_error.any():  # each client call's failures on their own (the recorder's detail: "<call>: <why>")
        details = column(ev, "detail")[is_error].astype(object).fillna("").astype(str)
        calls = {}
        for c in ERROR_CALLS:
            calls[f"{c}_errors"] = np.zeros(len(ev), dtype=bool)
            calls[f"{c}_errors"][is_error] = details.str.startswith(f"{c}:").to_numpy(dtype=bool)
        parts.append(_long(_sums(ev[by_cycle], calls), list(calls)))
    # The recorder's cycle_end says drained or timeout (harness.workload.recorder).
    timed_out = ((ev["kind"] == "cycle_end") & (column(ev, "detail").astype(object) == "timeout")).to_numpy(bool)
    if timed_out.any():
        parts.append(_long(_sums(ev[by_cycle], {"cycles_timed_out": timed_out}), ["cycles_timed_out"]))
    if fifo.any() or errors.any():
        parts.append(_long(_sums(ev[by_cycle], {"fifo_events": fifo, "dlq_reader_errors": errors}), CHECKS))
    if routing.selections:
        parts.append(_selected(ev, routing.selections, by_cycle, renamed))
    parts = [p for p in parts if len(p)]
    tallies = pd.concat(parts, ignore_index=True) if parts else TALLY_SCHEMA.empty_table().to_pandas()
    tallies = tallies.astype({"cycle": "int64", "value": "int64"})
    return Facts(retries, rows, tallies[TALLY_SCHEMA.names])


def selected_name(selection: str, stat: str) -> str:
    """A selection's figure as a tally's name, and as the flat column ``nest`` shapes into ``selected``."""
    return f"{SELECTED}.{selection}.{stat}"


def _selected(ev: pd.DataFrame, selections: Mapping[str, Selection], by_cycle: list[str],
              renamed: np.ndarray) -> pd.DataFrame:
    """Each selection's deliveries and distinct messages per cycle (``renamed``: the deliveries under another topic
    name than the one popped); zeros kept, so a selection nothing matched reads 0, not no data."""
    received = (ev["kind"] == "received").to_numpy()
    attempt = pd.to_numeric(column(ev, "delivery_attempt"), errors="coerce").to_numpy()
    values: dict[str, np.ndarray] = {}
    for name, s in selections.items():
        m = received.copy()
        if s.attempt is not None:
            m &= attempt == s.attempt
        if s.min_attempt is not None:
            m &= attempt >= s.min_attempt
        if s.renamed is not None:
            m &= renamed == s.renamed
        for attr in ("tag", "queue_id", "message_group", "group"):  # the event column of the same name
            wanted = getattr(s, attr)
            if wanted is not None:
                m &= (column(ev, attr).astype(object) == wanted).to_numpy(dtype=bool)
        # Distinct messages: the first matching delivery of each (run, group, message) counts one.
        picked = pd.DataFrame({c: column(ev, c)[m] for c in [*BY_RUN, "group", "ledger_id"]})
        once = np.zeros(len(ev), dtype=bool)
        once[np.flatnonzero(m)] = ~picked.duplicated().to_numpy()
        values[selected_name(name, "deliveries")] = m
        values[selected_name(name, "messages")] = once
    frame = _sums(ev[by_cycle], values)
    return frame.melt(id_vars=by_cycle, value_vars=list(values), var_name="name", value_name="value")


def totals(tallies: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Per ``by``: every TALLIES figure summed over the slices (zero included), ``runs`` (runs with events)
    and ``cycles`` (the cycles, of all runs, in which something was sent)."""
    by = list(by)
    if tallies.empty:
        return pd.DataFrame(columns=[*by, "runs", "cycles", *TALLIES])
    # The scenario's selections (selected.<name>.<stat>) come along under their own names.
    chosen = sorted(n for n in tallies["name"].unique() if str(n).startswith(f"{SELECTED}."))
    wide = (tallies.pivot_table(index=by, columns="name", values="value", aggfunc="sum", fill_value=0)
            .reindex(columns=[*TALLIES, *chosen], fill_value=0))
    wide["runs"] = tallies.groupby(by)["run_id"].nunique()
    sent = tallies[(tallies["name"] == "sent") & (tallies["value"] > 0)]
    wide["cycles"] = sent.drop_duplicates([*by, "run_id", "cycle"]).groupby(by).size()
    wide = wide.fillna({"cycles": 0}).astype({"cycles": "int64"})
    return wide.reset_index()[[*by, "runs", "cycles", *TALLIES, *chosen]]


def distributions(retries: pd.DataFrame) -> dict[str, int | float | None]:
    """The flat ``{metric}_{statistic}`` figures of a set of retry rows (numpy's linear quantiles, as Spark's)."""
    out: dict[str, int | float | None] = {}
    for m in DISTRIBUTIONS:
        v = retries[m].dropna().to_numpy(dtype=float) if m in retries else np.array([])
        out[f"{m}_n"] = int(v.size)
        for q in QUANTILES:
            out[f"{m}_p{round(q * 100)}"] = float(np.quantile(v, q)) if v.size else None
        out[f"{m}_max"] = float(v.max()) if v.size else None
    return out


def nest(row: Mapping[str, object]) -> dict:
    """A flat row (``totals`` plus ``distributions`` columns) -> the summary's shape."""
    keys = ("run_id", "scenario", "variant", "runs", *COUNTS)
    out = {k: row[k] for k in keys if k in row}
    out = {k: (int(v) if isinstance(v, int | float | np.integer | np.floating) and v is not None else v)
           for k, v in out.items()}
    out["ledger"] = {k: int(row.get(f"ledger_{k}") or 0) for k in LEDGER}
    for m in DISTRIBUTIONS:
        out[m] = {s: (int(row.get(f"{m}_n") or 0) if s == "n" else _number(row.get(f"{m}_{s}"))) for s in STATISTICS}
    out["stalled"] = stall_counts(out["ledger"]["retries_expected"], int(row.get("stalled_count") or 0))
    chosen: dict[str, dict[str, int]] = {}
    for key, v in row.items():
        if str(key).startswith(f"{SELECTED}."):
            _, name, stat = str(key).split(".")
            chosen.setdefault(name, {})[stat] = int(v or 0)
    if chosen:
        out[SELECTED] = chosen
    return out


def _number(v: object) -> float | None:
    return None if v is None or (isinstance(v, float) and np.isnan(v)) else float(v)


DISTRIBUTION_COLUMNS = [f"{m}_{s}" for m in DISTRIBUTIONS for s in STATISTICS]


def distribution_rows(retries: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Per ``by``: the ``distributions`` of its retry rows (a Spark task computes those of its groups)."""
    by = list(by)
    return pd.DataFrame([{**dict(zip(by, key if isinstance(key, tuple) else (key,), strict=True)),
                          **distributions(group)} for key, group in retries.groupby(by, sort=False)],
                        columns=[*by, *DISTRIBUTION_COLUMNS])


def table(tallies: pd.DataFrame, retries: pd.DataFrame | None, by: Sequence[str],
          dists: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per ``by``: ``totals`` and the ``distributions`` of the retry rows (or ``dists``, their
    ``distribution_rows`` computed elsewhere), flat (what ``nest`` shapes)."""
    by = list(by)
    dists = distribution_rows(retries, by) if dists is None else dists
    out = totals(tallies, by).merge(dists.astype({b: object for b in by}), on=by, how="left")
    counts = [f"{m}_n" for m in DISTRIBUTIONS]
    out[counts] = out[counts].apply(pd.to_numeric).fillna(0).astype("int64")
    return out.sort_values(by, ignore_index=True)


class SlicesSummary:
    """The run's own summary, per (scenario, variant): counts, the ledger (harness.measure.ledger:
    ``subscriptions`` topic -> its groups, ``allowed_deliveries`` group -> retryMaxTimes + 1), wakeup /
    redelivery distributions (ms), the retries that stalled (waited for the scenario's ``long_poll_ms`` to run
    out), the FIFO order checks and, when the run injected ``faults`` (harness.run.faults.FaultRecord.as_dict),
    what each did (harness.measure.fault_impact).

    Of events given in slices, each holding every event of its messages (and, for FIFO runs, of its message
    groups), added one at a time (``add``; a whole run is one slice): the slices' tallies add up
    (harness.measure.slices), and of each slice only what the summary needs stays: its tallies, its retries'
    latencies (RETAINED), its FIFO rows and, with faults, its ledger rows' times. ``result`` gives the summary
    rows."""

    # What a retry row keeps past its slice: the distributions read its latencies, the fault impact its time.
    RETAINED = ["scenario", "variant", "t_client_ns", *DISTRIBUTIONS]

    def __init__(self, routing: Routing, faults: Sequence[Mapping[str, object]] = ()) -> None:
        self.routing = routing
        self.faults = list(faults)
        self.tallies: list[pd.DataFrame] = []
        self.retries: list[pd.DataFrame] = []
        self.rows: list[pd.DataFrame] = []
        self.fifo: list[pd.DataFrame] = []

    def add(self, events: pd.DataFrame) -> None:
        facts = slice_facts(events, self.routing)
        self.tallies.append(facts.tallies)
        self.retries.append(facts.retries[self.RETAINED])
        if self.faults:
            self.rows.append(facts.ledger[["variant", "class", *FAULT_TIMES]])
        self.fifo.append(ordering.fifo_rows(events))

    def result(self) -> list[dict]:
        retries_all = (pd.concat(self.retries, ignore_index=True) if self.retries
                       else pd.DataFrame(columns=self.RETAINED))
        faults = self.faults
        impacts = impact(pd.concat(self.rows, ignore_index=True), retries_all, faults) if faults else []
        fifo_all = pd.concat(self.fifo, ignore_index=True) if self.fifo else pd.DataFrame()
        out = []
        for row in table(pd.concat(self.tallies, ignore_index=True), retries_all,
                         ["scenario", "variant"]).to_dict("records"):
            summary = nest(row)
            summary.pop("runs")
            mine = fifo_all[(fifo_all["scenario"] == row["scenario"]) & (fifo_all["variant"] == row["variant"])] \
                if not fifo_all.empty else fifo_all
            if not mine.empty:
                summary["fifo"] = ordering.fifo_counts(mine)
            if faults:
                summary["faults"] = [f for f in impacts if f["variant"] == row["variant"]]
            out.append(summary)
        return out
