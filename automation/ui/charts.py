"""Charts the server draws as inline SVG (no script, no style attribute: the page's CSP has
``style-src 'self'``; classes are styled in ``static/app.css``, colours are ``fill``).

Pure functions of the service's models: what a chart shows is what the API gives."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import date
from math import floor, log10
from xml.sax.saxutils import escape, quoteattr

from automation.models import AgentPoolSummary, DailyCost

TOP_POOLS = 8
# Tableau 10's first eight: told apart by most colour-blind readers; the legend and the table
# carry the names, so colour is never the only signal.
PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
           "#ff9da7")
OTHERS_COLOUR = "#9c9c9c"

# The drawing's own units; the SVG scales to its container (viewBox, width 100%).
_WIDTH, _HEIGHT = 720, 260
_LEFT, _RIGHT, _TOP, _BOTTOM = 60, 8, 12, 28
_TICKS = 4
_DAY_LABELS = 6  # at most, so they never overlap at phone width


@dataclass(frozen=True)
class Band:
    """One colour of the stacked bars: a pool, or the pools past the top eight together."""

    label: str
    colour: str
    per_day: list[float]
    total: float


def bands(daily: DailyCost, top: int = TOP_POOLS) -> list[Band]:
    """The ``top`` costliest pools (the service orders them) and one "others" band."""
    costly = [p for p in daily.pools if p.total > 0]
    out = [Band(f"{p.cluster}/{p.pool}", PALETTE[i % len(PALETTE)], p.per_day, p.total)
           for i, p in enumerate(costly[:top])]
    rest = costly[top:]
    if rest:
        out.append(Band(f"others ({len(rest)} pools)", OTHERS_COLOUR,
                        [round(sum(day), 6) for day in zip(*(p.per_day for p in rest),
                                                           strict=True)],
                        round(sum(p.total for p in rest), 6)))
    return out


def cost_per_day_svg(daily: DailyCost) -> str:
    """Stacked bars of cost per day and pool, with a dollar scale and day labels; a sentence
    instead when nothing cost anything in the window. Markup: every name in it is escaped."""
    drawn = bands(daily)
    if not drawn:
        return f'<p class="no-cost">No cost in the last {len(daily.days)} days.</p>'
    ceiling = _nice_ceiling(max(daily.per_day))
    parts = [
        f'<svg class="chart" role="img" aria-labelledby="cost-chart-title cost-chart-desc" '
        f'viewBox="0 0 {_WIDTH} {_HEIGHT}" width="100%" '
        f'xmlns="http://www.w3.org/2000/svg">',
        f'<title id="cost-chart-title">Cost per day by pool, last {len(daily.days)} days'
        f'</title>',
        f'<desc id="cost-chart-desc">{escape(_summary(daily, drawn))}</desc>',
        *_scale(ceiling), *_day_labels(daily.days), *_bars(daily.days, drawn, ceiling),
        "</svg>",
    ]
    return "\n".join(parts)


def _summary(daily: DailyCost, drawn: list[Band]) -> str:
    """The chart in words, for screen readers (``<desc>``)."""
    busiest = max(range(len(daily.days)), key=lambda i: daily.per_day[i])
    return (f"${daily.total_usd:,.2f} in all from {daily.days[0]} to {daily.days[-1]}; "
            f"costliest day {daily.days[busiest]} at ${daily.per_day[busiest]:,.2f}; "
            f"costliest pool {drawn[0].label} at ${drawn[0].total:,.2f}.")


def _nice_ceiling(value: float) -> float:
    """The scale's top, at or above ``value``: ``_TICKS`` steps of 1, 2, 3, 4, 5, 6 or 8
    times a power of ten, so every label is a round amount ($0.06, $0.12, … not $0.0625)
    and the top is never far above the tallest bar."""
    if value <= 0:
        return 1.0
    wanted = value / _TICKS
    magnitude = 10.0 ** floor(log10(wanted))
    step = next(s * magnitude for s in (1, 2, 3, 4, 5, 6, 8, 10)
                if wanted <= s * magnitude * 1.0000001)
    return step * _TICKS


def _plot_height() -> int:
    return _HEIGHT - _TOP - _BOTTOM


def _y(amount: float, ceiling: float) -> float:
    return _TOP + _plot_height() * (1 - amount / ceiling)


def _dollars(amount: float, ceiling: float) -> str:
    """As many decimals as the scale's step needs (cents; tenths of a cent below $0.04)."""
    if ceiling >= 10:
        return f"${amount:,.0f}"
    return f"${amount:,.2f}" if ceiling >= 0.04 else f"${amount:,.3f}"


def _scale(ceiling: float) -> list[str]:
    """Grid lines and dollar labels at even steps from zero to the ceiling."""
    out = ['<g class="axis y-axis">']
    for tick in range(_TICKS + 1):
        amount = ceiling * tick / _TICKS
        y = round(_y(amount, ceiling), 1)
        out.append(f'<line class="grid" x1="{_LEFT}" x2="{_WIDTH - _RIGHT}" y1="{y}" '
                   f'y2="{y}"/>')
        out.append(f'<text x="{_LEFT - 6}" y="{y + 4}" text-anchor="end">'
                   f'{_dollars(amount, ceiling)}</text>')
    out.append("</g>")
    return out


