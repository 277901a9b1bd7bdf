"""What a run prints, read in an 80-column CI log: every line fits and no variant name is ever cut ('patch…');
and results as rows for programs when asked (--format tsv|json)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.cells import cell_len
from rich.console import Console

from harness.cli.main import parse
from harness.inputs.expectations import evaluate
from harness.report import console
from harness.report.comparison_table import print_comparison
from harness.report.records import COMPARISON_FIELDS, SUMMARY_FIELDS
from harness.report.rows import print_comparison_as, print_summary_as
from harness.report.run_tables import print_actions, print_expectations, print_faults, print_grpc_clients, print_summary
from harness.report.tables import print_whole

LONG = ("5.3.3-with-a-long-name", "5.3.3-with-an-even-longer-name-for-ci", "unpatched")


def _summary_row(name: str, scenario: str = "burst") -> dict:
    """One variant of a run's summary (the manifest's), with every figure the tables show."""
    ms = {"n": 305, "p50": 16918.13, "p90": 16998.2, "p99": 17100.0, "max": 17180.5}
    return {"scenario": scenario, "variant": name, "cycles": 15, "sent": 480, "retry_deliveries": 480, "errors": 0,
            "wakeup_ms": ms, "pickup_ms": {**ms, "n": 0, "p50": None}, "redelivery_ms": ms, "nack_retry_ms": ms,
            "stalled": {"retries": 480, "count": 256, "share": 0.53}, "hybrid": None,
            "ledger": {"retries_never_redelivered": 0, "retries_expected": 480, "lost": 0, "duplicated": 0,
                       "cross_topic": 0},
            "faults": [{"label": "kill9 broker", "at_s": 30.0, "variant": name, "window_s": 10.2, "exposed": 120,
                        "lost": 0, "duplicated": 3, "dead_lettered": 0, "acked_after_retry": 40,
                        "longest_wait_ms": 12345.0, "longest_wait_open": True, "send_gap_ms": 10400.0,
                        "send_gap_open": False, "delivery_gap_ms": 9000.0, "delivery_gap_open": True,
                        "error": None}]}


def _comparison(baseline: str, candidate: str, tmp: Path) -> dict:
    def one(metric: str, primary: bool, reason: str) -> dict:
        return {"scenario": "burst", "metric": metric, "primary": primary, "statistic": "median", "n_baseline": 8,
                "n_candidate": 15, "median_baseline": 16918.13, "median_candidate": 13.48,
                "ratio_of_medians": 0.000797, "difference": -16904.6, "ci": [0.000646, 0.00236],
                "p_adjusted": 4.1e-06, "verdict": "improvement", "reason": reason}

    return {"baseline": baseline, "candidate": candidate, "verdict": "improvement",
            "rule": {"alpha": 0.05, "one_sided": False, "text": "unit: the cycle. " + "a long rule; " * 40},
            "comparisons": [one("wakeup_ms", True, "candidate lower"),
                            one("redelivery_ms", False, "candidate lower; paired by run (3 runs); " * 3)],
            "per_variant": [{"scenario": "burst", "variant": v, "ledger": {"lost": 0, "duplicated": 0}}
                            for v in (baseline, candidate)],
            "out": str(tmp / "reports" / "r"), "report": str(tmp / "reports" / "r" / "report.html")}


@pytest.fixture
def screen(monkeypatch) -> io.StringIO:
    """The terminal's consoles as an 80-column CI log (not a terminal: no colour codes to strip)."""
    out = io.StringIO()
    monkeypatch.setattr(console, "console", Console(file=out, width=80, highlight=False))
    monkeypatch.setattr(console, "err_console", Console(file=out, width=80, highlight=False))
    return out


def _lines(out: io.StringIO) -> list[str]:
    return out.getvalue().splitlines()


def _fits(lines: list[str], width: int = 80) -> None:
    assert lines
    too_long = [line for line in lines if cell_len(line) > width]
    assert not too_long, too_long
    assert not [line for line in lines if "…" in line]  # rich's ellipsis: something was cut


def test_a_runs_summary_fits_80_columns_with_every_variant_name_whole(screen):
    print_summary([_summary_row(n) for n in LONG])
    lines = _lines(screen)
    _fits(lines)
    for name in LONG:
        assert any(name in line for line in lines), name
    # Every figure has its row, whatever table its variant landed in.
    assert sum(line.startswith("│ never redelivered") for line in lines) >= 1
    assert any("256/480" in line for line in lines)  # stalled


def test_a_summary_of_several_scenarios_names_each_above_its_variant(screen):
    print_summary([_summary_row("patched", "burst"), _summary_row("patched", "steady")])
    text = screen.getvalue()
    _fits(_lines(screen))
    assert "burst" in text and "steady" in text


