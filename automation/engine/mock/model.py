"""The mock engine's plain data: a resource as registered, a program run, the step the
engine takes with a resource, and what it asks of a cloud (``Cloud``, ``Planner``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from pulumi.runtime.mocks import MockCallArgs, MockResourceArgs


SECRET = "[secret]"
UNKNOWN = "[unknown]"
STACK_TYPE = "pulumi:pulumi:Stack"
# Type prefixes of resources no cloud holds under the mock engine: providers and random
# values live only in its state, and its Kubernetes objects are written to no cluster.
NOT_IN_THE_CLOUD = ("pulumi:providers:", "random:", "kubernetes:")



class Cloud(Protocol):
    """What the mock engine asks of a (simulated) cloud.

    Optionally also ``check(args) -> dict``: the input properties the provider fills in
    before anything exists (autonames), echoed as outputs even in a preview. ``args.step``
    (a ``Step`` or None) says what the engine is doing with the resource.
    """

    def new_resource(self, args: MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        """Return the physical id and the *extra* output properties (wire names)."""
        ...

    def call(self, args: MockCallArgs) -> dict[str, Any]:
        """Answer a provider function (invoke); return its result under wire names."""
        ...


class CloudFailure(Exception):
    """Raised by a simulated cloud to make one resource's creation fail."""


@dataclass(frozen=True)
class Step:
    """What the engine does with one resource in this run."""

    op: str  # create | update | replace | same
    old_id: str | None = None  # the recorded id (update, replace, same)
    delete_before_replace: bool = False


@dataclass(frozen=True)
class PendingResource:
    """A resource as the program registers it, before the cloud answers: what a planner
    decides on. ``inputs`` are plain (secrets readable), unknown values ``"[unknown]"``."""

    urn: str
    type: str
    name: str
    custom: bool
    inputs: dict[str, Any]
    options: dict[str, Any]
    parent: str | None = None  # None under the root stack
    provider: str | None = None
    secret_inputs: tuple[str, ...] = ()

    def registered(self, rid: str | None) -> RegisteredResource:
        """The resource as registered once the cloud answered with ``rid`` (its outputs
        are not kept: the engine's state records inputs and ids)."""
        return RegisteredResource(
            urn=self.urn, type=self.type, name=self.name, custom=self.custom, id=rid,
            parent=self.parent, provider=self.provider, inputs=self.inputs,
            secret_inputs=self.secret_inputs, outputs={}, secret_outputs=(),
            options=self.options)


class Planner(Protocol):
    """Decides each resource's step before the cloud answers. Optionally also told how it
    went (the engine checkpoints there): ``begin(resource, checked)`` just before the cloud
    is asked, with the inputs the provider's check added (autonames), ``applied(resource,
    rid)`` once the cloud made it, ``refused(resource)`` when the cloud answered with a
    failure (``CloudFailure``)."""

    def decide(self, resource: PendingResource) -> Step:
        """The step for ``resource``; raise ``CloudFailure`` to fail it."""
        ...


@dataclass(frozen=True)
class RegisteredResource:
    urn: str
    type: str
    name: str
    custom: bool
    id: str | None
    parent: str | None
    provider: str | None
    inputs: dict[str, Any]
    secret_inputs: tuple[str, ...]
    outputs: dict[str, Any]
    secret_outputs: tuple[str, ...]
    options: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "urn": self.urn,
            "type": self.type,
            "name": self.name,
            "custom": self.custom,
            "id": self.id,
            "parent": self.parent,
            "provider": self.provider,
            "inputs": self.inputs,
            "secretInputs": list(self.secret_inputs),
            "outputs": self.outputs,
            "secretOutputs": list(self.secret_outputs),
            "options": self.options,
        }


@dataclass(frozen=True)
class ProgramRun:
    resources: tuple[RegisteredResource, ...]
    outputs: dict[str, Any]
    secret_outputs: tuple[str, ...]
    stack_urn: str
    invokes: tuple[dict[str, Any], ...] = ()
    # Resource-monitor RPCs the program sent, per method: the engine's work for the run.
    rpcs: dict[str, int] = field(default_factory=dict)

    def of_type(self, type_: str) -> list[RegisteredResource]:
        return [r for r in self.resources if r.type == type_]

    def one(self, type_: str) -> RegisteredResource:
        found = self.of_type(type_)
        if len(found) != 1:
            raise LookupError(f"expected one {type_}, found {len(found)}")
        return found[0]

    def by_urn(self, urn: str) -> RegisteredResource:
        for r in self.resources:
            if r.urn == urn:
                return r
        raise LookupError(urn)

    def children_of(self, urn: str) -> list[RegisteredResource]:
        return [r for r in self.resources if r.parent == urn]

    def to_dict(self) -> dict[str, Any]:
        return {
            "stack": self.stack_urn,
            "resources": [r.to_dict() for r in self.resources],
            "outputs": self.outputs,
            "secretOutputs": list(self.secret_outputs),
            "invokes": list(self.invokes),
        }


