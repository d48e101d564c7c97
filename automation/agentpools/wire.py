"""What the broker and its clients say to each other: agents, sessions, output and pool
views as camelCase JSON models, the limits and name rules every request is checked
against, and ``AgentRetired``. No ledger, no HTTP: the agent and ``session run`` import
only this."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from automation.errors import AnycloudError, InvalidInput

MAX_SLOTS = 1024
MAX_COMMAND_CHARS = 128 * 1024
MAX_OUTPUT_CHARS = 1024 * 1024  # one post of output chunks
# The exit codes a process can report: 0..255, or minus the signal that ended it (Python).
EXIT_CODES = range(-128, 256)

AgentState = Literal["ready", "draining", "unknown", "gone", "retired"]
SessionState = Literal["pending", "running", "done", "failed", "cancelled"]
TERMINAL: frozenset[str] = frozenset({"done", "failed", "cancelled"})

_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN = rf"{_DNS_LABEL}(\.{_DNS_LABEL})*"
_POOL = re.compile(rf"(?P<ns>{_DNS_LABEL})/(?P<name>{_DNS_SUBDOMAIN})")
_NAME = re.compile(_DNS_SUBDOMAIN)
POOL_RULE = ("must be <namespace>/<name>: a Kubernetes namespace (DNS label, at most 63 "
             "characters) and an AgentPool name (DNS subdomain, at most 253)")
NAME_RULE = "must be a Kubernetes object name (lowercase DNS subdomain, at most 253 characters)"


class AgentRetired(AnycloudError):
    """The agent was retired (its pod is being deleted, or its pool was): it may not register,
    heartbeat or take work again under that id. The broker answers 410 Gone."""

    default_code = "AGENT_RETIRED"
    http_status = 410

    def __init__(self, agent: str, pool: str, *, message: str | None = None) -> None:
        super().__init__(
            message or f"agent {agent!r} was retired from pool {pool} (its pod is being "
            "deleted, or the pool was): it takes no more sessions", field="agent", value=agent,
            rule="a retired agent id never registers again: a new pod registers under its "
                 "own name (an agent run by hand: another --agent-id)")


class PoolNotFound(AnycloudError):
    """A session asked for a pool the broker does not serve: no AgentPool of that name (or
    it was deleted) and no agent registered in it. Refused at once: waiting would be
    forever."""

    default_code = "POOL_NOT_FOUND"
    exit_code = 2  # bad input: nothing was written
    http_status = 404

    def __init__(self, pool: str, why: str, *, message: str | None = None) -> None:
        super().__init__(message or f"pool {pool!r}: {why}", field="pool", value=pool,
                         rule="must name an AgentPool the operator serves, or a pool with a "
                              "registered agent")


class _Wire(BaseModel):
    """camelCase on the wire both ways (the broker writes it, its clients read it back);
    snake_case field names in Python and from ledger rows."""

    model_config = ConfigDict(alias_generator=to_camel, validate_by_name=True,
                              validate_by_alias=True, serialize_by_alias=True,
                              from_attributes=True)


class Agent(_Wire):
    model_config = ConfigDict(frozen=True)

    id: str
    pool: str
    pod_name: str
    slots: int
    busy_slots: int
    reported_busy_slots: int
    state: AgentState
    registered_at: datetime
    last_heartbeat_at: datetime
    idle_since: datetime | None = None
    unknown_since: datetime | None = None
    gone_at: datetime | None = None


class Session(_Wire):
    model_config = ConfigDict(frozen=True)

    id: str
    pool: str
    agent_id: str | None
    state: SessionState
    command: list[str]
    exit_code: int | None = None
    error: str | None = None
    created_at: datetime
    assigned_at: datetime | None = None
    delivered_at: datetime | None = None
    cancel_requested_at: datetime | None = None
    finished_at: datetime | None = None
    client_seen_at: datetime | None = None
    # Pending sessions of the pool ahead of this one (only while pending).
    ahead: int | None = None


class Chunk(_Wire):
    id: int
    stream: Literal["stdout", "stderr"]
    data: str


class Output(_Wire):
    """Chunks after a given id, and the session as it was when they were read: when the
    session is finished, the chunks read are all there will ever be up to ``next_after``."""

    session: Session
    chunks: list[Chunk]
    next_after: int
    complete: bool


class HeartbeatReply(_Wire):
    agent: Agent
    # Sessions the agent must stop: their client released them, or the broker gave them up
    # (the agent was unknown too long) and they run nowhere as far as the broker knows.
    cancel: list[str]
    # Sessions of the pool that this heartbeat's capacity let start (waiters to wake).
    assigned: int = 0


class PoolView(_Wire):
    pool: str
    agents: list[Agent]
    ready_agents: int
    slots: int
    idle_slots: int
    busy_slots: int
    pending_sessions: int
    running_sessions: int


# -- input rules ------------------------------------------------------------------------------


def check_pool(pool: str, field: str = "pool") -> str:
    match = _POOL.fullmatch(pool) if isinstance(pool, str) else None
    if match is None or len(match["ns"]) > 63 or len(match["name"]) > 253:
        raise InvalidInput(field, pool, POOL_RULE)
    return pool


def check_name(value: str, field: str) -> str:
    if not isinstance(value, str) or len(value) > 253 or not _NAME.fullmatch(value):
        raise InvalidInput(field, value, NAME_RULE)
    return value


def check_count(value: int, field: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInput(field, value, f"must be a whole number from {low} to {high}")
    return value


def check_command(command: Sequence[str]) -> list[str]:
    argv = list(command) if isinstance(command, (list, tuple)) else None
    if not argv or not all(isinstance(a, str) for a in argv):
        raise InvalidInput("command", command, "must be a non-empty list of strings (argv)")
    if not argv[0]:
        raise InvalidInput("command", argv, "must name a program first (argv[0] is empty)")
    if any("\0" in a for a in argv):
        raise InvalidInput("command", argv, "must not contain NUL characters")
    if sum(len(a) for a in argv) > MAX_COMMAND_CHARS:
        raise InvalidInput("command", f"{len(argv)} arguments",
                           f"must be at most {MAX_COMMAND_CHARS} characters in all")
    return argv


