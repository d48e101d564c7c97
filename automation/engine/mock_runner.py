"""StackRunner under the SDK's mock engine: the same stack programs, no Pulumi CLI.

The mock engine itself keeps no state, so this runner does what the engine would: it keeps
the last applied resources per stack (ids and an input digest, never a secret value) under
``$ANYCLOUD_HOME/mock-engine``, diffs each run against them, deletes what a program no
longer registers, and gates ``up`` on the policy pack like ``pulumi up --policy-pack``.
Every result says ``engine: mock``.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from automation.crash import crashpoint
from automation.engine.errors import EngineFailed
from automation.engine.runner import (
    ChangeSummary,
    Operation,
    PolicyFinding,
    ProgressEvent,
    ProgressSink,
    RunResult,
    StackTarget,
)
from automation.mock_engine import SECRET, CloudFailure, ProgramRun, RegisteredResource


def _digest(resource: RegisteredResource) -> str:
    body = json.dumps({"type": resource.type, "inputs": resource.inputs}, sort_keys=True,
                      default=str)
    return hashlib.sha256(body.encode()).hexdigest()


@dataclass(frozen=True)
class _Change:
    op: str  # create | update | same | delete
    urn: str
    type: str
    name: str
    id: str | None
    retain: bool  # retain_on_delete: dropped from state, left in the cloud
    inputs: dict[str, Any] | None  # redacted; None for a delete


def _deleted(urn: str, recorded: dict[str, Any]) -> _Change:
    return _Change("delete", urn, recorded["type"], recorded["name"], recorded.get("id"),
                   bool(recorded.get("retain")), None)


def _redacted(resource: RegisteredResource) -> dict[str, Any]:
    return {k: (SECRET if k in resource.secret_inputs else v)
            for k, v in resource.inputs.items()}


class MockEngineRunner:
    engine: Literal["mock"] = "mock"

    def __init__(self, home: Path, cloud: Any = None,
                 policy_config: dict[str, Any] | None = None) -> None:
        from automation.mock_engine import SimulatedCloud

        self.home = home
        self.cloud = cloud if cloud is not None else SimulatedCloud()
        self.policy_config = policy_config

    # -- state --------------------------------------------------------------------------

    def _state_path(self, target: StackTarget) -> Path:
        return self.home / "mock-engine" / f"{target.stack_name}.json"

    def load_state(self, target: StackTarget) -> dict[str, Any]:
        path = self._state_path(target)
        return json.loads(path.read_text()) if path.exists() else {"resources": {}}

    def _save_state(self, target: StackTarget, state: dict[str, Any]) -> None:
        path = self._state_path(target)
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".state-")
        with os.fdopen(fd, "w") as fh:
            json.dump(state, fh, indent=1, sort_keys=True, default=str)
        os.replace(tmp, path)

    # -- running ------------------------------------------------------------------------

    def evaluate(self, target: StackTarget, *, cloud: Any = None, preview: bool = False,
                 reveal_secrets: bool = True) -> ProgramRun:
        """Run the stack program once under mocks (``plan`` and the policy check use this).
        Without ``cloud``: against one that buys nothing but answers lookups (the newest
        image) as this runner's cloud would."""
        from automation.mock_engine import SimulatedCloud, run_program

        if cloud is None:
            cloud = SimulatedCloud(images=getattr(self.cloud, "images", None))
        try:
            return run_program(
                target.program(), cloud=cloud, stack=target.stack_name,
                preview=preview, reveal_secrets=reveal_secrets,
            )
        except CloudFailure as exc:
            raise EngineFailed(f"mock engine: provider error on {target.stack_name}: {exc}",
                               code="PROVIDER_ERROR") from exc
        except Exception as exc:
            # The SDK wraps errors raised in mocks; find the cloud's own message if any.
            cause: BaseException | None = exc
            while cause is not None and not isinstance(cause, CloudFailure):
                cause = cause.__cause__ or cause.__context__
            if cause is not None:
                raise EngineFailed(f"mock engine: provider error on {target.stack_name}: "
                                   f"{cause}", code="PROVIDER_ERROR") from exc
            raise

    def check_policy(self, run: ProgramRun) -> list[PolicyFinding]:
        from policies.offline import check_resources

        resources = [{"urn": r.urn, "type": r.type, "name": r.name, "inputs": r.inputs,
                      "secret_keys": list(r.secret_inputs), "options": r.options}
                     for r in run.resources]
        return [PolicyFinding(policy=v.policy, enforcement=v.enforcement_level,
                              message=v.message, urn=v.urn)
                for v in check_resources(resources, self.policy_config)]

    def _changes(self, run: ProgramRun,
                 state: dict[str, Any]) -> tuple[ChangeSummary, list[_Change]]:
        """Diff a run against the recorded state, as the engine would."""
        before: dict[str, Any] = state["resources"]
        changes: list[_Change] = []
        for r in run.resources:
            old = before.get(r.urn)
            op = "create" if old is None else "same" if old["digest"] == _digest(r) else "update"
            changes.append(_Change(op, r.urn, r.type, r.name, r.id,
                                   bool(r.options.get("retainOnDelete")), _redacted(r)))
        registered = {r.urn for r in run.resources}
        changes += [_deleted(urn, old) for urn, old in sorted(before.items())
                    if urn not in registered]
        counts = Counter(c.op for c in changes)
        summary = ChangeSummary(**{k: counts[k] for k in ("create", "update", "delete", "same")})
        return summary, changes

    @staticmethod
    def _diff_text(changes: list[_Change]) -> str:
        mark = {"create": "+", "update": "~", "delete": "-"}
        lines = []
        for c in changes:
            if c.op == "same":
                continue
            lines.append(f"{mark[c.op]} {c.type} {c.name}")
            lines += [f"    {key}: {json.dumps(value, default=str)[:200]}"
                      for key, value in sorted((c.inputs or {}).items())]
        return "\n".join(lines)

    @staticmethod
    def _emit(sink: ProgressSink | None, changes: list[_Change],
              state: Literal["started", "done"]) -> None:
        if sink is None:
            return
        for c in changes:
            if c.op != "same":
                sink(ProgressEvent(kind="resource", op=c.op, type=c.type, urn=c.urn,
                                   name=c.name, state=state))

    def _result(self, op: Operation, target: StackTarget, summary: ChangeSummary,
                diff: str = "", outputs: dict[str, Any] | None = None,
                policy: list[PolicyFinding] | None = None) -> RunResult:
        return RunResult(engine="mock", operation=op, stack=target.stack_name, summary=summary,
                         diff=diff, outputs=outputs or {}, policy=policy or [])

    def preview(self, target: StackTarget, *, diff: bool = False,
                on_progress: ProgressSink | None = None) -> RunResult:
        run = self.evaluate(target)
        summary, changes = self._changes(run, self.load_state(target))
        self._emit(on_progress, changes, "done")
        findings = self.check_policy(run)
        for f in findings:
            if on_progress:
                on_progress(ProgressEvent(kind="policy", name=f.policy, severity=f.enforcement,
                                          message=f.message, urn=f.urn))
        return self._result("preview", target, summary,
                            self._diff_text(changes) if diff else "", policy=findings)

    def up(self, target: StackTarget, *, on_progress: ProgressSink | None = None) -> RunResult:
        # The program runs twice: once against a cloud that buys nothing, for the policy
        # gate (a violation must stop the update before any VM exists), then for real.
        planned = self.preview(target, on_progress=None)
        if planned.mandatory_violations:
            return planned.model_copy(update={"operation": "up"})
        state = self.load_state(target)
        run = self.evaluate(target, cloud=self.cloud, preview=False, reveal_secrets=True)
        summary, changes = self._changes(run, state)
        self._emit(on_progress, changes, "started")
        for c in changes:
            if c.op == "delete":
                self._delete(c)
        crashpoint("mid-stack-up")
        self._save_state(target, {"resources": {
            r.urn: {"type": r.type, "name": r.name, "id": r.id, "digest": _digest(r),
                    "retain": bool(r.options.get("retainOnDelete"))}
            for r in run.resources
        }})
        self._emit(on_progress, changes, "done")
        outputs = {k: (SECRET if k in run.secret_outputs else v) for k, v in run.outputs.items()}
        return self._result("up", target, summary, outputs=outputs, policy=planned.policy)

    def _delete(self, change: _Change) -> None:
        delete = getattr(self.cloud, "delete_resource", None)
        if delete is not None and change.id and not change.retain:
            delete(change.type, change.id)

    def destroy(self, target: StackTarget, *,
                on_progress: ProgressSink | None = None) -> RunResult:
        state = self.load_state(target)
        changes = [_deleted(urn, r) for urn, r in sorted(state["resources"].items())]
        self._emit(on_progress, changes, "started")
        for c in changes:
            self._delete(c)
        self._save_state(target, {"resources": {}})
        self._emit(on_progress, changes, "done")
        return self._result("destroy", target, ChangeSummary(delete=len(changes)))

    def refresh(self, target: StackTarget, *,
                on_progress: ProgressSink | None = None) -> RunResult:
        """Drop VMs the cloud no longer has from the stack state."""
        state = self.load_state(target)
        lookup = getattr(self.cloud, "vm_exists", None)
        gone = [urn for urn, r in state["resources"].items()
                if lookup is not None and r.get("id") and lookup(r["type"], r["id"]) is False]
        for urn in gone:
            del state["resources"][urn]
        self._save_state(target, state)
        return self._result("refresh", target, ChangeSummary(
            delete=len(gone), same=len(state["resources"])))

    def lookup_vms(self, target: StackTarget, attempt_ids: list[str]) -> dict[str, str]:
        """Ask the simulated cloud; without one, the stack state is the only witness."""
        lookup = getattr(self.cloud, "lookup", None)
        if lookup is not None:
            return {a: str(lookup(a)) for a in attempt_ids}
        urns = self.load_state(target)["resources"]
        return {a: "running" if any(a in urn for urn in urns) else "absent" for a in attempt_ids}

    def unlock(self, target: StackTarget) -> bool:
        """The mock engine takes no lock: nothing to clear (False: nothing was unlocked)."""
        return False
