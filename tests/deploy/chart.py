"""Running the chart's tools: ``helm`` (built by tools/build.py) on deploy/helm/anycloud,
with Helm's own directories in a temporary folder (never the user's)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import click
import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "deploy" / "helm" / "anycloud"
CRD = REPO / "k8s" / "crd" / "agentpool-crd.yaml"
OPERATOR_ROLE = REPO / "k8s" / "rbac" / "operator-role.yaml"

# What every install needs: the ledger's and the passphrase's Secrets (values.yaml).
REQUIRED = {
    "ledger.existingSecret": "anycloud-ledger",
    "state.passphrase.existingSecret": "anycloud-state-passphrase",
}


def set_args(values: dict[str, Any]) -> list[str]:
    """``--set-json`` for each value: lists and strings alike, nothing re-parsed by Helm."""
    import json

    return [a for k, v in values.items() for a in ("--set-json", f"{k}={json.dumps(v)}")]


class Helm:
    def __init__(self, binary: Path, home: Path) -> None:
        self.binary = binary
        # HOME too: the Kubernetes client caches discovery under $HOME/.kube (without
        # HOME, in the current directory).
        self.env = {"HOME": str(home), "HELM_CACHE_HOME": str(home / "cache"),
                    "HELM_CONFIG_HOME": str(home / "config"),
                    "HELM_DATA_HOME": str(home / "data"), "PATH": "/usr/bin:/bin"}

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([str(self.binary), *args], capture_output=True, text=True,
                              env=self.env, timeout=300)
        if check and done.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} exited {done.returncode}:\n"
                                 f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        return done

    def template(self, values: dict[str, Any], namespace: str = "anycloud",
                 release: str = "anycloud", *extra: str) -> str:
        return self.run("template", release, str(CHART), "--namespace", namespace,
                        *set_args(values), *extra).stdout

    def objects(self, values: dict[str, Any], namespace: str = "anycloud",
                release: str = "anycloud") -> list[dict[str, Any]]:
        return [d for d in yaml.safe_load_all(self.template(values, namespace, release)) if d]


def one(objects: list[dict[str, Any]], kind: str, name_ends: str = "") -> dict[str, Any]:
    found = [o for o in objects
             if o["kind"] == kind and o["metadata"]["name"].endswith(name_ends)]
    assert len(found) == 1, f"{len(found)} {kind} named *{name_ends}: {found}"
    return found[0]


def containers(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c for o in objects if o["kind"] == "Deployment"
            for c in o["spec"]["template"]["spec"]["containers"]]


def parse_command_line(argv: list[str]) -> click.Context:
    """Parse an ``anycloud`` command line as the console script would, running nothing: a
    renamed or removed option fails here (click's usage error)."""
    from automation.cli.main import cli

    root = cli.make_context("anycloud", list(argv), resilient_parsing=False)
    rest = [*getattr(root, "_protected_args", []), *root.args]
    name, command, args = cli.resolve_command(root, rest)
    assert command is not None and name is not None, argv
    return command.make_context(name, args, parent=root, resilient_parsing=False)
