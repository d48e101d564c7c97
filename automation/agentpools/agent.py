"""The agent: the process in each worker pod that serves its pool's sessions.

It registers with the broker (its id is its pod name), then three things run at once:
- the *work poller* long-polls ``GET /v1/agents/{id}/work`` and starts each session it is
  given: the command, in a fresh directory ``<sessions root>/<session id>``, stdin closed, in
  a process group of its own, as another user than the agent's and with a clean environment
  (``sandbox.py``: nothing of the agent's, its token least of all, reaches a session);
- the *heartbeat* reports every ``heartbeat_interval`` which sessions run (slot use) and
  stops those the broker names in ``cancel`` (released by their client, or given up);
- per session, reader threads pass stdout and stderr to a poster that sends them to the
  broker in order (``POST /v1/sessions/{id}/output``); when the command has ended and its
  output is all posted, the session is released with the exit code.

SIGTERM (or SIGINT): the next heartbeat says ``draining`` at once (the broker gives it no new
session), running sessions get ``grace`` seconds to end, the rest are stopped (SIGTERM to the
process group, SIGKILL 5 s later) and released with their exit codes, then the agent
deregisters and exits 0.

The broker being away for a while is survived: every call is retried until it answers (or
the agent is told to stop); a broker that forgot the agent (404) is registered with again,
unless the agent is stopping: a leaving agent never rejoins its pool.

Retired (410 AGENT_RETIRED, to a heartbeat, a work poll or a register): the operator took
this agent out of its pool before deleting its pod (scale-down), or the pool was deleted. It
never registers again under its id: it takes no new session, stops at once what still runs
(the broker has already failed those sessions), does not deregister (it is out already) and
exits 0 without waiting for its SIGTERM, which is on its way. Exiting rather than idling
until SIGTERM: a pod whose delete failed shows its container completing (and restarting, to
be refused again) instead of hiding an agent that serves nothing, and the operator replaces
it as a pod that never registered once killUnknownAfterSecond has passed.

Its token refused (401) after it had registered: the pool was deleted (its agent tokens are
revoked with it) or recreated (a new token was minted): the same as retired. Refused before
it ever registered (a wrong or missing token): the agent exits 1 naming the token problem,
and Kubernetes shows the container failing.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import queue
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from automation.agentpools.client import BrokerClient, BrokerUnreachable
from automation.agentpools.config import SandboxConfig
from automation.agentpools.sandbox import Sandbox, SessionRefused, prepare
from automation.agentpools.wire import AgentRetired, Session
from automation.errors import AnycloudError, NotFound, Unauthenticated

Log = Callable[[str, str, dict[str, Any]], None]
KILL_AFTER = 5.0  # seconds between SIGTERM and SIGKILL when a session is stopped
READ_SIZE = 64 * 1024


@dataclass(frozen=True)
class AgentSettings:
    pool: str  # namespace/name
    agent_id: str
    pod: str
    slots: int
    data_dir: Path
    heartbeat_interval: float = 5.0
    grace: float = 25.0
    work_wait: float = 10.0
    keep_session_dirs: bool = False
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)


class SessionRun:
    """One session's command on this agent."""

    def __init__(self, session: Session, agent: Agent) -> None:
        self.session = session
        self.agent = agent
        self.proc: subprocess.Popen[bytes] | None = None
        self.done = threading.Event()
        self._stopping = False
        self._lock = threading.Lock()

    @property
    def id(self) -> str:
        return self.session.id

    def start(self) -> None:
        threading.Thread(target=self._run, name=f"session-{self.id}", daemon=True).start()

    def stop(self, why: str) -> None:
        """SIGTERM to the command's process group, SIGKILL if it is still there later."""
        with self._lock:
            if self._stopping or self.proc is None or self.done.is_set():
                self._stopping = True
                return
            self._stopping = True
            proc = self.proc
        self.agent.log("stop", f"session {self.id}: stopping ({why})", {"session": self.id})
        _signal_group(proc, signal.SIGTERM)

        def kill_later() -> None:
            if not self.done.wait(KILL_AFTER):
                _signal_group(proc, signal.SIGKILL)

        threading.Thread(target=kill_later, daemon=True).start()

    def _run(self) -> None:
        try:
            self._run_and_release()
        except AnycloudError as exc:  # the broker could not be told (the agent gave up)
            self.agent.log("session", f"session {self.id}: not reported: {exc.message}",
                           {"session": self.id})
        finally:
            self.done.set()
            self.agent.forget(self)
            workdir = self.agent.sandbox.root / self.id
            if not self.agent.settings.keep_session_dirs:
                shutil.rmtree(workdir, ignore_errors=True)

    def _run_and_release(self) -> None:
        agent, sid, box = self.agent, self.id, self.agent.sandbox
        try:
            workdir = box.session_dir(sid)
            with self._lock:
                if self._stopping:
                    raise OSError("cancelled before it started")
                self.proc = subprocess.Popen(
                    self.session.command, cwd=workdir, env=box.env(sid, agent.settings.pool,
                                                                   agent.settings.agent_id,
                                                                   workdir),
                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    start_new_session=True, **box.popen_user())
        except (OSError, SessionRefused) as exc:
            why = (f"refused: {exc}" if isinstance(exc, SessionRefused) else
                   f"cannot run {self.session.command[0]!r}: {exc.strerror or exc}")
            agent.log("session", f"session {sid}: {why}", {"session": sid})
            agent.retry(lambda: agent.client.finish(sid, agent.settings.agent_id, None,
                                                    error=why))
            return
        agent.log("session", f"session {sid}: running {self.session.command}",
                  {"session": sid})
        chunks: queue.Queue[tuple[str, str] | None] = queue.Queue()
        assert self.proc.stdout is not None and self.proc.stderr is not None
        readers = [threading.Thread(target=_read, args=(pipe, name, chunks), daemon=True)
                   for pipe, name in ((self.proc.stdout, "stdout"),
                                      (self.proc.stderr, "stderr"))]
        poster = threading.Thread(target=self._post, args=(chunks,), daemon=True)
        for t in (*readers, poster):
            t.start()
        code = self.proc.wait()
        for t in readers:
            t.join()
        chunks.put(None)
        poster.join()
        self.done.set()
        agent.log("session", f"session {sid}: exited {code}", {"session": sid, "exitCode": code})
        agent.retry(lambda: agent.client.finish(sid, agent.settings.agent_id, code))

    def _post(self, chunks: queue.Queue[tuple[str, str] | None]) -> None:
        """Send output in order, everything available in one post."""
        ended = False
        while not ended:
            batch: list[tuple[str, str]] = []
            item = chunks.get()
            while True:
                if item is None:
                    ended = True
                    break
                batch.append(item)
                try:
                    item = chunks.get_nowait()
                except queue.Empty:
                    break
            if batch:
                try:
                    self._send(batch)
                except AnycloudError as exc:  # the session ended elsewhere: drop the rest
                    self.agent.log("session", f"session {self.id}: output refused: {exc}",
                                   {"session": self.id})


    def _send(self, batch: list[tuple[str, str]]) -> None:
        agent = self.agent
        agent.retry(lambda: agent.client.post_output(self.id, agent.settings.agent_id, batch))


