"""Leader election for the AgentPool operator over one ``coordination.k8s.io/v1`` Lease, as
client-go's leaderelection does it, so two or more replicas never scale the same pools.

- A candidate takes the Lease when it is absent, free (no holder), or expired: its record
  (holder, renewTime) has not changed for ``leaseDurationSeconds`` *as this candidate
  observed it*, measured on its own monotonic clock (no trust in other hosts' clocks).
- Every write carries the resourceVersion it read: of two candidates racing, the API server
  takes one and answers the other 409 (it lost, and tries again later).
- The leader renews every ``retry`` seconds. One that cannot renew for ``renew_deadline``
  (< the lease duration: it stops before anyone may take over) stops leading; the process
  then exits, and its Deployment restarts it as a candidate.
- On a clean stop the leader releases the Lease (holder emptied), so a standby takes over at
  its next try instead of after the lease duration.

Only the leader runs kopf; a standby watches nothing. Correctness does not rest on the
election alone: every pass reads the pods that exist (reconcile.py), so a new leader never
makes a pod twice whatever the old one managed to create before it died.
"""

from __future__ import annotations

import math
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from automation.kube.port import ClusterUnavailable

LEASE_NAME = "anycloud-operator"


class LeaseApi(Protocol):
    def read_lease(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    def write_lease(self, namespace: str, lease: dict[str, Any], create: bool) -> bool: ...


@dataclass(frozen=True)
class LeaseTimes:
    """client-go's defaults: 15 s lease, renew within 10 s, try every 2 s."""

    duration: float = 15.0
    renew_deadline: float = 10.0
    retry: float = 2.0

    def __post_init__(self) -> None:
        if not 0 < self.retry < self.renew_deadline < self.duration:
            raise ValueError("lease times: need 0 < retry < renew_deadline < duration "
                             f"({self.retry}, {self.renew_deadline}, {self.duration})")


def default_identity() -> str:
    """The pod's name (else the host's), with a random tail: a restarted container is a new
    candidate, never mistaken for the leader it replaces."""
    who = os.environ.get("POD_NAME") or socket.gethostname()
    return f"{who}_{uuid.uuid4().hex[:8]}"


def _micro(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")  # a Lease's MicroTime


@dataclass
class LeaderElector:
    api: LeaseApi
    namespace: str
    identity: str = field(default_factory=default_identity)
    name: str = LEASE_NAME
    times: LeaseTimes = field(default_factory=LeaseTimes)
    monotonic: Callable[[], float] = time.monotonic
    wall: Callable[[], datetime] = lambda: datetime.now(UTC)
    log: Callable[[str], None] = lambda line: None
    _observed: tuple[Any, ...] | None = None
    _observed_at: float = 0.0

    def try_acquire_or_renew(self) -> bool:
        """One attempt: True when this candidate holds the Lease afterwards."""
        lease = self.api.read_lease(self.namespace, self.name)
        now = _micro(self.wall())
        spec: dict[str, Any] = {"holderIdentity": self.identity,
                                "leaseDurationSeconds": math.ceil(self.times.duration),
                                "acquireTime": now, "renewTime": now, "leaseTransitions": 0}
        if lease is None:
            return self.api.write_lease(self.namespace, {
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": spec}, create=True)
        old = lease.get("spec") or {}
        record = (old.get("holderIdentity"), old.get("renewTime"), old.get("leaseTransitions"))
        if record != self._observed:
            self._observed, self._observed_at = record, self.monotonic()
        holder = old.get("holderIdentity") or ""
        if holder and holder != self.identity:
            held_for = float(old.get("leaseDurationSeconds") or self.times.duration)
            if self.monotonic() < self._observed_at + held_for:
                return False  # another holds it and renews
        if holder == self.identity:
            spec["acquireTime"] = old.get("acquireTime") or now
            spec["leaseTransitions"] = old.get("leaseTransitions") or 0
        else:
            spec["leaseTransitions"] = (old.get("leaseTransitions") or 0) + 1
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace,
                             "resourceVersion": lease["metadata"]["resourceVersion"]},
                "spec": spec}
        return self.api.write_lease(self.namespace, body, create=False)

    def release(self) -> None:
        """Give the Lease up (a clean stop): the next candidate need not wait it out."""
        lease = self.api.read_lease(self.namespace, self.name)
        if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
            return
        spec = dict(lease["spec"], holderIdentity="", leaseDurationSeconds=1,
                    renewTime=_micro(self.wall()))
        lease = dict(lease, spec=spec)
        self.api.write_lease(self.namespace, lease, create=False)

    def _attempt(self) -> bool:
        try:
            return self.try_acquire_or_renew()
        except ClusterUnavailable as exc:  # the API server is away: not leading this round
            self.log(f"leader election: {exc}")
            return False

    def run(self, lead: Callable[[], None], stop_leading: Callable[[], None],
            stopped: threading.Event) -> Literal["stopped", "lost"]:
        """Campaign until leading, call ``lead``, renew until ``stopped`` is set ("stopped":
        the Lease is released) or renewing fails for the renew deadline ("lost").
        ``stop_leading`` is called either way once ``lead`` was."""
        while not self._attempt():
            if stopped.wait(self.times.retry):
                return "stopped"
        self.log(f"leading: {self.identity} holds Lease {self.namespace}/{self.name}")
        lead()
        renewed = self.monotonic()
        try:
            while not stopped.wait(self.times.retry):
                if self._attempt():
                    renewed = self.monotonic()
                elif self.monotonic() - renewed > self.times.renew_deadline:
                    self.log(f"lost the Lease {self.namespace}/{self.name}: not renewed "
                             f"for {self.times.renew_deadline:g} s")
                    return "lost"
        finally:
            stop_leading()
        try:
            self.release()
        except ClusterUnavailable as exc:
            self.log(f"could not release the Lease: {exc}")
        return "stopped"
