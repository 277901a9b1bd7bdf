"""How a figure reads, in the terminal and in report.html alike: one spelling of each kind of number."""

from __future__ import annotations

NONE = "-"
NEVER = "never"  # an endless wait: a retry never redelivered


def _endless(v: object) -> bool:
    return v == "inf" or v == float("inf")


def ms(v: float | str | None) -> str:
    """A duration in milliseconds: seconds from one second up, whole milliseconds from 10 ms, tenths below."""
    if v is None:
        return NONE
    if _endless(v):
        return NEVER
    v = float(v)
    if abs(v) >= 1000:
        return f"{v / 1000:.2f} s"
    return f"{v:.0f} ms" if abs(v) >= 10 else f"{v:.1f} ms"


def share(v: float | None) -> str:
    return NONE if v is None else f"{v:.0%}"


def p_value(v: float | None) -> str:
    return NONE if v is None else f"{v:.2g}"


def number(v: float | str | None) -> str:
    """A ratio or any other plain figure: three significant digits."""
    if v is None:
        return NONE
    if _endless(v):
        return NEVER
    return v if isinstance(v, str) else f"{v:.3g}"


def level(v: float | str | None, statistic: str) -> str:
    """A cycle level: a share for shares (stalls), else a duration."""
    return share(v) if statistic == "share" else ms(v)


def fmt(v: object, unit: str = "ms") -> str:
    """For the report's templates: ``unit`` is ms, share, p, n (a count) or x (a ratio)."""
    if v is None:
        return NONE
    if unit == "ms":
        return ms(v) if isinstance(v, int | float) or _endless(v) else str(v)
    if not isinstance(v, int | float):
        return NEVER if _endless(v) else str(v)
    if unit == "share":
        return share(v)
    if unit == "p":
        return p_value(v)
    if unit == "n":
        return f"{v:g}"
    return number(v)