def _slot() -> float:
    return float(_WIDTH - _LEFT - _RIGHT)


def _day_x(index: int, days: int) -> float:
    return _LEFT + _slot() * index / days


def _day_labels(days: list[date]) -> list[str]:
    """Every few days' date under its bar (the newest always), few enough not to overlap."""
    step = max(1, -(-len(days) // _DAY_LABELS))
    shown = {i for i in range(len(days) - 1, -1, -step)}
    width = _slot() / len(days)
    out = ['<g class="axis x-axis">']
    for i in sorted(shown):
        x = round(_day_x(i, len(days)) + width / 2, 1)
        out.append(f'<text x="{x}" y="{_HEIGHT - 8}" text-anchor="middle">'
                   f'{days[i]:%b} {days[i].day}</text>')
    out.append("</g>")
    return out


def _bars(days: list[date], drawn: list[Band], ceiling: float) -> list[str]:
    """One rect per day and band that cost something, stacked from the costliest pool up;
    each has a tooltip (``<title>``) naming its day, pool and amount."""
    width = _slot() / len(days)
    out = ['<g class="bars">']
    for i, day in enumerate(days):
        below = 0.0
        for band in drawn:
            amount = band.per_day[i]
            if amount <= 0:
                continue
            top, bottom = _y(below + amount, ceiling), _y(below, ceiling)
            out.append(
                f'<rect class="bar" x="{round(_day_x(i, len(days)) + width * 0.1, 2)}" '
                f'y="{round(top, 2)}" width="{round(width * 0.8, 2)}" '
                f'height="{round(max(bottom - top, 0.5), 2)}" fill={quoteattr(band.colour)}>'
                f'<title>{day.isoformat()}: {escape(band.label)} ${amount:,.2f}</title></rect>')
            below += amount
    out.append("</g>")
    return out


# The busy-slot sparkline of an AgentPool (its own small drawing units, scaled like the rest).
_SPARK_WIDTH, _SPARK_HEIGHT, _SPARK_TOP = 240, 48, 4


def slots_text(value: float) -> str:
    """A slot count as people read it: 3, 2.5, 0.17."""
    return f"{round(value, 2):g}"


def busy_slots_svg(pool: AgentPoolSummary) -> str:
    """An AgentPool's busy slots over the last hour as a bar a minute, scaled from zero to the
    larger of its peak and its ready slots (so a busy pool looks full). Named and described
    for screen readers; the page says the same numbers in text beside it."""
    per_minute = pool.busy_slots_per_minute
    peak = max(per_minute, default=0.0)
    ceiling = max(peak, float(pool.slots), 1.0)
    key = "busy-" + hashlib.sha256(pool.pool.encode()).hexdigest()[:12]
    plot = _SPARK_HEIGHT - _SPARK_TOP
    width = _SPARK_WIDTH / max(len(per_minute), 1)
    parts = [
        f'<svg class="spark" role="img" aria-labelledby="{key}-title {key}-desc" '
        f'viewBox="0 0 {_SPARK_WIDTH} {_SPARK_HEIGHT}" width="100%" '
        f'xmlns="http://www.w3.org/2000/svg">',
        f'<title id="{key}-title">Busy slots of {escape(pool.pool)}, last '
        f'{len(per_minute)} minutes</title>',
        f'<desc id="{key}-desc">{escape(_busy_summary(pool))}</desc>',
        f'<line class="grid" x1="0" x2="{_SPARK_WIDTH}" y1="{_SPARK_TOP}" y2="{_SPARK_TOP}"/>',
        f'<line class="baseline" x1="0" x2="{_SPARK_WIDTH}" y1="{_SPARK_HEIGHT}" '
        f'y2="{_SPARK_HEIGHT}"/>',
        '<g class="bars">',
    ]
    for i, busy in enumerate(per_minute):
        if busy <= 0:
            continue
        height = max(plot * busy / ceiling, 0.5)
        parts.append(f'<rect class="busy" x="{round(i * width, 2)}" '
                     f'y="{round(_SPARK_HEIGHT - height, 2)}" width="{round(width * 0.9, 2)}" '
                     f'height="{round(height, 2)}"/>')
    parts += ["</g>", "</svg>"]
    return "\n".join(parts)


def _busy_summary(pool: AgentPoolSummary) -> str:
    per_minute = pool.busy_slots_per_minute
    if not any(per_minute):
        return f"No slot busy in the last {len(per_minute)} minutes; {pool.busy_slots} now."
    peak = max(per_minute)
    return (f"Peak {slots_text(peak)} busy slots (a minute's mean) "
            f"{len(per_minute) - per_minute.index(peak)} minutes ago; "
            f"{slots_text(sum(per_minute))} slot-minutes in all; {pool.busy_slots} busy now "
            f"of {pool.slots} ready.")
