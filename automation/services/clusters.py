"""Cluster records: register, refresh, list, delete, and a new kubeconfig for one.

A record is *ready* once its Kubernetes version and CA hash are known, read from the
cluster or given offline; until then it is *pending* and no node pool can be created on it.
A new kubeconfig (``cluster update --kubeconfig``) replaces the old only once it has reached
the same cluster: the same CA hash and the same kube-system namespace UID.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import sqlalchemy as sa
from pydantic import SecretStr
from sqlalchemy.engine import RowMapping

from automation import ids
from automation.app import App
from automation.errors import Conflict, InvalidInput
from automation.kube.probe import ClusterFacts, ClusterUnreachable, sha256_hex
from automation.ledger import schema
from automation.ledger.orgs import owning_org
from automation.ledger.records import Expectation, find_live, record_event
from automation.models import LIVE_POOL_STATES, Cluster, ClusterState
from automation.sealing import owner
from automation.services import sealed
from automation.validation import (
    KUBERNETES_RULE,
    MAX_KUBERNETES,
    MIN_KUBERNETES,
    check_kubernetes_version,
    check_name,
    parse_kubernetes_version,
)

_LIVE = schema.clusters.c.state != ClusterState.DELETED


@dataclass(frozen=True)
class RegisterCluster:
    name: str
    kubeconfig: Path | None = None  # embedded mode: the file, referenced
    context: str | None = None
    server_url: str | None = None  # the public address agents join; defaults to kubeconfig's
    kubernetes_version: str | None = None  # offline value
    ca_file: Path | None = None  # offline value
    offline: bool = False  # do not try to read the cluster
    # Through the API: the kubeconfig's contents, sealed under the server's key, and the
    # offline CA as PEM text.
    kubeconfig_text: SecretStr | None = None
    ca_pem: str | None = None
    # The caller says the VMs reach a private address (VPC peering, a VPN).
    allow_private_address: bool = False
    org: str | None = None  # the owning org (name or id); None: the default org


# Networks VMs in another cloud cannot reach, each with the rule's words for it.
# ipaddress's is_private is not used: it also holds the documentation ranges (203.0.113.0/24)
# the demo and the tests register as a stand-in public address.
_Network = ipaddress.IPv4Network | ipaddress.IPv6Network
_UNREACHABLE_NETWORKS: tuple[tuple[str, tuple[_Network, ...]], ...] = tuple(
    (kind, tuple(ipaddress.ip_network(n) for n in networks)) for kind, networks in (
        ("private (RFC 1918)", ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")),
        ("shared (CGNAT, RFC 6598)", ("100.64.0.0/10",)),
        ("IPv6 unique local (fc00::/7)", ("fc00::/7",)),
        ("IPv6 site-local (fec0::/10, deprecated)", ("fec0::/10",)),
    ))
# Host names are not resolved here: the DNS this process sees (a laptop's, a VPC's resolver)
# may differ from what VMs in another cloud see. Names under the suffixes reserved for private
# use resolve nowhere outside their own network (.internal is also what AWS and GCP name their
# VMs' internal addresses), so they are refused like a private address.
_PRIVATE_SUFFIXES = (".internal", ".local", ".localdomain")
_LOOPBACK_NAMES = ("localhost",)


def _address_kind(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """Which kind of unreachable address ``address`` is (None: a public one)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped  # ::ffff:10.0.0.5 is 10.0.0.5
    if address.is_unspecified:
        return "unspecified (0.0.0.0, ::)"
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link-local (169.254.0.0/16, fe80::/10)"
    for kind, networks in _UNREACHABLE_NETWORKS:
        if any(address in network for network in networks):
            return kind
    return None


