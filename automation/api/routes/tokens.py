"""API tokens: admin only. The first admin token is never made here (``--bootstrap`` on the
server's host)."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from fastapi import Query, Request, Response

from automation.api.idempotency import once
from automation.api.paging import DEFAULT_PAGE_SIZE, Page, PageSize, PageToken, by_name, page_of
from automation.api.routers import v1
from automation.api.security import Admin
from automation.models import ApiToken, IssuedToken, NewToken
from automation.services import tokens

router = v1("tokens")


class TokenPage(Page[ApiToken]):
    pass


@router.get("/tokens")
def list_tokens(request: Request, _: Admin,
                all: Annotated[bool, Query(description="Revoked tokens too.")] = False,
                page_size: PageSize = DEFAULT_PAGE_SIZE, page_token: PageToken = None,
                ) -> TokenPage:
    found = tokens.list_tokens(request.app.state.ctx, include_revoked=all)
    return page_of(TokenPage, found, by_name, page_size=page_size, page_token=page_token,
                   filters={"all": all})


@router.post("/tokens", status_code=201, response_model=IssuedToken)
def create_token(request: Request, body: NewToken, who: Admin) -> Response:
    """The token is in this answer only; the server keeps its hash (so a retry with the same
    Idempotency-Key is a 409, not the token again)."""
    expires = timedelta(seconds=body.expires_in_seconds) if body.expires_in_seconds else None
    answer = once(request, who, body, lambda: tokens.create_token(
        request.app.state.ctx, body.name, body.role, by=who.name, expires_in=expires,
        pool=body.pool, org=body.org, project=body.project), status=201, secret="token")
    answer.headers["Cache-Control"] = "no-store"  # no cache or proxy keeps the token
    return answer


@router.delete("/tokens/{name:path}")  # agent tokens are named agentpool/NS/NAME
def revoke_token(request: Request, name: str, who: Admin) -> ApiToken:
    return tokens.revoke_token(request.app.state.ctx, name, by=who.name)
