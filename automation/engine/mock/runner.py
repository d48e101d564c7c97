"""StackRunner under the SDK's mock engine: the same stack programs, no Pulumi CLI.

The mock engine itself keeps no state, so this runner does what the engine would: it keeps
the last applied resources per stack under ``$ANYCLOUD_HOME/mock-engine`` (ids, the
non-secret inputs, and a salted digest of every input property -- never a secret value),
diffs each run against them (``automation.engine.mock.diff``), deletes what a program no
longer registers, and gates ``up`` on the policy pack like ``pulumi up --policy-pack``.
Every result says ``engine: mock``.
"""

from __future__ import annotations

import json
import os
import secrets
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from automation.crash import crashpoint
from automation.engine.errors import EngineFailed
from automation.engine.mock import diff
from automation.engine.mock.model import (
    SECRET,
    CloudFailure,
    PendingResource,
    ProgramRun,
    RegisteredResource,
    Step,
)
from automation.engine.runner import (
    ChangeSummary,
    Operation,
    PolicyFinding,
    ProgressEvent,
    ProgressSink,
    RunResult,
    StackTarget,
)


class _Deployment:
    """The planner the mock engine consults for every resource as the program registers
    it. ``execute`` (an ``up``): a refused update fails the resource, and a
    delete-before-replace deletes the old resource before the cloud creates the new one."""

    def __init__(self, runner: MockEngineRunner, state: dict[str, Any], *,
                 execute: bool) -> None:
        self.runner = runner
        self.state = state
        self.execute = execute

    def decide(self, resource: PendingResource) -> Step:
        old = self.state["resources"].get(resource.urn)
        d = diff.decide(old, resource.type, resource.custom, resource.inputs, resource.options,
                   self.state["salt"])
        old_id = old.get("id") if old else None
        if self.execute and d.rejected:
            raise CloudFailure(_refusal(resource.type, resource.name, d))
        if self.execute and d.op == "replace" and d.delete_before_replace and old:
            self.runner._delete(diff.deleted(resource.urn, old))
        return Step(op=d.op, old_id=old_id, delete_before_replace=d.delete_before_replace)


def _refusal(type_: str, name: str, d: diff.Decision) -> str:
    path = d.rejected[0]
    message = d.rejected_message.format(path=path) if d.rejected_message else (
        f"changing {path} in place is not allowed")
    return f"updating {type_} {name}: {message}"


