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
]


def test_config_lists_every_target_with_its_variant():
    config = yaml.safe_load(render_config(TARGETS, interval_s=1.0))
    assert config["global"]["scrape_interval"] == "1000ms"
    jobs = {j["job_name"]: j for j in config["scrape_configs"]}
    assert set(jobs) == {"workers", "broker", "probe"}
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
