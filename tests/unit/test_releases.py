"""Which releases exist and can be assembled, ranges of them, batches side by side, bisection ends."""

from __future__ import annotations

import urllib.error
from email.message import Message

import pytest

from harness.campaigns import releases
from harness.campaigns.sweep import batches
from harness.core.errors import ConfigError, HarnessError
from harness.inputs.variants import Variant


def metadata(*versions: str) -> bytes:
    body = "".join(f"<version>{v}</version>" for v in versions)
    return f"<metadata><versioning><versions>{body}</versions></versioning></metadata>".encode()


LISTINGS = {
    "rocketmq-broker": ("5.0.0", "5.1.0", "5.3.3", "5.3.4", "5.4.0", "5.5.1"),
    "rocketmq-common": ("5.0.0-ALPHA", "5.0.0", "5.1.0", "5.1.2", "5.3.3", "5.4.0", "4.9.7"),
    "rocketmq-client": ("5.0.0", "5.1.0", "5.3.3", "5.4.0"),
    "rocketmq-proxy": ("5.0.0", "5.1.0", "5.3.3", "5.4.0"),
    "rocketmq-namesrv": ("5.0.0", "5.3.3", "5.3.4", "5.4.0"),
    "rocketmq-tools": ("5.0.0", "5.1.0", "5.3.3", "5.4.0"),
}


def fake_fetch(url: str) -> bytes:
    artifact = url.rsplit("/", 2)[-2]
    if artifact not in LISTINGS:  # a module never published: the repository has no metadata for it
        raise urllib.error.HTTPError(url, 404, "Not Found", Message(), None)
    return metadata(*LISTINGS[artifact])


@pytest.fixture
def cat() -> releases.Catalogue:
    return releases.catalogue(fetch=fake_fetch)


def test_a_release_is_listed_by_any_module_and_assemblable_when_its_broker_and_its_line_have_the_rest(cat):
    # 5.x releases only, pre-releases and 4.x left out; 5.5.1 is listed by the broker jar alone, 5.1.2 by common.
    assert cat.versions == ["5.0.0", "5.1.0", "5.1.2", "5.3.3", "5.3.4", "5.4.0", "5.5.1"]
    assert cat.why_not("5.3.3") is None
    # 5.3.4: its broker and name server; proxy, tools, common, client from 5.3.3, the newest earlier of its line.
    assert cat.why_not("5.3.4") is None
    assert cat.assemblies["5.3.4"].fills == {"rocketmq-client": "5.3.3", "rocketmq-common": "5.3.3",
                                             "rocketmq-proxy": "5.3.3", "rocketmq-tools": "5.3.3"}
    # Never from another line: 5.5.1 has no 5.5.x before it here (5.4.0's proxy would be a minor release away).
    assert cat.why_not("5.5.1") == ("rocketmq-proxy, rocketmq-namesrv, rocketmq-tools 5.5.1 not published on Maven "
                                    "Central, nor in an earlier 5.5.x release")
    assert cat.why_not("5.1.0") == ("rocketmq-namesrv 5.1.0 not published on Maven Central, nor in an earlier 5.1.x "
                                    "release")
    assert cat.why_not("5.1.2") == "rocketmq-broker 5.1.2 not published on Maven Central"
    assert cat.why_not("5.9.9") == "not a release on Maven Central"


def test_ranges_include_both_ends_and_either_may_be_left_out(cat):
    assert releases.in_range("5.1.0..5.4.0", cat) == ["5.1.0", "5.1.2", "5.3.3", "5.3.4", "5.4.0"]
    assert releases.in_range("5.3.4..", cat) == ["5.3.4", "5.4.0", "5.5.1"]
    assert releases.in_range("..5.1.0", cat) == ["5.0.0", "5.1.0"]  # an open end: the sweep skips 5.0.0 itself
    assert releases.in_range("5.2.0..5.3.0", cat) == []


@pytest.mark.parametrize(("spec", "says"), [
    ("5.1.0", "write FIRST..LAST"),
    ("5.4.0..5.1.0", "5.4.0 is newer than 5.1.0"),
    ("4.9.7..5.3.3", "RocketMQ 4.9.7: older than the first release the harness runs (5.1.0"),
    ("5.0.0..5.3.3", "RocketMQ 5.0.0: older than the first release the harness runs (5.1.0; 5.0.0's proxy"),
    ("5.x..5.3.3", "'5.x' is not a release version"),
])
def test_bad_ranges_are_refused_in_one_line(cat, spec, says):
    with pytest.raises(ConfigError, match=None) as e:
        releases.in_range(spec, cat)
    assert says in str(e.value) and "\n" not in str(e.value)


