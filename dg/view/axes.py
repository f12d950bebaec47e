"""Log axes that read on a slide: every tick labelled with its whole value, the range a margin past the data.

plotly's own log ticks label the values between decades by their first digit ("1 2 5 10 2 5"), and its
autorange puts the last bar or marker against the edge. `log_axis` gives a plotly axis explicit ticks
(1, 2, 5, 10, 20, 50 … over a few decades, the decades alone over more) labelled with whole values, and a
range padded on both sides. A log axis's `range` is in log10 units (plotly's convention); everything
else (shapes, traces) stays in data units.

    python -c "from dg.view.axes import log_axis; print(log_axis(1, 48))"
"""

import math

MANTISSAS = (1, 2, 5)  # ticks within a decade while the axis spans few decades
MANTISSA_DECADES = 3  # up to this many decades every mantissa is a tick; past it, the decades alone
PAD_DECADES = 0.08  # the margin either side of the data, in decades
SMALL = 1e-4  # below it a tick reads as a power of ten ("1e-5"): its decimals would be hard to count


def tick_label(value: float) -> str:
    """A tick's whole value: 1e-5, 0.05, 2, 500, 2,000, 50k, 2M (never a bare mantissa)."""
    if value < SMALL:
        return f"{value:.0e}".replace("e-0", "e-")
    if value >= 1e6:
        return f"{value / 1e6:g}M"
    if value >= 1e4:
        return f"{value / 1e3:g}k"
    if value >= 1:
        return f"{value:,.0f}"
    return f"{value:g}"


def log_ticks(lo: float, hi: float) -> list[float]:
    """Tick values between `lo` and `hi` (both > 0): 1-2-5 steps over a few decades, decades past that."""
    if not 0 < lo <= hi:
        raise ValueError(f"a log axis needs 0 < lo <= hi, got lo={lo}, hi={hi}")
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    mantissas = MANTISSAS if math.log10(hi / lo) <= MANTISSA_DECADES else (1,)
    ticks = [m * 10.0 ** e for e in range(first, last + 1) for m in mantissas]
    return [t for t in ticks if lo <= t * (1 + 1e-9) and t <= hi * (1 + 1e-9)]


def log_axis(lo: float, hi: float, pad_decades: float = PAD_DECADES) -> dict:
    """plotly axis settings for data from `lo` to `hi`: log type, padded range (log10 units), clean ticks."""
    start, end = math.log10(lo) - pad_decades, math.log10(hi) + pad_decades
    ticks = log_ticks(10 ** start, 10 ** end)
    return dict(type="log", range=[start, end], tickvals=ticks, ticktext=[tick_label(t) for t in ticks])


def data_span(fig, letter: str = "x") -> tuple[float, float]:
    """The smallest and largest positive `letter` ("x" or "y") value over every trace of a plotly figure."""
    columns = (getattr(trace, letter) for trace in fig.data)
    values = [float(v) for column in columns if column is not None for v in column if v is not None and v > 0]
    if not values:
        raise ValueError(f"the figure has no positive {letter} values to fit a log axis to")
    return min(values), max(values)
