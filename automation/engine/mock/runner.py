"""StackRunner under the SDK's mock engine: the same stack programs, no Pulumi CLI.

The mock engine itself keeps no state, so this runner does what the engine would: it keeps
the last applied resources per stack under ``$ANYCLOUD_HOME/mock-engine`` (ids, the
non-secret inputs, and a salted digest of every input property -- never a secret value),
diffs each run against them (``automation.engine.mock.diff``), deletes what a program no
longer registers, and gates ``up`` on the policy pack like ``pulumi up --policy-pack``.
Every result says ``engine: mock``.
"""

from __future__ import annotations

import copy
import json
import os
import secrets
import tempfile
import threading
from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from automation import instruments
from automation.crash import crashpoint
from automation.engine.errors import EngineFailed
from automation.engine.mock import diff
from automation.engine.mock.model import (
    NOT_IN_THE_CLOUD,
    SECRET,
    CloudFailure,
    PendingResource,
    ProgramRun,
    RegisteredResource,
    Step,
)
from automation.engine.recovery import Answer, PendingCreate
from automation.engine.runner import (
    ChangeSummary,
    DriftChange,
    Operation,
    PolicyFinding,
    ProgressEvent,
    ProgressSink,
    RunResult,
    StackTarget,
)


class _Deployment:
    """The planner the mock engine consults for every resource as the program registers
    it. ``execute`` (an ``up``): a refused update fails the resource, a delete-before-replace
    deletes the old resource before the cloud creates the new one, and the state file is
    checkpointed as the engine writes its snapshot: each create recorded as in flight
    before the cloud is asked (``pending_operations``, as Pulumi's), and recorded as a
    resource once the cloud has answered. A run killed in between leaves what a killed
    ``pulumi up`` leaves, and the next run settles it (``MockEngineRunner._recover``)."""

    def __init__(self, runner: MockEngineRunner, target: StackTarget, state: dict[str, Any],
                 *, execute: bool) -> None:
        self.runner = runner
        self.target = target
        self.state = state
        self.execute = execute
        self.steps: dict[str, Step] = {}
        self.records: dict[str, dict[str, Any]] = {}  # what the state records, by URN
        self.checkpoint = copy.deepcopy(state)  # the state file as of the last step
        self._lock = threading.Lock()

    def decide(self, resource: PendingResource) -> Step:
        old = self.state["resources"].get(resource.urn)
        d = diff.decide(old, resource.type, resource.custom, resource.inputs, resource.options,
                   self.state["salt"])
        old_id = old.get("id") if old else None
        if self.execute and d.rejected:
            raise CloudFailure(_refusal(resource.type, resource.name, d))
        if self.execute and d.op == "replace" and d.delete_before_replace and old:
            self.runner._delete(diff.deleted(resource.urn, old))
        step = Step(op=d.op, old_id=old_id, delete_before_replace=d.delete_before_replace)
        if self.execute and step.op in ("create", "replace"):
            self.steps[resource.urn] = step
        return step

    def begin(self, resource: PendingResource, checked: dict[str, Any]) -> None:
        """The cloud is about to be asked to create ``resource``: record the create as in
        flight first, with its inputs as the provider checked them (an autoname is part of
        them, as in Pulumi's state), so that a lookup can find it if the run is killed."""
        # A component lives only in the state: nothing in flight.
        if resource.urn in self.steps and resource.custom:
            self._begin(resource, checked)

    def _record(self, resource: PendingResource) -> dict[str, Any]:
        record = self.records.get(resource.urn)
        if record is None:
            record = self.records[resource.urn] = self.runner._record(
                resource.registered(None), "create", None, self.state["salt"])
        return record

    def _begin(self, resource: PendingResource, checked: dict[str, Any]) -> None:
        record = self._record(resource)
        operation = {"type": "creating", "record": record, "resource": {
            "urn": resource.urn, "type": resource.type, "custom": True,
            "inputs": {**record["inputs"], **checked}, "parent": resource.parent,
            "provider": resource.provider}}
        with self._lock:
            self.checkpoint.setdefault("pending_operations", []).append(operation)
            self.runner._save_state(self.target, self.checkpoint)

    def applied(self, resource: PendingResource, rid: str | None) -> None:
        step = self.steps.get(resource.urn)
        if step is None:
            return
        with self._lock:
            resources = self.checkpoint["resources"]
            old = resources.get(resource.urn)
            if (step.op == "replace" and old and not step.delete_before_replace
                    and old.get("id") != rid):
                # The replaced resource still exists: deleted after the run (or by the next
                # one, if this one is killed first).
                self.checkpoint.setdefault("deletes", []).append(old)
            resources[resource.urn] = {**self._record(resource), "id": rid}
            self._settled(resource)

    def refused(self, resource: PendingResource) -> None:
        if resource.urn in self.steps:
            with self._lock:
                self._settled(resource)

    def _settled(self, resource: PendingResource) -> None:
        self.checkpoint["pending_operations"] = [
            op for op in self.checkpoint.get("pending_operations", [])
            if op["resource"]["urn"] != resource.urn]
        self.runner._save_state(self.target, self.checkpoint)


