"""``node-pool plan|preview|unlock|adopt``, ``preview --all`` and ``policy check``."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import click

from automation.cli.output import engine_option, handle_errors, info, json_option, print_json

if TYPE_CHECKING:
    from automation.models import Plan, PolicyReport, RunResult

EXIT_CHANGES = 2
EXIT_POLICY = 3
_SHOWN = ("ingress", "egress", "securityRules", "allows", "denies", "sourceRanges", "direction",
          "cidrBlock", "ipCidrRange", "addressPrefix", "tags", "labels", "metadataOptions",
          "instanceType", "machineType", "hardwareProfile", "ami", "userData", "customData",
          "metadata", "spec", "values", "version", "handler", "type", "stringData")


def _brief(value: Any) -> str:
    text = json.dumps(value, default=str, sort_keys=True)
    return text if len(text) <= 160 else text[:157] + "..."


def _print_plan(plan: Plan) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.tree import Tree

    root = Tree(f"[bold]{plan.stack}[/] (mock engine: no Pulumi CLI, no cloud)")
    branches: dict[str | None, Any] = {None: root}
    for r in sorted(plan.resources, key=lambda r: r.urn.count("$")):
        parent = branches.get(r.parent, root)
        node = parent.add(f"[bold]{escape(r.name)}[/]  {escape(r.type)}")
        for key in _SHOWN:
            if key in r.inputs and r.inputs[key] not in (None, [], {}):
                node.add(escape(f"{key}: {_brief(r.inputs[key])}"))
        branches[r.urn] = node
    console = Console()
    (console if console.is_terminal else Console(width=4096)).print(root)


@click.command()
@click.argument("ref")
@json_option
@handle_errors
@click.pass_context
def plan(ctx: click.Context, ref: str, as_json: bool) -> None:
    """Evaluate the pool's stack under the mock engine and print its resource tree."""
    from automation.cli.backend import backend_from
    from automation.cli.views import describe_cost

    result = backend_from(ctx).plan_pool(ref)
    for warning in result.warnings:
        info(f"warning: {warning}")
    if as_json:
        print_json(result)
    else:
        _print_plan(result)
        info(f"{len(result.resources)} resources (evaluated by the mock engine)")
        info(f"cost: {describe_cost(result.cost)}")


def _report(results: list[RunResult], as_json: bool, diff: bool, detailed: bool) -> None:
    from automation.cli.views import describe_cost

    if as_json:
        print_json(results)
    for r in results:
        if not as_json:
            s = r.summary
            click.echo(f"{r.stack} [{r.engine} engine]: {s.create} to create, {s.update} to "
                       f"update, {s.replace} to replace, {s.delete} to delete, {s.same} same")
            cost = getattr(r, "cost", None)  # node-pool stacks only
            if cost is not None:
                click.echo(f"  cost once applied: {describe_cost(cost)}")
            if diff and r.diff:
                click.echo(r.diff)
            for f in r.policy:
                click.echo(f"  policy {f.enforcement}: {f.policy}: {f.message}")
    if any(r.mandatory_violations for r in results):
        sys.exit(EXIT_POLICY)
    if detailed and any(r.summary.changes for r in results):
        sys.exit(EXIT_CHANGES)


def _preview(ctx: click.Context, refs: list[str] | None, diff: bool, as_json: bool,
             detailed: bool, engine: str | None, *, addons: bool = False) -> None:
    """Preview each ref's stack (None: every live pool): node pools, or with ``addons``
    clusters' add-on stacks."""
    from automation.cli.backend import backend_from
    from automation.engine.events import json_lines_sink, progress_sink

    def progress(ref: str) -> Any:
        # --json: stdout carries the results document; progress goes to stderr as JSON lines.
        return ((json_lines_sink(sys.stderr), None) if as_json
                else progress_sink(False, f"preview {ref}"))

    _report(backend_from(ctx).preview(refs, addons=addons, diff=diff, engine=engine,
                                      progress=progress), as_json, diff, detailed)


_engine = engine_option
_detailed = click.option("--detailed-exitcode", "detailed", is_flag=True,
                         help="Exit 2 when there are changes (0 none, 1 error, 3 policy).")


@click.command()
@click.argument("ref")
@click.option("--diff", is_flag=True, help="Show the detailed diff.")
@_detailed
@_engine
@json_option
@handle_errors
@click.pass_context
def preview(ctx: click.Context, ref: str, diff: bool, detailed: bool, engine: str | None,
            as_json: bool) -> None:
    """Preview the pool's stack: change summary, diff and policy results."""
    _preview(ctx, [ref], diff, as_json, detailed, engine)


