"""External variants (issue 32), the parts that need no cluster: the variants file's `endpoints:` and what it
refuses, and the run-unique names a driver uses on a cluster the harness does not own."""

import pytest

from harness.client import registry
from harness.client.suffixed import SuffixedDriver
from harness.contracts.endpoints import Endpoints, run_tag
from harness.core.errors import ConfigError
from harness.inputs.variants import parse_variants


def test_an_external_variant_names_endpoints_instead_of_a_build():
    v = parse_variants({"variants": {"staging": {"endpoints": {"namesrv": "ns-1.example:9876",
                                                              "proxy": "10.0.0.7:8081"}}}})["staging"]
    assert v.is_external and v.version is None and v.endpoints.proxy == "10.0.0.7:8081"
    remoting_only = parse_variants({"variants": {"r": {"endpoints": {"namesrv": "[::1]:9876"}}}})["r"]
    assert remoting_only.endpoints.proxy is None
    built = parse_variants({"variants": {"b": {"version": "5.3.3"}}})["b"]
    assert not built.is_external


@pytest.mark.parametrize(("body", "name", "why"), [
    ({"endpoints": {"namesrv": "h:9876"}, "agents": [{"jar": "x.jar"}]}, "ext", "runs as deployed.*remove agents"),
    ({"endpoints": {"namesrv": "h:9876"}, "version": "5.3.3", "broker": {"a": 1}}, "ext",
     "remove version, broker"),
    ({"endpoints": {"namesrv": "nohost"}}, "ext", "endpoints.namesrv: 'nohost' is no host:port"),
    ({"endpoints": {"namesrv": "h:70000"}}, "ext", "is no host:port"),
    ({"endpoints": {"namesrv": "h:9876", "grpc": "h:8081"}}, "ext", "endpoints.grpc"),
    ({}, "ext", "version: required .* or endpoints:"),
    ({"endpoints": {"namesrv": "h:9876"}}, "rocketmq-5.3.3", "kept for the releases the harness deploys"),
])
def test_what_an_external_variant_cannot_be_is_refused_in_one_line(body, name, why):
    with pytest.raises(ConfigError, match=why) as e:
        parse_variants({"variants": {name: body}})
    assert "\n" not in str(e.value) and "Value error" not in str(e.value)


def _endpoints(suffix: str = "") -> Endpoints:
    return Endpoints(variant="ext", version="5.3.3", grpc="h:8081", remoting="", broker="h:10911",
                     namesrv="h:9876", metrics="", suffix=suffix)


def test_a_cluster_not_owned_gets_names_unique_to_the_run_and_variant():
    tag = run_tag("20261127-050000-burst-abcd", "ext")
    assert tag == run_tag("20261127-050000-burst-abcd", "ext") and tag.startswith("-rh") and len(tag) == 11
    assert tag != run_tag("20261127-050000-burst-abcd", "other") != run_tag("another-run", "ext")
    ep = _endpoints(tag)
    assert ep.physical("PopBurstTopic") == "PopBurstTopic" + tag
    # The broker puts %DLQ% / %RETRY% before the group's own name: the suffix goes on the group's name.
    assert ep.physical("%DLQ%PopBurstGroup") == "%DLQ%PopBurstGroup" + tag
    assert ep.physical("%RETRY%G") == "%RETRY%G" + tag
    assert _endpoints().physical("PopBurstTopic") == "PopBurstTopic"
    assert "suffix" not in _endpoints().as_dict() and ep.as_dict()["suffix"] == tag


class _Recording:
    protocol = "grpc"

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def create_topic(self, name, queues, message_type="NORMAL"):
        self.calls.append(("topic", name, queues, message_type))

    def create_group(self, name, retry_max_times, orderly=False, lite_bind_topic=None):
        self.calls.append(("group", name, retry_max_times, orderly, lite_bind_topic))

    def producer(self, topic, lite=False):
        self.calls.append(("producer", topic, lite))
        return "producer"

    def pop_consumer(self, group, topic, long_poll_s, tags="*", lite_topics=(), options=None):
        self.calls.append(("consumer", group, topic, long_poll_s, tags, tuple(lite_topics)))
        return "consumer"

    def close(self):
        self.calls.append(("close",))


