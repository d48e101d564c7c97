"""Start and stop a real Kubernetes control plane on loopback.

etcd, kube-apiserver (TLS, client certificates, RBAC, bootstrap-token authentication),
kube-controller-manager (garbage collection, namespace finalisation, service accounts, the
bootstrap token cleaner), kube-scheduler, and kwok, which plays the kubelet of every Node
annotated ``kwok.x-k8s.io/node=fake``: such Nodes go Ready and their Pods run.

Every process is started in its own session with ``PR_SET_PDEATHSIG`` so it dies with the
process that started it, even on SIGKILL; ``stop()`` terminates them in reverse order.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import json
import signal
import socket
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from automation.devcluster import binaries
from automation.devcluster.pki import Pki, pki_files, write_pki
from automation.errors import AnycloudError

COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
SERVICE_RANGE = "10.96.0.0/16"
SERVICE_IP = "10.96.0.1"
ISSUER = "https://kubernetes.default.svc.cluster.local"
PR_SET_PDEATHSIG = 1
HELMCHART_CRD = Path(__file__).with_name("helmchart-crd.yaml")


class ControlPlaneFailed(AnycloudError):
    default_code = "CONTROL_PLANE_FAILED"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:
    """Runs in the child before exec: SIGKILL it when the parent goes away."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def kubeconfig_document(server: str, ca: Path, cert: Path | None = None,
                        key: Path | None = None, token: str | None = None,
                        name: str = "local") -> dict[str, Any]:
    """A kubeconfig with everything inline (it survives the files it was made from)."""
    user: dict[str, Any] = {}
    if cert is not None and key is not None:
        user = {"client-certificate-data": base64.b64encode(cert.read_bytes()).decode(),
                "client-key-data": base64.b64encode(key.read_bytes()).decode()}
    if token is not None:
        user = {"token": token}
    return {
        "apiVersion": "v1", "kind": "Config", "current-context": name,
        "clusters": [{"name": name, "cluster": {
            "server": server,
            "certificate-authority-data": base64.b64encode(ca.read_bytes()).decode()}}],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
    }


@dataclass
class ControlPlane:
    root: Path
    server: str
    kubeconfig: Path
    pki: Pki
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    # Seconds from the start of ``start()`` until each component answered.
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def ca_pem(self) -> bytes:
        return self.pki.ca_cert.read_bytes()

    def log(self, component: str) -> Path:
        return self.root / "logs" / f"{component}.log"

    def kubectl(self, *args: str, input: str | None = None,
                kubeconfig: Path | None = None, check: bool = True
                ) -> subprocess.CompletedProcess[str]:
        cmd = [str(binaries.find("kubectl")), f"--kubeconfig={kubeconfig or self.kubeconfig}",
               *args]
        return subprocess.run(cmd, input=input, capture_output=True, text=True, check=check,
                              timeout=120)

    def get(self, path: str, *, cert: tuple[Path, Path] | None = None) -> Any:
        """GET a path of the API server as the admin; the parsed JSON."""
        ctx = ssl.create_default_context(cafile=str(self.pki.ca_cert))
        ctx.load_cert_chain(*(cert or (self.pki.admin_cert, self.pki.admin_key)))
        with urllib.request.urlopen(self.server + path, context=ctx, timeout=10) as resp:
            body = resp.read()
        try:
            return json.loads(body)
        except ValueError:
            return body.decode()

    def apply(self, *objects: dict[str, Any]) -> None:
        """``kubectl apply`` of objects (server-side, so a test can re-apply its own)."""
        stream = "\n---\n".join(json.dumps(o) for o in objects)
        self.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=stream)

    def patch_status(self, resource: str, name: str, status: dict[str, Any],
                     namespace: str | None = None) -> None:
        """What a kubelet or controller would write: a merge patch of ``status``."""
        where = ["-n", namespace] if namespace else []
        self.kubectl("patch", resource, name, *where, "--subresource=status", "--type=merge",
                     "-p", json.dumps({"status": status}))

    def token_kubeconfig(self, path: Path, service_account: str, namespace: str) -> Path:
        """A kubeconfig that authenticates as a ServiceAccount (created if absent) with a
        short-lived token from the TokenRequest API: for RBAC tests."""
        self.kubectl("create", "namespace", namespace, check=False)
        self.kubectl("create", "serviceaccount", service_account, "-n", namespace, check=False)
        token = self.kubectl("create", "token", service_account, "-n", namespace,
                             "--duration=1h").stdout.strip()
        path.write_text(yaml.safe_dump(kubeconfig_document(self.server, self.pki.ca_cert,
                                                           token=token)))
        path.chmod(0o600)
        return path

    def alive(self) -> dict[str, bool]:
        return {name: proc.poll() is None for name, proc in self.processes.items()}

    def exited(self) -> dict[str, str]:
        """Each component that is no longer running, with the end of its log."""
        return {name: _tail(self.log(name)) for name, up in self.alive().items() if not up}

    def stop(self) -> None:
        """Terminate the components newest first, each before the next: the API server
        shuts down cleanly while etcd still answers (all at once, it hangs on etcd)."""
        for name in reversed(list(self.processes)):
            proc = self.processes[name]
            if proc.poll() is None:
                proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        self.processes.clear()


