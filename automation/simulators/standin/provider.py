"""One stand-in provider: the engine's gRPC calls for a package, answered by the simulated
cloud as the real provider would answer them.

What the provider decides itself, the stand-in decides with the same code the mock engine
uses (``automation.engine.mock.diff`` over the replace rules in ``force_new``, with their
sources): Check fills in an autoname, Diff answers update, replace and delete-before-replace
with the properties that changed, Update refuses a change the cloud refuses in place. What
the cloud decides (ids, addresses, whether a create buys anew, conflicts, what exists) is
asked of the simulated cloud over ``cloud_api``: the process serving it answers for both
engines.

Where each behaviour comes from:

- Check: pulumi-terraform-bridge keeps the old autoname (``olds``) and makes a new one,
  ``<name>-<7 hex>`` from the engine's random seed, for a new resource (the engine checks a
  replacement again without olds); azure-native appends 8 hex without a dash
  (pulumi-terraform-bridge ``pkg/tfbridge/names.go``, pulumi-azure-native
  ``provider/pkg/provider/provider.go`` autonaming).
- CheckConfig: the AWS provider fails without a region ("The argument "region" is
  required", ``terraform-provider-aws`` ``internal/conns/config.go``); azure-native without a
  subscription ("unable to determine subscription"); the GCP provider without a project for
  the project-scoped resources anycloud makes ("project: required field is not set"). Each
  also reads the variables its real provider reads (``AWS_REGION``, ``AWS_DEFAULT_REGION``;
  ``GOOGLE_PROJECT`` and its aliases; ``ARM_SUBSCRIPTION_ID``).
- Read of a resource that is gone answers no id (the engine drops it from the state on a
  refresh, and fails a ``get`` with "resource '<id>' does not exist").
- Create with ``preview`` is never asked for: the stand-in configures without preview
  support, so a preview shows what a create computes as unknown, as many real providers do.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from typing import Any

from pulumi.provider.experimental.property_value import Computed, PropertyValue
from pulumi.provider.experimental.provider import (
    CheckFailure,
    CheckRequest,
    CheckResponse,
    ConfigureRequest,
    ConfigureResponse,
    CreateRequest,
    CreateResponse,
    DeleteRequest,
    DiffResponse,
    InvokeRequest,
    InvokeResponse,
    PropertyDiff,
    PropertyDiffKind,
    Provider,
    ReadRequest,
    ReadResponse,
    UpdateResponse,
)

from automation.crash import engine_crashpoint
from automation.engine.mock import diff
from automation.engine.mock.force_new import rules_for
from automation.engine.mock.model import UNKNOWN
from automation.simulators import cloud_api
from automation.simulators.cloud import VM_TYPES, console_view
from automation.simulators.standin import LABEL, random_values

# What each package's configuration must name, and the variables its real provider reads
# instead when the configuration leaves it out.
REQUIRED_CONFIG: dict[str, tuple[str, tuple[str, ...]]] = {
    "aws": ("region", ("AWS_REGION", "AWS_DEFAULT_REGION")),
    "gcp": ("project", ("GOOGLE_PROJECT", "GOOGLE_CLOUD_PROJECT", "GCLOUD_PROJECT",
                        "CLOUDSDK_CORE_PROJECT")),
    "azure-native": ("subscriptionId", ("ARM_SUBSCRIPTION_ID",)),
}


# -- values: the SDK's PropertyValue <-> plain JSON with Pulumi's secret wrapper -------------


def to_plain(value: PropertyValue) -> Any:
    """A property as plain JSON: secrets inside Pulumi's secret wrapper, a value the
    engine cannot know yet as the mock engine's ``"[unknown]"``."""
    from pulumi.runtime import rpc

    inner = value.value
    if isinstance(inner, Computed):
        plain: Any = UNKNOWN
    elif isinstance(inner, Mapping):
        plain = {k: to_plain(v) for k, v in inner.items()}
    elif isinstance(inner, list | tuple):
        plain = [to_plain(v) for v in inner]
    elif isinstance(inner, float) and inner.is_integer():
        plain = int(inner)
    elif isinstance(inner, bool | str | float) or inner is None:
        plain = inner
    else:  # assets, archives, resource references: no cloud resource of ours takes them
        plain = str(inner)
    return rpc.wrap_rpc_secret(plain) if value.is_secret else plain


def to_value(plain: Any) -> PropertyValue:
    from pulumi.runtime import rpc

    if rpc.is_rpc_secret(plain):
        return to_value(rpc.unwrap_rpc_secret(plain)).with_secret(True)
    if isinstance(plain, Mapping):
        return PropertyValue({str(k): to_value(v) for k, v in plain.items()})
    if isinstance(plain, list | tuple):
        return PropertyValue([to_value(v) for v in plain])
    if isinstance(plain, bool) or plain is None or isinstance(plain, str):
        return PropertyValue(plain)
    if isinstance(plain, int | float):
        return PropertyValue(float(plain))
    return PropertyValue(str(plain))


