"""`rmq-harness ramp` (issue 32): a steady scenario raised step by step; per variant the highest rate at which
the scenario's own rules hold. The orchestration and the judgement, with runs made by hand."""

from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.campaigns import ramp
from harness.campaigns.loop import Campaign
from harness.cli.main import main
from harness.contracts.options import RunOptions
from harness.core.errors import ConfigError, HarnessError
from harness.inputs.catalogue import load_scenario
from harness.inputs.variants import load_variants
from harness.run.cpu import ran_out

MIXED = load_scenario("mixed-load")  # 50/s, 80 s, rules: wakeup p50 < 1000, nothing lost / duplicated ...


def _row(variant: str, sent: float, wakeup_p50: float | None, lost: int = 0, errors: int = 0,
         redelivery_p99: float = 1500) -> dict:
    return {"variant": variant, "sent": sent, "errors": errors,
            "wakeup_ms": {"n": 0 if wakeup_p50 is None else 10, "p50": wakeup_p50},
            "redelivery_ms": {"n": 10, "p99": redelivery_p99},
            "ledger": {"retries_never_redelivered": 0, "lost": lost, "duplicated": 0, "cross_topic": 0}}


@dataclass
class Result:
    archive: Path
    summary: list[dict]
    cpu: dict


def _ramp(variants, rates, make_run, **kw):
    """The ramp over ``rates`` with runs ``make_run`` makes, as `rmq-harness ramp` runs it."""
    campaign = Campaign("runs", RunOptions(), lambda s: None, make_run=make_run, stop_on_config_error=True,
                        outcome=ramp.Outcome())
    return ramp.run_all(MIXED, variants, rates, campaign, **kw)


def _cpu(machine: float, locust: float) -> dict:
    """A run's CPU as harness.run.cpu gives it: the machine's peak busy share, the busiest Locust process's cores."""
    out = {"cores": 2, "sampled_s": 30.0, "machine": {"mean_busy": machine, "peak_busy": machine},
           "kinds": {"servers": {"mean_cores": 1.0, "peak_cores": 1.2}, "load generator": {"mean_cores": locust,
                                                                                           "peak_cores": locust}},
           "busiest_locust_process": {"process": "unpatched worker 123", "mean_cores": locust, "peak_cores": locust}}
    return {**out, "ran_out": ran_out(out)}


def _fake(behaviour, cpu=lambda rate: _cpu(0.5, 0.3)):
    """A Run whose summary rows come from ``behaviour(rate, duration) -> rows`` (and its CPU from ``cpu(rate)``);
    the runs it was asked for."""
    asked = []

    class FakeRun:
        def __init__(self, variants, scenario, runs_dir, options, log):
            self.scenario = scenario

        def execute(self):
            sc = self.scenario
            rate = sc.produce.rate * sc.produce.producers
            asked.append((sc.name, rate, sc.duration_s, sc.produce.producers))
            return Result(Path(sc.name), behaviour(rate, ramp.sending_s(sc)), cpu(rate))

    return FakeRun, asked


def test_each_variant_holds_up_to_the_rate_before_its_first_broken_rule_and_the_ramp_stops_when_none_holds():
    def brokers(rate, d):  # unpatched's wakeup passes 1 s from 200/s; patched loses messages from 400/s
        return [_row("unpatched", rate * d, 300 if rate < 200 else 1500),
                _row("patched", rate * d, 20, lost=0 if rate < 400 else 3)]

    FakeRun, asked = _fake(brokers)
    out = _ramp(load_variants_pair(), [50, 100, 200, 400, 800], duration_s=30, make_run=FakeRun)
    assert [a[1] for a in asked] == [50, 100, 200, 400]  # 800 never runs: nobody held at 400
    assert asked[0][0] == "mixed-load-at-50" and all(a[2] == 30 for a in asked)
    assert [a[3] for a in asked] == [1, 2, 4, 8]  # at most 50 messages/s a producer
    v = {x["variant"]: x for x in ramp.verdicts(out, ["unpatched", "patched"])}
    assert (v["unpatched"]["holds_up_to_per_s"], v["unpatched"]["breaks_at_per_s"]) == (100, 200)
    assert v["unpatched"]["why"] == ["wakeup_ms.p50 < 1000 (failed: 1500)"]
    assert (v["patched"]["holds_up_to_per_s"], v["patched"]["breaks_at_per_s"]) == (200, 400)
    assert v["patched"]["why"] == ["ledger.lost == 0 (failed: 3)"]


def test_a_step_the_producers_could_not_reach_judges_nothing_and_says_so():
    FakeRun, _ = _fake(lambda rate, d: [_row("unpatched", min(rate, 120) * d, 20), _row("patched", min(rate, 120) * d,
                                                                                         20)])
    out = _ramp(load_variants_pair(), [50, 100, 200], make_run=FakeRun)
    [v, _] = ramp.verdicts(out, ["unpatched", "patched"])
    assert out.steps[-1]["variants"]["unpatched"]["state"] == ramp.NOT_REACHED
    assert v["holds_up_to_per_s"] == 100 and v["breaks_at_per_s"] is None and "reached 120/s" in v["note"]


