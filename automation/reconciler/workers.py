"""Many pools at once: a pass's pool turns run side by side, bounded per credential and
overall, and their stack operations run in worker processes.

Why processes: the SDK's mock settings (``pulumi.runtime.settings``) and the Automation
API's inline-program language server are process-global, so two stack operations can never
share a process. Why ``spawn``: a forked child of a process that has run the SDK inherits
its asyncio loop and gRPC threads half-alive; a spawned one starts clean.

Why one single-process executor per slot rather than one shared pool: a worker that dies
(a SIGKILL, the OOM killer) breaks a ``ProcessPoolExecutor`` for every operation in it; here
it fails only the pool whose operation it ran, and the slot gets a fresh worker.

The limits bound pool turns, and so stack operations: at most ``per_credential`` turns of
pools sharing a credential (one cloud account's API rate) and ``overall`` turns in all (one
worker process each, ~0.2-0.5 GB with the engine and its plugins). A credential the cloud
throttled gets half its slots for the rest of the pass. The ledger and the per-pool leases
stay the only coordination between reconcilers: nothing here is shared across processes
except the stack operation a worker runs for its caller.
"""

from __future__ import annotations

import importlib
import os
import queue
import re
import secrets
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool, ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from multiprocessing.managers import BaseManager, BaseProxy
from pathlib import Path
from typing import Any, Generic, Literal, Protocol, TypeVar

from automation.engine.errors import EngineFailed, StackTimeout
from automation.engine.processes import end_leftovers, end_session, worker_session
from automation.engine.runner import (
    DriftChange,
    ProgressEvent,
    ProgressSink,
    RunResult,
    StackRunner,
    StackTarget,
)
from automation.errors import AnycloudError
from automation.settings import Limits

T = TypeVar("T")
R = TypeVar("R")
T_contra = TypeVar("T_contra", contravariant=True)

# Held by whatever runs the SDK in this process while turns run on threads (the add-on and
# ingress steps, a runner no worker can rebuild): its settings are process-global.
IN_PROCESS_SDK = threading.RLock()


