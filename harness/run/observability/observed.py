"""The scenario's observations (harness.inputs.observations) read off each variant's brokers: Prometheus series and
runtime figures when the load starts and when it ends (while the brokers serve), log lines once the archive holds
the server logs. Raw numbers go into the variant's record (``observed``); the division by a count of the events
(``per``) is harness.measure.enrich's, where the rows are. One that cannot be read is None, said in the log, and
its rules say "no data"."""

from __future__ import annotations

import re
from pathlib import Path

from harness.client import remoting
from harness.contracts.endpoints import Endpoints
from harness.inputs.observations import LogLines, MetricSeries, RuntimeFigure
from harness.run.hooks import Hook, RunState
from harness.run.observability.probe import read_probe


def series_sum(ep: Endpoints, o: MetricSeries) -> float:
    """The series' sum over the variant's brokers and the series whose labels match (absent: 0)."""
    names = {o.metric, f"{o.metric}_total"}
    want = {k: ep.physical(v) for k, v in o.labels.items()}
    total = 0.0
    for node in ep.brokers:
        _, samples = read_probe(node.metrics)
        total += sum(s["value"] for s in samples
                     if s["name"] in names and all(s.get(k) == v for k, v in want.items()))
    return total


def runtime_sum(ep: Endpoints, o: RuntimeFigure) -> float:
    """The runtime figure summed over the variant's brokers; KeyError when a broker does not report it."""
    total = 0.0
    for node in ep.brokers:
        info = remoting.runtime_info(node.address)
        if o.runtime not in info:
            raise KeyError(f"{node.name} reports no runtime figure {o.runtime!r}")
        total += float(info[o.runtime])
    return total


def log_figure(logs: Path, o: LogLines) -> float:
    """The observation over the files under ``logs`` named like ``o.log`` (harness.inputs.observations: the matching
    lines, or the largest captured number, or one file's largest rise). FileNotFoundError without any such file;
    ValueError when ``max`` or ``growth`` has no number to take (no line matched, or the group is not a number)."""
    files = sorted(p for p in logs.rglob(o.log) if p.is_file())
    if not files:
        raise FileNotFoundError(f"no log named {o.log} under {logs}")
    pattern = re.compile(o.pattern)
    count = 0
    per_file: list[list[float]] = []
    for path in files:
        numbers: list[float] = []
        with path.open(errors="replace") as f:
            for line in f:
                m = pattern.search(line)
                if m is None:
                    continue
                count += 1
                if o.how != "count":
                    try:
                        numbers.append(float(m.group(1)))
                    except (TypeError, ValueError):
                        raise ValueError(f"{path.name}: {o.pattern!r} captured {m.group(1)!r}, not a number") from None
        if numbers:
            per_file.append(numbers)
    if o.how == "count":
        return count
    if not per_file:
        raise ValueError(f"no line of {o.log} matches {o.pattern!r}: no number to take the {o.how} of")
    return max(max(n) for n in per_file) if o.how == "max" else max(n[-1] - n[0] for n in per_file)


class Observed(Hook):
    """Each variant's observations into its record (module docstring)."""

    def __init__(self) -> None:
        self._start: dict[tuple[str, str], float | None] = {}
        self._values: dict[str, dict[str, float | None]] = {}

    def _read(self, run: RunState, ep: Endpoints, name: str, o: MetricSeries | RuntimeFigure) -> float | None:
        try:
            return series_sum(ep, o) if isinstance(o, MetricSeries) else runtime_sum(ep, o)
        except (OSError, KeyError, ValueError, remoting.RemotingError) as e:
            run.log(f"{ep.variant}: observation {name} could not be read ({e}); its rules have no data")
            return None

    def _sampled(self, run: RunState) -> dict[str, MetricSeries | RuntimeFigure]:
        return {n: o for n, o in run.scenario.observe.items() if not isinstance(o, LogLines)}

    def load_started(self, run: RunState) -> None:
        for ep in run.endpoints:
            self._values[ep.variant] = {}
            for name, o in self._sampled(run).items():
                if o.how == "increase":
                    self._start[(ep.variant, name)] = self._read(run, ep, name, o)

    def load_ended(self, run: RunState) -> None:
        for ep in run.endpoints:
            for name, o in self._sampled(run).items():
                end = self._read(run, ep, name, o)
                start = self._start.get((ep.variant, name)) if o.how == "increase" else 0.0
                self._values[ep.variant][name] = None if end is None or start is None else end - start

    def brokers_down(self, run: RunState) -> None:
        logs = run.staging.dir("logs")
        for ep in run.endpoints:
            values = self._values.setdefault(ep.variant, {})
            for name, o in run.scenario.observe.items():
                if isinstance(o, LogLines):
                    try:
                        values[name] = log_figure(logs / ep.variant, o)
                    except (OSError, ValueError) as e:
                        run.log(f"{ep.variant}: observation {name} could not be read ({e}); its rules have no data")
                        values[name] = None
            if values:
                run.record.variant(ep.variant).observed = dict(values)
