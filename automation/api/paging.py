"""Lists in pages: ``pageSize`` (1-1000, default 100) and an opaque ``pageToken``; the answer's
``nextPageToken`` is None on the last page. A token holds the sort key of the last item
given and a digest of the query's filters: a token from another query is refused, and items
created or deleted between pages never shift the ones after."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Generic, TypeVar

from fastapi import Query

from automation.errors import InvalidInput
from automation.models import CamelModel

T = TypeVar("T")
P = TypeVar("P", bound="Page[Any]")
DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000


class Page(CamelModel, Generic[T]):
    items: list[T]
    next_page_token: str | None = None


# Every list route's two paging parameters.
PageSize = Annotated[int, Query(alias="pageSize", json_schema_extra={
    "minimum": 1, "maximum": MAX_PAGE_SIZE})]
PageToken = Annotated[str | None, Query(alias="pageToken")]


def by_name(record: Any) -> tuple[str, str]:
    """The order of most lists: by name, then id (names of deleted records may recur)."""
    return (record.name, record.id)


def _digest(filters: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(filters, sort_keys=True).encode()).hexdigest()[:12]


def _encode(key: Sequence[Any], filters: dict[str, Any]) -> str:
    raw = json.dumps({"k": list(key), "f": _digest(filters)}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _decode(token: str, filters: dict[str, Any], like: Sequence[Any] | None) -> list[Any]:
    """The key a token holds, of the shape of ``like`` (a key of the list's own; None: the
    list is empty, nothing is compared)."""
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        key, digest = data["k"], data["f"]
        if not isinstance(key, list):
            raise ValueError
    except (ValueError, KeyError, TypeError, RecursionError):
        raise InvalidInput("pageToken", token, "must be a nextPageToken this API gave") from None
    if digest != _digest(filters):
        raise InvalidInput("pageToken", token, "belongs to a list with other filters: "
                           "give the same filters as the first page")
    if like is not None and not _same_shape(key, like):
        # A forged key (another length, a list for a name) cannot be compared to the list's.
        raise InvalidInput("pageToken", token, "must be a nextPageToken this API gave")
    return key


def _same_shape(key: list[Any], like: Sequence[Any]) -> bool:
    return len(key) == len(like) and all(type(k) is type(o) for k, o in zip(key, like,
                                                                             strict=True))


def page_of(page: type[P], items: Sequence[T], key: Callable[[T], Sequence[Any]], *,
            page_size: int, page_token: str | None, filters: dict[str, Any]) -> P:
    """The ``page`` (a ``Page`` of the route's own name) after ``page_token`` of ``items``
    (sorted by ``key``)."""
    if not 1 <= page_size <= MAX_PAGE_SIZE:
        raise InvalidInput("pageSize", page_size, f"must be between 1 and {MAX_PAGE_SIZE}")
    ordered = sorted(items, key=lambda i: list(key(i)))
    if page_token:
        after = _decode(page_token, filters, key(ordered[0]) if ordered else None)
        ordered = [i for i in ordered if list(key(i)) > after]
    chosen = ordered[:page_size]
    more = len(ordered) > page_size
    return page(items=chosen, next_page_token=_encode(key(chosen[-1]), filters) if more else None)
