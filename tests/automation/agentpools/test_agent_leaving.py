"""An agent that has deregistered never registers again, whatever call was still in flight
(CI once saw the pool keep a ready agent whose process had exited: its work poll, answered
404 after the deregister, registered it again)."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from automation.agentpools.agent import Agent, AgentSettings
from automation.agentpools.client import BrokerUnreachable
from automation.errors import NotFound
from tests.automation.agentpools.session_dirs import reachable_dir


class Broker:
    """Plays the broker: the work poll is held open until the agent deregisters, then told
    404, as the real broker answers a poll of an agent that is gone."""

    def __init__(self) -> None:
        self.base_url = "http://broker.invalid"
        self.registers = 0
        self.gone = threading.Event()
        self.polling = threading.Event()

    def register(self, pool: str, agent_id: str, pod: str, slots: int) -> Any:
        self.registers += 1
        self.gone.clear()
        return SimpleNamespace(slots=slots)

    def heartbeat(self, agent_id: str, busy_slots: int, running: list[str],
                  draining: bool = False) -> Any:
        if self.gone.is_set():
            raise NotFound("agent", agent_id, field="agent")
        return SimpleNamespace(cancel=[])

    def work(self, agent_id: str, wait: float = 0) -> list[Any]:
        self.polling.set()
        self.gone.wait(wait)
        if self.gone.is_set():
            raise NotFound("agent", agent_id, field="agent")
        return []

    def deregister(self, agent_id: str) -> Any:
        self.gone.set()
        return None


def test_a_call_answered_404_after_the_deregister_does_not_register_again() -> None:
    broker = Broker()
    with reachable_dir() as data:
        _leave_once(broker, data)


def _leave_once(broker: Broker, data: Path) -> None:
    settings = AgentSettings(pool="default/cpu", agent_id="agent-a", pod="agent-a", slots=1,
                             data_dir=data, heartbeat_interval=0.05, grace=1, work_wait=30)
    logged: list[str] = []
    agent = Agent(broker, settings, lambda kind, message, _: logged.append(message))  # type: ignore[arg-type]
    before = set(threading.enumerate())
    assert _run_until(agent, broker.polling) == [0]
    threads = set(threading.enumerate()) - before  # the poller and the heartbeat
    for thread in threads:
        thread.join(5)
    assert broker.registers == 1, logged
    assert broker.gone.is_set(), logged
    assert not [t.name for t in threads if t.is_alive()]


def _run_until(agent: Agent, reached: threading.Event) -> list[int]:
    """Run the agent in a thread, stop it once ``reached`` is set; its exit code(s)."""
    exit_codes: list[int] = []
    runner = threading.Thread(target=lambda: exit_codes.append(agent.run()))
    runner.start()
    assert reached.wait(10)
    agent.stop()
    runner.join(10)
    return exit_codes


class Unreachable:
    """A broker nobody answers at: every call fails as a refused connection does."""

    base_url = "http://127.0.0.1:1"

    def __init__(self) -> None:
        self.calls = 0
        self.called = threading.Event()

    def register(self, *args: Any) -> Any:
        self.calls += 1
        self.called.set()
        raise BrokerUnreachable("connection refused")


def test_sigterm_before_the_broker_ever_answered_stops_the_agent_without_spinning() -> None:
    # It used to retry its registration with no back-off once stopping (the stop event's
    # wait returns at once): 8,000 log lines a second at 100 % CPU until SIGKILL.
    broker = Unreachable()
    logged: list[str] = []
    with reachable_dir() as data:
        agent = Agent(broker, AgentSettings(pool="default/cpu", agent_id="agent-a",  # type: ignore[arg-type]
                                            pod="agent-a", slots=1, data_dir=data),
                      lambda kind, message, _: logged.append(message))
        exit_codes = _run_until(agent, broker.called)
    assert exit_codes == [0], logged
    assert broker.calls <= 3, f"{broker.calls} registrations: it spun"
    assert "stopped before the broker answered its registration" in logged[-1]


def test_a_call_that_must_go_on_while_stopping_still_backs_off() -> None:
    # A session's release is retried past the stop (until_stopped False): its back-off must
    # not collapse to nothing once the stop event is set (whose wait returns at once); it
    # waits on the abandon event instead, which ends the retries.
    waits: list[float] = []

    class Abandon(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            waits.append(timeout or 0)
            if len(waits) == 3:
                self.set()
            return super().wait(0)  # the back-off itself is not waited out in the test

    agent = Agent(Unreachable(), AgentSettings(  # type: ignore[arg-type]
        pool="default/cpu", agent_id="agent-a", pod="agent-a", slots=1, data_dir=Path("/")),
        lambda *_: None)
    agent.abandon = Abandon()
    agent.stop()

    def refused() -> None:
        raise BrokerUnreachable("connection refused")

    with pytest.raises(BrokerUnreachable):
        agent.retry(refused)
    assert waits == [0.5, 1.0, 2.0]  # each back-off asked for, doubling, then abandoned


@pytest.mark.parametrize("status", [429, 500, 503])
def test_a_release_the_broker_could_not_serve_now_is_sent_again(status: int) -> None:
    """CI once saw a session whose command ended well failed as "agent … left": its release
    was answered 429 (the agents of a pool share one token, and so one rate limit) or a 5xx,
    the agent took that for a final refusal, forgot the session and deregistered, which
    fails what it still runs. A busy broker is retried like an unreachable one."""
    import httpx2

    from automation.agentpools.client import BrokerBusy, BrokerClient

    answers = [status, 200]
    released: list[dict[str, Any]] = []

    def broker(request: httpx2.Request) -> httpx2.Response:
        code = answers.pop(0)
        if code != 200:
            return httpx2.Response(code, json={"code": "RESOURCE_EXHAUSTED",
                                               "detail": "too many requests: retry in 0.1s"},
                                   headers={"Retry-After": "0.1"})
        import json

        released.append(json.loads(request.content))
        return httpx2.Response(200, json={
            "id": "se-1", "pool": "default/cpu", "command": ["true"], "state": "done",
            "agentId": "agent-a", "exitCode": 0, "createdAt": "2026-12-07T00:00:00Z"})

    client = BrokerClient("http://broker.invalid")
    client._http = httpx2.Client(base_url="http://broker.invalid",
                                 transport=httpx2.MockTransport(broker))
    with pytest.raises(BrokerBusy):  # what the agent's retry takes for "try again"
        BrokerClient.finish(client, "se-1", "agent-a", 0)
    answers[:] = [status, 200]
    with reachable_dir() as data:
        agent = Agent(client, AgentSettings(pool="default/cpu", agent_id="agent-a",
                                            pod="agent-a", slots=1, data_dir=data),
                      lambda *_: None)
        agent.stopping.set()  # as when SIGTERM came while the session ran
        session = agent.retry(lambda: client.finish("se-1", "agent-a", 0))
    assert session.state == "done" and answers == []
    assert released == [{"agentId": "agent-a", "exitCode": 0, "error": None}]
