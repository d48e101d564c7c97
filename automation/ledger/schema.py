"""Table definitions. Changes to these go with a migration in ``migrations/versions``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect

metadata = sa.MetaData()


class UTCDateTime(sa.types.TypeDecorator[datetime]):
    """Stores naive UTC, returns aware UTC: SQLite has no time zones and PostgreSQL's
    ``timestamptz`` would otherwise come back in the session's zone."""

    impl = sa.DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the ledger; use an aware UTC time")
        return value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        return None if value is None else value.replace(tzinfo=UTC)


def _ts(name: str, nullable: bool = True) -> sa.Column[Any]:
    return sa.Column(name, UTCDateTime(), nullable=nullable)


clusters = sa.Table(
    "clusters",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("name", sa.String(63), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),  # pending | ready | deleted
    sa.Column("server_url", sa.String(512), nullable=False),
    sa.Column("ca_sha256", sa.String(64)),
    sa.Column("kubernetes_version", sa.String(64)),
    sa.Column("kube_system_uid", sa.String(64)),
    sa.Column("kubeconfig_path", sa.String(1024)),
    sa.Column("kube_context", sa.String(253)),
    sa.Column("facts_source", sa.String(16)),  # cluster | offline | NULL while unknown
    sa.Column("last_error", sa.Text),
    # The tenant that owns it (issue 36): its pools are that org's too.
    sa.Column("org_id", sa.String(32), sa.ForeignKey("orgs.id", name="fk_clusters_org"),
              nullable=False),
    _ts("created_at", False),
    _ts("updated_at", False),
    _ts("deleted_at"),
)
sa.Index(
    "uq_clusters_live_name",
    clusters.c.name,
    unique=True,
    sqlite_where=clusters.c.state != "deleted",
    postgresql_where=clusters.c.state != "deleted",
)

credentials = sa.Table(
    "credentials",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("name", sa.String(63), nullable=False),
    sa.Column("provider", sa.String(16), nullable=False),
    # Where to find the secret (profile, key-file path, ids), never the secret itself.
    sa.Column("reference", sa.JSON, nullable=False),
    sa.Column("state", sa.String(16), nullable=False),  # active | deleted
    sa.Column("org_id", sa.String(32), sa.ForeignKey("orgs.id", name="fk_credentials_org"),
              nullable=False),
    _ts("created_at", False),
    _ts("deleted_at"),
)
sa.Index(
    "uq_credentials_live_name",
    credentials.c.name,
    unique=True,
    sqlite_where=credentials.c.state == "active",
    postgresql_where=credentials.c.state == "active",
)

node_pools = sa.Table(
    "node_pools",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("name", sa.String(63), nullable=False),
    sa.Column("cluster_id", sa.String(32), sa.ForeignKey("clusters.id"), nullable=False),
    sa.Column("credential_id", sa.String(32), sa.ForeignKey("credentials.id"), nullable=False),
    sa.Column("provider", sa.String(16), nullable=False),
    sa.Column("region", sa.String(64), nullable=False),
    sa.Column("zone", sa.String(64)),
    sa.Column("vm_type", sa.String(64), nullable=False),
    sa.Column("min_vms", sa.Integer, nullable=False),
    sa.Column("max_vms", sa.Integer, nullable=False),
    # pending -> provisioning -> ready; failed (parked); deleting -> deleted
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("hosts_service", sa.Boolean, nullable=False, default=False),
    sa.Column("last_error", sa.Text),
    # A stable code for the last error (ENGINE_MISMATCH, STACK_LOCKED, CLUSTER_UNAVAILABLE…).
    sa.Column("last_error_code", sa.String(64)),
    sa.Column("consecutive_failures", sa.Integer, nullable=False, default=0),
    _ts("backoff_until"),
    # Replacements since the last replacement VM became Ready (parks the pool at 3+1).
    sa.Column("replacements_in_row", sa.Integer, nullable=False, default=0),
    sa.Column("network_removed", sa.Boolean, nullable=False, default=False),
    # Pools hosting a Service: the attempt whose Node is the elected ingress entry.
    sa.Column("ingress_entry_attempt_id", sa.String(32)),
    # What the stack was last applied with (see reconciler.decide.stack_digest).
    sa.Column("applied_digest", sa.String(64)),
    # Passes that act and change nothing (``reconciler.progress``): the pool's mark (its
    # state and its attempts' states) as last changed, when, and the acting passes since.
    sa.Column("progress_mark", sa.String(64)),
    _ts("progress_since"),
    sa.Column("passes_without_progress", sa.Integer, nullable=False, default=0,
              server_default="0"),
    # Its cluster's org, copied at create (the cluster's org never changes under it).
    sa.Column("org_id", sa.String(32), sa.ForeignKey("orgs.id", name="fk_node_pools_org"),
              nullable=False),
    _ts("created_at", False),
    _ts("updated_at", False),
    _ts("deleted_at"),
)
sa.Index(
    "uq_node_pools_live_name",
    node_pools.c.cluster_id,
    node_pools.c.name,
    unique=True,
    sqlite_where=node_pools.c.state != "deleted",
    postgresql_where=node_pools.c.state != "deleted",
)
sa.Index("ix_node_pools_state", node_pools.c.state)
sa.Index("ix_node_pools_org", node_pools.c.org_id)