def test_a_comparison_fits_80_columns_names_both_variants_whole_and_the_rule_is_not_repeated(screen, tmp_path,
                                                                                            monkeypatch):
    monkeypatch.chdir(tmp_path)
    print_comparison(_comparison(LONG[0], LONG[1], tmp_path))
    lines = _lines(screen)
    _fits(lines)
    text = "\n".join(lines)
    assert f"{LONG[0]} (baseline)" in text and f"{LONG[1]} (candidate)" in text
    assert "a long rule" not in text  # summary.json and the report have it
    assert "verdict: improvement" in lines
    assert f"{LONG[1]} wakes a poll already waiting for a retry in 13 ms against 16.92 s" in " ".join(text.split())
    assert "report: reports/r/report.html" in lines  # relative to where the reader is


def test_faults_fit_80_columns(screen):
    print_faults([_summary_row(n) for n in LONG])
    lines = _lines(screen)
    _fits(lines)
    for name in LONG:
        assert any(name in line for line in lines), name


def test_a_runs_rules_show_each_variants_value_and_status(screen):
    rows = [{"variant": "unpatched", "ledger": {"lost": 0}, "observed": {"revive_errors": 41.0}},
            {"variant": "patched", "ledger": {"lost": 0}, "observed": {"revive_errors": None}}]
    print_expectations({r["variant"]: evaluate(["observed.revive_errors == 0", "ledger.lost == 0"], r)["checks"]
                        for r in rows})
    lines = _lines(screen)
    _fits(lines)
    [errors] = [line for line in lines if "observed.revive_errors" in line]
    assert "failed 41" in errors and "no data -" in errors
    [lost] = [line for line in lines if "ledger.lost" in line]
    assert lost.count("met 0") == 2


def test_actions_fit_80_columns_and_say_what_went_wrong(screen):
    rows = [{"actions": [{"variant": LONG[0], "label": "reset_offset G to earliest", "when": "cycle 2", "at_s": 17.1,
                          "result": "127.0.0.1:20011: q0->0, q1->0", "error": None},
                         {"variant": LONG[0], "label": "x=[b]", "when": "at 5 s", "at_s": None,
                          "result": "", "error": "not carried out: its moment (at 5 s) did not come"}]}]
    print_actions(rows)
    text = "\n".join(_lines(screen))
    _fits(_lines(screen))
    assert "x=[b]" in text and "error:" in text and "q0->0" in text  # markup in a label is text


def test_progress_lines_and_warnings_wrap_at_the_width(screen):
    long = "unpatched: broker clock - load generator clock between -4.7 and 5.8 ms; " * 4
    console.log(long + "[5407, 5409]")  # no markup: a PID list stays as written
    console.warn(long)
    lines = _lines(screen)
    _fits(lines)
    assert "[5407, 5409]" in " ".join(screen.getvalue().split())


def test_piped_output_takes_columns_when_it_is_set(monkeypatch):
    piped = io.StringIO()
    monkeypatch.delenv("COLUMNS", raising=False)
    assert console._width(piped) == console.PIPED_WIDTH
    monkeypatch.setenv("COLUMNS", "80")
    assert console._width(piped) is None  # rich reads COLUMNS itself
    assert Console(file=piped, width=console._width(piped)).width == 80


def test_rows_for_programs_as_tsv(capsys):
    print_summary_as([_summary_row(n) for n in LONG], "tsv", archive="runs/r")
    header, *rows, blank = capsys.readouterr().out.split("\n")[:-1]
    assert header.split("\t") == list(SUMMARY_FIELDS) and blank == ""
    assert [r.split("\t")[1] for r in rows] == list(LONG)
    first = dict(zip(SUMMARY_FIELDS, rows[0].split("\t"), strict=True))
    assert first["wakeup_p50_ms"] == "16918.1" and first["pickup_p50_ms"] == "" and first["stalled"] == "256"


def test_rows_for_programs_as_json(capsys, tmp_path):
    print_summary_as([_summary_row("patched")], "json", archive="runs/r")
    print_comparison_as(_comparison("unpatched", "patched", tmp_path), "json")
    variants, comparison = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert variants["kind"] == "variants" and variants["run_archive"] == "runs/r"
    assert list(variants["rows"][0]) == list(SUMMARY_FIELDS) and variants["rows"][0]["wakeup_p50_ms"] == 16918.13
    assert comparison["verdict"] == "improvement" and comparison["report"].endswith("report.html")
    assert [list(r) for r in comparison["rows"]] == [list(COMPARISON_FIELDS)] * 2
    assert comparison["rows"][0]["ci_low"] == 0.000646 and comparison["rows"][0]["baseline"] == "unpatched"


def test_format_is_an_option_of_run_and_compare_with_its_environment_name(monkeypatch):
    assert parse(["run"]).format == "table"
    assert parse(["compare", "runs/a", "--baseline", "a", "--candidate", "b", "--format", "json"]).format == "json"
    monkeypatch.setenv("RMQ_HARNESS_FORMAT", "tsv")
    assert parse(["run"]).format == "tsv"
    monkeypatch.setenv("RMQ_HARNESS_FORMAT", "csv")
    with pytest.raises(Exception, match="RMQ_HARNESS_FORMAT='csv': expected one of table, tsv, json"):
        parse(["run"])