def _host_kind(host: str) -> str | None:
    """Which kind of address VMs in another cloud could not reach ``host`` is, if any."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:  # a host name
        return _name_kind(host.lower().rstrip("."))
    return _address_kind(address)


def _name_kind(name: str) -> str | None:
    if name in _LOOPBACK_NAMES or name.endswith(".localhost"):
        return "loopback"
    if name.endswith(_PRIVATE_SUFFIXES):
        return "a private-use host name (" + ", ".join(_PRIVATE_SUFFIXES) + ")"
    return None


def check_server_url(field: str, url: str, *, allow_private: bool = False) -> str:
    """``url`` as the address agents join: https, and public unless ``allow_private`` (the
    caller says peering or a VPN makes it reachable from the VMs)."""
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.hostname:
        raise InvalidInput(field, url, "must be an https:// URL of the cluster's API server")
    kind = _host_kind(parts.hostname)
    if kind is not None and not allow_private:
        raise InvalidInput(
            field, url,
            f"must be a public address, not {kind}: VMs in another cloud could not join it; "
            "give the cluster's public address with --server-url, or pass "
            "--allow-private-address when VPC peering or a VPN makes it reachable from them",
        )
    return url


def _read_ca(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InvalidInput("--ca-file", str(path), f"must be a readable file ({exc.strerror})") \
            from exc
    return _ca_hash("--ca-file", str(path), data)


def _ca_hash(field: str, shown: str, data: bytes) -> str:
    if b"-----BEGIN CERTIFICATE-----" not in data:
        raise InvalidInput(field, shown, "must hold the cluster CA in PEM form")
    return sha256_hex(data)


@contextmanager
def _kubeconfig_file(path: Path | None, sent: SecretStr | None) -> Iterator[Path]:
    """The kubeconfig to read: the referenced file, or the sent one opened into a memory-only
    file for the length of the call (refused unless it carries everything inline: the server
    reads no client's files and runs no client's programs)."""
    if sent is None:
        if path is None:
            raise InvalidInput("--kubeconfig", None, "is required")
        kubeconfig = path.expanduser().resolve()
        if not kubeconfig.is_file():
            raise InvalidInput("--kubeconfig", str(path), "must be a readable file")
        yield kubeconfig
        return
    from automation import memfiles
    from automation.kube.kubeconfig import check_document, check_self_contained

    text = sent.get_secret_value()
    shown = f"(hidden, {len(text)} characters)"
    broken = check_document(text)
    if broken:
        raise InvalidInput("--kubeconfig", shown, "must be a kubeconfig document (clusters, "
                           "contexts and users: lists of named mappings): " + "; ".join(broken))
    problems = check_self_contained(text)
    if problems:
        raise InvalidInput("--kubeconfig", shown, "must carry its certificates and token "
                           "inline, with no exec plugin: " + "; ".join(problems))
    name = f"register-{ids.new_id('rg')}.kubeconfig"
    try:
        yield memfiles.write_private(name, text.encode())
    finally:
        memfiles.remove(name)


def _in_window(version: str | None) -> bool:
    if version is None:
        return False
    return MIN_KUBERNETES <= parse_kubernetes_version("version", version) <= MAX_KUBERNETES


def register_cluster(app: App, req: RegisterCluster) -> Cluster:
    check_name("name", req.name)
    if req.kubernetes_version is not None:
        check_kubernetes_version("--kubernetes-version", req.kubernetes_version)
    offline_ca = _read_ca(req.ca_file) if req.ca_file else None
    if req.ca_pem is not None:
        offline_ca = _ca_hash("caPem", f"({len(req.ca_pem)} characters)", req.ca_pem.encode())
    key = None if req.kubeconfig_text is None else sealed.require_key(
        app, f"cluster {req.name!r} (its kubeconfig)")
    with _kubeconfig_file(req.kubeconfig, req.kubeconfig_text) as kubeconfig:
        shown = str(req.kubeconfig) if req.kubeconfig_text is None else "(sent)"
        try:
            target = app.probe.target(kubeconfig, req.context)
        except ValueError as exc:
            raise InvalidInput("--kubeconfig", shown, str(exc).replace(str(kubeconfig), shown)
                               ) from exc
        field, url = (("--server-url", req.server_url) if req.server_url is not None
                      else ("--kubeconfig", target.server_url))
        server_url = check_server_url(field, url, allow_private=req.allow_private_address)

        version, uid, source, error = req.kubernetes_version, None, None, None
        ca = offline_ca or target.ca_sha256
        if not req.offline:
            try:
                facts = app.probe.read(kubeconfig, req.context)
            except ClusterUnreachable as exc:
                error = f"cluster not read: {exc}"
            else:
                check_kubernetes_version("cluster version", facts.kubernetes_version)
                version, uid, source = facts.kubernetes_version, facts.kube_system_uid, "cluster"
    if source is None and version is not None and ca is not None:
        source = "offline"
    state = ClusterState.READY if source and ca else ClusterState.PENDING
    if state is ClusterState.PENDING and error is None:
        error = "Kubernetes version or CA unknown: run `anycloud cluster refresh` once reachable"

    now = app.clock.now()
    cluster_id = ids.new_id("cl")
    row = dict(
        id=cluster_id, name=req.name, state=state, server_url=server_url, ca_sha256=ca,
        kubernetes_version=version, kube_system_uid=uid,
        kubeconfig_path=None if key else str(kubeconfig),
        kube_context=req.context, facts_source=source, last_error=error,
        created_at=now, updated_at=now,
    )
    with app.ledger.write() as conn:
        row["org_id"] = owning_org(conn, req.org, now)
        taken = conn.execute(
            sa.select(schema.clusters.c.id).where(_LIVE, schema.clusters.c.name == req.name)
        ).first()
        if taken:
            raise Conflict(
                f"cluster name {req.name!r} is already registered ({taken.id})",
                code="ALREADY_EXISTS", field="name", value=req.name,
                rule="must be unique among registered clusters",
            )
        conn.execute(schema.clusters.insert().values(**row))
        summary = None
        if key is not None and req.kubeconfig_text is not None:
            summary = sealed.store(
                conn, key, owner("cluster", cluster_id),
                req.kubeconfig_text.get_secret_value().encode(),
                {"server": target.server_url, "context": req.context or "(current)"}, now)
        record_event(conn, now, "cluster", cluster_id, "registered", f"cluster {req.name} {state}")
    return Cluster.model_validate({**row, "sealed_kubeconfig": summary})


def _read_facts(facts: ClusterFacts, ca: str | None) -> dict[str, object]:
    """What a read of the cluster sets on its record: ready once its version is in the
    supported window and its CA is known."""
    supported = _in_window(facts.kubernetes_version)
    return {
        "kubernetes_version": facts.kubernetes_version,
        "kube_system_uid": facts.kube_system_uid,
        "ca_sha256": ca,
        "facts_source": "cluster",
        "state": ClusterState.READY if supported and ca else ClusterState.PENDING,
        "last_error": None if supported else
        f"Kubernetes {facts.kubernetes_version}: {KUBERNETES_RULE}",
    }


def refresh_cluster(app: App, ref: str) -> Cluster:
    """Read the cluster again; a pending record becomes ready once it can be read."""
    with app.ledger.read() as conn:
        current = Cluster.model_validate(
            find_live(conn, schema.clusters, ref, live=_LIVE, kind="cluster", field="cluster")
        )
    changes: dict[str, object]
    kubeconfig = Path(app.kubeconfig_path(current.model_dump(by_alias=False)) or "")
    try:
        facts = app.probe.read(kubeconfig, current.kube_context)
        target = app.probe.target(kubeconfig, current.kube_context)
    except (ClusterUnreachable, ValueError) as exc:
        changes = {"last_error": f"cluster not read: {exc}"}
    else:
        changes = _read_facts(facts, current.ca_sha256 or target.ca_sha256)
    now = app.clock.now()
    with app.ledger.write() as conn:
        conn.execute(
            schema.clusters.update()
            .where(schema.clusters.c.id == current.id, _LIVE)
            .values(updated_at=now, **changes)
        )
        state = changes.get("state", current.state)
        record_event(conn, now, "cluster", current.id, "refreshed", f"cluster {state}")
        return with_kubeconfigs(conn, [
            conn.execute(sa.select(schema.clusters).where(schema.clusters.c.id == current.id))
            .mappings().one()])[0]


@dataclass(frozen=True)
class NewKubeconfig:
    """``cluster update --kubeconfig``: the file (embedded mode) or its contents (sent to the
    API, sealed), and the context to use in it."""

    kubeconfig: Path | None = None
    kubeconfig_text: SecretStr | None = None
    context: str | None = None


def _same_cluster(current: RowMapping, ca: str | None, uid: str, shown: str) -> None:
    """Refused unless the new kubeconfig reached the cluster of the record: its CA hash and
    its kube-system namespace's UID, each compared with what the record holds."""
    if current["ca_sha256"] is None and current["kube_system_uid"] is None:
        raise Conflict(
            f"cluster {current['name']} holds neither a CA hash nor a kube-system UID to check "
            "a new kubeconfig against: run `anycloud cluster refresh` first",
            field="--kubeconfig", value=shown, rule="must reach the same cluster")
    if current["ca_sha256"] is not None and ca != current["ca_sha256"]:
        raise Conflict(
            f"the new kubeconfig's cluster CA ({(ca or 'none')[:16]}) is not cluster "
            f"{current['name']}'s ({current['ca_sha256'][:16]})", field="--kubeconfig",
            value=shown, rule="must reach the same cluster (the same CA hash)")
    if current["kube_system_uid"] is not None and uid != current["kube_system_uid"]:
        raise Conflict(
            f"the new kubeconfig reaches a cluster whose kube-system UID is {uid}, not "
            f"cluster {current['name']}'s {current['kube_system_uid']}", field="--kubeconfig",
            value=shown, rule="must reach the same cluster (the same kube-system UID)")


