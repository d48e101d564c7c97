"""Where the Go programs of a local control plane are found.

In order: the folders in ``$ANYCLOUD_TOOLS_BIN`` (``os.pathsep``-separated), the cache that
``tools/build.py`` fills (``$ANYCLOUD_TOOLS_CACHE`` or ``~/.cache/anycloud/tools``, whose
``bin/`` links to the newest build of each tool), then ``$PATH``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from automation.errors import AnycloudError

TOOLS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl",
         "kwok", "pulumi", "pulumi-resource-kubernetes", "helm")


class ToolMissing(AnycloudError):
    default_code = "TOOL_MISSING"

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(
            f"`{name}` was not found in $ANYCLOUD_TOOLS_BIN, the tool cache "
            f"({cache_root()}) or $PATH: run `python3 tools/build.py` from a clone of "
            "anycloud (it builds it from pinned Go modules), or put an installed one on PATH")


def cache_root() -> Path:
    explicit = os.environ.get("ANYCLOUD_TOOLS_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "anycloud" / "tools"


def search_path() -> list[Path]:
    explicit = [Path(p) for p in os.environ.get("ANYCLOUD_TOOLS_BIN", "").split(os.pathsep) if p]
    return [*explicit, cache_root() / "bin"]


def find(name: str) -> Path:
    for folder in search_path():
        candidate = folder / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate.resolve()
    found = shutil.which(name)
    if found is None:
        raise ToolMissing(name)
    return Path(found).resolve()


def share_dir(binary: Path) -> Path:
    """Data files built beside a binary (``<set>/share`` for ``<set>/bin/<binary>``)."""
    return binary.resolve().parent.parent / "share"


def plugin_version(binary: Path) -> str:
    """The version a provider plugin built by tools/build.py was built as (its build.json);
    install it under that version, never the SDK's."""
    import json

    manifest = binary.resolve().parent.parent / "build.json"
    try:
        plugins = json.loads(manifest.read_text()).get("plugins") or {}
        return str(plugins[binary.name]["version"])
    except (OSError, ValueError, KeyError) as exc:
        raise ToolMissing(binary.name) from exc
