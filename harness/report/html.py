"""Render report.html and its plots from what the comparison job computed. Only renders."""

from __future__ import annotations

from pathlib import Path

import jinja2
import matplotlib
from markupsafe import Markup, escape

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from harness.contracts.verdict import AGGREGATE, REGRESSION, STATISTIC, per_value  # noqa: E402
from harness.report import interactive  # noqa: E402
from harness.report.finding import sentence  # noqa: E402
from harness.report.formats import fmt  # noqa: E402

TEMPLATE_DIR = Path(__file__).parent / "templates"


def _ms_axis(ax: object, axis: str = "x") -> None:
    getattr(ax, f"set_{axis}scale")("log")
    getattr(ax, f"set_{axis}label")("milliseconds (log scale)")


def _save(fig: object, ax: object, title: str, path: Path, legend: bool = True) -> None:
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    if legend and ax.get_legend_handles_labels()[0]:  # no labelled artists: matplotlib warns, draws nothing
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _cdf(samples: dict[str, np.ndarray], metric: str, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(7, 4))
    for variant, v in samples.items():
        x, y, n = interactive.cdf_steps(v)
        if n:
            ax.step(x, y, where="post", label=f"{variant} (n={n})")
    _ms_axis(ax)
    ax.set_ylabel("fraction of retry deliveries")
    _save(fig, ax, f"{metric}: cumulative distribution", path)


def _box(samples: dict[str, np.ndarray], metric: str, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(7, 4))
    names = [k for k, v in samples.items() if np.isfinite(v).any()]
    ax.boxplot([np.clip(samples[k][np.isfinite(samples[k])], 0.1, None) for k in names], tick_labels=names,
               showfliers=True)
    _ms_axis(ax, "y")
    _save(fig, ax, f"{metric} per variant", path, legend=False)


def _over_time(series: dict[str, tuple[np.ndarray, np.ndarray]], metric: str, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(7, 4))
    for variant, (t_s, v) in series.items():
        if v.size:
            ax.scatter(t_s, np.clip(v, 0.1, None), s=10, alpha=0.7, label=variant)
    _ms_axis(ax, "y")
    ax.set_xlabel("seconds since the variant's first retry delivery")
    _save(fig, ax, f"{metric} over the run", path)


def _cycles(medians: dict[str, tuple[np.ndarray, np.ndarray]], metric: str, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(7, 4))
    for variant, (cycle, m) in medians.items():
        finite = np.isfinite(m)
        ax.plot(cycle[finite], np.clip(m[finite], 0.1, None), "o-", ms=4, label=f"{variant} ({m.size} cycles)")
        if (~finite).any():
            ax.plot(cycle[~finite], np.full((~finite).sum(), ax.get_ylim()[1]), "x", color="red",
                    label=f"{variant}: retries never redelivered")
    _ms_axis(ax, "y")
    ax.set_xlabel("cycle (runs one after another)")
    _save(fig, ax, f"{metric}: median of each cycle (the unit the verdict compares)", path)


