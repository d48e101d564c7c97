"""The join script is pure: build it, parse the cloud-config back, and check what matters."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from components import join_script as js
from components.pins import K3sPin

PIN = K3sPin(
    version="v1.35.5+k3s1",
    url="https://github.com/k3s-io/k3s/releases/download/v1.35.5%2Bk3s1/k3s",
    sha256_amd64="0123456789abcdef" * 4,
)
CA = "ab" * 32
TOKEN = js.k3s_secure_token(CA, "abc123", "0123456789abcdef")


def spec(provider: js.Provider = "aws", accelerator: str | None = None) -> js.JoinSpec:
    return js.JoinSpec(
        provider=provider,
        server_url="https://203.0.113.10:6443",
        ca_sha256=CA,
        cluster_id="cl-1",
        pool_id="np-1",
        attempt_id="at-9",
        k3s=PIN,
        accelerator=accelerator,
    )


def parse(text: str) -> dict[str, Any]:
    assert text.startswith("#cloud-config\n")
    doc = yaml.safe_load(text)
    assert isinstance(doc, dict)
    return doc


def file_content(doc: dict[str, Any], path: str) -> str:
    matches = [f for f in doc["write_files"] if f["path"] == path]
    assert len(matches) == 1, path
    return str(matches[0]["content"])


def agent_config(doc: dict[str, Any]) -> dict[str, Any]:
    cfg = yaml.safe_load(file_content(doc, js.CONFIG_PATH))
    assert isinstance(cfg, dict)
    return cfg


def test_secure_token_format_and_validation() -> None:
    assert f"K10{CA}::abc123.0123456789abcdef" == TOKEN
    with pytest.raises(ValueError):
        js.k3s_secure_token(CA, "ABC123", "0123456789abcdef")
    with pytest.raises(ValueError):
        js.k3s_secure_token(CA, "abc123", "short")
    with pytest.raises(ValueError):
        js.k3s_secure_token("nothex", "abc123", "0123456789abcdef")


def test_agent_config_joins_with_pinned_token_name_labels_and_taint() -> None:
    cfg = agent_config(parse(js.render(spec(), TOKEN)))
    assert cfg["server"] == "https://203.0.113.10:6443"
    assert cfg["token"] == TOKEN
    assert cfg["node-name"] == "anycloud-at-9"
    assert cfg["with-node-id"] is False
    assert sorted(cfg["node-label"]) == sorted(
        [
            "anycloud.sh/cluster=cl-1",
            "anycloud.sh/node-pool=np-1",
            "anycloud.sh/provider=aws",
            "anycloud.sh/attempt=at-9",
        ]
    )
    assert cfg["node-taint"] == ["anycloud.sh/node-pool=np-1:NoSchedule"]
    # flannel-external-ip is a server-only flag; the agent only announces its external IP.
    assert "flannel-external-ip" not in cfg


def test_gpu_nodes_carry_the_accelerator_label() -> None:
    cfg = agent_config(parse(js.render(spec(accelerator="nvidia"), TOKEN)))
    assert "anycloud.sh/accelerator=nvidia" in cfg["node-label"]
    cpu = agent_config(parse(js.render(spec(), TOKEN)))
    assert not any(label.startswith("anycloud.sh/accelerator") for label in cpu["node-label"])


def test_agent_config_is_root_only() -> None:
    doc = parse(js.render(spec(), TOKEN))
    (entry,) = [f for f in doc["write_files"] if f["path"] == js.CONFIG_PATH]
    assert entry["permissions"] == "0600"


def test_k3s_download_is_verified_against_the_pinned_checksum() -> None:
    doc = parse(js.render(spec(), TOKEN))
    install = file_content(doc, f"{js.LIB}/install-k3s.sh")
    assert f"expected={PIN.sha256_amd64}" in install
    assert PIN.url in install
    assert "sha256sum -c" in install
    # Never a checksum fetched next to the binary.
    assert "sha256sum-amd64.txt" not in js.render(spec(), TOKEN)


def test_join_runs_arch_guard_before_install_and_agent_refuses_other_arches() -> None:
    doc = parse(js.render(spec(), TOKEN))
    assert doc["runcmd"] == [[f"{js.LIB}/join.sh"]]
    join = file_content(doc, f"{js.LIB}/join.sh").splitlines()
    guard_at = join.index(f"{js.LIB}/arch-guard.sh")
    assert guard_at < join.index(f"{js.LIB}/install-k3s.sh")
    assert "set -eu" in join
    unit = file_content(doc, "/etc/systemd/system/k3s-agent.service")
    pre = [line for line in unit.splitlines() if line.startswith("ExecStartPre=")]
    assert pre[0] == f"ExecStartPre={js.LIB}/arch-guard.sh"


def _run_with_fake(
    tmp_path: Path, script: str, fakes: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, body in fakes.items():
        p = bin_dir / name
        p.write_text("#!/bin/sh\n" + body)
        p.chmod(p.stat().st_mode | stat.S_IEXEC)
    target = tmp_path / "script.sh"
    target.write_text(script)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    return subprocess.run(["/bin/sh", str(target)], env=env, capture_output=True, text=True)


@pytest.mark.parametrize(("arch", "ok"), [("x86_64", True), ("aarch64", False), ("armv7l", False)])
def test_arch_guard_script_behaviour(tmp_path: Path, arch: str, ok: bool) -> None:
    guard = file_content(parse(js.render(spec(), TOKEN)), f"{js.LIB}/arch-guard.sh")
    result = _run_with_fake(tmp_path, guard, {"uname": f"echo {arch}\n"})
    assert (result.returncode == 0) is ok
    if not ok:
        assert "x86_64 only" in result.stderr


def test_install_script_rejects_a_binary_with_the_wrong_checksum(tmp_path: Path) -> None:
    install = file_content(parse(js.render(spec(), TOKEN)), f"{js.LIB}/install-k3s.sh")
    # A fake curl that "downloads" something else: the script must stop before installing.
    fake_curl = 'while [ $# -gt 0 ]; do if [ "$1" = -o ]; then echo evil > "$2"; fi; shift; done\n'
    result = _run_with_fake(
        tmp_path, install, {"curl": fake_curl, "install": "echo INSTALLED; exit 0\n"}
    )
    assert result.returncode != 0
    assert "INSTALLED" not in result.stdout
    assert "checksum mismatch" in result.stderr


@pytest.mark.parametrize(
    ("provider", "needle"),
    [
        ("aws", "X-aws-ec2-metadata-token: $t"),
        ("gcp", "Metadata-Flavor: Google"),
        ("azure", "Metadata: true"),
    ],
)
def test_external_ip_comes_from_the_cloud_metadata_service(
    provider: js.Provider, needle: str
) -> None:
    doc = parse(js.render(spec(provider), TOKEN))
    script = file_content(doc, f"{js.LIB}/external-ip.sh")
    assert needle in script
    assert "node-external-ip" in script
    if provider == "aws":
        assert "-X PUT" in script and "/latest/api/token" in script
    unit = file_content(doc, "/etc/systemd/system/k3s-agent.service")
    assert f"ExecStartPre={js.LIB}/external-ip.sh" in unit


def test_rejoin_keeps_node_password_and_reissues_kubelet_certs_until_registered(
    tmp_path: Path,
) -> None:
    doc = parse(js.render(spec(), TOKEN))
    text = js.render(spec(), TOKEN)
    assert js.NODE_PASSWORD_PATH not in text  # never removed, never rewritten
    prestart = file_content(doc, f"{js.LIB}/prestart.sh")
    for cert in js.CACHED_KUBELET_CERTS:
        assert cert in prestart
    unit = file_content(doc, "/etc/systemd/system/k3s-agent.service")
    assert f"ExecStartPre={js.LIB}/prestart.sh" in unit
    assert "Restart=always" in unit
    # Behaviour: certs go while the marker is absent, stay once it exists.
    root = tmp_path / "root"
    agent = root / js.AGENT_DIR.lstrip("/")
    agent.mkdir(parents=True)
    marker = root / js.REGISTERED_MARKER.lstrip("/")
    script = prestart.replace(js.AGENT_DIR, str(agent)).replace(js.REGISTERED_MARKER, str(marker))
    for cert in js.CACHED_KUBELET_CERTS:
        (agent / Path(cert).name).write_text("x")
    assert _run_with_fake(tmp_path, script, {}).returncode == 0
    assert not any((agent / Path(c).name).exists() for c in js.CACHED_KUBELET_CERTS)
    marker.parent.mkdir(parents=True)
    marker.write_text("")
    for cert in js.CACHED_KUBELET_CERTS:
        (agent / Path(cert).name).write_text("x")
    assert _run_with_fake(tmp_path, script, {}).returncode == 0
    assert all((agent / Path(c).name).exists() for c in js.CACHED_KUBELET_CERTS)


def test_no_ssh_access_is_configured() -> None:
    doc = parse(js.render(spec(), TOKEN))
    assert doc["ssh_pwauth"] is False
    assert "ssh_authorized_keys" not in doc
    assert "systemctl disable --now ssh.service" in file_content(doc, f"{js.LIB}/join.sh")
