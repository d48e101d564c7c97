"""Named step boundaries where a test can kill the reconciler (``ANYCLOUD_CRASH_AT``).

``ANYCLOUD_CRASH_AT=after-attempt-write`` makes the process SIGKILL itself the first time it
reaches that boundary, exactly as an OOM kill or a node loss would, so the crash-safety test
can prove every boundary recoverable; ``name@3`` the third time (a loop's third batch).
Unset (always, outside those tests) it does nothing.
"""

from __future__ import annotations

import os
import signal
from collections import Counter

BOUNDARIES = (
    "after-attempt-write",  # attempt rows written, no cloud call yet
    "after-release-write",  # attempts marked releasing, VMs not yet deleted
    "mid-network-create",  # the cloud made a pool's first network resource, unheard of
    "mid-vm-create",  # the cloud bought a VM, the engine has not heard back
    "mid-stack-up",  # VMs bought, the engine's own state not yet saved
    "engine-killed-mid-up",  # the real engine (`pulumi`) killed once the cloud bought a VM
    "after-stack-up",  # the cloud changed, the ledger does not know yet
    "after-ledger-sync",  # attempts synced from the stack outputs
    "after-node-removed",  # a Node removed, decision not yet stored
    "after-destroy",  # network removed, pool not yet marked deleted
    "after-move-intent",  # a deployment's move written, nothing done yet
    "after-deprovision",  # the old provisioner released the resource, step not yet recorded
    "after-provision",  # the new provisioner holds the resource, deployment not yet updated
    "mid-reseal-batch",  # a batch of secrets sealed again, not yet committed
    "after-reseal-batch",  # a batch committed, the next not begun
)
_REACHED: Counter[str] = Counter()


def _due(name: str) -> bool:
    """Whether ``ANYCLOUD_CRASH_AT`` names this boundary and its count is reached now."""
    at, _, nth = os.environ.get("ANYCLOUD_CRASH_AT", "").partition("@")
    if at != name:
        return False
    _REACHED[name] += 1
    return _REACHED[name] == int(nth or 1)


def crashpoint(name: str) -> None:
    if _due(name):
        os.kill(os.getpid(), signal.SIGKILL)


def engine_crashpoint(name: str) -> None:
    """``crashpoint`` for a provider plugin the engine started: it SIGKILLs the engine (this
    process's parent, the ``pulumi`` CLI) rather than itself, as an OOM kill of ``pulumi``
    would. The plugin, orphaned, then exits on its own."""
    if _due(name):
        os.kill(os.getppid(), signal.SIGKILL)
