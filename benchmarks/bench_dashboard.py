"""The dashboard's overview (``/ui/``) in a real browser with 10, 100 and 1,000 pools (issue
24: time to first paint and to data loaded, and the page weight; goal: the page loads in
under 300 ms with 1,000 pools, measured in the browser by navigation timing).

For each size: a SQLite ledger seeded with that many pools of two running VMs each (the
seeding of bench_cli_list.py) plus one released VM attempt per pool from the last week, so
the cost chart has bars; ``anycloud serve --no-control-loop --api-listen 127.0.0.1:0`` over
it; headless Chromium (Debian's, through selenium and chromedriver: benchmarks/_browser.py)
logs in through the form with a viewer token and loads ``/ui/`` BENCH_RUNS times: its first
page, PAGE_SIZE (100) pools of the table with the counts over all of them. Each load is read
from the browser's own timing (ms from the navigation's start):

- server: ``responseStart - requestStart`` of the navigation (query and render of the HTML,
  as the browser sees it on loopback);
- transfer: ``responseEnd - responseStart`` (the HTML's bytes on loopback); browser:
  ``loadEventEnd - responseEnd`` (parse, style, layout, CSS and JS, until the load event);
- first paint, first contentful paint (paint timing);
- DOMContentLoaded end, load end (navigation timing; "loaded" for the goal is load end);
- first refresh: when app.js applied its first poll of the fragment (it sets
  ``<html data-refreshed-at>``); the poll starts POLL_MS (3 s) after load, so this includes
  that wait: the fragment's own fetch time (resource timing) is shown beside it. The data
  itself is in the page's HTML (server-rendered), so it is shown by the first contentful
  paint;
- cost chart: when app.js put in the cost chart it fetches once after the load event (it
  sets ``<html data-cost-at>``), off the first paint's critical path;
- HTML bytes (the navigation's encodedBodySize) and the page weight: HTML + CSS + JS as
  encoded on the wire (resource timing's encodedBodySize; the CSS and JS are cached by the
  browser after the first load, max-age=300, and counted all the same).

Medians of the runs; the ratio is against the 10-pool row of the same run (the baseline).

    .venv/bin/python benchmarks/bench_dashboard.py [--smoke]  (BENCH_RUNS=5,
                                                        BENCH_SIZES=10,100,1000)

Chromium starts while the first size's ledger is seeded and its server starts (neither is
measured); each server starts while its token is made.

--smoke: 10 pools only (the baseline size: the other sizes differ only by the count), one
load, which still waits out app.js's 3 s poll for the first refresh. Needs Chromium and
chromedriver (.ci/browser.sh) and selenium: without them the script exits EXIT_MISSING, or
1 under CI=true.
"""

from __future__ import annotations

import ast
import os
import platform
import sys
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import _browser, _cli, bench_cli_list  # noqa: E402
from benchmarks._table import median, print_table  # noqa: E402
from benchmarks.bench_api import _address, _launch, _stop  # noqa: E402


