"""The broker's HTTP API: through FastAPI's TestClient on both ledgers, and once through a
real uvicorn (``anycloud broker``) on loopback with the client the agent and sessions use."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from automation.agentpools.client import BrokerClient, BrokerUnreachable
from automation.agentpools.registry import Registry
from automation.agentpools.wire import AgentRetired
from automation.api.broker import BrokerThread, create_app
from automation.errors import (
    AnycloudError,
    Conflict,
    InvalidInput,
    NotFound,
    PermissionDenied,
    Unauthenticated,
)
from automation.ledger import open_ledger
from tests.automation.agentpools.tokens import agent_token, bearer, member_token

POOL = "default/cpu"
# The installed entry point, as a pod or a person runs it.
ANYCLOUD = str(Path(sys.executable).with_name("anycloud"))


@pytest.fixture
def registry(ledger_url: str) -> Iterator[Registry]:
    ledger = open_ledger(ledger_url)
    yield Registry(ledger, pool_grace=0)
    ledger.dispose()


@pytest.fixture
def app(registry: Registry) -> FastAPI:
    return create_app(registry, expire_every=None, poll_interval=0.05)


@pytest.fixture
def api(app: FastAPI, registry: Registry) -> Iterator[TestClient]:
    """A session client: a member's token."""
    with TestClient(app, headers=bearer(member_token(registry.ledger))) as client:
        yield client


@pytest.fixture
def agents(app: FastAPI, registry: Registry) -> TestClient:
    """The agents of POOL: its agent token (the same app as ``api``)."""
    return TestClient(app, headers=bearer(agent_token(registry.ledger, POOL)))


def clients(app: FastAPI, registry: Registry) -> tuple[TestClient, TestClient]:
    return (TestClient(app, headers=bearer(member_token(registry.ledger))),
            TestClient(app, headers=bearer(agent_token(registry.ledger, POOL))))


def register(api: TestClient, agent: str = "pod-a", slots: int = 1,
             pool: str = POOL) -> dict:
    resp = api.post("/v1/agents", json={"pool": pool, "agentId": agent, "slots": slots})
    assert resp.status_code == 200, resp.text
    return resp.json()


def test_register_acquire_work_output_release_in_camel_case(api: TestClient,
                                                            agents: TestClient) -> None:
    agent = register(agents, slots=1)
    assert agent["podName"] == "pod-a" and agent["busySlots"] == 0 and agent["state"] == "ready"
    resp = api.post("/v1/sessions", json={"pool": POOL, "command": ["sh", "-c", "echo hi"]})
    assert resp.status_code == 201
    s = resp.json()
    assert (s["state"], s["agentId"], s["command"]) == ("running", "pod-a",
                                                       ["sh", "-c", "echo hi"])
    work = agents.get("/v1/agents/pod-a/work").json()["sessions"]
    assert [w["id"] for w in work] == [s["id"]]
    assert agents.post(f"/v1/sessions/{s['id']}/output", json={
        "agentId": "pod-a", "chunks": [{"stream": "stdout", "data": "hi\n"}]}).status_code == 200
    done = agents.post(f"/v1/sessions/{s['id']}/release",
                    json={"agentId": "pod-a", "exitCode": 3}).json()
    assert (done["state"], done["exitCode"]) == ("done", 3)
    out = api.get(f"/v1/sessions/{s['id']}/output").json()
    assert [c["data"] for c in out["chunks"]] == ["hi\n"] and out["complete"] is True
    assert out["nextAfter"] == out["chunks"][-1]["id"]


def test_pool_view_counts_agents_slots_and_pending(api: TestClient, agents: TestClient) -> None:
    register(agents, "pod-a", 2)
    register(agents, "pod-b", 1)
    for _ in range(4):
        api.post("/v1/sessions", json={"pool": POOL, "command": ["x"]})
    view = api.get("/v1/pools/default/cpu").json()
    assert {a["id"] for a in view["agents"]} == {"pod-a", "pod-b"}
    assert (view["readyAgents"], view["slots"], view["busySlots"], view["idleSlots"],
            view["pendingSessions"], view["runningSessions"]) == (2, 3, 3, 0, 1, 3)


