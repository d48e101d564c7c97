"""The API against an outsider (issue 52, "Measure"), on loopback, against a real
``anycloud serve --no-control-loop --api-listen 127.0.0.1:0`` at the default rate limit
(``ANYCLOUD_API_RATE`` 50/100) and body limit:

1. a stream of BENCH_REQUESTS ``GET /v1/me``, each with a made-up token (well-formed, never
   issued), beside the same stream with one valid token (the baseline: what the limiter lets
   one caller do): how many are answered (not 429), how many are limited, and the answered
   requests per second. Each stream comes from a loopback address of its own (127.0.0.N),
   so no stream starts with a bucket another emptied;
2. the server's peak RSS under BENCH_UPLOADS anonymous uploads of BENCH_UPLOAD_MB MB each to
   ``POST /v1/clusters`` (BENCH_UPLOAD_CLIENTS at a time), streamed from a generator (the
   client never holds a body): once chunked, once with a ``Content-Length``, each to a fresh
   server. The baseline is the server's RSS, idle, before them; the peak is its ``VmHWM``
   after ``clear_refs`` reset it.

    .venv/bin/python benchmarks/bench_api_abuse.py [--smoke]
        (BENCH_RUNS=3, BENCH_REQUESTS=400, BENCH_UPLOADS=20, BENCH_UPLOAD_MB=200,
         BENCH_UPLOAD_CLIENTS=4)

--smoke: one run of 20 requests at a rate of 5/10, and 2 uploads of 2 MB.
"""

from __future__ import annotations

import os
import secrets
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _cli
from benchmarks._table import median, print_table
from benchmarks.bench_api import _address, _launch, _stop, bootstrap_admin, local_env

MARKS = ("slow",)
RUNS = int(os.environ.get("BENCH_RUNS", "3"))
REQUESTS = int(os.environ.get("BENCH_REQUESTS", "400"))
UPLOADS = int(os.environ.get("BENCH_UPLOADS", "20"))
UPLOAD_MB = int(os.environ.get("BENCH_UPLOAD_MB", "200"))
UPLOAD_CLIENTS = int(os.environ.get("BENCH_UPLOAD_CLIENTS", "4"))
RATE = "50/100"  # the default of ANYCLOUD_API_RATE
CHUNK = b"x" * (1 << 20)  # one buffer, sent again and again


def made_up_token() -> str:
    return "acy_" + secrets.token_urlsafe(32)


def stream(url: str, source: str, tokens: Iterator[str]) -> tuple[int, int, float]:
    """REQUESTS ``GET /v1/me`` from the address ``source``, one token each: (answered,
    limited, answered per second)."""
    import httpx2

    answered = limited = 0
    transport = httpx2.HTTPTransport(local_address=source)
    with httpx2.Client(base_url=url, transport=transport, timeout=60) as http:
        began = time.perf_counter()
        for _, token in zip(range(REQUESTS), tokens, strict=False):
            status = http.get("/v1/me", headers={"Authorization": f"Bearer {token}"}
                              ).status_code
            if status == 429:
                limited += 1
            else:
                answered += 1
        took = time.perf_counter() - began
    return answered, limited, answered / took


def token_streams(url: str, valid: list[str]) -> list[tuple[str, ...]]:
    """The token table: per stream, the medians of RUNS runs."""
    kinds = (("one valid token (baseline)", lambda run: iter(lambda: valid[run], None)),
             ("a made-up token each", lambda run: iter(made_up_token, None)))
    rows: list[tuple[str, ...]] = []
    for n, (label, tokens) in enumerate(kinds):
        runs = [stream(url, f"127.0.{n + 1}.{run + 1}", tokens(run)) for run in range(RUNS)]
        answered, limited, per_s = (median([r[i] for r in runs]) for i in range(3))
        rows.append((label, str(REQUESTS), f"{answered:.0f}", f"{limited:.0f}",
                     f"{per_s:,.0f}"))
    return rows


