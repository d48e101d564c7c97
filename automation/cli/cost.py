"""``anycloud cost``: what the pools' VMs cost over their recorded lifetimes."""

from __future__ import annotations

import click

from automation.cli.backend import backend_from
from automation.cli.output import handle_errors, info, json_option, print_json, print_table


@click.command("cost")
@click.option("--by", "by", type=click.Choice(["pool", "cluster", "provider"]), default="pool",
              show_default=True, help="Sum per node pool, per cluster or per cloud.")
@click.option("--since", help="Only time from this date or ISO time on (UTC unless zoned).")
@json_option
@handle_errors
@click.pass_context
def cost(ctx: click.Context, by: str, since: str | None, as_json: bool) -> None:
    """VM hours and their cost at list price, from each VM's start to its release (or now)."""
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
        info(f"{report.simulated_vm_hours:.2f} VM hours ran under the mock engine: nothing was "
             "bought, so they are not counted")
    for hint in sorted({h for line in report.lines for h in line.hints}):
        info(f"price unknown: {hint}")
