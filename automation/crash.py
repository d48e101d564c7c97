"""Named step boundaries where a test can kill the reconciler (``ANYCLOUD_CRASH_AT``).

``ANYCLOUD_CRASH_AT=after-attempt-write`` makes the process SIGKILL itself the first time it
reaches that boundary, exactly as an OOM kill or a node loss would, so the crash-safety test
can prove every boundary recoverable. Unset (always, outside that test) it does nothing.
"""

from __future__ import annotations

import os
import signal

BOUNDARIES = (
    "after-attempt-write",  # attempt rows written, no cloud call yet
    "after-release-write",  # attempts marked releasing, VMs not yet deleted
    "mid-network-create",  # the cloud made a pool's first network resource, unheard of
    "mid-vm-create",  # the cloud bought a VM, the engine has not heard back
    "mid-stack-up",  # VMs bought, the engine's own state not yet saved
    "after-stack-up",  # the cloud changed, the ledger does not know yet
    "after-ledger-sync",  # attempts synced from the stack outputs
    "after-node-removed",  # a Node removed, decision not yet stored
    "after-destroy",  # network removed, pool not yet marked deleted
    "after-move-intent",  # a deployment's move written, nothing done yet
    "after-deprovision",  # the old provisioner released the resource, step not yet recorded
    "after-provision",  # the new provisioner holds the resource, deployment not yet updated
)


def crashpoint(name: str) -> None:
    if os.environ.get("ANYCLOUD_CRASH_AT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