def _series(rows: list[dict], name: str, variants: list[str], path: Path) -> None:
    """A series as curves over its numbers of groups: wasted wakeups per nack, and the retry wakeup."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for i, v in enumerate(variants):
        mine = [r for r in rows if r["variant"] == v]
        x = np.array([r["groups"] for r in mine], dtype=float)
        for key, style in (("retry_other_per_nack", "o-"), ("empty_per_nack", "x--")):
            y = np.array([np.nan if r[key] is None else r[key] for r in mine], dtype=float)
            if np.isfinite(y).any():
                left.plot(x, y, style, color=f"C{i}", ms=5, label=f"{v}: {key.replace('_', ' ')}")
        for key, style in (("wakeup_p50_ms", "o-"), ("wakeup_p90_ms", "x--")):
            y = np.array([np.nan if r[key] in (None, "inf") else r[key] for r in mine], dtype=float)
            if np.isfinite(y).any():
                right.plot(x, np.clip(y, 0.1, None), style, color=f"C{i}", ms=5,
                           label=f"{v}: {key.removesuffix('_ms')}")
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("groups on the topic")
    left.set_ylabel("per nack (probe, summed over groups)")
    _ms_axis(right, "y")
    right.set_title(f"{name}: retry wakeup")
    right.grid(True, which="both", alpha=0.3)
    if right.lines:
        right.legend(fontsize=7)
    _save(fig, left, f"{name}: wakeups per nack", path, legend=bool(left.lines))


def _timeline(lines: pd.DataFrame, faults: list[dict], variants: list[str], path: Path) -> None:
    """Successful sends and first deliveries per second of one scenario's fault runs, the faults' windows
    shaded (target signalled -> back)."""
    fig, axes = plt.subplots(len(variants), 1, figsize=(9, 2.4 * len(variants)), sharex=True, squeeze=False)
    for ax, v in zip(axes[:, 0], variants, strict=True):
        mine = lines[lines["variant"] == v].groupby("second")[["sends", "deliveries"]].sum()
        ax.step(mine.index, mine["sends"], where="post", label="sends/s")
        ax.step(mine.index, mine["deliveries"], where="post", label="first deliveries/s")
        for f in faults:
            if f["variant"] == v and f.get("from_s") is not None:
                end = f["to_s"] if f.get("to_s") is not None else mine.index.max()
                ax.axvspan(f["from_s"], end, color="red", alpha=0.15, label=f"{f['label']} ({f['target']} away)")
        ax.set_ylabel(v)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="upper right")
    axes[-1, 0].set_xlabel("seconds since the run's first send")
    axes[0, 0].set_title("traffic around the faults (each run's own clock; shaded: the fault's window)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _fault_plots(summary_rows: list[dict], timeline: pd.DataFrame | None, scenario: str, variants: list[str],
                 plots_dir: Path) -> list[dict]:
    faults = [f for r in summary_rows if r["scenario"] == scenario for f in r.get("faults") or []]
    if timeline is None or timeline.empty or not faults:
        return []
    path = plots_dir / f"{scenario}-faults-timeline.png"
    _timeline(timeline[timeline["scenario"] == scenario], faults, variants, path)
    return [{"file": f"plots/{path.name}", "title": "traffic around the faults"}]


def _cycle_medians(samples: pd.DataFrame, scenario: str, variants: list[str]) -> dict[str, tuple]:
    """Per variant: (index, the wakeup level of each cycle: its median), the unit the verdict compares."""
    cyc = per_value(samples[(samples["scenario"] == scenario) & (samples["metric"] == "wakeup_ms")])
    out = {}
    for v in variants:
        m = cyc[cyc["variant"] == v].groupby(["run_id", "cycle"], sort=True)["value"].agg(
            AGGREGATE[STATISTIC["wakeup_ms"]])
        out[v] = (np.arange(m.size, dtype=float), m.to_numpy(dtype=float))
    return out


def _unbroken(v: object, unit: str = "ms") -> Markup:
    """A figure as harness.report.formats spells it, its number and unit kept on one line in a table cell."""
    return escape(fmt(v, unit)).replace(" ", Markup("&nbsp;"))


def _page(template: str, out: Path, **context: object) -> Path:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATE_DIR), autoescape=True,
                             undefined=jinja2.StrictUndefined)
    path = out / "report.html"
    path.write_text(env.get_template(template).render(fmt=_unbroken, **{"live": {}, "library": None, **context}))
    return path


LIVE = ("wakeup-cycles", "wakeup-cdf")  # the PNGs _live draws again, interactive


def _live(medians: dict[str, tuple], wakeups: dict[str, np.ndarray]) -> list[str]:
    """A scenario's interactive plots: the cycle levels and the wakeup CDF (harness.report.interactive)."""
    return [interactive.cycles(medians, "wakeup_ms"), interactive.cdf(wakeups, "wakeup_ms")]


