"""The broker's HTTP API as Python calls, for ``anycloud agent`` and ``anycloud session run``:
the broker on its own (``anycloud broker``) or the API, which serves the same routes.

A refusal from the broker (problem+json: code, detail, field, value, rule) comes back as the
same ``automation.errors`` error it was raised as (field, value and rule kept); a broker that
cannot be reached is an ``AnycloudError`` naming the address (exit 1), ``BrokerUnreachable`` so
callers can retry it. 410 with code AGENT_RETIRED is ``AgentRetired``: the agent must stop, not
register again. 401 and 403 are ``Unauthenticated`` and ``PermissionDenied``: retrying does not
help.

The token goes in ``Authorization: Bearer``: an agent's from ``ANYCLOUD_AGENT_TOKEN`` (the
Secret the operator mints for its pool), a session client's from ``ANYCLOUD_TOKEN``.
"""

from __future__ import annotations

from typing import Any

import httpx2

from automation.agentpools.wire import (
    Agent,
    AgentRetired,
    HeartbeatReply,
    Output,
    PoolNotFound,
    PoolView,
    Session,
)
from automation.errors import (
    AnycloudError,
    Conflict,
    InvalidInput,
    NotFound,
    PermissionDenied,
    Unauthenticated,
)


class BrokerUnreachable(AnycloudError):
    default_code = "UNAVAILABLE"


class BrokerBusy(BrokerUnreachable):
    """The broker answered, but could not serve the call now (429: over its rate limit,
    which nothing ran past; 5xx: a failed or refused attempt): retried like an unreachable
    broker. Every agent call is safe to repeat: a release of an ended session changes
    nothing."""


class BrokerClient:
    def __init__(self, base_url: str, timeout: float = 10.0, *, token: str | None = None,
                 verify: Any = True) -> None:
        """``verify``: httpx's (True: the system's CAs; or an ``ssl.SSLContext``)."""
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx2.Client(base_url=self.base_url, timeout=timeout, headers=headers,
                                   verify=verify)

    def close(self) -> None:
        self._http.close()

    def _call(self, method: str, path: str, *, wait: float = 0, **kw: Any) -> Any:
        params = dict(kw.pop("params", {}))
        if wait:
            params["wait"] = wait
        try:
            resp = self._http.request(method, path, params=params or None,
                                      timeout=self.timeout + wait, **kw)
        except httpx2.TransportError as exc:
            raise BrokerUnreachable(
                f"cannot reach the broker at {self.base_url}: {type(exc).__name__}: {exc}"
            ) from exc
        if resp.status_code < 400:
            return resp.json()
        try:
            err = resp.json()
        except ValueError:
            err = {}
        if not isinstance(err, dict):
            err = {}
        message = err.get("detail") or f"broker answered HTTP {resp.status_code}"
        if resp.status_code == 429 or resp.status_code >= 500:
            raise BrokerBusy(f"the broker at {self.base_url} answered HTTP "
                             f"{resp.status_code}: {message}")
        if resp.status_code == 401:
            raise Unauthenticated(f"the broker at {self.base_url} refused the token: {message}",
                                  field=err.get("field"), value=err.get("value"),
                                  rule=err.get("rule"))
        if resp.status_code == 403:
            raise PermissionDenied(f"the broker at {self.base_url}: {message}",
                                   field=err.get("field"), value=err.get("value"),
                                   rule=err.get("rule"))
        if resp.status_code == 410 and err.get("code") == AgentRetired.default_code:
            raise AgentRetired(str(err.get("value")), "", message=message)
        if resp.status_code == 404 and err.get("code") == PoolNotFound.default_code:
            raise PoolNotFound(str(err.get("value")), "", message=message)
        if resp.status_code == 404 and err.get("field"):
            raise NotFound(str(err["field"]), str(err.get("value")), field=err["field"])
        if resp.status_code in (400, 422) and err.get("field"):
            raise InvalidInput(err["field"], err.get("value"), err.get("rule") or message)
        if resp.status_code == 409:
            raise Conflict(message, field=err.get("field"), value=err.get("value"),
                           rule=err.get("rule"))
        raise AnycloudError(f"broker at {self.base_url}: {message}", code=err.get("code"))

    # agents

    def register(self, pool: str, agent_id: str, pod: str, slots: int) -> Agent:
        return Agent.model_validate(self._call("POST", "/v1/agents", json={
            "pool": pool, "agentId": agent_id, "pod": pod, "slots": slots}))

    def heartbeat(self, agent_id: str, busy_slots: int, running: list[str],
                  draining: bool = False) -> HeartbeatReply:
        return HeartbeatReply.model_validate(self._call(
            "POST", f"/v1/agents/{agent_id}/heartbeat",
            json={"busySlots": busy_slots, "running": running, "draining": draining}))

    def work(self, agent_id: str, wait: float = 0) -> list[Session]:
        data = self._call("GET", f"/v1/agents/{agent_id}/work", wait=wait)
        return [Session.model_validate(s) for s in data["sessions"]]

    def deregister(self, agent_id: str) -> Agent:
        return Agent.model_validate(self._call("DELETE", f"/v1/agents/{agent_id}"))

    def post_output(self, session_id: str, agent_id: str,
                    chunks: list[tuple[str, str]]) -> None:
        self._call("POST", f"/v1/sessions/{session_id}/output", json={
            "agentId": agent_id, "chunks": [{"stream": s, "data": d} for s, d in chunks]})

    def finish(self, session_id: str, agent_id: str, exit_code: int | None,
               error: str | None = None) -> Session:
        return Session.model_validate(self._call(
            "POST", f"/v1/sessions/{session_id}/release",
            json={"agentId": agent_id, "exitCode": exit_code, "error": error}))

    # sessions

    def acquire(self, pool: str, command: list[str], wait: float = 0) -> Session:
        return Session.model_validate(self._call(
            "POST", "/v1/sessions", wait=wait, json={"pool": pool, "command": command}))

    def session(self, session_id: str, wait: float = 0) -> Session:
        return Session.model_validate(self._call("GET", f"/v1/sessions/{session_id}",
                                                 wait=wait))

    def output(self, session_id: str, after: int, wait: float = 0) -> Output:
        return Output.model_validate(self._call(
            "GET", f"/v1/sessions/{session_id}/output", wait=wait, params={"after": after}))

    def cancel(self, session_id: str) -> Session:
        return Session.model_validate(self._call("POST", f"/v1/sessions/{session_id}/release",
                                                 json={}))

    def pool(self, pool: str) -> PoolView:
        return PoolView.model_validate(self._call("GET", f"/v1/pools/{pool}"))