def _read(pipe: Any, stream: str, chunks: queue.Queue[tuple[str, str] | None]) -> None:
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    fd = pipe.fileno()
    while True:
        data = os.read(fd, READ_SIZE)
        text = decoder.decode(data, final=not data)
        if text:
            chunks.put((stream, text))
        if not data:
            pipe.close()
            return


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


class Agent:
    def __init__(self, client: BrokerClient, settings: AgentSettings, log: Log) -> None:
        self.client = client
        self.settings = settings
        self.log = log
        self.stopping = threading.Event()
        # Set when stopping has taken too long: calls to the broker stop being retried.
        self.abandon = threading.Event()
        # Set when the broker said this agent is retired (410): stop, never register again.
        self.retired = threading.Event()
        self.runs: dict[str, SessionRun] = {}
        self._runs_lock = threading.Lock()
        self._registered = threading.Lock()
        self._registered_once = threading.Event()
        # Set once it has deregistered (under ``_registered``): a call still in flight that
        # is told 404 must not register it again, or the pool would keep a ready agent
        # whose process has exited.
        self.left = threading.Event()
        self._sandbox: Sandbox | None = None

    @property
    def sandbox(self) -> Sandbox:
        """How sessions run, settled at the start of ``run``."""
        if self._sandbox is None:
            raise RuntimeError("the agent has not started: no sandbox yet")
        return self._sandbox

    # the broker, patiently

    def retry(self, call: Callable[[], Any], *, until_stopped: bool = False) -> Any:
        """Call until the broker answers; a broker that forgot us is registered with again.
        ``until_stopped``: give up (None) once the agent is stopping."""
        delay = 0.5
        while True:
            try:
                return call()
            except BrokerUnreachable as exc:
                if until_stopped and self.stopping.is_set():
                    return None
                if self.abandon.is_set():
                    raise
                self.log("broker", f"{exc.message}; retrying in {delay:g}s", {})
            except AgentRetired as exc:
                self._retire(exc)
                raise
            except Unauthenticated as exc:
                if not self._registered_once.is_set():
                    raise
                retired = AgentRetired(self.settings.agent_id, self.settings.pool, message=(
                    f"the broker no longer takes this agent's token ({exc.message}): its pool "
                    "was deleted or recreated"))
                self._retire(retired)
                raise retired from exc
            except NotFound as exc:
                if exc.field != "agent":
                    raise
                if self.stopping.is_set():  # leaving: a broker that forgot us is not rejoined
                    if until_stopped:
                        return None
                    raise
                self.log("broker", "the broker does not know this agent: registering again",
                         {})
                self.register()
                continue
            # The back-off is waited whatever happens: once stopping is set, waiting on it
            # returns at once, and a call that must still go on (a release) would spin.
            # Stopping ends the wait of a call that gives up then; abandoning, every wait.
            ends = self.abandon if self.stopping.is_set() else self.stopping
            if ends.wait(delay) and until_stopped:
                return None
            delay = min(delay * 2, 5.0)

    def register(self, *, until_stopped: bool = False) -> bool:
        """Register (again). ``until_stopped``: give up once the agent is stopping (False: it
        stopped before the broker answered)."""
        s = self.settings
        with self._registered:
            if self.left.is_set():
                raise NotFound("agent", s.agent_id, field="agent")
            agent = self.retry(lambda: self.client.register(s.pool, s.agent_id, s.pod, s.slots),
                               until_stopped=until_stopped)
            if agent is None:
                return False
            self._registered_once.set()
        self.log("registered", f"agent {s.agent_id} registered in pool {s.pool} with "
                 f"{s.slots} slot(s) at {self.client.base_url}",
                 {"agent": s.agent_id, "pool": s.pool, "slots": agent.slots})
        return True

    def _retire(self, exc: AgentRetired) -> None:
        """Told 410 by the broker: stop, without registering again (module docstring)."""
        if not self.retired.is_set():
            self.retired.set()
            self.log("retired", f"{exc.message}: stopping without registering again",
                     {"agent": self.settings.agent_id})
        self.stopping.set()

    # the three loops

    def run(self) -> int:
        s = self.settings
        # Refused here, before registering, when the config cannot be honoured (exit 2).
        self._sandbox = prepare(s.sandbox, s.data_dir, s.agent_id)
        try:
            return self._serve()
        finally:
            trouble = self._sandbox.release()
            if trouble:
                self.log("sandbox", f"could not unmount {self._sandbox.mounted}: {trouble}", {})

    def _serve(self) -> int:
        who = (f"uid {self.sandbox.uid}" if self.sandbox.uid is not None
               else "the agent's own user (unsafe)")
        self.log("sandbox", self.sandbox.refusal or f"sessions run as {who} in "
                 f"{self.sandbox.root}/<session id>", {"root": str(self.sandbox.root),
                                                        "uid": self.sandbox.uid})
        try:
            if not self.register(until_stopped=True):
                # SIGTERM while the broker was unreachable: nothing to drain or leave.
                self.log("stopped", f"agent {self.settings.agent_id} stopped before the "
                         "broker answered its registration", {})
                return 0
        except AgentRetired:  # a container restarted in a pod being deleted: logged
            return 0
        heart = threading.Thread(target=self._heartbeats, name="heartbeat", daemon=True)
        poller = threading.Thread(target=self._poll_work, name="work", daemon=True)
        heart.start()
        poller.start()
        self.stopping.wait()
        if self.retired.is_set():
            return self._leave_retired(poller)
        self.log("stopping", f"stopping: no new sessions; {len(self.running())} running get "
                 f"{self.settings.grace:g}s to end", {"running": self.running()})
        try:
            self._beat()  # draining now, not at the next beat: nothing new is assigned after
        except AgentRetired:  # retired meanwhile (its pool deleted): logged
            return self._leave_retired(poller)
        deadline = time.monotonic() + self.settings.grace
        while self.running() and time.monotonic() < deadline and not self.retired.is_set():
            time.sleep(0.1)
        if self.retired.is_set():  # the heartbeat was told 410 during the grace period
            return self._leave_retired(poller)
        for run in self._snapshot():
            run.stop("the agent is stopping and its grace period is over")
        deadline = time.monotonic() + KILL_AFTER + 5
        while self.running() and time.monotonic() < deadline:
            time.sleep(0.1)
        if self.running():  # stopped, but the broker cannot be told: do not wait forever
            self.log("broker", "the broker is not reachable: leaving without reporting "
                     f"{self.running()}", {})
            self.abandon.set()
            deadline = time.monotonic() + 2
            while self.running() and time.monotonic() < deadline:
                time.sleep(0.1)
        # The poller may sit in a long poll: not waited for. A session it would still be
        # given was assigned before the draining beat; deregistering fails it (never lost).
        poller.join(timeout=0.5)
        with self._registered:
            self.left.set()
            try:
                self.client.deregister(self.settings.agent_id)
            except AnycloudError as exc:
                self.log("broker", f"could not deregister: {exc.message}", {})
        self.log("stopped", f"agent {self.settings.agent_id} stopped", {})
        return 0

    def _leave_retired(self, poller: threading.Thread) -> int:
        """Retired: what still runs was already failed by the broker (its pool was deleted):
        stop it now, no grace, and leave without deregistering."""
        # Their releases are pointless now: an unreachable broker is not waited for.
        self.abandon.set()
        for run in self._snapshot():
            run.stop("the broker retired this agent")
        deadline = time.monotonic() + KILL_AFTER + 5
        while self.running() and time.monotonic() < deadline:
            time.sleep(0.1)
        poller.join(timeout=0.5)
        self.log("stopped", f"agent {self.settings.agent_id} stopped (retired)", {})
        return 0

    def stop(self) -> None:
        self.stopping.set()

    def running(self) -> list[str]:
        with self._runs_lock:
            return sorted(self.runs)

    def forget(self, run: SessionRun) -> None:
        with self._runs_lock:
            self.runs.pop(run.id, None)

    def _snapshot(self) -> list[SessionRun]:
        with self._runs_lock:
            return list(self.runs.values())

    def _beat(self) -> None:
        running = self.running()
        reply = self.retry(lambda: self.client.heartbeat(
            self.settings.agent_id, len(running), running, draining=self.stopping.is_set()),
            until_stopped=self.stopping.is_set())
        if reply is None:
            return
        with self._runs_lock:
            doomed = [self.runs[s] for s in reply.cancel if s in self.runs]
        for run in doomed:
            run.stop("released by its client, or given up by the broker")

    def _heartbeats(self) -> None:
        while True:
            try:
                self._beat()
            except AgentRetired:
                return  # nothing more to tell the broker
            except AnycloudError as exc:
                self.log("broker", f"heartbeat refused: {exc.message}", {})
            if self.stopping.wait(self.settings.heartbeat_interval) and not self.running():
                return

    def _poll_work(self) -> None:
        while not self.stopping.is_set():
            try:
                given = self.retry(lambda: self.client.work(self.settings.agent_id,
                                                            wait=self.settings.work_wait),
                                   until_stopped=True) or []
            except AgentRetired:
                return
            except AnycloudError as exc:
                self.log("broker", f"work refused: {exc.message}", {})
                self.stopping.wait(1.0)
                continue
            for session in given:
                # Given to us (even while stopping): it runs, within the grace period.
                run = SessionRun(session, self)
                with self._runs_lock:
                    self.runs[session.id] = run
                run.start()
