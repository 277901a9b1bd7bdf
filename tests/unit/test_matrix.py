from pathlib import Path

import pytest

from harness.campaigns import matrix
from harness.campaigns.loop import Campaign
from harness.contracts.options import RunOptions
from harness.core.errors import ConfigError, HarnessError
from harness.inputs.catalogue import SCENARIO_DIR
from harness.inputs.variants import load_variants, select


def test_all_is_every_built_in_scenario_and_cannot_be_mixed():
    names = [sc.name for sc in matrix.scenarios(["all"]).scenarios]
    files = sorted(p.stem for p in SCENARIO_DIR.glob("*.yaml"))
    # A series file is every point of it, in its place.
    at = files.index("groups-scaling")
    assert names == [*files[:at], *(f"groups-scaling-{n}" for n in (1, 4, 16, 64)), *files[at + 1:]]
    assert "v1-collision" in names
    with pytest.raises(ConfigError, match="cannot be combined"):
        matrix.scenarios(["all", "burst"])


def test_a_variant_against_a_scenario_is_refused_before_anything_starts():
    unpatched, patched = select(load_variants(), ["unpatched", "patched"])
    v2 = unpatched.model_copy(update={"broker": {"enableRetryTopicV2": True}})
    plan = matrix.scenarios(["burst", "fourgroups-v2"]).scenarios
    campaign = Campaign("runs", RunOptions())
    matrix.check(plan, [unpatched, patched], campaign)
    with pytest.raises(ConfigError, match="enableRetryTopicV2=true .* against scenario burst"):
        matrix.check(plan, [v2, patched], campaign)
    with pytest.raises(ConfigError, match="at least two variants"):
        matrix.check(plan, [patched], campaign)


def test_a_series_point_can_be_named_alone():
    (point,) = matrix.scenarios(["groups-scaling@16"]).scenarios
    assert point.name == "groups-scaling-16" and len(point.groups) == 16
    assert [g.name for g in point.groups][:3] == ["ScaleOwner", "ScaleBystander", "ScaleBystander2"]
    assert [g.nacks for g in point.groups].count(True) == 1


def test_each_scenario_over_each_protocol_and_what_does_not_apply_is_said():
    plan = matrix.scenarios(["burst", "fifo", "seed-steady", "groups-scaling@4"], ["grpc", "remoting"])
    names = [sc.name for sc in plan.scenarios]
    assert names == ["burst", "burst-remoting", "fifo", "seed-steady", "groups-scaling-4", "groups-scaling-4-remoting"]
    by = {sc.name: sc for sc in plan.scenarios}
    assert by["burst-remoting"].protocol == "remoting" and by["burst"].protocol == "grpc"
    # The form is the same scenario otherwise, and says whose form it is.
    same = {k: v for k, v in by["burst"].model_dump().items() if k not in ("name", "protocol", "description")}
    assert {k: v for k, v in by["burst-remoting"].model_dump().items() if k in same} == same
    assert "the remoting form of burst" in by["burst-remoting"].description
    # A series' forms are a series of their own, not points of the gRPC curve.
    assert by["groups-scaling-4-remoting"].series.of == "groups-scaling-remoting"
    # FIFO pop is gRPC only so far; seed-steady's 5 s invisible time is under the proxy's minimum.
    assert plan.not_applicable == {
        "fifo-remoting": "groups.0.fifo: FIFO pop over remoting (order=true) is not built yet; use protocol grpc",
        "seed-steady-grpc": "consume.invisible_s: 5 under the gRPC proxy's minimum of 10 s"}
    with pytest.raises(ConfigError, match="no scenario applies to --protocol remoting: fifo-remoting"):
        matrix.scenarios(["fifo"], ["remoting"])


def test_the_protocols_a_scenario_names_are_the_ones_with_a_driver():
    from harness.client import registry
    from harness.inputs.scenario import PROTOCOLS

    assert PROTOCOLS == registry.PROTOCOLS


def test_a_failed_scenario_is_reported_and_the_others_still_run(tmp_path):
    class Result:
        def __init__(self, archive: Path) -> None:
            self.archive = archive
            self.summary = [{"scenario": archive.name}]

    class FakeRun:  # the orchestration only: which scenarios ran, what failed
        def __init__(self, variants, scenario, runs_dir, options, log):
            self.scenario = scenario

        def execute(self):
            if self.scenario.name == "lapse":
                raise HarnessError("variant patched: broker did not start\nlong detail")
            return Result(tmp_path / self.scenario.name)

    plan = matrix.scenarios(["burst", "lapse", "steady"]).scenarios
    lines = []
    shown = []
    campaign = Campaign(tmp_path, RunOptions(), lines.append, make_run=FakeRun, on_result=shown.extend,
                        min_variants=2)
    out = matrix.run_all(plan, select(load_variants(), ["unpatched", "patched"]), campaign)
    assert out.archives == [tmp_path / "burst", tmp_path / "steady"]
    assert [s["scenario"] for s in shown] == ["burst", "steady"]
    assert out.failed == {"lapse": "variant patched: broker did not start"}
    assert any("scenario 2/3: lapse" in ln for ln in lines)


def test_gate_is_the_marked_set_covering_every_primary_behaviour():
    plan = matrix.scenarios(["gate"]).scenarios
    names = [sc.name for sc in plan]
    assert names == ["ack-after-extend", "burst", "lapse", "mass-nack", "subscription-mismatch", "v2-whole-poll"]
    assert all(sc.gate for sc in plan)
    # The V1 stall and lapse by the wakeup, the V2 coin by its stall share, loss by the share lost; the ledger's
    # loss and duplicate classes by the rules.
    assert {sc.verdict_metric for sc in plan} == {"wakeup_ms", "stalled", "lost"}
    assert any("ledger.lost" in " ".join(sc.expect) for sc in plan)
    assert any("ledger.duplicated" in " ".join(sc.expect) for sc in plan)
    with pytest.raises(ConfigError, match="--scenario gate cannot be combined"):
        matrix.scenarios(["gate", "burst"])


def test_a_scenario_that_runs_to_a_cycle_count_is_estimated_up_to_its_cap():
    burst = matrix.scenarios(["burst"]).scenarios[0]
    assert burst.cycles.at_least == 8 and burst.cycles.cap_s == 240
    # 8 stalled cycles (~20 s each) take longer than duration_s: the estimate counts them.
    assert matrix.estimate_s(burst) == pytest.approx(burst.produce.delay_s + 160 + 20 + matrix.OVERHEAD_S)
