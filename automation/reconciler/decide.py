"""The reconciler's decision step: a pure function of ledger state, observations and time.

``decide(pool, attempts, nodes, now)`` returns what should happen to one node pool this pass:
attempts to create or release, tokens to drop, Nodes to remove or label, whether the stack
must be applied, and the pool's new state and counts. It does no I/O and reads no clock, so
every rule of the node-pool seed is tested here exhaustively; the steps around it only
gather observations and carry the actions out.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from automation import __version__
from automation.kube.port import ACCELERATOR_LABEL, INGRESS_ENTRY_LABEL, NodeView

NODE_APPEAR_TIMEOUT = timedelta(minutes=10)
NOT_READY_TIMEOUT = timedelta(minutes=15)
GPU_DEVICE_GRACE = timedelta(minutes=10)
MAX_REPLACEMENTS_IN_ROW = 3
INGRESS_FAILOVER = timedelta(minutes=2)
BACKOFF_FIRST = timedelta(minutes=1)
BACKOFF_MAX = timedelta(minutes=30)
MAX_PROVIDER_FAILURES = 5
# A pool failed only by the add-on mechanism (its cluster's NVIDIA check, or its own ingress
# release): replacing and releasing its existing VMs goes on, nothing new is bought, and the
# failure clears once a later check passes.
ADDONS_FAILED = "ADDONS_FAILED"
POOL_FAILED = "POOL_FAILED"

LIVE = ("pending", "creating", "running")

JOIN_PRECONDITIONS = (
    "check the join preconditions: the cluster's advertised address is reachable from the "
    "pool's network on TCP 6443, the cluster CA hash matches the one recorded, the image "
    "boots x86_64 with outbound internet (K3s agent download and checksum), and bootstrap "
    "tokens are accepted (kube-system Secrets bootstrap-token-*, not expired)"
)


@dataclass(frozen=True)
class PoolView:
    id: str
    state: str  # pending | provisioning | ready | failed | deleting | deleted
    vm_count: int
    gpus: int  # nvidia.com/gpu per VM from the catalog; 0 for CPU types
    replacements_in_row: int = 0
    backoff_until: datetime | None = None
    referenced: bool = False  # deletion: something still targets the pool
    network_removed: bool = False
    addons_diagnostic: str | None = None  # a GPU pool's failed add-on check, None when fine
    addons_state: str = "unknown"  # what the add-on objects look like, for GPU diagnostics
    hosts_service: bool = False  # a pool hosting a Service elects an ingress entry
    ingress_entry: str | None = None  # the attempt currently elected
    applied_digest: str | None = None  # stack_digest of the last successful apply
    last_error_code: str | None = None  # why a failed pool failed (ADDONS_FAILED, …)
    # The pool's ingress release as checked this pass (a hosts_service pool): its HelmChart's
    # class (absent, ours-unchanged, ours-edited, ours-immutable-differs, foreign) or None
    # when not checked; a diagnostic fails the pool like an add-on failure.
    ingress_release: str | None = None
    ingress_diagnostic: str | None = None
    # The mass-failure brake holds the pool (``brake``): its evidence, or None. Held, the
    # pool releases nothing for replacement and buys nothing; everything else goes on.
    held: str | None = None


@dataclass(frozen=True)
class AttemptView:
    id: str
    state: str  # pending | creating | running | releasing | released
    node_name: str  # the Node name we issued for this attempt
    vm_created_at: datetime | None = None  # when the provider confirmed the VM
    token_present: bool = True
    replaces: str | None = None
    not_ready_since: datetime | None = None
    gpu_ready_seen: bool = False  # its Node once advertised the full GPU count
    gpu_missing_since: datetime | None = None
    # As last seen, for status: Ready (counted), NotReady, NoDevices (Ready, GPUs missing),
    # Mismatch (wrong GPU count: never counted), or None (no Node).
    node_state: str | None = None


@dataclass(frozen=True)
class NewAttempt:
    replaces: str | None = None


@dataclass(frozen=True)
class Release:
    attempt_id: str
    reason: str


@dataclass(frozen=True)
class DropToken:
    attempt_id: str


@dataclass(frozen=True)
class RemoveNode:
    name: str
    reason: str


@dataclass(frozen=True)
class LabelNode:
    name: str
    key: str
    value: str | None  # None removes the label


@dataclass(frozen=True)
class ApplyStack:
    """Run the pool's stack with the live attempts (creates and releases VMs, tokens)."""


