"""Variants: the broker builds a comparison runs against, read from variants.yaml.

A variant is a RocketMQ version (from Maven Central, or a local directory of jars), Java agents to
mount with ``-javaagent:``, and broker / proxy config overrides on top of the harness defaults; or an
external cluster (``endpoints:``), which the harness measures as deployed and never starts or stops.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StringConstraints,
    ValidationError,
    model_validator,
)

from harness.core.errors import ConfigError, one_line
from harness.core.paths import DEFAULT_VARIANTS_FILE, REPO_ROOT
from harness.core.yamlfile import read_yaml

Scalar = str | int | float | bool
# DNS-label friendly: the same name becomes a Kubernetes object name later.
VariantName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9]([a-z0-9.-]{0,38}[a-z0-9])?$")]

# Broker keys the launcher owns: ports, addresses and paths differ per variant and per run.
HARNESS_BROKER_KEYS = frozenset(
    {
        "brokerClusterName", "brokerName", "brokerId", "listenPort", "haListenPort", "namesrvAddr",
        "brokerIP1", "brokerIP2", "storePathRootDir", "storePathCommitLog",
        "metricsPromExporterHost", "metricsPromExporterPort", "bindAddress",
    }
)
HARNESS_PROXY_KEYS = frozenset(
    {"rocketMQClusterName", "proxyMode", "grpcServerPort", "remotingListenPort", "namesrvAddr", "localServeAddr"}
)


def reject_owned(overrides: dict[str, Scalar], owned: frozenset[str]) -> dict[str, Scalar]:
    clash = sorted(set(overrides) & owned)
    if clash:
        raise ValueError(f"{', '.join(clash)} set by the harness per variant; remove it")
    return overrides


# Override maps that may not touch what the harness sets per variant (ports, names, addresses, paths).
BrokerOverrides = Annotated[dict[str, Scalar], AfterValidator(lambda v: reject_owned(v, HARNESS_BROKER_KEYS))]
ProxyOverrides = Annotated[dict[str, Scalar], AfterValidator(lambda v: reject_owned(v, HARNESS_PROXY_KEYS))]


class JavaAgent(BaseModel):
    """A Java agent jar added to the broker JVM as ``-javaagent:<jar>[=<options>]``."""

    model_config = ConfigDict(extra="forbid")

    jar: str = Field(description="path to the agent jar: absolute, or relative to the variants file's folder when "
                     "it is there, else to the repository root")
    options: str = Field("", description="the agent's argument string")

    def path(self) -> Path:
        p = Path(self.jar)
        return p if p.is_absolute() else REPO_ROOT / p


_HOST_PORT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?):(\d{1,5})$")


def host_port(value: str) -> str:
    """host:port (a name, an IPv4 address or a bracketed IPv6 one), the port 1..65535."""
    m = _HOST_PORT.match(value)
    if not m or not 0 < int(m[3]) < 65536:
        raise ValueError(f"{one_line(value)!r} is no host:port (e.g. broker-1.example:9876)")
    return value


HostPort = Annotated[str, AfterValidator(host_port)]


class ExternalEndpoints(BaseModel):
    """Where a cluster the harness does not start answers."""

    model_config = ConfigDict(extra="forbid")

    namesrv: HostPort = Field(description="its name server, host:port")
    proxy: HostPort | None = Field(None, description="its gRPC proxy, host:port (without one: remoting only)")
    cluster: str | None = Field(None, description="the broker cluster to use, when the name server knows several")


class Variant(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: VariantName
    version: Annotated[str, StringConstraints(pattern=r"^\d+\.\d+\.\d+([.-][A-Za-z0-9.-]+)?$")] | None = Field(
        None, description="RocketMQ version on Maven Central (e.g. 5.3.3); an external variant's comes from its "
        "brokers"
    )
    endpoints: ExternalEndpoints | None = Field(
        None, description="an external cluster, measured as deployed: the harness starts, stops and sets nothing on it"
    )
    description: str = ""
    jars: Path | None = Field(
        None, description="a local broker build: a directory of jars used instead of Maven Central"
    )
    agents: list[JavaAgent] = Field(default_factory=list)
    broker: BrokerOverrides = Field(default_factory=dict, description="broker.conf overrides")
    proxy: ProxyOverrides = Field(default_factory=dict, description="rmq-proxy.json overrides")
    jvm_options: list[str] = Field(default_factory=list, description="extra options for the broker JVM")
    _source: str = PrivateAttr("variants")

    @model_validator(mode="after")
    def _built_or_external(self) -> Variant:
        if self.endpoints is None:
            if self.version is None:
                raise ValueError("version: required (a RocketMQ release, e.g. 5.3.3), or endpoints: for a cluster "
                                 "the harness does not start")
            return self
        built = [k for k in ("version", "jars", "agents", "broker", "proxy", "jvm_options") if getattr(self, k)]
        if built:
            raise ValueError(f"endpoints: an external variant runs as deployed; the harness picks versions, mounts "
                             f"agents and sets broker settings only on brokers it starts (remove {', '.join(built)})")
        if release_of(self.name):
            raise ValueError(f"endpoints: the name {self.name} is kept for the releases the harness deploys (history "
                             "pools them by it); rename the variant")
        return self

    @property
    def is_external(self) -> bool:
        """A cluster the harness does not start (``endpoints:``)."""
        return self.endpoints is not None

    @property
    def source(self) -> str:
        """The file this variant was defined in (for messages that name it)."""
        return self._source


# A release run as shipped (rmq-harness sweep, bisect) is the variant rocketmq-<version>.
RELEASE_PREFIX = "rocketmq-"
_RELEASE_NAME = re.compile(rf"^{RELEASE_PREFIX}(\d+\.\d+\.\d+)$")


def release_name(version: str) -> str:
    return f"{RELEASE_PREFIX}{version}"


def release_of(name: str) -> str | None:
    """The release a variant name stands for (None: not a release's variant)."""
    m = _RELEASE_NAME.match(name)
    return m[1] if m else None


class VariantsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    variants: dict[str, dict[str, Any]]


def _describe(err: ValidationError, source: str, prefix: str = "") -> str:
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"])
    where = one_line(".".join(x for x in (prefix, loc) if x))  # keys are the user's: they may hold line breaks
    more = len(err.errors()) - 1
    tail = f" (and {more} more error{'s' if more > 1 else ''})" if more else ""
    msg = first["msg"].removeprefix("Value error, ")
    return f"{source}: {where + ': ' if where else ''}{msg}{tail}"


def _anchored(body: Mapping[str, Any], folder: Path) -> dict[str, Any]:
    """A variant's settings with its relative paths (``jars:``, ``agents[].jar``) taken from ``folder``, the folder of
    the file that names them, when they are there; a path not found there keeps its meaning from before files could
    be layered (an agent's from the repository root, as a chart's variants file names the image's agents; jars from
    the current directory)."""
    def here(value: object) -> str | None:
        if not isinstance(value, str) or "\0" in value or Path(value).expanduser().is_absolute():
            return None
        candidate = folder / value
        return str(candidate) if candidate.exists() else None

    out = dict(body)
    if jars := here(out.get("jars")):
        out["jars"] = jars
    if isinstance(out.get("agents"), list):
        out["agents"] = [{**a, "jar": jar} if isinstance(a, Mapping) and (jar := here(a.get("jar"))) else a
                         for a in out["agents"]]
    return out


def parse_variants(data: Any, source: str = "variants.yaml", folder: Path | None = None) -> dict[str, Variant]:
    """Validate parsed YAML; raise ConfigError naming the first bad field. ``folder``: relative paths are taken from
    it when there (``_anchored``; a user's file: its own folder; the built-in file's name the repository's files)."""
    try:
        doc = VariantsFile.model_validate(data)
    except ValidationError as e:
        raise ConfigError(_describe(e, source)) from None
    out: dict[str, Variant] = {}
    for name, body in doc.variants.items():
        if not isinstance(body, Mapping):
            raise ConfigError(f"{source}: variants.{one_line(name)}: expected a mapping of settings")
        try:
            out[name] = Variant.model_validate({**(_anchored(body, folder) if folder else body), "name": name})
        except ValidationError as e:
            raise ConfigError(_describe(e, source, f"variants.{name}")) from None
        out[name]._source = source
    return out


def _read(path: Path, own_folder: bool) -> dict[str, Variant]:
    """A variants file's variants; ``own_folder``: its relative paths are taken from its folder when there."""
    data = read_yaml(path, "variants file; pass --variants FILE", "no such variants file; pass --variants FILE")
    return parse_variants(data, one_line(path), path.expanduser().resolve().parent if own_folder else None)


@functools.lru_cache(maxsize=4)
def _builtin_as_of(path: Path, stamp: tuple[int, int]) -> dict[str, Variant]:
    return _read(path, own_folder=False)


def _builtin() -> dict[str, Variant]:
    """The built-in variants, parsed once per version of the file (every user file's load reads them, about 20 ms
    a parse), each call its own copies (a caller may change a variant it was given)."""
    st = DEFAULT_VARIANTS_FILE.stat()
    return {k: v.model_copy(deep=True) for k, v in _builtin_as_of(DEFAULT_VARIANTS_FILE,
                                                                 (st.st_mtime_ns, st.st_size)).items()}


def _is_builtin(path: Path) -> bool:
    try:
        return path.expanduser().resolve() == DEFAULT_VARIANTS_FILE.resolve()
    except (OSError, ValueError):  # a path no file can have: reading it says what is wrong
        return False


def load_variants(path: Path | None = None, say: Callable[[str], None] | None = None) -> dict[str, Variant]:
    """The built-in variants (workloads/variants.yaml), and those of ``path``, a user's file, added to them: a name
    in both is the file's, said once through ``say``. A user's file's relative paths are taken from its own folder
    when they are there (``_anchored``)."""
    builtin = _builtin()
    if path is None or _is_builtin(path):
        return builtin
    theirs = _read(path, own_folder=True)
    replaced = sorted(set(builtin) & set(theirs))
    if replaced and say:
        say(f"variants file {path}: {', '.join(replaced)} replace{'s' if len(replaced) == 1 else ''} the built-in "
            f"variant{'s' if len(replaced) > 1 else ''} of the same name")
    return {**builtin, **theirs}


def select(variants: Mapping[str, Variant], names: list[str]) -> list[Variant]:
    """The named variants, in the order given; an unknown name lists the known ones."""
    unknown = [n for n in names if n not in variants]
    if unknown:
        raise ConfigError(
            f"unknown variant {unknown[0]!r}; known variants: {', '.join(sorted(variants))}"
        )
    return [variants[n] for n in dict.fromkeys(names)]
