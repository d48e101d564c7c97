"""``anycloud serve --simulate --api-listen`` over HTTPS on loopback: the node-pool story told
to a real server (bootstrap an admin token, the admin makes a member's, the member creates a
pool, watches the control loop bring it to ready and deletes it), as a team would run it."""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from automation.app import App
from automation.clock import SystemClock
from automation.ledger import open_ledger
from automation.services import credentials
from automation.simulators.world import register_simulated_cluster
from tests.automation.agentpools.session_dirs import reachable_dir, write_config

ANYCLOUD = str(Path(sys.executable).with_name("anycloud"))


def self_signed(tmp: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=1))
            .not_valid_after(now + dt.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = tmp / "tls.crt", tmp / "tls.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def listening(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """The URL ``serve`` says its API listens on, and the line that says it."""
    assert proc.stderr is not None
    for line in iter(proc.stderr.readline, ""):
        if "API listening on " in line:
            return line.split("listening on ")[1].split()[0], line
    raise AssertionError("the API never said where it listens")


@pytest.mark.slow
@pytest.mark.parametrize("processes", ["one process", "api and control loop apart"])
def test_the_node_pool_story_over_https(tmp_path: Path, processes: str) -> None:
    home = tmp_path / "home"
    env = {**os.environ, "ANYCLOUD_HOME": str(home)}
    env.pop("ANYCLOUD_DATABASE_URL", None)
    ledger = open_ledger(f"sqlite:///{home / 'anycloud.db'}")
    app = App(ledger=ledger, clock=SystemClock(), home=home)
    register_simulated_cluster(app, home)
    credentials.new_credential(app, credentials.NewCredential("team-aws", "aws",
                                                              {"profile": "team"}))
    ledger.dispose()
    cert, key = self_signed(tmp_path)
    loop = ["--simulate", "--interval", "0.2", "--speed", "300"]
    serving = ["--api-listen", "127.0.0.1:0", "--tls-cert", str(cert), "--tls-key", str(key)]
    apart = processes != "one process"
    # Apart: the API in a process of its own, the control loop in another, one ledger.
    proc = subprocess.Popen([ANYCLOUD, "serve", *(["--no-control-loop"] if apart else loop),
                             *serving], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    loop_proc = subprocess.Popen([ANYCLOUD, "serve", *loop], env=env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL) if apart else None
    try:
        url, line = listening(proc)
        assert url.startswith("https://127.0.0.1:") and "(TLS)" in line, line
        trust = ssl.create_default_context(cafile=str(cert))
        root = subprocess.run([ANYCLOUD, "token", "create", "root", "--role", "admin",
                               "--bootstrap"], env=env, capture_output=True, text=True,
                              timeout=60)
        assert root.returncode == 0, root.stderr
        admin = httpx2.Client(base_url=url, verify=trust, headers={
            "Authorization": f"Bearer {root.stdout.strip()}"})
        assert httpx2.get(f"{url}/me", verify=trust).status_code == 401
        assert admin.get("/me").json()["role"] == "admin"
        made = admin.post("/tokens", json={"name": "alice", "role": "member"})
        assert made.status_code == 201, made.text
        member = httpx2.Client(base_url=url, verify=trust, headers={
            "Authorization": f"Bearer {made.json()['token']}"})
        assert member.post("/tokens", json={"name": "x", "role": "admin"}).status_code == 403
        pool = member.post("/node-pools", json={
            "name": "cpu", "credentials": "team-aws", "region": "us-east-1",
            "vmType": "m7i.large", "minVms": 2, "maxVms": 2})
        assert pool.status_code == 201, pool.text
        deadline = time.monotonic() + 120
        state = None
        while time.monotonic() < deadline and state != "ready":
            time.sleep(0.5)
            state = member.get("/node-pools/cpu").json()["state"]
        assert state == "ready"
        status = member.get("/node-pools/cpu").json()
        assert status["counts"]["ready"] == 2 and status["engine"] == "mock"
        assert member.delete("/node-pools/cpu").json()["state"] == "deleting"
        while time.monotonic() < deadline and state != "deleted":
            time.sleep(0.5)
            state = member.get(f"/node-pools/{pool.json()['id']}").json()["state"]
        assert state == "deleted"
        admin.close()
        member.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        if loop_proc is not None:
            loop_proc.send_signal(signal.SIGTERM)
            assert loop_proc.wait(timeout=60) == 0
    assert proc.returncode == 0, err[-2000:]


def test_tls_needs_both_files_and_the_api(tmp_path: Path) -> None:
    cert, _ = self_signed(tmp_path)
    env = {**os.environ, "ANYCLOUD_HOME": str(tmp_path / "home")}
    env.pop("ANYCLOUD_DATABASE_URL", None)
    for args, says in ((["--api-listen", "127.0.0.1:0", "--tls-cert", str(cert)],
                        "--tls-key (none): give both --tls-cert and --tls-key"),
                       (["--tls-cert", str(cert), "--tls-key", str(cert)],
                        "is for --api-listen"),
                       (["--api-listen", "nowhere"], "--api-listen 'nowhere': must be "
                        "HOST:PORT"),
                       (["--no-control-loop"], "needs something to serve")):
        done = subprocess.run([ANYCLOUD, "serve", "--simulate", *args], env=env,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and says in done.stderr, done.stderr


def _cli(env: dict[str, str], *args: str, stdin: str | None = None) -> str:
    done = subprocess.run([ANYCLOUD, *args], env=env, input=stdin, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


def _laptop(tmp_path: Path, url: str, token: str) -> dict[str, str]:
    """The environment of a laptop with no ledger, switched to ``url`` and logged in."""
    laptop = {k: v for k, v in os.environ.items() if not k.startswith("ANYCLOUD_")}
    laptop |= {"ANYCLOUD_HOME": str(tmp_path / "laptop"),
               "ANYCLOUD_CLI_CONFIG": str(tmp_path / "laptop" / "cli.json")}
    _cli(laptop, "api", "use", url)
    _cli(laptop, "login", stdin=token + "\n")
    return laptop


@pytest.mark.slow
@pytest.mark.usefixtures("memory_runtime_dir")  # where the server opens the kubeconfig
def test_the_readme_story_from_a_laptop_in_remote_mode(tmp_path: Path) -> None:
    """The README's node-pool story as a team member runs it from a laptop: every step a
    real `anycloud` process in remote mode against `serve --api-listen --simulate`. The
    laptop has no ledger; the kubeconfig and the AWS key travel to the server, sealed there
    under the key the operator made with `secrets-key new`."""
    import json

    from tests.automation.api.test_api_clusters import TOKEN as CLUSTER_TOKEN
    from tests.automation.api.test_api_clusters import kubeconfig as self_contained_kubeconfig

    server = {**os.environ, "ANYCLOUD_HOME": str(tmp_path / "server"),
              "ANYCLOUD_SECRETS_KEY_FILE": str(tmp_path / "secrets.key")}
    server.pop("ANYCLOUD_DATABASE_URL", None)
    _cli(server, "secrets-key", "new", str(tmp_path / "secrets.key"))
    root = _cli(server, "token", "create", "root", "--role", "admin", "--bootstrap").strip()
    proc = subprocess.Popen([ANYCLOUD, "serve", "--simulate", "--interval", "0.2", "--speed",
                             "300", "--api-listen", "127.0.0.1:0"], env=server,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        url, _ = listening(proc)
        laptop = _laptop(tmp_path, url, root)
        assert json.loads(_cli(laptop, "api", "status", "--json"))["role"] == "admin"
        kubeconfig = tmp_path / "prod.yaml"
        kubeconfig.write_text(self_contained_kubeconfig())  # certificates and token inline
        cluster = json.loads(_cli(laptop, "cluster", "register", "prod", "--kubeconfig",
                                  str(kubeconfig), "--offline", "--kubernetes-version",
                                  "v1.36.2+k3s1", "--json"))
        assert cluster["state"] == "ready" and cluster["sealedKubeconfig"]["fingerprint"]
        keys = laptop | {"AWS_SECRET_ACCESS_KEY": "laptopSecretAccessKey0123456789abcdefGHI"}
        made = json.loads(_cli(keys, "credentials", "new", "team-aws", "--provider", "aws",
                               "--access-key-id", "AKIAEXAMPLEEXAMPLE12", "--json"))
        assert made["secret"]["fingerprint"] and "laptopSecret" not in json.dumps(made)
        pool = json.loads(_cli(laptop, "node-pool", "create", "cpu", "--credentials",
                               "team-aws", "--region", "us-east-1", "--vm-type", "m7i.large",
                               "--min-vms", "2", "--max-vms", "2", "--json"))
        assert pool["state"] == "pending"

        def status(ref: str) -> dict[str, Any]:
            return json.loads(_cli(laptop, "node-pool", "status", ref, "--json"))  # type: ignore[no-any-return]

        deadline = time.monotonic() + 180
        while status("cpu")["state"] != "ready" and time.monotonic() < deadline:
            time.sleep(0.5)
        ready = status("cpu")
        assert (ready["state"], ready["counts"]["ready"], ready["engine"]) == (
            "ready", 2, "mock"), ready
        assert json.loads(_cli(laptop, "node-pool", "delete", "cpu", "--json"))["state"] == (
            "deleting")
        while status(pool["id"])["state"] != "deleted" and time.monotonic() < deadline:
            time.sleep(0.5)
        assert status(pool["id"])["state"] == "deleted"
        assert not (tmp_path / "laptop" / "anycloud.db").exists()  # the laptop kept no ledger
        for path in (tmp_path / "server").rglob("*"):
            if path.is_file():
                data = path.read_bytes()
                for secret in (b"laptopSecret", CLUSTER_TOKEN.encode()):
                    assert secret not in data, path  # sealed, never in plaintext
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-2000:]


@pytest.fixture
def agent_data() -> Iterator[Path]:
    with reachable_dir() as data:  # sessions run as nobody: tmp_path is closed to it
        yield data


@pytest.mark.slow
def test_sessions_run_through_the_api_in_remote_mode(tmp_path: Path, agent_data: Path) -> None:
    """The API serves the agent broker: an agent registers at the API's URL with its pool's
    agent token, and `session run` from a laptop in remote mode (no --broker) reaches it
    with the member token `login` kept; the agent's token opens nothing else."""
    import json

    server = {**os.environ, "ANYCLOUD_HOME": str(tmp_path / "server")}
    server.pop("ANYCLOUD_DATABASE_URL", None)
    root = _cli(server, "token", "create", "root", "--role", "admin", "--bootstrap").strip()
    proc = subprocess.Popen([ANYCLOUD, "serve", "--no-control-loop", "--api-listen",
                             "127.0.0.1:0"], env=server, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    agent: subprocess.Popen[str] | None = None
    try:
        url, _ = listening(proc)
        laptop = _laptop(tmp_path, url, root)
        member = _cli(laptop, "token", "create", "dev", "--role", "member").strip()
        agent_token = _cli(laptop, "token", "create", "cpu-agent", "--role", "agent",
                           "--pool", "default/cpu").strip()
        _cli(laptop, "login", stdin=member + "\n")
        agent = subprocess.Popen(
            [ANYCLOUD, "agent", "--pool", "cpu", "--broker", url, "--agent-id", "agent-a",
             "--heartbeat-interval", "0.3s", "--data-dir", str(agent_data / "agent"),
             "--config", str(write_config(tmp_path / "agent.yaml"))],  # sessions as nobody
            env={k: v for k, v in laptop.items() if k != "ANYCLOUD_CLI_CONFIG"} | {
                "POD_NAME": "agent-a", "POD_NAMESPACE": "default",
                "ANYCLOUD_AGENT_TOKEN": agent_token},
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        base = url.removesuffix("/v1")
        with httpx2.Client(base_url=base, headers={"Authorization": f"Bearer {member}"}) as api:
            deadline = time.monotonic() + 60
            while api.get("/v1/pools/default/cpu").json()["readyAgents"] < 1:
                assert time.monotonic() < deadline, "the agent never registered"
                time.sleep(0.2)
        done = subprocess.run([ANYCLOUD, "session", "run", "--pool", "cpu", "--json", "--",
                               "sh", "-c", "echo hi; exit 3"], env=laptop,
                              capture_output=True, text=True, timeout=120)
        docs = [json.loads(line) for line in done.stdout.splitlines()]
        assert done.returncode == 3, done.stderr
        assert docs[0] == {"stream": "stdout", "data": "hi\n"}
        assert docs[-1]["session"]["state"] == "done"
        with httpx2.Client(base_url=base,
                           headers={"Authorization": f"Bearer {agent_token}"}) as as_agent:
            for path in ("/v1/node-pools", "/v1/me", "/v1/pools/default/gpu"):
                refused = as_agent.get(path)
                assert refused.status_code == 403, (path, refused.text)
                assert refused.headers["content-type"] == "application/problem+json"
            assert as_agent.get("/v1/pools/default/cpu").status_code == 200  # its own pool
    finally:
        if agent is not None:
            agent.terminate()
            agent.wait(timeout=30)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-2000:]


def _children(pid: int) -> set[int]:
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":  # a zombie: dead, not yet reaped
            found.add(int(stat.parent.name))
    return found


@pytest.mark.slow
def test_api_workers_share_the_address_and_are_restarted(tmp_path: Path) -> None:
    """`serve --api-workers 3`: three processes answer on the one address the parent printed,
    over one ledger (a token made through one is honoured by all, an idempotency key holds
    across them); a worker killed is replaced; SIGTERM stops them all."""
    server = {**os.environ, "ANYCLOUD_HOME": str(tmp_path / "server")}
    server.pop("ANYCLOUD_DATABASE_URL", None)
    root = _cli(server, "token", "create", "root", "--role", "admin", "--bootstrap").strip()
    proc = subprocess.Popen([ANYCLOUD, "serve", "--no-control-loop", "--api-listen",
                             "127.0.0.1:0", "--api-workers", "3"], env=server,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        url, line = listening(proc)
        assert "3 worker processes" in line
        base = url.removesuffix("/v1")

        def answering(gone: int | None = None) -> set[int]:
            """Three live workers (``gone`` not among them: a killed one takes a moment to
            die), all answering."""
            deadline = time.monotonic() + 60
            while True:
                workers = _children(proc.pid)
                try:
                    # A fresh connection each time: the kernel spreads them over the workers.
                    if len(workers) == 3 and gone not in workers and all(httpx2.get(
                            f"{base}/v1/healthz").status_code == 200 for _ in range(6)):
                        return workers
                except httpx2.TransportError:
                    pass
                assert time.monotonic() < deadline, f"workers: {workers}"
                time.sleep(0.2)

        first = answering()
        admin = {"Authorization": f"Bearer {root}"}
        made = httpx2.post(f"{base}/v1/tokens", headers=admin | {"Idempotency-Key": "k1"},
                           json={"name": "dev", "role": "member"})
        assert made.status_code == 201, made.text
        member = {"Authorization": f"Bearer {made.json()['token']}"}
        for _ in range(12):  # every worker knows the new token and the key
            assert httpx2.get(f"{base}/v1/me", headers=member).json()["name"] == "dev"
            again = httpx2.post(f"{base}/v1/orgs", headers=admin | {"Idempotency-Key": "o1"},
                                json={"name": "acme"})
            assert again.status_code == 201, again.text
        assert len(httpx2.get(f"{base}/v1/orgs", headers=member).json()["items"]) == 1
        victim = sorted(first)[0]
        os.kill(victim, signal.SIGKILL)
        second = answering(gone=victim)
        assert len(second & first) == 2
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-2000:]
    assert "exited" in err and not _children(proc.pid)


_PARENT_ONLY = """
import sys
from automation.cli import api_workers, reconcile

class NoWorkers:  # the parent's own part only: no worker process is started
    def __init__(self, *args, **kwargs):
        self.url = "http://127.0.0.1:9"

class NoApp:
    sealing = None

api_workers.ApiWorkers = NoWorkers
reconcile._api(NoApp(), "127.0.0.1:0", None, None, workers=2, home="/nonexistent")
print("automation.api.app" in sys.modules)
"""


def test_the_api_workers_parent_does_not_import_the_app() -> None:
    """`serve --api-workers N`'s parent only hands its socket to the workers: importing the
    app there would cost each start ~2 s of CPU for nothing (a fresh interpreter, so that
    nothing else imported it first)."""
    done = subprocess.run([sys.executable, "-c", _PARENT_ONLY], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False", done.stdout


@pytest.mark.slow
def test_serve_removes_the_kubeconfigs_it_opened_when_stopped(
        tmp_path: Path, memory_runtime_dir: Path) -> None:
    """A sealed kubeconfig the server opened into memory (tmpfs outlives the process) is
    gone once `serve` has stopped on SIGTERM, in the API's process and its workers'."""
    from tests.automation.api.test_api_clusters import kubeconfig as self_contained_kubeconfig

    server = {**os.environ, "ANYCLOUD_HOME": str(tmp_path / "server"),
              "ANYCLOUD_SECRETS_KEY_FILE": str(tmp_path / "secrets.key")}
    server.pop("ANYCLOUD_DATABASE_URL", None)
    _cli(server, "secrets-key", "new", str(tmp_path / "secrets.key"))
    root = _cli(server, "token", "create", "root", "--role", "admin", "--bootstrap").strip()
    proc = subprocess.Popen([ANYCLOUD, "serve", "--no-control-loop", "--api-workers", "2",
                             "--api-listen", "127.0.0.1:0"], env=server,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        url, _ = listening(proc)
        admin = httpx2.Client(base_url=url, headers={"Authorization": f"Bearer {root}"},
                              timeout=60)
        # Its API server refuses at once (port 1): refreshing it opens the kubeconfig all
        # the same, in whichever worker answers (asked a few times: likely both).
        text = self_contained_kubeconfig().replace("https://203.0.113.10:6443",
                                                   "https://127.0.0.1:1")
        made = admin.post("/clusters", json={"name": "prod", "kubeconfig": text,
                                             "kubernetesVersion": "v1.36.2+k3s1",
                                             "offline": True, "allowPrivateAddress": True})
        assert made.status_code == 201, made.text
        for _ in range(4):
            assert admin.post("/clusters/prod/refresh").status_code == 200
        opened = [p.name for p in memory_runtime_dir.iterdir()]
        assert opened == [f"{made.json()['id']}.kubeconfig"], opened
        admin.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-2000:]
    assert list(memory_runtime_dir.iterdir()) == []
