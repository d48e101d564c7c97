"""The dashboard over HTTP (FastAPI's TestClient, on https://testserver so the client keeps
its Secure cookies): log in and out, the cookie's attributes, CSRF, sessions that end when
their token is revoked, Bearer for scripts, and no data for anyone the API would refuse."""

from __future__ import annotations

import re
from html import escape
from pathlib import Path

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from automation.app import App
from automation.ledger import schema
from automation.models import NewNodePool
from automation.services import clusters, credentials, node_pools, projects
from automation.services.tokens import create_token, revoke_token
from automation.ui.sessions import LOGIN_CSRF_COOKIE, SESSION_COOKIE
from tests.automation.api.conftest import POOL
from tests.automation.conftest import DEMO_CA, snapshot

_CSRF = re.compile(r'name="csrf" value="([^"]+)"')



@pytest.fixture
def pooled(world: App) -> App:
    """A pool named ``gpu`` in the world, failed with an error that names the API server."""
    made = node_pools.create_node_pool_reported(world, NewNodePool.model_validate(POOL))
    with world.ledger.write() as conn:
        conn.execute(sa.update(schema.node_pools).where(schema.node_pools.c.id == made.id)
                     .values(state="failed",
                             last_error="dial tcp 203.0.113.10:6443: connection refused"))
    return world


def _login(client: TestClient, token: str) -> TestClient:
    form = client.get("/ui/login")
    assert form.status_code == 200
    csrf = _CSRF.search(form.text).group(1)  # type: ignore[union-attr]
    done = client.post("/ui/login", data={"csrf": csrf, "token": token})
    assert done.status_code == 303 and done.headers["location"] == "/ui/", done.text
    return client


def _viewer(app: App) -> str:
    return create_token(app, "watcher", "viewer", by="test").token


def test_anonymous_gets_the_login_page_and_no_data(pooled: App, browser: TestClient) -> None:
    for path in ("/ui/", f"/ui/pools/{_pool_id(pooled)}"):
        resp = browser.get(path)
        assert resp.status_code == 303 and resp.headers["location"] == "/ui/login"
        assert "gpu" not in resp.text
    for path in ("/ui/fragments/pools", f"/ui/fragments/pools/{_pool_id(pooled)}"):
        resp = browser.get(path)
        assert resp.status_code == 401 and "gpu" not in resp.text
    page = browser.get("/ui/login")
    assert page.status_code == 200 and 'name="token"' in page.text and "gpu" not in page.text
    # A cookie that is not a sealed session is no session.
    browser.cookies.set(SESSION_COOKIE, "acy_" + "A" * 43, domain="testserver", path="/ui")
    assert browser.get("/ui/").status_code == 303


def _pool_id(app: App) -> str:
    return str(app.ledger.query("SELECT id FROM node_pools WHERE name = 'gpu'")[0]["id"])


def test_login_sets_a_sealed_http_only_strict_secure_cookie(pooled: App,
                                                           browser: TestClient) -> None:
    token = _viewer(pooled)
    form = browser.get("/ui/login")
    csrf = _CSRF.search(form.text).group(1)  # type: ignore[union-attr]
    done = browser.post("/ui/login", data={"csrf": csrf, "token": token})
    assert done.status_code == 303
    cookies = [v for k, v in done.headers.multi_items() if k == "set-cookie"]
    session = next(c for c in cookies if c.startswith(SESSION_COOKIE + "="))
    attrs = {a.strip().lower() for a in session.split(";")[1:]}
    assert {"httponly", "secure", "samesite=strict", "path=/ui"} <= attrs, session
    value = session.split(";")[0].split("=", 1)[1]
    assert token not in value and token[4:20] not in value  # sealed, not the token
    page = browser.get("/ui/")
    assert page.status_code == 200
    assert "gpu" in page.text and "watcher (viewer)" in page.text
    for header in ("content-security-policy", "x-content-type-options"):
        assert header in page.headers


