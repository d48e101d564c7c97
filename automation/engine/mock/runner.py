"""StackRunner under the SDK's mock engine: the same stack programs, no Pulumi CLI.

The mock engine itself keeps no state, so this runner does what the engine would: it keeps
the last applied resources per stack under ``$ANYCLOUD_HOME/mock-engine`` (ids, the
non-secret inputs, and a salted digest of every input property -- never a secret value),
diffs each run against them, deletes what a program no longer registers, and gates ``up``
on the policy pack like ``pulumi up --policy-pack``. Every result says ``engine: mock``.

The diff follows the engine (``pkg/resource/deploy/step_generator.go``):

- ``ignoreChanges`` paths (``stringData.expiration``) are taken from the recorded inputs
  and never cause a change; the state keeps their recorded values.
- A changed property covered by the resource's ``replaceOnChanges`` or by the provider's
  force-new properties (``automation.engine.force_new``) makes a ``replace``; any other
  change is an ``update``. An update the cloud refuses (an Azure VM's image reference, a
  GCP machine type without ``allowStoppingForUpdate``) previews as an update and fails
  ``up`` with the provider's message.
- A replacement creates the new resource first and deletes the old one after every other
  step (``create-replacement``, ``replace`` ... ``delete-replaced``), unless the
  ``deleteBeforeReplace`` option or the provider asks for the opposite order
  (``delete-replaced``, ``replace``, ``create-replacement``). Either way the summary
  counts one ``replace``.
- ``preview`` runs the program as a dry run: resources to be created or replaced have
  unknown ids and computed outputs, and what derives from them is unknown (a value the
  diff counts as changed, as the provider does).
"""

from __future__ import annotations

import hashlib
import heapq
import json
import os
import re
import secrets
import tempfile
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from automation.crash import crashpoint
from automation.engine.errors import EngineFailed
from automation.engine.force_new import kubernetes_named, rules_for
from automation.engine.runner import (
    ChangeSummary,
    Operation,
    PolicyFinding,
    ProgressEvent,
    ProgressSink,
    RunResult,
    StackTarget,
)
from automation.mock_engine import (
    SECRET,
    UNKNOWN,
    CloudFailure,
    PendingResource,
    ProgramRun,
    RegisteredResource,
    Step,
)

# --------------------------------------------------------------------------- property paths

Segment = str | int
PropPath = tuple[Segment, ...]
_BARE = re.compile(r"[A-Za-z_$][A-Za-z0-9_$\-]*")
_PATH_TOKEN = re.compile(
    r'\.?([A-Za-z_$*][A-Za-z0-9_$\-]*|\*)'  # .key or *
    r'|\[(\d+|\*)\]'  # [0] or [*]
    r'|\["((?:[^"\\]|\\.)*)"\]'  # ["key.with/odd chars"]
)


def parse_path(text: str) -> PropPath:
    """A Pulumi property path (``a.b[0]["x.y"]``, ``a[*].b``) as its segments; ``*`` and
    ``[*]`` match any one segment."""
    out: list[Segment] = []
    pos = 0
    while pos < len(text):
        m = _PATH_TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise ValueError(f"not a property path: {text!r}")
        bare, index, quoted = m.groups()
        if bare is not None:
            out.append(bare)
        elif index is not None:
            out.append("*" if index == "*" else int(index))
        else:
            out.append(json.loads(f'"{quoted}"'))
        pos = m.end()
    return tuple(out)


def format_path(path: Sequence[Segment]) -> str:
    parts: list[str] = []
    for seg in path:
        if isinstance(seg, int):
            parts.append(f"[{seg}]")
        elif _BARE.fullmatch(seg):
            parts.append(f".{seg}" if parts else seg)
        else:
            parts.append(f"[{json.dumps(seg)}]")
    return "".join(parts)


def covers(pattern: PropPath, path: PropPath) -> bool:
    """``pattern`` is ``path`` or one of its ancestors (the engine's PropertyPath.Contains)."""
    if len(path) < len(pattern):
        return False
    return all(p == "*" or p == s for p, s in zip(pattern, path, strict=False))


def _patterns(paths: Iterable[str]) -> list[PropPath]:
    out = []
    for p in paths:
        try:
            out.append(parse_path(p))
        except ValueError:
            continue
    return out


