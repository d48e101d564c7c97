"""Where and as whom the agent runs a session (issue 52): nothing of the agent's reaches it.

Every session gets
- a clean environment: ``PATH`` (a fixed system one), ``HOME`` (its own directory),
  ``LANG`` (the agent's, else ``C.UTF-8``), ``ANYCLOUD_SESSION_ID``, ``ANYCLOUD_POOL``,
  ``ANYCLOUD_AGENT_ID`` (the agent's pod) and ``ANYCLOUD_SESSION_DIR``, and nothing else:
  not the agent's token, not its settings;
- another user than the agent's: ``sandbox_config.session_user`` (default ``nobody``, 65534)
  and its group, no supplementary group. It cannot read the agent's memory or
  ``/proc/<agent>/environ`` (where the token is), nor signal it;
- a directory of its own, ``<sessions root>/<session id>``, owned by that user, mode 0700,
  as its working directory and ``HOME``. The root (the agent's data dir, or the
  ``disk_source``) is the agent's, mode 0711: a session reaches its own directory by its path
  but cannot list the others.

An agent that cannot switch user (not root, without CAP_SETUID and CAP_SETGID) fails every
session, saying why, unless its config says ``unsafe_same_user_sessions: true``: such a
session could read the agent's token. What cannot be honoured is refused when the agent
starts (``InvalidInput`` naming the field: exit 2), never ignored.

Sessions of one agent share the session user: on an agent of several slots, they can reach
each other's processes (not the agent's). One slot per agent keeps them apart.
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import stat
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from automation.agentpools.config import NfsMountSource, SandboxConfig
from automation.errors import InvalidInput

NOBODY = 65534
SESSION_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
MOUNT_TIMEOUT = 60.0  # seconds: an NFS server that does not answer fails the start
_CAP_SETGID, _CAP_SETUID = 6, 7
FIELD = "sandbox_config"


class SessionRefused(Exception):
    """The agent may not run this session at all (the message says why)."""


@dataclass(frozen=True)
class Sandbox:
    """How this agent runs its sessions, settled once at start (``prepare``)."""

    root: Path  # where session directories are made
    uid: int | None  # None: the agent's own user (only when asked for as unsafe)
    gid: int | None
    refusal: str | None = None  # set: every session is failed with it
    mounted: Path | None = None  # an NFS mount of ours, unmounted when the agent leaves

    def session_dir(self, session_id: str) -> Path:
        """A fresh directory for the session, owned by its user, 0700."""
        if self.refusal:
            raise SessionRefused(self.refusal)
        workdir = self.root / session_id
        workdir.mkdir(mode=0o700)
        if self.uid is not None:
            os.chown(workdir, self.uid, self.gid if self.gid is not None else -1)
        workdir.chmod(0o700)  # whatever the umask took away
        return workdir

    def env(self, session_id: str, pool: str, agent_id: str,
            workdir: Path) -> dict[str, str]:
        """The session's whole environment: nothing of the agent's but its LANG, and where it
        runs (its pool and its agent, whose id is the pod's name)."""
        return {"PATH": SESSION_PATH, "HOME": str(workdir),
                "LANG": os.environ.get("LANG") or "C.UTF-8",
                "ANYCLOUD_SESSION_ID": session_id, "ANYCLOUD_POOL": pool,
                "ANYCLOUD_AGENT_ID": agent_id, "ANYCLOUD_SESSION_DIR": str(workdir)}

    def popen_user(self) -> dict[str, Any]:
        """``subprocess.Popen``'s user switch (it changes user after entering the working
        directory, before running the command)."""
        if self.uid is None:
            return {}
        return {"user": self.uid, "group": self.gid, "extra_groups": []}

    def release(self) -> str | None:
        """Unmount what ``prepare`` mounted; the error, if it could not."""
        if self.mounted is None:
            return None
        done = subprocess.run(["umount", str(self.mounted)], capture_output=True, text=True,
                              timeout=MOUNT_TIMEOUT, check=False)
        return None if done.returncode == 0 else done.stderr.strip() or "umount failed"


def prepare(config: SandboxConfig, data_dir: Path, agent_id: str) -> Sandbox:
    """Settle the session user and the sessions root, or refuse naming the field."""
    uid, gid, refusal = _session_user(config)
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    mounted = None
    source = config.disk_source
    if source.nfs_mount_source is not None:
        mounted = data_dir / "nfs"
        _mount_nfs(source.nfs_mount_source, mounted)
        root = mounted / agent_id
        field = f"{FIELD}.disk_source.nfs_mount_source"
    elif source.path is not None:
        volume = Path(source.path)
        if not volume.is_dir():
            raise InvalidInput(f"{FIELD}.disk_source.path", source.path,
                               "must be a directory where a volume is already mounted (the "
                               "agent mounts nothing there)")
        root = volume / agent_id
        field = f"{FIELD}.disk_source.path"
    else:
        root, field = data_dir, "--data-dir"
    root.mkdir(parents=True, exist_ok=True)
    # The agent's: sessions pass through to their own directory, list nothing.
    root.chmod(0o711 if uid is not None else 0o700)
    if uid is not None:
        blocked = _blocked(root, uid, gid if gid is not None else uid)
        if blocked is not None:
            raise InvalidInput(field, str(root), f"must be reachable by the session user "
                               f"{uid}: {blocked} (mode {_mode(blocked)}) does not let it "
                               "through; choose a directory under one it may search, e.g. "
                               "/var/lib/anycloud")
    return Sandbox(root=root, uid=uid, gid=gid, refusal=refusal, mounted=mounted)


def _session_user(config: SandboxConfig) -> tuple[int | None, int | None, str | None]:
    """(uid, gid, refusal): whom sessions run as, or why none may run."""
    own = os.geteuid()
    unsafe = config.unsafe_same_user_sessions
    if not can_switch_user():
        if config.session_user is not None and _uid(config.session_user) != own:
            raise InvalidInput(f"{FIELD}.session_user", config.session_user,
                               f"cannot be honoured: the agent runs as uid {own} without "
                               "CAP_SETUID and CAP_SETGID, so it cannot switch user (run it "
                               "as root)")
        if unsafe:
            return None, None, None
        return None, None, (
            f"the agent cannot run a session as another user (it runs as uid {own} without "
            "CAP_SETUID and CAP_SETGID), and a session as the agent's own user could read "
            "its token: run the agent as root, or set "
            f"{FIELD}.unsafe_same_user_sessions: true")
    uid = _uid(config.session_user) if config.session_user is not None else NOBODY
    if uid == own:
        if not unsafe:
            raise InvalidInput(f"{FIELD}.session_user", config.session_user,
                               "must not be the agent's own user (a session could read its "
                               f"token), unless {FIELD}.unsafe_same_user_sessions is true")
        return None, None, None
    gid = _gid(config.session_group) if config.session_group is not None else _group_of(uid)
    return uid, gid, None


def can_switch_user() -> bool:
    """Whether this process may change user and groups (CAP_SETUID and CAP_SETGID)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                caps = int(line.split()[1], 16)
                return bool(caps >> _CAP_SETUID & 1 and caps >> _CAP_SETGID & 1)
    except (OSError, ValueError):
        pass
    return os.geteuid() == 0


def _uid(user: int | str) -> int:
    return _account_id(user, "session_user", "uid", "user", lambda n: pwd.getpwnam(n).pw_uid)


def _gid(group: int | str) -> int:
    return _account_id(group, "session_group", "gid", "group",
                       lambda n: grp.getgrnam(n).gr_gid)


def _account_id(value: int | str, key: str, number: str, kind: str,
                by_name: Callable[[str], int]) -> int:
    """A uid or gid given as a number, or as a name the image's passwd or group file knows."""
    field = f"{FIELD}.{key}"
    if isinstance(value, int):
        if not 0 <= value < 2**32 - 1:
            raise InvalidInput(field, value, f"must be a {number} or a {kind} name")
        return value
    try:
        return by_name(value)
    except KeyError:
        raise InvalidInput(field, value,
                           f"must be a {number}, or a {kind} name this image knows") from None


def _group_of(uid: int) -> int:
    """The user's own group; a uid the image does not know: the same number (65534)."""
    with contextlib.suppress(KeyError):
        return pwd.getpwuid(uid).pw_gid
    return uid


def _blocked(root: Path, uid: int, gid: int) -> Path | None:
    """The first directory above ``root`` the session user may not search, if any."""
    for parent in reversed(root.resolve().parents):
        st = parent.stat()
        if st.st_uid == uid:
            bit = stat.S_IXUSR
        elif st.st_gid == gid:
            bit = stat.S_IXGRP
        else:
            bit = stat.S_IXOTH
        if not st.st_mode & bit:
            return parent
    return None


def _mode(path: Path) -> str:
    return f"{stat.S_IMODE(path.stat().st_mode):04o}"


def _mount_nfs(source: NfsMountSource, where: Path) -> None:
    """Mount the export at ``where``, or refuse the start with mount's own words."""
    where.mkdir(parents=True, exist_ok=True, mode=0o711)
    argv = ["mount", "-t", "nfs"]
    if source.mount_options:
        argv += ["-o", source.mount_options]
    argv += [f"{source.server}:{source.path}", str(where)]
    field = f"{FIELD}.disk_source.nfs_mount_source"
    value = f"{source.server}:{source.path}"
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=MOUNT_TIMEOUT,
                              check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InvalidInput(field, value, f"could not be mounted at {where} "
                           f"({' '.join(argv)}): {exc}") from exc
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip() or f"exit {done.returncode}"
        raise InvalidInput(field, value, f"could not be mounted at {where} "
                           f"({' '.join(argv)}): {said}")
