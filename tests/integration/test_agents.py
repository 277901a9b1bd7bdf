"""The broker patch agents on real 5.3.3 brokers: what the wakeup probe sees with and without the fix.

These assert who gets woken (counts), not how fast: speed lives in benchmarks and closing notes.
"""

import json
from pathlib import Path

import pandas as pd
import pytest

from harness.contracts.options import RunOptions
from harness.contracts.record import MANIFEST, RunRecord
from harness.core.paths import REPO_ROOT
from harness.deploy.agents import PROBE_JAR, RETRY_READ_JAR, WAKEUP_FIX_JAR
from harness.inputs.catalogue import load_scenario
from harness.inputs.variants import load_variants
from harness.run.hooks import Hook, RunState
from harness.run.sequence import Run, RunResult

RESOURCES = Path(__file__).parent.parent / "resources" / "scenarios"



@pytest.fixture(scope="module", autouse=True)
def _agents_built():
    for jar in (WAKEUP_FIX_JAR, PROBE_JAR, RETRY_READ_JAR):
        if not (REPO_ROOT / jar).is_file():
            pytest.fail(f"{jar} missing: run `make setup` (builds broker-patches/)")


class Phases(Hook):
    """A hook of the test's own, added to a run without touching any phase: which phases it saw, in order."""

    def __init__(self) -> None:
        self.seen: list[tuple] = []

    def brokers_up(self, run: RunState) -> None:
        self.seen.append(("brokers_up", sorted(ep.variant for ep in run.endpoints)))

    def ready(self, run: RunState) -> None:
        self.seen.append(("ready", run.fleet is not None))

    def load_started(self, run: RunState) -> None:
        self.seen.append(("load_started",))

    def sending_started(self, run: RunState, variant: str, since: float) -> None:
        self.seen.append(("sending_started", variant))

    def cycle_started(self, run: RunState, variant: str, cycle: int) -> None:
        self.seen.append(("cycle_started", variant, cycle))

    def drain_started(self, run: RunState, variant: str) -> None:
        self.seen.append(("drain_started", variant))

    def load_ended(self, run: RunState) -> None:
        self.seen.append(("load_ended",))

    def archive(self, run: RunState) -> None:
        self.seen.append(("archive", sorted(run.fleet.shard_dirs)))

    def brokers_down(self, run: RunState) -> None:
        self.seen.append(("brokers_down",))

    def finished(self, run: RunState) -> None:
        self.seen.append(("finished", Path(run.archive).is_dir()))


def _run(tmp_path_factory, scenario: str, variants: tuple[str, str] = ("unpatched", "patched"),
         hooks: tuple[Hook, ...] = ()) -> RunResult:
    runs = tmp_path_factory.mktemp("runs")
    known = load_variants()
    return Run([known[v] for v in variants], load_scenario(str(RESOURCES / f"{scenario}.yaml")), runs,
               RunOptions(probe=True), log=lambda s: None, hooks=hooks).execute()