class SlotPolicy:
    """Which waiting turn may start: first come, first served among those whose credential
    and the pass as a whole have a free slot, so a busy credential never holds up others."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.in_flight: Counter[str] = Counter()
        self.caps: dict[str, int] = {}

    def cap(self, credential: str) -> int:
        return self.caps.get(credential, self.limits.per_credential)

    def admit(self, credential: str) -> bool:
        if sum(self.in_flight.values()) >= self.limits.overall:
            return False
        if self.in_flight[credential] >= self.cap(credential):
            return False
        self.in_flight[credential] += 1
        return True

    def release(self, credential: str) -> None:
        self.in_flight[credential] -= 1

    def throttled(self, credential: str) -> None:
        """The cloud asked this credential to slow down: half its slots (at least one)."""
        self.caps[credential] = max(1, self.cap(credential) // 2)


class TurnExecutor(Protocol[T_contra, R]):
    """Runs admitted turns; ``wait_any`` blocks until at least one has finished."""

    def submit(self, index: int, item: T_contra) -> None: ...

    def wait_any(self) -> list[tuple[int, R]]: ...


def dispatch(items: Sequence[T], credential_of: Callable[[T], str], policy: SlotPolicy,
             executor: TurnExecutor[T, R],
             throttled: Callable[[R], bool] = lambda r: False) -> list[R]:
    """Every item's turn, each started as soon as the policy admits it; results in the
    order of ``items``. The same loop drives the threads of a real pass and the virtual
    clock of ``benchmarks/bench_many_pools.py``."""
    waiting = list(range(len(items)))
    results: dict[int, R] = {}
    running = 0
    while waiting or running:
        for i in list(waiting):
            if policy.admit(credential_of(items[i])):
                waiting.remove(i)
                executor.submit(i, items[i])
                running += 1
        for i, result in executor.wait_any():
            running -= 1
            credential = credential_of(items[i])
            policy.release(credential)
            if throttled(result):
                policy.throttled(credential)
            results[i] = result
    return [results[i] for i in range(len(items))]


class ThreadTurns(Generic[T, R]):
    """Turns on a thread pool; a turn that raises fails the whole pass (the reconciler's
    turns record their own failures and never raise)."""

    def __init__(self, turn: Callable[[T], R], threads: int) -> None:
        self.turn = turn
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="pool-turn")
        self.running: dict[Future[R], int] = {}

    def submit(self, index: int, item: T) -> None:
        self.running[self.pool.submit(self.turn, item)] = index

    def wait_any(self) -> list[tuple[int, R]]:
        done, _ = wait(list(self.running), return_when=FIRST_COMPLETED)
        return [(self.running.pop(f), f.result()) for f in done]

    def close(self) -> None:
        self.pool.shutdown(wait=True)


# --------------------------------------------------------------------------- throttling

# What the clouds answer when a caller goes too fast, as the engine relays it. Quota errors
# ("Quota 'CPUS' exceeded", InsufficientInstanceCapacity) are not throttling: waiting does
# not fix them. Neither is "another update is in progress" (a locked stack: STACK_LOCKED).
_THROTTLING = re.compile(
    r"RequestLimitExceeded|Throttl(?:ing|ed)(?:Exception)?\b|Rate exceeded|rate ?limit ?exceeded"
    r"|rateLimitExceeded|userRateLimitExceeded|TooManyRequests|Too Many Requests"
    r"|SubscriptionRequestsThrottled|\b429\b",
    re.IGNORECASE)


def is_throttling(exc: BaseException) -> bool:
    """An engine failure the cloud caused by rate-limiting us: back off, do not fail."""
    if not isinstance(exc, EngineFailed) or exc.code == "STACK_LOCKED":
        return False
    return bool(_THROTTLING.search(exc.message))


class WorkerDied(AnycloudError):
    """Not the cloud's doing: no provider failure is counted, the next pass tries again."""

    default_code = "WORKER_DIED"


# --------------------------------------------------------------------------- worker side


@dataclass(frozen=True)
class RunnerSpec:
    """How a worker rebuilds its caller's runner: a factory by import path, its arguments
    (picklable), and, for the mock engine, where the caller serves its cloud."""

    factory: str  # "package.module:callable"
    kwargs: dict[str, Any] = field(default_factory=dict)
    cloud: tuple[Any, bytes] | None = None  # (address, authkey) of the caller's cloud server


@dataclass(frozen=True)
class StackOp:
    spec: RunnerSpec
    op: Literal["up", "destroy", "preview", "refresh"]
    target: StackTarget
    options: dict[str, Any] = field(default_factory=dict)  # preview's diff
    progress: bool = False


@dataclass(frozen=True)
class OpFailure:
    """An AnycloudError as data: the classes take different constructor arguments, so the
    exception object itself does not survive pickling."""

    cls: str
    message: str
    state: dict[str, Any]

    def rebuild(self) -> AnycloudError:
        module, _, name = self.cls.rpartition(".")
        cls = getattr(importlib.import_module(module), name)
        exc: AnycloudError = cls.__new__(cls)
        Exception.__init__(exc, self.message)
        exc.__dict__.update(self.state)
        return exc


_runners: dict[str, StackRunner] = {}  # per worker process: rebuilt once per spec


def _load(path: str) -> Any:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def _runner(spec: RunnerSpec) -> StackRunner:
    key = repr(spec)
    if key not in _runners:
        kwargs = dict(spec.kwargs)
        if spec.cloud is not None:
            kwargs["cloud"] = RemoteCloud(*spec.cloud)
        _runners[key] = _load(spec.factory)(**kwargs)
    return _runners[key]