def plain_map(values: Mapping[str, PropertyValue]) -> dict[str, Any]:
    return {k: to_plain(v) for k, v in values.items()}


def value_map(plain: Mapping[str, Any]) -> dict[str, PropertyValue]:
    return {k: to_value(v) for k, v in plain.items()}


def _readable(value: Any) -> Any:
    """A plain value with its secrets opened (what the diff rules compare)."""
    from pulumi.runtime import rpc

    if rpc.is_rpc_secret(value):
        return _readable(rpc.unwrap_rpc_secret(value))
    if isinstance(value, Mapping):
        return {k: _readable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_readable(v) for v in value]
    return value


def urn_type(urn: str) -> str:
    """A resource's type from its URN (the SDK's ``request.type`` keeps its parents' types:
    ``<parent type>$<type>``)."""
    return urn.split("::")[-2].split("$")[-1]


def urn_name(urn: str) -> str:
    return urn.split("::")[-1]


def decide(type_: str, old_inputs: Mapping[str, Any], new_inputs: Mapping[str, Any],
           ignore_changes: list[str]) -> diff.Decision:
    """The mock engine's decision (``diff.decide``) between two sets of inputs."""
    old = _readable(dict(old_inputs))
    leaves = {diff.format_path(p): diff.leaf_digest("", v) for p, v in diff.flatten(old).items()}
    return diff.decide({"leaves": leaves, "inputs": old}, type_, True,
                       _readable(dict(new_inputs)), {"ignoreChanges": ignore_changes}, "")


# How long a change whose answer was lost waits to be ended with its caller (see below).
ANSWER_LOST_WAIT = 10.0


def _outlive_no_crash(exc: Exception) -> None:
    """A change the simulated cloud took and never answered: the process holding the
    simulated world died (a crash test kills the reconciler, which serves it). A real cloud
    does not die with its caller -- it finishes the change, and the engine dies in the same
    crash (the worker that drove it ends its session), leaving the create in flight in its
    checkpoint. Telling the engine "failed" at once would let it record, within the moment
    before it is ended, that nothing was made, of a VM the cloud did make: so wait to be
    ended; only a cloud still gone after ``ANSWER_LOST_WAIT`` seconds is reported."""
    import time

    parent = os.getppid()
    deadline = time.monotonic() + ANSWER_LOST_WAIT
    while time.monotonic() < deadline and os.getppid() == parent:
        time.sleep(0.1)


