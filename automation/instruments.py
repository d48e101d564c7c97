"""The in-process instruments behind ``/metrics``: reconcile passes (duration, errors by
code) and stack operations (duration by engine and kind).

They record only in a process whose metrics someone scrapes: one that serves the API
(``enable``, from ``create_api``), or any process of a ``serve`` that shares them between
its processes (``share_between_processes``: the control loop, its stack workers and its API
workers). Elsewhere (``reconcile --once``, ``node-pool preview``) every hook is a no-op and
prometheus_client is never imported: it costs ~100 ms a command would pay for nothing.

Sharing is prometheus_client's multiprocess mode: each process writes its values to files
in one directory, and a scrape sums the files of every process, live or gone (counters and
histograms only: both sum correctly, and a dead process's counts stay counted)."""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"  # prometheus_client's own switch
# Passes and stack operations take from milliseconds (the mock engine, a converged pass)
# to tens of minutes (a real engine buying VMs): buckets across that whole range.
PASS_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)
STACK_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600)

_enabled = {"here": False}


def enable() -> None:
    """Record in this process from now on (it serves ``/metrics``)."""
    _enabled["here"] = True


def enabled() -> bool:
    return _enabled["here"] or MULTIPROC_ENV in os.environ


def share_between_processes() -> Path | None:
    """Called by ``serve`` before any metric exists: this process and every process it starts
    from now on (API workers, stack workers) record into a fresh directory that any API
    worker's scrape reads. The directory made, for the caller to remove when it stops; None
    when nothing was made (already set: the operator's own directory; or prometheus_client
    already imported in-process, where the switch would come too late: in-process only)."""
    if MULTIPROC_ENV in os.environ or "prometheus_client" in sys.modules:
        return None
    path = Path(tempfile.mkdtemp(prefix="anycloud-metrics-"))
    os.environ[MULTIPROC_ENV] = str(path)
    # Removed at the latest when this process exits: once prometheus_client is imported
    # ``stop_sharing`` must leave it (see there), and every serve would leave one behind.
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def stop_sharing(path: Path | None) -> None:
    """Remove the directory once ``serve`` stops; kept while this process's values live in it
    (prometheus_client cannot switch back: a process that serves twice, a test's, goes on
    recording there)."""
    if path is not None and "prometheus_client" not in sys.modules:
        os.environ.pop(MULTIPROC_ENV, None)
        shutil.rmtree(path, ignore_errors=True)


def shared_directory() -> str | None:
    """The directory a scrape sums, when this process's values live there (None: in this
    process only, in ``registry()``)."""
    path = os.environ.get(MULTIPROC_ENV)
    if not path:
        return None
    from prometheus_client import values

    return path if getattr(values.ValueClass, "_multiprocess", False) else None


@functools.cache
def _metrics() -> Any:
    # Their own registry, never the global one: a multiprocess scrape reads the files, and
    # the same metrics registered beside its collector would be exported twice.
    from prometheus_client import CollectorRegistry, Counter, Histogram

    reg = CollectorRegistry()

    class Metrics:
        registry = reg
        pass_seconds = Histogram(
            "anycloud_reconcile_pass_duration_seconds",
            "Wall time of one reconcile pass over every node pool.",
            buckets=PASS_BUCKETS, registry=reg)
        errors = Counter(
            "anycloud_reconcile_errors_total",
            "Node pools whose turn in a reconcile pass ended in an error, by the error's "
            "code (and passes that failed as a whole).", ["code"], registry=reg)
        stack_seconds = Histogram(
            "anycloud_stack_operation_duration_seconds",
            "Wall time of one stack operation, by engine (pulumi, mock) and kind (up, "
            "preview, destroy, refresh, adopt); failed operations included.",
            ["engine", "kind"], buckets=STACK_BUCKETS, registry=reg)

    return Metrics


def registry() -> Any:
    """This process's instruments (a prometheus_client CollectorRegistry)."""
    return _metrics().registry


@contextmanager
def reconcile_pass() -> Iterator[list[str]]:
    """Times the pass it wraps; the caller appends the error codes of the pools' turns. A
    pass that raises counts once under its error's code."""
    if not enabled():
        yield []
        return
    codes: list[str] = []
    # A duration, not a moment: the monotonic clock, not the injected one.
    began = time.perf_counter()
    try:
        yield codes
    except Exception as exc:
        codes.append(str(getattr(exc, "code", None) or "INTERNAL_ERROR"))
        raise
    finally:
        m = _metrics()
        m.pass_seconds.observe(time.perf_counter() - began)
        for code in codes:
            m.errors.labels(code).inc()


class _Engine(Protocol):
    @property
    def engine(self) -> str: ...


S = TypeVar("S", bound=_Engine)
P = ParamSpec("P")
R = TypeVar("R")


def stack_operation(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
    """Times a StackRunner's operation; its name is the kind, its runner's engine the
    engine. Put on the engines themselves, so an operation counts once, in the process
    that ran it (a stack worker records it into the shared directory)."""
    kind = method.__name__

    @functools.wraps(method)
    def timed(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        if not enabled():
            return method(self, *args, **kwargs)
        began = time.perf_counter()
        try:
            return method(self, *args, **kwargs)
        finally:
            _metrics().stack_seconds.labels(self.engine, kind).observe(
                time.perf_counter() - began)

    return timed