def test_acquire_long_polls_while_pending_and_answers_when_a_slot_frees(
        api: TestClient, agents: TestClient, registry: Registry) -> None:
    register(agents)
    first = api.post("/v1/sessions", json={"pool": POOL, "command": ["x"]}).json()
    started = time.monotonic()
    waited = api.post("/v1/sessions?wait=0.3", json={"pool": POOL, "command": ["y"]}).json()
    assert waited["state"] == "pending" and waited["ahead"] == 0
    assert time.monotonic() - started >= 0.3  # it did wait

    def free_soon() -> None:
        time.sleep(0.3)
        registry.release(first["id"], 0, agent="pod-a")  # another process, as far as the
        # app knows: no in-process wake-up, found by the poll

    threading.Thread(target=free_soon).start()
    started = time.monotonic()
    got = api.get(f"/v1/sessions/{waited['id']}?wait=10").json()
    assert got["state"] == "running" and time.monotonic() - started < 5


def test_work_and_output_long_polls_wake_on_news(api: TestClient, agents: TestClient) -> None:
    register(agents)
    results: dict[str, object] = {}

    def poll() -> None:
        results["work"] = agents.get("/v1/agents/pod-a/work?wait=10").json()

    poller = threading.Thread(target=poll)
    started = time.monotonic()
    poller.start()
    time.sleep(0.2)
    s = api.post("/v1/sessions", json={"pool": POOL, "command": ["x"]}).json()
    poller.join()
    assert time.monotonic() - started < 5
    assert [w["id"] for w in results["work"]["sessions"]] == [s["id"]]  # type: ignore[index]
    empty = api.get(f"/v1/sessions/{s['id']}/output?wait=0.2").json()
    assert empty["chunks"] == [] and empty["complete"] is False


@pytest.mark.parametrize(("method", "path", "body", "status", "field"), [
    ("get", "/v1/pools/Default/cpu", None, 400, "pool"),
    ("post", "/v1/agents", {"pool": POOL, "agentId": "Bad_Name"}, 400, "agent"),
    ("post", "/v1/agents", {"pool": POOL, "agentId": "a", "slots": 0}, 422, "slots"),
    ("post", "/v1/agents", {"pool": POOL, "agentId": "a", "slots": "many"}, 422, "slots"),
    ("post", "/v1/agents", {"pool": POOL, "agent": "a"}, 422, "agentId"),
    ("post", "/v1/sessions", {"pool": POOL, "command": []}, 422, "command"),
    ("post", "/v1/sessions", {"pool": POOL, "command": "echo hi"}, 422, "command"),
    ("post", "/v1/sessions?wait=61", {"pool": POOL, "command": ["x"]}, 422, "wait"),
    ("post", "/v1/agents/nobody/heartbeat", {"busySlots": 0}, 404, "agent"),
    ("get", "/v1/sessions/se-nope", None, 404, "session"),
    # Numbers the ledger's columns cannot hold are refused, never a 500.
    ("post", "/v1/agents/nobody/heartbeat", {"busySlots": 2**40}, 422, "busySlots"),
    ("post", "/v1/sessions/se-nope/release", {"exitCode": 2**40}, 422, "exitCode"),
    ("get", f"/v1/sessions/se-nope/output?after={2**40}", None, 422, "after"),
])
def test_refusals_name_field_value_and_rule(api: TestClient, agents: TestClient, method: str,
                                            path: str, body: dict | None, status: int,
                                            field: str) -> None:
    # Agent routes with the pool's agent token, the others with a member's.
    client = agents if path.startswith("/v1/agents") else api
    resp = client.request(method.upper(), path, json=body)
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"] == "application/problem+json"
    err = resp.json()
    assert err["field"] == field and err["rule"] and err["code"] and err["status"] == status
    assert "value" in err


def test_conflicts_are_409(api: TestClient, agents: TestClient) -> None:
    register(agents, "pod-a")
    register(agents, "pod-b")
    s = api.post("/v1/sessions", json={"pool": POOL, "command": ["x"]}).json()
    resp = agents.post(f"/v1/sessions/{s['id']}/release", json={"agentId": "pod-b",
                                                             "exitCode": 0})
    assert resp.status_code == 409 and resp.json()["field"] == "agentId"