def render(summary: dict, plot: pd.DataFrame, samples: pd.DataFrame, out: Path,
           timeline: pd.DataFrame | None = None) -> Path:
    """``plot``: a sample of retry deliveries (scenario, variant, t_client_ns, wakeup_ms, redelivery_ms);
    ``samples``: the per-cycle values the verdict compared; ``timeline``: traffic per second of runs with
    faults (spark.analysis.TIMELINE). Writes plots/ and report.html into ``out``."""
    plots_dir = out / "plots"
    plots_dir.mkdir(parents=True, exist_ok=True)
    variants = [summary["baseline"], summary["candidate"]]
    plots: dict[str, list[dict]] = {}
    live: dict[str, list[str]] = {}
    for scenario in sorted({c["scenario"] for c in summary["comparisons"]}):
        sub = plot[plot["scenario"] == scenario]
        per = {v: sub[sub["variant"] == v] for v in variants}
        t0 = {v: df["t_client_ns"].min() for v, df in per.items()}
        wake = {v: ((df["t_client_ns"] - t0[v]).to_numpy(dtype=float) / 1e9, df["wakeup_ms"].to_numpy(dtype=float))
                for v, df in per.items()}
        medians = _cycle_medians(samples, scenario, variants)
        items = []
        for name, fn, arg in (
            ("wakeup-cycles", _cycles, medians),
            ("wakeup-cdf", _cdf, {v: w[1] for v, w in wake.items()}),
            ("wakeup-box", _box, {v: w[1] for v, w in wake.items()}),
            ("wakeup-over-time", _over_time, wake),
            ("redelivery-cdf", _cdf, {v: df["redelivery_ms"].to_numpy(dtype=float) for v, df in per.items()}),
        ):
            metric = "redelivery_ms" if name.startswith("redelivery") else "wakeup_ms"
            path = plots_dir / f"{scenario}-{name}.png"
            fn(arg, metric, path)
            items.append({"file": f"plots/{path.name}", "title": name.replace("-", " "), "live": name in LIVE})
        plots[scenario] = items + _fault_plots(summary["per_variant"], timeline, scenario, variants, plots_dir)
        live[scenario] = _live(medians, {v: w[1] for v, w in wake.items()})
    return _page("report.html.j2", out, summary=summary, plots=plots, live=live,
                 library=interactive.write_library(plots_dir), finding=sentence(summary))


def render_matrix(summary: dict, plot: pd.DataFrame, samples: pd.DataFrame, out: Path,
                  timeline: pd.DataFrame | None = None) -> Path:
    """The matrix report: overview, expectations, ledger, then per scenario its comparisons against the
    baseline and two plots over every variant (cycle levels, wakeup CDF)."""
    plots_dir = out / "plots"
    plots_dir.mkdir(parents=True, exist_ok=True)
    variants = summary["variants"]
    plots: dict[str, list[dict]] = {}
    live: dict[str, list[str]] = {}
    for scenario in sorted({r["scenario"] for r in summary["per_variant"]}):
        sub = plot[plot["scenario"] == scenario]
        medians = _cycle_medians(samples, scenario, variants)
        live[scenario] = _live(medians, {v: sub[sub["variant"] == v]["wakeup_ms"].to_numpy(dtype=float)
                                         for v in variants})
        items = []
        for name, fn, arg in (
            ("wakeup-cycles", _cycles, medians),
            ("wakeup-cdf", _cdf, {v: sub[sub["variant"] == v]["wakeup_ms"].to_numpy(dtype=float) for v in variants}),
        ):
            path = plots_dir / f"{scenario}-{name}.png"
            fn(arg, "wakeup_ms", path)
            items.append({"file": f"plots/{path.name}", "title": name.replace("-", " "), "live": name in LIVE})
        plots[scenario] = items + _fault_plots(summary["per_variant"], timeline, scenario, variants, plots_dir)
    for name, rows in summary.get("series", {}).items():
        path = plots_dir / f"series-{name}.png"
        _series(rows, name, variants, path)
        plots[f"series:{name}"] = [{"file": f"plots/{path.name}", "title": f"{name} as a curve"}]
    return _page("matrix.html.j2", out, summary=summary, plots=plots, live=live,
                 library=interactive.write_library(plots_dir))


