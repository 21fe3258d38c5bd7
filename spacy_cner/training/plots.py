"""Line charts as SVG text, for the pictures the training logger writes beside the model
(spacy-cner.PlotLogger.v1): the training curve and the calibration of the entity probabilities.

Written here, not with matplotlib: it is not a requirement (it and its compiled dependencies
would double the install for two line charts), and an SVG opens in every browser, on GitHub and in
Jupyter, and stays readable as text. One panel per chart, panels side by side in one picture.
"""

import math
from html import escape
from typing import List, NamedTuple, Optional, Sequence, Tuple

PANEL_WIDTH, PANEL_HEIGHT = 420, 300
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 52, 16, 30, 64
# Font size 11 (sans-serif): an estimate of a digit's width and of the glyphs' height above the baseline.
DIGIT_WIDTH, FONT_ASCENT = 6.2, 9
# Between a y tick label's right end and the axis.
TICK_GAP = 4
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf", "#7f7f7f")


class Series(NamedTuple):
    """One line of a panel; labels, where given, are written above its points (e.g. bin counts)."""

    name: str
    xs: Sequence[float]
    ys: Sequence[float]
    dashed: bool = False
    labels: Optional[Sequence[str]] = None


class Panel(NamedTuple):
    """One chart: its lines, axis titles and ranges (None: from the data), an optional y = x line
    and an optional labelled vertical line (e.g. the step model-best was saved at)."""

    title: str
    x_label: str
    y_label: str
    series: Sequence[Series]
    x_range: Optional[Tuple[float, float]] = None
    y_range: Optional[Tuple[float, float]] = None
    diagonal: bool = False
    marker: Optional[Tuple[float, str]] = None


def svg_picture(panels: Sequence[Panel]) -> str:
    """The panels side by side as one SVG document.

    panels (Sequence[Panel]): The charts, left to right.
    RETURNS (str): The SVG text.
    """
    width, height = PANEL_WIDTH * max(len(panels), 1), PANEL_HEIGHT
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
    ]
    for i, panel in enumerate(panels):
        parts.append(f'<g transform="translate({i * PANEL_WIDTH},0)">')
        parts.extend(_panel(panel))
        parts.append("</g>")
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def nice_ticks(low: float, high: float, n_ticks: int = 5) -> List[float]:
    """Round tick values (1, 2, 2.5 or 5 times a power of ten apart) from low to high inclusive."""
    if high <= low:
        return [low]
    raw_step = (high - low) / max(n_ticks - 1, 1)
    power = 10 ** math.floor(math.log10(raw_step))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw_step)
    first = math.ceil(low / step - 1e-9)
    return [round(k * step, 10) for k in range(first, int(math.floor(high / step + 1e-9)) + 1)]


def fitted_range(values: Sequence[float], bounds: Tuple[float, float]) -> Tuple[float, float]:
    """An axis range fitted to the values, within bounds: their range widened by a tenth of it each side (at
    least 1 in all), so that 89.5 -> 94.3 is not a flat line on 0-100.

    values (Sequence[float]): The values drawn (NaNs left out).
    bounds (Tuple[float, float]): The lowest and highest the axis may go, e.g. (0, 100) for percents.
    RETURNS (Tuple[float, float]): The range.
    """
    finite = [value for value in values if _finite(value)]
    if not finite:
        return bounds
    low, high = min(finite), max(finite)
    pad = max((high - low) * 0.1, (1.0 - (high - low)) / 2, 0.0)
    return max(bounds[0], low - pad), min(bounds[1], high + pad)