def test_assembling_skips_with_the_reason_what_maven_cannot_build_or_the_listing_lacks(cat):
    fetched = []

    def ensure(v: str) -> None:
        fetched.append(v)
        if v == "5.4.0":
            raise ConfigError("RocketMQ 5.4.0 cannot be assembled from Maven Central: x:y:jar:5.4.0 is not "
                              "published there; pick another version")

    lines: list[str] = []
    got = releases.assemble(["5.0.0", "5.1.0", "5.3.3", "5.4.0"], cat, log=lines.append, ensure=ensure)
    assert got.ready == ["5.3.3"]
    assert fetched == ["5.3.3", "5.4.0"]  # 5.1.0 is refused from its listing, 5.0.0 as too old: without Maven
    assert got.skipped["5.0.0"].startswith("older than the first release the harness runs (5.1.0; ")
    assert got.skipped["5.1.0"] == ("rocketmq-namesrv 5.1.0 not published on Maven Central, nor in an earlier "
                                    "5.1.x release")
    assert got.skipped["5.4.0"].startswith("cannot be assembled from Maven Central: x:y:jar:5.4.0")
    assert lines == [f"skipping RocketMQ {v}: {got.skipped[v]}" for v in ("5.0.0", "5.1.0", "5.4.0")]


def test_an_unreachable_repository_is_one_line_naming_it():
    def down(url: str) -> bytes:
        raise OSError("connection refused")

    with pytest.raises(HarnessError, match="cannot list RocketMQ releases: https://.*rocketmq-broker/maven-metadata"):
        releases.catalogue(fetch=down)


def test_a_release_runs_as_shipped_under_its_own_name():
    v = releases.release_variant("5.3.3")
    assert (v.name, v.version, v.agents, v.broker, v.proxy, v.jars) == ("rocketmq-5.3.3", "5.3.3", [], {}, {}, None)


def test_a_bisection_end_is_a_release_or_a_local_build_named_by_its_broker_jar(tmp_path):
    lib = tmp_path / "rocketmq-all-5.3.4-SNAPSHOT" / "lib"
    lib.mkdir(parents=True)
    (lib / "rocketmq-broker-5.3.4-SNAPSHOT.jar").write_bytes(b"")
    v = releases.endpoint(f"jars:{lib}")
    assert v.version == "5.3.4-SNAPSHOT" and v.jars == lib and v.name.startswith("jars-")
    Variant.model_validate(v.model_dump())
    assert releases.endpoint("5.4.0").name == "rocketmq-5.4.0"
    with pytest.raises(ConfigError, match="no such directory"):
        releases.endpoint(f"jars:{tmp_path / 'nope'}")
    with pytest.raises(ConfigError, match="no rocketmq-broker-VERSION.jar"):
        releases.endpoint(f"jars:{tmp_path}")
    with pytest.raises(ConfigError, match="older than the first release"):
        releases.endpoint("5.0.0")


@pytest.mark.parametrize(("n", "size", "sizes"), [
    (7, 4, [4, 3]), (8, 4, [4, 4]), (9, 4, [3, 3, 3]), (1, 4, [1]), (5, 1, [1] * 5), (0, 4, []),
])
def test_batches_are_few_balanced_and_keep_the_order(n, size, sizes):
    items = [releases.release_variant(f"5.{i}.0") for i in range(n)]
    got = batches(items, size)
    assert [len(b) for b in got] == sizes
    assert [v for b in got for v in b] == items


class FakeRun:
    """Stands in for harness.run.sequence.Run in a test of the sweep's loop (which releases run which scenario)."""

    calls: list[tuple[str, list[str]]] = []
    lacking: dict[str, str] = {}  # release -> scenario it lacks a setting of
    broken: set[str] = set()

    def __init__(self, variants, scenario, runs_dir, options, log):
        self.names = [v.name for v in variants]
        self.scenario = scenario

    def execute(self):
        from types import SimpleNamespace

        from harness.core.errors import HarnessError
        from harness.deploy.readiness import UnknownSetting

        FakeRun.calls.append((self.scenario.name, self.names))
        for n in self.names:
            if FakeRun.lacking.get(n) == self.scenario.name:
                raise UnknownSetting(n, f"variant {n} does not know enableRetryTopicV2")
        if any(n in FakeRun.broken for n in self.names):
            raise HarnessError("broker did not start\nlog tail")
        return SimpleNamespace(archive=f"runs/{self.scenario.name}-{'-'.join(self.names)}", summary=[])


