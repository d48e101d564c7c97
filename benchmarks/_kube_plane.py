"""What the benchmarks on the local control plane share: starting it with other work done
meanwhile, plain API calls for their setup, one big kwok Node for their pods, and the
runtime templates without the data claim (no storage provisioner runs here)."""

from __future__ import annotations

import json
import shutil
import ssl
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any, TypeVar

REPO = Path(__file__).resolve().parent.parent
T = TypeVar("T")


def import_modules(*names: str) -> None:
    """Import ``names`` (a ``meanwhile`` for ``start``: seconds of imports done while the
    control plane starts; what is measured later runs as before)."""
    import importlib

    for name in names:
        importlib.import_module(name)


def start(root: Path, meanwhile: Callable[[], T],
          early: Callable[[Any], None] | None = None) -> tuple[Any, T]:
    """``control_plane.start(root)``, and what ``meanwhile()`` returns, run in a thread at
    the same time: the components' start leaves the two cores half idle for seconds, and
    the Python work a benchmark needs before it measures (importing the Kubernetes client
    or kopf, migrating a ledger: seconds too) would otherwise only follow it. ``early``
    (e.g. creating a CRD) is given the API server (``Admin``, for ``api``) as soon as it
    answers, while the controllers still start; or the plane, after, if the start ended
    first. Nothing timed runs then: what a benchmark measures starts after all are done."""
    from automation.devcluster import control_plane

    out: list[tuple[bool, Any]] = []
    errors: list[BaseException] = []
    started = threading.Event()
    done_early: list[bool] = []

    def run() -> None:
        try:
            out.append((True, meanwhile()))
        except BaseException as exc:  # raised in the caller's thread below
            out.append((False, exc))

    def run_early() -> None:
        assert early is not None
        try:
            with tempfile.TemporaryDirectory() as tmp:
                admin = _answering(root, Path(tmp), started)
                if admin is not None:
                    early(admin)
                    done_early.append(True)
        except BaseException as exc:  # raised in the caller's thread below
            errors.append(exc)

    threads = [threading.Thread(target=run, name="meanwhile", daemon=True)]
    if early is not None:
        threads.append(threading.Thread(target=run_early, name="early", daemon=True))
    for thread in threads:
        thread.start()
    plane = None
    try:
        plane = control_plane.start(root)
    finally:
        started.set()
        for thread in threads:
            thread.join()
    try:
        ok, value = out[0]
        if not ok:
            raise value
        if errors:
            raise errors[0]
        if early is not None and not done_early:
            early(plane)
    except BaseException:
        plane.stop()
        raise
    return plane, value


@dataclass
class Admin:
    """What ``api`` needs of a control plane: its address and the admin's credentials
    (``pki.ca_cert``, ``pki.admin_cert``, ``pki.admin_key``), as a ``ControlPlane`` has."""

    server: str
    pki: Any


def _answering(root: Path, into: Path, started: threading.Event) -> Admin | None:
    """The API server of the control plane starting under ``root`` once it answers
    /readyz, from the admin kubeconfig ``control_plane.start`` writes there first (its
    credentials written to files under ``into``); None if the start ended first."""
    import base64

    import yaml

    kubeconfig = root / "admin.kubeconfig"
    while True:
        if started.is_set():
            return None
        try:
            doc = yaml.safe_load(kubeconfig.read_text())
            cluster, user = doc["clusters"][0]["cluster"], doc["users"][0]["user"]
            files = {"ca_cert": cluster["certificate-authority-data"],
                     "admin_cert": user["client-certificate-data"],
                     "admin_key": user["client-key-data"]}
            server = cluster["server"]
            break
        except (OSError, yaml.YAMLError, TypeError, KeyError, IndexError):
            started.wait(0.05)  # not written yet
    for name, data in files.items():
        (into / name).write_bytes(base64.b64decode(data))
    admin = Admin(server, SimpleNamespace(**{name: into / name for name in files}))
    while not started.is_set():
        try:
            if request(admin, "GET", "/readyz") == b"ok":
                return admin
        except OSError:  # not listening yet, or not ready (an HTTPError)
            pass
        started.wait(0.1)
    return None


def request(plane: Any, method: str, path: str, body: Any = None,
            content_type: str = "application/json") -> bytes:
    """One request to the API server as the admin, the answer's body."""
    ctx = ssl.create_default_context(cafile=str(plane.pki.ca_cert))
    ctx.load_cert_chain(plane.pki.admin_cert, plane.pki.admin_key)
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(plane.server + path, data=data, method=method,
                                 headers={"Content-Type": content_type})
    with urllib.request.urlopen(req, context=ctx, timeout=30) as resp:
        return bytes(resp.read())