# The last drift check of each pool's stack (issue 23): when, with which engine, the changes
# found (urns, types, ops and property names: never a value), or why the check failed. One
# row per pool, replaced by each check; a failed check is recorded here, not as the pool's
# last error.
pool_drift = sa.Table(
    "pool_drift",
    metadata,
    sa.Column("pool_id", sa.String(32), sa.ForeignKey("node_pools.id"), primary_key=True),
    _ts("checked_at", False),
    sa.Column("engine", sa.String(16), nullable=False),
    sa.Column("changes", sa.JSON, nullable=False),
    sa.Column("error", sa.Text),
    sa.Column("error_code", sa.String(64)),
    sa.Column("seconds", sa.Float),
)

vm_attempts = sa.Table(
    "vm_attempts",
    metadata,
    # Written before any cloud call; names and tags the VM so a crash can find it again.
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("pool_id", sa.String(32), sa.ForeignKey("node_pools.id"), nullable=False),
    # pending -> creating -> running; releasing -> released
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("replaces_attempt_id", sa.String(32)),
    sa.Column("token_generation", sa.Integer, nullable=False, default=0),
    sa.Column("vm_id", sa.String(256)),
    sa.Column("public_ip", sa.String(64)),
    sa.Column("node_name", sa.String(253)),
    # Last observation of the attempt's Node: absent | NotReady | Ready
    sa.Column("node_state", sa.String(16)),
    sa.Column("last_error", sa.Text),
    _ts("created_at", False),
    _ts("updated_at", False),
    _ts("released_at"),
    # When the provider confirmed the VM: the 10-minute join timer starts here.
    _ts("vm_created_at"),
    _ts("token_issued_at"),
    _ts("token_removed_at"),  # set once the Node exists; the token is never recreated
    _ts("not_ready_since"),
    sa.Column("gpu_ready_seen", sa.Boolean, nullable=False, default=False),
    _ts("gpu_missing_since"),
    # The engine that bought the VM: pulumi, or mock (nothing bought). NULL: before 0004.
    sa.Column("engine", sa.String(16)),
    # The image the VM was built from (AMI id, GCP image selfLink, Azure image URN), recorded
    # after the VM was created; every later run builds the attempt's VM from it. NULL: not
    # created yet (the next run takes the newest image).
    sa.Column("image", sa.String(512)),
)
sa.Index("ix_vm_attempts_pool", vm_attempts.c.pool_id, vm_attempts.c.state)

