"""An agent that has deregistered never registers again, whatever call was still in flight
(CI once saw the pool keep a ready agent whose process had exited: its work poll, answered
404 after the deregister, registered it again)."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from automation.agentpools.agent import Agent, AgentSettings
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
    exit_codes: list[int] = []
    runner = threading.Thread(target=lambda: exit_codes.append(agent.run()))
    runner.start()
    assert broker.polling.wait(10)
    agent.stop()
    runner.join(10)
    assert exit_codes == [0]
    threads = set(threading.enumerate()) - before  # the poller and the heartbeat
    for thread in threads:
        thread.join(5)
    assert broker.registers == 1, logged
    assert broker.gone.is_set(), logged
    assert not [t.name for t in threads if t.is_alive()]