def _wait(what: str, ready: Callable[[], bool], plane: ControlPlane, component: str,
          timeout: float) -> None:
    deadline = time.monotonic() + timeout
    proc = plane.processes.get(component)
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise ControlPlaneFailed(
                f"{component} exited with {proc.returncode} before {what}; its log:\n"
                + _tail(plane.log(component)))
        with contextlib.suppress(Exception):
            if ready():
                return
        time.sleep(0.1)
    raise ControlPlaneFailed(f"{component}: no {what} after {timeout:.0f} s; its log:\n"
                             + _tail(plane.log(component)))


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _start(plane: ControlPlane, component: str, args: list[str]) -> None:
    log = plane.log(component).open("ab")
    plane.processes[component] = subprocess.Popen(
        [str(binaries.find(component)), *args], stdout=log, stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL, cwd=plane.root, start_new_session=True,
        preexec_fn=_die_with_parent)
    log.close()


def _kwok_config(root: Path) -> Path:
    """kwok's own stage files (built beside it), as one config document stream."""
    kwok = binaries.find("kwok")
    stages = sorted(binaries.share_dir(kwok).glob("*.yaml"))
    if not stages:
        raise ControlPlaneFailed(
            f"kwok's stage files are missing from {binaries.share_dir(kwok)}: build kwok with "
            "`python3 tools/build.py --only kwok`, which copies them there")
    path = root / "kwok.yaml"
    path.write_text("\n---\n".join(s.read_text() for s in stages))
    return path


def start(root: Path, components: tuple[str, ...] = COMPONENTS,
          timeout: float = 90.0, *, keep: bool = False) -> ControlPlane:
    """Start the control plane under ``root`` (a fresh directory); stops what it started
    if any component fails. ``keep``: start again what an earlier ``start(keep=True)`` left
    in ``root`` -- its PKI, etcd's data and its ports, so that its objects and its
    kubeconfig are the same as before (a fresh port only if another process took it)."""
    for name in components:
        if name not in COMPONENTS:
            raise ValueError(f"unknown component {name!r}; choose from {COMPONENTS}")
    for name in ("etcd", "kube-apiserver", *components):
        binaries.find(name)  # fail before starting anything
    root.mkdir(parents=True, exist_ok=True)
    (root / "logs").mkdir(exist_ok=True)
    kept = pki_files(root / "pki")
    pki = kept if keep and all(p.exists() for p in vars(kept).values()) else write_pki(
        root / "pki", SERVICE_IP)
    ports = _ports(root / "ports.json" if keep else None)
    server = f"https://127.0.0.1:{ports['api']}"
    kubeconfig = root / "admin.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(kubeconfig_document(
        server, pki.ca_cert, pki.admin_cert, pki.admin_key)))
    kubeconfig.chmod(0o600)
    plane = ControlPlane(root=root, server=server, kubeconfig=kubeconfig, pki=pki)
    try:
        _start_all(plane, ports, components, timeout)
    except BaseException:
        plane.stop()
        raise
    return plane


def _ports(saved: Path | None) -> dict[str, int]:
    """The API server's and etcd's ports: those ``saved`` names while still free (etcd
    keeps its peer address in its data), fresh ones otherwise (and saved)."""
    known: dict[str, int] = {}
    if saved is not None and saved.exists():
        known = {k: int(v) for k, v in json.loads(saved.read_text()).items()}
    ports = {name: known[name] if name in known and _free(known[name]) else free_port()
             for name in ("api", "etcd_client", "etcd_peer")}
    if saved is not None:
        saved.write_text(json.dumps(ports))
    return ports


