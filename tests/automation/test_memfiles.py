"""Memory-only files (``automation.memfiles``): what a process opened is removed when it
exits, but never a copy another process wrote in its place."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from automation import memfiles


@pytest.mark.usefixtures("memory_runtime_dir")
def test_a_process_removes_what_it_wrote_and_only_that() -> None:
    mine = memfiles.write_private("mine.kubeconfig", b"secret")
    theirs = memfiles.write_private("theirs.kubeconfig", b"secret")
    # Another process (an API worker) opened the same kubeconfig since: its own file.
    other = theirs.with_name(".other")
    other.write_bytes(b"secret")
    os.replace(other, theirs)
    memfiles.remove_written()
    assert not mine.exists() and theirs.read_bytes() == b"secret"
    memfiles.remove_written()  # twice is nothing


def test_the_files_go_when_the_process_exits(memory_runtime_dir: Path) -> None:
    script = ("from automation import memfiles\n"
              "print(memfiles.write_private('c.kubeconfig', b'secret'))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env={**os.environ, memfiles.RUNTIME_DIR_ENV: str(memory_runtime_dir)},
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(memory_runtime_dir / "c.kubeconfig")
    assert list(memory_runtime_dir.iterdir()) == []
