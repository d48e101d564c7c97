"""An in-process resource monitor for the mock engine: the RPCs the Pulumi SDK sends to the
engine, answered on the program's own thread.

The SDK's ``pulumi.runtime.mocks.MockMonitor`` answers every registration on a worker thread
of the event loop's executor (the SDK sends each RPC through ``run_in_executor``) and
re-serializes every answer by pumping a second event loop there. Each resource then costs
two thread hand-offs, and on a busy machine a hand-off waits for a core: a 100-VM pool spent
more time waiting than working. This monitor answers the same requests, with the same
answers, synchronously: ``inline_executor`` runs each RPC where the SDK awaits it, and
answers are built from the request's own wire form plus the mocks' additions (plain data),
so nothing needs an event loop.

The programs still go through the SDK's real registration path (``Resource.__init__``,
input serialization, output resolution); only the engine's side is ours. It implements what
our stack programs use: resource registration and outputs, invokes, reads, the feature
queries; transforms and hooks are accepted and not run, as in the SDK's mock monitor.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections import Counter
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from google.protobuf import struct_pb2

STACK_TYPE = "pulumi:pulumi:Stack"


class Registration(NamedTuple):
    """A registered resource as the monitor answered it (same shape as the SDK's)."""

    urn: str
    id: str | None
    state: dict[str, Any]


class InlineExecutor(concurrent.futures.ThreadPoolExecutor):
    """Runs each submitted call at once on the submitting thread.

    The SDK awaits every monitor RPC through ``loop.run_in_executor(None, ...)``; with this
    as the loop's default executor the RPC runs right there, with no thread hand-off.
    (A ``ThreadPoolExecutor`` subclass only because ``set_default_executor`` insists.)
    """

    def __init__(self) -> None:
        super().__init__(max_workers=1)

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # handed to the awaiting task
            future.set_exception(exc)
        return future


def _complete(coro: Coroutine[Any, Any, Any], what: str) -> Any:
    """Run a coroutine that never needs to wait (the SDK serializers on resolved values)
    to its end without an event loop."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise TypeError(f"mock monitor: {what} is not plain data (it awaits a pending value)")


def _wire(value: Any, where: str) -> Any:
    """A plain value (as the mocks return it: dicts, lists, scalars, secret wrappers,
    unknowns) in the wire form ``Struct.update`` takes; None for an absent value."""
    from pulumi.output import Unknown
    from pulumi.runtime import rpc

    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Unknown):
        return rpc.UNKNOWN
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            item = _wire(v, f"{where}.{k}")
            if item is not None:
                out[str(k)] = item
        return out
    if isinstance(value, list | tuple):
        return [_wire(v, f"{where}[{i}]") for i, v in enumerate(value)]
    # Assets, archives, resource references: the SDK's own serializer (already resolved).
    return _complete(rpc.serialize_property(value, [], where), where)


def to_struct(base: struct_pb2.Struct | None, keep: Iterable[str], extra: Mapping[str, Any]
              ) -> struct_pb2.Struct:
    """A properties Struct: ``base``'s fields named in ``keep`` (already in wire form),
    then every field of ``extra`` serialized."""
    from google.protobuf import struct_pb2

    out = struct_pb2.Struct()
    if base is not None:
        for key in keep:
            if key in base.fields and key not in extra:
                out.fields[key].CopyFrom(base.fields[key])
    plain: dict[str, Any] = {}
    for key, value in extra.items():
        item = _wire(value, key)
        if item is not None:
            plain[key] = item
    out.update(plain)
    return out


class LeanMonitor:
    """Answers the SDK's ResourceMonitor RPCs from ``mocks`` (``new_resource``, ``call``:
    the ``pulumi.runtime.mocks.Mocks`` interface), without threads.

    ``calls`` counts the RPCs per method, ``resources`` keeps every answered registration.
    """

    def __init__(self, mocks: Any, stack: str, project: str) -> None:
        self.mocks = mocks
        self.stack = stack
        self.project = project
        self.resources: dict[str, Registration] = {}
        self.calls: Counter[str] = Counter()
        self._lock = threading.Lock()

    def _count(self, method: str) -> None:
        with self._lock:
            self.calls[method] += 1

    def make_urn(self, parent: str, type_: str, name: str) -> str:
        if parent:
            type_ = parent.split("::")[2].split("$")[-1] + "$" + type_
        return f"urn:pulumi:{self.stack}::{self.project}::{type_}::{name}"

    def get_registered_resources(self) -> dict[str, Registration]:
        with self._lock:
            return dict(self.resources)

    # -- resources ----------------------------------------------------------------------

    def RegisterResource(self, request: Any) -> Any:
        from pulumi.runtime import rpc
        from pulumi.runtime.proto import resource_pb2

        self._count("RegisterResource")
        urn = self.make_urn(request.parent, request.type, request.name)
        if request.type == STACK_TYPE:
            return resource_pb2.RegisterResourceResponse(urn=urn)
        return self.register(request, urn, rpc.deserialize_properties(request.object))

    def register(self, request: Any, urn: str, inputs: dict[str, Any]) -> Any:
        """Answer one registration from the mocks (``inputs``: the request's, deserialized)."""
        from pulumi.runtime.mocks import MockResourceArgs
        from pulumi.runtime.proto import resource_pb2

        args = MockResourceArgs(
            typ=request.type, name=request.name, inputs=inputs, provider=request.provider,
            resource_id=request.importId, custom=request.custom or False,
        )
        rid, state = self.mocks.new_resource(args)
        # The answer echoes the inputs: take them in wire form from the request (they are
        # what the SDK sent) and serialize only what the mocks changed or added.
        added = {k: v for k, v in state.items() if k not in inputs or v is not inputs[k]}
        kept = [k for k in inputs if k in state and k not in added]
        answer = to_struct(request.object, kept, added)
        with self._lock:
            self.resources[urn] = Registration(urn, rid, state)
        return resource_pb2.RegisterResourceResponse(urn=urn, id=rid or "", object=answer)

    def ReadResource(self, request: Any) -> Any:
        from pulumi.runtime import rpc
        from pulumi.runtime.mocks import MockResourceArgs
        from pulumi.runtime.proto import resource_pb2

        self._count("ReadResource")
        inputs = rpc.deserialize_properties(request.properties)
        args = MockResourceArgs(typ=request.type, name=request.name, inputs=inputs,
                                provider=request.provider, resource_id=request.id)
        args.reading = True  # type: ignore[attr-defined]  # a get, not an import
        rid, state = self.mocks.new_resource(args)
        urn = self.make_urn(request.parent, request.type, request.name)
        with self._lock:
            self.resources[urn] = Registration(urn, rid, state)
        return resource_pb2.ReadResourceResponse(urn=urn, properties=to_struct(None, (), state))

    def RegisterResourceOutputs(self, request: Any) -> Any:
        from google.protobuf import empty_pb2

        self._count("RegisterResourceOutputs")
        return empty_pb2.Empty()

    # -- invokes ------------------------------------------------------------------------

    def Invoke(self, request: Any) -> Any:
        from pulumi.runtime import rpc
        from pulumi.runtime.mocks import MockCallArgs
        from pulumi.runtime.proto import provider_pb2, resource_pb2

        self._count("Invoke")
        args = rpc.deserialize_properties(request.args)
        if request.tok == "pulumi:pulumi:getResource":
            with self._lock:
                found = self.resources.get(args["urn"])
            if found is None:
                raise LookupError(f"unknown resource {args['urn']}")
            return resource_pb2.ResourceInvokeResponse(
                **{"return": to_struct(None, (), found._asdict())})
        answer = self.mocks.call(MockCallArgs(token=request.tok, args=args,
                                              provider=request.provider))
        result, failures = (answer, ()) if isinstance(answer, dict) else answer
        return resource_pb2.ResourceInvokeResponse(
            failures=[provider_pb2.CheckFailure(property=p, reason=r) for p, r in failures or ()],
            **{"return": to_struct(None, (), result)},
        )

    # -- what the SDK asks about the engine ---------------------------------------------

    def SupportsFeature(self, request: Any) -> Any:
        from pulumi.runtime.proto import resource_pb2

        self._count("SupportsFeature")
        # As the SDK's mock monitor: no output values, so inputs reach the mocks resolved.
        return resource_pb2.SupportsFeatureResponse(hasSupport=request.id != "outputValues")

    def GetDeploymentInfo(self, request: Any) -> Any:
        from pulumi.runtime.proto import resource_pb2

        # The SDK mock monitor's list: the SDK shapes its requests by these.
        features = resource_pb2
        return resource_pb2.DeploymentInfo(supportedFeatures=[
            features.RESOURCE_MONITOR_FEATURE_SECRETS,
            features.RESOURCE_MONITOR_FEATURE_RESOURCE_REFERENCES,
            features.RESOURCE_MONITOR_FEATURE_ALIAS_SPECS,
            features.RESOURCE_MONITOR_FEATURE_REPLACEMENT_TRIGGER,
            features.RESOURCE_MONITOR_FEATURE_DELETED_WITH,
            features.RESOURCE_MONITOR_FEATURE_REPLACE_WITH,
            features.RESOURCE_MONITOR_FEATURE_TRANSFORMS,
            features.RESOURCE_MONITOR_FEATURE_INVOKE_TRANSFORMS,
            features.RESOURCE_MONITOR_FEATURE_PARAMETERIZATION,
            features.RESOURCE_MONITOR_FEATURE_RESOURCE_HOOKS,
            features.RESOURCE_MONITOR_FEATURE_ERROR_HOOKS,
        ])

    def RegisterPackage(self, request: Any) -> Any:
        from pulumi.runtime.proto import resource_pb2

        self._count("RegisterPackage")
        return resource_pb2.RegisterPackageResponse(ref="mock-package")

    def _accepted(self, method: str) -> Any:
        from google.protobuf import empty_pb2

        self._count(method)
        return empty_pb2.Empty()

    def RegisterStackTransform(self, request: Any) -> Any:
        return self._accepted("RegisterStackTransform")

    def RegisterStackInvokeTransform(self, request: Any) -> Any:
        return self._accepted("RegisterStackInvokeTransform")

    def RegisterResourceHook(self, request: Any) -> Any:
        return self._accepted("RegisterResourceHook")

    def RegisterErrorHook(self, request: Any) -> Any:
        return self._accepted("RegisterErrorHook")

    def SignalAndWaitForShutdown(self, request: Any) -> Any:
        return self._accepted("SignalAndWaitForShutdown")


def fresh_loop() -> asyncio.AbstractEventLoop:
    """An event loop whose executor runs monitor RPCs inline, set as this thread's loop."""
    loop = asyncio.new_event_loop()
    loop.set_default_executor(InlineExecutor())
    asyncio.set_event_loop(loop)
    return loop
