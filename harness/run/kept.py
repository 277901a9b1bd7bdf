"""Brokers a campaign keeps between its runs (`--keep-brokers`): a run whose variants, as it starts them, and
topology are those of the run before runs on the same brokers instead of starting them again (30-50 s a run
with three variants). What keeps two runs on one broker apart: each run's topics and groups carry a suffix of
its own on the wire (Endpoints.suffix, as on a cluster the harness does not own), the broker's exporter is read
for that suffix only, and each run's archive gets only what its servers wrote while it ran.

A run starts its brokers afresh when they differ (another version, setting, agent or topology: the log says
which) and when it, or the run before, changes them in a way the next would inherit: faults, actions, planted
failures, observations read off their logs, or the probe (its counters count from the broker's start). Variants
a run does not have are stopped, so idle brokers take no CPU from it. The record says, per variant, which run
started the brokers it ran on (VariantRecord.kept).
"""

from __future__ import annotations

import secrets
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from harness.contracts.endpoints import Endpoints, run_tag
from harness.contracts.modules import ModuleJar
from harness.contracts.options import RunOptions
from harness.core.waiting import Deadline
from harness.deploy import readiness
from harness.deploy.local import LocalBackend
from harness.deploy.local.faults import LocalProcess
from harness.inputs.brokers import SINGLE, Topology
from harness.inputs.scenario import Scenario
from harness.inputs.variants import Variant
from harness.run import outbox
from harness.run.hooks import Hook, Log, RunState
from harness.run.site import RUN_BROKER_STOP_S, Site, SiteFactory, on_loopback

# Kept brokers answered a round trip seconds ago, when their last run ended; this is for a busy machine.
READY_S = 60.0


def why_fresh(scenario: Scenario, options: RunOptions) -> str | None:
    """Why a run of ``scenario`` must not share its brokers with the runs beside it; None when it may."""
    if scenario.faults:
        return f"scenario {scenario.name} injects faults"
    if scenario.actions:
        return f"scenario {scenario.name} acts on its brokers during the load"
    if scenario.plant:
        return f"scenario {scenario.name} plants failures in the brokers"
    if scenario.observe:
        return f"scenario {scenario.name} reads its observations off the brokers' logs and counters"
    if options.probe:
        return "--probe counts from the brokers' start"
    return None


def _differs(old: Variant, new: Variant) -> str:
    """What the log says of brokers started again for another variant or topology."""
    if old == new:
        return "the topology differs"
    a, b = old.model_dump(mode="json"), new.model_dump(mode="json")
    keys = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
    if keys == ["broker"] or keys == ["proxy"]:
        inner = sorted(k for k in a[keys[0]].keys() | b[keys[0]].keys() if a[keys[0]].get(k) != b[keys[0]].get(k))
        return f"its {keys[0]} settings differ ({', '.join(inner)})"
    return f"it differs in {', '.join(keys)}"


@dataclass
class Kept:
    """Brokers up for one variant: as started, by which run (and scenario), how many runs they served."""

    variant: Variant
    topology: Topology
    run_id: str
    scenario: str
    changed: str | None = None  # why the run that started them changes them (why_fresh): stopped after it
    runs: int = 1

    def record(self) -> dict[str, object]:
        return {"started_by": self.run_id, "scenario": self.scenario, "runs_on_them": self.runs}


class KeptBrokers:
    """A campaign's brokers (attached: they die with it), under ``runs_dir``/.work/kept-<token>."""

    def __init__(self, runs_dir: Path | str, log: Log = print) -> None:
        self.workdir = outbox.local_dir(runs_dir).expanduser().resolve() / ".work" / f"kept-{secrets.token_hex(3)}"
        self.log = log
        self.backend = LocalBackend(self.workdir / "brokers", attached=True, log=log,
                                    stop_timeout_s=RUN_BROKER_STOP_S)
        self.kept: dict[str, Kept] = {}

    def site(self, scenario: Scenario, options: RunOptions) -> SiteFactory:
        """The site of one run of ``scenario``: these brokers, a Prometheus and ports of its own."""

        def factory(work: Path, log: Log) -> Site:
            return on_loopback(RunBrokers(self, work.name, scenario, why_fresh(scenario, options)), work)

        return factory

    def discard(self, names: Sequence[str] | None = None) -> None:
        """Stop the named variants' brokers (all when None): a run failed on them, or they are not wanted."""
        chosen = list(self.kept) if names is None else [n for n in names if n in self.kept]
        if names is None or chosen:
            self.backend.down(None if names is None else chosen)
        for n in chosen:
            del self.kept[n]

    def close(self) -> None:
        self.discard()
        shutil.rmtree(self.workdir, ignore_errors=True)


