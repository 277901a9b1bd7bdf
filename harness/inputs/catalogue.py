"""The scenarios a user can name: the files in workloads/scenarios/ (or any path), the points of a series (one
scenario per number of groups, ``NAME@N``), and the forms of one scenario (over the other protocol, with the
faults of the command line)."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from harness.core.errors import ConfigError
from harness.core.paths import REPO_ROOT
from harness.core.yamlfile import read_yaml
from harness.inputs.brokers import Fault
from harness.inputs.scenario import Scenario, invalid_message, parse_scenario
from harness.inputs.traffic import Series

SCENARIO_DIR = REPO_ROOT / "workloads" / "scenarios"


def resolve_path(name_or_path: str) -> Path:
    """A scenario file path, or the name of one in workloads/scenarios/."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.exists():
        return p
    return SCENARIO_DIR / f"{name_or_path}.yaml"


def builtin_names() -> list[str]:
    """The built-in scenarios' names (files in workloads/scenarios/), sorted."""
    return sorted(p.stem for p in SCENARIO_DIR.glob("*.yaml"))


def _read(path: Path) -> object:
    known = ", ".join(builtin_names())
    return read_yaml(path, "scenario file", f"no such scenario file (built-in scenarios: {known})")


def _points(data: dict, source: str) -> dict[int, dict]:
    """A series file -> each number of groups -> the plain scenario (as data) of that point."""
    try:
        series = Series.model_validate(data["series"])
    except ValidationError as e:
        raise ConfigError(invalid_message(e, f"{source}: series")) from None
    groups = data.get("groups")
    if not isinstance(groups, list) or not groups or not all(isinstance(g, dict) and "name" in g for g in groups):
        raise ConfigError(f"{source}: groups: a series needs its groups listed, each with a name")
    last = groups[-1]
    out = {}
    for n in series.groups:
        made = groups[:n] + [{**last, "name": f"{last['name']}{i}"} for i in range(2, n - len(groups) + 2)]
        out[n] = {**data, "name": f"{data.get('name')}-{n}", "groups": made,
                  "series": {"groups": [n], "of": data.get("name")}}
    return out


def load_scenarios(name_or_path: str) -> list[Scenario]:
    """The scenario, or every point of a series (one scenario per number of groups)."""
    path = resolve_path(name_or_path)
    data = _read(path)
    if isinstance(data, dict) and data.get("series") is not None:
        return [parse_scenario(d, f"{path} (series point {n})") for n, d in _points(data, str(path)).items()]
    return [parse_scenario(data, str(path))]


def load_scenario(name_or_path: str) -> Scenario:
    """One scenario; ``NAME@N`` is the point of the series NAME with N groups."""
    named_point = "@" in name_or_path and not Path(name_or_path).is_file()  # a file's path may hold an '@'
    base, at, point = name_or_path.rpartition("@") if named_point else (name_or_path, "", "")
    path = resolve_path(base)
    data = _read(path)
    if not at:
        return parse_scenario(data, str(path))
    if not isinstance(data, dict) or data.get("series") is None:
        raise ConfigError(f"{name_or_path}: {path} is not a series; name it without '@{point}'")
    points = _points(data, str(path))
    if not point.isdigit() or int(point) not in points:
        raise ConfigError(f"{name_or_path}: {path} has no point {point!r} (its numbers of groups: "
                          f"{', '.join(map(str, points))})")
    return parse_scenario(points[int(point)], f"{path} (series point {point})")


def on_protocol(scenario: Scenario, protocol: str) -> Scenario:
    """The scenario over ``protocol``: itself when it is its own, else its form over the other one, named
    NAME-PROTOCOL and otherwise the same. A ConfigError says why a form does not apply (FIFO over remoting,
    a remoting case under the gRPC proxy's limits)."""
    if protocol == scenario.protocol:
        return scenario
    data = scenario.model_dump()
    data.update(name=f"{scenario.name}-{protocol}", protocol=protocol,
                description=f"{scenario.description} (the {protocol} form of {scenario.name})".strip())
    if scenario.series is not None:
        data["series"] = {**data["series"], "of": f"{scenario.series.of}-{protocol}"}
    return parse_scenario(data, f"{scenario.source} (over {protocol})")


def with_faults(scenario: Scenario, faults: list[Fault]) -> Scenario:
    """The scenario with ``faults`` instead of its own, named after them (NAME-ACTION-TARGET...), so archives of
    different fault schedules are never pooled as one scenario."""
    data = scenario.model_dump()
    suffix = "-".join(f"{f.action}-{f.target}" for f in faults) or "nofaults"
    data.update(name=f"{scenario.name}-{suffix}"[:100], faults=[f.model_dump() for f in faults])
    return parse_scenario(data, f"{scenario.source} (with --fault)")
