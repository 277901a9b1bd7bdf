"""The pop-wakeup-probe agent's exporter, read once at the end of a run (before the brokers stop)."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from harness.run.hooks import Hook, RunState


def read_probe(url: str, timeout_s: float = 5.0) -> tuple[str, list[dict]]:
    """The exporter's text and its samples as {name, <labels>, value}; OSError when it does not answer."""
    # Never through an HTTP proxy from the environment: probes live on loopback or in the cluster.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    text = opener.open(url, timeout=timeout_s).read().decode()
    samples = [{"name": s.name, **s.labels, "value": s.value}
               for fam in text_string_to_metric_families(text) for s in fam.samples]
    return text, samples


class ProbeCounters(Hook):
    """`run --probe`: once the load ended, each mounted wakeup probe's counters are saved as probe/<variant>.prom
    (a topology's other brokers: probe/<variant>-<broker>.prom) and every broker's samples go into the record.
    A broker a fault started again counts from its restart."""

    def load_ended(self, run: RunState) -> None:
        for ep in run.endpoints:
            for node in ep.brokers:
                if not node.probe:
                    continue
                try:
                    text, samples = read_probe(node.probe)
                except OSError as e:
                    run.log(f"{ep.variant}: wakeup probe of {node.name} at {node.probe} did not answer ({e})")
                    continue
                name = ep.variant if node.name == "broker" else f"{ep.variant}-{node.name}"
                (run.staging.dir("probe") / f"{name}.prom").write_text(text)
                run.record.probe.setdefault(ep.variant, []).extend(samples)
