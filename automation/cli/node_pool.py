"""``anycloud node-pool …``"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from automation.cli.lazy import LazyGroup
from automation.cli.output import (
    engine_option,
    handle_errors,
    info,
    json_option,
    print_fields,
    print_json,
    print_table,
)
from automation.cli.views import describe_cost, plain, when

if TYPE_CHECKING:
    Json = dict[str, Any]  # a command's JSON: the server's as it came, or a model dumped


@click.group("node-pool", cls=LazyGroup, lazy_subcommands={
    "plan": "automation.cli.rollout:plan",
    "preview": "automation.cli.rollout:preview",
    "unlock": "automation.cli.rollout:unlock",
    "adopt": "automation.cli.rollout:adopt",
})
def node_pool() -> None:
    """Cloud VM pools joined to the cluster."""


@node_pool.command()
@click.argument("name")
@click.option("--cluster", help="Cluster id or name (default: the only registered one).")
@click.option("--credentials", required=True, help="Credential name or id; fixes the cloud.")
@click.option("--region", required=True)
@click.option("--zone", help="AWS/GCP: a zone of --region (us-east-1a); Azure: a digit.")
@click.option("--vm-type", required=True, help="A catalog VM type (x86_64).")
@click.option("--min-vms", required=True, type=int)
@click.option("--max-vms", required=True, type=int, help="Must equal --min-vms.")
@json_option
@handle_errors
@click.pass_context
def create(ctx: click.Context, name: str, cluster: str | None, credentials: str, region: str,
           zone: str | None, vm_type: str, min_vms: int, max_vms: int, as_json: bool) -> None:
    """Store the intent for a new node pool; the reconciler provisions it."""
    from automation.cli.backend import backend_from
    from automation.cli.views import describe_cost
    from automation.models import NewNodePool

    work = backend_from(ctx)
    made = work.create_node_pool(NewNodePool(
        name=name, cluster=cluster, credentials=credentials, region=region, zone=zone,
        vm_type=vm_type, min_vms=min_vms, max_vms=max_vms))
    for warning in made.warnings:
        info(f"warning: {warning}")
    if made.zone_chosen:
        info(f"zone {made.zone} chosen: the first zone of {made.region} that offers "
             f"{made.vm_type} (pass --zone to pick another)")
    info(f"estimated cost: {describe_cost(made.cost)}")
    if as_json:
        print_json(made)
    else:
        info(f"node pool {made.name} ({made.id}) created; the reconciler provisions it")
        _show(work.node_pool_status(made.id, ingress=False))


@node_pool.command("list")
@click.option("--cluster", help="Only this cluster's pools.")
@json_option
@handle_errors
@click.pass_context
def list_(ctx: click.Context, cluster: str | None, as_json: bool) -> None:
    """List node pools."""
    from automation.cli.backend import backend_from

    items = backend_from(ctx).list_node_pools(cluster)
    if as_json:
        print_json(items)
        return
    print_table("Node pools", ["ID", "NAME", "CLUSTER", "CLOUD", "REGION", "VM TYPE", "VMS",
                               "STATE", "READY", "USD/HOUR"],
                [(p["id"], p["name"], p["cluster"], p["provider"], p["zone"] or p["region"],
                  p["vmType"], p["vms"], p["state"], f"{p['counts']['ready']}/{p['vms']}",
                  _hourly(p)) for p in map(plain, items)])


def _hourly(p: Json) -> str:
    """The running cost column: billed VMs x list price; ``?`` when the price is unknown;
    ``simulated`` for a pool the mock engine, or the real one over the stand-in cloud, runs
    (nothing bought)."""
    from automation.recorded_engines import SIMULATED_ENGINES

    if p.get("engine") in SIMULATED_ENGINES:
        return "simulated"
    cost = p.get("cost")
    if cost is None or cost.get("hourlyUsd") is None:
        return "?"
    return f"{cost['hourlyUsd']:.4f}"


def _show(pool: Any) -> None:
    """``node-pool status``'s text, from the pool's JSON (the server's) or its model."""
    from automation.recorded_engines import SIMULATED_ENGINES, engine_label

    p: Json = plain(pool)
    counts, error_code, engine = p["counts"], p.get("lastErrorCode"), p.get("engine")
    print_fields(f"Node pool {p['name']}", [
        ("ID", p["id"]), ("Cluster", p["cluster"]), ("Credentials", p["credentials"]),
        ("Cloud", p["provider"]), ("Region", p["region"]), ("Zone", p.get("zone")),
        ("VM type", p["vmType"]), ("VMs", p["vms"]), ("State", p["state"]),
        ("VMs ready / starting / draining",
         f"{counts['ready']} / {counts['starting']} / {counts['draining']}"),
        ("Last error", f"[{error_code}] {p.get('lastError')}" if error_code
         else p.get("lastError")),
        ("Engine", engine_label(engine) or None),
        ("Running cost", _SIMULATED_COST[engine] if engine in SIMULATED_ENGINES
         else _running_cost(p)),
    ])
    if p.get("held") is not None:
        click.echo(f"Held: {p['held']['reason']} — {p['held']['evidence']}")
    # Plain lines, not table cells: greppable and never wrapped. The seed's ingress lines
    # stay the last two.
    for line in drift_lines(p.get("drift")):
        click.echo(line)
    if p["hostsService"]:
        for line in _ingress_lines(p):
            click.echo(line)


def drift_lines(drift: Json | None) -> list[str]:
    """``Drift: none (checked …)``, ``Drift: 2 changes (checked …)`` and a line per change
    (its op, type, name and property names), ``Drift: STATE_MISSING (…)`` for a lost state,
    ``Drift: check failed (…)``; or ``Drift: not checked yet``. A check by the mock engine
    (or the real one over the stand-in plugins) says it read the simulated cloud."""
    if drift is None:
        return ["Drift: not checked yet (node-pool status --check-drift)"]
    at = when(drift["checkedAt"], "%Y-%m-%d %H:%M:%S UTC")
    seconds = f", {drift['seconds']:.1f} s" if drift.get("seconds") is not None else ""
    engine = "pulumi" if drift["engine"] == "standin" else drift["engine"]
    where = "" if drift["source"] == "cloud" else f", {drift['source']}: {engine} engine"
    checked = f"(checked {at}{seconds}{where})"
    error, code = drift.get("error"), drift.get("errorCode")
    if code == "STATE_MISSING":
        # Not a failed check: its answer. Nothing can be compared with a lost state.
        return [f"Drift: STATE_MISSING {checked}: {error}"]
    if error is not None:
        return [f"Drift: check failed {checked}: [{code}] {error}"]
    changes = drift.get("changes") or []
    if not changes:
        return [f"Drift: none {checked}"]
    lines = [f"Drift: {len(changes)} change{'s' if len(changes) != 1 else ''} {checked}"]
    for c in changes:
        what = {"update": "changed", "delete": "gone"}[c["op"]]
        props = f": {', '.join(c['properties'])}" if c.get("properties") else ""
        lines.append(f"  {what} {c['type']} {c['name']}{props}")
    return lines


_SIMULATED_COST = {"mock": "simulated: the mock engine bought nothing",
                   "standin": "simulated: the stand-in cloud bought nothing"}


def _running_cost(p: Json) -> str | None:
    return None if p.get("cost") is None else describe_cost(p["cost"])


def _ingress_lines(p: Json) -> list[str]:
    """The seed's two lines: ``Ingress entry: <IP> — release <state> (helm job <phase>[:
    <exit>])`` and ``Ingress Traefik: <ready>/<desired> ready, entry Node Ready|not Ready —
    last event: …``. Every value comes from the view's fields, which are already redacted."""
    entry = p.get("ingressEntryIp") or "not elected yet"
    release = (p.get("ingress") or {}).get("release")
    if release is None:  # not read from the cluster (right after create)
        return [f"Ingress entry: {entry}"]
    return [f"Ingress entry: {entry} — {_release_text(release)}",
            f"Ingress Traefik: {_traefik_text(release)}"]


def _release_text(release: Json) -> str:
    """``release <state>`` plus the helm job once the HelmChart exists."""
    state = release.get("state")
    if state is None:  # the cluster could not be read: lastEvent says why
        return "release state unknown"
    if state == "absent":
        return "release absent (no HelmChart on the cluster yet)"
    job = release.get("helmJob")
    if job is None:
        return f"release {state}"
    exit_ = f": {job['message']}" if job.get("message") else ""
    return f"release {state} (helm job {job['phase']}{exit_})"


def _traefik_text(release: Json) -> str:
    """The DaemonSet's readiness (or why there is none), then the newest event if any."""
    ds = release.get("daemonSet")
    if ds is not None:
        node = "Ready" if ds["entryNodeReady"] else "not Ready"
        text = f"{ds['ready']}/{ds['desired']} ready, entry Node {node}"
    elif release.get("state") is None:
        text = "unknown"
    else:
        text = "not created yet"
    if release.get("lastEvent"):
        text += f" — last event: {release['lastEvent']}"
    return text


@node_pool.command()
@click.argument("ref")
@click.option("--check-drift", is_flag=True,
              help="Check the pool's stack for drift now (a refresh previewed: nothing is "
                   "changed), record the result and show it.")
@engine_option
@click.option("--simulate", is_flag=True,
              help="With --check-drift: the simulated cloud kept in $ANYCLOUD_HOME/sim "
                   "(mock engine; with --engine pulumi the real one, its cloud calls answered "
                   "by stand-in plugins).")
@json_option
@handle_errors
@click.pass_context
def status(ctx: click.Context, ref: str, check_drift: bool, engine: str | None,
           simulate: bool, as_json: bool) -> None:
    """Lifecycle state, last error, VM counts, (Service pools) the ingress release, and
    the last drift check."""
    from automation.cli.backend import backend_from
    from automation.errors import InvalidInput

    work = backend_from(ctx)
    if check_drift:
        report = work.check_pool_drift(ref, engine, simulate)
        if not as_json:
            info(f"drift check of {ref} done in {plain(report).get('seconds') or 0:.1f} s")
    elif engine is not None or simulate:
        raise InvalidInput("--engine" if engine is not None else "--simulate",
                           engine if engine is not None else True,
                           "only with --check-drift")
    p = work.node_pool_status(ref)
    if as_json:
        print_json(p)
    else:
        _show(p)


@node_pool.command()
@click.argument("ref")
@click.option("--limit", type=int, default=50, show_default=True,
              help="The newest attempts and events to show (each; 1 to 500).")
@json_option
@handle_errors
@click.pass_context
def history(ctx: click.Context, ref: str, limit: int, as_json: bool) -> None:
    """The pool's VM attempts (created, joined, replaced, released, with reasons) and its
    last events, newest first."""
    from automation.cli.backend import backend_from

    h = backend_from(ctx).node_pool_history(ref, limit)
    if as_json:
        print_json(h)
    else:
        _show_history(h)


def _show_history(history: Any) -> None:
    h: Json = plain(history)
    name = h["pool"]["name"]
    print_table(f"VM attempts of {name} (UTC)",
                ["ATTEMPT", "STATE", "CREATED", "VM CREATED", "JOINED", "RELEASED",
                 "REPLACES", "REPLACED BY", "REASON"],
                [(a["id"], a["state"], when(a.get("createdAt")), when(a.get("vmCreatedAt")),
                  when(a.get("joinedAt")), when(a.get("releasedAt")), a.get("replaces") or "",
                  a.get("replacedBy") or "", a.get("reason") or "") for a in h["attempts"]])
    print_table(f"Last events of {name} (UTC)", ["TIME", "KIND", "MESSAGE"],
                [(when(e["at"]), e["kind"], e.get("message") or "") for e in h["events"]])


@node_pool.command()
@click.argument("ref")
@json_option
@handle_errors
@click.pass_context
def delete(ctx: click.Context, ref: str, as_json: bool) -> None:
    """Delete a node pool (refused while work targets it). Aliases: terminate, rm."""
    from automation.cli.backend import backend_from

    pool = backend_from(ctx).delete_node_pool(ref)
    if as_json:
        print_json(pool)
    else:
        info(f"node pool {pool.name} ({pool.id}) is {pool.state}; the reconciler releases its VMs")


node_pool.add_command(delete, "terminate")
node_pool.add_command(delete, "rm")