def test_a_sweep_runs_each_scenario_per_batch_leaving_out_a_release_that_lacks_its_setting(tmp_path):
    from types import SimpleNamespace

    from harness.campaigns import sweep
    from harness.campaigns.loop import Campaign
    from harness.contracts.options import RunOptions

    FakeRun.calls, FakeRun.lacking, FakeRun.broken = [], {"rocketmq-5.1.0": "v2"}, {"rocketmq-5.5.0"}
    plan = [SimpleNamespace(name="v1"), SimpleNamespace(name="v2")]
    rel = [releases.release_variant(v) for v in ("5.0.0", "5.1.0", "5.3.3", "5.5.0")]
    out = sweep.run_all(plan, rel, 2, Campaign(tmp_path, RunOptions(), lambda s: None, make_run=FakeRun))
    assert FakeRun.calls == [
        ("v1", ["rocketmq-5.0.0", "rocketmq-5.1.0"]),
        ("v2", ["rocketmq-5.0.0", "rocketmq-5.1.0"]), ("v2", ["rocketmq-5.0.0"]),
        ("v1", ["rocketmq-5.3.3", "rocketmq-5.5.0"]), ("v2", ["rocketmq-5.3.3", "rocketmq-5.5.0"])]
    assert out.archives == ["runs/v1-rocketmq-5.0.0-rocketmq-5.1.0", "runs/v2-rocketmq-5.0.0"]
    assert out.not_applicable == {"v2@rocketmq-5.1.0": "variant rocketmq-5.1.0 does not know enableRetryTopicV2"}
    assert out.failed == {f"{s}@rocketmq-{v}": "broker did not start" for s in ("v1", "v2") for v in ("5.3.3", "5.5.0")}


def test_a_setting_the_broker_does_not_know_is_refused_when_the_scenario_turns_it_on_else_kept(monkeypatch):
    from types import SimpleNamespace

    from harness.deploy import readiness
    from harness.deploy.readiness import UnknownSetting
    from harness.inputs.catalogue import load_scenario
    from harness.run.brokers import check_settings

    ep = SimpleNamespace(variant="rocketmq-5.1.0", version="5.1.0")
    monkeypatch.setattr(readiness, "ignored_settings",
                        lambda ep, written: sorted(k for k in written if k != "known"))
    written = {"known": "1", "enableRetryTopicV2": "true", "enableNotifyBeforePopCalculateLag": "false"}
    lines: list[str] = []
    with pytest.raises(UnknownSetting) as e:
        check_settings(ep, load_scenario("fourgroups-v2"), written, lines.append)
    assert e.value.variant == "rocketmq-5.1.0" and "does not know enableRetryTopicV2" in str(e.value)
    # Off is how a build without the setting behaves: kept in the manifest and said, not refused.
    written["enableRetryTopicV2"] = "false"
    kept = check_settings(ep, load_scenario("burst"), written, lines.append)
    assert kept == ["enableNotifyBeforePopCalculateLag", "enableRetryTopicV2"]
    assert lines == ["warning: rocketmq-5.1.0 (RocketMQ 5.1.0) does not know enableNotifyBeforePopCalculateLag, "
                     "enableRetryTopicV2 from its broker.conf and runs without (the manifest keeps them as "
                     "ignored_settings)"]


def test_assembling_names_the_hybrids_by_the_jars_they_ended_up_with(cat, tmp_path):
    from harness.contracts.modules import ModuleJar
    from harness.deploy.local.distribution import Distribution

    def ensure(v: str) -> Distribution:
        own = (ModuleJar("rocketmq-broker", v), ModuleJar("rocketmq-proxy", v))
        hybrid = (ModuleJar("rocketmq-broker", v), ModuleJar("rocketmq-proxy", "5.3.3"))
        return Distribution(v, tmp_path, {}, hybrid if v == "5.3.4" else own)

    got = releases.assemble(["5.3.3", "5.3.4"], cat, log=lambda s: None, ensure=ensure)
    assert got.ready == ["5.3.3", "5.3.4"]
    assert got.hybrids == {"5.3.4": "hybrid: proxy from 5.3.3"}
