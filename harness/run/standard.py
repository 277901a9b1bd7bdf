"""The parts every run is made of, as hooks in the order they act (harness.run.hooks), and the two small ones that
belong to no other module: Locust's web UI, and what an external cluster's backend says of it after the run.
A run adds its caller's hooks (a progress display, a campaign's or a test's own) after these."""

from __future__ import annotations

from harness.run.actions import Actions
from harness.run.brokers import BrokerFacts, Resources
from harness.run.cpu import CpuSampling
from harness.run.faults import Faults
from harness.run.hooks import Hook, RunState
from harness.run.observability.observed import Observed
from harness.run.observability.probe import ProbeCounters
from harness.run.observability.scraping import Scraping
from harness.run.offsets import Offsets
from harness.run.plants import Plants


class LocustUi(Hook):
    """`run --ui`: each variant's Locust master serves its web UI where the site says (whoever opens it can stop
    or respawn users: the record says it was served)."""

    def ready(self, run: RunState) -> None:
        run.fleet.ui = run.site.ui
        run.record.ui = True


class ExternalFacts(Hook):
    """Variants on clusters the harness does not own: once the run's names left them, what their backend says of
    each (its cluster, brokers, the run's suffix, what was removed) into the record."""

    def brokers_down(self, run: RunState) -> None:
        external = run.backend.external
        for name in external.variants:
            run.record.variant(name).external = external.report(name)


def standard_hooks(run: RunState) -> list[Hook]:
    """In order: the CPU sampler stops first when the load ends (the faults' finish can take minutes), the faults
    and actions finish before the brokers are read, Prometheus exports last (its window ends after every other
    reading)."""
    hooks: list[Hook] = [CpuSampling([v.name for v in run.variants])]
    if run.scenario.plant:
        hooks.append(Plants())
    hooks += [Faults(), Actions(), BrokerFacts(), Resources(), Offsets()]
    if run.scenario.observe:
        hooks.append(Observed())
    if run.options.probe:
        hooks.append(ProbeCounters())
    if run.options.ui:
        hooks.append(LocustUi())
    hooks.append(Scraping())
    if getattr(run.backend, "external", None) is not None:  # harness.run.site.with_external split the backend
        hooks.append(ExternalFacts())
    if getattr(run.backend, "kept", None) is not None:  # a campaign's brokers (harness.run.kept)
        from harness.run.kept import KeptFacts

        hooks.append(KeptFacts())
    return hooks
