"""The project's Java agents (broker-patches/, built by `make setup`) as a run mounts them: their jars, the
wakeup probe and the pop-fault agent added to a variant, and the argument string that tells pop-fault what to
plant (a scenario's `plant:`, harness.inputs.brokers.Plant)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from harness.inputs.brokers import Plant
from harness.inputs.variants import JavaAgent, Variant

# The project's agents, by their path in the repository.
WAKEUP_FIX_JAR = "broker-patches/target/pop-retry-wakeup.jar"
# The fix for issue 16: a pop reads the retry topic (V1 or V2) that has messages, not a coin's pick.
RETRY_READ_JAR = "broker-patches/target/pop-retry-read.jar"
PROBE_JAR = "broker-patches/target/pop-wakeup-probe.jar"
# A positive control, never a fix: delays every wakeup of a suspended pop by `delay_ms=N` (calibration).
DELAY_JAR = "broker-patches/target/pop-wakeup-delay.jar"
# Mounted on every local broker: binds the proxy's gRPC and remoting ports and the HA port to loopback,
# which RocketMQ has no setting for. It moves listeners only.
LOOPBACK_JAR = "broker-patches/target/loopback-bind.jar"
# The probe serves its counters on the variant's probe port (the local backend fills it in).
PROBE_OPTIONS = "port={probe_port}"
# The fault-planting agent a scenario's `plant:` mounts on every variant.
PLANT_JAR = "broker-patches/target/pop-fault.jar"
# Where a plant's arm file is, filled in per variant by the local backend: the agent counts no call until the file
# exists, which the run makes when the variant's load starts (harness.run.plants), so start-up and readiness traffic
# pass untouched and after_s counts from the first sends, as a fault's at_s.
ARM_FILE = "{arm_file}"


def mounts_probe(variant: Variant) -> bool:
    return any(Path(a.jar).name == Path(PROBE_JAR).name for a in variant.agents)


def with_probe(variant: Variant) -> Variant:
    """The variant with the wakeup probe mounted last (its advice then wraps any patch's)."""
    if mounts_probe(variant):
        return variant
    return variant.model_copy(update={"agents": [*variant.agents, JavaAgent(jar=PROBE_JAR, options=PROBE_OPTIONS)]})


def plant_options(plant: Plant) -> str:
    """One plant as the pop-fault agent reads it: key=value pairs joined by ','."""
    opts = (f"method={plant.method},mode={plant.mode},calls={plant.calls},skip={plant.skip},"
            f"after_ms={round(plant.after_s * 1000)}")
    if plant.delay_ms is not None:
        opts += f",delay_ms={plant.delay_ms}"
    if plant.thread is not None:
        opts += f",thread={plant.thread}"
    if plant.exception is not None:
        opts += f",exception={plant.exception}"
    if plant.code is not None:
        opts += f",code={plant.code}"
    return opts + f",arm_file={ARM_FILE}"


def pop_fault_options(plants: Sequence[Plant]) -> str:
    """The pop-fault agent's argument string: every plant's options, joined by ';'."""
    return ";".join(plant_options(p) for p in plants)


def with_plants(variant: Variant, options: str) -> Variant:
    """The variant with the pop-fault agent planting ``options`` (';'-joined plants), mounted first: it fails a
    method before any patch or probe advice around it runs."""
    return variant.model_copy(update={"agents": [JavaAgent(jar=PLANT_JAR, options=options), *variant.agents]})
