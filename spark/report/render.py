"""Render report.html and its plots from what the comparison job computed. Only renders."""

from __future__ import annotations

from pathlib import Path

import jinja2
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

TEMPLATE_DIR = Path(__file__).parent


def _ms_axis(ax: object, axis: str = "x") -> None:
    getattr(ax, f"set_{axis}scale")("log")
    getattr(ax, f"set_{axis}label")("milliseconds (log scale)")


def _save(fig: object, ax: object, title: str, path: Path, legend: bool = True) -> None:
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    if legend:
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _cdf(samples: dict[str, np.ndarray], metric: str, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(7, 4))
    for variant, v in samples.items():
        v = np.sort(v[np.isfinite(v) & (v > 0)])
        if v.size:
            ax.step(v, np.arange(1, v.size + 1) / v.size, where="post", label=f"{variant} (n={v.size})")
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


def render(summary: dict, samples: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]], out: Path) -> Path:
    """``samples[scenario][variant] = (seconds since first retry, wakeup_ms)``; also redelivery under
    ``samples[scenario]["__redelivery__"][variant]``. Writes plots/ and report.html into ``out``."""
    plots_dir = out / "plots"
    plots_dir.mkdir(parents=True, exist_ok=True)
    plots: dict[str, list[dict]] = {}
    for scenario, per_variant in samples.items():
        redelivery = per_variant.get("__redelivery__", {})
        wake = {v: s for v, s in per_variant.items() if v != "__redelivery__"}
        items = []
        for name, fn, arg in (
            ("wakeup-cdf", _cdf, {v: s[1] for v, s in wake.items()}),
            ("wakeup-box", _box, {v: s[1] for v, s in wake.items()}),
            ("wakeup-over-time", _over_time, wake),
            ("redelivery-cdf", _cdf, {v: s[1] for v, s in redelivery.items()}),
        ):
            metric = "redelivery_ms" if name.startswith("redelivery") else "wakeup_ms"
            path = plots_dir / f"{scenario}-{name}.png"
            fn(arg, metric, path)
            items.append({"file": f"plots/{path.name}", "title": name.replace("-", " ")})
        plots[scenario] = items
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATE_DIR), autoescape=True,
                             undefined=jinja2.StrictUndefined)
    html = env.get_template("report.html.j2").render(summary=summary, plots=plots, fmt=_fmt)
    path = out / "report.html"
    path.write_text(html)
    return path


def _fmt(v: object, unit: str = "ms") -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        if unit == "ms":
            return f"{v / 1000:.2f} s" if abs(v) >= 1000 else f"{v:.1f} ms"
        if unit == "p":
            return f"{v:.2e}" if v < 1e-3 else f"{v:.3f}"
        return f"{v:.3g}"
    return str(v)