workloads = sa.Table(
    "workloads",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("name", sa.String(63), nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),  # deployment | service
    sa.Column("pool_id", sa.String(32), sa.ForeignKey("node_pools.id"), nullable=False),
    # active -> terminated (a service's native objects still exist) -> removed
    sa.Column("state", sa.String(16), nullable=False),
    _ts("created_at", False),
    _ts("terminated_at"),
    _ts("removed_at"),
)
sa.Index(
    "uq_workloads_live_name",
    workloads.c.name,
    unique=True,
    sqlite_where=workloads.c.state != "removed",
    postgresql_where=workloads.c.state != "removed",
)
sa.Index("ix_workloads_pool", workloads.c.pool_id, workloads.c.state)

events = sa.Table(
    "events",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    _ts("at", False),
    sa.Column("subject_kind", sa.String(16), nullable=False),
    sa.Column("subject_id", sa.String(32), nullable=False),
    sa.Column("kind", sa.String(64), nullable=False),
    sa.Column("message", sa.Text, nullable=False),
    sa.Column("data", sa.JSON),
)
sa.Index("ix_events_subject", events.c.subject_id, events.c.id)

leases = sa.Table(
    "leases",
    metadata,
    # One reconciler replica works on a pool at a time; a dead holder's lease expires.
    sa.Column("pool_id", sa.String(32), primary_key=True),
    sa.Column("holder", sa.String(128), nullable=False),
    _ts("expires_at", False),
)

# -- live catalog refresh (automation/catalog/refresh): a dated overlay over data/catalog.sqlite

catalog_refreshes = sa.Table(
    "catalog_refreshes",
    metadata,
    # One `anycloud catalog refresh`: written whole in one transaction, or not at all.
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("provider", sa.String(16), nullable=False),
    sa.Column("credential_id", sa.String(32), sa.ForeignKey("credentials.id"), nullable=False),
    sa.Column("regions", sa.JSON, nullable=False),  # the regions read: the whole truth there
    sa.Column("sources", sa.JSON, nullable=False),  # the APIs read ("aws pricing:GetProducts")
    _ts("fetched_at", False),
    # Per region: {"types": n, "offerings": n, "prices": n}.
    sa.Column("counts", sa.JSON, nullable=False),
    sa.Column("warnings", sa.JSON, nullable=False),
)

catalog_refresh_regions = sa.Table(
    "catalog_refresh_regions",
    metadata,
    # Which refresh is the newest truth for a region: one indexed lookup per (cloud, region).
    sa.Column("refresh_id", sa.String(32), sa.ForeignKey("catalog_refreshes.id"),
              primary_key=True),
    sa.Column("provider", sa.String(16), nullable=False),
    sa.Column("region", sa.String(64), primary_key=True),
    _ts("fetched_at", False),
    # The region's zones as the refresh saw them (those offering any type), space-separated.
    sa.Column("zones", sa.Text, nullable=False),
)
sa.Index("ix_catalog_refresh_regions_newest", catalog_refresh_regions.c.provider,
         catalog_refresh_regions.c.region, catalog_refresh_regions.c.fetched_at)

catalog_overlay_types = sa.Table(
    "catalog_overlay_types",
    metadata,
    sa.Column("refresh_id", sa.String(32), sa.ForeignKey("catalog_refreshes.id"),
              primary_key=True),
    sa.Column("provider", sa.String(16), nullable=False),
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("arch", sa.String(16), nullable=False),
    sa.Column("vcpus", sa.Integer, nullable=False),
    sa.Column("memory_gib", sa.Float, nullable=False),
    sa.Column("gpus", sa.Integer, nullable=False),
    sa.Column("gpu_model", sa.String(128)),
    sa.Column("family", sa.String(32), nullable=False),
    _ts("fetched_at", False),  # the refresh's, here too so the newest is one index scan
)
sa.Index("ix_catalog_overlay_types_newest", catalog_overlay_types.c.provider,
         catalog_overlay_types.c.name, catalog_overlay_types.c.fetched_at)

