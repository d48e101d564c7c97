"""Installing the stand-in plugins where the engine finds plugins, and the environment that
makes the engine use them.

Each plugin is a small launcher, ``pulumi-resource-<package>``, that runs this interpreter on
``automation.simulators.standin``; ``pulumi plugin install resource <package>
STANDIN_VERSION --file <launcher>`` puts it in ``$PULUMI_HOME/plugins``, and
``ANYCLOUD_PULUMI_PLUGINS`` names that version so the stack program asks for it
(``automation.engine.plugins``). A launcher left by another checkout or interpreter is
replaced.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

import automation
from automation.engine.plugins import ENV as PLUGINS_ENV
from automation.engine.plugins import overrides
from automation.engine.pulumi_cli import plugin_dir
from automation.simulators.standin import LABEL, PACKAGES, STANDIN_VERSION


def launcher(package: str) -> str:
    root = Path(automation.__file__).resolve().parent.parent
    return (f"#!/bin/sh\n# anycloud's {LABEL} plugin for {package}: answers from the simulated "
            f"cloud, never from {package}'s real API.\n"
            f'PYTHONPATH="{root}${{PYTHONPATH:+:$PYTHONPATH}}" exec "{sys.executable}" '
            f'-m automation.simulators.standin {package} "$@"\n')


def install(environ: Mapping[str, str]) -> None:
    """Install (or replace) the launcher of each package under ``STANDIN_VERSION``."""
    pulumi = shutil.which("pulumi", path=environ.get("PATH"))
    if pulumi is None:
        raise FileNotFoundError("pulumi")
    for package in PACKAGES:
        script = launcher(package)
        installed = (plugin_dir(environ) / f"resource-{package}-v{STANDIN_VERSION}"
                     / f"pulumi-resource-{package}")
        if installed.exists() and installed.read_text() == script:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp, f"pulumi-resource-{package}")
            path.write_text(script)
            path.chmod(0o755)
            subprocess.run([pulumi, "plugin", "install", "resource", package, STANDIN_VERSION,
                            "--file", str(path), "--reinstall"], env=dict(environ),
                           check=True, capture_output=True)


def standin_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """What the engine's environment needs to run the stand-ins: ``ANYCLOUD_PULUMI_PLUGINS``
    naming them, beside any other plugin it already names (kubernetes built from source)."""
    versions = {**overrides(environ), **dict.fromkeys(PACKAGES, STANDIN_VERSION)}
    return {PLUGINS_ENV: ",".join(f"{name}={version}" for name, version in versions.items())}


def is_standin(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``environ`` selects the stand-in cloud plugins."""
    env = os.environ if environ is None else environ
    return STANDIN_VERSION in env.get(PLUGINS_ENV, "")
