"""Hybrid releases: which release each module comes from, whether the jars of different releases link, and
how the result is recorded (cache, manifest) and shown (terminal tables)."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import struct
import zipfile
from pathlib import Path

import pytest

from harness.archive import manifest
from harness.contracts.modules import ModuleJar, borrowed, hybrid_note
from harness.contracts.options import RunOptions
from harness.contracts.record import MANIFEST_SCHEMA_VERSION, RunRecord
from harness.core.errors import ConfigError
from harness.deploy.local import assembly, distribution, jars, linkage, maven
from harness.inputs.catalogue import load_scenario
from harness.inputs.variants import Variant
from harness.report.run_tables import print_hybrids, variant_label

# The listings of Maven Central as found on 2026-11-27 (maven-metadata.xml of each module; 5.x releases only).
CENTRAL_2026_11_27 = {
    "rocketmq-broker": {"5.1.0", "5.1.1", "5.1.3", "5.1.4", "5.2.0", "5.3.0", "5.3.1", "5.3.2", "5.3.3", "5.3.4",
                        "5.4.0", "5.5.0", "5.5.1"},
    "rocketmq-store": {"5.1.0", "5.3.3", "5.3.4", "5.4.0", "5.5.0", "5.5.1"},
    "rocketmq-common": {"5.1.0", "5.3.3", "5.4.0", "5.5.0", "5.5.1"},
    "rocketmq-remoting": {"5.1.0", "5.3.3", "5.4.0", "5.5.0", "5.5.1"},
    "rocketmq-tiered-store": {"5.3.3", "5.4.0", "5.5.0", "5.5.1"},
    "rocketmq-controller": {"5.3.3", "5.3.4", "5.4.0", "5.5.0", "5.5.1"},
    "rocketmq-proxy": {"5.1.0", "5.1.1", "5.1.3", "5.2.0", "5.3.3", "5.4.0", "5.5.0"},
    "rocketmq-namesrv": {"5.1.0", "5.1.1", "5.1.4", "5.2.0", "5.3.3", "5.3.4", "5.4.0", "5.5.0"},
    "rocketmq-tools": {"5.1.0", "5.1.1", "5.1.3", "5.1.4", "5.2.0", "5.3.1", "5.3.3", "5.4.0", "5.5.0"},
    "rocketmq-client": {"5.1.0", "5.3.3", "5.4.0", "5.5.0"},
    "rocketmq-acl": {"5.1.0", "5.3.2"},
}


def test_a_missing_module_comes_from_the_newest_earlier_release_of_the_same_line():
    plan = assembly.assembly("5.3.4", CENTRAL_2026_11_27)
    assert plan.why_not() is None
    assert plan.versions["rocketmq-broker"] == plan.versions["rocketmq-namesrv"] == "5.3.4"
    assert plan.fills == {"rocketmq-acl": "5.3.2", "rocketmq-client": "5.3.3", "rocketmq-common": "5.3.3",
                             "rocketmq-proxy": "5.3.3", "rocketmq-remoting": "5.3.3",
                             "rocketmq-tiered-store": "5.3.3", "rocketmq-tools": "5.3.3"}
    plan = assembly.assembly("5.5.1", CENTRAL_2026_11_27)
    assert plan.why_not() is None
    assert plan.fills == {"rocketmq-client": "5.5.0", "rocketmq-namesrv": "5.5.0", "rocketmq-proxy": "5.5.0",
                             "rocketmq-tools": "5.5.0"}
    # A module the release no longer publishes is only managed: 5.3.3's tree has no rocketmq-acl, so Maven takes
    # none and 5.3.3 runs as its own (a hybrid is read from the jars: Distribution.hybrid).
    assert assembly.assembly("5.3.3", CENTRAL_2026_11_27).fills == {"rocketmq-acl": "5.3.2"}
    assert assembly.assembly("5.4.0", CENTRAL_2026_11_27).fills == {}


def test_no_module_is_taken_across_a_minor_line_or_from_a_later_release():
    # 5.3.2: no 5.3.x before it has a proxy or a name server (5.2.0's are another line; 5.3.3's come later).
    assert assembly.assembly("5.3.2", CENTRAL_2026_11_27).why_not() == (
        "rocketmq-proxy, rocketmq-namesrv 5.3.2 not published on Maven Central, nor in an earlier 5.3.x release")
    assert assembly.assembly("5.1.2", {"rocketmq-common": {"5.1.2"}}).why_not() == (
        "rocketmq-broker 5.1.2 not published on Maven Central")
    # 5.1.4 takes 5.1.3's proxy, not 5.1.1's nor 5.2.0's.
    assert assembly.assembly("5.1.4", CENTRAL_2026_11_27).versions["rocketmq-proxy"] == "5.1.3"


def test_a_hybrid_pom_manages_every_module_and_pins_the_releases_own_third_party_versions():
    plan = assembly.assembly("5.5.1", CENTRAL_2026_11_27)
    pins = maven.parse_dependency_list(
        "The following files have been resolved:\n"
        "   org.bouncycastle:bcpkix-jdk18on:jar:1.83:runtime -- module org.bouncycastle.pkix\n"
        "   io.netty:netty-tcnative-boringssl-static:jar:linux-x86_64:2.0.53.Final:compile\n"
        "   org.apache.rocketmq:rocketmq-proto:jar:2.1.2:compile\n")
    assert pins == [("org.bouncycastle", "bcpkix-jdk18on", "jar", "", "1.83"),
                    ("io.netty", "netty-tcnative-boringssl-static", "jar", "linux-x86_64", "2.0.53.Final"),
                    ("org.apache.rocketmq", "rocketmq-proto", "jar", "", "2.1.2")]
    pom = maven._pom("5.5.1", plan, pins, top=("rocketmq-broker", *assembly.ARTIFACTS))
    management, deps = pom.split("</dependencyManagement>")
    assert "<artifactId>rocketmq-proxy</artifactId><version>5.5.0</version>" in deps
    assert "<artifactId>rocketmq-broker</artifactId><version>5.5.1</version>" in deps
    assert "<artifactId>rocketmq-common</artifactId><version>5.5.1</version>" in management
    assert "<artifactId>rocketmq-client</artifactId><version>5.5.0</version>" in management
    assert ("<artifactId>netty-tcnative-boringssl-static</artifactId><version>2.0.53.Final</version>"
            "<classifier>linux-x86_64</classifier>") in management
    # A release of its own modules keeps the plain pom: the three artifacts at its version, nothing managed.
    assert "dependencyManagement" not in maven._pom("5.3.3")


def _jar(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


def test_the_module_jars_of_a_lib_are_named_with_version_and_digest_and_a_hybrid_says_what_came_from_where(
        tmp_path: Path):
    lib = tmp_path / "lib"
    lib.mkdir()
    for name in ("rocketmq-broker-5.5.1.jar", "rocketmq-tiered-store-5.5.1.jar", "rocketmq-proxy-5.5.0.jar",
                 "rocketmq-namesrv-5.5.0.jar", "rocketmq-proto-2.1.2.jar", "rocketmq-logback-classic-1.0.1.jar"):
        _jar(lib / name, {"x.txt": name.encode()})
    modules = distribution.module_jars(lib)
    assert [(m.artifact, m.version) for m in modules] == [
        ("rocketmq-broker", "5.5.1"), ("rocketmq-namesrv", "5.5.0"), ("rocketmq-proxy", "5.5.0"),
        ("rocketmq-tiered-store", "5.5.1")]  # proto and the logging shims are versioned apart: not modules
    assert modules[0].sha256 == hashlib.sha256((lib / "rocketmq-broker-5.5.1.jar").read_bytes()).hexdigest()
    dist = distribution.Distribution("5.5.1", lib, {}, modules)
    assert dist.hybrid == "hybrid: namesrv, proxy from 5.5.0"
    assert distribution.Distribution("5.5.0", lib, {}, tuple(m for m in modules if m.version == "5.5.0")).hybrid is None


def test_a_hybrid_note_groups_modules_by_release_and_old_records_are_not_hybrids():
    recorded = [{"artifact": "rocketmq-broker", "version": "5.3.4", "sha256": "a"},
                {"artifact": "rocketmq-proxy", "version": "5.3.3", "sha256": "b"},
                {"artifact": "rocketmq-acl", "version": "5.3.2", "sha256": "c"},
                {"artifact": "rocketmq-common", "version": "5.3.3", "sha256": "d"}]
    assert hybrid_note("5.3.4", recorded) == "hybrid: acl from 5.3.2; common, proxy from 5.3.3"
    assert borrowed("5.3.4", [ModuleJar("rocketmq-proxy", "5.3.3")]) == {"rocketmq-proxy": "5.3.3"}
    assert hybrid_note("5.3.4", []) is None  # an archive before manifest 7 recorded no modules
    assert hybrid_note(None, recorded) == hybrid_note("5.3.4", recorded)  # the broker jar names the release


# --- linkage: class files written by hand (JVMS 4), so no JVM is needed ------------------------------------


def _class(name: str, superclass: str | None = "java/lang/Object", methods: tuple[tuple[str, str], ...] = (),
           calls: tuple[tuple[str, str, str], ...] = (), names: tuple[str, ...] = ()) -> bytes:
    """A class file declaring ``methods`` (abstract, no code) whose constant pool refers to ``calls``
    (class, method or field, descriptor) and ``names`` (classes)."""
    pool: list[bytes] = []
    index: dict[tuple, int] = {}

    def add(key: tuple, entry: bytes) -> int:
        if key not in index:
            pool.append(entry)
            index[key] = len(pool)
        return index[key]

    def utf8(s: str) -> int:
        raw = s.encode()
        return add(("u", s), b"\x01" + struct.pack(">H", len(raw)) + raw)

    def cls(s: str) -> int:
        return add(("c", s), b"\x07" + struct.pack(">H", utf8(s)))

    this = cls(name)
    sup = cls(superclass) if superclass else 0
    for n in names:
        cls(n)
    for owner, m, desc in calls:
        nat = add(("n", m, desc), b"\x0c" + struct.pack(">HH", utf8(m), utf8(desc)))
        tag = b"\x0a" if desc.startswith("(") else b"\x09"  # Methodref, or Fieldref
        add(("m", owner, m, desc), tag + struct.pack(">HH", cls(owner), nat))
    declared = [(utf8(m), utf8(d)) for m, d in methods]
    body = b"".join(struct.pack(">HHHH", 0x0401, n, d, 0) for n, d in declared)
    return (b"\xca\xfe\xba\xbe" + struct.pack(">HHH", 0, 52, len(pool) + 1) + b"".join(pool)
            + struct.pack(">HHHH", 0x21, this, sup, 0) + struct.pack(">H", 0)
            + struct.pack(">H", len(declared)) + body + struct.pack(">H", 0))


def _linkage_jars(tmp_path: Path, broker_calls: tuple, broker_names: tuple = (),
                  referrer: str = "org/apache/rocketmq/broker/Broker") -> list[tuple[Path, str]]:
    common = _jar(tmp_path / "rocketmq-common-5.3.3.jar", {
        "org/apache/rocketmq/common/Base.class": _class("org/apache/rocketmq/common/Base",
                                                        methods=(("inherited", "()V"),)),
        "org/apache/rocketmq/common/BrokerConfig.class": _class("org/apache/rocketmq/common/BrokerConfig",
                                                                "org/apache/rocketmq/common/Base",
                                                                methods=(("getOld", "()I"),)),
        "org/apache/rocketmq/common/Worker.class": _class("org/apache/rocketmq/common/Worker", "java/lang/Thread"),
    })
    broker = _jar(tmp_path / "rocketmq-broker-5.3.4.jar", {
        f"{referrer}.class": _class(referrer, calls=broker_calls, names=broker_names)})
    return [(broker, "5.3.4"), (common, "5.3.3")]


def test_references_into_a_jar_of_another_release_are_looked_up_through_the_supertypes(tmp_path: Path):
    cfg = "org/apache/rocketmq/common/BrokerConfig"
    found = linkage.breaks(_linkage_jars(tmp_path, (
        (cfg, "getOld", "()I"),  # declared
        (cfg, "inherited", "()V"),  # in its superclass
        (cfg, "hashCode", "()I"),  # Object's
        ("org/apache/rocketmq/common/Worker", "interrupt", "()V"),  # a JDK superclass: cannot tell, so found
        (cfg, "getPopPollingMapExpireTimeSeconds", "()I"),  # nowhere: the 5.3.4 broker on 5.3.3's common
        (cfg, "CLIENT_ID_KEY", "Lio/netty/util/AttributeKey;"),  # a field, nowhere either
    ), broker_names=("org/apache/rocketmq/common/topic/Gone", "org/apache/rocketmq/broker/Missing")))
    members = [b for b in found if b.member]
    assert [(b.target, b.member) for b in members] == [
        ("org.apache.rocketmq.common.BrokerConfig", "CLIENT_ID_KEY:Lio/netty/util/AttributeKey;"),
        ("org.apache.rocketmq.common.BrokerConfig", "getPopPollingMapExpireTimeSeconds()I")]
    assert str(members[1]) == ("rocketmq-broker-5.3.4.jar (org.apache.rocketmq.broker.Broker) needs "
                               "org.apache.rocketmq.common.BrokerConfig.getPopPollingMapExpireTimeSeconds()I, not "
                               "in rocketmq-common-5.3.3.jar")
    # A missing class counts only in a package the other release's jars hold (common/topic is not one; the
    # broker's own package is of its own release).
    assert [b for b in found if not b.member] == []
    with_gone = linkage.breaks(_linkage_jars(tmp_path, (), broker_names=("org/apache/rocketmq/common/Gone",)))
    assert [(b.target, b.member) for b in with_gone] == [("org.apache.rocketmq.common.Gone", "")]


def test_a_break_in_code_behind_a_setting_is_kept_with_the_setting_and_refused_only_when_a_variant_sets_it(
        tmp_path: Path):
    pipeline = "org/apache/rocketmq/broker/auth/pipeline/AuthorizationPipeline"
    pairs = _linkage_jars(tmp_path, (("org/apache/rocketmq/common/BrokerConfig", "evaluate", "()V"),),
                          referrer=pipeline)
    found = linkage.breaks(pairs)
    assert [b.guard for b in found] == ["authorizationEnabled"]
    lib = pairs[0][0].parent
    modules = distribution.module_jars(lib)
    unlinked = linkage.check_links("5.3.4", lib, modules)
    assert [s for _, s in unlinked] == ["authorizationEnabled"]
    dist = distribution.Distribution("5.3.4", lib, {}, modules, tuple(unlinked))
    dist.refuse_guarded("rocketmq-5.3.4", {"authorizationEnabled": "false"})
    with pytest.raises(ConfigError) as e:
        dist.refuse_guarded("rocketmq-5.3.4", {"authorizationEnabled": True})
    assert str(e.value).startswith("variant rocketmq-5.3.4: authorizationEnabled=true runs code of this hybrid: "
                                   "common from 5.3.3 that does not link")
    assert "\n" not in str(e.value)
    # Not this build's to run: a campaign leaves it out of the scenario and runs the others (harness.campaigns).
    from harness.core.errors import NotApplicable

    assert isinstance(e.value, NotApplicable) and e.value.variant == "rocketmq-5.3.4"


def test_a_hybrid_that_does_not_link_is_refused_in_one_line_naming_the_first_reference(tmp_path: Path):
    pairs = _linkage_jars(tmp_path, (("org/apache/rocketmq/common/BrokerConfig", "getNew", "()I"),
                                     ("org/apache/rocketmq/common/BrokerConfig", "getNewer", "()I")))
    lib = pairs[0][0].parent
    with pytest.raises(ConfigError) as e:
        linkage.check_links("5.3.4", lib, distribution.module_jars(lib))
    msg = str(e.value)
    assert msg.startswith("RocketMQ 5.3.4 cannot be assembled from Maven Central: its modules do not link: "
                          "rocketmq-broker-5.3.4.jar (org.apache.rocketmq.broker.Broker) needs "
                          "org.apache.rocketmq.common.BrokerConfig.getNew()I, not in rocketmq-common-5.3.3.jar "
                          "(2 such reference(s))")
    assert "point the variant's jars: at a local build" in msg and "\n" not in msg


def test_a_cached_hybrid_keeps_what_its_fetch_recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("RMQ_HARNESS_CACHE", str(tmp_path))
    root = jars.version_dir("5.5.1")
    lib = root / "lib"
    lib.mkdir(parents=True)
    for i, main in enumerate(distribution.MAIN_CLASSES.values()):
        name = ("rocketmq-broker-5.5.1.jar", "rocketmq-proxy-5.5.0.jar", "rocketmq-namesrv-5.5.0.jar",
                "rocketmq-tools-5.5.0.jar")[i]
        _jar(lib / name, {main.replace(".", "/") + ".class": b"\xca\xfe"})
    (root / "complete.json").write_text(json.dumps({"unlinked": [
        {"reference": "broker needs auth.evaluate", "runs_only_with": "authorizationEnabled"}]}))
    monkeypatch.setenv("PATH", "")  # no Maven, no listing: the cache alone
    dist = jars.ensure_version("5.5.1", log=lambda s: None, fetch=lambda url: pytest.fail("looked up " + url))
    assert dist.hybrid == "hybrid: namesrv, proxy, tools from 5.5.0"
    assert dist.unlinked == (("broker needs auth.evaluate", "authorizationEnabled"),)


def test_the_manifest_records_every_module_jar_and_reads_archives_without_them():
    variant = Variant(name="rocketmq-5.3.4", version="5.3.4")
    now = dt.datetime(2026, 11, 27, tzinfo=dt.UTC)
    jar = ModuleJar("rocketmq-proxy", "5.3.3", "ab" * 32)
    record = manifest.begin("r1", load_scenario("burst"), [variant], RunOptions(),
                            {"names": [variant.name], "how": "given", "seed": None}, started=now)
    record.variant(variant.name).modules = [jar.as_dict()]  # as the run's BrokerFacts records them
    m = manifest.build(record, ended=now + dt.timedelta(seconds=1))
    assert (m.schema_version, m.duration_s, m.host.cpus > 0) == (MANIFEST_SCHEMA_VERSION, 1.0, True)
    assert m.variants[0].modules == [{"artifact": "rocketmq-proxy", "version": "5.3.3", "sha256": "ab" * 32}]
    old = m.model_dump()
    old["schema_version"] = 6
    del old["variants"][0]["modules"]
    assert RunRecord.model_validate(old).variants[0].modules == []


def test_the_terminal_summary_marks_a_hybrid_and_says_what_came_from_where(capsys: pytest.CaptureFixture):
    print_hybrids({"rocketmq-5.5.1": "hybrid: namesrv, proxy from 5.5.0", "rocketmq-5.3.3": None})
    lines = capsys.readouterr().out.replace("\n", " ")
    assert "rocketmq-5.5.1 is a hybrid: namesrv, proxy from 5.5.0" in lines and "5.3.3" not in lines
    assert variant_label("rocketmq-5.5.1", "hybrid: x from y") == "rocketmq-5.5.1 (hybrid)"
    assert variant_label("rocketmq-5.3.3", None) == "rocketmq-5.3.3"


def test_the_analysis_rows_and_the_variant_facts_carry_each_archives_hybrid_note():
    from types import SimpleNamespace

    from harness.measure.enrich import enrich
    from spark.matrix import variant_facts

    scenario = load_scenario("burst").model_dump(mode="json")
    mods = [{"artifact": "rocketmq-broker", "version": "5.5.1", "sha256": "a"},
            {"artifact": "rocketmq-proxy", "version": "5.5.0", "sha256": "b"}]
    record = RunRecord(run_id="r1", started_at="2026-11-27T12:00:00+00:00", scenario=scenario, variants=[
        {"name": "rocketmq-5.5.1", "version": "5.5.1", "modules": mods},
        {"name": "rocketmq-5.3.3", "version": "5.3.3"}])  # recorded nothing: an older archive
    archive = SimpleNamespace(path="runs/r1", record=record)
    rows = enrich([{"scenario": "burst", "variant": "rocketmq-5.5.1"},
                   {"scenario": "burst", "variant": "rocketmq-5.3.3"}], [record])
    assert [r["hybrid"] for r in rows] == ["hybrid: proxy from 5.5.0", None]
    facts = variant_facts(SimpleNamespace(archives=[archive]), ["rocketmq-5.5.1", "rocketmq-5.3.3"])
    assert [f["hybrid"] for f in facts] == ["hybrid: proxy from 5.5.0", None]


def test_without_the_listings_a_release_is_fetched_as_published_and_the_line_says_why():
    lines: list[str] = []

    def down(url: str) -> bytes:
        raise OSError("connection refused")

    assert jars._plan("5.5.1", down, lines.append) is None  # Maven then names any module that is missing
    assert len(lines) == 1 and lines[0].startswith("cannot list RocketMQ releases: https://")
    assert lines[0].endswith("fetching RocketMQ 5.5.1 as published, without modules of earlier releases")
    assert jars._plan("5.5.1-SNAPSHOT", down, lines.append) is None and len(lines) == 1  # not a release: as written


def test_a_local_build_is_measured_against_its_own_broker_jar_not_the_version_its_variant_names():
    build = [{"artifact": "rocketmq-broker", "version": "5.3.4-SNAPSHOT"},
             {"artifact": "rocketmq-proxy", "version": "5.3.4-SNAPSHOT"}]
    assert hybrid_note("5.3.3", build) is None  # one build, whatever the variant's version: not a hybrid
    assert hybrid_note("5.3.3", [*build[:1], {"artifact": "rocketmq-proxy", "version": "5.3.3"}]) == (
        "hybrid: proxy from 5.3.3")


def test_a_hybrid_that_did_not_link_is_refused_again_without_maven_until_its_plan_changes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("RMQ_HARNESS_CACHE", str(tmp_path))
    listed = {"rocketmq-broker": ("5.3.3", "5.3.4"), "rocketmq-proxy": ("5.3.3",), "rocketmq-namesrv": ("5.3.4",),
              "rocketmq-tools": ("5.3.3",)}

    def fetch(url: str) -> bytes:
        body = "".join(f"<version>{v}</version>" for v in listed.get(url.rsplit("/", 2)[-2], ()))
        return f"<metadata><versioning><versions>{body}</versions></versioning></metadata>".encode()

    plan = assembly.assembly("5.3.4", assembly.listings(fetch))
    root = jars.version_dir("5.3.4")
    root.mkdir(parents=True)
    (root / "refused.json").write_text(json.dumps({"versions": plan.versions, "why": "RocketMQ 5.3.4 cannot be "
                                                   "assembled from Maven Central: its modules do not link: x"}))
    monkeypatch.setattr(jars.shutil, "which", lambda name: "/usr/bin/mvn")
    monkeypatch.setattr(maven, "resolve", lambda *a: pytest.fail("fetched again"))
    with pytest.raises(ConfigError, match="its modules do not link: x"):
        jars.ensure_version("5.3.4", log=lambda s: None, fetch=fetch)
    listed["rocketmq-proxy"] = ("5.3.3", "5.3.4")  # published since: another plan, so Maven is asked again
    with pytest.raises(BaseException, match="fetched again"):
        jars.ensure_version("5.3.4", log=lambda s: None, fetch=fetch)
