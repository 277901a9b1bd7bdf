"""What a scenario needs of the builds it runs against: the broker settings it decides (its own `broker:` ones,
retry-topic naming, the observer effect), those a build must know, the settings of a variant that clash with
them, and the releases it cannot be asked of (before ``applies.since``)."""

from __future__ import annotations

import re

from harness.inputs.scenario import DECIDED_BROKER_KEYS, Scenario

_RELEASE_PREFIX = re.compile(r"^(\d+)\.(\d+)\.(\d+)")


def broker_overrides(sc: Scenario) -> dict[str, bool | int | float | str]:
    """Broker settings the scenario decides: its own `broker:` ones, the retry topic naming it is about, and
    whether scrapes may force-wake pops. A variant that sets one of them differently is refused (see
    conflicts)."""
    retry_topic_v2, notify_before_lag = DECIDED_BROKER_KEYS
    return {**sc.broker, retry_topic_v2: sc.retry_topic == "v2", notify_before_lag: sc.observer_effect}


def required_settings(sc: Scenario) -> set[str]:
    """The broker settings a build must know to run the scenario at all: its own `broker:` ones, and the
    decided ones it turns on."""
    return set(sc.broker) | {k for k, v in broker_overrides(sc).items() if v is True}


def conflicts(sc: Scenario, broker: dict[str, object], proxy: dict[str, object] | None = None) -> list[str]:
    """The scenario's broker (and proxy) settings that a variant's overrides set otherwise."""
    def norm(v: object) -> str:
        return str(v).lower()

    def clashes(theirs: dict[str, object], ours: dict[str, object], where: str) -> list[str]:
        return [f"{where}{k}={norm(theirs[k])} (the scenario needs {norm(v)})"
                for k, v in ours.items() if k in theirs and norm(theirs[k]) != norm(v)]

    return clashes(broker, broker_overrides(sc), "") + clashes(proxy or {}, sc.proxy, "proxy ")


def not_applicable(sc: Scenario, version: str | None) -> str | None:
    """Why a build of ``version`` cannot be asked this scenario (it predates ``applies.since``), or None.
    A version that is not MAJOR.MINOR.PATCH-like (an external cluster not yet asked) is not judged here."""
    m = _RELEASE_PREFIX.match(version or "")
    if sc.applies is None or m is None:
        return None
    since = tuple(int(x) for x in sc.applies.since.split("."))
    if tuple(int(x) for x in m.groups()) >= since:
        return None
    return (f"scenario {sc.name} needs RocketMQ {sc.applies.since} or later ({sc.applies.why}); this is "
            f"{version}")
