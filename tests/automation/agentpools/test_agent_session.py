"""``anycloud agent`` and ``anycloud session run`` end to end: a real broker (uvicorn) on
loopback, agents as real subprocesses, sessions run through them; and the agent's config
file refusals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from automation.agentpools.client import BrokerClient
from automation.agentpools.config import NFS_RULE, load_config, qualified_pool
from automation.agentpools.sandbox import NOBODY, can_switch_user
from automation.cli import cli
from automation.errors import InvalidInput
from automation.ledger import open_ledger
from tests.automation.agentpools.session_dirs import (
    reachable_dir,
    sandbox_section,
    write_config,
)
from tests.automation.agentpools.tokens import agent_token, member_token
from tests.imports import modules_loaded_by

ANYCLOUD = str(Path(sys.executable).with_name("anycloud"))
POOL = "default/cpu"


def wait_until(what: str, check: Callable[[], Any], timeout: float = 20) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.1)


class Cluster:
    """A broker and the agent processes of one test, all stopped at the end."""

    def __init__(self, tmp: Path, ledger_url: str, data: Path) -> None:
        self.tmp = tmp
        self.data = data  # agents' data dirs: reachable by the session user
        # Read for its sandbox_config beside --broker.
        self.config = write_config(tmp / "sandbox.yaml")
        self.env = dict(os.environ, ANYCLOUD_DATABASE_URL=ledger_url,
                        ANYCLOUD_HOME=str(tmp / "home"))
        self.procs: list[subprocess.Popen[str]] = []
        broker = self.spawn([ANYCLOUD, "broker", "--listen", "127.0.0.1:0", "--json",
                             "--heartbeat-timeout", "1s", "--give-up-after", "60s"],
                            stdout=subprocess.PIPE)
        assert broker.stdout is not None
        line = broker.stdout.readline()
        assert line, "the broker did not start"
        self.url = json.loads(line)["url"]
        ledger = open_ledger(ledger_url)
        self.env["ANYCLOUD_TOKEN"] = member_token(ledger)
        self.agent_token = agent_token(ledger, POOL)
        ledger.dispose()
        self.client = BrokerClient(self.url, token=self.env["ANYCLOUD_TOKEN"])

    def spawn(self, argv: list[str], env: dict[str, str] | None = None,
              **kw: Any) -> subprocess.Popen[str]:
        kw.setdefault("stdout", subprocess.DEVNULL)
        log = open(self.tmp / f"proc-{len(self.procs)}.log", "w")  # noqa: SIM115
        proc = subprocess.Popen(argv, env=env or self.env, stderr=log, text=True, **kw)
        self.procs.append(proc)
        return proc

    def agent(self, name: str, *extra: str) -> subprocess.Popen[str]:
        config = [] if "--config" in extra else ["--config", str(self.config)]
        return self.spawn([ANYCLOUD, "agent", "--pool", "cpu", "--heartbeat-interval", "0.3s",
                           "--data-dir", str(self.data / name), "--grace", "10s", *config,
                           *extra],
                          env=dict(self.env, POD_NAME=name, POD_NAMESPACE="default",
                                   ANYCLOUD_AGENT_TOKEN=self.agent_token))

    def session(self, *command: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [ANYCLOUD, "session", "run", "--pool", "cpu", "--broker", self.url, "--", *command],
            env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def agent_state(self, name: str) -> str | None:
        view = self.client.pool(POOL)
        return next((a.state for a in view.agents if a.id == name), None)

    def close(self) -> None:
        self.client.close()
        for proc in reversed(self.procs):
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGCONT)
                proc.terminate()
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


@pytest.fixture
def cluster(tmp_path: Path, sqlite_url: str) -> Iterator[Cluster]:
    with reachable_dir() as data:
        c = Cluster(tmp_path, sqlite_url, data)
        try:
            yield c
        finally:
            c.close()


def _until(cluster: Cluster, gate: str) -> str:
    """A shell loop that waits until the test releases ``gate`` (a file the session user can
    see: the sessions run as another user, in a directory of their own)."""
    return f"while [ ! -e {cluster.data / ('gate-' + gate)} ]; do sleep 0.05; done"


def _release(cluster: Cluster, gate: str) -> None:
    (cluster.data / f"gate-{gate}").touch()


@pytest.mark.slow
def test_agents_run_sessions_end_to_end(cluster: Cluster, tmp_path: Path) -> None:
    # Agent a: broker on the command line. Agent b: the config file, the seed's shape
    # (host:port without a scheme), its sessions on an already-mounted volume.
    host_port = cluster.url.removeprefix("http://")
    volume = cluster.data / "volume"
    volume.mkdir(mode=0o711)
    config = write_config(tmp_path / "anycloud.yaml", broker={"address": host_port},
                          sandbox_config=sandbox_section(disk_source={"path": str(volume)}),
                          other_readers={"kept": True})
    a = cluster.agent("agent-a", "--broker", cluster.url)
    b = cluster.agent("agent-b", "--config", str(config))
    wait_until("two ready agents", lambda: cluster.client.pool(POOL).ready_agents == 2)

    # The command's output comes back, and its exit code is the session's.
    hi = cluster.session("sh", "-c", "echo hi; echo warn >&2; pwd; exit 3")
    out, err = hi.communicate(timeout=60)
    assert hi.returncode == 3, err
    lines = out.splitlines()
    assert lines[0] == "hi" and "warn" in err
    workdir = Path(lines[1])  # a fresh directory of its own: data dir, or the volume's
    assert workdir.parent in (cluster.data / "agent-a", volume / "agent-b")
    assert workdir.name.startswith("se-")
    wait_until("the session directory removed", lambda: not workdir.exists())

    # Output streams: the first line is here while the command still runs (until the test
    # lets it go on: a sleep would race a loaded machine).
    streaming = cluster.session("sh", "-c", f"echo first; {_until(cluster, 'second')}; "
                                            "echo second")
    assert streaming.stdout is not None
    assert streaming.stdout.readline() == "first\n"
    assert streaming.poll() is None
    _release(cluster, "second")
    rest, _ = streaming.communicate(timeout=60)
    assert (streaming.returncode, rest) == (0, "second\n")

    # --json: one line per chunk, then the session.
    as_json = subprocess.run(
        [ANYCLOUD, "session", "run", "--pool", "cpu", "--broker", cluster.url, "--json", "--",
         "sh", "-c", "echo hi; exit 4"], env=cluster.env, capture_output=True, text=True,
        timeout=60)
    docs = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert as_json.returncode == 4
    assert docs[0] == {"stream": "stdout", "data": "hi\n"}
    assert docs[-1]["session"]["exitCode"] == 4 and docs[-1]["session"]["state"] == "done"

    # SIGTERM to an agent with a running session: it takes nothing new, lets the session
    # end, deregisters and exits 0.
    graceful = cluster.session("sh", "-c", "sleep 1.5; echo graceful")
    wait_until("a busy agent", lambda: cluster.client.pool(POOL).busy_slots == 1)
    busy = next(x for x in cluster.client.pool(POOL).agents if x.busy_slots)
    stopping, staying = (a, b) if busy.id == "agent-a" else (b, a)
    stayer = "agent-b" if busy.id == "agent-a" else "agent-a"
    stopping.send_signal(signal.SIGTERM)
    out, err = graceful.communicate(timeout=60)
    assert (graceful.returncode, out) == (0, "graceful\n"), err
    assert stopping.wait(timeout=30) == 0
    assert cluster.agent_state(busy.id) is None  # gone: no longer in the pool
    assert cluster.agent_state(stayer) == "ready"

    # One slot left: a second session waits while it is busy, then runs.
    first = cluster.session("sh", "-c", f"{_until(cluster, 'one')}; echo one")
    wait_until("the only slot busy", lambda: cluster.client.pool(POOL).busy_slots == 1)
    second = cluster.session("echo", "two")
    # Pending at the broker: the client's acquire was answered "pending", which it says.
    wait_until("the second session pending",
               lambda: cluster.client.pool(POOL).pending_sessions == 1)
    _release(cluster, "one")
    out2, err2 = second.communicate(timeout=60)
    out1, _ = first.communicate(timeout=60)
    assert (first.returncode, out1) == (0, "one\n")
    assert (second.returncode, out2) == (0, "two\n")
    assert "waiting for a free slot in pool default/cpu" in err2

    # Heartbeats stop (the process is frozen): the agent is unknown; they resume: ready.
    staying.send_signal(signal.SIGSTOP)
    wait_until("the frozen agent unknown", lambda: cluster.agent_state(stayer) == "unknown")
    staying.send_signal(signal.SIGCONT)
    wait_until("the agent ready again", lambda: cluster.agent_state(stayer) == "ready")

    # Ctrl-C on a session: the agent stops the command, the client exits 130. At once: the
    # slot is busy once the broker gave it, maybe before the client has the answer to its
    # acquire, and a Ctrl-C then must cancel too (test_session_interrupts.py has each case).
    long = cluster.session("sleep", "60")
    wait_until("the long session running", lambda: cluster.client.pool(POOL).busy_slots == 1)
    long.send_signal(signal.SIGINT)
    _, err = long.communicate(timeout=30)
    assert long.returncode == 130, err
    assert "cancelling session" in err
    wait_until("the slot freed", lambda: cluster.client.pool(POOL).busy_slots == 0)

    assert staying.poll() is None  # it lived through all of it
    staying.terminate()
    assert staying.wait(timeout=30) == 0


@pytest.mark.slow
def test_a_command_that_cannot_run_fails_the_session(cluster: Cluster) -> None:
    cluster.agent("agent-a", "--broker", cluster.url)
    wait_until("a ready agent", lambda: cluster.client.pool(POOL).ready_agents == 1)
    bad = cluster.session("/nonexistent/program")
    _, err = bad.communicate(timeout=60)
    assert bad.returncode == 1
    assert "failed: cannot run '/nonexistent/program'" in err


@pytest.mark.slow
def test_an_agent_whose_pool_is_deleted_stops_its_session_and_exits_0(
        cluster: Cluster, tmp_path: Path, sqlite_url: str) -> None:
    """The operator closes the pool (its AgentPool was deleted): the broker fails the running
    session and retires the agent. Told 410, the agent stops the command at once, does not
    register again and exits 0 before any SIGTERM."""
    from automation.agentpools.registry import Registry
    from automation.ledger import open_ledger

    agent = cluster.agent("agent-a", "--broker", cluster.url)
    wait_until("a ready agent", lambda: cluster.client.pool(POOL).ready_agents == 1)
    run = cluster.session("sh", "-c", "echo $$; exec sleep 60")
    assert run.stdout is not None
    pid = int(run.stdout.readline())  # the command is running
    ledger = open_ledger(sqlite_url)
    try:
        assert Registry(ledger).close_pool(POOL) == 1
    finally:
        ledger.dispose()
    assert agent.wait(timeout=30) == 0
    _, err = run.communicate(timeout=30)
    assert run.returncode == 1 and "was deleted" in err, err

    def stopped() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False

    wait_until("the command stopped", stopped)
    assert cluster.agent_state("agent-a") is None  # retired: not listed, never back
    log = (tmp_path / "proc-1.log").read_text()
    assert "[retired]" in log and log.count("[registered]") == 1, log


# -- issue 52: a session holds nothing of the agent's ------------------------------------------

SESSION_ENV = {"PATH", "HOME", "LANG", "ANYCLOUD_SESSION_ID", "ANYCLOUD_POOL",
               "ANYCLOUD_AGENT_ID", "ANYCLOUD_SESSION_DIR"}
SHELL_ENV = {"PWD", "SHLVL", "_", "OLDPWD"}  # what sh itself adds
PROBE = ("id -u; id -G; stat -c '%u %g %a' .; pwd; echo ---; env; echo ---; "
         "cat /proc/$PPID/environ 2>&1; echo; true")


def _probe(cluster: Cluster) -> tuple[list[str], dict[str, str], str, str]:
    """(id -u, id -G, owner and mode of its cwd, cwd), its environment, and what it read of
    its parent's (the agent's) environment; and all it printed."""
    run = cluster.session("sh", "-c", PROBE)
    out, err = run.communicate(timeout=60)
    assert run.returncode == 0, err
    head, env, parent = out.split("---\n")
    return (head.splitlines(), dict(line.split("=", 1) for line in env.splitlines()),
            parent, out + err)


@pytest.mark.slow
@pytest.mark.skipif(not can_switch_user(), reason="switching the session user needs root")
def test_a_session_runs_as_another_user_with_nothing_of_the_agents(cluster: Cluster) -> None:
    """Issue 52, item 0: a session printed the agent's token (its environment), so any member
    could join the pool as its agent. Now: a clean environment, another user, its own 0700
    directory, and the agent's environment closed to it."""
    cluster.agent("agent-a", "--broker", cluster.url)
    wait_until("a ready agent", lambda: cluster.client.pool(POOL).ready_agents == 1)
    (uid, groups, owner, cwd), env, parent, printed = _probe(cluster)
    assert cluster.agent_token not in printed
    assert (uid, groups) == (str(NOBODY), str(NOBODY)) and int(uid) != os.geteuid()
    assert owner == f"{NOBODY} {NOBODY} 700"
    assert Path(cwd).parent == cluster.data / "agent-a" and Path(cwd).name.startswith("se-")
    assert set(env) - SHELL_ENV == SESSION_ENV, env
    assert env["HOME"] == env["ANYCLOUD_SESSION_DIR"] == cwd and env["ANYCLOUD_POOL"] == POOL
    assert env["ANYCLOUD_AGENT_ID"] == "agent-a"
    assert "Permission denied" in parent  # /proc/<agent>/environ, where the token is
    # The sessions root is the agent's: passed through, not listed.
    assert oct((cluster.data / "agent-a").stat().st_mode & 0o777) == "0o711"


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0 or not Path("/usr/bin/setpriv").exists(),
                    reason="drops the agent's CAP_SETUID with setpriv: needs root")
