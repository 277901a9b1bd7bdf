"""The report's first screen says which builds ran on brokers a campaign kept from an earlier run (never silent:
a run on kept brokers is not a run on fresh ones), and says nothing of it when every run started its own."""

from __future__ import annotations

import jinja2
import pytest
from markupsafe import Markup

from harness.report.html import TEMPLATE_DIR

pytestmark = pytest.mark.unit


def _first_screen(builds: list[dict]) -> str:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATE_DIR), autoescape=True,
                             undefined=jinja2.StrictUndefined)
    page = env.from_string('{% from "_tables.html.j2" import what_ran %}{{ what_ran(runs, fmt) }}')
    run = {"run_id": "20261207-101007-burst-1a2b", "scenario": {"name": "burst", "description": None,
           "protocol": "remoting", "retry_topic": None, "topology": None, "cycles": 8},
           "harness": {"version": "1", "git_sha": None}, "host": None, "started_at": None, "duration_s": None,
           "builds": builds}
    return page.render(runs=[run], fmt=lambda v, unit="ms": Markup(str(v)))


def _build(variant: str, kept: dict | None) -> dict:
    return {"variant": variant, "version": "5.3.3", "jars": None, "external": False, "agents": [],
            "clock_offset_ms": None, "kept": kept}


def test_a_build_on_kept_brokers_names_the_run_that_started_them():
    html = _first_screen([_build("unpatched", None), _build("patched", {
        "started_by": "20261207-100001-burst-9f8e", "scenario": "burst", "runs_on_them": 2})])
    assert ("<code>patched</code> ran on brokers kept from run <code>20261207-100001-burst-9f8e</code> (burst), "
            "after 2 runs on them") in html
    assert "<code>unpatched</code> ran on" not in html


def test_no_word_of_kept_brokers_when_every_build_started_its_own_or_the_summary_predates_them():
    assert "kept from run" not in _first_screen([_build("unpatched", None), _build("patched", None)])
    old = _build("patched", None)
    del old["kept"]  # a summary before schema 17
    assert "kept from run" not in _first_screen([old])