def run_op(request: StackOp) -> tuple[RunResult | OpFailure, list[ProgressEvent]]:
    """In the worker: rebuild the runner, run one operation, return its result or failure
    with the progress it reported."""
    events: list[ProgressEvent] = []
    sink = events.append if request.progress else None
    runner = _runner(request.spec)
    try:
        if request.op == "preview":
            result = runner.preview(request.target, on_progress=sink, **request.options)
        else:
            result = getattr(runner, request.op)(request.target, on_progress=sink)
    except AnycloudError as exc:
        state = {k: v for k, v in exc.__dict__.items() if _picklable(v)}
        return OpFailure(f"{type(exc).__module__}.{type(exc).__qualname__}", str(exc),
                         state), events
    finally:
        end_leftovers()
    return result, events


def _picklable(value: Any) -> bool:
    import pickle

    try:
        pickle.dumps(value)
    except Exception:
        return False
    return True


# --------------------------------------------------------------------------- the cloud, shared


class _CloudManager(BaseManager):
    pass


_CLOUD_METHODS = ("new_resource", "call", "check", "delete_resource", "vm_exists", "lookup",
                  "find", "now", "__getattribute__")
_served: dict[str, Any] = {}


def _served_cloud(token: str) -> Any:
    return _served[token]


class _CloudProxy(BaseProxy):
    # Methods called by name (``_callmethod``): an AutoProxy would define
    # ``__getattribute__`` on itself and recurse.
    _exposed_ = _CLOUD_METHODS


_CloudManager.register("cloud", callable=_served_cloud, proxytype=_CloudProxy,
                       exposed=_CLOUD_METHODS)


class CloudServer:
    """Serves the caller's simulated cloud to its workers: every VM they buy is bought in
    the one cloud (and world) the reconciler observes. Threads of this process answer."""

    def __init__(self, cloud: Any) -> None:
        self.token = secrets.token_hex(8)
        _served[self.token] = cloud
        self.authkey = secrets.token_bytes(16)
        self.server = _CloudManager(address=("127.0.0.1", 0), authkey=self.authkey).get_server()
        # What Server.serve_forever would set; its accepter threads are all this needs.
        self.server.stop_event = threading.Event()  # type: ignore[attr-defined]
        self.thread = threading.Thread(target=self.server.accepter, daemon=True,
                                       name="cloud-server")
        self.thread.start()

    @property
    def address(self) -> tuple[Any, bytes]:
        return ((self.server.address, self.token), self.authkey)

    def close(self) -> None:
        self.server.stop_event.set()  # type: ignore[attr-defined]
        self.server.listener.close()  # type: ignore[attr-defined]
        _served.pop(self.token, None)


class RemoteCloud:
    """In a worker: the caller's cloud, through its server. Exceptions the cloud raises
    (``CloudFailure``) arrive as themselves."""

    def __init__(self, where: tuple[Any, str], authkey: bytes) -> None:
        address, token = where
        manager = _CloudManager(address=address, authkey=authkey)
        manager.connect()
        self._proxy: BaseProxy = manager.cloud(token)  # type: ignore[attr-defined]
        self._manager = manager

    @property
    def images(self) -> Any:
        return self._proxy._callmethod("__getattribute__", ("images",))

    def new_resource(self, args: Any) -> Any:
        return self._proxy._callmethod("new_resource", (args,))

    def call(self, args: Any) -> Any:
        return self._proxy._callmethod("call", (args,))

    def check(self, args: Any) -> Any:
        return self._proxy._callmethod("check", (args,))

    def delete_resource(self, resource_type: str, resource_id: str) -> None:
        self._proxy._callmethod("delete_resource", (resource_type, resource_id))

    def vm_exists(self, resource_type: str, resource_id: str) -> Any:
        return self._proxy._callmethod("vm_exists", (resource_type, resource_id))

    def lookup(self, attempt_id: str) -> Any:
        return self._proxy._callmethod("lookup", (attempt_id,))

    def now(self) -> Any:
        return self._proxy._callmethod("now", ())

    def find(self, type_: str, name: str, inputs: dict[str, Any]) -> Any:
        """A lookup by identity (the engine's crash recovery and adopt)."""
        return self._proxy._callmethod("find", (type_, name, inputs))