@dataclass(frozen=True)
class EnsureIngressRelease:
    """Install or rewrite the pool's ingress release, after the stack holds the port-80
    rule; ``found`` is what the check saw (absent, ours-edited, ours-immutable-differs)."""

    found: str


@dataclass(frozen=True)
class RemoveIngressRelease:
    """Deletion: every VM is confirmed released; remove the pool's ingress release (before
    the network goes)."""


@dataclass(frozen=True)
class DeleteNamespace:
    """Deletion: remove the namespace the pool owns on the cluster."""


@dataclass(frozen=True)
class DestroyStack:
    """Deletion: every VM is confirmed released; remove the pool's network."""


Action = (NewAttempt | Release | DropToken | RemoveNode | LabelNode | ApplyStack
          | EnsureIngressRelease | RemoveIngressRelease | DeleteNamespace | DestroyStack)
# The ingress release's classes that need a write.
INGRESS_WRITES = ("absent", "ours-edited", "ours-immutable-differs")


@dataclass(frozen=True)
class Counts:
    ready: int = 0
    starting: int = 0
    draining: int = 0


@dataclass
class Decision:
    state: str
    last_error: str | None
    replacements_in_row: int
    counts: Counts
    actions: list[Action] = field(default_factory=list)
    # Observation bookkeeping to store back on the attempts (id → new view).
    attempts: dict[str, AttemptView] = field(default_factory=dict)
    ingress_entry: str | None = None
    # With last_error: ADDONS_FAILED when the add-on check alone failed the pool.
    error_code: str | None = None

    def of(self, kind: type) -> list:  # type: ignore[type-arg]
        return [a for a in self.actions if isinstance(a, kind)]


def fail_addons(decision: Decision, diagnostic: str) -> Decision:
    """An add-on write failed while acting (a denied or failed ingress release install): the
    pool fails as if the check had, keeping whatever else already failed it."""
    if decision.state == "failed":
        return replace(decision, last_error="; ".join(
            x for x in (decision.last_error, diagnostic) if x))
    return replace(decision, state="failed", last_error=diagnostic, error_code=ADDONS_FAILED)


def stack_digest(hosts_service: bool, attempts: list[AttemptView]) -> str:
    """What the pool's stack depends on in the ledger: the live attempts, whether each still
    needs its token, and whether the pool hosts a Service (ingress rule and Traefik)."""
    live = sorted((a.id, a.token_present) for a in attempts if a.state in LIVE)
    body = json.dumps({"v": __version__, "service": hosts_service, "attempts": live})
    return hashlib.sha256(body.encode()).hexdigest()


def backoff_after(failures: int) -> timedelta:
    """Delay after the n-th consecutive provider failure: 1 min doubling, at most 30."""
    return min(BACKOFF_FIRST * 2 ** max(failures - 1, 0), BACKOFF_MAX)


def _claims(pool: PoolView, node: NodeView, issued: set[str]) -> bool:
    return node.pool_label == pool.id or node.name in issued


def _matches(pool: PoolView, node: NodeView, attempt: AttemptView) -> bool:
    return (node.name == attempt.node_name and node.attempt_label == attempt.id
            and node.pool_label == pool.id)