class StandInProvider(Provider):
    def __init__(self, package: str, environ: Mapping[str, str] | None = None) -> None:
        self.package = package
        self.environ = dict(os.environ if environ is None else environ)
        self.config: dict[str, Any] = {}

    # -- the cloud ------------------------------------------------------------------------

    def _ask(self, request: dict[str, Any]) -> Any:
        path = self.environ.get(cloud_api.ENV)
        if not path:
            raise RuntimeError(
                f"{LABEL}: this {self.package} plugin is anycloud's stand-in and answers from "
                f"its simulated cloud only; {cloud_api.ENV} names none (the process that "
                "serves the simulated cloud sets it for the engine it starts)")
        try:
            return cloud_api.call(path, {**request, "package": self.package,
                                         "config": self.config})
        except cloud_api.AnswerLost as exc:
            if request["op"] in ("create", "update", "delete"):
                _outlive_no_crash(exc)
            raise RuntimeError(f"{exc} ({LABEL})") from exc
        except Exception as exc:
            raise RuntimeError(f"{exc} ({LABEL})") from exc

    async def _call(self, request: dict[str, Any]) -> Any:
        # Blocking socket I/O off the event loop: the engine creates a stack's VMs in
        # parallel, and the cloud answers them in parallel.
        return await asyncio.to_thread(self._ask, request)

    # -- configuration --------------------------------------------------------------------

    def _from_environment(self) -> str | None:
        """The required setting as the real provider finds it without configuration."""
        required = REQUIRED_CONFIG.get(self.package)
        return next((self.environ[v] for v in required[1] if self.environ.get(v)),
                    None) if required else None

    async def check_config(self, request: CheckRequest) -> CheckResponse:
        required = REQUIRED_CONFIG.get(self.package)
        news = request.new_inputs
        if required is not None:
            key, variables = required
            given = news.get(key)
            known = given is not None and (isinstance(given.value, Computed) or given.value)
            if not known and self._from_environment() is None:
                return CheckResponse(inputs=news, failures=[CheckFailure(
                    key, f"{self.package} provider configuration: {key} is required (or one "
                         f"of {', '.join(variables)}) ({LABEL})")])
        return CheckResponse(inputs=news)

    async def configure(self, request: ConfigureRequest) -> ConfigureResponse:
        self.config = plain_map(request.args)
        required = REQUIRED_CONFIG.get(self.package)
        found = self._from_environment()
        if required is not None and not self.config.get(required[0]) and found:
            self.config[required[0]] = found
        return ConfigureResponse(accept_secrets=True, supports_preview=False,
                                 accept_resources=True, accept_outputs=False)

    # -- resources ------------------------------------------------------------------------

    async def check(self, request: CheckRequest) -> CheckResponse:
        inputs = dict(request.new_inputs)
        prop = rules_for(urn_type(request.urn)).name_property
        if prop is None and urn_type(request.urn).startswith("gcp:"):
            prop = "name"
        if prop is not None and prop not in inputs:
            old = request.old_inputs.get(prop)
            if old is not None:
                inputs[prop] = old
            else:
                azure = urn_type(request.urn).startswith("azure-native:")
                hexes = (request.random_seed or os.urandom(8)).hex()
                inputs[prop] = PropertyValue(f"{urn_name(request.urn)}{'' if azure else '-'}"
                                             f"{hexes[:8 if azure else 7]}")
        return CheckResponse(inputs=inputs)

    def diff_inputs(self, type_: str, old_inputs: Mapping[str, PropertyValue],
                    new_inputs: Mapping[str, PropertyValue],
                    ignore_changes: list[str]) -> DiffResponse:
        d = decide(type_, plain_map(old_inputs), plain_map(new_inputs), ignore_changes)
        if d.op == "same":
            return DiffResponse(changes=False)
        replacing = set(d.replace_keys)
        detailed = {path: PropertyDiff(PropertyDiffKind.UPDATE_REPLACE if path in replacing
                                       else PropertyDiffKind.UPDATE, input_diff=True)
                    for path in d.changed}
        top = sorted({diff.parse_path(p)[0] for p in d.changed if diff.parse_path(p)})
        return DiffResponse(changes=True, replaces=sorted(replacing), diffs=[str(t) for t in top],
                            delete_before_replace=d.delete_before_replace,
                            detailed_diff=detailed)

    async def create(self, request: CreateRequest) -> CreateResponse:
        inputs = plain_map(request.properties)
        if self.package == "random":  # drawn here, as the real provider draws it
            rid, outputs = random_values.create(urn_type(request.urn), _readable(inputs))
            return CreateResponse(resource_id=rid, properties=value_map({**inputs, **outputs}))
        answer = await self._call({"op": "create", "type": urn_type(request.urn),
                                   "name": urn_name(request.urn), "inputs": inputs})
        if urn_type(request.urn) in VM_TYPES:  # the cloud bought it; the engine not told yet
            engine_crashpoint("engine-killed-mid-up")
        return CreateResponse(resource_id=answer["id"],
                              properties=value_map({**inputs, **answer["outputs"]}))

    async def read(self, request: ReadRequest) -> ReadResponse:
        if self.package == "random":  # a value lives only in the state
            return ReadResponse(resource_id=request.resource_id, properties=request.properties,
                                inputs=request.inputs)
        answer = await self._call({"op": "read", "type": urn_type(request.urn),
                                   "name": urn_name(request.urn), "id": request.resource_id})
        live = answer["live"]
        if live is None:
            return ReadResponse(resource_id=None)
        # What the provider computes (ids, addresses, links), then what the console shows.
        props = {**plain_map(request.properties), **answer["computed"]}
        inputs = plain_map(request.inputs)
        for key, value in live.items():
            # What a person changed at the console since anycloud last wrote it: the rest of
            # the outputs stay as the provider computed them.
            if key not in inputs or value != console_view(inputs.get(key)):
                props[key] = value
                if key in inputs or not request.inputs:
                    inputs[key] = value
        return ReadResponse(resource_id=request.resource_id, properties=value_map(props),
                            inputs=value_map(inputs))

    async def update_inputs(self, type_: str, name: str, resource_id: str,
                            old_inputs: Mapping[str, PropertyValue],
                            news: Mapping[str, PropertyValue],
                            ignore_changes: list[str]) -> UpdateResponse:
        d = decide(type_, plain_map(old_inputs), plain_map(news), ignore_changes)
        if d.rejected:
            path = d.rejected[0]
            message = (d.rejected_message.format(path=path) if d.rejected_message
                       else f"changing {path} in place is not allowed")
            raise RuntimeError(f"updating {type_} {name}: {message} ({LABEL})")
        inputs = plain_map(news)
        answer = await self._call({"op": "update", "type": type_, "name": name,
                                   "id": resource_id, "inputs": inputs})
        return UpdateResponse(properties=value_map({**inputs, **answer["outputs"]}))

    async def delete(self, request: DeleteRequest) -> None:
        if self.package == "random":
            return
        await self._call({"op": "delete", "type": urn_type(request.urn),
                          "id": request.resource_id})

    async def invoke(self, request: InvokeRequest) -> InvokeResponse:
        answer = await self._call({"op": "invoke", "token": request.tok,
                                   "args": _readable(plain_map(request.args))})
        return InvokeResponse(return_value=value_map(answer or {}))