def test_a_bad_token_is_refused(world: App, browser: TestClient,
                                callers: dict[str, dict[str, str]]) -> None:
    for caller in ("malformed", "unknown", "revoked", "expired", "agent"):
        token = callers[caller]["Authorization"].split(" ", 1)[1]
        form = browser.get("/ui/login")
        csrf = _CSRF.search(form.text).group(1)  # type: ignore[union-attr]
        done = browser.post("/ui/login", data={"csrf": csrf, "token": token})
        assert done.status_code == 401, (caller, done.text)
        assert "token refused" in done.text and token not in done.text
        assert SESSION_COOKIE not in done.cookies


def test_a_token_scoped_to_an_org_logs_in_and_sees_that_org_alone(
        pooled: App, browser: TestClient, kubeconfig: Path) -> None:
    """The README says a scoped token uses the dashboard: its log-in is not refused, and
    its pages hold its org's pools alone (another org's answers as a missing one)."""
    projects.create_org(pooled, "acme")
    clusters.register_cluster(pooled, clusters.RegisterCluster(
        name="acme-k3s", kubeconfig=kubeconfig, kubernetes_version="v1.36.2+k3s1",
        ca_file=DEMO_CA, offline=True, org="acme"))
    credentials.new_credential(pooled, credentials.NewCredential(
        "acme-aws", "aws", {"profile": "acme"}, org="acme"))
    node_pools.create_node_pool(pooled, node_pools.CreateNodePool(
        name="acme-cpu", cluster="acme-k3s", credentials="acme-aws", region="us-east-1",
        vm_type="m7i.large", min_vms=1, max_vms=1))
    token = create_token(pooled, "acme-wall", "viewer", by="test", org="acme").token
    _login(browser, token)
    page = browser.get("/ui/")
    assert page.status_code == 200 and "acme-cpu" in page.text, page.text[:500]
    assert "acme-wall (viewer)" in page.text
    fragment = browser.get("/ui/fragments/pools")
    for shown in (page.text, fragment.text):
        assert "gpu" not in shown.replace("acme-", "")  # the default org's pool
    assert browser.get(f"/ui/pools/{_pool_id(pooled)}").status_code == 404


def test_csrf_missing_or_wrong_is_refused_and_changes_nothing(pooled: App,
                                                              browser: TestClient) -> None:
    token = _viewer(pooled)
    browser.get("/ui/login")
    assert browser.cookies.get(LOGIN_CSRF_COOKIE)
    before = snapshot(pooled)
    for data in ({"token": token}, {"token": token, "csrf": "forged"}):
        done = browser.post("/ui/login", data=data)
        assert done.status_code == 403 and SESSION_COOKIE not in done.cookies
    # A forged log-in from another site carries no cookie of ours.
    browser.cookies.clear()
    done = browser.post("/ui/login", data={"token": token, "csrf": "x"})
    assert done.status_code == 403
    assert snapshot(pooled) == before
    _login(browser, token)
    for data in ({}, {"csrf": "forged"}):
        assert browser.post("/ui/logout", data=data).status_code == 403
        assert browser.get("/ui/").status_code == 200  # still logged in
    page = browser.get("/ui/")
    csrf = _CSRF.search(page.text).group(1)  # type: ignore[union-attr]
    out = browser.post("/ui/logout", data={"csrf": csrf})
    assert out.status_code == 303 and out.headers["location"] == "/ui/login"
    assert browser.get("/ui/").status_code == 303


def test_a_revoked_tokens_session_is_logged_out_at_once(pooled: App,
                                                        browser: TestClient) -> None:
    _login(browser, _viewer(pooled))
    assert browser.get("/ui/fragments/pools").status_code == 200
    revoke_token(pooled, "watcher", by="test")
    assert browser.get("/ui/fragments/pools").status_code == 401
    gone = browser.get("/ui/")
    assert gone.status_code == 303 and gone.headers["location"] == "/ui/login"
    assert "gpu" not in gone.text