@click.command("preview")
@click.option("--all", "all_", is_flag=True, required=True, help="Every live node pool.")
@click.option("--diff", is_flag=True, help="Show the detailed diffs.")
@_detailed
@_engine
@json_option
@handle_errors
@click.pass_context
def preview_all(ctx: click.Context, all_: bool, diff: bool, detailed: bool, engine: str | None,
                as_json: bool) -> None:
    """Preview every node-pool stack (for CI)."""
    _preview(ctx, None, diff, as_json, detailed, engine)


@click.command("preview")
@click.argument("ref")
@click.option("--diff", is_flag=True, help="Show the detailed diff.")
@_detailed
@_engine
@json_option
@handle_errors
@click.pass_context
def preview_addons(ctx: click.Context, ref: str, diff: bool, detailed: bool,
                   engine: str | None, as_json: bool) -> None:
    """Preview the cluster's NVIDIA add-on stack as the reconciler would apply it."""
    _preview(ctx, [ref], diff, as_json, detailed, engine, addons=True)


def _say_unlocked(stack: str, unlocked: bool, engine: str) -> None:
    info(f"stack {stack} unlocked" if unlocked else
         f"stack {stack}: the {engine} engine keeps no lock; nothing to unlock")


@click.command()
@click.argument("ref")
@_engine
@json_option
@handle_errors
@click.pass_context
def unlock(ctx: click.Context, ref: str, engine: str | None, as_json: bool) -> None:
    """Clear a lock left on the pool's stacks (its own and, for a pool that hosts a Service,
    its ingress release) by a killed run (pulumi cancel)."""
    from automation.cli.backend import backend_from

    done = backend_from(ctx).unlock_pool(ref, engine)
    if as_json:
        print_json(done)
        return
    _say_unlocked(done.stack, done.unlocked, done.engine)
    if done.ingress_release is not None:
        _say_unlocked(done.ingress_release.stack, done.ingress_release.unlocked, done.engine)


@click.command()
@click.argument("ref")
@_engine
@click.option("--simulate", is_flag=True,
              help="Adopt from the simulated cloud kept in $ANYCLOUD_HOME/sim (mock engine; with "
                   "--engine pulumi the real one, through the stand-in cloud plugins).")
@json_option
@handle_errors
@click.pass_context
def adopt(ctx: click.Context, ref: str, engine: str | None, simulate: bool,
          as_json: bool) -> None:
    """Rebuild the pool's lost engine state (STATE_MISSING) from what the cloud holds: its
    VMs by their attempt tag, the rest by identity. Buys nothing."""
    from automation.cli.backend import backend_from

    result = backend_from(ctx).adopt_pool(ref, engine, simulate)
    if as_json:
        print_json(result)
        return
    source = "the cloud"
    if simulate:
        source = ("the simulated cloud, through the stand-in cloud plugins"
                  if result.engine == "pulumi" else "the simulated cloud")
    info(f"stack {result.stack} [{result.engine} engine]: {result.summary.same} resource(s) "
         f"adopted from {source}, {result.summary.create} not found (the next pass creates "
         "them); nothing was bought")


@click.command("unlock")
@click.argument("ref")
@_engine
@json_option
@handle_errors
@click.pass_context
def unlock_addons(ctx: click.Context, ref: str, engine: str | None, as_json: bool) -> None:
    """Clear a lock left on the cluster's add-on stack by a killed run (pulumi cancel)."""
    from automation.cli.backend import backend_from

    done = backend_from(ctx).unlock_addons(ref, engine)
    if as_json:
        print_json(done)
        return
    _say_unlocked(done.stack, done.unlocked, done.engine)


def _print_policy(reports: list[PolicyReport]) -> None:
    for rep in reports:
        status = "FAIL" if rep.mandatory else "pass"
        click.echo(f"{rep.stack} [mock engine]: {status} "
                   f"({len(rep.mandatory)} mandatory, "
                   f"{len(rep.findings) - len(rep.mandatory)} advisory)")
        for f in rep.findings:
            click.echo(f"  {f.enforcement}: {f.policy}: {f.message}"
                       + (f"\n    at {f.urn}" if f.urn else ""))


@click.group()
def policy() -> None:
    """Policy-as-code checks."""


@policy.command()
@click.argument("ref", required=False)
@click.option("--all", "all_", is_flag=True,
              help="Every live node pool, and the add-on stack of clusters with GPU pools.")
@json_option
@handle_errors
@click.pass_context
def check(ctx: click.Context, ref: str | None, all_: bool, as_json: bool) -> None:
    """Run the policy pack offline over the pool's stack (exit 3 on a mandatory violation)."""
    from automation.errors import InvalidInput

    if bool(ref) == all_:
        raise InvalidInput("node_pool", ref, "give one node pool or --all, not both or neither")
    from automation.cli.backend import backend_from

    backend = backend_from(ctx)
    reports = backend.check_all_policy() if all_ else [backend.check_pool_policy(ref or "")]
    if as_json:
        print_json(reports)
    else:
        _print_policy(reports)
    if any(r.mandatory for r in reports):
        sys.exit(EXIT_POLICY)