def _num(v: object) -> float:
    return float("inf") if v == "inf" else (float("nan") if v is None else float(v))


def _releases(rows: list[dict], changed: list[dict], metric: str, statistic: str, path: Path) -> None:
    """A scenario's level per release (median of cycle medians, or mean share) with its interval, and the
    retries' p90; the releases where the behaviour changed are shaded."""
    fig, ax = plt.subplots(figsize=(max(7, 0.9 * len(rows) + 2), 4))
    x = np.arange(len(rows))
    names = [r["version"] or r["variant"] for r in rows]
    level = np.array([_num(r["level"]) for r in rows])
    lo = np.array([_num(r["ci"][0]) if r["ci"] else np.nan for r in rows])
    hi = np.array([_num(r["ci"][1]) if r["ci"] else np.nan for r in rows])
    share = statistic == "share"
    floor = 0.0 if share else 0.1
    shown = np.clip(np.where(np.isfinite(level), level, np.nan), floor, None)
    err = np.vstack([np.clip(shown - np.clip(lo, floor, None), 0, None),
                     np.clip(np.where(np.isfinite(hi), hi, shown) - shown, 0, None)])
    ax.errorbar(x, shown, yerr=err, fmt="o-", capsize=4, label=f"{metric}: level with its interval")
    if not share:
        p90 = np.array([_num(r["p90"]) for r in rows])
        ax.scatter(x, np.clip(p90, floor, None), marker="^", facecolors="none", edgecolors="tab:red",
                   label="p90 of retries")
        if np.isfinite(shown).any() or np.isfinite(p90).any():
            _ms_axis(ax, "y")
        else:  # no release had a retry to measure (a scenario without nacks): nothing to put on a log axis
            ax.set_ylabel(f"{metric}: no retries to measure")
    else:
        ax.set_ylim(-0.05, 1.05)
        ax.set_ylabel("share of retries")
    for i in range(len(rows)):
        if not np.isfinite(level[i]):
            ax.annotate("never", (x[i], ax.get_ylim()[1]), ha="center", va="top", color="tab:red")
    for ch in changed:
        i = next((k for k, r in enumerate(rows) if r["variant"] == ch["release"]), None)
        if i is not None:
            ax.axvspan(i - 0.5, i + 0.5, color="#fbe0e0" if ch["verdict"] == REGRESSION else "#dff5e1",
                       alpha=0.7, zorder=0)
    ax.set_xticks(x, names, rotation=30)
    ax.set_xlabel("release")
    _save(fig, ax, f"{metric} per release (shaded: changed from the release before)", path)


def render_sweep(summary: dict, plot: pd.DataFrame, samples: pd.DataFrame, out: Path,
                 timeline: pd.DataFrame | None = None) -> Path:
    """The sweep report: per scenario the level per release, its changes, and the ledger per release."""
    plots_dir = out / "plots"
    plots_dir.mkdir(parents=True, exist_ok=True)
    plots: dict[str, list[dict]] = {}
    for name, sc in summary["scenarios"].items():
        path = plots_dir / f"{name}-releases.png"
        _releases(sc["releases"], sc["changed"], sc["metric"], sc["releases"][0]["statistic"], path)
        plots[name] = [{"file": f"plots/{path.name}", "title": f"{sc['metric']} per release"}]
    if summary.get("defects"):
        (out / "defects.md").write_text(defects_markdown(summary))
    return _page("sweep.html.j2", out, summary=summary, plots=plots)