catalog_overlay_offerings = sa.Table(
    "catalog_overlay_offerings",
    metadata,
    sa.Column("refresh_id", sa.String(32), sa.ForeignKey("catalog_refreshes.id"),
              primary_key=True),
    sa.Column("provider", sa.String(16), nullable=False),
    sa.Column("region", sa.String(64), primary_key=True),
    sa.Column("vm_type", sa.String(64), primary_key=True),
    sa.Column("zones", sa.Text),  # space-separated; NULL: the API does not say which
    sa.Column("price_usd_hour", sa.Float),  # NULL: no price found
)
sa.Index("ix_catalog_overlay_offerings_type", catalog_overlay_offerings.c.provider,
         catalog_overlay_offerings.c.vm_type)

# -- the agent broker (automation/agentpools/registry.py): agents of AgentPools and sessions

agents = sa.Table(
    "agents",
    metadata,
    # The agent's own id: its pod name, so the operator and the broker name it alike.
    sa.Column("id", sa.String(253), primary_key=True),
    sa.Column("pool", sa.String(320), nullable=False),  # "<namespace>/<AgentPool name>"
    sa.Column("pod_name", sa.String(253), nullable=False),
    sa.Column("slots", sa.Integer, nullable=False),
    # Slots held by this agent's running sessions: the broker's own count, changed only with
    # the pool's agent rows locked, so it never exceeds slots.
    sa.Column("busy_slots", sa.Integer, nullable=False, default=0),
    # What the agent last said it runs (for people; the broker trusts busy_slots).
    sa.Column("reported_busy_slots", sa.Integer, nullable=False, default=0),
    # ready | draining (SIGTERM: takes no new session) | unknown (heartbeats stopped) | gone
    # (left by itself; may register again) | retired (by the operator or its pool's deletion:
    # refused for good, 410 AGENT_RETIRED)
    sa.Column("state", sa.String(16), nullable=False),
    _ts("registered_at", False),
    _ts("last_heartbeat_at", False),
    _ts("idle_since"),  # when busy_slots last became 0; NULL while a slot is busy
    _ts("unknown_since"),  # the last heartbeat before it went unknown
    _ts("gone_at"),
)
sa.Index("ix_agents_pool", agents.c.pool, agents.c.state)

sessions = sa.Table(
    "sessions",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("pool", sa.String(320), nullable=False),
    sa.Column("agent_id", sa.String(253)),  # NULL while pending
    # pending -> running -> done (the command ended: exit_code) | failed (it could not run or
    # its agent was lost: error) | cancelled (released by its client before it ended)
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("command", sa.JSON, nullable=False),  # argv
    sa.Column("exit_code", sa.Integer),
    sa.Column("error", sa.Text),
    _ts("created_at", False),
    _ts("assigned_at"),
    _ts("delivered_at"),  # handed to its agent (GET /v1/agents/{id}/work)
    # The client released it while it ran: its agent is told to stop it (heartbeat reply),
    # and the slot stays held until the agent says the command has ended.
    _ts("cancel_requested_at"),
    _ts("finished_at"),
    # While pending: the client's last poll. A client gone that long stops waiting for it
    # (its session is cancelled), so a dead client is never counted as demand.
    _ts("client_seen_at"),
    # The API token that started it (issue 52): only that token, or an admin, reads or
    # cancels it. NULL (sessions from before owners): admins only.
    sa.Column("owner_token_id", sa.String(32)),
)
sa.Index("ix_sessions_pool_state", sessions.c.pool, sessions.c.state, sessions.c.created_at)
sa.Index("ix_sessions_agent", sessions.c.agent_id, sessions.c.state)
# The sessions a window of time saw (the dashboard's busy slots over the last hour).
sa.Index("ix_sessions_pool_finished", sessions.c.pool, sessions.c.finished_at)

# The AgentPools the operator serves, as it last saw them: a session for a pool that is not
# here (or deleted) is refused at once (POOL_NOT_FOUND) instead of waiting forever.
agent_pools = sa.Table(
    "agent_pools",
    metadata,
    sa.Column("pool", sa.String(320), primary_key=True),  # "<namespace>/<name>"
    sa.Column("uid", sa.String(64), nullable=False),  # the AgentPool object's uid
    sa.Column("state", sa.String(16), nullable=False),  # open | deleted
    sa.Column("desired_replicas", sa.Integer, nullable=False, default=0),  # last decision
    sa.Column("reason", sa.String(64)),  # the Ready condition's reason, as last written
    _ts("opened_at", False),
    _ts("observed_at", False),
    _ts("deleted_at"),
)

