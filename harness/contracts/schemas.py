"""Every versioned format the harness writes or reads, with its version and what each version changed: the
one place a version number is defined. A reader takes every version up to the current one and refuses a
newer one by name; the documentation of each format states its current version (a test holds it to this).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Schema:
    name: str
    doc: str  # where it is described, and the words that state its version there ({v}: the version)
    stated_as: str
    changes: dict[int, str]  # version -> what it brought

    @property
    def version(self) -> int:
        return max(self.changes)

    @property
    def known(self) -> set[int]:
        return set(range(1, self.version + 1))


SCENARIO = Schema("scenario", "docs/scenarios.md", "(schema version {v})", {
    1: "topics, groups, produce, consume, nack, duration",
    2: "cycles",
    3: "reference, expect",
    4: "series, groups that never nack",
    5: "verdict_metric",
    6: "consume.delay_s",
    7: "topology, faults",
    8: "broker (settings the scenario needs), applies (the releases it can ask)",
    9: "actions (admin requests during the load: offset resets, broker settings, groups, topics); observe (numbers "
       "read off the brokers: log lines, Prometheus series, runtime figures) for expect: rules as observed.<name>",
    10: "grpc_client (the gRPC client a scenario needs), consume.grpc_deadline and auto_renew, plant modes "
        "return_null and return_empty (plants count from the load's first sends), reset_offset of a LITE parent's "
        "lite topics, select (deliveries by attribute) for expect: rules as selected.<name>.<stat>; the per-call "
        "error counts",
    11: "observe log how: max and growth (a number the pattern captures, e.g. the heap after each collection in "
        "the servers' own GC logs, gc-<role>-<pid>.log); consume.after_sends (consumers start once every "
        "producer's first burst is stored)",
})
MANIFEST = Schema("run manifest", "docs/archive.md", "## Manifest (`schema_version` {v})", {
    1: "run id, scenario, variants, harness version, host, times, summary",
    2: "per variant the agents' own report of their installation and the measured clock offset",
    3: "faults (what was injected, where, when, and when the target was back); endpoints may list several "
       "brokers; events_check (per worker, the events it recorded beside those its shards hold)",
    4: "per variant ignored_settings, the broker.conf keys its broker did not know (older releases run without "
       "them)",
    5: "variant_order: the order the variants came up in and took their slots, random unless --order given, "
       "with its seed",
    6: "per variant external: a cluster the harness did not start (its cluster, brokers, version, the run's name "
       "suffix, what was removed after the run); the version is what its brokers said",
    7: "per variant modules: each RocketMQ server module jar it ran (artifact, version, sha256), so a hybrid "
       "release (modules of an earlier release where its own are not published) is on record; each summary row's "
       "hybrid (harness.contracts.modules.hybrid_note)",
    8: "grpc_client: the gRPC client the workers drove (official, native, native-gevent; null for remoting)",
    9: "per variant offsets (the lag its groups left when the load stopped; before, in its summary rows); summary "
       "rows hold what the events gave, and hybrid, offsets, grpc_client and probe are read from the record "
       "wherever rows are shown (harness/measure/enrich.py)",
    10: "actions: one record per scenario action and variant (what was asked when, what the brokers answered, "
        "or the error); action events; per variant observed: the scenario's observations read off its brokers",
    11: "per variant kept: brokers a campaign kept from an earlier run of it (--keep-brokers): the run that started "
        "them, its scenario, how many runs they served before this one",
})
EVENTS = Schema("events", "docs/archive.md", "## Events (`event_schema_version` {v};", {
    1: "one row per thing that happened",
    2: "the cycle column, cycle_start / cycle_end events, pickup_ms",
    3: "the tag column",
    4: "message_group",
    5: "started_ns",
    6: "the fault kind (written by the harness, worker \"harness\")",
    7: "the refused kind: a call the server refused for flow control, which the consumer tried again",
    8: "the action kind (a scenario's admin request, written by the harness); received: delivered_topic (the topic "
       "a message came under when not the one popped) and queue_id",
})
SUMMARY = Schema("summary.json", "docs/summary.md", "schema_version   {v} ", {
    1: "messages as the unit",
    2: "the cycle as the unit (n counts cycles), Holm-adjusted p, the interval's level follows alpha, "
       "completeness, \"not enough data\", pickup_ms",
    3: "the message ledger's classes in each ledger, expectations, ledger.parquet",
    4: "stalled (retries that waited for a poll to run out) per variant; each comparison's statistic; the "
       "primary comparison is the scenario's verdict_metric",
    5: "per variant, the faults its runs injected and what each did (harness/measure/fault_impact.py)",
    6: "p-values exact also with ties, and p_floor, the smallest p a comparison's ties allow; each run's "
       "variant_order",
    7: "verdicts equivalent and inconclusive instead of no change; the ratio margin symmetric on the log scale; "
       "each comparison's effect (ratio, or difference for stall shares, with difference and the interval "
       "of it); the rule's share_margin",
    8: "each comparison's paired: the same runs on both sides, tested stratified by run and bootstrapped with "
       "the same runs drawn for both (true), sides from different runs (false), one run (null); a scenario's "
       "family tested in a fixed sequence (the primary alone, the secondary ones once it was significant); "
       "rule.one_sided; the ledger's late class",
    9: "per variant hybrid: which server modules a hybrid release took from which earlier release (null: all "
       "its own, or not recorded), also in the matrix's and the sweep's variant facts and the sweep's rows",
    10: "the sweep's defects (per scenario and release: present, absent, no data, not applicable, run failed; the "
        "first and last release that shows it) and each release row's defect; per variant offsets (the lag each "
        "group left when the load stopped)",
    11: "each run's scenario (name, description, protocol, retry topic, topology, duration, cycles), harness "
        "(version, git sha), host, started_at, duration_s and builds (per variant: version, jars, external, agents "
        "with what each said when installed, clock offset): what a report's first screen says ran",
    12: "each run's grpc_client and per variant grpc_client: the gRPC client the workers drove (official, native, "
        "native-gevent; several joined by \" / \"; null over remoting)",
    13: "per_variant renamed_deliveries (deliveries under another topic name than the one popped), observed (the "
        "scenario's observations read off the brokers) and actions (its admin requests as they went)",
    14: "per_variant send_errors, receive_errors, ack_errors, nack_errors, extend_errors (each client call's "
        "failures; errors is still them all) and selected (the scenario's selections: deliveries, messages)",
    15: "each comparison's detectable: [below, above], the effect the rule would have called an improvement or a "
        "regression with 80% power given the spread these cycles showed (null: cannot be sized); an equivalent or "
        "inconclusive verdict's reason says it",
    16: "per_variant cycles_timed_out: cycles the run stopped waiting for (drain_timeout_s ran out), in which "
        "lost and never redelivered are not back yet rather than shown lost",
    17: "each run's builds: kept (brokers a campaign kept from an earlier run of it, as the manifest's variant "
        "kept says: started_by, scenario, runs_on_them; null: the run started its own)",
})
HISTORY = Schema("history dataset", "docs/releases.md", "Columns (`dataset_schema_version` {v})", {
    1: "one row per (run, scenario, variant, metric, cycle): the cycle's level",
})
ALL = (SCENARIO, MANIFEST, EVENTS, SUMMARY, HISTORY)