class MockEngineRunner:
    engine: Literal["mock"] = "mock"

    def __init__(self, home: Path, cloud: Any = None,
                 policy_config: dict[str, Any] | None = None) -> None:
        from automation.engine.mock.providers import MockProviders

        self.home = home
        self.cloud = cloud if cloud is not None else MockProviders()
        self.policy_config = policy_config

    # -- state --------------------------------------------------------------------------

    def _state_path(self, target: StackTarget) -> Path:
        return self.home / "mock-engine" / f"{target.stack_name}.json"

    def load_state(self, target: StackTarget) -> dict[str, Any]:
        path = self._state_path(target)
        state = json.loads(path.read_text()) if path.exists() else {"resources": {}}
        # The salt of the property digests: random per stack, so a digest of a short
        # secret cannot be looked up in a table made for another stack.
        state.setdefault("salt", secrets.token_hex(16))
        return state

    def _save_state(self, target: StackTarget, state: dict[str, Any]) -> None:
        path = self._state_path(target)
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".state-")
        with os.fdopen(fd, "w") as fh:
            json.dump(state, fh, indent=1, sort_keys=True, default=str)
        os.replace(tmp, path)

    def _record(self, r: RegisteredResource, change: diff.Change, old: dict[str, Any] | None,
                salt: str) -> dict[str, Any]:
        """What the state keeps of an applied resource: ignored properties keep their
        recorded digests (the engine keeps their old values)."""
        leaves = {diff.format_path(p): diff.leaf_digest(salt, v)
                  for p, v in diff.flatten(r.inputs).items()}
        if change.op in ("update", "same") and old and "leaves" in old:
            ignored = diff.patterns(r.options.get("ignoreChanges") or ())
            leaves = {p: d for p, d in leaves.items()
                      if not any(diff.covers(i, diff.parse_path(p)) for i in ignored)}
            leaves.update({p: d for p, d in old["leaves"].items()
                           if any(diff.covers(i, diff.parse_path(p)) for i in ignored)})
        return {"type": r.type, "name": r.name, "id": r.id, "custom": r.custom,
                "digest": diff.resource_digest(r), "retain": bool(r.options.get("retainOnDelete")),
                "inputs": {k: v for k, v in r.inputs.items() if k not in r.secret_inputs},
                "dependencies": diff.dependencies(r), "leaves": leaves}

    # -- running ------------------------------------------------------------------------

    def evaluate(self, target: StackTarget, *, cloud: Any = None, preview: bool = False,
                 reveal_secrets: bool = True, planner: Any = None) -> ProgramRun:
        """Run the stack program once under mocks (``plan`` and the policy check use this).
        Without ``cloud``: against one that buys nothing but answers lookups (the newest
        image) as this runner's cloud would. ``preview``/``planner``: see ``run_program``."""
        from automation.engine.mock.program import run_program
        from automation.engine.mock.providers import MockProviders

        if cloud is None:
            cloud = MockProviders(images=getattr(self.cloud, "images", None))
        try:
            return run_program(
                target.program(), cloud=cloud, stack=target.stack_name,
                preview=preview, reveal_secrets=reveal_secrets, planner=planner,
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

    def check_policy(self, run: ProgramRun,
                     target: StackTarget | None = None) -> list[PolicyFinding]:
        from policies.offline import check_resources

        config = {**(self.policy_config or {}), **((target and target.policy_config) or {})}

        resources = [{"urn": r.urn, "type": r.type, "name": r.name, "inputs": r.inputs,
                      "secret_keys": list(r.secret_inputs), "options": r.options}
                     for r in run.resources]
        return [PolicyFinding(policy=v.policy, enforcement=v.enforcement_level,
                              message=v.message, urn=v.urn)
                for v in check_resources(resources, config or None)]

    def _changes(self, run: ProgramRun, state: dict[str, Any]) -> diff.Plan:
        """Diff a run against the recorded state, as the engine would."""
        before: dict[str, Any] = state["resources"]
        by_urn = {r.urn: r for r in run.resources}
        changes: list[diff.Change] = []
        for urn in diff.topological({r.urn: diff.dependencies(r) for r in run.resources}):
            r, old = by_urn[urn], before.get(urn)
            d = diff.decide(old, r.type, r.custom, r.inputs, r.options, state["salt"])
            changes.append(diff.Change(
                d.op, r.urn, r.type, r.name, r.id, bool(r.options.get("retainOnDelete")),
                diff.redacted(r), old_id=old.get("id") if old else None, changed=d.changed,
                replace_keys=d.replace_keys, delete_before_replace=d.delete_before_replace,
                rejected=d.rejected, rejected_message=d.rejected_message,
            ))
        changes += [diff.deleted(urn, old) for urn, old in sorted(before.items())
                    if urn not in by_urn]
        counts = Counter(c.op for c in changes)
        summary = ChangeSummary(**{k: counts[k]
                                   for k in ("create", "update", "replace", "delete", "same")})
        return diff.Plan(summary, changes, diff.engine_steps(changes, diff.recorded_order(state)))

    @staticmethod
    def _diff_text(plan: diff.Plan) -> str:
        mark = {"create": "+", "update": "~", "delete": "-", "create-replacement": "++",
                "replace": "+-", "delete-replaced": "--"}
        lines = []
        for op, c in plan.steps:
            head = f"{mark[op]} {c.type} {c.name}"
            if op == "create":
                lines.append(head)
                lines += [f"    {key}: {json.dumps(value, default=str)[:200]}"
                          for key, value in sorted((c.inputs or {}).items())]
            elif op == "replace":
                order = "delete before replace" if c.delete_before_replace else (
                    "create before delete")
                lines.append(f"{head} (replace, {order})")
                lines += [f"    {'+-' if p in c.replace_keys else '~'} {p}" for p in c.changed]
            elif op == "update":
                lines.append(head)
                lines += [f"    ~ {p}" + (" (refused in place by the cloud)"
                                          if p in c.rejected else "") for p in c.changed]
            else:
                lines.append(head)
        return "\n".join(lines)

    @staticmethod
    def _emit(sink: ProgressSink | None, steps: Sequence[tuple[str, diff.Change]],
              state: Literal["started", "done"]) -> None:
        if sink is None:
            return
        for op, c in steps:
            sink(ProgressEvent(kind="resource", op=op, type=c.type, urn=c.urn,
                               name=c.name, state=state))

    def _result(self, op: Operation, target: StackTarget, summary: ChangeSummary,
                diff: str = "", outputs: dict[str, Any] | None = None,
                policy: list[PolicyFinding] | None = None) -> RunResult:
        return RunResult(engine="mock", operation=op, stack=target.stack_name, summary=summary,
                         diff=diff, outputs=outputs or {}, policy=policy or [])

    def preview(self, target: StackTarget, *, diff: bool = False,
                on_progress: ProgressSink | None = None) -> RunResult:
        state = self.load_state(target)
        run = self.evaluate(target, preview=True,
                            planner=_Deployment(self, state, execute=False))
        plan = self._changes(run, state)
        self._emit(on_progress, plan.steps, "done")
        # Values unknown until their resources exist are "not verified" (advisory), as the
        # policy SDK reports them during a preview.
        findings = self.check_policy(run, target)
        for f in findings:
            if on_progress:
                on_progress(ProgressEvent(kind="policy", name=f.policy, severity=f.enforcement,
                                          message=f.message, urn=f.urn))
        return self._result("preview", target, plan.summary,
                            self._diff_text(plan) if diff else "", policy=findings)

    def up(self, target: StackTarget, *, on_progress: ProgressSink | None = None) -> RunResult:
        state = self.load_state(target)
        # The program runs twice: once against a cloud that buys nothing, for the policy
        # gate with every input known (a violation must stop the update before any VM
        # exists), then for real.
        gate = self.evaluate(target)
        findings = self.check_policy(gate, target)
        if any(f.enforcement == "mandatory" for f in findings):
            return self._result("up", target, self._changes(gate, state).summary,
                                policy=findings)
        run = self.evaluate(target, cloud=self.cloud,
                            planner=_Deployment(self, state, execute=True))
        plan = self._changes(run, state)
        self._emit(on_progress, plan.steps, "started")
        # Creates, updates and delete-before-replace deletes happened as the program ran;
        # what is left are the deletes, in order.
        for op, c in plan.steps:
            if op == "delete" or (op == "delete-replaced" and not c.delete_before_replace
                                  and c.old_id != c.id):
                self._delete(diff.deleted(c.urn, state["resources"][c.urn]))
        crashpoint("mid-stack-up")
        changes = {c.urn: c for c in plan.changes}
        self._save_state(target, {"salt": state["salt"], "resources": {
            r.urn: self._record(r, changes[r.urn], state["resources"].get(r.urn),
                                state["salt"])
            for r in run.resources
        }})
        self._emit(on_progress, plan.steps, "done")
        outputs = {k: (SECRET if k in run.secret_outputs else v) for k, v in run.outputs.items()}
        return self._result("up", target, plan.summary, outputs=outputs, policy=findings)

    def _delete(self, change: diff.Change) -> None:
        delete = getattr(self.cloud, "delete_resource", None)
        if delete is not None and change.old_id and not change.retain:
            delete(change.type, change.old_id)

    def destroy(self, target: StackTarget, *,
                on_progress: ProgressSink | None = None) -> RunResult:
        state = self.load_state(target)
        deletes = [diff.deleted(urn, r) for urn, r in sorted(state["resources"].items())]
        steps = diff.engine_steps(deletes, diff.recorded_order(state))
        self._emit(on_progress, steps, "started")
        for _, c in steps:
            self._delete(c)
        self._save_state(target, {"salt": state["salt"], "resources": {}})
        self._emit(on_progress, steps, "done")
        return self._result("destroy", target, ChangeSummary(delete=len(steps)))

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