def body(size: int) -> Iterator[bytes]:
    sent = 0
    while sent < size:
        piece = CHUNK[:size - sent]
        sent += len(piece)
        yield piece


def upload(url: str, sized: bool, statuses: list[int]) -> None:
    import httpx2

    size = UPLOAD_MB << 20
    headers = {"Content-Type": "application/json"}
    if sized:
        headers["Content-Length"] = str(size)
    try:
        with httpx2.Client(base_url=url, timeout=600) as http:
            statuses.append(http.post("/v1/clusters", content=body(size),
                                      headers=headers).status_code)
    except httpx2.TransportError:  # the server closed the connection on an unread body
        statuses.append(0)


def rss_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise SystemExit(f"no {field} in /proc/{pid}/status")


def uploads(url: str, pid: int, sized: bool) -> tuple[int, int, float, list[int]]:
    """(RSS before in kB, peak RSS in kB, seconds, statuses) of UPLOADS uploads."""
    before = rss_kb(pid, "VmRSS")
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM from here on
    statuses: list[int] = []
    began = time.perf_counter()
    for start in range(0, UPLOADS, UPLOAD_CLIENTS):
        batch = [threading.Thread(target=upload, args=(url, sized, statuses))
                 for _ in range(min(UPLOAD_CLIENTS, UPLOADS - start))]
        for t in batch:
            t.start()
        for t in batch:
            t.join()
    return before, rss_kb(pid, "VmHWM"), time.perf_counter() - began, statuses


def upload_rows(env: dict[str, str]) -> list[tuple[str, ...]]:
    """A server of its own for each kind of upload: memory the first took is not given back
    to the system, and would be the second's baseline."""
    rows: list[tuple[str, ...]] = []
    for sized in (False, True):
        server = _launch(env)
        try:
            before, peak, took, statuses = uploads(_address(server), server.pid, sized)
        finally:
            _stop(server)
        answers = ", ".join(f"{statuses.count(s)}x {s or 'closed'}"
                            for s in sorted(set(statuses)))
        rows.append((f"{UPLOADS} x {UPLOAD_MB} MB, "
                     f"{'Content-Length' if sized else 'chunked'}", f"{before / 1024:.0f}",
                     f"{peak / 1024:.0f}", f"{peak / before:.2f}x", f"{took:.1f}", answers))
    return rows


def main() -> None:
    global RUNS, REQUESTS, UPLOADS, UPLOAD_MB, RATE
    if _cli.parse(__doc__, MARKS).smoke:
        RUNS, REQUESTS, UPLOADS, UPLOAD_MB, RATE = 1, 20, 2, 2, "5/10"
    from automation.app import App
    from automation.ledger import open_ledger
    from automation.services.tokens import create_token

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        env = {**local_env(home), "ANYCLOUD_API_RATE": RATE}
        admin = bootstrap_admin(env)  # migrates the ledger before serve opens it
        server = _launch(env)
        try:
            ledger = open_ledger(f"sqlite:///{home / 'anycloud.db'}")
            valid = [admin] + [create_token(App(ledger=ledger, home=home), f"bench-{run}",
                                            "viewer", by="bench").token
                               for run in range(1, RUNS)]
            ledger.dispose()
            url = _address(server)
            tokens = token_streams(url, valid)
        finally:
            _stop(server)
        memory = upload_rows(env)
    print_table(f"GET /v1/me, {REQUESTS} requests a stream, ANYCLOUD_API_RATE {RATE}, "
                f"median of {RUNS} run(s)",
                ["stream", "requests", "answered", "429", "answered/s"], tokens)
    print()
    print_table(f"anonymous POST /v1/clusters, {UPLOAD_CLIENTS} at a time: the server's RSS "
                "(MB; baseline: idle, before them)",
                ["uploads", "RSS before", "peak RSS", "vs before", "seconds", "answers"],
                memory)


if __name__ == "__main__":
    main()