def test_an_agent_that_cannot_switch_user_fails_sessions_unless_told_unsafe(
        cluster: Cluster, tmp_path: Path) -> None:
    """An agent without CAP_SETUID/CAP_SETGID would run sessions as itself (they could read
    its token): each session fails naming why, unless the config opts in by the unsafe name;
    then the environment is still clean."""
    drop = ["/usr/bin/setpriv", "--inh-caps=-setuid,-setgid",
            "--bounding-set=-setuid,-setgid", "--"]
    refusing = cluster.spawn(
        [*drop, ANYCLOUD, "agent", "--pool", "cpu", "--broker", cluster.url,
         "--heartbeat-interval", "0.3s", "--data-dir", str(cluster.data / "agent-a"),
         "--config", str(write_config(tmp_path / "safe.yaml", sandbox_config={}))],
        env=dict(cluster.env, POD_NAME="agent-a", POD_NAMESPACE="default",
                 ANYCLOUD_AGENT_TOKEN=cluster.agent_token))
    wait_until("a ready agent", lambda: cluster.client.pool(POOL).ready_agents == 1)
    run = cluster.session("sh", "-c", "echo ran")
    out, err = run.communicate(timeout=60)
    assert run.returncode == 1 and "ran" not in out, (out, err)
    assert "cannot run a session as another user" in err
    assert "sandbox_config.unsafe_same_user_sessions: true" in err
    refusing.terminate()
    assert refusing.wait(timeout=30) == 0

    unsafe = write_config(tmp_path / "unsafe.yaml",
                          sandbox_config={"unsafe_same_user_sessions": True})
    cluster.spawn(
        [*drop, ANYCLOUD, "agent", "--pool", "cpu", "--broker", cluster.url,
         "--heartbeat-interval", "0.3s", "--data-dir", str(cluster.data / "agent-b"),
         "--config", str(unsafe)],
        env=dict(cluster.env, POD_NAME="agent-b", POD_NAMESPACE="default",
                 ANYCLOUD_AGENT_TOKEN=cluster.agent_token))
    wait_until("the unsafe agent", lambda: cluster.agent_state("agent-b") == "ready")
    (uid, _, owner, _), env, _, _ = _probe(cluster)
    assert uid == "0" and owner == "0 0 700"  # as asked: the agent's own user
    assert set(env) - SHELL_ENV == SESSION_ENV