def defects_markdown(summary: dict) -> str:
    """The sweep's defect table as Markdown (the report's defects.md): docs/findings/upstream-defects.md quotes
    it, and a sweep over the same archives writes it again."""
    facts = {f["name"]: f for f in summary.get("variant_facts", [])}
    heads = [f"{facts.get(v, {}).get('version') or v}{' (h)' if facts.get(v, {}).get('hybrid') else ''}"
             for v in summary["variants"]]
    lines = ["| scenario | " + " | ".join(heads) + " | first shows | last shows | upstream |",
             "|---|" + "---|" * (len(heads) + 3)]
    for r in summary["defects"]:
        cells = []
        for v in summary["variants"]:
            c = r["releases"].get(v, {})
            state = c.get("state", "-")
            cells.append(f"**{state}**" if state == "present" else state)
        lines.append(f"| {r['scenario']} | " + " | ".join(cells)
                     + f" | {r['first_present'] or '-'} | {r['last_present'] or '-'} | {r['reference']} |")
    why = [f"- `{k}`: {v}" for k, v in summary.get("not_applicable", {}).items()]
    failed = [f"- `{k}`: {v}" for k, v in summary.get("failed_runs", {}).items()]
    return ("\n".join(lines) + "\n\n(h): a hybrid release (docs/releases.md). Runs: "
            + ", ".join(f"`{r['run_id']}`" for r in summary.get("runs", [])) + "\n"
            + ("\nNot applicable:\n" + "\n".join(why) + "\n" if why else "")
            + ("\nRuns that failed:\n" + "\n".join(failed) + "\n" if failed else ""))


def _history(points: list[dict], change_points: list[dict], label: str, statistic: str, title: str,
             path: Path) -> None:
    """A series: a level per point (a run, or a release), the change points as lines, the segments' means."""
    fig, ax = plt.subplots(figsize=(max(7, 0.25 * len(points) + 3), 4))
    x = np.arange(len(points))
    y = np.array([_num(p["level"]) for p in points])
    share = statistic == "share"
    shown = np.clip(np.where(np.isfinite(y), y, np.nan), 0.0 if share else 0.1, None)
    ax.plot(x, shown, "o-", ms=4, label="level")
    ends = [0, *[c["index"] for c in change_points], len(points)]
    for a, b in zip(ends, ends[1:], strict=False):
        seg = shown[a:b][np.isfinite(shown[a:b])]
        if seg.size:
            ax.hlines(seg.mean(), a - 0.4, b - 0.6, colors="grey", linestyles="dotted")
    for c in change_points:
        ax.axvline(c["index"] - 0.5, color="tab:red" if c["direction"] == REGRESSION else "tab:green",
                   label=f"{c['direction']} at {c.get('run_id') or c.get('version')}")
    if share:
        ax.set_ylim(-0.05, 1.05)
        ax.set_ylabel("share of retries")
    else:
        _ms_axis(ax, "y")
    step = max(1, len(points) // 20)
    ax.set_xticks(x[::step], [p.get(label) or "" for p in points][::step], rotation=60, fontsize=7)
    _save(fig, ax, title, path)


def render_history(summary: dict, out: Path) -> Path:
    """The history report: every series with its change points, the regressions the newest runs start."""
    plots_dir = out / "plots"
    plots_dir.mkdir(parents=True, exist_ok=True)
    plots: dict[str, dict] = {}
    for kind, label in (("runs", "run_id"), ("releases", "version")):
        for i, s in enumerate(summary[f"over_{kind}"]):
            if len(s["points"]) < 2:
                continue
            path = plots_dir / f"{kind}-{i}.png"
            who = f"{s['scenario']} / {s['variant']}" if kind == "runs" else s["scenario"]
            _history(s["points"], s["change_points"], label, s["statistic"],
                     f"{who}: {s['metric']} per {kind[:-1]}", path)
            plots[f"{kind}-{i}"] = {"file": f"plots/{path.name}"}
    return _page("history.html.j2", out, summary=summary, plots=plots)
