"""The real engine's environment on this machine: the Pulumi CLI and kubernetes provider
plugin that ``tools/build.py`` built, installed into a PULUMI_HOME of the caller's (nothing is
downloaded), for the stacks of ``demo --cluster local`` and ``--simulate --engine pulumi``."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from automation.errors import AnycloudError

# The caller's engine settings must not reach the demo's throw-away stacks (a backend URL
# would put their state there; a passphrase would meet the demo's generated one).
ENGINE_ENV_DROPPED = ("PULUMI_BACKEND_URL", "ANYCLOUD_SECRETS_PROVIDER",
                      "PULUMI_CONFIG_PASSPHRASE", "PULUMI_CONFIG_PASSPHRASE_FILE",
                      "ANYCLOUD_ENGINE")


@dataclass(frozen=True)
class LocalTools:
    pulumi: Path
    kubernetes_plugin: Path
    plugin_version: str


def local_tools() -> LocalTools:
    """Every program ``--cluster local`` runs, found before anything starts; ``ToolMissing``
    names the first one missing and how to build it (``python3 tools/build.py``)."""
    from automation.devcluster import binaries, control_plane

    for name in (*control_plane.COMPONENTS, "kubectl"):
        binaries.find(name)
    pulumi = binaries.find("pulumi")
    plugin = binaries.find("pulumi-resource-kubernetes")
    return LocalTools(pulumi, plugin, binaries.plugin_version(plugin))


def engine_environment(tools: LocalTools, pulumi_home: Path,
                       scratch: Path) -> dict[str, str | None]:
    """Install the kubernetes provider plugin into a PULUMI_HOME of its own (nothing is
    downloaded) and return the environment changes the engine runs with (None: unset).

    ``scratch`` is the engine's TMPDIR: the kubernetes provider writes the kubeconfig it is
    given (admin credentials) to a temporary file it does not remove; in the demo's home,
    it goes with it."""
    changes: dict[str, str | None] = dict.fromkeys(ENGINE_ENV_DROPPED)
    scratch.mkdir(parents=True, exist_ok=True)
    changes.update({
        "PULUMI_HOME": str(pulumi_home),
        "TMPDIR": str(scratch),
        # The Automation API finds the CLI on PATH.
        "PATH": os.pathsep.join([str(tools.pulumi.parent), os.environ.get("PATH", "")]),
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "ANYCLOUD_PULUMI_PLUGINS": f"kubernetes={tools.plugin_version}",
    })
    env = {k: v for k, v in {**os.environ, **changes}.items() if v is not None}
    pulumi_home.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [str(tools.pulumi), "plugin", "install", "resource", "kubernetes",
         tools.plugin_version, "--file", str(tools.kubernetes_plugin)],
        env=env, capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0:
        raise AnycloudError(
            f"installing the kubernetes provider plugin {tools.plugin_version} from "
            f"{tools.kubernetes_plugin} into {pulumi_home} failed: {done.stderr.strip()}",
            code="ENGINE_SETUP_FAILED")
    return changes


@contextmanager
def environment(changes: dict[str, str | None]) -> Iterator[None]:
    """``os.environ`` with ``changes`` applied, restored afterwards."""
    saved = {k: os.environ.get(k) for k in changes}

    def apply(values: dict[str, str | None]) -> None:
        for key, value in values.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value

    apply(changes)
    try:
        yield
    finally:
        apply(saved)


class EngineSession:
    """The real engine's environment in this process until ``close``: the CLI and the
    kubernetes plugin installed into ``root/pulumi-home`` (``engine_environment``) and, given
    a simulated ``cloud``, the stand-in cloud plugins installed there and that cloud served
    to them (``simulators.cloud_api``)."""

    def __init__(self, tools: LocalTools, root: Path, cloud: Any = None) -> None:
        self.pulumi_home = root / "pulumi-home"
        self._service: Any = None
        self._env: Any = None
        try:
            changes = engine_environment(tools, self.pulumi_home, root / "tmp")
            if cloud is not None:
                from automation.simulators.cloud_api import CloudService
                from automation.simulators.standin.install import install, standin_environment

                env = {k: v for k, v in {**os.environ, **changes}.items() if v is not None}
                install(env)
                self._service = CloudService(cloud)
                changes.update({**standin_environment(env), **self._service.env})
            self._env = environment(changes)
            self._env.__enter__()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        try:
            if self._service is not None:
                self._service.close()
                self._service = None
        finally:
            if self._env is not None:
                self._env.__exit__(None, None, None)
                self._env = None