def flatten(value: Any, prefix: PropPath = ()) -> dict[PropPath, Any]:
    """Every leaf of an input value by path; empty maps and lists are leaves too."""
    out: dict[PropPath, Any] = {}
    if isinstance(value, Mapping):
        if not value and prefix:
            out[prefix] = {}
        for key, item in value.items():
            out.update(flatten(item, (*prefix, str(key))))
    elif isinstance(value, list | tuple):
        if not value:
            out[prefix] = []
        for i, item in enumerate(value):
            out.update(flatten(item, (*prefix, i)))
    else:
        out[prefix] = value
    return out


def _leaf_digest(salt: str, value: Any) -> str:
    body = json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha256(f"{salt}\x1f{body}".encode()).hexdigest()[:32]


def _digest(resource: RegisteredResource) -> str:
    body = json.dumps({"type": resource.type, "inputs": resource.inputs}, sort_keys=True,
                      default=str)
    return hashlib.sha256(body.encode()).hexdigest()


# --------------------------------------------------------------------------- the diff


@dataclass(frozen=True)
class _Change:
    op: str  # create | update | replace | same | delete
    urn: str
    type: str
    name: str
    id: str | None  # the new id (None: a delete, or unknown in a preview)
    retain: bool  # retain_on_delete: dropped from state, left in the cloud
    inputs: dict[str, Any] | None  # redacted; None for a delete
    old_id: str | None = None
    changed: tuple[str, ...] = ()  # property paths that differ from the recorded inputs
    replace_keys: tuple[str, ...] = ()  # the ones that force the replacement
    delete_before_replace: bool = False
    rejected: tuple[str, ...] = ()  # in-place changes the cloud refuses
    rejected_message: str = ""


@dataclass(frozen=True)
class _Decision:
    op: str
    changed: tuple[str, ...] = ()
    replace_keys: tuple[str, ...] = ()
    delete_before_replace: bool = False
    rejected: tuple[str, ...] = ()
    rejected_message: str = ""


def _changed_paths(old_leaves: Mapping[str, str], inputs: Mapping[str, Any],
                   salt: str) -> list[PropPath]:
    new = flatten(inputs)
    changed = [p for p, v in new.items()
               if v == UNKNOWN or old_leaves.get(format_path(p)) != _leaf_digest(salt, v)]
    known = {format_path(p) for p in new}
    changed += [parse_path(p) for p in old_leaves if p not in known]
    return changed


def decide(old: Mapping[str, Any] | None, type_: str, custom: bool,
           inputs: Mapping[str, Any], options: Mapping[str, Any], salt: str) -> _Decision:
    """The step the engine takes for one resource, from its recorded state and new inputs
    (plain values; ``"[unknown]"`` for a value a preview cannot know)."""
    if old is None:
        return _Decision("create")
    if "leaves" not in old:  # recorded before property digests were kept
        same = old.get("digest") == _digest_of(type_, inputs)
        return _Decision("same" if same else "update")
    ignored = _patterns(options.get("ignoreChanges") or ())
    changed = [p for p in _changed_paths(old["leaves"], inputs, salt)
               if not any(covers(i, p) for i in ignored)]
    if not changed:
        return _Decision("same")
    names = _shown(changed)
    if not custom:
        return _Decision("update", names)
    rules = rules_for(type_)
    recorded = old.get("inputs") if isinstance(old.get("inputs"), Mapping) else None
    forcing = [*rules.force_new, *(options.get("replaceOnChanges") or ())]
    if rules.force_new_if is not None:
        forcing += rules.force_new_if(recorded, inputs)
    force = _patterns(forcing)
    replace_keys = _shown([p for p in changed if any(covers(f, p) for f in force)])
    if replace_keys:
        return _Decision("replace", names, replace_keys,
                         _delete_before_replace(type_, inputs, options, changed))
    rejected: tuple[str, ...] = ()
    if rules.rejected_in_place and (rules.rejected_if is None or rules.rejected_if(inputs)):
        refused = _patterns(rules.rejected_in_place)
        rejected = _shown([p for p in changed if any(covers(r, p) for r in refused)])
    return _Decision("update", names, rejected=rejected, rejected_message=rules.rejected_message)


def _shown(paths: Sequence[PropPath]) -> tuple[str, ...]:
    """Changed paths as the engine lists them: under a wholly changed (e.g. unknown) value,
    only that value."""
    kept = {p for p in paths if not any(len(q) < len(p) and covers(q, p) for q in paths)}
    return tuple(sorted(format_path(p) for p in kept))


