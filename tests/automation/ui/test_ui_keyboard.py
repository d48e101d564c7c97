"""The dashboard with a keyboard, in a real browser (Debian's Chromium, as
``test_ui_browser.py``): a skip link, the page marked in the navigation, and a refresh that
neither steals focus nor talks: the live part is swapped only when its data changed, the
link that had focus has it again after a swap, and nothing is announced while fresh."""

from __future__ import annotations

import time

import httpx2
import pytest
import sqlalchemy as sa
from fastapi import FastAPI
from fastapi.testclient import TestClient

from automation.app import App
from automation.ledger import schema
from automation.models import NewNodePool
from automation.services import node_pools
from automation.services.tokens import create_token
from tests.automation.api.conftest import POOL as API_POOL
from tests.automation.ui.test_ui_browser import POOL, _driver, _wait, server  # noqa: F401


@pytest.mark.slow
def test_a_keyboard_user_keeps_focus_through_the_refreshes(
        server: dict[str, str]) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    base = server["url"]
    driver = _driver()
    try:
        driver.get(f"{base}/ui/login")
        driver.find_element(By.ID, "token").send_keys(server["viewer"] + Keys.ENTER)
        _wait("the overview", lambda: driver.current_url == f"{base}/ui/")

        # The first Tab reaches the skip link, shown once focused; it leads to the content.
        driver.find_element(By.TAG_NAME, "body").send_keys(Keys.TAB)
        skip = driver.switch_to.active_element
        assert skip.text == "Skip to the content" and skip.location["x"] >= 0
        skip.send_keys(Keys.ENTER)
        assert driver.switch_to.active_element.get_attribute("id") == "main"
        current = driver.find_elements(By.CSS_SELECTOR, 'nav a[aria-current="page"]')
        assert [a.text for a in current] == ["Node pools"]

        # Focus on a pool's link; refreshes with nothing new swap nothing and keep it.
        link = driver.find_element(By.CSS_SELECTOR, 'tr[data-pool="broken"] a')
        href = link.get_attribute("href")
        driver.execute_script("arguments[0].focus(); window.table = "
                              "document.querySelector('table.pools')", link)
        stamp = driver.find_element(By.CSS_SELECTOR, ".freshness time").text
        _wait("a refresh", lambda: driver.find_element(
            By.CSS_SELECTOR, ".freshness time").text != stamp, seconds=15)
        time.sleep(3.5)  # and one more
        assert driver.execute_script(
            "return document.querySelector('table.pools') === window.table")
        assert driver.switch_to.active_element.get_attribute("href") == href
        assert driver.find_element(By.CSS_SELECTOR, ".freshness [role=status]").text == ""

        # New data swaps the table in: the same link has focus again.
        with httpx2.Client(base_url=f"{base}/v1", headers={
                "Authorization": f"Bearer {server['member']}"}) as member:
            assert member.post("/node-pools", json={**POOL, "name": "cpu"}).status_code == 201
        _wait("the new pool", lambda: driver.execute_script(
            "return document.querySelector('tr[data-pool=\"cpu\"]') !== null"), seconds=30)
        assert not driver.execute_script(
            "return document.querySelector('table.pools') === window.table")
        assert driver.switch_to.active_element.get_attribute("href") == href
    finally:
        driver.quit()


def test_a_page_and_its_fragment_agree_on_the_version_until_the_data_changes(
        world: App, api: FastAPI) -> None:
    """The version app.js compares: equal for the same data read at another time, different
    once the data changed."""
    import re

    made = node_pools.create_node_pool_reported(world, NewNodePool.model_validate(API_POOL))
    bearer = {"Authorization": f"Bearer {create_token(world, 'w', 'viewer', by='t').token}"}
    with TestClient(api, base_url="https://testserver", headers=bearer) as client:
        for page, fragment in (("/ui/", "/ui/fragments/pools"),
                               (f"/ui/pools/{made.id}", f"/ui/fragments/pools/{made.id}"),
                               ("/ui/agent-pools", "/ui/fragments/agent-pools"),
                               ("/ui/deployments", "/ui/fragments/deployments")):
            shown = re.search(r'id="live" [^>]*data-version="([0-9a-f]{16})"',
                              client.get(page).text)
            assert shown, page
            assert client.get(fragment).headers["X-Live-Version"] == shown.group(1), page
        before = client.get("/ui/fragments/pools").headers["X-Live-Version"]
        with world.ledger.write() as conn:
            conn.execute(sa.update(schema.node_pools).values(state="failed",
                                                             last_error="boom"))
        assert client.get("/ui/fragments/pools").headers["X-Live-Version"] != before