# --------------------------------------------------------------------------- caller side


def mock_runner(home: str, policy_config: dict[str, Any] | None = None,
                cloud: Any = None) -> StackRunner:
    from automation.engine.mock.runner import MockEngineRunner

    return MockEngineRunner(Path(home), cloud=cloud, policy_config=policy_config)


def pulumi_runner(home: str, environ: dict[str, str], engine_env: dict[str, str] | None = None,
                  kubeconfig: str | None = None) -> StackRunner:
    from automation.engine.pulumi_driver import AutomationRunner

    return AutomationRunner(Path(home), environ=environ, engine_env=engine_env,
                            kubeconfig=kubeconfig)


def spec_for(runner: Any, cloud_server: Callable[[Any], CloudServer]) -> RunnerSpec | None:
    """How a worker rebuilds ``runner``; None for a runner it cannot (a test double)."""
    kind = type(runner).__module__ + "." + type(runner).__qualname__
    if kind == "automation.engine.mock.runner.MockEngineRunner":
        return RunnerSpec("automation.reconciler.workers:mock_runner",
                          {"home": str(runner.home), "policy_config": runner.policy_config},
                          cloud_server(runner.cloud).address)
    if kind == "automation.engine.pulumi_driver.AutomationRunner":
        return RunnerSpec("automation.reconciler.workers:pulumi_runner",
                          {"home": str(runner.home), "environ": dict(runner.environ),
                           "engine_env": dict(runner.engine_env),
                           "kubeconfig": runner.kubeconfig})
    return None


