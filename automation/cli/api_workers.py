"""``serve --api-workers N``: the API in N processes sharing one listening socket.

The parent binds the socket (so every worker answers on the address it printed) and starts
N ``serve --no-control-loop --api-fd FD`` processes that inherit it; the kernel spreads the
connections among them. Each worker opens its own App over the same ledger (the state every
request reads: tokens, idempotency keys, pools), so any worker can answer any request. The
parent restarts a worker that dies, and stops them all when it stops; a worker whose parent
is gone stops by itself. The rate limit is per worker process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from automation.cli.output import info

RESTART_AFTER = 1.0  # seconds: a worker that keeps dying is not restarted in a tight loop


class ApiWorkers:
    def __init__(self, listen: str, count: int, *, tls_cert: Path | None,
                 tls_key: Path | None, home: str | None) -> None:
        from automation.serving import Tls, listen_socket

        tls = Tls(tls_cert, tls_key) if tls_cert is not None and tls_key is not None else None
        self._sock, self.url = listen_socket(listen, tls, "--api-listen")
        os.set_inheritable(self._sock.fileno(), True)
        self._argv = [sys.executable, "-m", "automation", *(["--home", home] if home else []),
                      "serve", "--no-control-loop", "--api-fd", str(self._sock.fileno()),
                      "--api-url", self.url]
        if tls is not None:
            self._argv += ["--tls-cert", str(tls_cert), "--tls-key", str(tls_key)]
        self._stopping = threading.Event()
        self._procs = [self._start() for _ in range(count)]
        self._watch = threading.Thread(target=self._supervise, name="api-workers",
                                       daemon=True)
        self._watch.start()

    def _start(self) -> subprocess.Popen[bytes]:
        return subprocess.Popen(self._argv, pass_fds=(self._sock.fileno(),))

    def _supervise(self) -> None:
        while not self._stopping.wait(RESTART_AFTER):
            for i, proc in enumerate(self._procs):
                if proc.poll() is not None and not self._stopping.is_set():
                    info(f"[error] API worker {proc.pid} exited ({proc.returncode}); "
                         "starting another")
                    self._procs[i] = self._start()

    def stop(self, timeout: float = 15.0) -> None:
        self._stopping.set()
        self._watch.join(timeout)
        for proc in self._procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for proc in self._procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._sock.close()
