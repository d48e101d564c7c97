"""``anycloud cost``: what the pools' VMs cost over their recorded lifetimes; ``--daily``: the
same cost per UTC day over the last N days."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from automation.cli.backend import backend_from
from automation.cli.output import handle_errors, info, json_option, print_json, print_table

if TYPE_CHECKING:
    from automation.models import DailyCost

MAX_DAYS = 90  # as services.cost_report.MAX_DAYS (not imported: remote mode stays light)


@click.command("cost")
@click.option("--by", "by", type=click.Choice(["pool", "cluster", "provider"]), default="pool",
              show_default=True, help="Sum per node pool, per cluster or per cloud.")
@click.option("--since", help="Only time from this date or ISO time on (UTC unless zoned).")
@click.option("--daily", is_flag=True,
              help="Cost per UTC day instead: one row per day (oldest first, today until now) "
                   "with the day's total and the pool that cost most that day; --json gives "
                   "every pool's cost on every day.")
@click.option("--days", type=click.IntRange(1, MAX_DAYS), default=30, show_default=True,
              help="With --daily: how many days, today last.")
@json_option
@handle_errors
@click.pass_context
def cost(ctx: click.Context, by: str, since: str | None, daily: bool, days: int,
         as_json: bool) -> None:
    """VM hours and their cost at list price, from each VM's start to its release (or now)."""
    if daily:
        _daily(ctx, days, since, as_json)
        return
    report = backend_from(ctx).cost_report(by, since)
    if as_json:
        print_json(report)
        return
    print_table(f"Cost by {by}", [by.upper(), "VM HOURS", "USD", "UNPRICED VM HOURS",
                                  "MOCK VM HOURS", "PRICES"],
                [(line.group, f"{line.vm_hours:.2f}", f"{line.usd:.2f}",
                  f"{line.unpriced_vm_hours:.2f}", f"{line.simulated_vm_hours:.2f}",
                  ", ".join(line.sources) or "-") for line in report.lines])
    info(f"total: ${report.total_usd:.2f} over {report.total_vm_hours:.2f} VM hours at list "
         f"price" + (f" (+{report.unpriced_vm_hours:.2f} VM hours with no price)"
                     if report.unpriced_vm_hours else ""))
    if report.simulated_vm_hours:
        info(f"{report.simulated_vm_hours:.2f} VM hours ran on a simulated cloud (the mock "
             "engine, or the stand-in cloud): nothing was bought, so they are not counted")
    for hint in sorted({h for line in report.lines for h in line.hints}):
        info(f"price unknown: {hint}")


def _daily(ctx: click.Context, days: int, since: str | None, as_json: bool) -> None:
    if since is not None:  # a window of its own would contradict --days
        from automation.errors import InvalidInput

        raise InvalidInput("--since", since, "does not go with --daily (it takes --days)")
    daily = backend_from(ctx).cost_daily(days)
    if as_json:
        print_json(daily)
        return
    print_table(f"Cost per day, last {days} days (UTC)", ["DAY", "USD", "TOP POOL", "ITS USD"],
                [(day.isoformat(), f"{usd:.2f}", *_top_pool(daily, i))
                 for i, (day, usd) in enumerate(zip(daily.days, daily.per_day, strict=True))])
    info(f"total: ${daily.total_usd:.2f} over {len(daily.pools)} pools at list price"
         + (f" (+{daily.unpriced_vm_hours:.2f} VM hours with no price)"
            if daily.unpriced_vm_hours else ""))
    if daily.simulated_vm_hours:
        info(f"{daily.simulated_vm_hours:.2f} VM hours ran on a simulated cloud (the mock "
             "engine, or the stand-in cloud): nothing was bought, so they are not counted")
    for hint in sorted({h for line in daily.pools for h in line.hints}):
        info(f"price unknown: {hint}")


def _top_pool(daily: DailyCost, day: int) -> tuple[str, str]:
    """The pool that cost most on that day, or dashes when none cost anything."""
    top = max(daily.pools, key=lambda p: p.per_day[day], default=None)
    if top is None or not top.per_day[day]:
        return "-", "-"
    return f"{top.cluster}/{top.pool}", f"{top.per_day[day]:.2f}"