def test_a_retired_agent_is_410_agent_retired(agents: TestClient, registry: Registry) -> None:
    register(agents, "pod-a")
    assert registry.retire_if_idle(POOL, "pod-a")
    for method, path, body in (("post", "/v1/agents/pod-a/heartbeat", {"busySlots": 0}),
                               ("get", "/v1/agents/pod-a/work", None),
                               ("post", "/v1/agents", {"pool": POOL, "agentId": "pod-a"})):
        resp = agents.request(method.upper(), path, json=body)
        assert resp.status_code == 410, resp.text
        err = resp.json()
        assert (err["code"], err["field"], err["value"]) == ("AGENT_RETIRED", "agent", "pod-a")
        assert POOL in err["detail"] and err["rule"]


def test_the_waiting_clients_polls_keep_its_session_wanted(ledger_url: str) -> None:
    from automation.clock import ManualClock

    clock = ManualClock()
    ledger = open_ledger(ledger_url)
    registry = Registry(ledger, clock)
    api, agents = clients(create_app(registry, expire_every=None), registry)
    with api:
        register(agents)
        api.post("/v1/sessions", json={"pool": POOL, "command": ["x"]})
        polled = api.post("/v1/sessions", json={"pool": POOL, "command": ["y"]}).json()
        idle = api.post("/v1/sessions", json={"pool": POOL, "command": ["z"]}).json()
        clock.advance(timedelta(seconds=60))
        assert api.get(f"/v1/sessions/{polled['id']}").json()["state"] == "pending"
        clock.advance(timedelta(seconds=31))
        assert registry.expire_pending(clock.now(), timedelta(seconds=90)) == [idle["id"]]
    ledger.dispose()


def test_background_expiry_marks_silent_agents_unknown(registry: Registry) -> None:
    app = create_app(registry, heartbeat_timeout=timedelta(seconds=0.3), expire_every=0.1,
                     poll_interval=0.05)
    api, agents = clients(app, registry)
    with api:
        register(agents)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if api.get("/v1/pools/default/cpu").json()["agents"][0]["state"] == "unknown":
                break
            time.sleep(0.1)
        agent = api.get("/v1/pools/default/cpu").json()["agents"][0]
        assert agent["state"] == "unknown" and agent["unknownSince"] == agent["lastHeartbeatAt"]
        beat = agents.post("/v1/agents/pod-a/heartbeat", json={"busySlots": 0}).json()
        assert beat["agent"]["state"] == "ready" and beat["cancel"] == []


# -- a real uvicorn on loopback ---------------------------------------------------------------


