"""The per-message ledger: every message a run sent and every delivery it saw, classified exactly once.

A row is a (message, group) pair. A message is owed to each group that subscribes to the topic it was
sent to (the one group its body names, or every subscriber when it names '*'). Owed pairs are classified
by the first class that applies:

  dead_lettered      the harness saw it in the group's dead-letter queue
  duplicated         delivered more often than the consumer's nacks explain: an attempt delivered twice,
                     a delivery after the ack, or an attempt k > 1 with no nack of attempt k - 1 (e.g. the
                     processing outlived the invisible time)
  late               acked, but only after the scenario's drain timeout from its send (bursts that drain): the
                     cycle had given up on it, so it is neither on time nor lost (a linger finds more of them)
  acked_first        acked, never retried
  acked_after_retry  acked after one or more retries (``retries`` says how many; a failed nack counts, as the
                     message comes back all the same)
  lost               neither acked nor dead-lettered when the run, drain phase included, ended (an ack that
                     timed out was sent again, harness.client.driver.ack_again; a pair lost after one anyway
                     says so in its why: the broker may have applied it)

A message with a tag is owed only to the groups whose consumers filter for it; ``tag_changed`` counts
owed pairs delivered with another tag than they were sent with (a retry must keep its tag).

and every delivery to a pair nobody owed is one of:

  cross_topic        a message of this run delivered to a group it was not meant for (its body names
                     another topic or group), e.g. through a retry topic two (topic, group) pairs share
  unknown            a message this run never sent (an id it did not send, or a body it cannot read)

A dead-lettered pair is also checked against the number of deliveries its group allows (retryMaxTimes +
1): ``dlq_early`` counts those dead-lettered after fewer, ``dlq_late`` after more.

One definition: the run's own summary and the Spark analysis both call ``classify`` (harness.measure.tally, over a
whole run or over slices of its messages).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from harness.inputs.fields import tag_matches
from harness.measure import frames

OWED_CLASSES = ("dead_lettered", "duplicated", "late", "acked_first", "acked_after_retry", "lost")
STRAY_CLASSES = ("cross_topic", "unknown")
CLASSES = OWED_CLASSES + STRAY_CLASSES
ANY_GROUP = "*"  # a message's body names this when every subscriber of its topic should get it
KINDS = ("sent", "received", "acked", "nacked", "error", "dlq_seen")
KEYS = ["run_id", "scenario", "variant", "ledger_id"]
PAIR = [*KEYS, "group"]
# A failed nack still gives the message back (when its invisible time runs out): it explains the next
# attempt as a nack would. A failed ack does not: what comes back after it is a duplicate.
NACK_FAILURE_PREFIX = "nack:"
# An ack whose outcome the client could not know (harness.client.driver.outcome_unknown: a timeout after it was
# sent) is an error event whose detail starts so; a pair lost after one may have been acked by the broker after
# all, and its why says so.
ACK_UNKNOWN = "ack, outcome unknown"
# A nack that asked the broker to keep the reconsume times (nack.suspend: its event's detail ends so) expects the
# message back as the same attempt, not the next (harness.workload.users).
SUSPEND_SUFFIX = "suspend"


def suspended(events: pd.DataFrame) -> pd.Series:
    """The nacked events that asked for the same attempt back (a nack with the suspend flag)."""
    nacked = (events["kind"] == "nacked").fillna(False).astype(bool)
    # The string method of the column as it is (Arrow's own for Arrow strings; 13 s of a task's 45 went to
    # making Python strings of 7.6M details first, measured); a missing or non-text detail asks for nothing.
    try:
        ends = events["detail"].str.endswith(SUSPEND_SUFFIX)
    except (KeyError, AttributeError):  # no detail column, or one without any text
        return nacked & False
    return nacked & ends.astype("boolean").fillna(False).astype(bool)

SCHEMA = pa.schema([
    ("run_id", pa.string()), ("scenario", pa.string()), ("variant", pa.string()), ("ledger_id", pa.string()),
    ("group", pa.string()), ("cycle", pa.int32()), ("origin_topic", pa.string()), ("class", pa.string()),
    ("deliveries", pa.int64()), ("repeats", pa.int64()), ("max_attempt", pa.int32()), ("retries", pa.int32()),
    ("sent_ns", pa.int64()),
    ("first_received_ns", pa.int64()), ("acked_ns", pa.int64()), ("dead_lettered_ns", pa.int64()),
    ("allowed_deliveries", pa.int32()), ("tag", pa.string()), ("tag_changed", pa.bool_()), ("why", pa.string()),
])
# A topic -> its groups -> the tag filters of their consumers.
Subscriptions = Mapping[str, Mapping[str, Sequence[str]]]
COLUMNS = SCHEMA.names
# The event columns classify reads; no other column changes its result.
INPUT_COLUMNS = ["kind", *PAIR, "topic", "origin_topic", "intended_group", "detail", "message_id", "cycle", "tag",
                 "delivery_attempt", "t_client_ns"]


def message_ids(events: pd.DataFrame) -> pd.Series:
    """The id the ledger knows each event's message by: its ledger id, or for a delivery whose body the
    harness could not read (no ledger id), its broker message id; other events without one share none."""
    unreadable = (events["kind"] == "received") & events["ledger_id"].isna()
    if not unreadable.any():
        return events["ledger_id"]
    out = events["ledger_id"].astype(object)
    out[unreadable] = "message:" + events.loc[unreadable, "message_id"].astype(str)
    return out


def message_keys(events: pd.DataFrame) -> np.ndarray:
    """An integer per event for its message: equal for equal (run, scenario, variant, message_ids)."""
    return frames.codes(pd.DataFrame({**{c: events[c] for c in KEYS[:-1]}, "ledger_id": message_ids(events)}), KEYS)


def _owed(sent: pd.DataFrame, subscriptions: Subscriptions) -> pd.DataFrame:
    def groups(row: pd.Series) -> list[str]:
        if isinstance(row["intended_group"], str) and row["intended_group"] != ANY_GROUP:
            return [row["intended_group"]]
        tag = row["tag"] if isinstance(row["tag"], str) else None
        return [g for g, filters in subscriptions.get(row["origin_topic"], {}).items()
                if any(tag_matches(f, tag) for f in filters)]

    if sent.empty:
        return sent.assign(group=pd.Series(dtype=object))
    # Once per distinct (intended group, topic, tag), not per message: a run has a handful of those.
    by = ["intended_group", "origin_topic", "tag"]
    combos = sent[by].drop_duplicates()
    combos = combos.assign(group=combos.apply(groups, axis=1))
    out = sent.merge(combos, on=by, how="left").explode("group")  # null keys match null keys
    return out[out["group"].notna()]


def classify(events: pd.DataFrame, subscriptions: Subscriptions, allowed_deliveries: Mapping[str, int],
             keys: np.ndarray | None = None, late_after_ms: float | None = None) -> pd.DataFrame:
    """The ledger of one scenario's events (any number of runs and variants of it); ``subscriptions`` maps
    each topic to its groups and their consumers' tag filters (harness.inputs.scenario.Scenario.subscriptions),
    ``allowed_deliveries`` each group to its retryMaxTimes + 1, ``late_after_ms`` (harness.inputs.timing) when
    an ack comes too late for its cycle. Returns one row per pair, ``COLUMNS``. ``keys``: message_keys(events),
    when at hand."""
    wanted = events["kind"].isin(KINDS).to_numpy()
    columns = [c for c in INPUT_COLUMNS if c in events.columns]
    # (No copy of millions of events when every one is wanted; new columns go to this frame only.)
    ev = events.copy(deep=False) if wanted.all() else events.loc[wanted, columns].copy()
    for c in INPUT_COLUMNS:
        if c not in ev.columns:  # absent from old or hand-made event tables
            ev[c] = None
    # A body the harness cannot read has no ledger id: the delivery is still counted, by message id.
    ev["ledger_id"] = message_ids(ev)
    # Every (run, scenario, variant, ledger id) becomes one integer, once: the joins below are on numbers,
    # not on four string columns (the cost of a ledger of millions of messages).
    ev["key"] = frames.codes(ev, KEYS) if keys is None else keys[wanted]
    names = ev.loc[~ev["key"].duplicated().to_numpy(), ["key", *KEYS]]
    kind = ev["kind"]
    sent = (ev.loc[kind == "sent", ["key", "topic", "origin_topic", "intended_group", "cycle", "tag", "t_client_ns"]]
            .sort_values("t_client_ns", kind="stable").drop_duplicates("key")
            .rename(columns={"t_client_ns": "sent_ns"}))
    sent["origin_topic"] = sent["origin_topic"].fillna(sent["topic"])  # the producer's topic is the origin
    # Nullable integers: times stay exact (ns) through the outer merges below.
    sent = sent.drop(columns="topic").astype({"sent_ns": "Int64"})
    owed = _owed(sent, subscriptions).drop(columns="intended_group")
    # Each (message, group) pair one integer too: key * width + the group's number (a missing group is one).
    event_groups, groups = pd.factorize(ev["group"], use_na_sentinel=False)
    number = {g: i for i, g in enumerate(groups)}
    for g in owed["group"].unique():
        number.setdefault(g, len(number))
    width = max(1, len(number))
    pair = "pair"
    ev["pair"] = ev["key"].to_numpy() * width + event_groups
    owed["pair"] = owed["key"].to_numpy() * width + owed["group"].map(number).to_numpy(dtype=np.int64)

    recv = ev.loc[kind == "received", [pair, "delivery_attempt", "t_client_ns", "tag"]]
    recv = recv.rename(columns={"tag": "received_tag"})
    acked = (ev.loc[kind == "acked", [pair, "t_client_ns"]].groupby(pair)["t_client_ns"].min()
             .rename("acked_ns").astype("Int64").reset_index())
    dead = (ev.loc[kind == "dlq_seen", [pair, "t_client_ns"]].groupby(pair)["t_client_ns"].min()
            .rename("dead_lettered_ns").astype("Int64").reset_index())
    failed_nack = (kind == "error") & ev["detail"].fillna("").str.startswith(NACK_FAILURE_PREFIX)
    nacked = ((kind == "nacked") | failed_nack) & ev["group"].notna()
    keep = suspended(ev)  # the same attempt comes back
    nacks = ev.loc[nacked, [pair, "delivery_attempt"]].assign(same=keep[nacked]).dropna()
    explained = (nacks.assign(delivery_attempt=nacks["delivery_attempt"] + (~nacks.pop("same")).astype(int))
                 .drop_duplicates().assign(explained=True))
    again = (ev.loc[keep & ev["group"].notna(), [pair, "delivery_attempt"]].dropna().drop_duplicates()
             .assign(again=True))
    retries = explained.groupby(pair).size().rename("retries").reset_index()

    r = (recv.merge(explained, on=[pair, "delivery_attempt"], how="left").merge(acked, on=pair, how="left")
         .assign(key=lambda f: f[pair] // width).merge(sent[["key", "tag"]], on="key", how="left"))
    r["tag_changed"] = r["received_tag"].fillna("") != r["tag"].fillna("")
    r["unexplained"] = (r["delivery_attempt"] > 1) & r["explained"].isna()
    # An attempt delivered twice is a repeat, unless a suspended nack of it asked for it back once more.
    r = r.merge(again, on=[pair, "delivery_attempt"], how="left")
    r["repeat"] = r.duplicated([pair, "delivery_attempt"]) & ~(
        r["again"].astype("boolean").fillna(False).astype(bool)
        & (r.groupby([pair, "delivery_attempt"]).cumcount() == 1))
    r["after_ack"] = r["acked_ns"].notna() & (r["t_client_ns"] > r["acked_ns"])
    per_pair = r.groupby(pair).agg(
        deliveries=("t_client_ns", "size"), max_attempt=("delivery_attempt", "max"),
        first_received_ns=("t_client_ns", "min"), unexplained=("unexplained", "sum"), repeat=("repeat", "sum"),
        after_ack=("after_ack", "sum"), tag_changed=("tag_changed", "any")).reset_index()
    per_pair["first_received_ns"] = per_pair["first_received_ns"].astype("Int64")

    rows = (owed.merge(per_pair, on=pair, how="left").merge(acked, on=pair, how="left")
            .merge(dead, on=pair, how="left").merge(retries, on=pair, how="left"))
    unknown = ev.loc[(kind == "error") & ev["detail"].fillna("").str.startswith(f"{ACK_UNKNOWN}:"), pair]
    rows["ack_unknown"] = rows[pair].isin(unknown.to_numpy())
    rows["allowed_deliveries"] = rows["group"].map(dict(allowed_deliveries))
    rows["class"] = _owed_class(rows, late_after_ms)
    rows["why"] = _why(rows)

    # Seen somewhere nobody was owed: delivered, or found in a DLQ without a delivery the harness saw.
    seen = per_pair.merge(dead, on=pair, how="outer")
    stray = seen.merge(owed[[pair]].assign(owed=True), on=pair, how="left")
    stray = stray[stray["owed"].isna()].drop(columns="owed")
    stray["key"] = stray[pair] // width
    stray["group"] = np.asarray(list(number), dtype=object)[stray[pair].to_numpy() % width]
    known = stray.merge(sent[["key", "origin_topic", "cycle", "sent_ns", "tag"]], on="key", how="left")
    known["class"] = known["sent_ns"].notna().map({True: "cross_topic", False: "unknown"})
    known["why"] = known["class"].map({"cross_topic": "delivered to a group it was not sent for",
                                       "unknown": "not sent by this run"})
    out = (pd.concat([rows, known], ignore_index=True) if len(known) else rows).merge(names, on="key", how="left")
    out["repeats"] = out["repeat"]
    for c in COLUMNS:
        if c not in out.columns:
            out[c] = None
    out = out[COLUMNS]
    for c in ("deliveries", "repeats", "retries"):
        out[c] = out[c].fillna(0).astype("int64")
    out["tag_changed"] = out["tag_changed"].astype("boolean").fillna(False).astype(bool)
    return out


def _owed_class(rows: pd.DataFrame, late_after_ms: float | None = None) -> pd.Series:
    dup = (rows["repeat"].fillna(0) + rows["after_ack"].fillna(0) + rows["unexplained"].fillna(0)) > 0
    acked = rows["acked_ns"].notna()
    cls = pd.Series("lost", index=rows.index, dtype=object)
    cls[acked & (rows["retries"].fillna(0) == 0)] = "acked_first"
    cls[acked & (rows["retries"].fillna(0) > 0)] = "acked_after_retry"
    if late_after_ms is not None:
        waited = (rows["acked_ns"] - rows["sent_ns"]).astype("Float64")
        cls[(acked & (waited > late_after_ms * 1e6)).fillna(False).to_numpy(dtype=bool)] = "late"
    cls[dup] = "duplicated"
    cls[rows["dead_lettered_ns"].notna()] = "dead_lettered"
    return cls


def _why(rows: pd.DataFrame) -> pd.Series:
    why = pd.Series(None, index=rows.index, dtype=object)
    lost = rows["class"] == "lost"
    why[lost & rows["deliveries"].isna()] = "never delivered"
    why[lost & rows["deliveries"].notna()] = "delivered, never acked"
    why[lost & rows["ack_unknown"]] = "delivered, its ack timed out: the broker may have applied it"
    why[rows["class"] == "late"] = "acked after the drain timeout"
    dup = rows["class"] == "duplicated"
    for col, text in (("unexplained", "an attempt came back without a nack"),
                      ("after_ack", "delivered again after its ack"), ("repeat", "an attempt delivered twice")):
        hit = dup & (rows[col].fillna(0) > 0)
        why[hit] = why[hit].fillna("").map(lambda s, t=text: f"{s}; {t}" if s else t)
    return why


def tallies(rows: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Per ``by`` (columns of ``rows``, a ledger): pairs per class, ``owed`` pairs, deliveries beyond one per
    attempt (``duplicate_deliveries``), and the dead-lettered pairs that got fewer (``dlq_early``) or more
    (``dlq_late``) deliveries than their group allows; every figure a column, zero included."""
    owed = rows["class"].isin(OWED_CLASSES)
    dead = rows["class"] == "dead_lettered"
    # By attempt number, as the broker counts (an attempt delivered twice is a duplicate, not a late DLQ).
    got = rows["max_attempt"].astype(float).fillna(0)
    allowed = rows["allowed_deliveries"].astype(float)
    flags = pd.DataFrame({
        "owed": owed, **{c: rows["class"] == c for c in CLASSES},
        "dlq_early": dead & (got < allowed), "dlq_late": dead & (got > allowed),
        "tag_changed": owed & rows["tag_changed"].astype(bool), "duplicate_deliveries": rows["repeats"],
    }, index=rows.index).astype("int64")
    return flags.groupby([rows[b] for b in by], dropna=False).sum() if by else flags.sum().to_frame().T
