"""The files and command lines of one local variant: name server, and proxy with the broker inside.

Pure functions of (variant, ports, directories), so they can be checked without starting anything.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.backends.local.jars import MAIN_CLASSES, Distribution
from harness.backends.local.ports import VariantPorts
from harness.paths import REPO_ROOT
from harness.process import owner_flag
from harness.variants import LOOPBACK_JAR, Scalar, Variant

LOOPBACK = "127.0.0.1"
CLUSTER = "rmq-harness"

# What every local broker gets unless the variant overrides it. Sizes are shrunk from the 1 GiB
# commit log and 5M-entry index defaults so three variants fit on a 2-core, 24 GiB machine.
BROKER_DEFAULTS: dict[str, Scalar] = {
    # V1 retry topic names are upstream's default and what the wakeup bug is about; written out so
    # every archived config says which one ran.
    "enableRetryTopicV2": False,
    # Pop is refused without the timer wheel.
    "timerWheelEnable": True,
    # The lag gauges would otherwise force-wake every suspended pop request on each metrics scrape
    # (ConsumerLagCalculator), capping the retry stall at the scrape interval and hiding the bug.
    # A variant sets it true to measure how much scraping masks.
    "enableNotifyBeforePopCalculateLag": False,
    "metricsExporterType": "PROM",
    # Topics are created by the harness; a mistyped topic should fail, not appear.
    "autoCreateTopicEnable": False,
    "autoCreateSubscriptionGroup": True,
    "mappedFileSizeCommitLog": 128 * 1024 * 1024,
    "mappedFileSizeConsumeQueue": 30_000 * 20,
    "maxHashSlotNum": 100_000,
    "maxIndexNum": 400_000,
    "flushDiskType": "ASYNC_FLUSH",
}

NAMESRV_JVM = ["-Xms128m", "-Xmx256m", "-XX:MaxDirectMemorySize=128m"]
BROKER_JVM = ["-Xms512m", "-Xmx1g", "-XX:MaxDirectMemorySize=512m"]
COMMON_JVM = [
    "-XX:+UseG1GC",
    "-XX:-OmitStackTraceInFastThrow",
    # No hsperfdata files in /tmp, no 4-8 GB pre-touched heaps as the upstream scripts do.
    "-XX:+PerfDisableSharedMem",
    "-Djava.net.preferIPv4Stack=true",
]


@dataclass(frozen=True)
class VariantDirs:
    """Where one variant's processes keep their files (under a run or state directory)."""

    root: Path

    @property
    def conf(self) -> Path:
        return self.root / "conf"

    @property
    def rocketmq_home(self) -> Path:
        # The servers refuse to start unless rocketmq.home.dir exists; nothing is read from it.
        return self.root / "rocketmq-home"

    @property
    def namesrv_home(self) -> Path:
        return self.root / "namesrv"

    @property
    def proxy_home(self) -> Path:
        return self.root / "proxy"

    @property
    def store(self) -> Path:
        return self.proxy_home / "store"

    def stdout(self, role: str) -> Path:
        return self.root / f"{role}.out"

    def server_logs(self, role: str) -> Path:
        home = self.namesrv_home if role == "namesrv" else self.proxy_home
        return home / "logs" / "rocketmqlogs"

    def create(self) -> None:
        for d in (self.conf, self.rocketmq_home, self.namesrv_home, self.proxy_home):
            d.mkdir(parents=True, exist_ok=True)


def broker_name(variant: Variant) -> str:
    return f"broker-{variant.name}"


def namesrv_properties(ports: VariantPorts) -> dict[str, Scalar]:
    return {"listenPort": ports.namesrv, "bindAddress": LOOPBACK}