@pytest.mark.parametrize(("sandbox", "field", "rule"), [
    ({"colour": "red"}, "sandbox_config.colour", "Extra inputs are not permitted"),
    ({"disk_source": {"nfs_mount_source": {"mount_options": "nolock"}}},  # the seed's
     "sandbox_config.disk_source.nfs_mount_source", NFS_RULE),
    ({"disk_source": {"path": "relative"}}, "sandbox_config.disk_source",
     "path must be absolute"),
    ({"disk_source": {"path": "/mnt", "nfs_mount_source": {"server": "n", "path": "/x"}}},
     "sandbox_config.disk_source", "not both"),
    ({"unsafe_same_user_sessions": "sure"}, "sandbox_config.unsafe_same_user_sessions",
     "valid boolean"),
])
def test_sandbox_config_refusals_name_the_field(tmp_path: Path, sandbox: dict[str, Any],
                                                field: str, rule: str) -> None:
    """Issue 52: sandbox_config was accepted and ignored whatever it said."""
    path = write_config(tmp_path / "anycloud.yaml", broker={"address": "svc:50051"},
                        sandbox_config=sandbox)
    for broker_required in (True, False):
        with pytest.raises(InvalidInput) as err:
            load_config(path, broker_required=broker_required)
        assert err.value.field == f"{path}: {field}" and rule in err.value.message


