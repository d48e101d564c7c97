"""What can go wrong around the engine, as errors that say what to do next."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from automation.errors import AnycloudError

INSTALL_HINT = (
    "install it with `curl -fsSL https://get.pulumi.com | sh` "
    "(https://www.pulumi.com/docs/install/) and make sure `pulumi` is on PATH, "
    "or run with `--engine mock` to evaluate the stack under the SDK's mock engine instead"
)


class EngineMissing(AnycloudError):
    default_code = "ENGINE_MISSING"
    http_status = 503  # the server's host lacks its engine: an operator fixes it, not the caller

    def __init__(self) -> None:
        super().__init__(f"the `pulumi` command (the Pulumi engine) was not found: {INSTALL_HINT}")


class StackLocked(AnycloudError):
    default_code = "STACK_LOCKED"

    def __init__(self, stack: str, unlock_hint: str, detail: str) -> None:
        super().__init__(
            f"stack {stack} is locked by another update ({detail.strip() or 'no detail'}); "
            f"if no other anycloud or pulumi run is working on it, clear a stale lock with "
            f"`{unlock_hint}`"
        )


class StackMissing(AnycloudError):
    default_code = "STACK_NOT_FOUND"

    def __init__(self, stack: str) -> None:
        super().__init__(f"stack {stack} does not exist in the backend")


class EngineFailed(AnycloudError):
    default_code = "ENGINE_FAILED"


class PluginMissing(EngineFailed):
    """A provider plugin the stack needs is not installed, and the environment forbids
    downloading it (``PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION``): said before the
    engine starts, rather than after five failed downloads or half an operation."""

    default_code = "PLUGIN_MISSING"
    http_status = 503  # as EngineMissing: the host lacks part of its engine

    def __init__(self, missing: Mapping[str, str], folder: Path) -> None:
        named = ", ".join(f"pulumi-resource-{n} {v}" for n, v in missing.items())
        how = "; ".join(f"`pulumi plugin install resource {n} {v.removeprefix('v')} --file "
                        f"<binary>`" for n, v in missing.items())
        super().__init__(
            f"provider plugins not installed in {folder}: {named}; "
            f"PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION forbids downloading them: install "
            f"each ({how}), or name installed versions in ANYCLOUD_PULUMI_PLUGINS")


class StackTimeout(EngineFailed):
    """A stack operation that outran its time; its worker, engine and plugins were ended."""

    default_code = "STACK_TIMEOUT"


class SecretsConfigError(AnycloudError):
    default_code = "SECRETS_CONFIG"