def test_the_suffixed_driver_suffixes_on_the_wire_only():
    inner, ep = _Recording(), _endpoints("-rh0123abcd")
    d = SuffixedDriver(inner, ep)
    d.create_topic("T", 4, "FIFO")
    d.create_group("G", 16, orderly=True)
    d.create_group("L", 16, lite_bind_topic="P")
    assert d.producer("T") == "producer" and d.pop_consumer("%DLQ%G", "T", 20, "TagA") == "consumer"
    d.pop_consumer("L", "P", 20, lite_topics=["mg0"])  # lite topics are named under the parent: no suffix
    d.close()
    assert inner.calls == [("topic", "T-rh0123abcd", 4, "FIFO"), ("group", "G-rh0123abcd", 16, True, None),
                           ("group", "L-rh0123abcd", 16, False, "P-rh0123abcd"), ("producer", "T-rh0123abcd", False),
                           ("consumer", "%DLQ%G-rh0123abcd", "T-rh0123abcd", 20, "TagA", ()),
                           ("consumer", "L-rh0123abcd", "P-rh0123abcd", 20, "*", ("mg0",)), ("close",)]
    assert d.protocol == "grpc"


def test_the_registry_wraps_a_driver_only_for_endpoints_with_a_suffix(monkeypatch):
    import types

    fake = types.SimpleNamespace(Fake=lambda endpoints, offload, log_file: _Recording())
    monkeypatch.setattr(registry, "import_module", lambda module: fake)
    monkeypatch.setitem(registry.DRIVERS, "fake", ("fake", "Fake"))
    assert isinstance(registry.driver("fake", _endpoints()), _Recording)
    wrapped = registry.driver("fake", _endpoints("-rh0123abcd"))
    assert isinstance(wrapped, SuffixedDriver) and wrapped.endpoints.suffix == "-rh0123abcd"


@pytest.mark.parametrize(("desc", "version"), [("V5_3_3", "5.3.3"), ("V5_4_0", "5.4.0"),
                                               ("V5_3_4_SNAPSHOT", "5.3.4-SNAPSHOT"), ("", None), ("X", None)])
def test_a_brokers_version_is_read_from_its_runtime_info(desc, version):
    from harness.client.remoting import version_of

    assert version_of({"brokerVersionDesc": desc} if desc else {}) == version


def _variants_file(tmp_path):
    path = tmp_path / "variants.yaml"
    path.write_text("variants:\n  unpatched: {version: '5.3.3'}\n"
                    "  outside: {endpoints: {namesrv: '127.0.0.1:1', proxy: '127.0.0.1:2'}}\n")
    return path


@pytest.mark.parametrize(("argv", "why"), [
    (["brokers", "up", "--variant", "outside"], "names endpoints: it is a cluster the harness does not start"),
    (["brokers", "fetch", "--variant", "outside"], "names endpoints"),
    (["run", "--variant", "outside", "--variant", "unpatched", "--probe"], "--probe mounts the wakeup-probe agent"),
    (["run", "--variant", "outside", "--scenario", "faults"], "injects .*whose processes the harness does not own"),
    (["matrix", "--variant", "unpatched", "--variant", "outside", "--scenario", "burst", "--scenario", "faults"],
     "injects .*whose processes the harness does not own"),
    (["calibrate", "--variant", "outside"], "a calibration plants its delays with an agent"),
])
def test_what_no_one_can_do_to_a_cluster_not_owned_is_refused_before_anything_starts(tmp_path, capsys, argv, why):
    import re

    from harness.cli.main import main

    runs = tmp_path / "runs"
    assert main(["--variants", str(_variants_file(tmp_path)), *argv, *(["--runs-dir", str(runs)]
                                                                      if argv[0] in ("run", "matrix", "calibrate")
                                                                      else [])]) == 2
    err = capsys.readouterr().err
    assert re.search(why, err) and len(err.strip().splitlines()) == 1
    assert not runs.exists()


def test_a_cluster_that_does_not_answer_is_refused_before_the_archive_starts(tmp_path, capsys):
    from harness.cli.main import main

    runs = tmp_path / "runs"
    assert main(["--variants", str(_variants_file(tmp_path)), "run", "--variant", "outside", "--variant",
                 "unpatched", "--runs-dir", str(runs)]) == 2
    err = capsys.readouterr().err
    assert "variant outside" in err and "name server 127.0.0.1:1 does not answer" in err
    assert not runs.exists()  # no archive begun, no work directory
