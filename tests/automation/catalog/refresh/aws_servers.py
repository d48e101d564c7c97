"""Loopback servers for the AWS refresh: moto's (EC2, STS) and a Price List API page server.

moto 5.2.5 has no Price List API, so ``PricingServer`` answers ``GetProducts`` in the API's
JSON protocol from the recorded page (``aws_recorded/``) plus compute items of its shape,
paginated two items a page so the client's paginator is exercised (see aws_recorded/SOURCE.md).
"""

from __future__ import annotations

import copy
import io
import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

RECORDED = json.loads((Path(__file__).with_name("aws_recorded") / "get_products_page.json")
                      .read_text())
RECORDED_ITEM: dict[str, Any] = json.loads(RECORDED["PriceList"][0])

# (type, region) -> USD/hour served by the fake Price List API.
PRICES = {
    ("m5.xlarge", "us-east-1"): "0.2010000000",
    ("c5.large", "us-east-1"): "0.0900000000",
    ("g5.xlarge", "us-east-1"): "1.0060000000",
    ("m5.xlarge", "eu-west-1"): "0.2140000000",
}


def compute_item(vm_type: str, region: str, usd: str, **attributes: str) -> dict[str, Any]:
    """A compute product in the recorded item's shape (made for the tests, not recorded)."""
    item = copy.deepcopy(RECORDED_ITEM)
    sku = f"SKU{abs(hash((vm_type, region))) % 10**8:08d}"
    item["product"] = {"productFamily": "Compute Instance", "sku": sku, "attributes": {
        "instanceType": vm_type, "regionCode": region, "operatingSystem": "Linux",
        "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used",
        "servicecode": "AmazonEC2", "usagetype": f"BoxUsage:{vm_type}", **attributes}}
    term = next(iter(item["terms"]["OnDemand"].values()))
    dimension = next(iter(term["priceDimensions"].values()))
    dimension.update(unit="Hrs", pricePerUnit={"USD": usd},
                     description=f"${usd} per On Demand Linux {vm_type} Instance Hour")
    return item


@dataclass
class PricingServer:
    url: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    fail: tuple[int, dict[str, Any]] | None = None  # status and error body to answer with
    # The access key id each request was signed with (its SigV4 credential scope).
    signed_by: list[str] = field(default_factory=list)


@contextmanager
def pricing_server() -> Iterator[PricingServer]:
    state = PricingServer(url="")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.requests.append({"target": self.headers.get("X-Amz-Target"), **body})
            scope = self.headers.get("Authorization", "").partition("Credential=")[2]
            state.signed_by.append(scope.split("/")[0])
            if state.fail is not None:
                self._answer(*state.fail)
                return
            filters = {f["Field"]: f["Value"] for f in body.get("Filters", [])}
            region = filters.get("regionCode")
            items = [RECORDED_ITEM] + [compute_item(t, r, usd) for (t, r), usd in
                                       sorted(PRICES.items()) if r == region]
            start = int(body.get("NextToken") or 0)
            page: dict[str, Any] = {"FormatVersion": "aws_v1", "PriceList": [
                json.dumps(i) for i in items[start:start + 2]]}
            if start + 2 < len(items):
                page["NextToken"] = str(start + 2)
            self._answer(200, page)

        def _answer(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/x-amz-json-1.1")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# moto answers these two EC2 reads from the static data files it ships, whatever else the
# test has done; rendering ~1,400 instance types as XML costs it seconds a request, and the
# refresh tests ask them ~20 times. The same request (region and key included) gets the
# same bytes it got the first time, so remembering them changes no answer.
STATIC_ACTIONS = (b"Action=DescribeInstanceTypes&", b"Action=DescribeInstanceTypeOfferings&")
_static_answers: dict[tuple[str, ...], tuple[str, list[tuple[str, str]], bytes]] = {}
_static_lock = threading.Lock()


def _remember_static_reads(app: Any) -> Any:
    """A WSGI wrapper around moto's app: the ``STATIC_ACTIONS`` answered once per request."""

    def wrapped(environ: dict[str, Any], start_response: Any) -> Any:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = io.BytesIO(body)
        if not body.startswith(STATIC_ACTIONS):
            return app(environ, start_response)
        # The credential scope names the key, the day and the region (moto reads the region
        # there).
        scope = environ.get("HTTP_AUTHORIZATION", "").partition("Credential=")[2]
        key = (environ["REQUEST_METHOD"], environ["PATH_INFO"], scope.split(",")[0],
               body.decode())
        with _static_lock:
            known = _static_answers.get(key)
        if known is None:
            seen: list[Any] = []
            chunks = app(environ, lambda status, headers, *_: seen.extend((status, headers)))
            try:
                data = b"".join(chunks)
            finally:
                if hasattr(chunks, "close"):  # WSGI: the caller closes what the app returned
                    chunks.close()
            known = (seen[0], list(seen[1]), data)
            if known[0].startswith("200"):
                with _static_lock:
                    _static_answers[key] = known
        status, headers, data = known
        start_response(status, headers)
        return [data]

    return wrapped


@contextmanager
def moto_server() -> Iterator[str]:
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    app = _remember_static_reads(DomainDispatcherApplication(create_backend_app))
    server = make_server("127.0.0.1", 0, app, threaded=True,
                         request_handler=MotoRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


PROFILE_KEY = "AKIAPROFILEKEY000001"


def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, moto_url: str,
            pricing_url: str) -> None:
    """boto3 pointed at the loopback servers, with a profile ``team`` in a temp config."""
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ACCESS_KEY_ID",
                 "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ROLE_ARN",
                 "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "aws-config").write_text("[profile team]\nregion = us-east-1\n")
    (tmp_path / "aws-credentials").write_text(
        f"[team]\naws_access_key_id = {PROFILE_KEY}\naws_secret_access_key = testing\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "aws-credentials"))
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_url)
    monkeypatch.setenv("AWS_ENDPOINT_URL_PRICING", pricing_url)
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")  # a failure is reported at once
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