def _panel(panel: Panel) -> List[str]:
    points = [(x, y) for s in panel.series for x, y in zip(s.xs, s.ys) if _finite(x) and _finite(y)]
    x_low, x_high = panel.x_range or _data_range([x for x, _ in points])
    y_low, y_high = panel.y_range or _data_range([y for _, y in points], from_zero=True)
    y_ticks = nice_ticks(y_low, y_high)
    # The y axis's title (rotated, its glyphs left of its baseline) left of the widest tick label.
    tick_width = max((text_width(_number(tick)) for tick in y_ticks), default=0.0)
    title_x = 4 + FONT_ASCENT
    left, top = max(MARGIN_LEFT, math.ceil(title_x + 4 + tick_width + TICK_GAP)), MARGIN_TOP
    plot_width = PANEL_WIDTH - left - MARGIN_RIGHT
    plot_height = PANEL_HEIGHT - MARGIN_TOP - MARGIN_BOTTOM

    def to_x(x: float) -> float:
        return left + (x - x_low) / (x_high - x_low) * plot_width

    def to_y(y: float) -> float:
        return top + plot_height - (y - y_low) / (y_high - y_low) * plot_height

    out = [f'<text x="{PANEL_WIDTH / 2:.1f}" y="18" text-anchor="middle" font-size="13">{escape(panel.title)}</text>']
    for tick in nice_ticks(x_low, x_high):
        out.append(
            f'<line x1="{to_x(tick):.1f}" y1="{top}" x2="{to_x(tick):.1f}" y2="{top + plot_height}" stroke="#eee"/>'
        )
        out.append(
            f'<text x="{to_x(tick):.1f}" y="{top + plot_height + 14}" text-anchor="middle">{_number(tick)}</text>'
        )
    for tick in y_ticks:
        out.append(
            f'<line x1="{left}" y1="{to_y(tick):.1f}" x2="{left + plot_width}" y2="{to_y(tick):.1f}" stroke="#eee"/>'
        )
        out.append(f'<text x="{left - TICK_GAP}" y="{to_y(tick) + 4:.1f}" text-anchor="end">{_number(tick)}</text>')
    out.append(f'<rect x="{left}" y="{top}" width="{plot_width}" height="{plot_height}" fill="none" stroke="#444"/>')
    out.append(
        f'<text x="{left + plot_width / 2:.1f}" y="{top + plot_height + 30}" text-anchor="middle">'
        f"{escape(panel.x_label)}</text>"
    )
    out.append(
        f'<text transform="translate({title_x},{top + plot_height / 2:.1f}) rotate(-90)" text-anchor="middle">'
        f"{escape(panel.y_label)}</text>"
    )
    if panel.diagonal:
        low, high = max(x_low, y_low), min(x_high, y_high)
        out.append(
            f'<line x1="{to_x(low):.1f}" y1="{to_y(low):.1f}" x2="{to_x(high):.1f}" y2="{to_y(high):.1f}" '
            'stroke="#999" stroke-dasharray="2,3"/>'
        )
    if panel.marker is not None and x_low <= panel.marker[0] <= x_high:
        x = to_x(panel.marker[0])
        out.append(
            f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + plot_height}" stroke="#555" '
            'stroke-dasharray="4,3"/>'
        )
        # The label on the side with more room, inside the plot.
        anchor, shift = ("end", -3) if x > left + plot_width / 2 else ("start", 3)
        out.append(
            f'<text x="{x + shift:.1f}" y="{top + 11}" text-anchor="{anchor}" fill="#555">'
            f"{escape(panel.marker[1])}</text>"
        )
    for i, series in enumerate(panel.series):
        colour = COLOURS[i % len(COLOURS)]
        kept = [
            (x, y, label)
            for x, y, label in zip(series.xs, series.ys, series.labels or [""] * len(series.xs))
            if _finite(x) and _finite(y)
        ]
        path = " ".join(f"{to_x(x):.1f},{to_y(y):.1f}" for x, y, _ in kept)
        dash = ' stroke-dasharray="6,4"' if series.dashed else ""
        out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="1.6"{dash}/>')
        for x, y, label in kept:
            out.append(f'<circle cx="{to_x(x):.1f}" cy="{to_y(y):.1f}" r="2.5" fill="{colour}"/>')
            if label:
                out.append(
                    f'<text x="{to_x(x):.1f}" y="{to_y(y) - 5:.1f}" text-anchor="middle" font-size="9" '
                    f'fill="{colour}">{escape(label)}</text>'
                )
        # The legend, under the axis title: two entries a row.
        legend_x, legend_y = left + (i % 2) * plot_width / 2, top + plot_height + 44 + (i // 2) * 13
        out.append(
            f'<line x1="{legend_x:.1f}" y1="{legend_y - 4}" x2="{legend_x + 16:.1f}" y2="{legend_y - 4}" '
            f'stroke="{colour}" stroke-width="2"{dash}/>'
        )
        out.append(f'<text x="{legend_x + 20:.1f}" y="{legend_y}">{escape(series.name)}</text>')
    return out


def _data_range(values: List[float], from_zero: bool = False) -> Tuple[float, float]:
    """The values' range (from 0 where asked and all are positive), widened where it is a point."""
    if not values:
        return 0.0, 1.0
    low, high = min(values), max(values)
    if from_zero and low > 0:
        low = 0.0
    if high - low < 1e-12:
        return low - 0.5, high + 0.5
    return low, high


def text_width(text: str) -> float:
    """About how wide a tick label is drawn (digits, '.', '-' and 'e' at font size 11)."""
    return sum(DIGIT_WIDTH * (0.5 if char == "." else 1.0) for char in text)


def _finite(value: float) -> bool:
    return value is not None and math.isfinite(value)


def _number(value: float) -> str:
    return f"{value:g}"
