"""Stand-in provider plugins ``aws``, ``gcp`` and ``azure-native`` for the real Pulumi
engine, answering from anycloud's simulated cloud (``automation.simulators.cloud_api``), and
``random``, drawing locally (see ``PACKAGES``).

The real plugins cannot be built here (their Go sources are patched upstream trees, not
published modules), and no cloud account is reachable. These are served with Pulumi's own
provider SDK (``pulumi.provider.experimental``) over the engine's gRPC plugin protocol, so
everything above the plugin -- the CLI, the engine's steps and checkpoints, the Automation
API, the policy pack, anycloud's recovery -- is the real code path. They are installed under
``STANDIN_VERSION``, a version no real release has, and say "stand-in cloud" in their
plugin info and every error they raise.
"""

from __future__ import annotations

# A prerelease of 0.0.0: below every real release of the three packages, never served by a
# registry, and named for what it is wherever the engine prints a plugin's version.
STANDIN_VERSION = "0.0.0-anycloud.standin"
CLOUD_PACKAGES = ("aws", "gcp", "azure-native")
# The random provider is plain Go, but its module (github.com/pulumi/pulumi-random/provider/v4)
# is not served by the Go module proxy these machines reach (403 for every version): it
# cannot be built here either, and node-pool stacks draw their bootstrap tokens with it.
# Its stand-in draws from the operating system's CSPRNG as the real one does (crypto/rand).
PACKAGES = (*CLOUD_PACKAGES, "random")
LABEL = "stand-in cloud"
