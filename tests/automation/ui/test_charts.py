"""The cost-per-day chart: well-formed SVG, one bar per day and pool that cost something,
the top eight pools and "others", every name escaped, a sentence when nothing cost."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import UTC, date, datetime, timedelta

from automation.models import DailyCost, PoolDailyCost
from automation.ui.charts import OTHERS_COLOUR, bands, cost_per_day_svg

SVG = "{http://www.w3.org/2000/svg}"
FIRST = date(2026, 11, 1)


def _daily(per_pool: dict[str, list[float]]) -> DailyCost:
    days = len(next(iter(per_pool.values()))) if per_pool else 30
    pools = [PoolDailyCost(pool_id=f"p{i}", pool=name, cluster="prod", per_day=per_day,
                           total=round(sum(per_day), 6), unpriced_vm_hours=0, sources=[],
                           hints=[])
             for i, (name, per_day) in enumerate(per_pool.items())]
    pools.sort(key=lambda p: -p.total)
    per_day = [round(sum(p.per_day[i] for p in pools), 6) for i in range(days)]
    return DailyCost(days=[FIRST + timedelta(days=i) for i in range(days)],
                     since=datetime(2026, 11, 1, tzinfo=UTC),
                     until=datetime(2026, 11, 1, tzinfo=UTC) + timedelta(days=days),
                     pools=pools, per_day=per_day, total_usd=round(sum(per_day), 6),
                     unpriced_vm_hours=0, simulated_vm_hours=0)


def _bars(svg: str) -> list[ET.Element]:
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg" and root.get("role") == "img"
    return [r for r in root.iter(f"{SVG}rect") if r.get("class") == "bar"]


def test_one_bar_per_day_and_pool_with_a_tooltip() -> None:
    svg = cost_per_day_svg(_daily({"cpu": [1.0, 0.0, 2.5], "gpu": [4.0, 0.5, 0.0]}))
    bars = _bars(svg)
    assert len(bars) == 4  # the zero days draw nothing
    tips = [b.find(f"{SVG}title").text for b in bars]  # type: ignore[union-attr]
    assert "2026-11-01: prod/gpu $4.00" in tips and "2026-11-03: prod/cpu $2.50" in tips
    root = ET.fromstring(svg)
    assert root.find(f"{SVG}title").text == "Cost per day by pool, last 3 days"  # type: ignore[union-attr]
    desc = root.find(f"{SVG}desc").text  # type: ignore[union-attr]
    assert desc is not None and "$8.00 in all" in desc and "costliest pool prod/gpu" in desc
    assert 'style=' not in svg and "<script" not in svg and 'viewBox="0 0 720 260"' in svg


def test_stacked_bars_are_as_tall_as_their_share_of_the_scale() -> None:
    bars = _bars(cost_per_day_svg(_daily({"a": [3.0], "b": [1.0]})))  # scale tops at $4
    heights = sorted(float(b.get("height", "0")) for b in bars)
    assert heights[1] / heights[0] == 3.0
    texts = [t.text for t in ET.fromstring(cost_per_day_svg(_daily({"a": [3.0]}))).iter(
        f"{SVG}text")]
    # Four round steps to just above the tallest bar: $3 a day, steps of $0.80.
    assert texts[:5] == ["$0.00", "$0.80", "$1.60", "$2.40", "$3.20"] and "Nov 1" in texts


def test_the_top_eight_pools_have_colours_and_the_rest_are_others() -> None:
    daily = _daily({f"pool-{i:02d}": [float(20 - i), 1.0] for i in range(11)})
    drawn = bands(daily)
    assert [b.label for b in drawn[:8]] == [f"prod/pool-{i:02d}" for i in range(8)]
    assert len({b.colour for b in drawn[:8]}) == 8
    assert drawn[8].label == "others (3 pools)" and drawn[8].colour == OTHERS_COLOUR
    assert drawn[8].per_day == [12 + 11 + 10, 3.0]
    assert len(_bars(cost_per_day_svg(daily))) == 9 * 2


def test_pool_names_are_escaped() -> None:
    svg = cost_per_day_svg(_daily({"<script>alert(1)</script>": [1.0]}))
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    (bar,) = _bars(svg)  # still well-formed XML
    assert "<script>alert(1)</script>" in bar.find(f"{SVG}title").text  # type: ignore[union-attr, operator]


def test_no_cost_is_said_in_words_not_drawn_empty() -> None:
    for daily in (_daily({}), _daily({"idle": [0.0] * 30})):
        shown = cost_per_day_svg(daily)
        assert "<svg" not in shown and "No cost in the last 30 days." in shown


def test_day_labels_are_few_enough_not_to_overlap() -> None:
    daily = _daily({"cpu": [1.0] * 30})
    labels = [t.text for t in ET.fromstring(cost_per_day_svg(daily)).iter(f"{SVG}text")
              if t.text and t.text.startswith(("Nov", "Dec"))]
    assert 3 <= len(labels) <= 6 and labels[-1] == "Nov 30"  # the newest day is labelled
