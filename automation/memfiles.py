"""Files that live in memory only: a sealed secret opened for a client that reads a path.

The Kubernetes client and the kubernetes provider plugin take a kubeconfig by path. A
kubeconfig the server holds sealed is opened into a file on a memory-backed filesystem
(tmpfs: never written to a disk), in a directory only this user can enter, mode 0600, and
removed when its cluster is, and when the process that wrote it exits (``serve`` stopped by
SIGTERM or SIGINT included): tmpfs outlives a process, so a file left there would hold the
secret until the next reboot. The directory is ``ANYCLOUD_RUNTIME_DIR``, else
``/dev/shm/anycloud-<uid>``; a directory that is not memory-backed is refused.
"""

from __future__ import annotations

import atexit
import os
import secrets
import stat
import threading
from pathlib import Path

from automation.errors import AnycloudError

RUNTIME_DIR_ENV = "ANYCLOUD_RUNTIME_DIR"
_MEMORY_FS = ("tmpfs", "ramfs")


class NoMemoryDir(AnycloudError):
    default_code = "NO_MEMORY_DIR"
    http_status = 503  # the server's set-up, not the request: an operator fixes it

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"{path} cannot hold an opened secret: {why}", field=RUNTIME_DIR_ENV,
                         value=str(path), rule="an opened secret lives on a memory-backed "
                         "filesystem (tmpfs), in a directory only this user can enter")


def _filesystem_of(path: Path) -> str | None:
    """The type of the filesystem ``path`` is on (the longest mount point above it)."""
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return None
    best, kind = "", None
    resolved = str(path.resolve())
    for line in mounts:
        parts = line.split()
        if len(parts) < 3:
            continue
        point = parts[1].replace("\\040", " ")
        inside = resolved == point or resolved.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, parts[2]
    return kind


_MEMORY_BACKED: set[Path] = set()  # directories whose filesystem was checked


def memory_dir() -> Path:
    named = os.environ.get(RUNTIME_DIR_ENV)
    path = Path(named) if named else Path("/dev/shm") / f"anycloud-{os.getuid()}"
    try:
        path.mkdir(mode=0o700, parents=bool(named), exist_ok=True)
        info = path.stat()
    except OSError as exc:
        raise NoMemoryDir(path, exc.strerror or str(exc)) from None
    if info.st_uid != os.getuid() or stat.S_IMODE(info.st_mode) & 0o077:
        raise NoMemoryDir(path, "another user owns it or may enter it")
    if path not in _MEMORY_BACKED:  # /proc/mounts once per directory, not per file
        kind = _filesystem_of(path)
        if kind not in _MEMORY_FS:
            raise NoMemoryDir(path, f"it is on {kind or 'an unknown filesystem'}, not tmpfs")
        _MEMORY_BACKED.add(path)
    return path


# The files this process wrote, each with the inode it wrote: removed when it exits, unless
# another process (an API worker, the control loop) replaced the file since (its own copy).
_WRITTEN: dict[Path, int] = {}
_WRITTEN_LOCK = threading.Lock()
_at_exit = False  # remove_written is registered with atexit


def write_private(name: str, data: bytes) -> Path:
    """``data`` at ``<memory dir>/<name>``, mode 0600, replaced atomically (a reader never
    sees half a file); removed when this process exits."""
    folder = memory_dir()
    final = folder / name
    partial = folder / f".{name}.{secrets.token_hex(4)}"
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            inode = os.fstat(out.fileno()).st_ino
        _remember(final, inode)
        os.replace(partial, final)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return final


def remove(name: str) -> None:
    path = memory_dir() / name
    path.unlink(missing_ok=True)
    with _WRITTEN_LOCK:
        _WRITTEN.pop(path, None)


def _remember(path: Path, inode: int) -> None:
    global _at_exit
    with _WRITTEN_LOCK:
        if not _at_exit:
            atexit.register(remove_written)
            _at_exit = True
        _WRITTEN[path] = inode


def remove_written() -> None:
    """Remove every file this process wrote that still holds what it wrote (what another
    process wrote in its place since is that process's to remove)."""
    global _at_exit
    with _WRITTEN_LOCK:
        written = dict(_WRITTEN)
        _WRITTEN.clear()
        atexit.unregister(remove_written)
        _at_exit = False
    for path, inode in written.items():
        try:
            if path.stat().st_ino == inode:
                path.unlink()
        except FileNotFoundError:
            continue