def broker_properties(variant: Variant, ports: VariantPorts, dirs: VariantDirs) -> dict[str, Scalar]:
    owned: dict[str, Scalar] = {
        "brokerClusterName": CLUSTER,
        "brokerName": broker_name(variant),
        "brokerId": 0,
        "listenPort": ports.broker,
        "bindAddress": LOOPBACK,
        "brokerIP1": LOOPBACK,
        "namesrvAddr": f"{LOOPBACK}:{ports.namesrv}",
        "storePathRootDir": str(dirs.store),
        "storePathCommitLog": str(dirs.store / "commitlog"),
        "metricsPromExporterHost": LOOPBACK,
        "metricsPromExporterPort": ports.metrics,
    }
    return {**BROKER_DEFAULTS, **variant.broker, **owned}


def proxy_settings(variant: Variant, ports: VariantPorts) -> dict[str, Scalar]:
    owned: dict[str, Scalar] = {
        "rocketMQClusterName": CLUSTER,
        "proxyMode": "local",
        "grpcServerPort": ports.grpc,
        "remotingListenPort": ports.proxy_remoting,
        "namesrvAddr": f"{LOOPBACK}:{ports.namesrv}",
    }
    return {**variant.proxy, **owned}


def render_properties(props: Mapping[str, Scalar]) -> str:
    def fmt(v: Scalar) -> str:
        return str(v).lower() if isinstance(v, bool) else str(v)

    return "".join(f"{k}={fmt(v)}\n" for k, v in props.items())


def write_configs(variant: Variant, ports: VariantPorts, dirs: VariantDirs) -> dict[str, Path]:
    dirs.create()
    files = {
        "namesrv": dirs.conf / "namesrv.conf",
        "broker": dirs.conf / "broker.conf",
        "proxy": dirs.conf / "rmq-proxy.json",
    }
    files["namesrv"].write_text(render_properties(namesrv_properties(ports)))
    files["broker"].write_text(render_properties(broker_properties(variant, ports, dirs)))
    files["proxy"].write_text(json.dumps(proxy_settings(variant, ports), indent=2) + "\n")
    return files


def _jvm(role: str, java: str, dist: Distribution, home: Path, dirs: VariantDirs, token: str) -> list[str]:
    argv = [java, *COMMON_JVM, *(NAMESRV_JVM if role == "namesrv" else BROKER_JVM)]
    argv += [
        f"-Drocketmq.home.dir={dirs.rocketmq_home}",
        f"-Duser.home={home}",
        f"-XX:ErrorFile={home}/hs_err_%p.log",
        owner_flag(token),
    ]
    if role in dist.logback:
        argv.append(f"-Drmq.logback.configurationFile={dist.logback[role]}")
    return argv


def agent_options(options: str, ports: VariantPorts) -> str:
    """Agent argument strings may name the variant's ports: {probe_port}, {metrics_port}."""
    return options.replace("{probe_port}", str(ports.probe)).replace("{metrics_port}", str(ports.metrics))


def namesrv_command(java: str, dist: Distribution, dirs: VariantDirs, conf: Path, token: str) -> list[str]:
    return [
        *_jvm("namesrv", java, dist, dirs.namesrv_home, dirs, token),
        "-cp", dist.classpath(), MAIN_CLASSES["namesrv"], "-c", str(conf),
    ]


def proxy_command(
    java: str,
    dist: Distribution,
    variant: Variant,
    ports: VariantPorts,
    dirs: VariantDirs,
    files: Mapping[str, Path],
    token: str,
) -> list[str]:
    agents = [
        f"-javaagent:{a.path()}" + (f"={agent_options(a.options, ports)}" if a.options else "")
        for a in variant.agents
    ]
    return [
        *_jvm("proxy", java, dist, dirs.proxy_home, dirs, token),
        f"-javaagent:{REPO_ROOT / LOOPBACK_JAR}",
        *agents,
        *variant.jvm_options,
        "-cp", dist.classpath(), MAIN_CLASSES["proxy"],
        "-pm", "local",
        "-bc", str(files["broker"]),
        "-pc", str(files["proxy"]),
        "-n", f"{LOOPBACK}:{ports.namesrv}",
    ]
