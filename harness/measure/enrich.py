"""What a (scenario, variant) row of figures is shown with besides its events' figures, read from the records of
the runs behind it: the one step that serves a run's own table (harness.run.sequence.RunResult.summary, `k8s run`)
and every Spark report (spark.comparison.collect) alike.

- ``hybrid``: which modules of a hybrid release came from which release (harness.contracts.modules.hybrid_note;
  several runs that differ: each note, joined by " / "); None when all its own or not recorded.
- ``grpc_client``: the gRPC client the workers drove (several that differ joined by " / "); None over remoting.
- ``offsets``: the lag its groups left when each run's load stopped, summed over the runs; left out when a run
  did not read it (brokers that would not tell, archives before it was read), so `offsets.*` rules say "no data".
- ``observed``: the scenario's observations read off this variant's brokers, summed over the runs and divided by
  the row's count where the observation says ``per``; a name one run could not read is None (its rules: no data).
- ``actions``: the scenario's actions as they went on this variant, run by run (harness.run.actions.ActionRecord,
  with the run's id); left out when it had none.
- ``probe``: the wakeup probe's counters summed over the runs, with their per-nack ratios; left out unless every
  run mounted the probe, so probe rules say "no data".
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.contracts.modules import hybrid_note
from harness.contracts.record import RunRecord
from harness.inputs.expectations import per_nack, probe_counts

Pair = tuple[str, str]  # (scenario, variant)


def _by_pair(records: Sequence[RunRecord]) -> dict[Pair, list[tuple[RunRecord, str]]]:
    """Each (scenario, variant) -> the records of the runs that ran it, with the variant's name."""
    out: dict[Pair, list[tuple[RunRecord, str]]] = {}
    for r in records:
        for name in r.names:
            out.setdefault((r.scenario_name, name), []).append((r, name))
    return out


def _distinct(values: list[str | None]) -> str | None:
    return " / ".join(dict.fromkeys(v for v in values if v)) or None


def _offsets(runs: list[tuple[RunRecord, str]]) -> dict | None:
    got = [r.variant(name).offsets for r, name in runs]
    if not got or any(g is None for g in got):
        return None
    return {"lag": sum(g["lag"] for g in got),
            "groups": {k: sum(g["groups"].get(k, 0) for g in got) for k in got[0]["groups"]}}


def _probe(runs: list[tuple[RunRecord, str]], nacks: float) -> dict | None:
    got = []
    for r, name in runs:
        samples = r.probe.get(name)
        if not samples:
            return None
        got.append(probe_counts(samples, [g["name"] for g in r.scenario.get("groups") or []]))
    if not got:
        return None
    total = {k: sum(g[k] for g in got) for k in got[0]}
    return {**total, **per_nack(total, nacks)}


def _observed(runs: list[tuple[RunRecord, str]], row: dict) -> dict | None:
    got = [(r, r.variant(name).observed) for r, name in runs]
    if not got or any(g is None for _, g in got):
        return None
    out: dict[str, float | None] = {}
    for key in got[0][1]:
        values = [g.get(key) for _, g in got]
        total = None if any(v is None for v in values) else float(sum(values))
        per = ((got[0][0].scenario.get("observe") or {}).get(key) or {}).get("per")
        if per and total is not None:
            count = row.get(per) or 0
            total = total / count if count else None
        out[key] = total
    return out


def enrich(rows: Sequence[dict], records: Sequence[RunRecord]) -> list[dict]:
    """``rows`` (each with its scenario and variant) with what ``records`` say of their pair (the module
    docstring); new dicts, the rows given are left as they are."""
    pairs = _by_pair(records)
    out = []
    for row in rows:
        runs = pairs.get((row["scenario"], row["variant"]), [])
        extra: dict = {
            "hybrid": _distinct([hybrid_note(r.variant(name).version, r.variant(name).modules) for r, name in runs]),
            "grpc_client": _distinct([r.client for r, _ in runs]),
        }
        offsets = _offsets(runs)
        if offsets is not None:
            extra["offsets"] = offsets
        observed = _observed(runs, row)
        if observed is not None:
            extra["observed"] = observed
        actions = [{**a, "run_id": r.run_id} for r, name in runs for a in r.actions if a.get("variant") == name]
        if actions:
            extra["actions"] = actions
        probe = _probe(runs, row.get("nacks") or 0)
        if probe is not None:
            extra["probe"] = probe
        out.append({**row, **extra})
    return out
