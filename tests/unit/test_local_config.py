from functools import partial
from pathlib import Path

from harness.deploy.local import config
from harness.deploy.local.distribution import Distribution
from harness.deploy.local.ports import VariantPorts
from tests.unit.by_hand import variant

# The variant every test here configures: v1, on 5.3.3.
_variant = partial(variant, "v1", version="5.3.3")


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


def test_a_cluster_mode_topology_is_a_jvm_per_broker_and_a_proxy_of_its_own(tmp_path: Path):
    from harness.inputs.brokers import Topology

    topo = Topology(proxy="cluster", masters=2, slave=True)
    dist = Distribution("5.3.3", tmp_path / "lib", {"proxy": tmp_path / "p.xml", "broker": tmp_path / "b.xml"})
    dirs = config.VariantDirs(tmp_path / "v1")
    ports = VariantPorts.for_slot(0)
    v = _variant(agents=[{"jar": "/opt/a.jar", "options": "port={probe_port}"}], jvm_options=["-Dfoo=1"])
    files = config.write_configs(v, ports, dirs, topo)
    cmds = config.commands("java", dist, v, ports, dirs, files, "tok", topo)
    assert list(cmds) == ["namesrv", "broker", "slave", "broker-b", "proxy"] == list(config.processes(topo))
    # Each broker its own JVM with the agents (its own probe port), its own home and store.
    for node in config.nodes(v, topo, ports):
        argv = cmds[node.name]
        assert argv[argv.index("-cp") + 2] == "org.apache.rocketmq.broker.BrokerStartup"
        assert f"-javaagent:/opt/a.jar=port={node.ports.probe}" in argv and "-Dfoo=1" in argv
        assert any(a.endswith("loopback-bind.jar") for a in argv)
        assert f"-Duser.home={dirs.home(node.name)}" in argv
        props = (dirs.conf / f"{node.name}.conf").read_text()
        assert f"storePathRootDir={dirs.store(node.name)}\n" in props and f"listenPort={node.ports.listen}\n" in props
        assert "enableSlaveActingMaster=true\n" in props and "brokerIP2=127.0.0.1\n" in props
    slave = (dirs.conf / "slave.conf").read_text()
    assert "brokerId=1\n" in slave and "brokerRole=SLAVE\n" in slave and "brokerName=broker-v1\n" in slave
    assert "brokerName=broker-v1-b\n" in (dirs.conf / "broker-b.conf").read_text()
    assert "supportActingMaster=true\n" in files["namesrv"].read_text()
    # The proxy: cluster mode, no broker inside, no broker agents, its own address for remoting clients.
    proxy = cmds["proxy"]
    assert proxy[proxy.index("-pm") + 1] == "cluster" and "-bc" not in proxy
    assert "-javaagent:/opt/a.jar=port=20058" not in " ".join(proxy) and "-Dfoo=1" not in proxy
    assert '"localServeAddr": "127.0.0.1"' in files["proxy"].read_text()
    assert config.host_process("broker", topo) == "broker" and config.host_process("broker", Topology()) == "proxy"


def test_the_default_topology_keeps_the_broker_inside_the_proxy(tmp_path: Path):
    dist = Distribution("5.3.3", tmp_path / "lib", {})
    dirs = config.VariantDirs(tmp_path / "v1")
    ports = VariantPorts.for_slot(0)
    v = _variant()
    files = config.write_configs(v, ports, dirs)
    cmds = config.commands("java", dist, v, ports, dirs, files, "tok")
    assert list(cmds) == ["namesrv", "proxy"]
    assert cmds["proxy"][cmds["proxy"].index("-pm") + 1] == "local" and "-bc" in cmds["proxy"]
    assert "supportActingMaster" not in files["namesrv"].read_text()
    assert f"storePathRootDir={dirs.store('proxy')}\n" in files["broker"].read_text()


def test_every_jvm_writes_its_gc_log_beside_its_server_logs_named_for_what_it_hosts(tmp_path: Path):
    from harness.inputs.brokers import Topology

    dist = Distribution("5.3.3", tmp_path / "lib", {})
    ports = VariantPorts.for_slot(0)
    for topo, hosts in ((Topology(), {"namesrv": "namesrv", "proxy": "broker"}),
                        (Topology(proxy="cluster", masters=2),
                         {"namesrv": "namesrv", "broker": "broker", "broker-b": "broker", "proxy": "proxy"})):
        dirs = config.VariantDirs(tmp_path / topo.proxy)
        files = config.write_configs(_variant(), ports, dirs, topo)
        cmds = config.commands("java", dist, _variant(), ports, dirs, files, "tok", topo)
        assert {p: [a for a in argv if a.startswith("-Xlog:gc:")] for p, argv in cmds.items()} == {
            p: [f"-Xlog:gc:file={dirs.server_logs(p)}/gc-{role}-%p.log"] for p, role in hosts.items()}
        # -Xlog refuses to start a JVM whose log file cannot be opened: the directory is there before any starts.
        assert all(dirs.server_logs(p).is_dir() for p in cmds)