def _wakeups(result, variant: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for s in result.probes[variant]:
        if s["name"] == "rmq_probe_pop_wakeups_total":
            out[s["cause"]] = out.get(s["cause"], 0.0) + s["value"]
    return out


@pytest.fixture(scope="module")
def v1_burst(short_burst: Path) -> RunResult:
    """The short-burst run of conftest.py: unpatched and patched side by side, with the probe."""
    return RunResult(RunRecord.model_validate_json((short_burst / MANIFEST).read_text()), short_burst)


@pytest.fixture(scope="module")
def phases() -> Phases:
    return Phases()


@pytest.fixture(scope="module")
def v2_four_groups(tmp_path_factory, phases: Phases) -> RunResult:
    return _run(tmp_path_factory, "short-fourgroups-v2", hooks=(phases,))


def test_a_hook_of_its_own_sees_every_phase_of_the_run_in_order(v2_four_groups, phases: Phases):
    kinds = [p[0] for p in phases.seen]
    once = ["brokers_up", "ready", "load_started", "load_ended", "archive", "brokers_down", "finished"]
    assert [k for k in kinds if k in once] == once
    assert phases.seen[0] == ("brokers_up", ["patched", "unpatched"])
    assert ("ready", True) in phases.seen and ("archive", ["patched", "unpatched"]) in phases.seen
    assert phases.seen[-1] == ("finished", True)
    # Between the load's start and end: every cycle of each variant once, in order, then its drain.
    live = phases.seen[kinds.index("load_started") + 1:kinds.index("load_ended")]
    for variant in ("unpatched", "patched"):
        cycles = [p[2] for p in live if p[:2] == ("cycle_started", variant)]
        assert cycles == list(range(len(cycles))) and cycles, variant
        # Its sends began once, just before its first cycle (what faults and actions count at_s from).
        assert [p for p in live if p[0] == "sending_started"].count(("sending_started", variant)) == 1
        assert live.index(("sending_started", variant)) + 1 == live.index(("cycle_started", variant, 0))
        assert live.index(("drain_started", variant)) > max(i for i, p in enumerate(live)
                                                             if p[:2] == ("cycle_started", variant))


def test_v1_retries_wake_nobody_unpatched_and_their_owner_patched(v1_burst):
    unpatched, patched = _wakeups(v1_burst, "unpatched"), _wakeups(v1_burst, "patched")
    assert unpatched.get("retry_owner", 0) == 0 and unpatched.get("retry_other", 0) == 0
    assert unpatched.get("timeout", 0) > 0  # the polls that delivered the retries had to expire
    assert patched.get("retry_owner", 0) > 0 and patched.get("retry_other", 0) == 0


def test_every_message_came_back_on_both(v1_burst):
    for variant in ("unpatched", "patched"):
        ev = pd.read_parquet(v1_burst.archive / "events" / f"{variant}.parquet")
        sent = set(ev.loc[ev.kind == "sent", "ledger_id"])
        retried = set(ev.loc[(ev.kind == "received") & (ev.delivery_attempt == 2), "ledger_id"])
        assert len(sent) == 16 and retried == sent, variant


def test_patched_broker_runs_the_agent_and_the_archive_says_so(v1_burst):
    out = (v1_burst.archive / "logs" / "patched" / "proxy.out").read_text()
    assert "[pop-retry-wakeup] installed" in out and "[pop-wakeup-probe] observing" in out
    assert "[pop-retry-wakeup]" not in (v1_burst.archive / "logs" / "unpatched" / "proxy.out").read_text()
    manifest = json.loads((v1_burst.archive / "manifest.json").read_text())
    [patched] = [v for v in manifest["variants"] if v["name"] == "patched"]
    assert [Path(a["jar"]).name for a in patched["agents"]] == ["pop-retry-wakeup.jar", "pop-wakeup-probe.jar"]
    assert all(len(a["sha256"]) == 64 for a in patched["agents"])
    assert (v1_burst.archive / "probe" / "patched.prom").read_text().startswith("# HELP rmq_probe_pop_wakeups_total")


def test_v2_retries_wake_other_groups_only_when_unpatched(v2_four_groups):
    unpatched, patched = _wakeups(v2_four_groups, "unpatched"), _wakeups(v2_four_groups, "patched")
    assert unpatched.get("retry_other", 0) > 0
    assert patched.get("retry_other", 0) == 0 and patched.get("retry_owner", 0) > 0
    ev = pd.read_parquet(v2_four_groups.archive / "events" / "patched.parquet")
    received = ev[ev.kind == "received"].groupby("group").ledger_id.nunique()
    assert received.to_dict() == {g: 8 for g in ("ShortFourA", "ShortFourB", "ShortFourC", "ShortFourD")}


@pytest.fixture(scope="module")
def v2_coin(tmp_path_factory):
    return _run(tmp_path_factory, "short-v2-whole-poll", ("upstream-5.4.0", "upstream-5.4.0-retry-read"))


def _counter(result, variant: str, name: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for s in result.probes[variant]:
        if s["name"] == name and s.get("group") == "ShortV2StallGroup":
            out[s["read"]] = out.get(s["read"], 0.0) + s["value"]
    return out


def test_upstream_pops_read_the_v1_retry_topic_by_a_coin_and_with_the_fix_no_retry_waits_for_a_poll(v2_coin):
    """5.4.0 with V2 names reads the (never created) V1 retry topic on about half its pops. With the
    pop-retry-read agent a pop still reads V1 when neither topic holds anything (the coin is left alone
    there), but no retry is left waiting for its poll to run out (stalled: waited half a poll or more)."""
    reads = _counter(v2_coin, "upstream-5.4.0", "rmq_probe_pop_retry_reads_total")
    assert reads.get("v1", 0) > 0 and reads.get("v2", 0) > 0
    assert _counter(v2_coin, "upstream-5.4.0-retry-read", "rmq_probe_pop_retry_reads_total").get("v2", 0) > 0
    out = (v2_coin.archive / "logs" / "upstream-5.4.0-retry-read" / "proxy.out").read_text()
    assert "[pop-retry-read] installed" in out
    summary = {s["variant"]: s for s in v2_coin.summary}
    fixed = summary["upstream-5.4.0-retry-read"]
    assert fixed["stalled"]["retries"] > 0 and fixed["stalled"]["count"] == 0
    for variant in ("upstream-5.4.0", "upstream-5.4.0-retry-read"):
        ev = pd.read_parquet(v2_coin.archive / "events" / f"{variant}.parquet")
        nacked = set(ev.loc[ev.kind == "nacked", "ledger_id"])
        retried = set(ev.loc[(ev.kind == "received") & (ev.delivery_attempt == 2), "ledger_id"])
        assert nacked and retried <= nacked, variant
        # 5.4.0 may leave a retry waiting past the run's end: each poll after the nack stalls by a coin of about
        # 1/2 (docs/findings/v2-retry-coin.md), and CI once saw four 10 s polls in a row miss it. The ledger must
        # then count it as never redelivered, not drop it.
        missing = summary[variant]["ledger"]["retries_never_redelivered"]
        assert missing == len(nacked - retried), (variant, missing, nacked - retried)
    assert summary["upstream-5.4.0-retry-read"]["ledger"]["retries_never_redelivered"] == 0


@pytest.fixture(scope="module")
def kv_lock(tmp_path_factory):
    return _run(tmp_path_factory, "short-kv-pop", ("upstream-5.4.0-lock-recheck",))


def test_the_lock_recheck_agent_takes_the_kv_pop_lock_and_every_message_comes_back(kv_lock):
    """5.4.0's KV pop with pop-lock-recheck (PR #10751's idea): every pop takes its lock through the agent's
    tryLock; both bursts are delivered, half of them once more after their nack, none to two consumers at once."""
    out = (kv_lock.archive / "logs" / "upstream-5.4.0-lock-recheck" / "proxy.out").read_text()
    assert "[pop-lock-recheck] installed on org.apache.rocketmq.broker.pop.PopConsumerLockService" in out
    assert "cannot reach" not in out
    [s] = kv_lock.summary
    assert s["sent"] == 16 and s["ledger"]["lost"] == 0 and s["ledger"]["duplicated"] == 0, s["ledger"]
    assert s["ledger"]["retries_never_redelivered"] == 0 and s["nacks"] > 0
