"""The dashboard in a real browser: Debian's Chromium, headless, driven by selenium through
Debian's chromedriver (``.ci/browser.sh`` installs both; selenium is pointed at them and
downloads nothing), against ``anycloud serve --simulate --api-listen`` on loopback.

A viewer logs in through the form, watches a pool go from pending to ready as the control
loop runs (the page polls; it is never reloaded), sees the data marked stale while refreshes
fail, sees a failed pool's error redacted, opens a pool's page, finds no way to write, and is
logged out when its token is revoked. Each page is saved as a screenshot under
$ANYCLOUD_TEST_ARTIFACTS (default: the test's tmp dir)."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx2
import pytest
import sqlalchemy as sa

from automation.app import App
from automation.clock import SystemClock
from automation.ledger import open_ledger, schema
from automation.models import NewNodePool
from automation.services import credentials, node_pools
from automation.services.tokens import create_token
from automation.simulators.world import register_simulated_cluster
from benchmarks import _browser
from tests.automation.api.test_api_serve import ANYCLOUD, listening
from tests.conftest import missing

POOL = {"credentials": "team-aws", "region": "us-east-1", "vmType": "m7i.large",
        "minVms": 2, "maxVms": 2}
# What the failed pool's error says in the ledger; the page must show it redacted.
RAW_ERROR = "dial tcp 203.0.113.10:6443: connect: connection refused"

pytestmark = pytest.mark.slow


def _driver(width: int = 1280, height: int = 900) -> Any:
    try:
        return _browser.chrome(width, height)
    except _browser.BrowserMissing as exc:
        missing(str(exc))
        raise


@pytest.fixture
def artifacts(tmp_path: Path) -> Path:
    where = Path(os.environ.get("ANYCLOUD_TEST_ARTIFACTS") or tmp_path / "artifacts")
    where.mkdir(parents=True, exist_ok=True)
    return where


@pytest.fixture
def server(tmp_path: Path) -> Iterator[dict[str, str]]:
    """``serve --simulate --api-listen`` on loopback over a ledger with the simulated
    cluster, a credential, a failed pool and tokens: its URL and the tokens."""
    home = tmp_path / "home"
    env = {**os.environ, "ANYCLOUD_HOME": str(home)}
    env.pop("ANYCLOUD_DATABASE_URL", None)
    ledger = open_ledger(f"sqlite:///{home / 'anycloud.db'}")
    app = App(ledger=ledger, clock=SystemClock(), home=home)
    register_simulated_cluster(app, home)
    credentials.new_credential(app, credentials.NewCredential("team-aws", "aws",
                                                              {"profile": "team"}))
    broken = node_pools.create_node_pool_reported(
        app, NewNodePool.model_validate({**POOL, "name": "broken"}))
    with ledger.write() as conn:  # parked: the control loop leaves a failed pool alone
        conn.execute(sa.update(schema.node_pools).where(schema.node_pools.c.id == broken.id)
                     .values(state="failed", last_error=RAW_ERROR))
        # A VM it had, bought (not the mock engine) for two hours the day before the
        # simulated world's clock starts (a home's world starts at the wall clock), and
        # released: the cost chart has a bar to draw.
        start = SystemClock().now() - timedelta(days=1)
        conn.execute(schema.vm_attempts.insert().values(
            id="at-browser-cost", pool_id=broken.id, state="released", token_generation=0,
            created_at=start, updated_at=start + timedelta(hours=2), vm_created_at=start,
            released_at=start + timedelta(hours=2), gpu_ready_seen=False, engine="pulumi"))
    tokens = {role: create_token(app, name, role, by="test").token
              for name, role in (("watcher", "viewer"), ("dev", "member"), ("root", "admin"))}
    ledger.dispose()
    proc = subprocess.Popen([ANYCLOUD, "serve", "--simulate", "--interval", "0.5", "--speed",
                             "20", "--api-listen", "127.0.0.1:0"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        url, _ = listening(proc)
        yield {"url": url.removesuffix("/v1").rstrip("/"), **tokens}
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-2000:]


def _wait(what: str, check: Any, seconds: float = 60) -> Any:
    return _browser.wait_for(what, check, seconds, every=0.1)


def _fresh(driver: Any, css: str, act: Any) -> Any:
    """``act`` on the element ``css`` finds, found again if a poll replaced it meanwhile."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    for _ in range(5):
        try:
            return act(driver.find_element(By.CSS_SELECTOR, css))
        except StaleElementReferenceException:
            continue
    raise AssertionError(f"{css} kept being replaced")