def _page_size() -> int:
    """``automation.ui.pages.PAGE_SIZE``, read from its source: importing it would load
    FastAPI and the whole dashboard into this process, which only drives the browser."""
    tree = ast.parse((ROOT / "automation" / "ui" / "pages.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "PAGE_SIZE" for t in targets):
                assert node.value is not None
                return int(ast.literal_eval(node.value))
    raise SystemExit("automation/ui/pages.py no longer sets PAGE_SIZE")


PAGE_SIZE = _page_size()

MARKS = ("slow",)
RUNS = int(os.environ.get("BENCH_RUNS", "5"))
SIZES = [int(n) for n in os.environ.get("BENCH_SIZES", "10,100,1000").split(",")]
GOAL_MS = 300.0
# What the page's timing gives, in ms from the navigation's start, and its sizes.
_READ = """
const nav = performance.getEntriesByType('navigation')[0];
const paint = name => {
  const e = performance.getEntriesByName(name)[0];
  return e ? e.startTime : null;
};
const res = performance.getEntriesByType('resource');
const statics = res.filter(r => r.name.includes('/ui/static/'));
const frag = res.filter(r => r.name.includes('/ui/fragments/pools'))[0];
const refreshed = document.documentElement.dataset.refreshedAt;
return {
  server: nav.responseStart - nav.requestStart,
  transfer: nav.responseEnd - nav.responseStart,
  browser: nav.loadEventEnd - nav.responseEnd,
  fp: paint('first-paint'), fcp: paint('first-contentful-paint'),
  dcl: nav.domContentLoadedEventEnd, load: nav.loadEventEnd,
  refreshed: refreshed ? Number(refreshed) : null,
  costAt: document.documentElement.dataset.costAt ?
    Number(document.documentElement.dataset.costAt) : null,
  fragment: frag ? frag.responseEnd - frag.startTime : null,
  html: nav.encodedBodySize, htmlDecoded: nav.decodedBodySize,
  statics: statics.reduce((n, r) => n + r.encodedBodySize, 0),
  staticsSeen: statics.length,
  rows: document.querySelectorAll('tr[data-pool]').length,
  bars: document.querySelectorAll('svg.chart .bar').length,
};
"""


def seed(home: Path, pools: int) -> None:
    """``pools`` pools of two running VMs (bench_cli_list.seed), billed since yesterday, and
    one released attempt each from the last week: the cost chart and the history have data."""
    from sqlalchemy import update

    from automation.ledger import open_ledger, schema

    bench_cli_list.POOLS = pools
    bench_cli_list.seed(home)
    ledger = open_ledger(f"sqlite:///{home / 'anycloud.db'}")
    now = datetime.now(UTC)
    with ledger.write() as conn:
        conn.execute(update(schema.vm_attempts).values(vm_created_at=now - timedelta(days=1),
                                                       engine="pulumi"))
        conn.execute(schema.vm_attempts.insert(), [dict(
            id=f"at-{i:06d}-old", pool_id=f"np-{i:06d}", state="released",
            token_generation=0, created_at=now - timedelta(days=2 + i % 6),
            updated_at=now - timedelta(days=1 + i % 6),
            vm_created_at=now - timedelta(days=2 + i % 6),
            released_at=now - timedelta(days=1 + i % 6), gpu_ready_seen=False,
            engine="pulumi") for i in range(pools)])
    ledger.dispose()


def viewer_token(home: Path) -> str:
    from automation.app import App
    from automation.clock import SystemClock
    from automation.ledger import open_ledger
    from automation.services.tokens import create_token

    ledger = open_ledger(f"sqlite:///{home / 'anycloud.db'}")
    try:
        app = App(ledger=ledger, clock=SystemClock(), home=home)
        return create_token(app, "bench", "viewer", by="bench").token
    finally:
        ledger.dispose()


def _login(driver: Any, base: str, token: str) -> None:
    from selenium.webdriver.common.by import By

    driver.get(f"{base}/ui/login")
    driver.find_element(By.ID, "token").send_keys(token)
    driver.find_element(By.CSS_SELECTOR, "form.login button").click()
    _browser.wait_for("the overview after logging in", lambda: driver.current_url == f"{base}/ui/")


def measure(browser: Callable[[], Any], pools: int, runs: int) -> list[dict[str, Any]]:
    """``runs`` loads of the overview over ``pools`` seeded pools: the browser's figures
    (``browser()``: the driver, once it has started)."""
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        seed(home, pools)
        env = {**os.environ, "ANYCLOUD_HOME": str(home), "ANYCLOUD_CLI_CONFIG":
               str(home / "cli.json"), "ANYCLOUD_API_RATE": "off"}
        for name in ("ANYCLOUD_DATABASE_URL", "ANYCLOUD_API_URL", "ANYCLOUD_TOKEN"):
            env.pop(name, None)
        server = _launch(env)  # it starts while the token is made: it reads tokens per call
        try:
            token = viewer_token(home)
            base = _address(server).rstrip("/")
            driver = browser()
            _login(driver, base, token)  # also warms the server: imports, SQLite's cache
            out = []
            for _ in range(runs):
                driver.get(f"{base}/ui/")  # returns after the load event
                _browser.wait_for(
                    "the first refresh and the cost chart", lambda: driver.execute_script(
                        "return document.documentElement.dataset.refreshedAt && "
                        "document.documentElement.dataset.costAt"), seconds=60)
                got = driver.execute_script(_READ)
                if got["rows"] != min(pools, PAGE_SIZE) or got["bars"] == 0:
                    raise SystemExit(f"{pools} pools: the page showed {got['rows']} rows and "
                                     f"{got['bars']} bars")
                out.append(got)
            driver.delete_all_cookies()
            return out
        finally:
            _stop(server)


def main() -> None:
    global RUNS, SIZES
    if _cli.parse(__doc__, MARKS).smoke:
        RUNS, SIZES = 1, [10]
    # Chromium starts in a thread while the first ledger is seeded and its server starts.
    with ThreadPoolExecutor(1) as starter:
        starting = starter.submit(_browser.chrome)

        def browser() -> Any:
            try:
                return starting.result()
            except _browser.BrowserMissing as exc:
                _cli.missing(str(exc))
                raise

        try:
            results = {n: measure(browser, n, RUNS) for n in SIZES}
            chromium = _browser.version(browser())
        finally:
            if starting.exception() is None:
                starting.result().quit()

    def med(n: int, key: str) -> float:
        values = [r[key] for r in results[n] if r[key] is not None]
        return median(values) if values else float("nan")

    base = med(SIZES[0], "load")
    rows = []
    for n in SIZES:
        load = med(n, "load")
        weight = med(n, "html") + med(n, "statics")
        rows.append((n, f"{med(n, 'server'):.1f}", f"{med(n, 'transfer'):.1f}",
                     f"{med(n, 'browser'):.0f}", f"{med(n, 'fp'):.0f}", f"{med(n, 'fcp'):.0f}",
                     f"{med(n, 'dcl'):.0f}", f"{load:.0f}", f"{med(n, 'costAt'):.0f}",
                     f"{med(n, 'refreshed'):.0f}",
                     f"{med(n, 'fragment'):.1f}", f"{med(n, 'html'):,.0f}",
                     f"{med(n, 'htmlDecoded'):,.0f}", f"{weight:,.0f}",
                     f"{load / base:.1f}x", "yes" if load < GOAL_MS else "NO"))
    print_table(
        f"/ui/ overview in headless Chromium {chromium}, median of {RUNS} load(s) per size "
        f"(ms from navigation start; bytes): SQLite ledger, loopback, one server process, "
        f"{os.cpu_count()} cores, {platform.python_implementation()} "
        f"{platform.python_version()}; data loaded = first contentful paint (the data is in "
        f"the HTML); first page of {PAGE_SIZE} pools; cost chart fetched after load; first refresh "
        f"includes app.js's 3 s poll wait",
        ("pools", "server", "transfer", "browser", "first paint", "FCP", "DOMContentLoaded", "load",
         "cost chart", "1st refresh", "fragment fetch", "HTML bytes", "HTML decoded", "page weight",
         f"load vs {SIZES[0]}", f"load < {GOAL_MS:.0f} ms"),
        rows)


if __name__ == "__main__":
    main()
