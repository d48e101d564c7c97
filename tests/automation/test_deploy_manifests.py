"""The shipped control-plane manifest keeps the Pulumi state across pod restarts (issue 19):
state on a PersistentVolumeClaim, its passphrase from a Secret, never an emptyDir or a
passphrase generated inside the pod. (The API server accepts the file: test_operator.py.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

MANIFEST = Path(__file__).resolve().parents[2] / "k8s" / "deploy" / "control-plane.yaml"


def _docs() -> dict[str, dict[str, Any]]:
    return {d["kind"]: d for d in yaml.safe_load_all(MANIFEST.read_text()) if d}


def test_the_state_outlives_the_pod() -> None:
    docs = _docs()
    pod = docs["Deployment"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e for e in container["env"]}
    home = env["ANYCLOUD_HOME"]["value"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    state = volumes[mounts[home]]
    assert "emptyDir" not in state
    claim = state["persistentVolumeClaim"]["claimName"]
    assert docs["PersistentVolumeClaim"]["metadata"]["name"] == claim
    assert pod["securityContext"]["fsGroup"] == pod["securityContext"]["runAsUser"]


def test_the_passphrase_comes_from_a_secret() -> None:
    docs = _docs()
    pod = docs["Deployment"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert "PULUMI_CONFIG_PASSPHRASE" not in env  # never a value in the manifest
    path = Path(env["PULUMI_CONFIG_PASSPHRASE_FILE"]["value"])
    mount = next(m for m in container["volumeMounts"] if Path(m["mountPath"]) == path.parent)
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert volume["secret"]["secretName"] == "anycloud-state-passphrase"
    assert mount.get("readOnly") is True


def test_every_secret_the_deployment_reads_is_made_by_the_readme() -> None:
    """The README's steps create each Secret the manifest reads (the ledger's was once
    read and never made), and the manifest's header says so too."""
    import re

    pod = _docs()["Deployment"]["spec"]["template"]["spec"]
    read = {v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
    read |= {e["valueFrom"]["secretKeyRef"]["name"] for c in pod["containers"]
             for e in c.get("env", []) if "secretKeyRef" in e.get("valueFrom", {})}
    readme = (MANIFEST.parent / "README.md").read_text()
    made = set(re.findall(r"create secret generic ([\w-]+)", readme))
    assert read and read <= made, read - made
    assert read <= set(re.findall(r"create secret generic ([\w-]+)", MANIFEST.read_text()))


def test_the_container_runs_a_valid_anycloud_command_line(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Parsed by the CLI itself (nothing runs): a renamed option fails here."""
    from tests.deploy.chart import parse_command_line

    monkeypatch.delenv("ANYCLOUD_CONFIG", raising=False)
    (container,) = _docs()["Deployment"]["spec"]["template"]["spec"]["containers"]
    program, *argv = container["command"]
    assert program == "anycloud"
    ctx = parse_command_line(argv)
    assert ctx.info_name == "serve"
    assert ctx.params["api_listen"] and ctx.params["broker_listen"]