def update_kubeconfig(app: App, ref: str, new: NewKubeconfig,
                      expect: Expectation | None = None) -> Cluster:
    """Replace the cluster's kubeconfig (expired credentials, a new user) once the new one
    has reached the same cluster, and record what it read (a pending record whose old
    credentials were refused becomes ready); refused, changing nothing, otherwise.
    ``expect``: the API's If-Match, checked under the row lock."""
    current = cluster_row(app, ref)
    key = None if new.kubeconfig_text is None else sealed.require_key(
        app, f"cluster {current['name']!r} (its kubeconfig)")
    shown = str(new.kubeconfig) if new.kubeconfig_text is None else "(sent)"
    with _kubeconfig_file(new.kubeconfig, new.kubeconfig_text) as kubeconfig:
        try:
            target = app.probe.target(kubeconfig, new.context)
            facts = app.probe.read(kubeconfig, new.context)
        except ValueError as exc:
            raise InvalidInput("--kubeconfig", shown, str(exc).replace(str(kubeconfig), shown)
                               ) from exc
        except ClusterUnreachable as exc:
            raise Conflict(f"the new kubeconfig did not reach the cluster: {exc}",
                           field="--kubeconfig", value=shown,
                           rule="must reach the cluster, to show it is the same one") from exc
    now = app.clock.now()
    whose = owner("cluster", current["id"])
    with app.ledger.write() as conn:
        # Checked against the locked record: what it holds now, not what was read before
        # the (slow) read of the cluster.
        row = find_live(conn, schema.clusters, current["id"], live=_LIVE, kind="cluster",
                        field="cluster", lock=True)
        if expect is not None:
            expect(with_kubeconfigs(conn, [row])[0])
        _same_cluster(row, target.ca_sha256, facts.kube_system_uid, shown)
        if key is not None and new.kubeconfig_text is not None:
            sealed.store(conn, key, whose, new.kubeconfig_text.get_secret_value().encode(),
                         {"server": target.server_url, "context": new.context or "(current)"},
                         now, replace=sealed.held(conn, whose))
            path = None
        else:
            sealed.drop(conn, whose)
            path = str(kubeconfig)
        conn.execute(schema.clusters.update().where(schema.clusters.c.id == row["id"]).values(
            kubeconfig_path=path, kube_context=new.context, updated_at=now,
            **_read_facts(facts, row["ca_sha256"] or target.ca_sha256)))
        record_event(conn, now, "cluster", row["id"], "kubeconfig-updated",
                     f"cluster {row['name']}: a new kubeconfig, the same cluster")
        return with_kubeconfigs(conn, [conn.execute(sa.select(schema.clusters).where(
            schema.clusters.c.id == row["id"])).mappings().one()])[0]