# The namespaces the AgentPool operator watches (its config's kubernetes provisioners), so
# a session for a pool elsewhere is told where pools are served.
agent_pool_namespaces = sa.Table(
    "agent_pool_namespaces",
    metadata,
    sa.Column("namespace", sa.String(63), primary_key=True),
    _ts("seen_at", False),
)

session_output = sa.Table(
    "session_output",
    metadata,
    # A session's output as its agent posted it, in order; the client reads after an id.
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("session_id", sa.String(32), sa.ForeignKey("sessions.id"), nullable=False),
    sa.Column("stream", sa.String(8), nullable=False),  # stdout | stderr
    sa.Column("data", sa.Text, nullable=False),
)
sa.Index("ix_session_output_session", session_output.c.session_id, session_output.c.id)

# --- static provisioner slots (issue 12) --------------------------------------------------

static_runtimes = sa.Table(
    "static_runtimes",
    metadata,
    # One row per runtime of a static provisioner, created on first use: the row a slot
    # allocation locks, so two processes never hand out the same runtime's last slot.
    sa.Column("provisioner", sa.String(63), primary_key=True),
    sa.Column("host", sa.String(512), primary_key=True),
    _ts("created_at", False),
)

static_allocations = sa.Table(
    "static_allocations",
    metadata,
    # The slots a provisioned resource holds on one runtime: one row per provision id, so
    # provisioning is idempotent and a release removes it exactly once.
    sa.Column("provision_id", sa.String(64), primary_key=True),
    sa.Column("provisioner", sa.String(63), nullable=False),
    sa.Column("host", sa.String(512), nullable=False),
    sa.Column("slots", sa.Integer, nullable=False),
    _ts("allocated_at", False),
)
sa.Index("ix_static_allocations_runtime", static_allocations.c.provisioner,
         static_allocations.c.host)

# --- orgs, projects and their deployments (issue 12) ---------------------------------------

orgs = sa.Table(
    "orgs",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("name", sa.String(63), nullable=False, unique=True),
    sa.Column("default_provisioner", sa.String(63)),  # superuser-only; NULL: the global one
    _ts("created_at", False),
    _ts("updated_at", False),
)

projects = sa.Table(
    "projects",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("name", sa.String(63), nullable=False, unique=True),
    sa.Column("org_id", sa.String(32), sa.ForeignKey("orgs.id"), nullable=False),
    sa.Column("provisioner", sa.String(63)),  # superuser-only; NULL: the org's, else global
    _ts("created_at", False),
    _ts("updated_at", False),
)

deployments = sa.Table(
    "deployments",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("name", sa.String(63), nullable=False),
    sa.Column("project_id", sa.String(32), sa.ForeignKey("projects.id"), nullable=False),
    # stopped | running | deleted; what the user asked last (``starting`` while it provisions)
    sa.Column("state", sa.String(16), nullable=False),
    # The runtime resource: its id never changes, whatever provisioner holds it.
    sa.Column("provision_id", sa.String(64), nullable=False, unique=True),
    sa.Column("provisioner", sa.String(63)),  # what it is provisioned with; NULL: nothing
    sa.Column("runtime_host", sa.String(512)),
    sa.Column("data_dir", sa.String(512)),
    # A move in progress, written before each step (durable intent):
    # {"from": name | null, "to": name, "step": "deprovision" | "provision"}
    sa.Column("move", sa.JSON),
    sa.Column("last_error", sa.Text),
    _ts("created_at", False),
    _ts("updated_at", False),
    _ts("deleted_at"),
    # Set while a nodepool provisioner holds objects on that pool (blocks its deletion).
    sa.Column("node_pool_id", sa.String(32),
              sa.ForeignKey("node_pools.id", name="fk_deployments_node_pool")),
    # What it asks of its runtime: {"slots", "cpu", "memory", "storage"}; NULL: the defaults.
    sa.Column("resources", sa.JSON),
    # The audience its runtime verifies tokens for (a static runtime's audience_url, else its
    # host); set with the host, so a moved deployment's tokens name its new runtime.
    sa.Column("audience", sa.String(512)),
)
sa.Index("ix_deployments_node_pool", deployments.c.node_pool_id)
sa.Index(
    "uq_deployments_live_name",
    deployments.c.name,
    unique=True,
    sqlite_where=deployments.c.state != "deleted",
    postgresql_where=deployments.c.state != "deleted",
)
sa.Index("ix_deployments_project", deployments.c.project_id, deployments.c.state)

