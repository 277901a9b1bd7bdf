"""The one damaged-archive case the checks before Spark cannot see (tests/unit/test_fuzz_archives.py fuzzes the
others): an event file whose footer is intact (schema, columns and types all as they should be) but whose data
pages are not. spark.io reads footers only, so the damage surfaces inside a Spark task.

One case, on the session the Spark tests share (a few seconds): the contract is still an ArchiveError (exit 2)
naming the file, and no report.
"""

from __future__ import annotations

import struct

import pytest

from spark.io import ArchiveError, load_archives
from spark.jobs.compare import parser, run
from tests import synth


def _pages_corrupted(path) -> None:
    """Every byte between the leading magic and the footer overwritten; the footer (its length is the 4 bytes
    before the trailing magic) left as it was."""
    data = bytearray(path.read_bytes())
    (footer,) = struct.unpack("<I", data[-8:-4])
    data[4:len(data) - 8 - footer] = b"\xab" * (len(data) - 12 - footer)
    path.write_bytes(bytes(data))


def test_an_event_file_with_corrupt_pages_behind_a_good_footer_is_named_in_one_line(spark, tmp_path):
    archive = synth.archive(tmp_path / "runs", "pages", {"unpatched": synth.slow, "patched": synth.fast}, messages=6)
    _pages_corrupted(archive / "events" / "patched.parquet")
    load_archives([str(archive)])  # the footer checks pass: only reading the pages tells
    out = tmp_path / "report"
    args = parser().parse_args([str(archive), "--baseline", "unpatched", "--candidate", "patched", "--out", str(out),
                                "--bootstrap", "50"])
    with pytest.raises(ArchiveError) as e:
        run(args, spark=spark, warn=lambda s: None)
    assert "patched.parquet" in str(e.value) and "\n" not in str(e.value)
    assert not out.exists()
