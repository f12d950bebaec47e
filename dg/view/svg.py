"""Small inline SVG charts for the Learn tab's pictures: bars with an optional running line and a
threshold, and a line with one point marked.

Pure functions: numbers in, one `<svg>` string out (no scripts). Text and axes take the page's text
colour (`currentColor`, see theme.CSS), so a chart reads in light and dark themes; the SVG scales to
its container's width.

    python -c "from dg.view.svg import bars; print(bars([0.1, 0.5, 2.0], ['#16a34a'] * 3))"
"""

import math
from dataclasses import dataclass

from dg.view.axes import tick_label
from dg.view.theme import INK, esc

WIDTH, HEIGHT = 720, 230
LEFT, RIGHT, TOP, BOTTOM = 52, 16, 14, 40  # plot margins inside the SVG
TICK_BASELINE = 4  # a tick label's baseline below its value's y, so the text centres on it
LOG_DECADES = 5  # a log axis spans at most this many decades below its top: tinier values sit on the floor
LOG_PAD_DECADES = 0.15  # room above the largest value and below the smallest on a log axis
LINE_HEADROOM = 1.1  # a line chart's top above its largest value


@dataclass(frozen=True)
class Scale:
    """A chart's y axis: linear from 0 to `hi`, or log10 from `lo` to `hi` (for values spanning decades)."""

    lo: float
    hi: float
    log: bool = False

    @classmethod
    def fit(cls, values, log: bool = False) -> "Scale":
        """The axis for `values`: linear to their largest; log from the decade below the smallest positive
        value (at most LOG_DECADES below the top) to a margin above the largest."""
        values = [float(v) for v in values]
        top = max([*values, 1e-9])
        if not log:
            return cls(0.0, top)
        hi = top * 10 ** LOG_PAD_DECADES
        smallest = min([v for v in values if v > 0] or [top])
        floor = math.floor(max(math.log10(smallest) - LOG_PAD_DECADES, math.log10(hi) - LOG_DECADES))
        return cls(10.0 ** floor, hi, log=True)

    def y(self, value: float) -> float:
        """SVG y of a value, clipped to the plot (past either end it touches that edge)."""
        if self.log:
            value = min(max(value, self.lo), self.hi)
            share = math.log10(value / self.lo) / math.log10(self.hi / self.lo)
        else:
            share = min(max(value, 0.0), self.hi) / self.hi
        return HEIGHT - BOTTOM - (HEIGHT - BOTTOM - TOP) * share

    def ticks(self) -> list[float]:
        """0 and the top (linear); every decade within the range (log)."""
        if not self.log:
            return [0.0, self.hi]
        first, last = math.ceil(math.log10(self.lo) - 1e-9), math.floor(math.log10(self.hi) + 1e-9)
        return [10.0 ** e for e in range(first, last + 1)]


def _frame(inner: str, x_label: str, y_label: str, scale: Scale) -> str:
    """Axes, the y ticks, both axis titles, around `inner`."""
    x0, y0, x1, y1 = LEFT, HEIGHT - BOTTOM, WIDTH - RIGHT, TOP
    ticks = "".join(f'<text x="{x0 - 6}" y="{min(scale.y(t) + TICK_BASELINE, y0):.2f}" text-anchor="end">'
                    f"{tick_label(t) if scale.log else f'{t:.3g}'}</text>" for t in scale.ticks())
    return (f'<svg class="dg-fig" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{esc(y_label)}">'
            f'<line x1="{x0}" y1="{y0}" x2="{x1}" y2="{y0}" stroke="{INK}"/>'
            f'<line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y1}" stroke="{INK}"/>{ticks}'
            f'<text x="{(x0 + x1) / 2}" y="{HEIGHT - 8}" text-anchor="middle">{esc(x_label)}</text>'
            f'<text x="14" y="{(y0 + y1) / 2}" text-anchor="middle" transform="rotate(-90 14 {(y0 + y1) / 2})">'
            f"{esc(y_label)}</text>{inner}</svg>")


def bars(values, colors, *, line=None, line_label: str = "", threshold: float | None = None,
         threshold_label: str = "", log: bool = False, x_label: str = "", y_label: str = "") -> str:
    """One bar per value (its colour from `colors`), optionally a line over the same x (e.g. a running
    sum) and a dashed horizontal threshold. The y axis covers all of them (`log`: on a log scale, for
    values spanning decades)."""
    values = [float(v) for v in values]
    scale = Scale.fit([*values, *(line or []), threshold or 0.0], log)
    step = (WIDTH - LEFT - RIGHT) / max(len(values), 1)
    gap = 1 if step > 3 else 0
    # every bar at least 2 px tall, so the colour of a near-zero entropy still shows
    parts = [f'<rect x="{LEFT + i * step:.2f}" y="{min(scale.y(v), HEIGHT - BOTTOM - 2):.2f}" '
             f'width="{max(step - gap, 0.5):.2f}" height="{max(HEIGHT - BOTTOM - scale.y(v), 2):.2f}" fill="{c}">'
             f"<title>{i + 1}: {v:.4f}</title></rect>" for i, (v, c) in enumerate(zip(values, colors))]
    if threshold is not None:
        y = scale.y(threshold)
        parts.append(f'<line x1="{LEFT}" y1="{y:.2f}" x2="{WIDTH - RIGHT}" y2="{y:.2f}" stroke="{INK}" '
                     f'stroke-dasharray="6 4"/><text x="{WIDTH - RIGHT - 4}" y="{y - 4:.2f}" '
                     f'text-anchor="end">{esc(threshold_label)}</text>')
    if line:
        points = " ".join(f"{LEFT + (i + 0.5) * step:.2f},{scale.y(v):.2f}" for i, v in enumerate(line))
        parts.append(f'<polyline points="{points}" fill="none" stroke="#dc2626" stroke-width="2"/>'
                     f'<text x="{LEFT + 6}" y="{TOP + 10}" fill="#dc2626" style="fill:#dc2626">'
                     f"{esc(line_label)}</text>")
    return _frame("".join(parts), x_label, y_label, scale)


def line(xs, ys, *, mark: int | None = None, mark_label: str = "", x_label: str = "", y_label: str = "") -> str:
    """A line through (xs, ys) from y = 0, the point at index `mark` drawn large with its label."""
    scale = Scale(0.0, max(ys) * LINE_HEADROOM if ys else 1.0)
    x_lo, x_hi = min(xs), max(xs)

    def x(v):
        return LEFT + (WIDTH - LEFT - RIGHT) * ((v - x_lo) / (x_hi - x_lo) if x_hi > x_lo else 0.5)

    points = " ".join(f"{x(a):.2f},{scale.y(b):.2f}" for a, b in zip(xs, ys))
    inner = f'<polyline points="{points}" fill="none" stroke="{INK}" stroke-width="2"/>'
    if mark is not None:
        cx, cy = x(xs[mark]), scale.y(ys[mark])
        anchor = "end" if cx > WIDTH / 2 else "start"
        inner += (f'<line x1="{cx:.2f}" y1="{HEIGHT - BOTTOM}" x2="{cx:.2f}" y2="{cy:.2f}" stroke="#0ea5e9" '
                  f'stroke-dasharray="4 3"/><circle cx="{cx:.2f}" cy="{cy:.2f}" r="6" fill="#0ea5e9"/>'
                  f'<text x="{cx + (-10 if anchor == "end" else 10):.2f}" y="{cy - 10:.2f}" text-anchor="{anchor}">'
                  f"{esc(mark_label)}</text>")
    return _frame(inner, x_label, y_label, scale)
