"""A committed archive of a real run gives, today, the summary it gave when it was committed: moving code
around (or any refactoring) must not move a figure."""

import json

import pytest

from harness.core.paths import REPO_ROOT
from spark import facts
from spark.jobs.compare import parser, run

GOLDEN = REPO_ROOT / "tests" / "resources" / "archives" / "burst"
# What says when and where the comparison ran, not what it found.
CIRCUMSTANCES = ("generated_at",)


def _figures(summary: dict) -> dict:
    out = {k: v for k, v in summary.items() if k not in CIRCUMSTANCES}
    out["runs"] = [{k: v for k, v in r.items() if k != "path"} for r in summary["runs"]]
    return out


@pytest.mark.parametrize("sample", ["drawn by the tasks", "drawn again"])
def test_the_committed_archive_gives_the_committed_summary(spark, tmp_path, monkeypatch, sample):
    if sample == "drawn again":  # the tasks draw too few retry rows: the comparison draws from all of them
        monkeypatch.setattr(facts, "SAMPLE_HEADROOM", 0)
    [archive] = [p for p in GOLDEN.iterdir() if (p / "manifest.json").exists()]
    run(parser().parse_args([str(archive), "--baseline", "unpatched", "--candidate", "patched",
                             "--out", str(tmp_path / "report")]), spark=spark)
    got = json.loads((tmp_path / "report" / "summary.json").read_text())
    want = json.loads((GOLDEN / "summary.json").read_text())
    assert _figures(got) == _figures(want)
    assert got["verdict"] == "improvement"  # the patched build against 5.3.3's V1 stall