class _Adoption:
    """The planner of an adopt run: every resource the program registers is looked up in
    the cloud (VMs by their attempt tag, found beforehand; the rest by identity, each with
    the ids found for what it depends on) and kept under the id found. What the cloud does
    not hold is left out of the state: the next ``up`` creates it."""

    def __init__(self, vm_ids: dict[str, str | None], find: Any) -> None:
        self.vm_ids = vm_ids
        self.find = find
        self.absent: set[str] = set()

    def decide(self, resource: PendingResource) -> Step:
        if not resource.custom or resource.type.startswith(NOT_IN_THE_CLOUD):
            return Step(op="create")  # lives only in the state: recorded as the program has it
        if resource.urn in self.vm_ids:
            found = self.vm_ids[resource.urn]
        else:
            found = self.find(resource.type, resource.name, resource.inputs)
        if found is None:
            self.absent.add(resource.urn)
            return Step(op="create")
        return Step(op="same", old_id=found)


def _absent_objects(items: list[tuple[PendingCreate, str]]) -> dict[str, Answer]:
    """The mock engine's Kubernetes objects exist nowhere but in its state (no cluster is
    written): one whose create was in flight was never made anywhere."""
    return {p.urn: Answer("absent") for p, _ in items}


def _differing(record: dict[str, Any], live: dict[str, Any], salt: str) -> list[str]:
    """The top-level properties (wire names) whose leaves the cloud shows otherwise than
    the state recorded them. A property the state keeps no plain value of (a secret) is
    compared only if the cloud shows it, which it does not."""
    recorded: dict[str, dict[str, str]] = {}
    for path, digest in (record.get("leaves") or {}).items():
        recorded.setdefault(str(diff.parse_path(path)[0]), {})[path] = digest
    shown: dict[str, dict[str, str]] = {}
    for parts, value in diff.flatten(live).items():
        shown.setdefault(str(parts[0]), {})[diff.format_path(parts)] = diff.leaf_digest(
            salt, value)
    public = set(record.get("inputs") or {})
    return sorted(key for key in set(shown) | (set(recorded) & public)
                  if shown.get(key) != recorded.get(key))


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
            # One string from the C encoder: json.dump writes piece by piece, ~5x slower here.
            fh.write(json.dumps(state, sort_keys=True, default=str))
        os.replace(tmp, path)

    def _record(self, r: RegisteredResource, op: str, old: dict[str, Any] | None,
                salt: str) -> dict[str, Any]:
        """What the state keeps of an applied resource: ignored properties keep their
        recorded digests (the engine keeps their old values)."""
        leaves = {diff.format_path(p): diff.leaf_digest(salt, v)
                  for p, v in diff.flatten(r.inputs).items()}
        if op in ("update", "same") and old and "leaves" in old:
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

    @staticmethod
    def _check_credentials(target: StackTarget) -> None:
        """A provider configured to read its secret from the environment fails when the
        variables are not there, as the real plugins do (the AWS provider's "no valid
        credential sources found", GCP's and azure-native's missing-credentials errors):
        the mock engine does not run a stack whose sealed secret was never handed to it."""
        cred = getattr(target.config, "credential", None)
        missing = [name for name in getattr(cred, "secret_env", ())
                   if not target.secret_env.get(name)]
        if cred is not None and missing:
            raise EngineFailed(
                f"mock engine: provider error on {target.stack_name}: the {cred.provider} "
                f"provider found no credentials: {', '.join(missing)} not set for this "
                "operation", code="PROVIDER_ERROR")

    def evaluate(self, target: StackTarget, *, cloud: Any = None, preview: bool = False,
                 reveal_secrets: bool = True, planner: Any = None) -> ProgramRun:
        """Run the stack program once under mocks (``plan`` and the policy check use this).
        Without ``cloud``: against one that buys nothing but answers lookups (the newest
        image) as this runner's cloud would. ``preview``/``planner``: see ``run_program``."""
        from automation.engine.mock.program import run_program
        from automation.engine.mock.providers import MockProviders

        self._check_credentials(target)
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
        from policies.offline import check_resources, utc_now

        config = {**(self.policy_config or {}), **((target and target.policy_config) or {})}
        # A simulated world's clock may run ahead of the wall clock (``--advance``), and the
        # tokens its passes issue expire after its time: checked against the later of the two.
        world_now = getattr(self.cloud, "now", None)

        def clock() -> datetime:
            return max(utc_now(), world_now()) if world_now is not None else utc_now()

        resources = [{"urn": r.urn, "type": r.type, "name": r.name, "inputs": r.inputs,
                      "secret_keys": list(r.secret_inputs), "options": r.options}
                     for r in run.resources]
        return [PolicyFinding(policy=v.policy, enforcement=v.enforcement_level,
                              message=v.message, urn=v.urn)
                for v in check_resources(resources, config or None, clock=clock)]

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

    @instruments.stack_operation
    def preview(self, target: StackTarget, *, diff: bool = False,
                on_progress: ProgressSink | None = None) -> RunResult:
        state = self.load_state(target)
        run = self.evaluate(target, preview=True,
                            planner=_Deployment(self, target, state, execute=False))
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

    @instruments.stack_operation
    def up(self, target: StackTarget, *, on_progress: ProgressSink | None = None) -> RunResult:
        state = self._recover(target, self._first_state(target, on_progress))
        if not self._state_path(target).exists():
            # The stack exists from its first update on, as Pulumi's does once selected: an
            # update that fails before buying anything leaves an empty state, not none.
            self._save_state(target, state)
        # The program runs twice: once against a cloud that buys nothing, for the policy
        # gate with every input known (a violation must stop the update before any VM
        # exists), then for real.
        gate = self.evaluate(target)
        findings = self.check_policy(gate, target)
        if any(f.enforcement == "mandatory" for f in findings):
            return self._result("up", target, self._changes(gate, state).summary,
                                policy=findings)
        run = self.evaluate(target, cloud=self.cloud,
                            planner=_Deployment(self, target, state, execute=True))
        plan = self._changes(run, state)
        self._emit(on_progress, plan.steps, "started")
        # Creates, updates and delete-before-replace deletes happened as the program ran;
        # what is left are the deletes, in order.
        for op, c in plan.steps:
            if op == "delete" or (op == "delete-replaced" and not c.delete_before_replace
                                  and c.old_id != c.id):
                self._delete(diff.deleted(c.urn, state["resources"][c.urn]))
        for left in state.get("deletes", []):  # replaced by a run killed before its deletes
            self._delete(diff.deleted("", left))
        crashpoint("mid-stack-up")
        changes = {c.urn: c for c in plan.changes}
        self._save_state(target, {"salt": state["salt"], "resources": {
            r.urn: self._record(r, changes[r.urn].op, state["resources"].get(r.urn),
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

    @instruments.stack_operation
    def destroy(self, target: StackTarget, *,
                on_progress: ProgressSink | None = None) -> RunResult:
        self._check_credentials(target)
        state = self._recover(target, self._expected_state(target))
        deletes = [diff.deleted(urn, r) for urn, r in sorted(state["resources"].items())]
        steps = diff.engine_steps(deletes, diff.recorded_order(state))
        self._emit(on_progress, steps, "started")
        for _, c in steps:
            self._delete(c)
        for left in state.get("deletes", []):
            self._delete(diff.deleted("", left))
        self._save_state(target, {"salt": state["salt"], "resources": {}})
        self._emit(on_progress, steps, "done")
        return self._result("destroy", target, ChangeSummary(delete=len(steps)))

    # -- crash recovery -----------------------------------------------------------------

    def _first_state(self, target: StackTarget,
                     on_progress: ProgressSink | None) -> dict[str, Any]:
        """The state an ``up`` starts from. No state at all where the ledger saw only an
        update start (``Expected.started``: the first update of the stack was killed, before
        or after the cloud bought its VMs, and then the state went too) is rebuilt from the
        cloud first, as ``adopt`` does: what that update bought is found by its attempt tag
        and identity and kept, the rest is created by this up, nothing is bought twice. That
        is crash recovery, so it needs no person; a lost state the ledger saw applied still
        does (``STATE_MISSING``)."""
        from automation.engine.expectation import StateMissing

        try:
            return self._expected_state(target)
        except StateMissing:
            expect = target.expect
            if (expect.applied or expect.attempts or self._state_path(target).exists()
                    or getattr(self.cloud, "find", None) is None):
                raise
        self.adopt(target, on_progress=on_progress)
        return self._expected_state(target)

    def _expected_state(self, target: StackTarget) -> dict[str, Any]:
        """The stack's state, once it holds what the ledger saw (``expectation.check``)."""
        from automation.engine import expectation

        state = self.load_state(target)
        held = [*state["resources"].values(),
                *(op["resource"] for op in state.get("pending_operations", []))]
        expectation.check(target, held, f"mock engine, {self._state_path(target)}",
                          exists=self._state_path(target).exists())
        return state

    def _recover(self, target: StackTarget, state: dict[str, Any]) -> dict[str, Any]:
        """Settle the creates a killed run left in flight, as the Pulumi driver does
        (``automation.engine.recovery``): each cloud resource looked up through the
        provider's own lookups (a VM by its attempt tag, a network resource by its tags or
        name) or read by its id, answered by the cloud. Every create found is recorded
        under the id the cloud answered, every one confirmed absent is dropped; otherwise
        nothing changes and the stack stops with ``PENDING_CREATES``."""
        from automation.engine.recovery import gcp_project, pending_creates_in, settle

        pending = pending_creates_in(state)
        if not pending:
            return state
        outcome = settle(pending, set(state["resources"]),
                         lookup_cloud=lambda found: self._lookup_cloud(target, found),
                         lookup_objects=lambda items: self._read_objects(target, items),
                         project=gcp_project(target.config))
        if not outcome.complete:
            raise EngineFailed(
                f"mock engine: stack {target.stack_name} has {len(pending)} create(s) left "
                f"in flight by an interrupted run, and not all could be settled: "
                f"{outcome.describe()}. Nothing was changed; the next run asks again.",
                code="PENDING_CREATES")
        records = {op["resource"]["urn"]: op["record"]
                   for op in state.get("pending_operations", [])}
        for urn, rid in outcome.imported:
            state["resources"][urn] = {**records[urn], "id": rid}
        state["pending_operations"] = []
        self._save_state(target, state)
        return state

    def _lookup_cloud(self, target: StackTarget, pending: list[PendingCreate]
                      ) -> dict[str, Answer]:
        """The providers' lookups (``cloud_lookup_program``) through the pool's provider,
        answered by this runner's cloud."""
        from automation.engine.mock.program import run_program
        from automation.engine.recovery import answers_from_outputs, cloud_lookup_program
        from automation.engine.runner import StackKind

        if target.kind is not StackKind.NODE_POOL:
            return {p.urn: Answer("unknown", detail="only a node-pool stack has cloud "
                                                    "resources") for p in pending}
        from stacks.providers import cloud_provider

        program = cloud_lookup_program(pending, lambda: cloud_provider(target.config))
        run = run_program(program, cloud=self.cloud, stack=f"{target.stack_name}-lookup")
        return answers_from_outputs(run.outputs, pending)

    def _read_objects(self, target: StackTarget, items: list[tuple[PendingCreate, str]]
                      ) -> dict[str, Answer]:
        """Reads by id (``read_program``, ``read_each``) through the pool's provider,
        answered by this runner's cloud; Kubernetes objects as ``_absent_objects``."""
        from automation.engine.mock.program import run_program
        from automation.engine.recovery import read_each, read_program
        from automation.engine.runner import StackKind

        answers = _absent_objects([(p, rid) for p, rid in items if p.kind == "kubernetes"])
        cloud = [(p, rid) for p, rid in items if p.kind != "kubernetes"]
        if not cloud:
            return answers
        if target.kind is not StackKind.NODE_POOL:
            return {**answers, **{p.urn: Answer("unknown", detail="only a node-pool stack "
                                                "has cloud resources") for p, _ in cloud}}
        from stacks.providers import cloud_provider

        def read(some: list[tuple[PendingCreate, str]]) -> dict[str, Any]:
            program = read_program(some, lambda: cloud_provider(target.config))
            return run_program(program, cloud=self.cloud,
                               stack=f"{target.stack_name}-lookup").outputs

        return {**answers, **read_each(cloud, read, CloudFailure)}

    @instruments.stack_operation
    def adopt(self, target: StackTarget, *,
              on_progress: ProgressSink | None = None) -> RunResult:
        """Rebuild the stack's state from what the cloud holds, for a state that was lost
        (``STATE_MISSING``): the VMs looked up by their attempt tag through the providers'
        own lookups (as crash recovery does), everything else by identity. Buys nothing.
        Refused, changing nothing, when a lookup cannot tell."""
        from automation.engine.mock.providers import MockProviders
        from automation.engine.recovery import VM_CLOUDS

        find = getattr(self.cloud, "find", None)
        if find is None:
            raise EngineFailed("mock engine: this cloud answers no lookups, so there is "
                               "nothing to adopt from", code="ADOPT_FAILED")
        listed = self.evaluate(target)
        vms = [PendingCreate(urn=r.urn, type=r.type, custom=True, inputs=r.inputs)
               for r in listed.resources if r.type in VM_CLOUDS]
        answers = self._lookup_cloud(target, vms) if vms else {}
        unknown = [f"{urn}: {a.detail}" for urn, a in answers.items() if a.state == "unknown"]
        if unknown:
            raise EngineFailed(f"mock engine: cannot adopt {target.stack_name}: "
                               + "; ".join(unknown), code="ADOPT_FAILED")
        adoption = _Adoption({urn: a.id for urn, a in answers.items()}, find)
        state = self.load_state(target)
        try:
            run = self.evaluate(target, cloud=MockProviders(images=getattr(
                self.cloud, "images", None)), planner=adoption)
        except EngineFailed as exc:
            raise EngineFailed(f"mock engine: cannot adopt {target.stack_name}: "
                               f"{exc.message}", code="ADOPT_FAILED") from exc
        kept = [r for r in run.resources if r.urn not in adoption.absent]
        self._save_state(target, {"salt": state["salt"], "resources": {
            r.urn: self._record(r, "create", None, state["salt"]) for r in kept}})
        adopted = sum(1 for r in kept if r.custom and not r.type.startswith(NOT_IN_THE_CLOUD))
        summary = ChangeSummary(same=adopted, create=len(adoption.absent))
        if on_progress is not None:
            on_progress(ProgressEvent(kind="diagnostic", severity="info", message=(
                f"adopted {adopted} resource(s) the cloud holds into {target.stack_name}; "
                f"{len(adoption.absent)} not found (the next up creates them)")))
        return self._result("adopt", target, summary)

    @instruments.stack_operation
    def refresh(self, target: StackTarget, *,
                on_progress: ProgressSink | None = None) -> RunResult:
        """Drop VMs the cloud no longer has from the stack state."""
        self._check_credentials(target)
        state = self.load_state(target)
        lookup = getattr(self.cloud, "vm_exists", None)
        gone = [urn for urn, r in state["resources"].items()
                if lookup is not None and r.get("id") and lookup(r["type"], r["id"]) is False]
        for urn in gone:
            del state["resources"][urn]
        self._save_state(target, state)
        return self._result("refresh", target, ChangeSummary(
            delete=len(gone), same=len(state["resources"])))

    @instruments.stack_operation
    def check_drift(self, target: StackTarget) -> list[DriftChange]:
        """A refresh previewed against the simulated cloud: each resource the stack's state
        records is read from the cloud (``live_properties``, what its console shows) and
        compared, property by property, with the state's record (its salted digests, so no
        value is kept or shown). Gone from the cloud: ``delete``; a property that differs,
        was added or removed: ``update`` naming it. Secret properties are not compared (the
        cloud does not show them); providers, random values and the mock engine's
        Kubernetes objects live in no cloud. Writes nothing. Refused, rather than answered
        "no drift", by a cloud that keeps nothing to compare with, and with
        ``STATE_MISSING`` by a state that lacks what the ledger saw it hold."""
        read = getattr(self.cloud, "live_properties", None)
        if read is None:
            raise EngineFailed("mock engine: this simulated cloud keeps no live resources to "
                               "compare the state with (use the simulated cloud: --simulate)",
                               code="DRIFT_UNSUPPORTED")
        self._check_credentials(target)
        # A lost state holds nothing to differ: "no drift" would be a claim nobody checked.
        state = self._expected_state(target)
        salt = state["salt"]
        changes: list[DriftChange] = []
        for urn, record in sorted(state["resources"].items()):
            rid = record.get("id")
            if (not record.get("custom") or not rid
                    or str(record.get("type", "")).startswith(NOT_IN_THE_CLOUD)):
                continue
            live = read(record["type"], rid)
            if live is None:
                changes.append(DriftChange(urn=urn, type=record["type"], name=record["name"],
                                           op="delete"))
                continue
            if not live:
                continue  # the cloud shows nothing of it to compare
            changed = _differing(record, live, salt)
            if changed:
                changes.append(DriftChange(urn=urn, type=record["type"], name=record["name"],
                                           op="update", properties=changed))
        return changes

    def lookup_vms(self, target: StackTarget, attempt_ids: list[str]) -> dict[str, str]:
        """Ask the simulated cloud; without one, the stack state is the only witness, and a
        state that lost what the ledger saw it hold witnesses nothing: ``uncertain``."""
        from automation.engine.expectation import StateMissing

        lookup = getattr(self.cloud, "lookup", None)
        if lookup is not None:
            return {a: str(lookup(a)) for a in attempt_ids}
        try:
            urns = self._expected_state(target)["resources"]
        except StateMissing:
            return dict.fromkeys(attempt_ids, "uncertain")
        return {a: "running" if any(a in urn for urn in urns) else "absent" for a in attempt_ids}

    def unlock(self, target: StackTarget) -> bool:
        """The mock engine takes no lock: nothing to clear (False: nothing was unlocked)."""
        return False