def api(plane: Any, method: str, path: str, body: Any = None,
        content_type: str = "application/json") -> Any:
    """One request to the API server as the admin (a ``ControlPlane`` or an ``Admin``), the
    parsed answer: what a benchmark's setup would ask kubectl for, without a kubectl
    process each time."""
    return json.loads(request(plane, method, path, body, content_type))


def apply(plane: Any, collection: str, obj: dict[str, Any]) -> Any:
    """Server-side apply of ``obj`` (created or updated) into ``collection``, e.g.
    ``/apis/anycloud.sh/v1/namespaces/bench/agentpools``. A PATCH, so a custom resource
    is created at once even right after its CRD (a POST then waits 2 s: the API server's
    pause for HA consistency, kubernetes/kubernetes#99199)."""
    return api(plane, "PATCH", f"{collection}/{obj['metadata']['name']}"
               "?fieldManager=bench&force=true", obj,
               content_type="application/apply-patch+yaml")


def creates_served(plane: Any, crd: str) -> None:
    """Wait until a POST of the CRD's resources is served at once: within 2 s of the
    CRD's Established condition (its time kept to the second) the API server holds every
    create 2 s (kubernetes/kubernetes#99199). Returns at once when that is past."""
    found = api(plane, "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}")
    when = next(c["lastTransitionTime"] for c in found["status"]["conditions"]
                if c["type"] == "Established")
    served = datetime.strptime(when, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp() + 2
    time.sleep(max(0.0, served + 0.05 - time.time()))


def delete(plane: Any, path: str, timeout: float = 120.0) -> None:
    """Delete the object at ``path`` and wait until it is gone (its finalizers done), as
    ``kubectl delete`` does, polling every 20 ms."""
    api(plane, "DELETE", path)
    deadline = time.monotonic() + timeout
    while True:
        try:
            api(plane, "GET", path)
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return
            raise
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} still there {timeout:.0f} s after its deletion")
        time.sleep(0.02)


def namespace(plane: Any, name: str) -> None:
    api(plane, "POST", "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


def crd(plane: Any, path: Path) -> None:
    """Create the CustomResourceDefinition in ``path`` and wait until its resources can be
    listed: Established, and past the "storage is (re)initializing" (429) that follows,
    which a watcher listing then (kopf) waits out with a retry a second later."""
    import yaml

    doc = yaml.safe_load(path.read_text())
    api(plane, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", doc)
    group, plural = doc["spec"]["group"], doc["spec"]["names"]["plural"]
    version = next(v["name"] for v in doc["spec"]["versions"] if v.get("served", True))
    deadline = time.monotonic() + 60
    while True:
        try:
            api(plane, "GET", f"/apis/{group}/{version}/{plural}?limit=1")
            return
        except urllib.error.HTTPError as exc:  # 404 until Established, then 429 a moment
            if exc.code not in (404, 429, 503) or time.monotonic() > deadline:
                raise
        time.sleep(0.02)


def big_node(plane: Any, name: str = "bench-node") -> None:
    from automation.devcluster.control_plane import KWOK_ANNOTATION

    api(plane, "POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": name, "annotations": {KWOK_ANNOTATION: "fake"}}})
    res = {"cpu": "1000", "memory": "4Ti", "pods": "1000"}
    api(plane, "PATCH", f"/api/v1/nodes/{name}/status",
        {"status": {"capacity": res, "allocatable": res}},
        content_type="application/merge-patch+json")


def templates_without_claim(root: Path) -> None:
    """k8s/runtime-templates copied to ``root``/templates, the Deployment's volumes cut."""
    shutil.copytree(REPO / "k8s/runtime-templates", root / "templates")
    deployment = root / "templates/deployment.yaml"
    text = deployment.read_text()
    deployment.write_text(text[:text.index("          volumeMounts:")])


@contextmanager
def plane_with_templates(meanwhile: Callable[[Path], T]
                         ) -> Iterator[tuple[Path, Any, T]]:
    """A temporary directory holding the claim-less templates, a local control plane with
    one big Node started under it (stopped on the way out), and what ``meanwhile(root)``
    returned, run while the plane started (see ``start``)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        templates_without_claim(root)
        plane, value = start(root / "cp", lambda: meanwhile(root))
        try:
            big_node(plane)
            yield root, plane, value
        finally:
            plane.stop()
