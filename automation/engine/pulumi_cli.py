"""The ``pulumi`` CLI as one process uses it, without asking it the same question twice.

Left to itself the Automation API runs ``pulumi version`` for every workspace it opens and
we ran ``pulumi plugin install`` for every plugin of every operation: ~0.2 s and ~0.25 s
each, answered the same way every time. Here the version is checked once per binary per
process, and a plugin is installed only when Pulumi's own test says it is missing.
"""

from __future__ import annotations

import errno
import os
import pwd
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from automation.engine.errors import PluginMissing

# (path, mtime, size) of a pulumi binary -> its PulumiCommand, version already checked.
_COMMANDS: dict[tuple[str, int, int], Any] = {}


def command() -> Any:
    """The ``PulumiCommand`` for the ``pulumi`` on PATH, built (and its version checked
    against the SDK's minimum) once per binary: a replaced or moved CLI is checked again."""
    from pulumi import automation as auto

    path = shutil.which("pulumi")
    if path is None:
        # What the SDK raises too; the driver turns it into EngineMissing.
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", "pulumi")
    stat = os.stat(path)
    key = (path, stat.st_mtime_ns, stat.st_size)
    found = _COMMANDS.get(key)
    if found is None:
        # root=None: the SDK runs "pulumi" from PATH, exactly as without this cache.
        found = _COMMANDS[key] = auto.PulumiCommand()
    return found


def plugin_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where the CLI keeps plugins: ``$PULUMI_HOME/plugins``, else ``~/.pulumi/plugins``
    with the home folder from the user database, as the CLI finds it
    (``pulumihome.Dir`` in pulumi/sdk/go/common/util/pulumihome)."""
    env = os.environ if environ is None else environ
    home = env.get("PULUMI_HOME") or str(Path(pwd.getpwuid(os.getuid()).pw_dir, ".pulumi"))
    return Path(home, "plugins")


def plugin_installed(name: str, version: str, kind: str = "resource",
                     environ: Mapping[str, str] | None = None) -> bool:
    """Pulumi's own test (``HasPlugin`` in pulumi/sdk/go/common/workspace/plugins.go): the
    plugin's folder ``<kind>-<name>-v<version>`` exists and no ``.partial`` file beside it
    says an install is unfinished. A miss only costs the install call it would have made."""
    folder = plugin_dir(environ) / f"{kind}-{name}-v{version.removeprefix('v')}"
    return folder.is_dir() and not folder.with_name(folder.name + ".partial").exists()


def acquisition_disabled(environ: Mapping[str, str]) -> bool:
    """``PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION`` read as the CLI reads it ("1" or
    "true" in any case: ``BoolValue.Value`` in pulumi/sdk/go/common/util/env, v3.274.1)."""
    value = environ.get("PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION", "")
    return value == "1" or value.lower() == "true"


def install_plugins(workspace: Any, plugins: Mapping[str, str]) -> None:
    """``pulumi plugin install`` each resource plugin (name -> version) not yet installed;
    ``PluginMissing`` instead when the environment forbids downloads (the CLI's own
    installs honour that variable; an explicit ``plugin install`` would not)."""
    missing = {n: v for n, v in plugins.items() if not plugin_installed(n, v)}
    if missing and acquisition_disabled(os.environ):
        raise PluginMissing(missing, plugin_dir())
    for name, version in missing.items():
        workspace.install_plugin(name, version)