def test_each_break_and_each_rate_not_reached_says_whose_cpu_ran_out():
    # unpatched breaks at 100/s with CPU to spare; at 200/s patched's producers fall short while the busiest
    # Locust process is at one core: the load generator is the limit, not the brokers.
    def brokers(rate, d):
        return [_row("unpatched", rate * d, 300 if rate < 100 else 1500),
                _row("patched", min(rate, 150) * d, 20)]

    FakeRun, _ = _fake(brokers, cpu=lambda rate: _cpu(0.6, 0.4) if rate < 200 else _cpu(0.7, 0.97))
    out = _ramp(load_variants_pair(), [50, 100, 200], make_run=FakeRun)
    v = {x["variant"]: x for x in ramp.verdicts(out, ["unpatched", "patched"])}
    assert v["unpatched"]["breaks_at_per_s"] == 100 and "no CPU ran out" in v["unpatched"]["note"]
    assert v["unpatched"]["cpu_ran_out"] == {"load_generator": False, "machine": False}
    assert v["patched"]["breaks_at_per_s"] is None and "the load generator is the limit" in v["patched"]["note"]
    assert v["patched"]["cpu_ran_out"] == {"load_generator": True, "machine": False}
    assert out.steps[-1]["cpu"]["ran_out"]["load_generator"] is True


def test_a_break_on_a_machine_out_of_cpu_is_not_put_down_to_the_brokers_alone():
    FakeRun, _ = _fake(lambda rate, d: [_row("unpatched", rate * d, 300 if rate < 100 else 1500)],
                       cpu=lambda rate: _cpu(0.96, 0.5))
    out = _ramp(load_variants_pair()[:1], [50, 100], make_run=FakeRun)
    [v] = ramp.verdicts(out, ["unpatched"])
    assert v["cpu_ran_out"]["machine"] is True and "need not be the brokers' limit" in v["note"]
    assert "servers took the most" in v["note"]


def test_client_errors_and_the_users_own_rules_break_a_step_and_a_rule_without_data_does_not():
    def brokers(rate, d):
        return [_row("unpatched", rate * d, None, errors=0 if rate < 100 else 2),
                _row("patched", rate * d, None, redelivery_p99=1500 if rate < 100 else 4000)]

    FakeRun, _ = _fake(brokers)
    out = _ramp(load_variants_pair(), [50, 100], make_run=FakeRun, rules=["redelivery_ms.p99 < 3000"])
    first = out.steps[0]["variants"]["unpatched"]
    assert first["state"] == ramp.HOLDS and first["no_data"] == ["wakeup_ms.p50 < 1000"]  # no retry found a poll
    v = {x["variant"]: x for x in ramp.verdicts(out, ["unpatched", "patched"])}
    assert v["unpatched"]["why"] == ["client errors (2)"] and v["unpatched"]["breaks_at_per_s"] == 100
    assert v["patched"]["why"] == ["redelivery_ms.p99 < 3000 (failed: 4000)"]


def test_a_refusal_of_the_first_step_is_raised_not_taken_for_a_failed_run():
    class Refused:
        def __init__(self, *a, **k):
            raise ConfigError("variant outside: name server 127.0.0.1:1 does not answer")

    with pytest.raises(ConfigError, match="does not answer"):
        _ramp(load_variants_pair(), [50, 100], make_run=Refused)


def test_holding_at_every_rate_asked_says_to_ramp_higher():
    FakeRun, _ = _fake(lambda rate, d: [_row("patched", rate * d, 20)])
    out = _ramp(load_variants_pair()[1:], [50, 100], make_run=FakeRun)
    [v] = ramp.verdicts(out, ["patched"])
    assert v["holds_up_to_per_s"] == 100 and "ramp higher" in v["note"]


def test_a_failed_run_ends_the_ramp_with_its_reason():
    class Broken:
        def __init__(self, *a, **k):
            pass

        def execute(self):
            raise HarnessError("variant patched: broker did not start\ndetail")

    out = _ramp(load_variants_pair(), [50, 100], make_run=Broken)
    assert out.failed == {"50": "variant patched: broker did not start"} and out.steps == []


@pytest.mark.parametrize(("scenario", "rates", "why"), [
    ("burst", [50, 100], "a ramp raises a steady rate"),
    ("mixed-load", [100, 50], "each above the one before"),
    ("mixed-load", [50], "at least two rates"),
    ("mixed-load", [0, 50], "each above the one before"),
    ("mixed-load", [50, float("nan"), 100], "each above the one before"),
])
def test_what_cannot_ramp_is_refused(scenario, rates, why):
    with pytest.raises(ConfigError, match=why):
        ramp.check(load_scenario(scenario), rates)


def test_a_step_too_short_for_its_start_delay_and_a_bad_rule_are_refused():
    with pytest.raises(ConfigError, match="leaves under 10 s of load per step; give at least 13"):
        ramp.check(MIXED, [50, 100], duration_s=12)
    with pytest.raises(ConfigError, match="--rule 'p99 < 3'"):
        ramp.check(MIXED, [50, 100], rules=["p99 < 3"])


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


@pytest.mark.parametrize(("argv", "client"), [
    ([], "native"),  # mixed-load, over gRPC: the native client unless told otherwise
    (["--grpc-client", "official"], "official"),  # one flag away
    (["--scenario", "seed-steady"], "official"),  # remoting: no gRPC client to choose (the default stays unsaid)
])
def test_a_ramp_drives_the_native_grpc_client_unless_told(tmp_path, monkeypatch, argv, client):
    seen = {}

    class Stop(Exception):
        pass

    def campaign(runs_dir, options, *args, **kwargs):
        seen["options"] = options
        raise Stop

    monkeypatch.setattr("harness.campaigns.loop.Campaign", campaign)
    with pytest.raises(Stop):
        main(["ramp", "--variant", "patched", "--runs-dir", str(tmp_path / "runs"), "--out", str(tmp_path / "out"),
              *argv])
    assert seen["options"].grpc_client == client