def _delete_before_replace(type_: str, inputs: Mapping[str, Any], options: Mapping[str, Any],
                           changed: Sequence[PropPath]) -> bool:
    """The resource option when set; else what the provider's Diff answers."""
    if options.get("deleteBeforeReplaceDefined") or options.get("deleteBeforeReplace"):
        return bool(options.get("deleteBeforeReplace"))
    if type_.startswith("kubernetes:"):
        # Named, and keeping its name and namespace: the new object needs the old one gone.
        identity = (("metadata", "name"), ("metadata", "namespace"))
        return kubernetes_named(inputs) and not any(
            covers(i, p) or covers(p, i) for p in changed for i in identity)
    rules = rules_for(type_)
    named = rules.name_property is not None and inputs.get(rules.name_property) not in (
        None, "", UNKNOWN)
    if type_.startswith("azure-native:"):
        # Only a random autoname lets azure-native create the replacement first.
        return rules.name_property is None or named
    return rules.delete_before_replace_when_named and named


def _digest_of(type_: str, inputs: Mapping[str, Any]) -> str:
    body = json.dumps({"type": type_, "inputs": inputs}, sort_keys=True, default=str)
    return hashlib.sha256(body.encode()).hexdigest()


def _deleted(urn: str, recorded: dict[str, Any]) -> _Change:
    return _Change("delete", urn, recorded["type"], recorded["name"], None,
                   bool(recorded.get("retain")), None, old_id=recorded.get("id"))


def _redacted(resource: RegisteredResource) -> dict[str, Any]:
    return {k: (SECRET if k in resource.secret_inputs else v)
            for k, v in resource.inputs.items()}


def _topological(deps: Mapping[str, Iterable[str]]) -> list[str]:
    """URNs with every resource after those it depends on; ties in URN order, so the order
    is the same whichever order the program happened to register independent resources."""
    pending = {u: {d for d in ds if d in deps and d != u} for u, ds in deps.items()}
    users: dict[str, list[str]] = {u: [] for u in pending}
    for u, ds in pending.items():
        for d in ds:
            users[d].append(u)
    ready = [u for u, ds in pending.items() if not ds]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        u = heapq.heappop(ready)
        order.append(u)
        for user in users[u]:
            pending[user].discard(u)
            if not pending[user]:
                heapq.heappush(ready, user)
    placed = set(order)
    return order + sorted(u for u in pending if u not in placed)  # cycles: URN order


def _dependencies(r: RegisteredResource) -> list[str]:
    """What a resource waits for: its parent, its provider and its inputs' resources."""
    deps = list(r.options.get("dependencies") or ())
    if r.parent:
        deps.append(r.parent)
    if r.provider:
        deps.append(r.provider.rsplit("::", 1)[0])
    return sorted(set(deps))


def _steps(changes: Sequence[_Change], delete_order: Sequence[str] = ()) -> list[
        tuple[str, _Change]]:
    """The engine's steps in the order it takes them: creates, updates and replacements in
    program order (``changes``), a delete-before-replace's delete ahead of its create; then
    the deletes of create-before-delete replacements and of removed resources, dependents
    before what they depend on (``delete_order``: the recorded resources in dependency
    order)."""
    steps: list[tuple[str, _Change]] = []
    deferred: list[tuple[str, _Change]] = []
    for c in changes:
        if c.op == "replace":
            if c.delete_before_replace:
                steps += [("delete-replaced", c), ("replace", c), ("create-replacement", c)]
            else:
                steps += [("create-replacement", c), ("replace", c)]
                deferred.append(("delete-replaced", c))
        elif c.op == "delete":
            deferred.append(("delete", c))
        elif c.op != "same":
            steps.append((c.op, c))
    rank = {urn: i for i, urn in enumerate(delete_order)}
    deferred.sort(key=lambda s: -rank.get(s[1].urn, -1))
    return steps + deferred


@dataclass(frozen=True)
class _Plan:
    summary: ChangeSummary
    changes: list[_Change]  # in program order, then the deletes
    steps: list[tuple[str, _Change]]  # the engine's steps, in the order it takes them