class WorkerRunner:
    """A StackRunner whose up, destroy, preview and refresh run in worker processes, one
    operation per worker at a time; everything else (VM lookups, unlock, the mock engine's
    ``evaluate``) is the wrapped runner's, in this process. A runner no worker can rebuild
    runs its operations here, one at a time (the SDK's settings are process-global)."""

    def __init__(self, inner: Any, workers: int, spec: RunnerSpec | None = None,
                 timeout: float | None = None) -> None:
        self.inner = inner
        self.timeout = timeout  # seconds an operation may take (None: no limit)
        self._servers: list[CloudServer] = []
        self.spec = spec or spec_for(inner, self._serve)
        self.workers = workers
        self._idle: queue.SimpleQueue[ProcessPoolExecutor | None] = queue.SimpleQueue()
        for _ in range(workers):
            self._idle.put(None)  # started on first use
        self._started: list[ProcessPoolExecutor] = []
        self._sessions: dict[ProcessPoolExecutor, int] = {}  # the session each worker leads

    def _serve(self, cloud: Any) -> CloudServer:
        server = CloudServer(cloud)
        self._servers.append(server)
        return server

    @property
    def cloud_label(self) -> str | None:
        """The inner runner's (``models.recorded_engine``)."""
        return getattr(self.inner, "cloud_label", None)

    @property
    def engine(self) -> Literal["pulumi", "mock"]:
        engine: Literal["pulumi", "mock"] = self.inner.engine
        return engine

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def preview(self, target: StackTarget, *, diff: bool = False,
                on_progress: ProgressSink | None = None) -> RunResult:
        return self._run("preview", target, on_progress, {"diff": diff})

    def up(self, target: StackTarget, *, on_progress: ProgressSink | None = None) -> RunResult:
        return self._run("up", target, on_progress)

    def destroy(self, target: StackTarget, *,
                on_progress: ProgressSink | None = None) -> RunResult:
        return self._run("destroy", target, on_progress)

    def refresh(self, target: StackTarget, *,
                on_progress: ProgressSink | None = None) -> RunResult:
        return self._run("refresh", target, on_progress)

    def lookup_vms(self, target: StackTarget, attempt_ids: list[str]) -> dict[str, str]:
        found: dict[str, str] = self.inner.lookup_vms(target, attempt_ids)
        return found

    def unlock(self, target: StackTarget) -> bool:
        return bool(self.inner.unlock(target))

    def check_drift(self, target: StackTarget) -> list[DriftChange]:
        """In this process, one at a time with the other in-process engine work (the
        Automation API's settings are process-global); it writes nothing."""
        with IN_PROCESS_SDK:
            found: list[DriftChange] = self.inner.check_drift(target)
            return found

    def _run(self, op: Literal["up", "destroy", "preview", "refresh"], target: StackTarget,
             sink: ProgressSink | None, options: dict[str, Any] | None = None) -> RunResult:
        if self.spec is None:
            with IN_PROCESS_SDK:
                method = getattr(self.inner, op)
                result: RunResult = method(target, on_progress=sink, **(options or {}))
                return result
        request = StackOp(self.spec, op, target, options or {}, progress=sink is not None)
        executor = self._idle.get() or self._start()
        try:
            outcome, events = executor.submit(run_op, request).result(timeout=self.timeout)
        except TimeoutError:
            # Ended, not left running: a hung engine would hold the pool's lease and this
            # slot for good. Its run is then what a killed run leaves (a lock, creates in
            # flight), which the next pass handles as after any crash.
            end_session(self._sessions.pop(executor))
            executor.shutdown(wait=False, cancel_futures=True)
            executor = None  # type: ignore[assignment]
            raise StackTimeout(
                f"{op} of {target.stack_name} took more than {self.timeout:g} s "
                "(ANYCLOUD_STACK_TIMEOUT): its worker, engine and plugins were ended; the "
                "next pass settles what it left") from None
        except BrokenProcessPool:
            executor.shutdown(wait=False)
            # The engine the worker ran, and its plugins, outlive it: end its session.
            end_session(self._sessions.pop(executor))
            executor = None  # type: ignore[assignment]
            raise WorkerDied(f"the worker process running {op} of {target.stack_name} exited "
                             "before answering (killed, out of memory, or it failed to start); "
                             "the next pass takes the pool up again from what the ledger and "
                             "the stack recorded") from None
        finally:
            self._idle.put(executor)
        for event in events:
            if sink is not None:
                sink(event)
        if isinstance(outcome, OpFailure):
            raise outcome.rebuild()
        return outcome

    def _start(self) -> ProcessPoolExecutor:
        # Each worker leads a session of its own, which the engine and its plugins join,
        # and ends it if this process dies.
        executor = ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn"),
                                       initializer=worker_session)
        self._sessions[executor] = executor.submit(os.getpid).result()
        self._started.append(executor)
        return executor

    def close(self) -> None:
        for executor in self._started:
            executor.shutdown(wait=True, cancel_futures=True)
            end_session(self._sessions.pop(executor, 0))  # what outlived its worker, if any
        self._started.clear()
        for server in self._servers:
            server.close()


class Serialized:
    """A port (the add-on or ingress step) called from concurrent turns one at a time, and
    never beside another user of the SDK in this process: it runs its own stack here and
    keeps per-pass state."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.lock = IN_PROCESS_SDK

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with self.lock:
            return self.inner(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.inner, name)
        if not callable(value):
            return value

        def locked(*args: Any, **kwargs: Any) -> Any:
            with self.lock:
                return value(*args, **kwargs)

        return locked


def run_turns(items: Sequence[T], turn: Callable[[T], R], credential_of: Callable[[T], str],
              limits: Limits, throttled: Callable[[R], bool] = lambda r: False) -> list[R]:
    """One pass's turns on ``limits.overall`` threads, admitted by credential."""
    executor: ThreadTurns[T, R] = ThreadTurns(turn, min(limits.overall, len(items)) or 1)
    try:
        return dispatch(items, credential_of, SlotPolicy(limits), executor, throttled)
    finally:
        executor.close()
