"""Ctrl-C on ``anycloud session run`` always cancels, in bounded time (issue 21).

The command runs in this process (``CliRunner``) against a real broker (uvicorn in a thread)
whose registry can hold an answer back, as a loaded broker or a slow client does; the test
plays the agent. SIGINT goes to the main thread (``pthread_kill``), where the command runs,
at the moment each test is about: while the acquire is unanswered, while the cancel is, while
the agent does not confirm, and with SIGINT ignored when the command started (what a
non-interactive shell does to a command it runs with ``&``)."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from automation.agentpools.registry import Registry
from automation.agentpools.wire import Session
from automation.api.broker import BrokerThread, create_app
from automation.cli import cli
from automation.cli import session as session_cli
from automation.ledger import open_ledger
from tests.automation.agentpools.tokens import member_token

POOL = "default/cpu"
AGENT = "agent-a"


class Broker(Registry):
    """The registry, but ``acquire`` and a client's release (its cancel) answer only once
    ``answer_acquire`` / ``answer_cancel`` are set; ``acquired`` / ``cancel_asked`` say the
    request is there (and its change is made)."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.acquired, self.answer_acquire = threading.Event(), threading.Event()
        self.cancel_asked, self.answer_cancel = threading.Event(), threading.Event()
        self.over = threading.Event()  # the test is over: the agent stops playing
        self.answer_acquire.set()
        self.answer_cancel.set()

    def acquire(self, pool: str, command: Any, owner: str | None = None) -> Session:
        s = super().acquire(pool, command, owner)
        self.acquired.set()
        self.answer_acquire.wait(20)
        return s

    def release(self, session_id: str, exit_code: int | None = None, *,
                agent: str | None = None, error: str | None = None) -> Session:
        s = super().release(session_id, exit_code, agent=agent, error=error)
        if agent is None:
            self.cancel_asked.set()
            self.answer_cancel.wait(20)
        return s


@pytest.fixture
def broker(sqlite_url: str) -> Iterator[tuple[Broker, str, str]]:
    ledger = open_ledger(sqlite_url)
    registry = Broker(ledger)
    registry.register(POOL, AGENT, AGENT, 1)
    server = BrokerThread(create_app(registry, expire_every=None, poll_interval=0.05),
                          "127.0.0.1:0")
    try:
        yield registry, server.url, member_token(ledger)
    finally:
        registry.over.set()
        registry.answer_acquire.set()
        registry.answer_cancel.set()
        registry.deregister(AGENT)  # ends the long polls a client that left still has here
        server.stop()
        ledger.dispose()


def ctrl_c() -> None:
    """What the terminal does on Ctrl-C, to the thread the command runs in."""
    signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)


def run(tmp_path: Path, url: str, token: str, script: Callable[[], None]) -> Result:
    """``session run -- sleep 60`` here, while ``script`` plays the terminal and the agent in
    a thread. The agent stops the command when asked (``agent``), or never; the session
    ends by itself after 8 s whatever happens, so that a client that missed its Ctrl-C fails
    the test instead of hanging it."""
    errors: list[BaseException] = []

    def play() -> None:
        try:
            script()
        except BaseException as exc:  # reported below
            errors.append(exc)

    player = threading.Thread(target=play, daemon=True)
    player.start()
    previous = signal.getsignal(signal.SIGINT)
    try:
        res = CliRunner().invoke(cli, ["--home", str(tmp_path), "session", "run", "--pool",
                                       "cpu", "--broker", url, "--", "sleep", "60"],
                                 env={"ANYCLOUD_TOKEN": token})
    finally:
        now = signal.getsignal(signal.SIGINT)
        signal.signal(signal.SIGINT, previous)
    player.join(30)
    assert not errors, errors
    assert now == previous, "session run put back the SIGINT handler it found"
    return res