api_tokens = sa.Table(
    "api_tokens",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("name", sa.String(253), nullable=False),
    sa.Column("role", sa.String(16), nullable=False),  # admin | member | viewer | agent
    # An agent token's AgentPool ("<namespace>/<name>"); NULL for the other roles.
    sa.Column("scope", sa.String(320)),
    # A member's or viewer's tenant (issue 36): it sees only this org (and, if set, only
    # this project's deployments). NULL: every org (admins always).
    sa.Column("org_id", sa.String(32), sa.ForeignKey("orgs.id", name="fk_api_tokens_org")),
    sa.Column("project_id", sa.String(32),
              sa.ForeignKey("projects.id", name="fk_api_tokens_project")),
    # SHA-256 of the whole token: the token itself is shown once and never stored.
    sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
    sa.Column("prefix", sa.String(16), nullable=False),  # "acy_" + 6 chars, to tell tokens apart
    sa.Column("created_by", sa.String(253), nullable=False),
    _ts("created_at", False),
    _ts("expires_at"),
    _ts("revoked_at"),
)
sa.Index(
    "uq_api_tokens_live_name",
    api_tokens.c.name,
    unique=True,
    sqlite_where=api_tokens.c.revoked_at.is_(None),
    postgresql_where=api_tokens.c.revoked_at.is_(None),
)
sa.Index("ix_api_tokens_scope", api_tokens.c.scope)

idempotency_keys = sa.Table(
    "idempotency_keys",
    metadata,
    # Per caller (token) and route: another token's key never collides with this one's.
    sa.Column("token_id", sa.String(32), primary_key=True),
    sa.Column("route", sa.String(200), primary_key=True),  # "POST /v1/node-pools"
    sa.Column("key", sa.String(255), primary_key=True),
    sa.Column("request_hash", sa.String(64), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),  # running | done
    sa.Column("status_code", sa.Integer),
    sa.Column("response", sa.JSON),  # the first answer (never a secret: see api.idempotency)
    _ts("created_at", False),
)
sa.Index("ix_idempotency_keys_created", idempotency_keys.c.created_at)

sealed_secrets = sa.Table(
    "sealed_secrets",
    metadata,
    # Whose secret: "credential/<id>" (also the AEAD's associated data, so a blob copied to
    # another owner does not open).
    sa.Column("owner", sa.String(64), primary_key=True),
    sa.Column("key_id", sa.String(16), nullable=False),  # which server key sealed it (hex)
    sa.Column("sealed", sa.LargeBinary, nullable=False),  # automation.sealing's format
    sa.Column("fingerprint", sa.String(40), nullable=False),  # keyed HMAC, never a bare hash
    sa.Column("shown", sa.JSON, nullable=False),  # the non-secret fields (an access key's id)
    _ts("created_at", False),
    _ts("rotated_at"),
)

# The keys that sign runtime tokens (issue 22): the public half published as the JWKS, the
# private half sealed in sealed_secrets (owner "signing-key/<kid>").
token_signing_keys = sa.Table(
    "token_signing_keys",
    metadata,
    sa.Column("kid", sa.String(64), primary_key=True),  # RFC 7638 thumbprint
    sa.Column("public_jwk", sa.JSON, nullable=False),
    _ts("created_at", False),
    _ts("retired_at"),  # NULL: signs new tokens (the newest) or still verifies old ones
)