def decide(
    pool: PoolView, attempts: list[AttemptView], nodes: list[NodeView], now: datetime
) -> Decision:
    if pool.state == "deleted":
        return Decision("deleted", None, pool.replacements_in_row, Counts())
    if pool.state == "deleting":
        return _decide_delete(pool, attempts, nodes)

    issued = {a.node_name for a in attempts}
    node_of: dict[str, NodeView] = {}
    errors: list[str] = []
    actions: list[Action] = []
    updated: dict[str, AttemptView] = {}

    for seen in nodes:
        if not _claims(pool, seen, issued):
            continue
        owner = next((a for a in attempts if _matches(pool, seen, a)), None)
        if owner is None:
            errors.append(
                f"Node {seen.name} claims node pool {pool.id} but matches no VM it provisioned; "
                "it is not counted"
            )
        elif owner.state in ("releasing", "released"):
            actions.append(RemoveNode(seen.name, f"its VM ({owner.id}) was released"))
        else:
            node_of[owner.id] = seen

    # Failed by the add-on check alone, the pool is not parked: that check runs again.
    parked = pool.state == "failed" and pool.last_error_code != ADDONS_FAILED
    ready = starting = draining = 0
    streak = pool.replacements_in_row
    to_replace: list[tuple[AttemptView, str]] = []

    for a in attempts:
        if a.state == "releasing":
            draining += 1
            continue
        if a.state not in LIVE:
            continue
        node = node_of.get(a.id)
        view = a
        if node is not None:
            if a.token_present:
                actions.append(DropToken(a.id))  # as soon as the Node exists, before Ready
                view = replace(view, token_present=False)
            if pool.gpus and (ACCELERATOR_LABEL, "nvidia") not in node.labels:
                # A GPU Node that joined without the label (older agent config) gets it.
                actions.append(LabelNode(node.name, ACCELERATOR_LABEL, "nvidia"))
        view = replace(view, node_state=_node_state(pool, node))
        if node is None:
            if a.vm_created_at is not None and now - a.vm_created_at >= NODE_APPEAR_TIMEOUT:
                to_replace.append((a, "its Node did not appear within 10 minutes"))
            else:
                starting += 1
        elif not node.ready:
            since = a.not_ready_since or now
            view = replace(view, not_ready_since=since)
            if now - since >= NOT_READY_TIMEOUT:
                to_replace.append((a, "its Node stayed NotReady for 15 minutes"))
            else:
                starting += 1
        else:
            view = replace(view, not_ready_since=None)
            counted, view, error = _gpu_check(pool, view, node, now)
            if error:
                errors.append(error)
            if counted:
                ready += 1
                if a.replaces is not None:
                    streak = 0  # the replacement itself is Ready: the run of failures ends
            elif node.gpus == 0:
                starting += 1  # waiting for the device plugin; a wrong count is never counted
        if view != a:
            updated[a.id] = view

    for a, reason in [] if parked or pool.held else to_replace:
        if streak >= MAX_REPLACEMENTS_IN_ROW:
            errors.append(
                f"VM {a.id} needed a replacement ({reason}) after "
                f"{MAX_REPLACEMENTS_IN_ROW} replacements in a row; {JOIN_PRECONDITIONS}"
            )
            break
        streak += 1
        actions += [Release(a.id, reason), NewAttempt(replaces=a.id)]

    blocked = parked or bool(errors)
    addons_failed = bool(pool.addons_diagnostic or pool.ingress_diagnostic)
    failed = blocked or addons_failed
    backing_off = pool.backoff_until is not None and now < pool.backoff_until
    if blocked or backing_off:
        # Parked (or parking this pass), or waiting out a provider back-off: buy nothing,
        # release nothing; replacements decided above are dropped.
        actions = [x for x in actions if not isinstance(x, (NewAttempt, Release))]
    else:
        actions = _fit_to_count(pool, attempts, node_of, actions)
        if addons_failed:
            # An add-on failure never blocks releasing or replacing the existing VMs, but
            # no VM is bought beyond those replacements until the add-ons are fixed.
            actions = [x for x in actions
                       if not (isinstance(x, NewAttempt) and x.replaces is None)]
        if pool.held:
            # Held by the brake: no replacement was decided above, and no VM is bought.
            actions = [x for x in actions if not isinstance(x, NewAttempt)]
        after = [updated.get(a.id, a) for a in attempts]
        if _has(actions, NewAttempt) or _has(actions, Release) or any(
            a.state in ("pending", "creating") for a in attempts
        ) or stack_digest(pool.hosts_service, after) != pool.applied_digest:
            actions.append(ApplyStack())
    if not blocked and pool.ingress_release in INGRESS_WRITES and (
        _has(actions, ApplyStack) or stack_digest(
            pool.hosts_service, [updated.get(a.id, a) for a in attempts]) == pool.applied_digest
    ):
        # Only once the pool's stack holds the port-80 rule (applied this pass, before it).
        actions.append(EnsureIngressRelease(pool.ingress_release))

    entry = pool.ingress_entry
    if pool.hosts_service and not blocked:
        entry, moves = _elect_entry(pool, attempts, node_of, updated, actions, now)
        actions += moves

    # VMs due for replacement drain when their release goes ahead, else they still start.
    released = len([x for x in actions if isinstance(x, Release)])
    draining += released
    starting += len(to_replace) - released

    code = None
    if failed:
        shown = errors + [x for x in (pool.addons_diagnostic, pool.ingress_diagnostic) if x]
        state, last_error = "failed", "; ".join(shown) if shown else None
        code = POOL_FAILED if blocked else ADDONS_FAILED
    elif ready == pool.vm_count and not _has(actions, NewAttempt):
        state, last_error = "ready", None
    else:
        state, last_error = "provisioning", None
    return Decision(
        state=state,
        last_error=last_error,
        replacements_in_row=streak,
        counts=Counts(ready, starting, draining),
        actions=actions,
        attempts=updated,
        ingress_entry=entry,
        error_code=code,
    )


