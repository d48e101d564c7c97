"""Cloud-init user data that joins a VM to the cluster as a K3s agent.

Pure functions: the document is built as data (a dict) and dumped to ``#cloud-config`` YAML,
so tests can parse it back. The bootstrap token is passed in by the caller inside an
``Output.apply``; it never appears anywhere but the returned string (which the caller keeps
secret).

K3s facts this relies on:

* Secure token format ``K10<sha256 of the cluster CA>::<id>.<secret>`` (docs.k3s.io/cli/token);
  bootstrap tokens are accepted for agents.
* ``node-external-ip`` on the agent registers the public address; making flannel use it is the
  *server* flag ``flannel-external-ip`` ("Flannel options can only be set on server nodes",
  docs.k3s.io/networking/basic-network-options) -- a cluster precondition, not set here.
* The node password (``/etc/rancher/node/password``) is never touched, so a restarted agent
  keeps its identity. Agents fetch their kubelet certificates from the supervisor on start; we
  delete cached kubelet certificates before every start until the Node is known to exist, so
  an agent that crashed before registering gets them reissued with token + node password.
  After registration they are kept: once the bootstrap token is deleted, K3s authenticates
  the agent by its existing kubelet client certificate (k3s-io/k3s#6663), and deleting it
  then would lock the agent out.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any, Literal

import yaml

from components import naming
from components.pins import K3sPin

Provider = Literal["aws", "gcp", "azure"]

CONFIG_PATH = "/etc/rancher/k3s/config.yaml"
CONFIG_DROPIN_DIR = "/etc/rancher/k3s/config.yaml.d"
NODE_PASSWORD_PATH = "/etc/rancher/node/password"
LIB = "/usr/local/lib/anycloud"
REGISTERED_MARKER = "/var/lib/anycloud/node-registered"
AGENT_DIR = "/var/lib/rancher/k3s/agent"
K3S_BIN = "/usr/local/bin/k3s"
CACHED_KUBELET_CERTS = tuple(
    f"{AGENT_DIR}/{name}"
    for name in (
        "client-kubelet.crt",
        "client-kubelet.key",
        "serving-kubelet.crt",
        "serving-kubelet.key",
    )
)

# libyaml's dumper when present: the pure-Python one costs ~10 ms per VM on a 100-VM pool.
_Dumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def _dump(data: Any) -> str:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False)


_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_TOKEN_ID = re.compile(r"^[a-z0-9]{6}$")
_TOKEN_SECRET = re.compile(r"^[a-z0-9]{16}$")


@dataclass(frozen=True)
class JoinSpec:
    provider: Provider
    server_url: str
    ca_sha256: str
    cluster_id: str
    pool_id: str
    attempt_id: str
    k3s: K3sPin
    accelerator: str | None = None

    @property
    def node_name(self) -> str:
        return naming.node_name(self.attempt_id)


def k3s_secure_token(ca_sha256: str, token_id: str, token_secret: str) -> str:
    """``K10<ca hash>::<id>.<secret>``: pins the cluster CA before credentials are sent."""
    if not _HEX64.match(ca_sha256):
        raise ValueError("ca_sha256 must be 64 lowercase hex characters")
    if not _TOKEN_ID.match(token_id) or not _TOKEN_SECRET.match(token_secret):
        raise ValueError("bootstrap token must be [a-z0-9]{6}.[a-z0-9]{16}")
    return f"K10{ca_sha256}::{token_id}.{token_secret}"


def node_labels(spec: JoinSpec) -> dict[str, str]:
    labels = {
        naming.CLUSTER: spec.cluster_id,
        naming.NODE_POOL: spec.pool_id,
        naming.PROVIDER: spec.provider,
        naming.ATTEMPT: spec.attempt_id,
    }
    if spec.accelerator:
        labels[naming.ACCELERATOR] = spec.accelerator
    return labels


def node_taint(pool_id: str) -> str:
    return f"{naming.NODE_POOL}={pool_id}:NoSchedule"


def agent_config(spec: JoinSpec, token: str) -> dict[str, Any]:
    """Contents of /etc/rancher/k3s/config.yaml (flag names without the leading ``--``)."""
    return {
        "server": spec.server_url,
        "token": token,
        "node-name": spec.node_name,
        "with-node-id": False,
        "node-label": [f"{k}={v}" for k, v in node_labels(spec).items()],
        "node-taint": [node_taint(spec.pool_id)],
    }


_EXTERNAL_IP_FETCH: dict[str, str] = {
    # IMDSv2: a session token first; the instance requires it (httpTokens=required).
    "aws": (
        "t=$(curl -fsS -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' "
        "http://169.254.169.254/latest/api/token) && "
        'curl -fsS -H "X-aws-ec2-metadata-token: $t" '
        "http://169.254.169.254/latest/meta-data/public-ipv4"
    ),
    "gcp": (
        "curl -fsS -H 'Metadata-Flavor: Google' "
        "http://169.254.169.254/computeMetadata/v1/instance/network-interfaces/0/"
        "access-configs/0/external-ip"
    ),
    "azure": (
        "curl -fsS -H 'Metadata: true' "
        "'http://169.254.169.254/metadata/instance/network/interface/0/ipv4/ipAddress/0/"
        "publicIpAddress?api-version=2021-02-01&format=text'"
    ),
}


def _arch_guard() -> str:
    return (
        "#!/bin/sh\n"
        "# Only x86_64 VM types are supported: the pinned agent binary is amd64.\n"
        'arch="$(uname -m)"\n'
        'if [ "$arch" != "x86_64" ]; then\n'
        '  echo "anycloud: refusing to start K3s agent on $arch (x86_64 only)" >&2\n'
        "  exit 1\n"
        "fi\n"
    )


def _install_k3s(pin: K3sPin) -> str:
    url = shlex.quote(pin.url)
    return (
        "#!/bin/sh\n"
        "set -eu\n"
        "# The checksum is pinned here, never fetched beside the binary.\n"
        f"expected={pin.sha256_amd64}\n"
        f'if [ -x {K3S_BIN} ] && echo "$expected  {K3S_BIN}" | sha256sum -c - >/dev/null 2>&1;'
        " then exit 0; fi\n"
        "tmp=$(mktemp)\n"
        f'curl -fsSL --retry 5 --retry-connrefused -o "$tmp" {url}\n'
        'if ! echo "$expected  $tmp" | sha256sum -c -; then\n'
        '  echo "anycloud: K3s binary checksum mismatch" >&2; rm -f "$tmp"; exit 1\n'
        "fi\n"
        f'install -m 0755 "$tmp" {K3S_BIN}\n'
        'rm -f "$tmp"\n'
    )


def _external_ip(provider: Provider) -> str:
    return (
        "#!/bin/sh\n"
        "set -eu\n"
        "# Register the public address as the Node external IP (read from the metadata\n"
        "# service on every start, so a changed address is picked up).\n"
        "ip=''\n"
        "for _ in $(seq 1 60); do\n"
        f"  ip=$({_EXTERNAL_IP_FETCH[provider]} 2>/dev/null || true)\n"
        '  [ -n "$ip" ] && break\n'
        "  sleep 2\n"
        "done\n"
        '[ -n "$ip" ] || { echo "anycloud: no public IP from metadata service" >&2; exit 1; }\n'
        f"mkdir -p {CONFIG_DROPIN_DIR}\n"
        f'printf \'node-external-ip: "%s"\\n\' "$ip" > {CONFIG_DROPIN_DIR}/50-external-ip.yaml\n'
    )


def _prestart() -> str:
    certs = " ".join(CACHED_KUBELET_CERTS)
    return (
        "#!/bin/sh\n"
        "# Until the Node is known to exist, drop cached kubelet certificates so they are\n"
        "# reissued from token + retained node password. Never touch the node password.\n"
        f"if [ ! -e {REGISTERED_MARKER} ]; then rm -f {certs}; fi\n"
    )


def _mark_registered(node_name: str) -> str:
    return (
        "#!/bin/sh\n"
        "# Record once that our Node exists, so later restarts keep the kubelet client\n"
        "# certificate (the agent's identity after the bootstrap token is deleted).\n"
        f"until {K3S_BIN} kubectl --kubeconfig {AGENT_DIR}/kubelet.kubeconfig "
        f"get node {node_name} >/dev/null 2>&1; do sleep 5; done\n"
        f"mkdir -p {REGISTERED_MARKER.rsplit('/', 1)[0]}\n"
        f"touch {REGISTERED_MARKER}\n"
    )


def _agent_unit() -> str:
    return (
        "[Unit]\n"
        "Description=K3s agent (anycloud node pool)\n"
        "Wants=network-online.target\n"
        "After=network-online.target\n"
        "\n"
        "[Service]\n"
        "Type=notify\n"
        f"ExecStartPre={LIB}/arch-guard.sh\n"
        f"ExecStartPre={LIB}/external-ip.sh\n"
        f"ExecStartPre={LIB}/prestart.sh\n"
        f"ExecStart={K3S_BIN} agent --config {CONFIG_PATH}\n"
        "KillMode=process\n"
        "Delegate=yes\n"
        "LimitNOFILE=1048576\n"
        "LimitNPROC=infinity\n"
        "LimitCORE=infinity\n"
        "TasksMax=infinity\n"
        "TimeoutStartSec=0\n"
        "Restart=always\n"
        "RestartSec=5s\n"
        "\n"
        "[Install]\n"
        "WantedBy=multi-user.target\n"
    )


def _marker_unit() -> str:
    return (
        "[Unit]\n"
        "Description=Record that this VM's Node registered\n"
        "After=k3s-agent.service\n"
        f"ConditionPathExists=!{REGISTERED_MARKER}\n"
        "\n"
        "[Service]\n"
        "Type=simple\n"
        f"ExecStart={LIB}/mark-registered.sh\n"
        "Restart=on-failure\n"
        "\n"
        "[Install]\n"
        "WantedBy=multi-user.target\n"
    )


def _join() -> str:
    return (
        "#!/bin/sh\n"
        "set -eu\n"
        f"{LIB}/arch-guard.sh\n"
        f"{LIB}/install-k3s.sh\n"
        "# No inbound access is ever needed: nothing should listen for SSH.\n"
        "systemctl disable --now ssh.service ssh.socket 2>/dev/null || true\n"
        "systemctl daemon-reload\n"
        "systemctl enable --now k3s-agent.service anycloud-registered.service\n"
    )


def _file(path: str, content: str, permissions: str) -> dict[str, Any]:
    return {"path": path, "content": content, "permissions": permissions, "owner": "root:root"}


def cloud_config(spec: JoinSpec, token: str) -> dict[str, Any]:
    """The cloud-init document as data."""
    config_yaml = _dump(agent_config(spec, token))
    return {
        "ssh_pwauth": False,
        "disable_root": True,
        "write_files": [
            _file(f"{LIB}/arch-guard.sh", _arch_guard(), "0755"),
            _file(f"{LIB}/install-k3s.sh", _install_k3s(spec.k3s), "0755"),
            _file(f"{LIB}/external-ip.sh", _external_ip(spec.provider), "0755"),
            _file(f"{LIB}/prestart.sh", _prestart(), "0755"),
            _file(f"{LIB}/mark-registered.sh", _mark_registered(spec.node_name), "0755"),
            _file(f"{LIB}/join.sh", _join(), "0755"),
            _file(CONFIG_PATH, config_yaml, "0600"),
            _file("/etc/systemd/system/k3s-agent.service", _agent_unit(), "0644"),
            _file("/etc/systemd/system/anycloud-registered.service", _marker_unit(), "0644"),
        ],
        "runcmd": [[f"{LIB}/join.sh"]],
    }


def render(spec: JoinSpec, token: str) -> str:
    """``#cloud-config`` user data for one VM."""
    return "#cloud-config\n" + _dump(cloud_config(spec, token))