def _recorded_order(state: Mapping[str, Any]) -> list[str]:
    return _topological({urn: r.get("dependencies") or ()
                         for urn, r in state["resources"].items()})


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
        d = decide(old, resource.type, resource.custom, resource.inputs, resource.options,
                   self.state["salt"])
        old_id = old.get("id") if old else None
        if self.execute and d.rejected:
            raise CloudFailure(_refusal(resource.type, resource.name, d))
        if self.execute and d.op == "replace" and d.delete_before_replace and old:
            self.runner._delete(_deleted(resource.urn, old))
        return Step(op=d.op, old_id=old_id, delete_before_replace=d.delete_before_replace)


def _refusal(type_: str, name: str, d: _Decision) -> str:
    path = d.rejected[0]
    message = d.rejected_message.format(path=path) if d.rejected_message else (
        f"changing {path} in place is not allowed")
    return f"updating {type_} {name}: {message}"


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

    def _record(self, r: RegisteredResource, change: _Change, old: dict[str, Any] | None,
                salt: str) -> dict[str, Any]:
        """What the state keeps of an applied resource: ignored properties keep their
        recorded digests (the engine keeps their old values)."""
        leaves = {format_path(p): _leaf_digest(salt, v) for p, v in flatten(r.inputs).items()}
        if change.op in ("update", "same") and old and "leaves" in old:
            ignored = _patterns(r.options.get("ignoreChanges") or ())
            leaves = {p: d for p, d in leaves.items()
                      if not any(covers(i, parse_path(p)) for i in ignored)}
            leaves.update({p: d for p, d in old["leaves"].items()
                           if any(covers(i, parse_path(p)) for i in ignored)})
        return {"type": r.type, "name": r.name, "id": r.id, "custom": r.custom,
                "digest": _digest(r), "retain": bool(r.options.get("retainOnDelete")),
                "inputs": {k: v for k, v in r.inputs.items() if k not in r.secret_inputs},
                "dependencies": _dependencies(r), "leaves": leaves}

    # -- running ------------------------------------------------------------------------

    def evaluate(self, target: StackTarget, *, cloud: Any = None, preview: bool = False,
                 reveal_secrets: bool = True, planner: Any = None) -> ProgramRun:
        """Run the stack program once under mocks (``plan`` and the policy check use this).
        Without ``cloud``: against one that buys nothing but answers lookups (the newest
        image) as this runner's cloud would. ``preview``/``planner``: see ``run_program``."""
        from automation.mock_engine import SimulatedCloud, run_program

        if cloud is None:
            cloud = SimulatedCloud(images=getattr(self.cloud, "images", None))
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

    def _changes(self, run: ProgramRun, state: dict[str, Any]) -> _Plan:
        """Diff a run against the recorded state, as the engine would."""
        before: dict[str, Any] = state["resources"]
        by_urn = {r.urn: r for r in run.resources}
        changes: list[_Change] = []
        for urn in _topological({r.urn: _dependencies(r) for r in run.resources}):
            r, old = by_urn[urn], before.get(urn)
            d = decide(old, r.type, r.custom, r.inputs, r.options, state["salt"])
            changes.append(_Change(
                d.op, r.urn, r.type, r.name, r.id, bool(r.options.get("retainOnDelete")),
                _redacted(r), old_id=old.get("id") if old else None, changed=d.changed,
                replace_keys=d.replace_keys, delete_before_replace=d.delete_before_replace,
                rejected=d.rejected, rejected_message=d.rejected_message,
            ))
        changes += [_deleted(urn, old) for urn, old in sorted(before.items())
                    if urn not in by_urn]
        counts = Counter(c.op for c in changes)
        summary = ChangeSummary(**{k: counts[k]
                                   for k in ("create", "update", "replace", "delete", "same")})
        return _Plan(summary, changes, _steps(changes, _recorded_order(state)))

    @staticmethod
    def _diff_text(plan: _Plan) -> str:
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
    def _emit(sink: ProgressSink | None, steps: Sequence[tuple[str, _Change]],
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
                self._delete(_deleted(c.urn, state["resources"][c.urn]))
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

    def _delete(self, change: _Change) -> None:
        delete = getattr(self.cloud, "delete_resource", None)
        if delete is not None and change.old_id and not change.retain:
            delete(change.type, change.old_id)

    def destroy(self, target: StackTarget, *,
                on_progress: ProgressSink | None = None) -> RunResult:
        state = self.load_state(target)
        steps = _steps([_deleted(urn, r) for urn, r in sorted(state["resources"].items())],
                       _recorded_order(state))
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
