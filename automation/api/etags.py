"""ETags of mutable records, and ``If-Match`` on the requests that change them.

A record's ETag is a digest of the record as the API shows it (``NodePool`` for a pool):
any change to what a client can see changes it. A client that read a pool, then deletes it
with ``If-Match: <that ETag>``, gets a 412 if the pool changed in between, and nothing
happens. The comparison runs in the service's own transaction, under the row lock
(``expect``), so a write that lands between the check and the change is impossible, not
merely unlikely."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import Header, Response
from pydantic import BaseModel

from automation.api.problems import Problem
from automation.errors import AnycloudError

HEADER = "If-Match"
# A route's If-Match parameter, and the 412 it may answer (in the OpenAPI document).
IfMatch = Annotated[str | None, Header(
    alias=HEADER, description="Change only if the record is still at this ETag.")]


class PreconditionFailed(AnycloudError):
    default_code = "PRECONDITION_FAILED"
    http_status = 412
    exit_code = 2

    def __init__(self, given: str, current: str) -> None:
        super().__init__(f"the record changed since it was read (its ETag is now {current})",
                         field=HEADER, value=given,
                         rule="must be the record's current ETag: read it again, then retry")


STALE: dict[int | str, dict[str, Any]] = {
    412: {"model": Problem, "description": "If-Match names an older version"}}


def etag(record: BaseModel) -> str:
    digest = hashlib.sha256(record.model_dump_json().encode()).hexdigest()
    return f'"{digest[:24]}"'


def tag(response: Response, record: BaseModel) -> None:
    response.headers["ETag"] = etag(record)


def expectation(given: str | None, view: Callable[[Any], BaseModel] = lambda record: record,
                ) -> Callable[[Any], None] | None:
    """What the service checks under its lock when the request carries ``If-Match`` (None:
    it carries none, and the change is unconditional). ``view``: what the service hands the
    check (the locked row, or the record it built from it) as the API shows the record."""
    if given is None:
        return None
    wanted = {t.strip() for t in given.split(",")}

    def check(row: Any) -> None:
        current = etag(view(row))
        if "*" not in wanted and current not in wanted:
            raise PreconditionFailed(given, current)

    return check
