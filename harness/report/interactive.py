"""The report's interactive plots (plotly): the ones a reader wants to hover (which cycle, which run, how many
retries under a latency) and zoom (a log axis spanning milliseconds to tens of seconds). The PNGs beside them
stay, for the archive and for readers without JavaScript. Only renders."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

LIBRARY = "plotly.min.js"  # written once into a report's plots/, read by every figure (no network needed)
CDF_POINTS = 2_000
LAYOUT = {"height": 380, "margin": {"l": 60, "r": 20, "t": 40, "b": 50}, "template": "plotly_white",
          "legend": {"orientation": "h", "y": -0.2}}


def write_library(plots_dir: Path) -> str:
    """plotly.js beside the plots; returns its path relative to the report."""
    (plots_dir / LIBRARY).write_text(get_plotlyjs())
    return f"{plots_dir.name}/{LIBRARY}"


def _div(fig: go.Figure) -> str:
    return fig.to_html(full_html=False, include_plotlyjs=False, default_width="100%",
                       config={"displaylogo": False, "responsive": True})


def cdf_steps(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """The steps of a cumulative distribution of the finite positive values (x, fraction at or below it, how many
    values): at most CDF_POINTS of the exact curve's, more are invisible at a report's size and slow to draw. The
    static plot (harness.report.html) and the interactive one draw the same steps."""
    v = np.sort(values[np.isfinite(values) & (values > 0)])
    at = np.unique(np.linspace(0, v.size - 1, min(v.size, CDF_POINTS)).astype(int))
    return v[at], (at + 1) / max(v.size, 1), v.size


def cdf(samples: dict[str, np.ndarray], metric: str) -> str:
    """Each variant's cumulative distribution (at most CDF_POINTS steps), log milliseconds."""
    fig = go.Figure()
    for variant, values in samples.items():
        x, y, n = cdf_steps(values)
        if n:
            fig.add_trace(go.Scatter(x=x, y=y, mode="lines", line_shape="hv", name=f"{variant} (n={n})",
                                     hovertemplate="%{x:.1f} ms: %{y:.1%} of retries<extra>" + variant + "</extra>"))
    fig.update_layout(title=f"{metric}: cumulative distribution", xaxis_title="milliseconds (log scale)",
                      yaxis_title="fraction of retry deliveries", xaxis_type="log", **LAYOUT)
    return _div(fig)


def cycles(medians: dict[str, tuple[np.ndarray, np.ndarray]], metric: str) -> str:
    """Each variant's cycle levels (the unit the verdict compares); a cycle whose retries never came back is
    drawn at the top, in red."""
    fig = go.Figure()
    top = max((float(np.nanmax(m[np.isfinite(m)])) for _, m in medians.values() if np.isfinite(m).any()),
              default=1.0) * 2
    for variant, (cycle, m) in medians.items():
        finite = np.isfinite(m)
        fig.add_trace(go.Scatter(x=cycle[finite], y=np.clip(m[finite], 0.1, None), mode="lines+markers",
                                 name=f"{variant} ({m.size} cycles)",
                                 hovertemplate="cycle %{x}: %{y:.1f} ms<extra>" + variant + "</extra>"))
        if (~finite).any():
            fig.add_trace(go.Scatter(x=cycle[~finite], y=np.full(int((~finite).sum()), top), mode="markers",
                                     marker={"symbol": "x", "color": "red", "size": 10},
                                     name=f"{variant}: retries never redelivered"))
    fig.update_layout(title=f"{metric}: each cycle's median (what the verdict compares)",
                      xaxis_title="cycle (runs one after another)", yaxis_title="milliseconds (log scale)",
                      yaxis_type="log", **LAYOUT)
    return _div(fig)
