"""The pop-wakeup-probe agent's exporter, read once at the end of a run (before the brokers stop)."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def read_probe(url: str, timeout_s: float = 5.0) -> tuple[str, list[dict]]:
    """The exporter's text and its samples as {name, <labels>, value}; OSError when it does not answer."""
    # Never through an HTTP proxy from the environment: probes live on loopback or in the cluster.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    text = opener.open(url, timeout=timeout_s).read().decode()
    samples = [{"name": s.name, **s.labels, "value": s.value}
               for fam in text_string_to_metric_families(text) for s in fam.samples]
    return text, samples
