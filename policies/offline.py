"""Offline policy check: the pack's own policies over resources a mock-engine run registered.

``check_resources`` builds the same ``ResourceValidationArgs``/``StackValidationArgs`` the
engine would and calls the same ``Policy.validate`` objects as ``__main__.py``, applying
enforcement levels the way the engine does (per-policy config, then ``all``, then the
policy's default; ``disabled`` skips, ``remediate`` reports as mandatory).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pulumi_policy import (
    Policy,
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UnknownValueError

from policies import config as cfg
from policies.rules import Clock, build_policies, utc_now
from policies.wire import SECRET_PLACEHOLDER, offline_props


@dataclass(frozen=True)
class Violation:
    policy: str
    enforcement_level: str  # "mandatory" or "advisory"
    urn: str | None  # None: the stack as a whole
    message: str
    # False when the rule could not read an input (a redacted secret, an unknown value): the
    # resource was neither passed nor failed. Reported at advisory level, like the engine does.
    verified: bool = True


def _level_name(value: Any, where: str) -> str:
    if isinstance(value, str) and value in cfg.LEVELS:
        return value
    raise cfg.PolicyConfigError(f"{where}: enforcement level {value!r} is not one of {cfg.LEVELS}")


def split_config(
    config: Mapping[str, Any] | None,
) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
    """Pulumi policy-pack config -> (level per policy, properties per policy)."""
    config = dict(config or {})
    levels = dict(cfg.DEFAULT_LEVELS)
    if "all" in config:
        everyone = _level_name(config.pop("all"), "config all")
        levels = dict.fromkeys(levels, everyone)
    properties: dict[str, dict[str, Any]] = {name: {} for name in levels}
    for name, value in config.items():
        if name not in levels:
            raise cfg.PolicyConfigError(
                f"config {name!r}: no such policy (known: {sorted(cfg.DEFAULT_LEVELS)})"
            )
        if isinstance(value, Mapping):
            section = dict(value)
            if "enforcementLevel" in section:
                levels[name] = _level_name(
                    section.pop("enforcementLevel"), f"config {name}.enforcementLevel"
                )
            properties[name] = section
        else:
            levels[name] = _level_name(value, f"config {name}")
    return levels, properties


def _secret_paths(value: Any, path: str, out: set[str]) -> None:
    if value == SECRET_PLACEHOLDER:
        out.add(path)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            _secret_paths(item, f"{path}.{key}" if path else str(key), out)


def _options(resource: Mapping[str, Any]) -> PolicyResourceOptions:
    # What the engine knows as additional_secret_outputs; offline, keys the mock run saw as
    # secret (secret_keys, top-level or dotted) and redacted values count as well.
    options = resource.get("options") or {}
    secret = set(resource.get("additional_secret_outputs") or [])
    secret |= set(options.get("additionalSecretOutputs") or [])
    # `secret_keys` is the documented name; `secretInputs` is RegisteredResource.to_dict()'s.
    secret |= set(resource.get("secret_keys") or resource.get("secretInputs") or [])
    _secret_paths(resource.get("inputs") or {}, "", secret)
    return PolicyResourceOptions(
        protect=False,
        ignore_changes=[],
        delete_before_replace=None,
        aliases=[],
        custom_timeouts=PolicyCustomTimeouts(0, 0, 0),
        additional_secret_outputs=sorted(secret),
        parent=resource.get("parent"),
    )


def _checked(resource: Mapping[str, Any], index: int) -> tuple[str, str, str, Mapping[str, Any]]:
    urn, rtype = resource.get("urn"), resource.get("type")
    if not isinstance(urn, str) or not isinstance(rtype, str):
        raise ValueError(
            f"resources[{index}]: 'urn' and 'type' must be strings, got {urn!r}, {rtype!r}"
        )
    inputs = resource.get("inputs") or {}
    if not isinstance(inputs, Mapping):
        raise ValueError(
            f"resources[{index}].inputs: expected an object, got {type(inputs).__name__}"
        )
    name = resource.get("name") or urn.rsplit("::", 1)[-1]
    return urn, rtype, str(name), inputs


def check_resources(
    resources: Sequence[Mapping[str, Any]],
    config: Mapping[str, Any] | None = None,
    *,
    clock: Clock = utc_now,
    policies: Sequence[Policy] | None = None,
) -> list[Violation]:
    """Run the pack over ``[{"urn", "type", "name", "inputs", "secret_keys"}, ...]``.

    ``config`` has the shape of ``--policy-pack-config`` JSON. Raises ``PolicyConfigError``
    when a needed setting is neither configured nor in the data files.
    """
    levels, properties = split_config(config)
    checked = [(_checked(r, i), _options(r)) for i, r in enumerate(resources)]
    violations: list[Violation] = []
    for policy in policies if policies is not None else build_policies(clock):
        level = levels.get(policy.name, cfg.DEFAULT_LEVELS.get(policy.name, cfg.ADVISORY))
        if level == cfg.DISABLED:
            continue
        level = cfg.MANDATORY if level == cfg.REMEDIATE else level
        section = properties.get(policy.name, {})
        if isinstance(policy, ResourceValidationPolicy):
            for (urn, rtype, name, inputs), opts in checked:
                args = ResourceValidationArgs(
                    rtype, offline_props(inputs), urn, name, opts, None, section
                )
                _run(policy, args, level, urn, violations)
        elif isinstance(policy, StackValidationPolicy):
            stack = [
                PolicyResource(rtype, offline_props(inputs), urn, name, opts, None, None, [], {})
                for (urn, rtype, name, inputs), opts in checked
            ]
            _run(policy, StackValidationArgs(stack, section), level, None, violations)
    return violations


def _run(
    policy: ResourceValidationPolicy | StackValidationPolicy,
    args: Any,
    level: str,
    urn: str | None,
    out: list[Violation],
) -> None:
    def report(message: str, at: str | None = None) -> None:
        out.append(Violation(policy.name, level, at or urn, message))

    try:
        policy.validate(args, report)
    except UnknownValueError as exc:
        out.append(Violation(policy.name, cfg.ADVISORY, urn, f"not verified: {exc.message}", False))