def _free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _start_all(plane: ControlPlane, ports: dict[str, int], components: tuple[str, ...],
               timeout: float) -> None:
    root, pki = plane.root, plane.pki
    began = time.monotonic()  # every timing counts from here: when the component answered
    api_port, etcd_client, etcd_peer = ports["api"], ports["etcd_client"], ports["etcd_peer"]
    etcd_url = f"http://127.0.0.1:{etcd_client}"
    _start(plane, "etcd", [
        "--name=local", f"--data-dir={root / 'etcd'}",
        f"--listen-client-urls={etcd_url}", f"--advertise-client-urls={etcd_url}",
        f"--listen-peer-urls=http://127.0.0.1:{etcd_peer}",
        f"--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}",
        f"--initial-cluster=local=http://127.0.0.1:{etcd_peer}",
        "--unsafe-no-fsync", "--log-level=warn",
    ])

    def etcd_healthy() -> bool:
        with urllib.request.urlopen(f"{etcd_url}/health", timeout=2) as resp:
            return bool(json.loads(resp.read()).get("health") == "true")

    _wait("healthy answer", etcd_healthy, plane, "etcd", timeout)
    plane.timings["etcd"] = time.monotonic() - began

    _start(plane, "kube-apiserver", [
        f"--etcd-servers={etcd_url}",
        "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
        f"--secure-port={api_port}",
        f"--tls-cert-file={pki.serving_cert}", f"--tls-private-key-file={pki.serving_key}",
        f"--client-ca-file={pki.ca_cert}", f"--cert-dir={root / 'apiserver-certs'}",
        f"--service-account-issuer={ISSUER}",
        f"--service-account-key-file={pki.sa_public}",
        f"--service-account-signing-key-file={pki.sa_private}",
        f"--service-cluster-ip-range={SERVICE_RANGE}",
        "--authorization-mode=RBAC", "--enable-bootstrap-token-auth=true",
        "--allow-privileged=true", "--profiling=false",
    ])
    _wait("/readyz", lambda: plane.get("/readyz") == "ok", plane, "kube-apiserver", timeout)
    plane.timings["kube-apiserver"] = time.monotonic() - began
    # What K3s serves beside Kubernetes' own APIs and anycloud writes to: HelmChart.
    plane.kubectl("apply", "-f", str(HELMCHART_CRD))
    plane.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                  "crd/helmcharts.helm.cattle.io")

    kubeconfig = str(plane.kubeconfig)
    delegated = [f"--kubeconfig={kubeconfig}", f"--authentication-kubeconfig={kubeconfig}",
                 f"--authorization-kubeconfig={kubeconfig}", "--bind-address=127.0.0.1"]
    # One instance of each, nobody to hand over to: a controller that cannot renew its lease
    # within the renew deadline exits ("leaderelection lost") and nothing restarts it here.
    # The defaults (lease 15 s, renew 10 s) are lost on a loaded 2-core machine; keep the
    # lease (its holder is how start-up knows the controllers run) but let a renewal wait.
    leader = ["--leader-elect-lease-duration=600s", "--leader-elect-renew-deadline=590s",
              "--leader-elect-retry-period=2s"]
    leases: dict[str, str] = {}
    # A plane started again (``keep``) still lists the leases of the controllers that died
    # with the last one, held for 600 s: the new ones would wait that long to run, and
    # start-up would take the dead holder for theirs.
    stale = [name for name in ("kube-controller-manager", "kube-scheduler") if name in components]
    if stale:
        plane.kubectl("delete", "lease", "-n", "kube-system", *stale, "--ignore-not-found")
    if "kube-controller-manager" in components:
        _start(plane, "kube-controller-manager", [
            *delegated, *leader, f"--secure-port={free_port()}",
            # The token cleaner and signer are off by default; K3s turns them on.
            "--controllers=*,tokencleaner,bootstrapsigner",
            f"--service-account-private-key-file={pki.sa_private}",
            f"--root-ca-file={pki.ca_cert}",
            f"--cluster-signing-cert-file={pki.ca_cert}",
            f"--cluster-signing-key-file={pki.ca_key}",
        ])
        leases["kube-controller-manager"] = "kube-controller-manager"
    if "kube-scheduler" in components:
        _start(plane, "kube-scheduler", [*delegated, *leader, f"--secure-port={free_port()}"])
        leases["kube-scheduler"] = "kube-scheduler"
    kwok_port = free_port()
    if "kwok" in components:
        _start(plane, "kwok", [
            f"--kubeconfig={kubeconfig}", f"--config={_kwok_config(root)}",
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={KWOK_ANNOTATION}=fake",
            "--node-lease-duration-seconds=40", f"--server-address=127.0.0.1:{kwok_port}",
        ])
    # A component that holds its leader lease is running its controllers.
    for component, lease in leases.items():
        _wait("leader lease", _lease_held(plane, lease), plane, component, timeout)
        plane.timings[component] = time.monotonic() - began
    if "kwok" in components:
        def kwok_healthy() -> bool:
            url = f"http://127.0.0.1:{kwok_port}/healthz"
            with urllib.request.urlopen(url, timeout=2) as resp:
                return resp.status == 200

        _wait("/healthz", kwok_healthy, plane, "kwok", timeout)
        plane.timings["kwok"] = time.monotonic() - began


def _lease_held(plane: ControlPlane, name: str) -> Callable[[], bool]:
    def held() -> bool:
        lease = plane.get(f"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{name}")
        return bool((lease.get("spec") or {}).get("holderIdentity"))

    return held


@contextlib.contextmanager
def running(root: Path, components: tuple[str, ...] = COMPONENTS) -> Iterator[ControlPlane]:
    plane = start(root, components)
    try:
        yield plane
    finally:
        plane.stop()
