from pathlib import Path

from harness.backends.local import config
from harness.backends.local.jars import Distribution
from harness.backends.local.ports import VariantPorts
from harness.variants import parse_variants


def _variant(**body):
    return parse_variants({"variants": {"v1": {"version": "5.3.3", **body}}})["v1"]


def test_broker_properties_defaults_overrides_and_owned_keys(tmp_path: Path):
    ports = VariantPorts.for_slot(2)
    dirs = config.VariantDirs(tmp_path / "v1")
    props = config.broker_properties(_variant(broker={"enableRetryTopicV2": True, "maxIndexNum": 7}), ports, dirs)
    assert props["enableRetryTopicV2"] is True  # the variant wins over harness defaults
    assert props["maxIndexNum"] == 7
    assert props["timerWheelEnable"] is True
    assert props["enableNotifyBeforePopCalculateLag"] is False
    assert props["listenPort"] == ports.broker and props["namesrvAddr"] == f"127.0.0.1:{ports.namesrv}"
    assert props["brokerIP1"] == "127.0.0.1" and props["bindAddress"] == "127.0.0.1"
    assert props["metricsPromExporterHost"] == "127.0.0.1" and props["metricsPromExporterPort"] == ports.metrics
    assert Path(str(props["storePathRootDir"])).is_relative_to(tmp_path)


def test_defaults_keep_v1_retry_topics():
    assert config.BROKER_DEFAULTS["enableRetryTopicV2"] is False


def test_render_properties_lowercases_booleans():
    assert config.render_properties({"a": True, "b": 3, "c": "x"}) == "a=true\nb=3\nc=x\n"


def test_write_configs(tmp_path: Path):
    ports = VariantPorts.for_slot(0)
    files = config.write_configs(_variant(proxy={"grpcClientConsumerMinLongPollingTimeoutMillis": 1000}),
                                 ports, config.VariantDirs(tmp_path / "v1"))
    assert f"listenPort={ports.namesrv}\n" in files["namesrv"].read_text()
    assert "enableRetryTopicV2=false\n" in files["broker"].read_text()
    proxy = files["proxy"].read_text()
    assert f'"grpcServerPort": {ports.grpc}' in proxy and '"proxyMode": "local"' in proxy
    assert '"grpcClientConsumerMinLongPollingTimeoutMillis": 1000' in proxy


def test_commands_carry_owner_agents_and_own_homes(tmp_path: Path):
    dist = Distribution("5.3.3", tmp_path / "lib", {"proxy": tmp_path / "p.xml", "namesrv": tmp_path / "n.xml"})
    dirs = config.VariantDirs(tmp_path / "v1")
    ports = VariantPorts.for_slot(0)
    v = _variant(agents=[{"jar": "/opt/a.jar", "options": "x=1"}, {"jar": "/opt/b.jar"}], jvm_options=["-Dfoo=1"])
    files = {k: tmp_path / k for k in ("namesrv", "broker", "proxy")}
    proxy = config.proxy_command("java", dist, v, ports, dirs, files, "tok/v1/1")
    namesrv = config.namesrv_command("java", dist, dirs, files["namesrv"], "tok/v1/1")
    assert "-javaagent:/opt/a.jar=x=1" in proxy and "-javaagent:/opt/b.jar" in proxy and "-Dfoo=1" in proxy
    assert "-Drmq.harness.owner=tok/v1/1" in proxy and "-Drmq.harness.owner=tok/v1/1" in namesrv
    assert f"-Duser.home={dirs.proxy_home}" in proxy and f"-Duser.home={dirs.namesrv_home}" in namesrv
    assert f"-Drmq.logback.configurationFile={tmp_path / 'p.xml'}" in proxy
    assert proxy[proxy.index("-cp") + 2] == "org.apache.rocketmq.proxy.ProxyStartup"
    # Agents must come before the main class or the JVM treats them as program arguments.
    assert proxy.index("-javaagent:/opt/a.jar=x=1") < proxy.index("-cp")
    # The loopback-bind agent comes first on every broker, before the variant's own agents.
    loopback = [a for a in proxy if a.endswith("loopback-bind.jar")]
    assert len(loopback) == 1 and proxy.index(loopback[0]) < proxy.index("-javaagent:/opt/a.jar=x=1")
