"""`rmq-harness ramp` (issue 32): a steady scenario raised step by step; per variant the highest rate at which
the scenario's own rules hold. The orchestration and the judgement, with runs made by hand."""

from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.campaigns import ramp
from harness.cli.main import main
from harness.core.errors import ConfigError, HarnessError
from harness.inputs.scenario import load_scenario
from harness.inputs.variants import load_variants

MIXED = load_scenario("mixed-load")  # 50/s, 80 s, rules: wakeup p50 < 1000, nothing lost / duplicated ...


def _row(variant: str, sent: float, wakeup_p50: float, lost: int = 0) -> dict:
    return {"variant": variant, "sent": sent, "wakeup_ms": {"n": 10, "p50": wakeup_p50},
            "ledger": {"retries_never_redelivered": 0, "lost": lost, "duplicated": 0, "cross_topic": 0}}


@dataclass
class Result:
    archive: Path
    summary: list[dict]


def _fake(behaviour):
    """A Run whose summary rows come from ``behaviour(rate, duration) -> rows``; the runs it was asked for."""
    asked = []

    class FakeRun:
        def __init__(self, variants, scenario, runs_dir, log):
            self.scenario = scenario

        def execute(self):
            sc = self.scenario
            rate = sc.produce.rate * sc.produce.producers
            asked.append((sc.name, rate, sc.duration_s))
            return Result(Path(sc.name), behaviour(rate, sc.duration_s))

    return FakeRun, asked


def test_each_variant_holds_up_to_the_rate_before_its_first_broken_rule_and_the_ramp_stops_when_none_holds():
    def brokers(rate, d):  # unpatched's wakeup passes 1 s from 200/s; patched loses messages from 400/s
        return [_row("unpatched", rate * d, 300 if rate < 200 else 1500),
                _row("patched", rate * d, 20, lost=0 if rate < 400 else 3)]

    FakeRun, asked = _fake(brokers)
    out = ramp.run_all(MIXED, load_variants_pair(), [50, 100, 200, 400, 800], "runs", lambda s: None,
                       duration_s=30, make_run=FakeRun)
    assert [a[1] for a in asked] == [50, 100, 200, 400]  # 800 never runs: nobody held at 400
    assert asked[0][0] == "mixed-load-at-50" and all(a[2] == 30 for a in asked)
    v = {x["variant"]: x for x in ramp.verdicts(out, ["unpatched", "patched"])}
    assert (v["unpatched"]["holds_up_to_per_s"], v["unpatched"]["breaks_at_per_s"]) == (100, 200)
    assert v["unpatched"]["why"] == ["wakeup_ms.p50 < 1000 (failed: 1500)"]
    assert (v["patched"]["holds_up_to_per_s"], v["patched"]["breaks_at_per_s"]) == (200, 400)
    assert v["patched"]["why"] == ["ledger.lost == 0 (failed: 3)"]


def test_a_step_the_producers_could_not_reach_judges_nothing_and_says_so():
    FakeRun, _ = _fake(lambda rate, d: [_row("unpatched", min(rate, 120) * d, 20), _row("patched", min(rate, 120) * d,
                                                                                         20)])
    out = ramp.run_all(MIXED, load_variants_pair(), [50, 100, 200], "runs", lambda s: None, make_run=FakeRun)
    [v, _] = ramp.verdicts(out, ["unpatched", "patched"])
    assert out.steps[-1]["variants"]["unpatched"]["state"] == ramp.SHORT
    assert v["holds_up_to_per_s"] == 100 and v["breaks_at_per_s"] is None and "reached 120/s" in v["note"]


def test_holding_at_every_rate_asked_says_to_ramp_higher():
    FakeRun, _ = _fake(lambda rate, d: [_row("patched", rate * d, 20)])
    out = ramp.run_all(MIXED, load_variants_pair()[1:], [50, 100], "runs", lambda s: None, make_run=FakeRun)
    [v] = ramp.verdicts(out, ["patched"])
    assert v["holds_up_to_per_s"] == 100 and "ramp higher" in v["note"]


def test_a_failed_run_ends_the_ramp_with_its_reason():
    class Broken:
        def __init__(self, *a, **k):
            pass

        def execute(self):
            raise HarnessError("variant patched: broker did not start\ndetail")

    out = ramp.run_all(MIXED, load_variants_pair(), [50, 100], "runs", lambda s: None, make_run=Broken)
    assert out.failed == {"50": "variant patched: broker did not start"} and out.steps == []


@pytest.mark.parametrize(("scenario", "rates", "why"), [
    ("burst", [50, 100], "a ramp raises a steady rate"),
    ("mixed-load", [100, 50], "each above the one before"),
    ("mixed-load", [50], "at least two rates"),
    ("mixed-load", [0, 50], "each above the one before"),
])
def test_what_cannot_ramp_is_refused(scenario, rates, why):
    with pytest.raises(ConfigError, match=why):
        ramp.check(load_scenario(scenario), rates)


def test_rates_that_are_not_numbers_are_an_option_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["ramp", "--variant", "patched", "--rates", "50,abc", "--runs-dir", str(tmp_path / "runs")])
    assert e.value.code == 2 and "messages per second, comma-separated" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "why"), [
    (["--scenario", "burst"], "a ramp raises a steady rate"),
    (["--duration", "0"], "seconds of load per step"),
])
def test_the_command_refuses_in_one_line_before_anything_starts(tmp_path, capsys, argv, why):
    runs = tmp_path / "runs"
    assert main(["ramp", "--variant", "patched", "--runs-dir", str(runs), *argv]) == 2
    err = capsys.readouterr().err
    assert why in err and len(err.strip().splitlines()) == 1 and not runs.exists()


def load_variants_pair():
    known = load_variants()
    return [known["unpatched"], known["patched"]]
