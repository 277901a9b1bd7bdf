"""What a scenario asks of the brokers under its traffic: the topology every variant runs on, the faults injected
into their processes while the load runs, the failures planted in their methods (the pop-fault agent; its argument
string is harness.deploy.agents'), and the releases the scenario applies to."""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import ConfigDict, Field, StringConstraints, model_validator

from harness.inputs.fields import Strict

# Processes a fault can hit, by what they are in RocketMQ. With the proxy in local mode the broker and the
# proxy are one JVM, so only `broker` names it.
FaultTarget = Literal["namesrv", "broker", "broker-b", "slave", "proxy"]
FAULT_TARGETS: tuple[str, ...] = get_args(FaultTarget)
FaultAction = Literal["kill9", "sigstop", "restart"]
FAULT_ACTIONS: tuple[str, ...] = get_args(FaultAction)


class Topology(Strict):
    """The shape of every variant's deployment. A scenario holds it, not a variant: a comparison judges
    builds, so both sides must run on the same shape."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    proxy: Literal["local", "cluster"] = Field(
        "local", description="local: the broker runs inside the proxy's JVM (upstream's `mqbroker --enable-proxy`); "
        "cluster: a broker JVM per broker and one proxy JVM of its own in front of them")
    masters: int = Field(1, ge=1, le=2, description="master brokers in the cluster (broker, broker-b)")
    slave: bool = Field(False, description="a slave of the first master that acts as master while it is down "
                        "(enableSlaveActingMaster, RIP-32)")

    @model_validator(mode="after")
    def _shape(self) -> Topology:
        if self.proxy == "local" and (self.masters > 1 or self.slave):
            what = "two masters" if self.masters > 1 else "a slave"
            raise ValueError(f"proxy: local runs one broker inside the proxy's JVM; {what} needs proxy: cluster")
        return self

    @property
    def targets(self) -> tuple[str, ...]:
        """The processes a fault can name in this topology."""
        out = ["namesrv", "broker"]
        if self.masters > 1:
            out.append("broker-b")
        if self.slave:
            out.append("slave")
        if self.proxy == "cluster":
            out.append("proxy")
        return tuple(out)


# One broker inside the proxy's JVM: upstream's `mqbroker --enable-proxy`, what every scenario ran before topologies.
SINGLE = Topology()


class Fault(Strict):
    """One fault, injected into every variant at the same moment of the load."""

    at_s: float = Field(ge=0, le=86_400, description="seconds after the variant's producers start sending (its "
                        "first cycle)")
    action: FaultAction = Field(description="kill9: SIGKILL, started again after duration_s; sigstop: SIGSTOP, "
                                "SIGCONT after duration_s; restart: SIGTERM, wait for the exit, start again")
    target: FaultTarget
    duration_s: float | None = Field(None, ge=0, le=3_600, description="sigstop: how long it stays stopped "
                                     "(required); kill9: how long it stays dead before it is started again "
                                     "(default 0: at once, as a supervisor would)")

    @model_validator(mode="after")
    def _duration(self) -> Fault:
        if self.action == "sigstop" and self.duration_s is None:
            raise ValueError("duration_s: sigstop needs how long the process stays stopped")
        if self.action == "restart" and self.duration_s is not None:
            raise ValueError("duration_s: a restart starts the process again as soon as it exited")
        return self

    @property
    def hold_s(self) -> float:
        """How long the fault keeps its target away, as planned (a restart: only as long as it takes)."""
        return self.duration_s or 0.0

    @property
    def label(self) -> str:
        return f"{self.action} {self.target}" + (f" {self.duration_s:g} s" if self.duration_s else "")



class Applies(Strict):
    """The releases a scenario can ask at all: a defect in a feature is not "absent" from a release that lacks
    the feature, it is not applicable there."""

    since: Annotated[str, StringConstraints(pattern=r"^\d+\.\d+\.\d+$")] = Field(
        description="the first release that has what the scenario needs (MAJOR.MINOR.PATCH)")
    why: str = Field(min_length=1, description="what releases before it lack (said when one is left out)")


class Plant(Strict):
    """A failure planted in a broker method by the pop-fault agent (broker-patches): for defects upstream reports
    after a failure (a revive whose read fails, a record that cannot be written), the failure is planted and the
    defect is what the broker does next. Never a fix; every variant of the run gets the same plant."""

    method: Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][\w.$]*#[A-Za-z_]\w*$")] = Field(
        description="the broker method, org.apache.rocketmq.<...>.Class#method (every overload of that name)")
    mode: Literal["throw", "fail", "false", "delay", "delay_after", "return_null", "return_empty"] = Field(
        description="throw: it throws on entry; fail: its CompletableFuture completes exceptionally; false: it "
        "returns false without running; delay: it runs after a sleep of delay_ms on entry; delay_after: it runs, then "
        "sleeps delay_ms before it returns (what it read is stale by then); return_null: it runs and "
        "returns null (a missing value: a header, a property); return_empty: it runs and returns an empty list, set, "
        "map or string (incomplete metadata)")
    delay_ms: int | None = Field(None, ge=1, le=600_000, description="modes delay and delay_after only, and "
                                 "required there: how long each planted call sleeps on entry (or before it returns)")
    thread: Annotated[str, StringConstraints(pattern=r"^[^,;=]{1,100}$")] | None = Field(
        None, description="only calls on a thread whose name contains this qualify (others pass, not counted)")
    calls: int = Field(1, ge=1, le=1_000_000, description="how many calls fail (or are delayed)")
    skip: int = Field(0, ge=0, le=1_000_000, description="qualifying calls let through before the first failure")
    after_s: float = Field(0.0, ge=0, le=86_400, description="calls within this many seconds of the variant's "
                           "first sends pass (not counted), as a fault's at_s; every call before the load starts "
                           "passes (start-up and readiness are not the failure's moment)")
    exception: Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][\w.$]*$")] | None = Field(
        None, description="mode throw or fail only: the planted exception's class (fully qualified, e.g. "
        "org.apache.rocketmq.client.exception.MQBrokerException), made from the planted class's loader with the "
        "constructor (String), or (int, String) with code; default RuntimeException (also when it cannot be made: "
        "the agent says so once)")
    code: int | None = Field(None, ge=-2**31, le=2**31 - 1, description="with exception only: the int its "
                             "(int, String) constructor gets (e.g. a ResponseCode)")

    @model_validator(mode="after")
    def _delay_ms_with_delay(self) -> Plant:
        sleeps = self.mode in ("delay", "delay_after")
        if sleeps and self.delay_ms is None:
            raise ValueError(f"delay_ms: required with mode {self.mode}")
        if not sleeps and self.delay_ms is not None:
            raise ValueError(f"delay_ms: only for mode delay or delay_after (not mode {self.mode})")
        if self.exception is not None and self.mode not in ("throw", "fail"):
            raise ValueError(f"exception: only for mode throw or fail (not mode {self.mode})")
        if self.code is not None and self.exception is None:
            raise ValueError("code: only with exception (it goes to the exception's (int, String) constructor)")
        return self
