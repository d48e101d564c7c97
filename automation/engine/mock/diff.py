"""The mock engine's diff: a registered resource against the recorded state, as the engine
decides its step.

The diff follows the engine (``pkg/resource/deploy/step_generator.go``):

- ``ignoreChanges`` paths (``stringData.expiration``) are taken from the recorded inputs
  and never cause a change; the state keeps their recorded values.
- A changed property covered by the resource's ``replaceOnChanges`` or by the provider's
  force-new properties (``automation.engine.mock.force_new``) makes a ``replace``; any other
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
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from automation.engine.mock.force_new import kubernetes_named, rules_for
from automation.engine.mock.model import (
    SECRET,
    UNKNOWN,
    RegisteredResource,
)
from automation.engine.runner import (
    ChangeSummary,
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


def patterns(paths: Iterable[str]) -> list[PropPath]:
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


def leaf_digest(salt: str, value: Any) -> str:
    body = json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha256(f"{salt}\x1f{body}".encode()).hexdigest()[:32]


def resource_digest(resource: RegisteredResource) -> str:
    body = json.dumps({"type": resource.type, "inputs": resource.inputs}, sort_keys=True,
                      default=str)
    return hashlib.sha256(body.encode()).hexdigest()


# --------------------------------------------------------------------------- the diff


@dataclass(frozen=True)
class Change:
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
class Decision:
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
               if v == UNKNOWN or old_leaves.get(format_path(p)) != leaf_digest(salt, v)]
    known = {format_path(p) for p in new}
    changed += [parse_path(p) for p in old_leaves if p not in known]
    return changed


def decide(old: Mapping[str, Any] | None, type_: str, custom: bool,
           inputs: Mapping[str, Any], options: Mapping[str, Any], salt: str) -> Decision:
    """The step the engine takes for one resource, from its recorded state and new inputs
    (plain values; ``"[unknown]"`` for a value a preview cannot know)."""
    if old is None:
        return Decision("create")
    if "leaves" not in old:  # recorded before property digests were kept
        same = old.get("digest") == _digest_of(type_, inputs)
        return Decision("same" if same else "update")
    ignored = patterns(options.get("ignoreChanges") or ())
    changed = [p for p in _changed_paths(old["leaves"], inputs, salt)
               if not any(covers(i, p) for i in ignored)]
    if not changed:
        return Decision("same")
    names = _shown(changed)
    if not custom:
        return Decision("update", names)
    rules = rules_for(type_)
    recorded = old.get("inputs") if isinstance(old.get("inputs"), Mapping) else None
    forcing = [*rules.force_new, *(options.get("replaceOnChanges") or ())]
    if rules.force_new_if is not None:
        forcing += rules.force_new_if(recorded, inputs)
    force = patterns(forcing)
    replace_keys = _shown([p for p in changed if any(covers(f, p) for f in force)])
    if replace_keys:
        return Decision("replace", names, replace_keys,
                         _delete_before_replace(type_, inputs, options, changed))
    rejected: tuple[str, ...] = ()
    if rules.rejected_in_place and (rules.rejected_if is None or rules.rejected_if(inputs)):
        refused = patterns(rules.rejected_in_place)
        rejected = _shown([p for p in changed if any(covers(r, p) for r in refused)])
    return Decision("update", names, rejected=rejected, rejected_message=rules.rejected_message)


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


def deleted(urn: str, recorded: dict[str, Any]) -> Change:
    return Change("delete", urn, recorded["type"], recorded["name"], None,
                   bool(recorded.get("retain")), None, old_id=recorded.get("id"))


def redacted(resource: RegisteredResource) -> dict[str, Any]:
    return {k: (SECRET if k in resource.secret_inputs else v)
            for k, v in resource.inputs.items()}


def topological(deps: Mapping[str, Iterable[str]]) -> list[str]:
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


def dependencies(r: RegisteredResource) -> list[str]:
    """What a resource waits for: its parent, its provider and its inputs' resources."""
    deps = list(r.options.get("dependencies") or ())
    if r.parent:
        deps.append(r.parent)
    if r.provider:
        deps.append(r.provider.rsplit("::", 1)[0])
    return sorted(set(deps))


def engine_steps(changes: Sequence[Change], delete_order: Sequence[str] = ()) -> list[
        tuple[str, Change]]:
    """The engine's steps in the order it takes them: creates, updates and replacements in
    program order (``changes``), a delete-before-replace's delete ahead of its create; then
    the deletes of create-before-delete replacements and of removed resources, dependents
    before what they depend on (``delete_order``: the recorded resources in dependency
    order)."""
    steps: list[tuple[str, Change]] = []
    deferred: list[tuple[str, Change]] = []
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
class Plan:
    summary: ChangeSummary
    changes: list[Change]  # in program order, then the deletes
    steps: list[tuple[str, Change]]  # the engine's steps, in the order it takes them


def recorded_order(state: Mapping[str, Any]) -> list[str]:
    return topological({urn: r.get("dependencies") or ()
                         for urn, r in state["resources"].items()})


