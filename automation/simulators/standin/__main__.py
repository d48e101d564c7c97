"""``python -m automation.simulators.standin <package> <engine address>``: serve one
stand-in provider plugin to the engine that started it (the plugin launcher runs this).

The SDK's servicer serves most calls as they are. Diff and Update are served here: the
engine sends the resource's old *inputs* beside its old outputs, and the replace rules
compare inputs (the SDK's request classes drop them). Every failure of a resource call
reaches the engine as the cloud's message alone, not a Python traceback, as a real
provider's error does.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import grpc.aio

ORPHAN_POLL = 1.0  # seconds between looks at whether the engine still runs


def _plain_errors(method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(method)
    async def wrapper(self: Any, request: Any, context: Any) -> Any:
        try:
            return await method(self, request, context)
        except Exception as exc:
            # The SDK's own handlers append the Python stack to the message: not the user's.
            await context.abort(grpc.StatusCode.UNKNOWN, str(exc).split(':\n  File "', 1)[0])

    return wrapper


def servicer_class() -> type:
    from pulumi.provider.experimental.property_value import PropertyValue
    from pulumi.provider.experimental.provider import PropertyDiffKind
    from pulumi.provider.experimental.server import ProviderServicer
    from pulumi.runtime import proto
    from pulumi.runtime.proto import provider_pb2

    from automation.simulators.standin import STANDIN_VERSION
    from automation.simulators.standin.provider import StandInProvider, urn_name, urn_type

    kinds = {PropertyDiffKind.UPDATE: provider_pb2.PropertyDiff.UPDATE,
             PropertyDiffKind.UPDATE_REPLACE: provider_pb2.PropertyDiff.UPDATE_REPLACE}

    class StandInServicer(ProviderServicer):  # type: ignore[misc]
        _provider: StandInProvider

        async def GetPluginInfo(self, request: Any, context: Any) -> Any:
            return proto.PluginInfo(version=STANDIN_VERSION)

        @_plain_errors
        async def Diff(self, request: Any, context: Any) -> Any:
            olds = request.old_inputs if request.HasField("old_inputs") else request.olds
            resp = self._provider.diff_inputs(
                urn_type(request.urn), PropertyValue.unmarshal_map(olds),
                PropertyValue.unmarshal_map(request.news), list(request.ignoreChanges))
            return provider_pb2.DiffResponse(
                replaces=resp.replaces, deleteBeforeReplace=resp.delete_before_replace,
                changes=(provider_pb2.DiffResponse.DIFF_SOME if resp.changes
                         else provider_pb2.DiffResponse.DIFF_NONE),
                diffs=resp.diffs, hasDetailedDiff=True,
                detailedDiff={k: provider_pb2.PropertyDiff(kind=kinds[v.kind],
                                                           inputDiff=v.input_diff)
                              for k, v in resp.detailed_diff.items()})

        @_plain_errors
        async def Update(self, request: Any, context: Any) -> Any:
            olds = request.old_inputs if request.HasField("old_inputs") else request.olds
            resp = await self._provider.update_inputs(
                urn_type(request.urn), urn_name(request.urn), request.id,
                PropertyValue.unmarshal_map(olds), PropertyValue.unmarshal_map(request.news),
                list(request.ignoreChanges))
            return provider_pb2.UpdateResponse(
                properties=PropertyValue.marshal_map(resp.properties))

        Create = _plain_errors(ProviderServicer.Create)
        Read = _plain_errors(ProviderServicer.Read)
        Delete = _plain_errors(ProviderServicer.Delete)
        Invoke = _plain_errors(ProviderServicer.Invoke)

    return StandInServicer


def main(argv: list[str]) -> int:
    from pulumi.runtime._grpc_settings import _GRPC_CHANNEL_OPTIONS
    from pulumi.runtime.proto import provider_pb2_grpc

    from automation.simulators.standin import PACKAGES
    from automation.simulators.standin.provider import StandInProvider

    if len(argv) < 2 or argv[0] not in PACKAGES:
        print(f"usage: python -m automation.simulators.standin {{{','.join(PACKAGES)}}} "
              "<engine address>", file=sys.stderr)
        return 2
    package, engine = argv[0], argv[1]
    servicer = servicer_class()(argv[1:], "", StandInProvider(package), engine_address=engine)

    parent = os.getppid()

    async def orphaned() -> None:
        # The engine that started us is gone (SIGKILL of `pulumi`): nobody will call again,
        # and nobody would stop us. The Go plugins stop on the engine's health check.
        while os.getppid() == parent:
            await asyncio.sleep(ORPHAN_POLL)
        os._exit(0)

    async def serve() -> None:
        watch = asyncio.create_task(orphaned())
        server = grpc.aio.server(options=_GRPC_CHANNEL_OPTIONS)
        provider_pb2_grpc.add_ResourceProviderServicer_to_server(servicer, server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        # The engine reads the port from the plugin's first line of output.
        sys.stdout.write(f"{port}\n")
        sys.stdout.flush()
        await server.wait_for_termination()
        watch.cancel()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
