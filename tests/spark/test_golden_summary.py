"""A committed archive of a real run gives, today, the summary it gave when it was committed: moving code
around (or any refactoring) must not move a figure."""

import json

import pytest

from spark import facts
from spark.jobs.compare import parser, run
from tests.spark.golden import figures, golden_archive, golden_summary


@pytest.mark.parametrize("sample", ["drawn by the tasks", "drawn again"])
def test_the_committed_archive_gives_the_committed_summary(spark, tmp_path, monkeypatch, sample):
    if sample == "drawn again":  # the tasks draw too few retry rows: the comparison draws from all of them
        monkeypatch.setattr(facts, "SAMPLE_HEADROOM", 0)
    run(parser().parse_args([str(golden_archive()), "--baseline", "unpatched", "--candidate", "patched",
                             "--out", str(tmp_path / "report")]), spark=spark)
    got = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert figures(got) == figures(golden_summary())
    assert got["verdict"] == "improvement"  # the patched build against 5.3.3's V1 stall