def with_kubeconfigs(conn: Any, rows: list[Any]) -> list[Cluster]:
    found = sealed.summaries(conn, [owner("cluster", r["id"]) for r in rows])
    return [Cluster.model_validate({**r, "sealed_kubeconfig": found.get(owner("cluster", r["id"]))})
            for r in rows]


def list_clusters(app: App) -> list[Cluster]:
    with app.ledger.read() as conn:
        rows = conn.execute(
            sa.select(schema.clusters).where(_LIVE).order_by(schema.clusters.c.name)
        ).mappings().all()
        return with_kubeconfigs(conn, list(rows))


def cluster_row(app: App, ref: str) -> RowMapping:
    """The live cluster record whose id or name is ``ref``, as a ledger row."""
    with app.ledger.read() as conn:
        return find_live(conn, schema.clusters, ref, live=_LIVE, kind="cluster", field="cluster")


def get_cluster(app: App, ref: str) -> Cluster:
    with app.ledger.read() as conn:
        row = find_live(conn, schema.clusters, ref, live=_LIVE, kind="cluster", field="cluster")
        return with_kubeconfigs(conn, [row])[0]


def delete_cluster(app: App, ref: str, expect: Expectation | None = None) -> Cluster:
    """Forget a cluster; refused while any node pool on it is not deleted. ``expect``: a
    check of the locked record before anything changes (the API's If-Match)."""
    now = app.clock.now()
    with app.ledger.write() as conn:
        row = find_live(
            conn, schema.clusters, ref, live=_LIVE, kind="cluster", field="cluster", lock=True
        )
        if expect is not None:
            expect(with_kubeconfigs(conn, [row])[0])
        live_pools = sa.select(schema.node_pools.c.id).where(
            schema.node_pools.c.cluster_id == row["id"],
            schema.node_pools.c.state.in_(list(LIVE_POOL_STATES)))
        pools = conn.execute(sa.select(sa.func.count()).select_from(live_pools.subquery())
                             ).scalar_one()
        if pools:
            # What keeps those pools alive: the Services (and deployments) targeting them.
            blocking = conn.execute(sa.select(
                schema.workloads.c.name, schema.workloads.c.kind, schema.workloads.c.state,
            ).where(schema.workloads.c.pool_id.in_(live_pools),
                    schema.workloads.c.state.in_(["active", "terminated"]))
                .order_by(schema.workloads.c.name)).all()
            named = "; ".join(
                f"{w.kind} {w.name}" + (" (terminated, its objects not yet removed from the "
                                        "cluster)" if w.state == "terminated" else "")
                for w in blocking)
            raise Conflict(
                f"cluster {row['name']!r} still has {pools} node pool(s): delete them first"
                + (f"; work still targets them: {named}" if named else ""),
                code="CLUSTER_IN_USE", field="cluster", value=ref,
                rule="a cluster with live node pools cannot be deleted",
            )
        conn.execute(
            schema.clusters.update().where(schema.clusters.c.id == row["id"])
            .values(state=ClusterState.DELETED, deleted_at=now, updated_at=now)
        )
        record_event(conn, now, "cluster", row["id"], "deleted", f"cluster {row['name']} deleted")
        if sealed.held(conn, owner("cluster", row["id"])):
            from automation import memfiles

            sealed.drop(conn, owner("cluster", row["id"]))
            memfiles.remove(f"{row['id']}.kubeconfig")
    return Cluster.model_validate({**row, "state": ClusterState.DELETED, "updated_at": now})
