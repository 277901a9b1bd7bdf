"""A directory of RocketMQ server jars as the local backend runs it (Distribution): the main class of each server
it must hold, the logback configs it bundles (extracted), and its server module jars with their digests.
"""

from __future__ import annotations

import hashlib
import re
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.contracts.modules import ModuleJar, hybrid_note
from harness.core.errors import ConfigError, HarnessError, NotApplicable
from harness.deploy.local.assembly import MODULES

_MODULE_JAR = re.compile(r"^(rocketmq-[a-z-]+?)-(\d+\.\d+\.\d+(?:[.-][A-Za-z0-9.-]+)?)\.jar$")
MAIN_CLASSES = {
    "namesrv": "org.apache.rocketmq.namesrv.NamesrvStartup",
    "broker": "org.apache.rocketmq.broker.BrokerStartup",
    "proxy": "org.apache.rocketmq.proxy.ProxyStartup",
    "admin": "org.apache.rocketmq.tools.command.MQAdminStartup",
}
# Logback configs the upstream jars bundle; extracted so each process can be pointed at its own
# (with every jar on one classpath the first bundled one would otherwise win).
LOGBACK_RESOURCES = {"namesrv": "rmq.namesrv.logback.xml", "proxy": "rmq.proxy.logback.xml",
                     "broker": "rmq.broker.logback.xml"}


@dataclass(frozen=True)
class Distribution:
    """A usable set of RocketMQ jars: a classpath directory plus the logback configs, and the server module
    jars it holds (a hybrid holds some of another release: harness.contracts.modules)."""

    version: str
    lib: Path
    logback: dict[str, Path]
    modules: tuple[ModuleJar, ...] = ()
    # A hybrid's references that do not link, each in code that runs only with a broker setting on: (the
    # reference, the setting). A variant that turns one of those settings on is refused (refuse_guarded).
    unlinked: tuple[tuple[str, str], ...] = ()

    def classpath(self) -> str:
        return str(self.lib / "*")

    @property
    def hybrid(self) -> str | None:
        """``hybrid: proxy, tools from 5.3.3``, or None when every module is of this version."""
        return hybrid_note(self.version, self.modules)

    def refuse_guarded(self, variant: str, broker: Mapping[str, object]) -> None:
        """One line when the variant's broker settings turn on code of this hybrid that does not link."""
        for reference, setting in self.unlinked:
            if str(broker.get(setting, "false")).lower() == "true":
                raise NotApplicable(variant, f"variant {variant}: {setting}=true runs code of this {self.hybrid} that "
                                    f"does not link ({reference}); remove the setting or use a build whose modules "
                                    f"are all {self.version}")


def module_jars(lib: Path) -> tuple[ModuleJar, ...]:
    """The server module jars of a lib directory, by artifact, with their sha256."""
    out = []
    for jar in sorted(lib.glob("rocketmq-*.jar")):
        m = _MODULE_JAR.match(jar.name)
        if m and m[1] in MODULES:
            out.append(ModuleJar(m[1], m[2], hashlib.sha256(jar.read_bytes()).hexdigest()))
    return tuple(out)


def _class_index(lib: Path) -> dict[str, Path]:
    """Map each wanted main class and logback resource to the jar holding it."""
    wanted = {c.replace(".", "/") + ".class" for c in MAIN_CLASSES.values()} | set(LOGBACK_RESOURCES.values())
    found: dict[str, Path] = {}
    for jar in sorted(lib.glob("*.jar")):
        if not jar.name.startswith("rocketmq-"):
            continue
        try:
            with zipfile.ZipFile(jar) as z:
                for name in wanted & set(z.namelist()):
                    found.setdefault(name, jar)
        except zipfile.BadZipFile:
            raise HarnessError(f"{jar}: corrupt jar; delete {lib.parent} and fetch again") from None
    return found


def inspect_lib(lib: Path, version: str, logback_dir: Path) -> Distribution:
    """Check a jar directory holds every server main class; extract the logback configs."""
    if not lib.is_dir():
        raise ConfigError(f"{lib}: not a directory of jars")
    found = _class_index(lib)
    missing = [c for c in MAIN_CLASSES.values() if c.replace(".", "/") + ".class" not in found]
    if missing:
        raise ConfigError(f"{lib}: no jar holds {missing[0]}; is this a RocketMQ 5.x lib directory?")
    logback_dir.mkdir(parents=True, exist_ok=True)
    logback: dict[str, Path] = {}
    for role, resource in LOGBACK_RESOURCES.items():
        target = logback_dir / resource
        if resource in found and not target.exists():
            with zipfile.ZipFile(found[resource]) as z:
                target.write_bytes(z.read(resource))
        if target.exists():
            logback[role] = target
    return Distribution(version=version, lib=lib, logback=logback, modules=module_jars(lib))
