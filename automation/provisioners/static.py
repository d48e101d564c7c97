"""The ``static`` provisioner: slots on a fixed fleet of pre-provisioned runtimes.

A provisioned resource holds ``slots`` on one runtime (one ``static_allocations`` row per
provision id). Allocation never over-allocates, also when several processes provision at
once: it locks the provisioner's runtime rows (``SELECT ... FOR UPDATE`` on PostgreSQL;
SQLite's ``BEGIN IMMEDIATE`` already serialises writers), counts what is held and picks the
least used runtime that has room. It warns once a runtime, or the whole set, is 80 % used.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from automation.clock import Clock
from automation.errors import Conflict
from automation.ledger import schema
from automation.ledger.db import Ledger
from automation.provisioners.base import Health, Provisioned, ProvisionRequest
from automation.provisioners.provisioner_set import StaticRuntime, StaticSpec

WARN_AT = 0.8
_alloc = schema.static_allocations
_runtimes = schema.static_runtimes


@dataclass(frozen=True)
class RuntimeUse:
    host: str
    slots: int
    used: int

    @property
    def free(self) -> int:
        return self.slots - self.used


class StaticProvisioner:
    def __init__(self, name: str, spec: StaticSpec, ledger: Ledger, clock: Clock) -> None:
        self.name = name
        self.runtimes = {r.host: r for r in spec.runtimes}
        self.ledger = ledger
        self.clock = clock

    def provision(self, provision_id: str, request: ProvisionRequest) -> Provisioned:
        with self.ledger.write() as conn:
            held = conn.execute(sa.select(_alloc).where(
                _alloc.c.provision_id == provision_id)).mappings().first()
            if held is not None:
                if held["provisioner"] != self.name:
                    raise Conflict(
                        f"{provision_id} holds slots of provisioner {held['provisioner']!r}",
                        code="PROVISIONED_ELSEWHERE", field="provision id", value=provision_id,
                        rule="deprovision it with its own provisioner first")
                if held["host"] in self.runtimes:
                    return self._provisioned(held["host"], provision_id, conn)
                # Its runtime was removed from the set: place it again (below).
                conn.execute(_alloc.delete().where(_alloc.c.provision_id == provision_id))
            self._lock_runtimes(conn)
            use = self._use(conn)
            room = [u for u in use if u.free >= request.slots]
            if not room:
                raise Conflict(
                    f"static provisioner {self.name!r} has no runtime with {request.slots} "
                    f"free slot(s): {_describe(use)}", code="NO_CAPACITY",
                    field="provisioner", value=self.name,
                    rule="a runtime with enough free slots (add runtimes or slots to the set)")
            pick = min(room, key=lambda u: (u.used / u.slots, u.host))
            conn.execute(_alloc.insert().values(
                provision_id=provision_id, provisioner=self.name, host=pick.host,
                slots=request.slots, allocated_at=self.clock.now()))
            return self._provisioned(pick.host, provision_id, conn)

    def preflight(self, provision_id: str, request: ProvisionRequest) -> None:
        """A runtime has room now (read only: ``provision`` decides under its lock)."""
        with self.ledger.read() as conn:
            held = conn.execute(sa.select(_alloc.c.host).where(
                _alloc.c.provision_id == provision_id,
                _alloc.c.provisioner == self.name)).scalar()
            if held in self.runtimes:
                return  # it holds its slots here already
            use = self._use(conn)
        if not any(u.free >= request.slots for u in use):
            raise Conflict(
                f"static provisioner {self.name!r} has no runtime with {request.slots} "
                f"free slot(s): {_describe(use)}", code="NO_CAPACITY",
                field="provisioner", value=self.name,
                rule="a runtime with enough free slots (add runtimes or slots to the set)")

    def deprovision(self, provision_id: str) -> bool:
        with self.ledger.write() as conn:
            gone = conn.execute(_alloc.delete().where(
                _alloc.c.provision_id == provision_id, _alloc.c.provisioner == self.name))
            return bool(gone.rowcount)

    def await_ready(self, provisioned: Provisioned) -> None:
        # The fleet is provisioned already: a slot on it is ready when it is held.
        if provisioned.host not in self.runtimes:
            raise Conflict(f"runtime {provisioned.host} is not in static provisioner "
                           f"{self.name!r}", code="RUNTIME_GONE")

    def check(self, provision_id: str) -> Health:
        with self.ledger.read() as conn:
            held = conn.execute(sa.select(_alloc).where(
                _alloc.c.provision_id == provision_id,
                _alloc.c.provisioner == self.name)).mappings().first()
            if held is None:
                return Health(False, f"{provision_id} holds no slot of {self.name}")
            if held["host"] not in self.runtimes:
                return Health(False, f"runtime {held['host']} was removed from the set; "
                                     "`deployment restart` places it on another runtime "
                                     f"of {self.name} with room")
            use = {u.host: u for u in self._use(conn)}[held["host"]]
        if use.used > use.slots:
            return Health(False, f"runtime {use.host} holds {use.used} slots of {use.slots} "
                                 "(its slots were lowered in the set)")
        return Health(True, f"{held['slots']} slot(s) on {use.host} ({use.used}/{use.slots})")

    def usage(self) -> list[RuntimeUse]:
        with self.ledger.read() as conn:
            return self._use(conn)

    # -- inside a transaction ------------------------------------------------------------

    def _lock_runtimes(self, conn: Any) -> None:
        rows = [{"provisioner": self.name, "host": h, "created_at": self.clock.now()}
                for h in self.runtimes]
        if conn.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert  # type: ignore[assignment]
        conn.execute(insert(_runtimes).on_conflict_do_nothing(), rows)
        conn.execute(sa.select(_runtimes.c.host).where(_runtimes.c.provisioner == self.name)
                     .order_by(_runtimes.c.host).with_for_update()).all()

    def _use(self, conn: Any) -> list[RuntimeUse]:
        held = dict(conn.execute(
            sa.select(_alloc.c.host, sa.func.sum(_alloc.c.slots))
            .where(_alloc.c.provisioner == self.name).group_by(_alloc.c.host)).all())
        return [RuntimeUse(h, r.slots, int(held.get(h) or 0)) for h, r in self.runtimes.items()]

    def _provisioned(self, host: str, provision_id: str, conn: Any) -> Provisioned:
        runtime: StaticRuntime | None = self.runtimes.get(host)
        return Provisioned(
            provision_id=provision_id, provisioner=self.name, host=host,
            data_dir=runtime.data_dir if runtime else "",
            audience_url=runtime.audience_url if runtime else None,
            warnings=_warnings(self.name, self._use(conn)))


def _warnings(name: str, use: list[RuntimeUse]) -> tuple[str, ...]:
    out = [f"runtime {u.host} of {name} is {u.used * 100 // u.slots} % used "
           f"({u.used}/{u.slots} slots)" for u in use if u.used >= WARN_AT * u.slots]
    used, total = sum(u.used for u in use), sum(u.slots for u in use)
    if total and used >= WARN_AT * total:
        out.append(f"static provisioner {name} is {used * 100 // total} % used "
                   f"({used}/{total} slots)")
    return tuple(out)


def _describe(use: list[RuntimeUse]) -> str:
    return ", ".join(f"{u.host} {u.used}/{u.slots}" for u in use)