def start_broker(home: Path, env: dict[str, str], *args: str) -> tuple[subprocess.Popen[str],
                                                                        str]:
    """``anycloud broker --listen 127.0.0.1:0`` and the URL its first line names."""
    proc = subprocess.Popen(
        [ANYCLOUD, "--home", str(home), "broker", "--listen",
         "127.0.0.1:0", "--json", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        proc.wait(timeout=10)
        pytest.fail(f"broker did not start: {proc.stderr.read() if proc.stderr else ''}")
    import json

    return proc, json.loads(line)["url"]


def stop(proc: subprocess.Popen[str]) -> int:
    proc.terminate()
    try:
        return proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise


def test_real_uvicorn_serves_the_client(ledger_url: str, tmp_path: Path) -> None:
    env = dict(os.environ, ANYCLOUD_DATABASE_URL=ledger_url)
    proc, url = start_broker(tmp_path, env)
    ledger = open_ledger(ledger_url)
    client = BrokerClient(url, token=member_token(ledger))
    agents = BrokerClient(url, token=agent_token(ledger, POOL))
    try:
        agent = agents.register(POOL, "pod-a", "pod-a", 1)
        assert agent.state == "ready"
        s = client.acquire(POOL, ["echo", "hi"])
        assert s.state == "running" and [w.id for w in agents.work("pod-a")] == [s.id]
        queued = client.acquire(POOL, ["echo", "again"])
        assert queued.state == "pending"
        agents.post_output(s.id, "pod-a", [("stdout", "hi\n")])
        assert agents.finish(s.id, "pod-a", 0).state == "done"
        assert client.session(queued.id, wait=5).state == "running"
        out = client.output(s.id, 0)
        assert [c.data for c in out.chunks] == ["hi\n"] and out.complete
        assert client.pool(POOL).busy_slots == 1
        # Refusals come back as the errors they were raised as.
        with pytest.raises(InvalidInput) as bad:
            client.acquire("Default", ["x"])
        assert bad.value.field == "pool"
        with pytest.raises(NotFound):
            agents.heartbeat("nobody", 0, [])
        with pytest.raises(Conflict):
            agents.finish(queued.id, "pod-b", 0)
        with pytest.raises(Unauthenticated, match="refused the token"):
            BrokerClient(url).pool(POOL)
        with pytest.raises(PermissionDenied, match="not an agent token"):
            client.register(POOL, "pod-z", "pod-z", 1)
    finally:
        client.close()
        agents.close()
        ledger.dispose()
        assert stop(proc) == 0
    with pytest.raises(BrokerUnreachable, match="cannot reach the broker"):
        BrokerClient(url, timeout=2).pool(POOL)


def test_broker_in_a_thread_of_another_command(registry: Registry) -> None:
    """How ``anycloud serve`` can run it beside the operator, over the same registry."""
    server = BrokerThread(create_app(registry, expire_every=None), "127.0.0.1:0")
    client = BrokerClient(server.url, token=agent_token(registry.ledger, POOL))
    try:
        client.register(POOL, "pod-a", "pod-a", 3)
        assert registry.pool_view(POOL).slots == 3  # the same ledger, seen in-process
        registry.retire_if_idle(POOL, "pod-a")
        with pytest.raises(AgentRetired) as err:  # what the agent tells apart from a 404
            client.heartbeat("pod-a", 0, [])
        assert err.value.code == "AGENT_RETIRED" and POOL in err.value.message
        registry.close_pool(POOL)  # the pool deleted: its agent token goes with it
        with pytest.raises(Unauthenticated, match="'agentpool/default/cpu' was revoked"):
            client.heartbeat("pod-a", 0, [])
        with pytest.raises(AnycloudError, match="cannot listen on"):
            BrokerThread(create_app(registry), server.url.removeprefix("http://"))
    finally:
        client.close()
        server.stop()
    with pytest.raises(BrokerUnreachable):
        BrokerClient(server.url, timeout=2).pool(POOL)


def test_broker_refuses_a_bad_listen_address(tmp_path: Path) -> None:
    res = subprocess.run(
        [ANYCLOUD, "--home", str(tmp_path), "broker",
         "--listen", "localhost"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "--listen 'localhost': must be HOST:PORT" in res.stderr


def test_connections_are_accepted_with_nodelay() -> None:
    """A kept-alive client (agents, sessions) would otherwise wait ~40 ms a request on the
    delayed ACK of uvicorn's two-write responses."""
    import socket

    from automation.serving import listen_socket as _listen

    sock, _ = _listen("127.0.0.1:0")
    try:
        client = socket.create_connection(sock.getsockname())
        accepted, _ = sock.accept()
        assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
        accepted.close()
        client.close()
    finally:
        sock.close()


def test_a_session_for_a_pool_that_does_not_exist_is_refused_at_once(
        api: TestClient, registry: Registry) -> None:
    registry.serve_namespaces(["default"])
    resp = api.post("/v1/sessions?wait=30", json={"pool": "default/no-such-pool",
                                                  "command": ["x"]})
    assert resp.status_code == 404 and resp.headers["content-type"] == \
        "application/problem+json"
    err = resp.json()
    assert (err["code"], err["field"], err["value"]) == ("POOL_NOT_FOUND", "pool",
                                                         "default/no-such-pool")
    assert "kubectl get agentpools -n default" in err["detail"]
    assert registry.pool_view("default/no-such-pool").pending_sessions == 0


def test_session_run_for_a_pool_nobody_serves_exits_2_at_once(
        registry: Registry, tmp_path: Path) -> None:
    """Before POOL_NOT_FOUND, `session run --pool no-such-pool` waited forever."""
    import json

    from click.testing import CliRunner

    from automation.cli.main import cli

    registry.serve_namespaces(["default"])
    server = BrokerThread(create_app(registry, expire_every=None), "127.0.0.1:0")
    try:
        began = time.monotonic()
        res = CliRunner().invoke(cli, [
            "--home", str(tmp_path), "session", "run", "--pool", "no-such-pool",
            "--namespace", "default", "--broker", server.url, "--json", "--", "true"],
            env={"ANYCLOUD_TOKEN": member_token(registry.ledger)})
        assert time.monotonic() - began < 20
    finally:
        server.stop()
    assert res.exit_code == 2, res.output
    err = json.loads(res.stdout)["error"]
    assert (err["code"], err["field"], err["value"]) == ("POOL_NOT_FOUND", "pool",
                                                         "default/no-such-pool")
    assert "kubectl get agentpools -n default" in err["message"]
