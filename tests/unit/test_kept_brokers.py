"""What a campaign's runs do with the brokers they could share (harness.run.kept): kept when every variant starts
alike, started again (and said why) when not, stopped when a run changes them or leaves them out. The backend
below records what was asked of it; the real brokers' case is tests/integration/test_kept_brokers_run.py."""

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from harness.contracts.endpoints import Endpoints, run_tag
from harness.contracts.options import DEFAULTS, RunOptions
from harness.inputs.brokers import Topology
from harness.inputs.catalogue import load_scenario
from harness.inputs.variants import Variant
from harness.run import kept, plan
from harness.run.kept import KeptBrokers, RunBrokers, why_fresh


@pytest.fixture(autouse=True)
def round_trips(monkeypatch):
    """The endpoints each kept variant's round trip went to (the real one needs brokers)."""
    seen: list[Endpoints] = []
    monkeypatch.setattr(kept.readiness, "wait_serving", lambda ep, *a, **kw: seen.append(ep))
    return seen


@dataclass
class Recorder:
    """What a LocalBackend was asked: which variants it started (in which call), which it stopped."""

    workdir: Path
    ups: list[list[str]] = field(default_factory=list)
    downs: list[list[str]] = field(default_factory=list)
    running: dict[str, Endpoints] = field(default_factory=dict)

    def up(self, variants, topology):
        self.ups.append([v.name for v in variants])
        eps = [Endpoints(v.name, v.version, "g", "r", "b", "n", "m") for v in variants]
        self.running.update({ep.variant: ep for ep in eps})
        return eps

    def endpoints(self):
        return list(self.running.values())

    def down(self, names=None):
        names = list(self.running) if names is None else list(names)
        self.downs.append(names)
        for n in names:
            self.running.pop(n, None)
        return names

    def log_sizes(self, name):
        return {self.workdir / name / "broker.out": 100}


def _campaign(tmp_path):
    lines: list[str] = []
    kb = KeptBrokers(tmp_path, lines.append)
    kb.backend = Recorder(tmp_path / "brokers")
    return kb, lines


def _run(kb, run_id, scenario, variants, options=DEFAULTS, topology=None) -> tuple[RunBrokers, list[Endpoints]]:
    view = kb.site(scenario, options)(kb.workdir / run_id, lambda _: None).backend
    as_run = plan.as_run(variants, scenario, options)
    eps = view.up(as_run, topology or scenario.topology)
    view.down()
    return view, eps


VARIANTS = [Variant(name="unpatched", version="5.3.3"), Variant(name="patched", version="5.3.3")]


def test_a_run_like_the_one_before_runs_on_its_brokers_under_names_of_its_own(tmp_path, round_trips):
    kb, lines = _campaign(tmp_path)
    burst, lapse = load_scenario("burst"), load_scenario("lapse")  # both V1 over gRPC: the same broker.conf
    first, eps1 = _run(kb, "run-1", burst, VARIANTS)
    second, eps2 = _run(kb, "run-2", lapse, VARIANTS)
    assert kb.backend.ups == [["unpatched", "patched"]] and kb.backend.downs == []
    assert first.kept == {} and [ep.suffix for ep in eps1] == ["", ""]
    assert second.kept == {v.name: {"started_by": "run-1", "scenario": "burst", "runs_on_them": 1} for v in VARIANTS}
    assert [ep.suffix for ep in eps2] == [run_tag("run-2", "unpatched"), run_tag("run-2", "patched")]
    assert round_trips == eps2  # each kept variant answered under the run's own names before it was handed on
    assert sum("brokers kept from run run-1 (burst" in ln for ln in lines) == 2
    # A third counts the second, and what the servers wrote before it is not its own.
    third, _ = _run(kb, "run-3", burst, VARIANTS)
    assert third.kept["patched"]["runs_on_them"] == 2 and third._since
    kb.close()
    assert kb.backend.downs[-1] == ["unpatched", "patched"] and not kb.kept


def test_other_settings_start_the_brokers_again_and_say_which(tmp_path):
    kb, lines = _campaign(tmp_path)
    _run(kb, "run-1", load_scenario("burst"), VARIANTS)
    view, eps = _run(kb, "run-2", load_scenario("v2-whole-poll"), VARIANTS)  # V2 retry topics: a broker setting
    assert kb.backend.ups == [["unpatched", "patched"], ["unpatched", "patched"]]
    assert kb.backend.downs == [["unpatched"], ["patched"]] and view.kept == {}
    assert [ep.suffix for ep in eps] == ["", ""]
    assert any("unpatched: starting its brokers again: its broker settings differ (enableRetryTopicV2)" in ln
               for ln in lines)
    # Another topology with the same settings: started again too.
    burst = load_scenario("burst")
    _run(kb, "run-3", burst, VARIANTS)
    _run(kb, "run-4", burst, VARIANTS, topology=Topology(proxy="cluster"))
    assert sum("the topology differs" in ln for ln in lines) == 2


def test_a_run_that_changes_its_brokers_neither_takes_nor_hands_them_on(tmp_path):
    kb, lines = _campaign(tmp_path)
    burst = load_scenario("burst")
    _run(kb, "run-1", burst, VARIANTS)
    faults = burst.model_copy(update={"faults": ["x"]})
    assert why_fresh(faults, RunOptions()) == "scenario burst injects faults"
    view, _ = _run(kb, "run-2", faults, VARIANTS)
    # Started again for it (it would change the kept ones), and stopped after it (the next would inherit them).
    assert view.kept == {} and kb.backend.ups[-1] == ["unpatched", "patched"]
    assert kb.backend.downs[-1] == ["unpatched", "patched"] and not kb.kept
    view, _ = _run(kb, "run-3", burst, VARIANTS)
    assert view.kept == {} and len(kb.backend.ups) == 3


def test_what_makes_a_run_start_its_own_brokers():
    burst = load_scenario("burst")
    assert why_fresh(burst, RunOptions()) is None
    assert why_fresh(burst, RunOptions(probe=True)) == "--probe counts from the brokers' start"
    for key, said in (("actions", "acts on its brokers"), ("plant", "plants failures"),
                      ("observe", "reads its observations")):
        assert said in why_fresh(burst.model_copy(update={key: {"x": 1} if key == "observe" else ["x"]}), RunOptions())


def test_variants_a_run_leaves_out_are_stopped(tmp_path):
    kb, lines = _campaign(tmp_path)
    burst = load_scenario("burst")
    _run(kb, "run-1", burst, VARIANTS)
    view, _ = _run(kb, "run-2", burst, VARIANTS[1:])
    assert kb.backend.downs == [["unpatched"]] and list(view.kept) == ["patched"]
    assert "stopping the kept brokers of unpatched: not in this run" in lines
