"""The JSON-over-HTTPS helper: errors name the API and what it answered, paging ends, and the
urllib transport really talks HTTP (to servers on loopback)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from hypothesis import given
from hypothesis import strategies as st

from automation.catalog.refresh.http import (
    JsonHttp,
    Replay,
    Request,
    Response,
    TransportError,
    next_link,
    page_token_link,
    urllib_transport,
    with_query,
)
from automation.catalog.refresh.model import RefreshError

URL = "https://api.example.test/v1/things"


def _http(answer: Response | Exception, url: str = URL) -> JsonHttp:
    return JsonHttp("demo api", Replay({("GET", url): answer}))


# Error bodies in the clouds' documented formats (Google JSON error, ARM error, OAuth token
# endpoints); the recorded success pages are in the GCP and Azure tests.
GOOGLE_403 = {"error": {"code": 403, "message": "Required 'compute.machineTypes.list' "
                        "permission for 'projects/demo'", "status": "PERMISSION_DENIED"}}
ARM_429 = {"error": {"code": "TooManyRequests", "message": "The request is being throttled."}}
OAUTH_400 = {"error": "invalid_grant", "error_description": "Invalid JWT Signature."}


@pytest.mark.parametrize(("status", "body", "expected"), [
    (401, OAUTH_400, "HTTP 401 Invalid JWT Signature."),
    (403, GOOGLE_403, "HTTP 403 PERMISSION_DENIED: Required 'compute.machineTypes.list'"),
    (429, ARM_429, "HTTP 429 TooManyRequests: The request is being throttled. (rate limited)"),
    (500, b"<html>Internal Server Error</html>", "HTTP 500 <html>Internal Server Error</html>"),
])
def test_an_error_status_names_the_api_what_was_asked_and_the_answer(status, body, expected):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    with pytest.raises(RefreshError) as err:
        _http(Response(status, raw)).get(URL, "things in region-1")
    assert str(err.value).startswith("demo api things in region-1: ")
    assert expected in str(err.value)


def test_a_429_says_when_to_retry():
    answer = Response(429, json.dumps(ARM_429).encode(), {"Retry-After": "17"})
    with pytest.raises(RefreshError, match=r"rate limited; retry after 17s"):
        _http(answer).get(URL, "things")


def test_an_aad_error_keeps_the_reason_and_drops_the_trace_lines():
    body = {"error": "invalid_client", "error_description":
            "AADSTS7000215: Invalid client secret provided.\r\nTrace ID: 0000\r\nTimestamp: x"}
    with pytest.raises(RefreshError) as err:
        _http(Response(401, json.dumps(body).encode())).get(URL, "token")
    assert str(err.value) == ("demo api token: HTTP 401 AADSTS7000215: Invalid client secret "
                              "provided.")


@pytest.mark.parametrize("body", [b"{not json", b"", "\u00ff".encode("latin-1")])
def test_malformed_json_is_a_refresh_error(body):
    with pytest.raises(RefreshError, match=r"demo api things: the answer is not JSON"):
        _http(Response(200, body)).get(URL, "things")


def test_a_json_array_where_an_object_is_expected_is_a_refresh_error():
    with pytest.raises(RefreshError, match="expected a JSON object, got list"):
        _http(Response(200, b"[1, 2]")).get(URL, "things")


def test_no_answer_at_all_is_a_refresh_error_with_the_reason():
    with pytest.raises(RefreshError, match=r"demo api things: no answer within 60s"):
        _http(TransportError("no answer within 60s")).get(URL, "things")


def test_post_form_sends_an_urlencoded_body():
    replay = Replay({("POST", URL): Response(200, b'{"access_token": "t"}')})
    JsonHttp("demo api", replay).post_form(URL, {"a": "b c", "scope": "x/.default"}, "token")
    sent = replay.requests[0]
    assert sent.headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert sent.body == b"a=b+c&scope=x%2F.default"


def test_a_token_answer_without_a_token_is_a_refresh_error():
    ok = JsonHttp("demo api", Replay({("POST", URL): Response(200, b'{"access_token": "t"}')}))
    assert ok.access_token(URL, {"grant_type": "x"}, "token for me") == "t"
    empty = JsonHttp("demo api", Replay({("POST", URL): Response(200, b'{"token_type": "B"}')}))
    with pytest.raises(RefreshError, match="demo api token for me: the answer has no "
                                           "access_token"):
        empty.access_token(URL, {"grant_type": "x"}, "token for me")


def test_pages_follows_page_tokens_until_none():
    second = with_query(URL, pageToken="t/2=")
    replay = Replay({
        ("GET", URL): Response(200, b'{"n": 1, "nextPageToken": "t/2="}'),
        ("GET", second): Response(200, b'{"n": 2}'),
    })
    pages = list(JsonHttp("demo api", replay).pages(URL, "things", page_token_link()))
    assert [p["n"] for p in pages] == [1, 2]
    assert [r.url for r in replay.requests] == [URL, second]


def test_pages_stops_a_link_that_points_back():
    replay = Replay({("GET", URL): Response(200, json.dumps({"nextLink": URL}).encode())})
    with pytest.raises(RefreshError, match="paging does not end"):
        list(JsonHttp("demo api", replay).pages(URL, "things", next_link("nextLink")))


def test_a_failure_on_a_later_page_names_the_page():
    replay = Replay({
        ("GET", URL): Response(200, json.dumps({"nextLink": URL + "?p=2"}).encode()),
        ("GET", URL + "?p=2"): Response(500, b"{}"),
    })
    with pytest.raises(RefreshError, match=r"things \(page 2\): HTTP 500"):
        list(JsonHttp("demo api", replay).pages(URL, "things", next_link("nextLink")))


@given(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1))
def test_with_query_round_trips_any_token(token):
    import urllib.parse

    url = with_query(URL + "?maxResults=500", pageToken=token)
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query))
    assert query == {"maxResults": "500", "pageToken": token}


# --- the real urllib path, against servers on loopback --------------------------------------


@pytest.fixture
def server() -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # http.server calls it by this name
            status = int(self.path.rsplit("/", 1)[-1])
            body = json.dumps({"error": {"code": status, "message": "from the test server",
                                         "status": "DENIED"}}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_urllib_transport_returns_error_statuses_as_answers(server):
    resp = urllib_transport(Request("GET", f"{server}/status/403"))
    assert resp.status == 403
    assert json.loads(resp.body)["error"]["message"] == "from the test server"
    with pytest.raises(RefreshError, match=r"HTTP 403 DENIED: from the test server"):
        JsonHttp("demo api").get(f"{server}/status/403", "things")


def test_urllib_transport_reads_a_200(server):
    assert urllib_transport(Request("GET", f"{server}/status/200")).status == 200


def test_urllib_transport_times_out_on_a_server_that_never_answers():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)  # accepts the connection, never writes a byte
    try:
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/"
        with pytest.raises(RefreshError, match=r"demo api things: no answer within 0.3s"):
            JsonHttp("demo api", timeout=0.3).get(url, "things")
    finally:
        listener.close()


def test_urllib_transport_reports_a_refused_connection():
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there now
    with pytest.raises(TransportError):
        urllib_transport(Request("GET", f"http://127.0.0.1:{port}/", timeout=2))