def _row_state(driver: Any, name: str) -> str | None:
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    try:
        rows = driver.find_elements(By.CSS_SELECTOR, f'tr[data-pool="{name}"]')
        return rows[0].get_attribute("data-state") if rows else None
    except StaleElementReferenceException:  # a poll replaced the table: look again
        return _row_state(driver, name)


def test_a_viewer_watches_the_pools_in_a_browser(server: dict[str, str],
                                                 artifacts: Path) -> None:
    from selenium.webdriver.common.by import By

    base = server["url"]
    member = httpx2.Client(base_url=f"{base}/v1",
                           headers={"Authorization": f"Bearer {server['member']}"})
    driver = _driver()
    try:
        driver.get(f"{base}/ui/")
        assert driver.current_url == f"{base}/ui/login"  # anonymous: the log-in page
        assert "broken" not in driver.page_source
        driver.save_screenshot(str(artifacts / "login.png"))
        field = driver.find_element(By.ID, "token")
        field.send_keys(server["viewer"])
        driver.find_element(By.CSS_SELECTOR, "form.login button").click()
        _wait("the overview", lambda: driver.current_url == f"{base}/ui/")
        # Chrome kept the Secure, HTTP-only cookie on http://127.0.0.1 (a trustworthy origin):
        # the page after the redirect is the overview, and scripts cannot read the cookie.
        assert driver.execute_script("return document.cookie") == ""
        cookie = driver.get_cookie("anycloud_session")
        assert cookie and cookie["httpOnly"] and cookie["secure"]
        assert cookie["sameSite"] == "Strict"

        # A failed pool's error, redacted as `node-pool status` shows it.
        assert _row_state(driver, "broken") == "failed"
        error = _fresh(driver, 'tr[data-pool="broken"] .last-error', lambda e: e.text)
        assert "connection refused" in error and "203.0.113.10" not in error, error
        shown = _fresh(driver, 'tr[data-pool="broken"] .state', lambda e: e.text)
        assert "failed" in shown  # in words, not in colour only

        # The cost chart (server-made SVG, fetched once after the load, not polled) draws
        # the VM bought yesterday.
        costs = _wait("the cost chart", lambda: driver.find_elements(
            By.CSS_SELECTOR, "section.cost"), seconds=15)[0]
        assert costs.find_elements(By.CSS_SELECTOR, "svg.chart"), costs.get_attribute(
            "outerHTML")[:2000]
        chart = costs.find_element(By.CSS_SELECTOR, "svg.chart")
        assert chart.is_displayed()
        assert driver.find_elements(By.CSS_SELECTOR, "svg.chart .bar")
        assert "No cost in the last 30 days." not in driver.page_source
        driver.execute_script("arguments[0].scrollIntoView()", chart)
        driver.save_screenshot(str(artifacts / "overview-cost.png"))
        driver.execute_script("window.scrollTo(0, 0)")

        # A pool made now appears, and goes to ready, with no reload of the page.
        driver.execute_script("window.notReloaded = true")
        made = member.post("/node-pools", json={**POOL, "name": "cpu"})
        assert made.status_code == 201, made.text
        seen: list[str] = []

        def ready() -> bool:
            state = _row_state(driver, "cpu")
            if state and (not seen or seen[-1] != state):
                seen.append(state)
                if state != "ready":
                    driver.save_screenshot(str(artifacts / f"overview-{state}.png"))
            return state == "ready"

        _wait("pool cpu ready on the page", ready, seconds=180)
        assert driver.execute_script("return window.notReloaded === true")
        assert seen[0] in ("pending", "provisioning") and seen[-1] == "ready", seen
        assert "2 / 2" in _fresh(driver, 'tr[data-pool="cpu"]', lambda row: row.text)
        stamp = driver.find_element(By.CSS_SELECTOR, ".freshness time").text
        assert stamp.endswith("UTC")
        assert not driver.find_element(By.CSS_SELECTOR, ".freshness .stale").is_displayed()
        driver.save_screenshot(str(artifacts / "overview.png"))

        # A refresh that fails marks the data stale; the next one that works clears it.
        driver.execute_script("window.realFetch = window.fetch;"
                              "window.fetch = () => Promise.reject(new Error('down'));")
        stale = driver.find_element(By.CSS_SELECTOR, ".freshness .stale")  # never replaced
        _wait("the stale marker", stale.is_displayed, seconds=15)
        driver.save_screenshot(str(artifacts / "overview-stale.png"))
        driver.execute_script("window.fetch = window.realFetch;")
        _wait("fresh data again", lambda: not stale.is_displayed(), seconds=15)

        # No way to write from the page: its only form logs out, and its cookie is no
        # credential for the API's write routes.
        forms = [f.get_attribute("action") for f in driver.find_elements(By.TAG_NAME, "form")]
        assert forms == [f"{base}/ui/logout"], forms
        status = driver.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "fetch('/v1/node-pools/cpu', {method: 'DELETE', credentials: 'same-origin'})"
            ".then(r => done(r.status)).catch(e => done(String(e)));")
        assert status == 401
        assert member.get("/node-pools/cpu").json()["state"] == "ready"

        # The pool's page, by its link (the table was replaced by the polls since).
        _fresh(driver, 'tr[data-pool="cpu"] a', lambda link: link.click())
        _wait("the pool page", lambda: "/ui/pools/" in driver.current_url)
        assert driver.find_element(By.TAG_NAME, "h1").text == "Node pool cpu"
        assert "2 ready" in driver.page_source
        driver.save_screenshot(str(artifacts / "pool.png"))
        # Its history: the VM attempts the control loop made (the page polls: found afresh).
        attempts = _fresh(driver, "table.attempts",
                          lambda t: len(t.find_elements(By.CSS_SELECTOR, "tbody tr[data-attempt]")))
        assert attempts >= 1, attempts
        assert driver.find_element(By.CSS_SELECTOR, "table.events").is_displayed()
        _fresh(driver, "table.attempts",
               lambda t: driver.execute_script("arguments[0].scrollIntoView()", t))
        driver.save_screenshot(str(artifacts / "pool-history.png"))

        # A phone-width screen: the overview still shows every pool.
        driver.set_window_size(390, 844)
        driver.get(f"{base}/ui/")
        assert driver.find_element(By.CSS_SELECTOR, 'tr[data-pool="cpu"]').is_displayed()
        driver.save_screenshot(str(artifacts / "overview-phone.png"))
        # ... and its cost chart fits the screen: nothing scrolls sideways.
        chart = _wait("the cost chart", lambda: driver.find_elements(
            By.CSS_SELECTOR, "svg.chart"), seconds=15)[0]
        assert driver.execute_script(
            "return document.documentElement.scrollWidth <= window.innerWidth"), \
            driver.execute_script("return [document.documentElement.scrollWidth, "
                                  "window.innerWidth]")
        assert driver.execute_script("return arguments[0].getBoundingClientRect().right "
                                     "<= window.innerWidth", chart)
        driver.execute_script("arguments[0].scrollIntoView()", chart)
        driver.save_screenshot(str(artifacts / "overview-cost-phone.png"))
        driver.set_window_size(1280, 900)

        # Revoked: the next poll finds the session over and goes to the log-in page.
        admin = httpx2.Client(base_url=f"{base}/v1",
                              headers={"Authorization": f"Bearer {server['admin']}"})
        assert admin.delete("/tokens/watcher").status_code == 200
        admin.close()
        _wait("the log-in page after the revocation",
              lambda: driver.current_url == f"{base}/ui/login", seconds=30)
        assert "cpu" not in driver.page_source
    finally:
        member.close()
        driver.quit()
