"""Run a Pulumi stack program under a mock engine and return what it registered.

This is the engine-less half of the StackRunner story: the real resource registration path
of the Pulumi SDK runs (its mock settings, ``pulumi.runtime.mocks``), our in-process monitor
(``automation.engine.mock.monitor``: no thread per RPC, no collection mid-run, so a run's cost grows
with the pool's size and no faster) takes the engine's RPCs, and a pluggable *cloud* object
answers instead of provider plugins.
It fills in what a provider's ``Check`` would (``check``: autonames, known in a preview),
assigns ids, addresses and the other outputs the real providers return (``new_resource``:
ARNs, GCP selfLinks, ARM ids and names) and answers invokes (``call``, e.g.
``aws:ec2/getAmi:getAmi`` with the newest image it has; ``publish_image`` publishes a newer
one, as an image's owner would). The result is plain data: every resource with its inputs under
the engine's wire names (camelCase), secrets replaced by ``"[secret]"``, plus the stack
outputs. Used by ``anycloud node-pool plan``, the offline policy check and tests.

With a ``planner`` (the mock runner's diff against its recorded state) each custom resource
is told its step before the cloud answers: a ``preview`` then behaves like the engine's --
a resource about to be created or replaced has an unknown id and unknown computed outputs,
and whatever the program derives from them is unknown too (``"[unknown]"`` in the result);
in an update, a resource kept (``same``/``update``) keeps its recorded id and a replaced one
gets a new one where the cloud's ids are not derived from the name.

Pulumi is imported lazily so importing this module costs nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import copy
import gc
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from automation.engine.mock.model import (
    SECRET,
    STACK_TYPE,
    UNKNOWN,
    Cloud,
    CloudFailure,
    PendingResource,
    Planner,
    ProgramRun,
    RegisteredResource,
    Step,
)
from automation.engine.mock.providers import MockProviders

if TYPE_CHECKING:
    from pulumi.runtime.mocks import MockCallArgs, MockResourceArgs

_local = threading.local()  # the step of the registration in flight on this thread


# --------------------------------------------------------------------------- plain data


def _plain(value: Any, reveal: bool = False) -> tuple[Any, bool]:
    """Strip secret wrappers; return (value with secrets replaced, whether any was secret)."""
    from pulumi.output import Unknown
    from pulumi.runtime import rpc

    if rpc.is_rpc_secret(value):
        if reveal:
            return _plain(rpc.unwrap_rpc_secret(value), reveal)[0], True
        return SECRET, True
    if isinstance(value, Unknown):
        return UNKNOWN, False
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        secret = False
        for k, v in value.items():
            out[str(k)], s = _plain(v, reveal)
            secret = secret or s
        return out, secret
    if isinstance(value, (list, tuple)):
        items = [_plain(v, reveal) for v in value]
        return [v for v, _ in items], any(s for _, s in items)
    if value is None or isinstance(value, (str, int, float, bool)):
        return value, False
    # Assets, archives and resource references: keep a readable form.
    return repr(value), False


def _plain_props(
    props: Mapping[str, Any], reveal: bool = False
) -> tuple[dict[str, Any], tuple[str, ...]]:
    out: dict[str, Any] = {}
    secret_keys: list[str] = []
    for k, v in props.items():
        out[k], secret = _plain(v, reveal)
        if secret:
            secret_keys.append(k)
    return out, tuple(sorted(secret_keys))


# --------------------------------------------------------------------------- engine


def _make_mocks(cloud: Cloud, record: dict[str, Any], preview: bool) -> Any:
    from pulumi.runtime import mocks as pmocks

    class _Mocks(pmocks.Mocks):
        def new_resource(self, args: MockResourceArgs) -> tuple[str | None, dict[Any, Any]]:
            step: Step | None = getattr(_local, "step", None)
            args.step = step  # type: ignore[attr-defined]
            check = getattr(cloud, "check", None)
            checked = {**args.inputs, **(check(args) if callable(check) else {})}
            if preview and args.custom and (step is None or step.op in ("create", "replace")):
                # As the engine's preview: nothing is created, so the id and every output
                # the provider computes are unknown; only the (checked) inputs are known.
                return "", checked
            begin = getattr(_local, "begin", None)
            if begin is not None:  # the engine records the create as in flight, checked
                begin({k: v for k, v in checked.items()
                       if k not in args.inputs or v is not args.inputs[k]})
            rid, extra = cloud.new_resource(args)
            if step is not None and step.old_id and step.op in ("same", "update"):
                rid = step.old_id  # a resource kept keeps its id
            # Echo the inputs (secret wrappers included, so secrets stay secret) plus what
            # the cloud computed.
            return rid, {**checked, **extra}

        def call(self, args: MockCallArgs) -> Any:
            # A bare dict means "no check failures" to MockMonitor.Invoke.
            result = cloud.call(args)
            with record["lock"]:
                record["invokes"].append({"token": args.token, "args": args.args})
            return result

    return _Mocks()


def _make_monitor(mocks: Any, record: dict[str, Any], planner: Planner | None, stack: str,
                  project: str) -> Any:
    from pulumi.runtime import rpc

    from automation.engine.mock.monitor import LeanMonitor

    class _Monitor(LeanMonitor):
        def make_urn(self, parent: str, type_: str, name: str) -> str:
            # Like the real engine: children of the root stack carry no parent type.
            if parent and parent.split("::")[2].split("$")[-1] == STACK_TYPE:
                parent = ""
            return super().make_urn(parent, type_, name)

        def RegisterResource(self, request: Any) -> Any:
            resp = super().RegisterResource(request)
            if request.type == STACK_TYPE:
                record["stack_urn"] = resp.urn
            return resp

        def register(self, request: Any, urn: str, inputs: dict[str, Any]) -> Any:
            options = {
                "additionalSecretOutputs": list(request.additionalSecretOutputs),
                "replaceOnChanges": list(request.replaceOnChanges),
                "ignoreChanges": list(request.ignoreChanges),
                "deleteBeforeReplace": bool(request.deleteBeforeReplace),
                "deleteBeforeReplaceDefined": bool(request.deleteBeforeReplaceDefined),
                "retainOnDelete": bool(request.retainOnDelete),
                "protect": bool(request.protect),
                "dependencies": list(request.dependencies),
            }
            step = pending = None
            if planner is not None:
                plain, secret_keys = _plain_props(inputs, reveal=True)
                parent = request.parent or None
                pending = PendingResource(
                    urn=urn, type=request.type, name=request.name, custom=bool(request.custom),
                    inputs=plain, options=options,
                    parent=None if parent == record.get("stack_urn") else parent,
                    provider=request.provider or None, secret_inputs=secret_keys,
                )
                step = planner.decide(pending)
            _local.step = step
            begin = getattr(planner, "begin", None)
            if pending is not None and begin is not None:
                _local.begin = lambda added, p=pending: begin(p, _plain_props(added)[0])
            try:
                resp = super().register(request, urn, inputs)
            except CloudFailure:
                # The cloud answered: nothing was made (any other error leaves it unknown).
                refused = getattr(planner, "refused", None)
                if pending is not None and refused is not None:
                    refused(pending)
                raise
            finally:
                _local.step = _local.begin = None
            applied = getattr(planner, "applied", None)
            if pending is not None and applied is not None:
                applied(pending, resp.id or None)
            with record["lock"]:
                record["order"].append(resp.urn)
                record["requests"][resp.urn] = {
                    "type": request.type,
                    "name": request.name,
                    "parent": request.parent or None,
                    "custom": bool(request.custom),
                    "provider": request.provider or None,
                    "inputs": inputs,
                    "options": options,
                }
            return resp

        def RegisterResourceOutputs(self, request: Any) -> Any:
            if request.urn == record.get("stack_urn"):
                record["stack_outputs"] = rpc.deserialize_properties(request.outputs)
            return super().RegisterResourceOutputs(request)

    return _Monitor(mocks, stack=stack, project=project)


def run_program(
    program: Callable[[], None],
    *,
    cloud: Cloud | None = None,
    project: str = "anycloud",
    stack: str = "mock",
    config: Mapping[str, str] | None = None,
    preview: bool = False,
    logger: logging.Logger | None = None,
    reveal_secrets: bool = False,
    planner: Planner | None = None,
    aliases: bool = False,
) -> ProgramRun:
    """Run ``program`` as a Pulumi stack under mocks; return every registered resource.

    Safe to call repeatedly in one process: each run gets fresh runtime settings, a fresh
    monitor and a fresh root stack, inside a copied context so nothing leaks between runs.
    ``config`` is Pulumi config as the engine passes it (``{"anycloud:pool": "<json>"}``).
    ``preview``: a dry run, as ``pulumi preview`` -- resources the ``planner`` does not keep
    (without one: every resource) get unknown ids and computed outputs. ``planner`` decides
    each resource's step before the cloud answers (see the module docstring).
    ``reveal_secrets`` keeps secret values readable (still listed as secret): for tests
    only, never for anything printed. ``aliases``: let the SDK evaluate the resources'
    aliases (see ``_without_aliases``; the result is the same either way). Raises whatever
    the program (or the cloud) raised.
    """
    ctx = contextvars.copy_context()
    with _gc_paused():
        return ctx.run(
            _run,
            program,
            cloud or MockProviders(),
            project,
            stack,
            dict(config or {}),
            preview,
            logger,
            reveal_secrets,
            planner,
            aliases,
        )


def _without_aliases(program: Callable[[], None]) -> Callable[[], None]:
    """``program`` with the resources' ``aliases`` option dropped before the SDK reads it.

    Aliases name the URNs a resource may have had under older type tokens, for the real
    engine to match against its state. The mock engine's state is keyed by URN and never
    matches an alias, so they change nothing here -- but the SDK turns every alias into a
    chain of outputs when the resource is constructed, and azure-native gives each resource
    dozens of them (one per API version): about 40% of an Azure pool's evaluation. The
    SDK's own stack transformation drops them; the registered resources are identical.
    """
    import pulumi

    def drop(args: pulumi.ResourceTransformationArgs
             ) -> pulumi.ResourceTransformationResult | None:
        if args.opts is None or not args.opts.aliases:
            return None
        opts = copy.copy(args.opts)
        opts.aliases = None
        return pulumi.ResourceTransformationResult(props=args.props, opts=opts)

    def with_drop() -> None:
        pulumi.runtime.register_stack_transformation(drop)
        program()

    return with_drop


_gc_lock = threading.Lock()
_gc_runs = 0  # runs in flight (any thread) that paused the collector
_gc_was_enabled = False


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off while programs run.

    A run allocates tens of thousands of futures and tasks that stay alive until it ends;
    every full collection walks all of them plus the provider SDKs' modules, and the number
    of collections grows with the run: the quadratic term of a pool's evaluation. Their
    memory is freed by reference counting or by the next collection after the run.
    """
    global _gc_runs, _gc_was_enabled
    with _gc_lock:
        if _gc_runs == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_runs += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_runs -= 1
            if _gc_runs == 0 and _gc_was_enabled:
                gc.enable()