class RunBrokers:
    """The Backend of one run on a campaign's brokers: up reuses what it can; down leaves them to the campaign;
    collect copies what they wrote during this run."""

    def __init__(self, owner: KeptBrokers, run_id: str, scenario: Scenario, fresh: str | None) -> None:
        self.owner, self.run_id, self.scenario, self.fresh = owner, run_id, scenario, fresh
        self.inner = owner.backend
        self.kept: dict[str, dict[str, object]] = {}  # variant -> Kept.record() of brokers this run did not start
        self._since: dict[Path, int] = {}
        self._endpoints: list[Endpoints] = []

    def up(self, variants: Sequence[Variant], topology: Topology = SINGLE) -> list[Endpoints]:
        owner, log = self.owner, self.owner.log
        wanted = {v.name for v in variants}
        gone = [n for n in owner.kept if n not in wanted]
        if gone:
            log(f"stopping the kept brokers of {', '.join(gone)}: not in this run")
            owner.discard(gone)
        if self.inner.workdir.is_dir():  # what variants not in this run left (their runs collected it)
            for d in self.inner.workdir.iterdir():
                if (d / "conf").is_dir() and d.name not in wanted:
                    shutil.rmtree(d)
        keep, start = [], []
        for v in variants:
            k = owner.kept.get(v.name)
            if k is None:
                start.append(v)
            elif self.fresh or k.variant != v or k.topology != topology:
                why = self.fresh or _differs(k.variant, v)
                log(f"{v.name}: starting its brokers again: {why}")
                owner.discard([v.name])
                start.append(v)
            else:
                keep.append(v)
        for v in keep:
            k = owner.kept[v.name]
            log(f"{v.name}: brokers kept from run {k.run_id} ({k.scenario}; {k.runs} run(s) on them so far): the "
                "same build, settings and topology")
            self.kept[v.name] = k.record()
            k.runs += 1
            self._since.update(self.inner.log_sizes(v.name))
        started = self.inner.up(start, topology) if start else []
        for v in start:
            owner.kept[v.name] = Kept(v, topology, self.run_id, self.scenario.name, changed=self.fresh)
        by_name = {ep.variant: ep for ep in [*self.inner.endpoints(), *started]}
        # On brokers an earlier run used, this run's names are its own (a suffix on the wire); brokers started for
        # it alone run the scenario's names as they are, as a run without --keep-brokers does.
        self._endpoints = [replace(by_name[v.name], suffix=run_tag(self.run_id, v.name) if keep else "")
                           for v in variants]
        deadline = Deadline(READY_S)
        for ep in self._endpoints:  # kept ones still serve: a round trip under the run's names (created so)
            if ep.variant in self.kept:
                readiness.wait_serving(ep, "grpc", deadline, warn=log)
        return list(self._endpoints)

    def endpoints(self) -> list[Endpoints]:
        return list(self._endpoints)

    def down(self, names: Sequence[str] | None = None) -> list[str]:
        """Nothing: the campaign stops them (KeptBrokers.discard) when a run fails or is over; brokers a run
        changed are stopped here."""
        chosen = [n for n, k in self.owner.kept.items() if k.changed and (names is None or n in names)]
        self.owner.discard(chosen)
        return chosen

    def collect(self, dest: Path) -> None:
        self.inner.collect(dest, since=self._since)

    def broker_config(self, name: str) -> dict[str, str]:
        return self.inner.broker_config(name)

    def agent_report(self, name: str) -> dict[str, list[str]]:
        return self.inner.agent_report(name)

    def modules(self, name: str) -> list[ModuleJar]:
        return self.inner.modules(name)

    def arm_plants(self, name: str) -> None:
        self.inner.arm_plants(name)

    def process(self, name: str, target: str) -> LocalProcess:
        return self.inner.process(name, target)


class KeptFacts(Hook):
    """Per variant, which earlier run of the campaign started the brokers this run ran on (None: this run)."""

    def brokers_up(self, run: RunState) -> None:
        for name, kept in run.backend.kept.items():  # type: ignore[attr-defined]
            run.record.variant(name).kept = kept
