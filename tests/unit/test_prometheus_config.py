import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from harness.run.observability.prometheus import ScrapeTarget, render_config

TARGETS = [
    ScrapeTarget("workers", "127.0.0.1:40001", "unpatched"),
    ScrapeTarget("workers", "127.0.0.1:40002", "unpatched"),
    ScrapeTarget("broker", "127.0.0.1:20057", "unpatched"),
    ScrapeTarget("probe", "127.0.0.1:20158", "patched"),
    ScrapeTarget("broker", "10.1.2.3:5557", "staging", suffix="-rh0123abcd"),
]


def test_config_lists_every_target_with_its_variant():
    config = yaml.safe_load(render_config(TARGETS, interval_s=1.0))
    assert config["global"]["scrape_interval"] == "1000ms"
    jobs = {j["job_name"]: j for j in config["scrape_configs"]}
    assert set(jobs) == {"workers", "broker", "probe", "broker-staging"}
    assert "metric_relabel_configs" not in jobs["broker"]
    workers = [(g["targets"][0], g["labels"]["variant"]) for g in jobs["workers"]["static_configs"]]
    assert workers == [("127.0.0.1:40001", "unpatched"), ("127.0.0.1:40002", "unpatched")]
    assert jobs["probe"]["static_configs"][0]["labels"] == {"variant": "patched"}


def test_promtool_check_config(tmp_path: Path):
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool not found: run `make setup`")
    path = tmp_path / "prometheus.yml"
    path.write_text(render_config(TARGETS))
    out = subprocess.run([promtool, "check", "config", str(path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout + out.stderr


def _relabel(rules: list[dict], labels: dict[str, str]) -> dict[str, str] | None:
    """Prometheus' keep and replace actions (anchored regexes), enough to read the rules back."""
    import re

    out = dict(labels)
    for r in rules:
        value = r.get("separator", ";").join(out.get(x, "") for x in r["source_labels"])
        m = re.fullmatch(r["regex"], value)
        if r.get("action") == "keep":
            if not m:
                return None
        elif m:
            out[r["target_label"]] = m.expand(r["replacement"].replace("${", "\\g<").replace("}", ">"))
    return out


def test_an_external_exporter_keeps_only_the_runs_series_under_the_scenarios_names():
    config = yaml.safe_load(render_config(TARGETS))
    [job] = [j for j in config["scrape_configs"] if j["job_name"] == "broker-staging"]
    rules = job["metric_relabel_configs"]
    s = "-rh0123abcd"
    assert _relabel(rules, {"__name__": "rocketmq_pop_revive_put_total"}) == {
        "__name__": "rocketmq_pop_revive_put_total"}  # the broker's own series, of no topic
    assert _relabel(rules, {"topic": "orders", "consumer_group": "billing"}) is None  # another tenant's
    assert _relabel(rules, {"topic": "orders", "consumer_group": f"G{s}"}) is None
    assert _relabel(rules, {"topic": f"T{s}", "consumer_group": f"G{s}"}) == {"topic": "T", "consumer_group": "G"}
    assert _relabel(rules, {"topic": f"%RETRY%G{s}+T{s}"}) == {"topic": "%RETRY%G+T"}
    assert _relabel(rules, {"consumer_group": f"G{s}"}) == {"consumer_group": "G"}