@contextlib.contextmanager
def _own_event_loop() -> Iterator[None]:
    """A fresh event loop for one run, whose executor answers monitor RPCs inline (no
    thread hand-off per resource); the thread's previous loop is put back afterwards."""
    from automation.engine.mock.monitor import fresh_loop

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass  # as it should be: no loop is running in this thread
    else:
        raise RuntimeError("run_program runs its own event loop: call it from synchronous "
                           "code (or another thread), not from inside a running loop")
    policy = asyncio.get_event_loop_policy()
    try:
        previous: asyncio.AbstractEventLoop | None = policy.get_event_loop()
    except RuntimeError:  # no loop in this (non-main) thread
        previous = None
    loop = fresh_loop()
    try:
        yield
    finally:
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for task in pending:  # left behind by a program that raised
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.close()
        asyncio.set_event_loop(previous)


def _run(
    program: Callable[[], None],
    cloud: Cloud,
    project: str,
    stack: str,
    config: dict[str, str],
    preview: bool,
    logger: logging.Logger | None,
    reveal_secrets: bool,
    planner: Planner | None,
    aliases: bool,
) -> ProgramRun:
    from google.protobuf import empty_pb2
    from pulumi.runtime import config as pconfig
    from pulumi.runtime import mocks as pmocks
    from pulumi.runtime import settings
    from pulumi.runtime.stack import run_in_stack
    from pulumi.runtime.sync_await import _sync_await

    record: dict[str, Any] = {
        "lock": threading.Lock(),
        "order": [],
        "requests": {},
        "invokes": [],
    }
    mocks = _make_mocks(cloud, record, preview)
    monitor = _make_monitor(mocks, record, planner, stack, project)
    features = set(monitor.GetDeploymentInfo(empty_pb2.Empty()).supportedFeatures)
    settings.configure(
        pmocks.MockSettings(
            monitor=monitor,
            monitor_features=features,
            engine=pmocks.MockEngine(logger or logging.getLogger("anycloud.mock_engine")),
            project=project,
            stack=stack,
            dry_run=preview,
            organization="organization",
            callbacks=None,
        )
    )
    settings.SETTINGS.outputs.clear()
    settings.ROOT.set(None)
    pconfig.set_all_config(config, [])

    with _own_event_loop():
        _sync_await(run_in_stack(program if aliases else _without_aliases(program)))

    resources: list[RegisteredResource] = []
    registered = monitor.get_registered_resources()
    # URN order is stable across runs, whatever order the program registered in.
    for urn in sorted(record["order"]):
        req = record["requests"][urn]
        inputs, secret_inputs = _plain_props(req["inputs"], reveal_secrets)
        reg = registered.get(urn)
        outputs, secret_outputs = _plain_props(reg.state if reg else {}, reveal_secrets)
        resources.append(
            RegisteredResource(
                urn=urn,
                type=req["type"],
                name=req["name"],
                custom=req["custom"],
                id=(reg.id or None) if reg else None,
                parent=req["parent"] if req["parent"] != record.get("stack_urn") else None,
                provider=req["provider"],
                inputs=inputs,
                secret_inputs=secret_inputs,
                outputs=outputs,
                secret_outputs=secret_outputs,
                options=req["options"],
            )
        )
    stack_outputs, secret_stack_outputs = _plain_props(
        record.get("stack_outputs", {}), reveal_secrets
    )
    return ProgramRun(
        resources=tuple(resources),
        invokes=tuple(
            {"token": i["token"], "args": _plain(i["args"], reveal_secrets)[0]}
            for i in record["invokes"]
        ),
        outputs=stack_outputs,
        secret_outputs=secret_stack_outputs,
        stack_urn=record.get("stack_urn", ""),
        rpcs=dict(monitor.calls),
    )
