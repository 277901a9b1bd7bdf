"""The one loop of every campaign of runs (matrix, sweep, ramp, calibrate): each fills it with its own steps, a
scenario on some variants. Before the first step, every step is checked as a run checks itself (harness.run.plan),
so bad input stops the campaign before anything starts. A variant a scenario cannot ask sits that step out (the
others run it again without it) and is recorded as not applicable; a run that fails is recorded and the campaign
goes on; each run's summary is handed on as it lands. With ``keep_brokers`` the steps share their brokers
wherever they start them alike (harness.run.kept).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.contracts.options import RunOptions
from harness.core.errors import ConfigError, HarnessError, NotApplicable
from harness.inputs.scenario import Scenario
from harness.inputs.variants import Variant
from harness.run import plan
from harness.run.kept import KeptBrokers
from harness.run.sequence import Run, RunResult

Log = Callable[[str], None]


@dataclass
class Outcome:
    archives: list[Path | str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # what failed (the campaign's key) -> why
    not_applicable: dict[str, str] = field(default_factory=dict)  # "scenario@variant" -> why
    wall_s: float = 0.0


@dataclass
class Failed:
    """A step whose run failed: why (its error's first line), and the variants it ran."""

    why: str
    variants: list[Variant]


@dataclass
class Campaign:
    """``min_variants``: a step that fewer variants can run is not run (a comparison needs two);
    ``stop_on_config_error``: a ConfigError of a step (e.g. an external cluster that does not answer) ends the
    campaign rather than failing the step; ``keep_brokers``: a step runs on the brokers of the step before when it
    starts them alike (harness.run.kept), and they are stopped when a step fails and when the campaign finishes."""

    runs_dir: Path | str
    options: RunOptions
    log: Log = print
    make_run: Callable[..., Run] = Run
    on_result: Callable[[list[dict]], None] = lambda summary: None
    min_variants: int = 1
    stop_on_config_error: bool = False
    keep_brokers: bool = False
    outcome: Outcome = field(default_factory=Outcome)
    started: float = field(default_factory=time.monotonic)
    kept: KeptBrokers | None = None

    @property
    def elapsed_min(self) -> float:
        return (time.monotonic() - self.started) / 60

    def check(self, scenarios: Iterable[Scenario], variants: Sequence[Variant]) -> None:
        """Every step's run as it will check itself, before the first starts (which builds a scenario cannot ask
        is found out step by step)."""
        for sc in scenarios:
            plan.check(variants, sc, plan.options_for(sc, self.options, lambda _: None), applicable=False)
        external = [v.name for v in variants if v.is_external]
        if self.keep_brokers and external:
            raise ConfigError(f"--keep-brokers keeps brokers the harness starts; {', '.join(external)} is an external "
                              "cluster: drop --keep-brokers or that variant")

    def run(self, scenario: Scenario, variants: Sequence[Variant], label: str,
            note: str = "") -> RunResult | Failed | None:
        """One step: its result; Failed (said in the log); None when fewer than ``min_variants`` can run it."""
        left = list(variants)
        while len(left) >= self.min_variants:
            self.log(f"{label} on {', '.join(v.name for v in left)} (elapsed {self.elapsed_min:.1f} min{note})")
            try:
                result = self.make_run(left, scenario, self.runs_dir, self.options, log=self.log,
                                       **self._site(scenario)).execute()
            except NotApplicable as e:  # that variant sits this step out; the rest run it
                self.outcome.not_applicable[f"{scenario.name}@{e.variant}"] = str(e)
                self.log(f"not applicable: {e}")
                left = [v for v in left if v.name != e.variant]
                continue
            except HarnessError as e:  # a broker that would not start, a run refused: the other steps still run
                self._discard()  # in whatever state the failure left them
                if isinstance(e, ConfigError) and self.stop_on_config_error:
                    raise
                why = str(e).splitlines()[0][:300]
                self.log(f"{label}: run failed: {why}")
                return Failed(why, left)
            except BaseException:  # Ctrl-C: the kept brokers go with the campaign
                self._close()
                raise
            self.outcome.archives.append(result.archive)
            self.on_result(result.summary)
            return result
        self.log(f"{label}: fewer than {self.min_variants} variants can run it; not run")
        return None

    def _site(self, scenario: Scenario) -> dict:
        if not self.keep_brokers:
            return {}
        if self.kept is None:
            self.kept = KeptBrokers(self.runs_dir, self.log)
        return {"site": self.kept.site(scenario, self.options)}

    def _discard(self) -> None:
        if self.kept is not None:
            self.kept.discard()

    def _close(self) -> None:
        if self.kept is not None:
            self.kept.close()
            self.kept = None

    def finish(self) -> Outcome:
        """The outcome; the kept brokers stopped."""
        self._close()
        self.outcome.wall_s = time.monotonic() - self.started
        return self.outcome
