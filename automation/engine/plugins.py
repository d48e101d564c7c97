"""Which provider plugin versions the engine uses for a stack.

By default each plugin runs at the version of its installed Python SDK (pulumi_kubernetes
4.34.2 asks for the kubernetes plugin v4.34.2), which the engine downloads on first use.
``ANYCLOUD_PULUMI_PLUGINS="kubernetes=4.25.0-alpha.1768448096,aws=7.51.1"`` names other
versions, already installed (``pulumi plugin install resource <name> <version> --file …``):
for machines that cannot download plugins, and for plugins built from source. The stack
program then asks the engine for exactly those versions: its provider resources carry them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from importlib.metadata import PackageNotFoundError, version

from automation.engine.errors import EngineFailed
from automation.errors import InvalidInput

ENV = "ANYCLOUD_PULUMI_PLUGINS"
# Pulumi plugin name → the Python SDK distribution whose version is the default.
PLUGIN_SDKS = {
    "aws": "pulumi_aws",
    "gcp": "pulumi_gcp",
    "azure-native": "pulumi_azure_native",
    "kubernetes": "pulumi_kubernetes",
    "random": "pulumi_random",
}
_SEMVER = re.compile(r"^v?\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$")


def overrides(environ: Mapping[str, str]) -> dict[str, str]:
    """The versions named in ``ANYCLOUD_PULUMI_PLUGINS`` (without a leading v)."""
    raw = environ.get(ENV, "").strip()
    found: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in raw.split(","))):
        name, sep, ver = item.partition("=")
        if not sep or name not in PLUGIN_SDKS or not _SEMVER.match(ver):
            raise InvalidInput(
                ENV, raw, f"must be name=version pairs separated by commas, names among "
                f"{', '.join(sorted(PLUGIN_SDKS))} and versions semver (bad item {item!r})")
        found[name] = ver.removeprefix("v")
    return found


def plugin_version(name: str, environ: Mapping[str, str]) -> str:
    """The version (without a leading v) the engine should run plugin ``name`` at."""
    pinned = overrides(environ).get(name)
    if pinned:
        return pinned
    try:
        return version(PLUGIN_SDKS[name])
    except PackageNotFoundError as exc:
        raise EngineFailed(f"the {PLUGIN_SDKS[name]} SDK is not installed") from exc


def pin_provider_versions(program: Callable[[], None],
                          versions: Mapping[str, str]) -> Callable[[], None]:
    """The program, with every resource of a pinned package asking for its pinned version:
    the engine loads a provider plugin at its provider resource's ``version``, and a default
    provider (a ``random:`` value has no explicit one) at the version its resources ask."""
    if not versions:
        return program

    def pinned() -> None:
        import pulumi

        def pin(args: pulumi.ResourceTransformationArgs
                ) -> pulumi.ResourceTransformationResult | None:
            package = args.type_.removeprefix("pulumi:providers:").split(":", 1)[0]
            if package not in versions:
                return None
            opts = pulumi.ResourceOptions.merge(
                args.opts, pulumi.ResourceOptions(version=versions[package]))
            return pulumi.ResourceTransformationResult(args.props, opts)

        pulumi.runtime.register_stack_transformation(pin)
        program()

    return pinned