def _start(tmp_path: Path, data: Path, sandbox: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """``anycloud agent`` with this sandbox_config: what it says before registering."""
    config = write_config(tmp_path / "anycloud.yaml", sandbox_config=sandbox)
    return subprocess.run(
        [ANYCLOUD, "agent", "--pool", "cpu", "--broker", "127.0.0.1:9", "--config",
         str(config), "--data-dir", str(data)], capture_output=True, text=True, timeout=120,
        env=dict(os.environ, ANYCLOUD_HOME=str(tmp_path / "home"),
                 ANYCLOUD_AGENT_TOKEN="acy_" + "x" * 43, POD_NAMESPACE="default"))


@pytest.mark.slow
def test_what_the_agent_cannot_honour_stops_it_at_start(tmp_path: Path) -> None:
    """Exit 2 naming the field and why, before registering: never a session run otherwise
    than the config says."""
    with reachable_dir() as data:
        nfs = _start(tmp_path, data / "a", {"disk_source": {"nfs_mount_source": {
            "server": "127.0.0.1", "path": "/nothing/here", "mount_options": "nolock"}}})
        assert nfs.returncode == 2, nfs.stderr
        assert "sandbox_config.disk_source.nfs_mount_source '127.0.0.1:/nothing/here': " \
               "could not be mounted at" in nfs.stderr
        assert "mount -t nfs -o nolock 127.0.0.1:/nothing/here" in nfs.stderr
        missing = _start(tmp_path, data / "b", {"disk_source": {"path": str(data / "none")}})
        assert missing.returncode == 2
        assert "sandbox_config.disk_source.path" in missing.stderr
        assert "already mounted" in missing.stderr
        if can_switch_user():
            itself = _start(tmp_path, data / "c", {"session_user": os.geteuid()})
            assert itself.returncode == 2
            assert "must not be the agent's own user" in itself.stderr
            # A data dir the session user cannot reach (pytest's tmp_path is 0700 above).
            closed = _start(tmp_path, tmp_path / "closed", {})
            assert closed.returncode == 2
            assert "--data-dir" in closed.stderr and "must be reachable by the session " \
                   f"user {NOBODY}" in closed.stderr
    assert "[registered]" not in nfs.stderr + missing.stderr


# -- configuration and refusals, no broker needed ---------------------------------------------


def test_config_file_refusals_name_the_file_and_the_field(tmp_path: Path) -> None:
    path = tmp_path / "anycloud.yaml"
    cases = {
        "sandbox_config: {}\n": ("broker", "is required"),
        "broker: {}\n": ("broker.address", "is required"),
        "broker: {address: 'not an address'}\n": ("broker.address", "must be host:port"),
        "broker: {address: 'svc:50051', port: 1}\n": ("broker.port", "Extra inputs"),
        "- a list\n": (None, "must be a YAML mapping"),
    }
    for text, (field, rule) in cases.items():
        path.write_text(text)
        with pytest.raises(InvalidInput) as err:
            load_config(path)
        assert str(path) in err.value.message and rule in err.value.message, text
        if field:
            assert err.value.field == f"{path}: {field}"
    path.write_text("broker:\n  address: anycloud-broker.anycloud.svc.cluster.local:50051\n")
    assert load_config(path).broker_url == \
        "http://anycloud-broker.anycloud.svc.cluster.local:50051"
    # The API's URL as `serve` prints it (the API serves the broker too): /v1 is the client's.
    path.write_text("broker:\n  address: https://cp.example.com:8443/v1/\n")
    assert load_config(path).broker_url == "https://cp.example.com:8443"


def test_the_example_configmaps_file_is_read_as_is(tmp_path: Path) -> None:
    import yaml

    example = Path(__file__).parents[3] / "k8s" / "examples" / "agent-config.yaml"
    data = yaml.safe_load(example.read_text())["data"]["anycloud.yaml"]
    path = tmp_path / "anycloud.yaml"
    path.write_text(data)
    config = load_config(path)
    assert config.broker_url == "http://anycloud-broker.anycloud.svc.cluster.local:50051"
    assert config.sandbox_config.disk_source.path is None  # sessions under the data dir


def test_agent_without_a_readable_config_exits_2_naming_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A relative path: a long one is shortened in the message (under xdist tmp_path is).
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(cli, ["--home", str(tmp_path), "agent", "--pool", "cpu",
                                   "--config", "nope.yaml"])
    assert res.exit_code == 2
    assert "--config 'nope.yaml': must be a readable YAML file" in res.output


def test_session_run_refuses_a_bad_pool_before_calling_anyone(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["--home", str(tmp_path), "session", "run", "--pool",
                                   "Bad_Pool", "--broker", "127.0.0.1:1", "--", "true"])
    assert res.exit_code == 2 and "--pool 'default/Bad_Pool'" in res.output


def test_session_run_says_which_broker_it_cannot_reach(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["--home", str(tmp_path), "session", "run", "--pool", "cpu",
                                   "--broker", "127.0.0.1:9", "--", "true"],
                             env={"ANYCLOUD_TOKEN": "acy_" + "x" * 43})
    assert res.exit_code == 1 and "cannot reach the broker at http://127.0.0.1:9" in res.output


@pytest.mark.parametrize(("args", "env"), [
    (["session", "run", "--pool", "cpu", "--broker", "127.0.0.1:9", "--", "true"],
     "ANYCLOUD_TOKEN"),
    (["agent", "--pool", "cpu", "--broker", "127.0.0.1:9"], "ANYCLOUD_AGENT_TOKEN"),
])
def test_no_token_is_exit_2_naming_where_it_comes_from(tmp_path: Path, args: list[str],
                                                       env: str) -> None:
    res = CliRunner().invoke(cli, ["--home", str(tmp_path), *args],
                             env={"ANYCLOUD_TOKEN": None, "ANYCLOUD_AGENT_TOKEN": None})
    assert res.exit_code == 2 and f"{env} (none): must hold an API token" in res.output


def test_pool_names_take_the_pods_namespace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "team-a")
    assert qualified_pool("cpu", None) == "team-a/cpu"
    assert qualified_pool("cpu", "ml") == "ml/cpu"
    assert qualified_pool("ops/cpu", "ml") == "ops/cpu"


@pytest.mark.parametrize("args", [["--help"], ["broker", "--help"], ["agent", "--help"],
                                  ["session", "run", "--help"]])
def test_start_up_imports_no_web_stack(tmp_path: Path, args: list[str]) -> None:
    loaded, _ = modules_loaded_by(args, {"ANYCLOUD_HOME": str(tmp_path)})
    assert not loaded & {"fastapi", "uvicorn", "starlette", "httpx2", "sqlalchemy"}
