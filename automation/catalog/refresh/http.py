"""JSON over HTTPS for the GCP and Azure fetchers: GET, form POST and paging, with every
failure turned into one :class:`RefreshError` line that names the API and what it answered.

The network sits behind a :data:`Transport` (a function from :class:`Request` to
:class:`Response`): :func:`urllib_transport` in production, :class:`Replay` in the tests,
which answers from recorded pages. The standard library is enough for a few GETs; the cloud
SDKs would cost hundreds of MB for them.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from automation.catalog.refresh.model import RefreshError

TIMEOUT_SECONDS = 60.0
MAX_PAGES = 500  # a few hundred pages is already every SKU of a cloud; more means a loop


@dataclass(frozen=True)
class Request:
    method: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes | None = None
    timeout: float = TIMEOUT_SECONDS


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)


class TransportError(Exception):
    """The request got no HTTP answer at all (DNS, connection refused, timeout, TLS)."""


Transport = Callable[[Request], Response]


def urllib_transport(request: Request) -> Response:
    """One HTTPS exchange with urllib; an HTTP error status is an answer, not an exception."""
    req = urllib.request.Request(
        request.url, data=request.body, headers=dict(request.headers), method=request.method
    )
    try:
        with urllib.request.urlopen(req, timeout=request.timeout) as resp:
            return Response(resp.status, resp.read(), dict(resp.headers.items()))
    except urllib.error.HTTPError as err:
        return Response(err.code, err.read() or b"", dict(err.headers.items()))
    except TimeoutError as err:
        raise TransportError(f"no answer within {request.timeout:g}s") from err
    except urllib.error.URLError as err:
        if isinstance(err.reason, TimeoutError):  # a connect timeout arrives wrapped
            raise TransportError(f"no answer within {request.timeout:g}s") from err
        raise TransportError(str(err.reason)) from err
    except OSError as err:
        raise TransportError(str(err)) from err


def _error_detail(body: bytes) -> str:
    """The cloud's own error text: Google and ARM put it in ``error.message``, the OAuth token
    endpoints in ``error_description`` (or ``error``)."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        text = body.decode("utf-8", "replace").strip()
        return " ".join(text.split())[:200]
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict):
            code = err.get("status") or err.get("code")
            message = err.get("message") or ""
            return f"{code}: {message}" if code else str(message)
        if data.get("error_description"):
            # AAD appends trace and correlation ids after the first line; keep the reason.
            return str(data["error_description"]).splitlines()[0]
        if isinstance(err, str):
            return err
    return json.dumps(data)[:200]


class JsonHttp:
    """Requests to one API (``api`` names it in every error, e.g. ``"gcp compute"``)."""

    def __init__(self, api: str, transport: Transport | None = None,
                 timeout: float = TIMEOUT_SECONDS) -> None:
        self.api = api
        self.transport = transport or urllib_transport
        self.timeout = timeout

    def _exchange(self, request: Request, what: str) -> dict[str, Any]:
        try:
            resp = self.transport(request)
        except TransportError as err:
            raise RefreshError(f"{self.api} {what}: {err}") from err
        if resp.status != 200:
            detail = _error_detail(resp.body)
            hint = ""
            if resp.status == 429:
                retry = {k.lower(): v for k, v in resp.headers.items()}.get("retry-after")
                hint = f" (rate limited; retry after {retry}s)" if retry else " (rate limited)"
            raise RefreshError(f"{self.api} {what}: HTTP {resp.status} {detail}{hint}".rstrip())
        try:
            data = json.loads(resp.body)
        except (ValueError, UnicodeDecodeError) as err:
            raise RefreshError(f"{self.api} {what}: the answer is not JSON ({err})") from err
        if not isinstance(data, dict):
            raise RefreshError(f"{self.api} {what}: expected a JSON object, got "
                               f"{type(data).__name__}")
        return data

    def get(self, url: str, what: str, headers: Mapping[str, str] | None = None
            ) -> dict[str, Any]:
        hdrs = {"Accept": "application/json", **(headers or {})}
        return self._exchange(Request("GET", url, hdrs, None, self.timeout), what)

    def post_form(self, url: str, fields: Mapping[str, str], what: str) -> dict[str, Any]:
        body = urllib.parse.urlencode(fields).encode()
        hdrs = {"Accept": "application/json",
                "Content-Type": "application/x-www-form-urlencoded"}
        return self._exchange(Request("POST", url, hdrs, body, self.timeout), what)

    def access_token(self, url: str, fields: Mapping[str, str], what: str) -> str:
        """An OAuth2 token request: the answer's ``access_token``, or a failure saying so."""
        token = self.post_form(url, fields, what).get("access_token")
        if not isinstance(token, str) or not token:
            raise RefreshError(f"{self.api} {what}: the answer has no access_token")
        return token

    def pages(self, first_url: str, what: str, next_url: Callable[[dict[str, Any], str],
              str | None], headers: Mapping[str, str] | None = None
              ) -> Iterator[dict[str, Any]]:
        """Every page from ``first_url`` on; ``next_url(page, url)`` gives the following page's
        URL or None. A link seen twice, or more than MAX_PAGES pages, is a failure."""
        url: str | None = first_url
        seen: set[str] = set()
        while url is not None:
            if url in seen or len(seen) >= MAX_PAGES:
                raise RefreshError(f"{self.api} {what}: paging does not end "
                                   f"(page {len(seen) + 1}: {url})")
            seen.add(url)
            page = self.get(url, f"{what} (page {len(seen)})", headers)
            yield page
            url = next_url(page, url)


def with_query(url: str, **params: str) -> str:
    """``url`` with ``params`` set in its query (replacing any of the same name)."""
    parts = urllib.parse.urlsplit(url)
    query = [(k, v) for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
             if k not in params]
    query.extend(params.items())
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(
        query, quote_via=urllib.parse.quote, safe="$',")))


def page_token_link(token_field: str = "nextPageToken") -> Callable[[dict[str, Any], str],
                                                                      str | None]:
    """Google style: the next page is the same URL with ``pageToken`` set."""
    def link(page: dict[str, Any], url: str) -> str | None:
        token = page.get(token_field)
        return with_query(url, pageToken=str(token)) if token else None
    return link


def next_link(link_field: str) -> Callable[[dict[str, Any], str], str | None]:
    """Azure style: the page carries the next page's full URL (``nextLink``/``NextPageLink``)."""
    def link(page: dict[str, Any], url: str) -> str | None:
        value = page.get(link_field)
        return str(value) if value else None
    return link


class Replay:
    """A transport that answers from recorded pages, for tests: ``answers`` maps
    ``(method, url)`` to a :class:`Response` (or an exception to raise), and every request is
    kept in ``requests`` so a test can check what was asked."""

    def __init__(self, answers: Mapping[tuple[str, str], Response | Exception]) -> None:
        self.answers = dict(answers)
        self.requests: list[Request] = []

    def __call__(self, request: Request) -> Response:
        self.requests.append(request)
        answer = self.answers.get((request.method, request.url))
        if answer is None:
            known = "\n  ".join(f"{m} {u}" for m, u in self.answers)
            raise AssertionError(f"unrecorded request {request.method} {request.url}; "
                                 f"recorded:\n  {known}")
        if isinstance(answer, Exception):
            raise answer
        return answer