def test_format_is_an_option_of_k8s_run_and_k8s_compare_as_of_run_and_compare():
    assert parse(["k8s", "run"]).format == "table"
    assert parse(["k8s", "run", "--format", "tsv"]).format == "tsv"
    assert parse(["k8s", "compare", "r", "--baseline", "a", "--candidate", "b", "--format", "json"]).format == "json"


def test_k8s_compare_prints_the_rows_compare_prints_its_driver_log_on_stderr(monkeypatch, tmp_path, capsys):
    """The comparison in the cluster as rows for programs: stdout holds them alone, the report where it landed here."""
    from harness.cli.main import main
    from harness.deploy.k8s import remote

    summary = {k: v for k, v in _comparison("unpatched", "patched", tmp_path).items() if k not in ("out", "report")}

    class Cluster:
        """The release's comparison Job: its driver's log, then its report copied into ``out``."""

        def __init__(self, release: str, namespace: str, log) -> None:
            self.log = log

        def compare(self, run_ids, baseline, candidate, rule, out: Path, timeout_s: float) -> Path:
            self.log("driver: verdict improvement")
            out.mkdir(parents=True)
            (out / "summary.json").write_text(json.dumps(summary))
            return out

    monkeypatch.setattr(remote, "Cluster", Cluster)
    out = tmp_path / "report"
    argv = ["k8s", "compare", "r1", "--baseline", "unpatched", "--candidate", "patched", "--out", str(out)]
    assert main([*argv, "--format", "json"]) == 0
    said = capsys.readouterr()
    [doc] = [json.loads(line) for line in said.out.splitlines()]
    assert doc["kind"] == "comparison" and doc["verdict"] == "improvement"
    assert doc["report"] == str(out.resolve() / "report.html") and doc["summary"] == str(out.resolve() / "summary.json")
    assert [list(r) for r in doc["rows"]] == [list(COMPARISON_FIELDS)] * 2
    assert "driver: verdict improvement" in said.err
    assert main([*argv[:-1], str(tmp_path / "again")]) == 0  # a table: the driver's log, then where the report is
    said = capsys.readouterr()
    assert "driver: verdict improvement" in said.out and "verdict: improvement" in said.out


def test_a_wide_table_of_another_command_is_printed_whole_not_cut(screen):
    """A sweep's or a matrix's table on a narrow console: longer lines, never 'improvem…'."""
    from rich.table import Table

    t = Table()
    for n in range(10):
        t.add_column(f"change {n}")
    t.add_row(*["improvement"] * 10)
    print_whole(t)
    out = screen.getvalue()
    assert out.count("improvement") == 10 and "…" not in out


def test_which_grpc_client_drove_each_variant_is_said_when_not_only_the_official_one(capsys: pytest.CaptureFixture):
    print_grpc_clients({"unpatched": "official", "patched": "official", "remoting-one": None})
    assert capsys.readouterr().out == ""  # the default, everywhere: nothing to say
    print_grpc_clients({"via-official": "official", "via-native": "native"})
    said = " ".join(capsys.readouterr().out.split())
    assert said.startswith("gRPC clients differ: via-official official, via-native native")
    print_grpc_clients({"unpatched": "native", "patched": "native"})
    assert " ".join(capsys.readouterr().out.split()) == "gRPC client: unpatched native, patched native (--grpc-client)"


def test_a_runs_own_table_names_the_grpc_client_it_drove(capsys: pytest.CaptureFixture):
    """`run --grpc-client native`: the rows a run prints come from its record, which says which client drove it."""
    from harness.contracts.record import RunRecord
    from harness.inputs.catalogue import load_scenario
    from harness.run.sequence import RunResult

    row = _summary_row("unpatched")
    record = RunRecord(run_id="r", scenario=load_scenario("burst").model_dump(mode="json"), grpc_client="native",
                       variants=[{"name": "unpatched", "version": "5.3.3"}], summary=[row])
    rows = RunResult(record, "runs/r").summary
    assert rows[0]["grpc_client"] == "native" and "grpc_client" not in record.summary[0]
    print_summary(rows)
    assert "gRPC client: unpatched native (--grpc-client)" in " ".join(capsys.readouterr().out.split())


def test_the_analysis_rows_carry_the_client_each_archive_drove():
    from harness.contracts.record import RunRecord
    from harness.inputs.catalogue import load_scenario
    from harness.measure.enrich import enrich

    grpc = load_scenario("burst").model_dump(mode="json")
    remoting = {**grpc, "name": "burst-remoting", "protocol": "remoting"}

    def record(scenario: dict, client: str | None, *names: str) -> RunRecord:
        return RunRecord(run_id="r", scenario=scenario, grpc_client=client,
                         variants=[{"name": n, "version": "5.3.3"} for n in names])

    records = [record(grpc, None, "a"), record(grpc, "native", "a", "b"), record(remoting, None, "a")]
    rows = enrich([{"scenario": "burst", "variant": "a"}, {"scenario": "burst", "variant": "b"},
                   {"scenario": "burst-remoting", "variant": "a"}], records)
    # Before manifest schema 8 a gRPC run had only the official client; a remoting run has none.
    assert [r["grpc_client"] for r in rows] == ["official / native", "native", None]
