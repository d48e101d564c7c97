"""Never act on vanished state: what the ledger saw a stack hold, checked before the engine
acts on it.

An engine whose state is lost (a removed state directory, an emptyDir that a pod restart
wiped, a backend restored from an older backup) reads every VM it bought as absent: an
``up`` would buy them again (AWS ``RunInstances`` makes a new instance each call) and a
``destroy`` would delete nothing, leaving them running with no owner. The engine cannot
tell a lost state from a new stack; the ledger can. Each node-pool target carries what the
ledger saw (``Expected``): that an ``up`` of the stack succeeded, and the attempts whose
VMs it reported running. Before ``up`` or ``destroy`` each engine compares that with its
state and refuses with ``STATE_MISSING``, naming what is missing and where the state lives.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from automation.engine.errors import EngineFailed
from automation.engine.recovery import PendingCreate
from automation.engine.runner import StackTarget


class StateMissing(EngineFailed):
    default_code = "STATE_MISSING"


def vm_attempts_in(resources: Iterable[Mapping[str, Any]]) -> set[str]:
    """Attempt ids of the VMs among ``resources`` (each with ``type`` and ``inputs``)."""
    found: set[str] = set()
    for r in resources:
        vm = PendingCreate(urn="", type=str(r.get("type", "")), custom=True,
                           inputs=dict(r.get("inputs") or {}))
        if vm.is_vm and vm.attempt_id is not None:
            found.add(vm.attempt_id)
    return found


def check(target: StackTarget, resources: list[Mapping[str, Any]], where: str,
          exists: bool = True) -> None:
    """Raise ``StateMissing`` when the state (``resources``: recorded ones and creates in
    flight) lacks what the ledger saw it hold; ``where``: where that state lives;
    ``exists``: whether the stack's state exists at all (an update that failed before
    buying anything leaves one, empty)."""
    expected = target.expect
    if expected.started and not exists and not expected.applied and not expected.attempts:
        # An update was started (killed, perhaps, after the cloud bought the VMs and before
        # the ledger heard back) and its state is gone: an up would buy them again.
        raise StateMissing(
            f"the engine's state of stack {target.stack_name} ({where}) does not exist, "
            f"but the ledger saw an update of it start that may have bought the VM(s) of "
            f"attempt(s) {', '.join(expected.started)}. Nothing was created or deleted: "
            "acting on no state would buy those VMs again. Put the state back from its "
            f"backup, or rebuild it from what the cloud holds with `anycloud node-pool "
            f"adopt {target.key}`.",
            field="stack", value=target.stack_name, rule="the engine's state must hold what "
            "the ledger saw it apply")
    if not expected.applied and not expected.attempts:
        return
    lost = sorted(set(expected.attempts) - vm_attempts_in(resources))
    if resources and not lost:
        return
    what = ("holds nothing" if not resources
            else f"does not record the VM(s) of attempt(s) {', '.join(lost)}")
    seen = (f"the ledger saw it report {len(expected.attempts)} running VM(s) "
            f"({', '.join(expected.attempts)})" if expected.attempts
            else "the ledger saw an update of it succeed")
    raise StateMissing(
        f"the engine's state of stack {target.stack_name} ({where}) {what}, but {seen}. "
        "Nothing was created or deleted: acting on this state would buy those VMs again, or "
        "leave them running with no owner. Put the state back from its backup, or rebuild "
        f"it from what the cloud holds with `anycloud node-pool adopt {target.key}`.",
        field="stack", value=target.stack_name, rule="the engine's state must hold what "
        "the ledger saw it apply")
