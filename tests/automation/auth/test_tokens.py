"""API tokens (issue 20): issued once, stored as a hash, revoked, expired, bootstrapped once;
and the role rule every endpoint applies."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from automation.app import App
from automation.auth import tokens
from automation.auth.roles import ROLES, Access, Principal, authorize
from automation.clock import ManualClock
from automation.errors import Conflict, InvalidInput, NotFound, PermissionDenied, Unauthenticated
from automation.ledger import schema
from automation.services.tokens import create_token, list_tokens, revoke_token
from tests.automation.conftest import ok_json, snapshot


def _clock(app: App) -> ManualClock:
    assert isinstance(app.clock, ManualClock)
    return app.clock


def test_a_token_is_shown_once_and_stored_only_as_a_hash(app: App) -> None:
    made = create_token(app, "ci", "member", by="local:alice")
    assert made.token.startswith("acy_") and len(made.token) == 47
    assert made.prefix == made.token[:10] and made.state == "active"
    who = tokens.authenticate(app.ledger, made.token, app.clock.now())
    assert (who.name, who.role, who.scope) == ("ci", "member", None)
    # Nowhere in the ledger: not the token table, not the event log.
    dump = json.dumps(snapshot(app), default=str)
    assert made.token not in dump and made.token[10:] not in dump
    listed = list_tokens(app)
    assert [t.name for t in listed] == ["ci"]
    assert "token" not in listed[0].model_dump()


@pytest.mark.parametrize(("token", "says"), [
    ("", "malformed"), ("acy_short", "malformed"), ("ghp_" + "a" * 43, "malformed"),
    ("acy_" + "a" * 42 + "!", "malformed"), ("acy_" + "a" * 43, "unknown"),
])
def test_a_token_the_control_plane_did_not_issue_is_refused(app: App, token: str,
                                                            says: str) -> None:
    with pytest.raises(Unauthenticated, match=says) as err:
        tokens.authenticate(app.ledger, token, app.clock.now())
    assert err.value.code == "UNAUTHENTICATED" and err.value.field == "token"
    if len(token) > 10:
        assert token not in err.value.message and token not in str(err.value.value)


def test_revoked_and_expired_tokens_are_refused(app: App) -> None:
    old = create_token(app, "old", "viewer", by="t")
    brief = create_token(app, "brief", "viewer", by="t", expires_in=timedelta(hours=1))
    revoked = revoke_token(app, "old", by="t")
    assert revoked.state == "revoked" and revoked.revoked_at == app.clock.now()
    with pytest.raises(Unauthenticated, match="'old' was revoked"):
        tokens.authenticate(app.ledger, old.token, app.clock.now())
    assert tokens.authenticate(app.ledger, brief.token, app.clock.now()).name == "brief"
    _clock(app).advance(timedelta(hours=1))
    with pytest.raises(Unauthenticated, match="'brief' expired at"):
        tokens.authenticate(app.ledger, brief.token, app.clock.now())
    assert [(t.name, t.state) for t in list_tokens(app)] == [("brief", "expired")]
    assert {(t.name, t.state) for t in list_tokens(app, include_revoked=True)} == {
        ("brief", "expired"), ("old", "revoked")}
    with pytest.raises(NotFound):
        revoke_token(app, "old", by="t")


def test_a_name_is_free_again_once_its_token_is_revoked(app: App) -> None:
    create_token(app, "ci", "member", by="t")
    with pytest.raises(Conflict, match="already exists"):
        create_token(app, "ci", "viewer", by="t")
    revoke_token(app, "ci", by="t")
    again = create_token(app, "ci", "viewer", by="t")
    assert tokens.authenticate(app.ledger, again.token, app.clock.now()).role == "viewer"


def test_bootstrap_makes_only_the_first_admin(app: App) -> None:
    first = create_token(app, "root", "admin", by="t", bootstrap=True)
    before = snapshot(app)
    with pytest.raises(Conflict, match="admin token already exists") as err:
        create_token(app, "second", "admin", by="t", bootstrap=True)
    assert err.value.field == "--bootstrap"
    assert snapshot(app) == before
    # With every admin token gone (revoked or expired) the bootstrap step works again:
    # it is how a team recovers a lost admin token, on the server's host only.
    revoke_token(app, first.name, by="t")
    create_token(app, "root2", "admin", by="t", bootstrap=True,
                 expires_in=timedelta(minutes=5))
    _clock(app).advance(timedelta(minutes=5))
    assert create_token(app, "root3", "admin", by="t", bootstrap=True).role == "admin"


@pytest.mark.parametrize(("kwargs", "field", "rule"), [
    (dict(name="Bad_Name", role="member"), "name", "DNS-1123 label"),
    (dict(name="ci", role="owner"), "--role", "one of admin, member, viewer, agent"),
    (dict(name="ci", role="agent"), "--pool", "NAMESPACE/NAME"),
    (dict(name="ci", role="agent", pool="gpu"), "--pool", "NAMESPACE/NAME"),
    (dict(name="ci", role="agent", pool="default/GPU"), "--pool", "DNS-1123 label"),
    (dict(name="ci", role="member", pool="default/gpu"), "--pool", "only for --role agent"),
    (dict(name="ci", role="member", expires_in=timedelta(0)), "--expires", "above 0"),
    (dict(name="ci", role="member", bootstrap=True), "--bootstrap", "--role admin"),
])
def test_bad_input_names_field_and_rule_and_writes_nothing(app: App, kwargs: dict[str, Any],
                                                           field: str, rule: str) -> None:
    before = snapshot(app)
    with pytest.raises(InvalidInput) as err:
        create_token(app, by="t", **kwargs)
    assert err.value.field == field and rule in (err.value.rule or "")
    assert snapshot(app) == before


def test_minting_an_agent_token_revokes_the_pools_earlier_ones(app: App) -> None:
    now = app.clock.now()
    first = tokens.mint_agent_token(app.ledger, "default/gpu", by="operator", now=now)
    other = tokens.mint_agent_token(app.ledger, "default/cpu", by="operator", now=now)
    second = tokens.mint_agent_token(app.ledger, "default/gpu", by="operator", now=now)
    with pytest.raises(Unauthenticated, match="revoked"):
        tokens.authenticate(app.ledger, first, now)
    assert tokens.authenticate(app.ledger, second, now).scope == "default/gpu"
    assert tokens.authenticate(app.ledger, other, now).scope == "default/cpu"
    with app.ledger.read() as conn:
        live = conn.execute(sa.select(schema.api_tokens.c.scope).where(
            tokens.live(now))).scalars().all()
    assert sorted(live) == ["default/cpu", "default/gpu"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=60) | st.builds(lambda s: "acy_" + s, st.text(max_size=50)))
def test_any_string_is_refused_as_unauthenticated_never_a_crash(token: str) -> None:
    class _NoLedger:
        def read(self) -> Any:
            raise AssertionError("a malformed token must not reach the ledger")

    try:
        tokens.authenticate(_NoLedger(), token, ManualClock().now())  # type: ignore[arg-type]
    except Unauthenticated as err:
        assert err.value != token or len(token) <= 10
    except AssertionError:
        assert tokens._TOKEN.fullmatch(token)


@pytest.mark.parametrize("header", [None, "", "Basic abc", "Bearer", "Bearer   "])
def test_a_missing_or_foreign_authorization_header_is_unauthenticated(header: str | None) -> None:
    with pytest.raises(Unauthenticated):
        tokens.bearer(header)


def test_bearer_takes_the_token() -> None:
    assert tokens.bearer("Bearer acy_x") == "acy_x" and tokens.bearer("bearer  acy_y ") == "acy_y"


def _who(role: str, scope: str | None = None) -> Principal:
    return Principal(token_id="tok-1", name="t", role=role, scope=scope)  # type: ignore[arg-type]


# role -> the accesses it has (pool "default/gpu" where a pool matters)
_ALLOWED = {
    "admin": {Access.READ, Access.WRITE, Access.ADMIN},
    "member": {Access.READ, Access.WRITE},
    "viewer": {Access.READ},
    "agent": {Access.READ, Access.AGENT},
}


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("access", list(Access))
def test_the_role_rule(role: str, access: Access) -> None:
    who = _who(role, "default/gpu" if role == "agent" else None)
    if access in _ALLOWED[role]:
        authorize(who, access, pool="default/gpu")
    else:
        with pytest.raises(PermissionDenied) as err:
            authorize(who, access, pool="default/gpu")
        assert err.value.field == "role" and err.value.value == role and err.value.rule


@pytest.mark.parametrize("access", [Access.AGENT, Access.READ])
def test_an_agent_acts_for_its_own_pool_only(access: Access) -> None:
    who = _who("agent", "default/gpu")
    for pool in ("default/cpu", "other/gpu", None):
        with pytest.raises(PermissionDenied, match="agent of default/gpu"):
            authorize(who, access, pool=pool)


def test_cli_create_prints_the_token_alone_on_stdout_then_list_and_revoke(run: Any) -> None:
    made = run("token", "create", "root", "--role", "admin", "--bootstrap")
    assert made.exit_code == 0, made.stderr
    token = made.stdout.strip()
    assert token.startswith("acy_") and "\n" not in token and "shown only now" in made.stderr
    listed = ok_json(run("token", "list", "--json"))
    assert [(t["name"], t["role"], t["state"], t["createdBy"][:6]) for t in listed] == [
        ("root", "admin", "active", "local:")]
    assert token not in json.dumps(listed)
    agent = ok_json(run("token", "create", "gpu-agent", "--role", "agent", "--pool",
                        "default/gpu", "--expires", "7d", "--json"))
    assert agent["scope"] == "default/gpu" and agent["token"].startswith("acy_")
    assert agent["expiresAt"] is not None
    assert ok_json(run("token", "revoke", "root", "--json"))["state"] == "revoked"
    assert [t["name"] for t in ok_json(run("token", "list", "--json"))] == ["gpu-agent"]


@pytest.mark.parametrize("args", [
    ("token", "create", "x", "--role", "root"),
    ("token", "create", "x", "--role", "member", "--expires", "soon"),
    ("token", "create", "x", "--role", "viewer", "--bootstrap"),
    ("token", "revoke", "nobody"),
])
def test_cli_refusals_are_exit_2_json_errors(run: Any, in_each_mode: str,
                                            args: tuple[str, ...]) -> None:
    result = run(*args, "--json")
    assert result.exit_code == 2, result.stdout
    error = json.loads(result.stdout)["error"]
    assert error["field"] and error["code"] in ("INVALID_ARGUMENT", "NOT_FOUND")