def _elect_entry(
    pool: PoolView, attempts: list[AttemptView], node_of: dict[str, NodeView],
    updated: dict[str, AttemptView], actions: list[Action], now: datetime,
) -> tuple[str | None, list[Action]]:
    """The pool's ingress entry: the Ready VM with the lowest attempt id. It keeps the role
    until its Node has been NotReady for two minutes while another VM's Node is Ready; with
    no Ready VM to take over, it stays until its VM is replaced."""
    releasing = {x.attempt_id for x in actions if isinstance(x, Release)}
    live = {a.id: updated.get(a.id, a) for a in attempts
            if a.state in LIVE and a.id not in releasing}
    ready = sorted(aid for aid, a in live.items()
                   if a.node_state == "Ready" and aid in node_of)
    current = pool.ingress_entry if pool.ingress_entry in live else None
    chosen = current
    if current is None:
        chosen = ready[0] if ready else None
    else:
        cur = live[current]
        down = (current not in node_of or (
            cur.not_ready_since is not None and now - cur.not_ready_since >= INGRESS_FAILOVER))
        others = [aid for aid in ready if aid != current]
        if down and others:
            chosen = others[0]
    moves: list[Action] = []
    if pool.ingress_entry and pool.ingress_entry != chosen and pool.ingress_entry in node_of:
        moves.append(LabelNode(node_of[pool.ingress_entry].name, INGRESS_ENTRY_LABEL, None))
    if chosen is not None and chosen in node_of:
        node = node_of[chosen]
        if (INGRESS_ENTRY_LABEL, pool.id) not in node.labels:
            moves.append(LabelNode(node.name, INGRESS_ENTRY_LABEL, pool.id))
    return chosen, moves


