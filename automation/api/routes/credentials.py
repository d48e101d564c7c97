"""Credentials: read by any reader, added, rotated and deleted by an admin. A secret sent here
is sealed under the server's key and never returned: answers carry its fingerprint and the
non-secret fields only (``automation.services.credentials``)."""

from __future__ import annotations

from fastapi import Request, Response

from automation.api import etags
from automation.api.idempotency import once
from automation.api.paging import DEFAULT_PAGE_SIZE, Page, PageSize, PageToken, by_name, page_of
from automation.api.routers import v1
from automation.api.security import Admin, Reader
from automation.errors import InvalidInput
from automation.models import (
    Credential,
    MovedToOrg,
    MoveToOrg,
    NewCredentialRequest,
    RotateCredentialRequest,
)
from automation.services import credentials, org_moves
from automation.services.tenancy import only_visible, resolve, visible_ids

router = v1("credentials")


class CredentialPage(Page[Credential]):
    pass


@router.get("/credentials")
def list_credentials(request: Request, who: Reader, page_size: PageSize = DEFAULT_PAGE_SIZE,
                     page_token: PageToken = None) -> CredentialPage:
    ctx = request.app.state.ctx
    found = only_visible(credentials.list_credentials(ctx), visible_ids(ctx, who, "credential"))
    return page_of(CredentialPage, found, by_name, page_size=page_size,
                   page_token=page_token, filters={})


@router.get("/credentials/{ref}")
def get_credential(request: Request, response: Response, ref: str, who: Reader
                   ) -> Credential:
    """With the credential's ETag (for If-Match on rotate and DELETE)."""
    ctx = request.app.state.ctx
    found = credentials.get_credential(ctx, resolve(ctx, who, "credential", ref, field="ref"))
    etags.tag(response, found)
    return found


@router.post("/credentials", status_code=201, response_model=Credential)
def new_credential(request: Request, body: NewCredentialRequest, who: Admin) -> Response:
    """Add a credential: the secret itself (``secret``), sealed by the server, or, for a
    server that has its own identity, the ids alone (``roleArn``; Azure's ids with the
    server's ARM_CLIENT_SECRET)."""
    for name, value in (("profile", body.profile), ("keyFile", body.key_file)):
        if value is not None:
            raise InvalidInput(name, value, "names a file on the client's machine, which the "
                               "server cannot read: send the secret itself in `secret`")
    req = credentials.NewCredential(body.name, body.provider, body.options(), body.secret,
                                    org=body.org)
    return once(request, who, body, lambda: credentials.new_credential(
        request.app.state.ctx, req), status=201)


@router.post("/credentials/{ref}/rotate", response_model=Credential, responses=etags.STALE)
def rotate_credential(request: Request, ref: str, body: RotateCredentialRequest,
                      who: Admin, if_match: etags.IfMatch = None) -> Response:
    """Replace the sealed secret; the old one is gone from the server once this answers."""
    return once(request, who, body, lambda: credentials.rotate_credential(
        request.app.state.ctx, ref, body.secret, etags.expectation(if_match)), status=200)


@router.delete("/credentials/{ref}", responses=etags.STALE)
def delete_credential(request: Request, ref: str, _: Admin, if_match: etags.IfMatch = None,
                      ) -> Credential:
    """Refused while a node pool uses it; its sealed secret goes with it."""
    return credentials.delete_credential(request.app.state.ctx, ref,
                                         etags.expectation(if_match))


@router.post("/credentials/{ref}/move", responses=etags.STALE)
def move_credential(request: Request, ref: str, body: MoveToOrg, _: Admin,
                    if_match: etags.IfMatch = None) -> MovedToOrg:
    """To another org; refused while a node pool uses it (it moves with their cluster)."""
    return org_moves.move_credential(request.app.state.ctx, ref, body.org,
                                     etags.expectation(if_match))