def agent(registry: Broker, stops: bool = True, gives_up_after: float = 8.0) -> str:
    """The agent: takes the session; once its cancel is asked (and ``stops``) the command
    ends (SIGTERM, -15); after ``gives_up_after`` it ends by itself (exit 0)."""
    deadline = time.monotonic() + gives_up_after
    while not (given := registry.work(AGENT)):
        assert time.monotonic() < deadline, "the session never reached the agent"
        time.sleep(0.02)
    sid = given[0].id

    def serve() -> None:
        while time.monotonic() < deadline and not registry.over.is_set():
            if stops and registry.session(sid).cancel_requested_at is not None:
                registry.release(sid, -15, agent=AGENT)
                return
            time.sleep(0.02)
        if not registry.over.is_set():
            registry.release(sid, 0, agent=AGENT)

    threading.Thread(target=serve, daemon=True).start()
    return sid


def test_ctrl_c_while_the_acquire_is_unanswered_cancels_once_it_is(
        broker: tuple[Broker, str, str], tmp_path: Path) -> None:
    """The broker has given the session its slot, but its answer has not reached the client
    (a loaded machine): the Ctrl-C is kept and cancels the session once the id is known.
    It used to escape as KeyboardInterrupt (click: "Aborted!", exit 1) and the command ran
    on, its slot held, with nobody to watch it."""
    registry, url, token = broker
    registry.answer_acquire.clear()
    sid: list[str] = []

    def script() -> None:
        assert registry.acquired.wait(10)
        time.sleep(0.2)  # the client is waiting for the answer
        ctrl_c()
        time.sleep(0.2)
        registry.answer_acquire.set()
        sid.append(agent(registry))

    res = run(tmp_path, url, token, script)
    assert res.exit_code == 130, res.output
    assert "cancelling session" in res.output
    assert registry.session(sid[0]).state == "cancelled"


def test_ctrl_c_cancels_even_if_sigint_was_ignored_when_it_started(
        broker: tuple[Broker, str, str], tmp_path: Path) -> None:
    """Started with SIGINT ignored (``anycloud session run … &`` in a script, or a test
    runner started that way): Ctrl-C, or SIGINT from whoever runs it, still cancels. It
    used to do nothing: the client waited for the command to end by itself."""
    registry, url, token = broker
    sid: list[str] = []

    def script() -> None:
        sid.append(agent(registry))
        time.sleep(0.3)  # the client is in its output poll
        ctrl_c()

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # put back by run()
    started = time.monotonic()
    res = run(tmp_path, url, token, script)
    assert res.exit_code == 130, res.output
    assert "cancelling session" in res.output
    assert time.monotonic() - started < 6
    assert registry.session(sid[0]).state == "cancelled"


def test_an_agent_that_does_not_confirm_is_waited_for_a_bounded_time(
        broker: tuple[Broker, str, str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent does not stop the command (it is frozen, or lost): the client leaves
    after CANCEL_WAIT, exit 130, saying so; the cancel stays asked at the broker. It used to
    wait for as long as the command ran."""
    registry, url, token = broker
    monkeypatch.setattr(session_cli, "CANCEL_WAIT", 1.0, raising=False)  # new in issue 21
    sid: list[str] = []

    def script() -> None:
        sid.append(agent(registry, stops=False))
        time.sleep(0.3)
        ctrl_c()

    started = time.monotonic()
    res = run(tmp_path, url, token, script)
    assert res.exit_code == 130, res.output
    assert time.monotonic() - started < 6, res.output
    assert "has not confirmed the stop within 1s" in res.output
    assert registry.session(sid[0]).cancel_requested_at is not None


def test_a_second_ctrl_c_leaves_at_once_while_the_cancel_is_unanswered(
        broker: tuple[Broker, str, str], tmp_path: Path) -> None:
    """The cancel is sent but the broker does not answer: the second Ctrl-C exits 130 at
    once. It used to escape as KeyboardInterrupt (click: "Aborted!", exit 1)."""
    registry, url, token = broker
    registry.answer_cancel.clear()
    left_after: list[float] = []

    def script() -> None:
        agent(registry, stops=False)
        time.sleep(0.3)
        ctrl_c()
        assert registry.cancel_asked.wait(10)
        time.sleep(0.2)
        left_after.append(time.monotonic())
        ctrl_c()

    res = run(tmp_path, url, token, script)
    assert res.exit_code == 130, res.output
    assert time.monotonic() - left_after[0] < 2, res.output
    assert "left session" in res.output