def _fit_to_count(
    pool: PoolView, attempts: list[AttemptView], node_of: dict[str, NodeView],
    actions: list[Action],
) -> list[Action]:
    """Top up to the pool's count, or trim a surplus (never buy a VM twice)."""
    releasing = {x.attempt_id for x in actions if isinstance(x, Release)}
    kept = [a for a in attempts if a.state in LIVE and a.id not in releasing]
    planned = [x for x in actions if isinstance(x, NewAttempt)]
    surplus = len(kept) + len(planned) - pool.vm_count
    if surplus <= 0:
        return actions + [NewAttempt() for _ in range(-surplus)]
    # First skip replacements, then release the attempts least far along (no Node, newest).
    out = list(actions)
    for x in planned[:surplus]:
        out.remove(x)
    surplus -= min(surplus, len(planned))
    newest_first = sorted(kept, key=lambda a: a.id, reverse=True)
    victims = sorted(newest_first, key=lambda a: a.id in node_of)[:surplus]  # stable sort
    out += [Release(a.id, "more VMs than the pool's count") for a in victims]
    return out


def _node_state(pool: PoolView, node: NodeView | None) -> str | None:
    if node is None:
        return None
    if not node.ready:
        return "NotReady"
    if pool.gpus and node.gpus != pool.gpus:
        return "NoDevices" if node.gpus == 0 else "Mismatch"
    return "Ready"


def _has(actions: list[Action], kind: type) -> bool:
    return any(isinstance(a, kind) for a in actions)


def _gpu_check(
    pool: PoolView, a: AttemptView, node: NodeView, now: datetime
) -> tuple[bool, AttemptView, str | None]:
    """(counted as ready, updated view, error) for a Ready Node."""
    if not pool.gpus:
        return True, a, None
    if node.gpus == pool.gpus:
        return True, replace(a, gpu_ready_seen=True, gpu_missing_since=None), None
    if node.gpus != 0:
        return False, a, (
            f"device-count mismatch: Node {node.name} advertises {node.gpus} nvidia.com/gpu, "
            f"the catalog says {pool.gpus} for this VM type; refresh the catalog or choose a "
            "VM type whose physical device count matches"
        )
    # Zero devices: from the VM's creation, or from the pass that first saw them missing on
    # a Node that had them.
    origin = a.gpu_missing_since or (now if a.gpu_ready_seen else a.vm_created_at or now)
    a = replace(a, gpu_missing_since=origin)
    if now - origin >= GPU_DEVICE_GRACE:
        return False, a, (
            f"Node {node.name} is Ready but advertises no nvidia.com/gpu after 10 minutes; "
            f"NVIDIA add-ons: {pool.addons_state} (RuntimeClass nvidia, DaemonSet "
            "kube-system/anycloud-nvidia-device-plugin)"
        )
    return False, a, None


def _decide_delete(
    pool: PoolView, attempts: list[AttemptView], nodes: list[NodeView]
) -> Decision:
    """Deleting: namespace, Nodes, VMs (until the provider confirms), network, done."""
    draining = sum(1 for a in attempts if a.state in (*LIVE, "releasing"))
    if pool.referenced:
        return Decision("deleting", "deletion waits: work still targets the node pool",
                        pool.replacements_in_row, Counts(draining=draining))
    issued = {a.node_name for a in attempts}
    actions: list[Action] = [DeleteNamespace()]
    # A VM that joined while the pool was being deleted: its token goes too.
    joined = {a.id for a in attempts for n in nodes if _matches(pool, n, a)}
    actions += [DropToken(a.id) for a in attempts
                if a.state in LIVE and a.token_present and a.id in joined]
    actions += [RemoveNode(n.name, "node pool deleting") for n in nodes
                if _claims(pool, n, issued)]
    open_attempts = [a for a in attempts if a.state != "released"]
    actions += [Release(a.id, "node pool deleting") for a in open_attempts
                if a.state in LIVE]
    if open_attempts:
        actions.append(ApplyStack())
    elif not pool.network_removed:
        # The release goes with the pool, once its VMs are gone and before its network.
        if pool.hosts_service:
            actions.append(RemoveIngressRelease())
        actions.append(DestroyStack())
    else:
        return Decision("deleted", None, pool.replacements_in_row, Counts())
    return Decision("deleting", None, pool.replacements_in_row, Counts(draining=draining),
                    actions)