def test_bearer_works_for_scripts(pooled: App, browser: TestClient,
                                  callers: dict[str, dict[str, str]]) -> None:
    page = browser.get("/ui/", headers=callers["viewer"])
    assert page.status_code == 200 and "gpu" in page.text
    assert 'action="/ui/logout"' not in page.text  # no session to end
    assert browser.get("/ui/", headers=callers["revoked"]).status_code == 401
    assert browser.get("/ui/", headers=callers["agent"]).status_code == 403


def test_the_overview_and_the_pool_page_show_what_the_api_shows(
        pooled: App, browser: TestClient, callers: dict[str, dict[str, str]]) -> None:
    _login(browser, _viewer(pooled))
    page = browser.get("/ui/").text
    api = browser.get("/v1/node-pools", headers=callers["viewer"]).json()["items"][0]
    assert escape(api["lastError"]) == "dial tcp &lt;api-server&gt;: connection refused"
    assert escape(api["lastError"]) in page and "203.0.113.10" not in page  # redacted as the API
    assert 'data-state="failed"' in page and "✖ failed" in page  # text, not colour only
    assert f'href="/ui/pools/{api["id"]}"' in page
    assert ('<li class="count state-failed"><a href="/ui/?state=failed"><span class="n">1</span>'
            ' failed</a></li>') in page
    pool = browser.get(f"/ui/pools/{api['id']}")
    assert pool.status_code == 200 and "Node pool gpu" in pool.text
    assert escape(api["lastError"]) in pool.text and "203.0.113.10" not in pool.text
    fragment = browser.get(f"/ui/fragments/pools/{api['id']}")
    assert fragment.status_code == 200 and "<html" not in fragment.text


def test_a_viewer_reaches_no_write_endpoint(pooled: App, browser: TestClient,
                                            callers: dict[str, dict[str, str]]) -> None:
    _login(browser, _viewer(pooled))
    page = browser.get("/ui/").text
    # The page's only form is log out.
    assert re.findall(r'<form[^>]*action="([^"]+)"', page) == ["/ui/logout"]
    before = snapshot(pooled)
    # The session cookie is no credential for the API ...
    assert browser.post("/v1/node-pools", json=POOL).status_code == 401
    assert browser.delete("/v1/node-pools/gpu").status_code == 401
    # ... and the viewer's token is refused by every write route.
    assert browser.post("/v1/node-pools", json=POOL,
                        headers=callers["viewer"]).status_code == 403
    assert browser.delete("/v1/node-pools/gpu", headers=callers["viewer"]).status_code == 403
    assert snapshot(pooled) == before


def test_an_unknown_pool_gets_an_html_404_behind_the_same_gate(
        pooled: App, browser: TestClient, callers: dict[str, dict[str, str]]) -> None:
    ref = "np-nosuch<b>"
    path = "/ui/pools/np-nosuch%3Cb%3E"
    # Anonymous: the log-in page, as for a pool that exists; nothing said of the ref.
    resp = browser.get(path)
    assert resp.status_code == 303 and resp.headers["location"] == "/ui/login"
    assert "nosuch" not in resp.text
    assert browser.get(path, headers=callers["agent"]).status_code == 403
    _login(browser, _viewer(pooled))
    page = browser.get(path)
    assert page.status_code == 404 and page.headers["content-type"].startswith("text/html")
    assert page.headers["content-security-policy"].startswith("default-src 'none'")
    assert "<h1>Node pool not found</h1>" in page.text
    assert f"<code>{escape(ref)}</code>" in page.text and ref not in page.text  # escaped
    assert '<a href="/ui/">Back to the overview' in page.text
    assert 'action="/ui/logout"' in page.text  # the same layout, the session's header
    assert "gpu" not in page.text and "203.0.113.10" not in page.text  # no other pool's data
    # A pool that exists still has its page; its fragment route answers a short 404.
    assert browser.get(f"/ui/pools/{_pool_id(pooled)}").status_code == 200
    fragment = browser.get(path.replace("/ui/pools/", "/ui/fragments/pools/"))
    assert fragment.status_code == 404 and "<html" not in fragment.text
    assert "gpu" not in fragment.text
