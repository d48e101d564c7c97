"""The GCP fetcher against recorded Compute and Cloud Billing answers (recorded/SOURCES.md).

Machine types: page 1 is apache-libcloud's recorded ``aggregated/machineTypes`` answer, read
from the pinned libcloud wheel (it ends with a nextPageToken); page 2 holds two machine types
recorded by GoogleCloudPlatform/cluster-toolkit. Prices: two pages of the Cloud Billing
Catalog ``skus`` list (opencost's recorded page, then a recorded Network SKU).
"""

from __future__ import annotations

import base64
import json
import os
import urllib.parse
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from automation.catalog.refresh import gcp, gcp_auth
from automation.catalog.refresh.http import Replay, Response, TransportError, with_query
from automation.catalog.refresh.model import RefreshError
from automation.models import Credential

RECORDED = Path(__file__).with_name("recorded")
LIBCLOUD_PAGE = "libcloud/test/compute/fixtures/gce/aggregated_machineTypes.json"
NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
PROJECT = "demo-project-1"
TOKEN_URI = "https://oauth2.googleapis.com/token"
# The token endpoint's answer, shaped after Google's documented OAuth2 response.
TOKEN_ANSWER = {"access_token": "ya29.recorded-test-token", "expires_in": 3599,
                "token_type": "Bearer"}


def _recorded(name: str) -> dict[str, Any]:
    return json.loads((RECORDED / name).read_text())


@pytest.fixture(scope="module")
def libcloud_page() -> bytes:
    from tools.catalog_generator.wheels import Wheel, pins

    try:
        wheel = Wheel(pins()["apache-libcloud"])
    except Exception as err:  # no PyPI and no cache: only outside CI may this be skipped
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"the pinned apache-libcloud wheel is not available: {err}")
    return wheel.read(LIBCLOUD_PAGE)


@pytest.fixture(scope="module")
def private_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def credential(tmp_path: Path, private_key: rsa.RSAPrivateKey) -> Credential:
    pem = private_key.private_bytes(serialization.Encoding.PEM,
                                    serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption()).decode()
    key_file = tmp_path / "sa.json"
    key_file.write_text(json.dumps({
        "type": "service_account", "project_id": PROJECT, "private_key_id": "kid-123",
        "private_key": pem, "client_email": f"refresh@{PROJECT}.iam.gserviceaccount.com",
        "client_id": "1", "token_uri": TOKEN_URI,
    }))
    return Credential(id="cr_1", name="team-gcp", provider="gcp", state="active", org_id="o",
                      created_at=NOW, reference={"project": PROJECT, "key_file": str(key_file)})


def _urls() -> dict[str, str]:
    types = with_query(f"{gcp.COMPUTE}/projects/{PROJECT}/aggregated/machineTypes",
                       maxResults="500")
    skus = with_query(f"{gcp.BILLING}/services/6F81-5844-456A/skus", pageSize="5000",
                      currencyCode="USD")
    page1 = _recorded("gcp_billing_skus_page1.json")
    return {
        "types1": types,
        "types2": with_query(types, pageToken="ChhQRVJfUFJPSkVDVF9NQUNISU5FX1RZUEUSGjYwMDUzMT"
                                               "k1NTY3NS5uMS1zdGFuZGFyZC04"),
        "skus1": skus,
        "skus2": with_query(skus, pageToken=page1["nextPageToken"]),
    }


def _replay(libcloud_page: bytes, **override: Response | Exception) -> Replay:
    urls = _urls()
    bodies: dict[str, Response | Exception] = {
        "token": Response(200, json.dumps(TOKEN_ANSWER).encode()),
        "types1": Response(200, libcloud_page),
        "types2": Response(200, (RECORDED / "gcp_machine_types_page2.json").read_bytes()),
        "skus1": Response(200, (RECORDED / "gcp_billing_skus_page1.json").read_bytes()),
        "skus2": Response(200, (RECORDED / "gcp_billing_skus_page2.json").read_bytes()),
    }
    bodies.update(override)
    return Replay({("POST" if k == "token" else "GET", TOKEN_URI if k == "token" else urls[k]):
                   v for k, v in bodies.items()})


REGIONS = ("us-central1", "europe-west1", "europe-north2")


def test_the_snapshot_has_the_recorded_types_zones_and_prices(credential, libcloud_page):
    snap = gcp.fetch(credential, REGIONS, NOW, transport=_replay(libcloud_page))
    assert snap.provider == "gcp" and snap.regions == REGIONS and snap.fetched_at == NOW
    types = {t.name: t for t in snap.types}
    # libcloud's page (2013): n1, f1, g1; the "-d" types are deprecated and left out.
    assert sorted(types) == [
        "a2-highgpu-1g", "f1-micro", "g1-small", "n1-highcpu-2", "n1-highcpu-4", "n1-highcpu-8",
        "n1-highmem-2", "n1-highmem-4", "n1-highmem-8", "n1-standard-1", "n1-standard-2",
        "n1-standard-4", "t2d-standard-8",
    ]
    n1 = types["n1-standard-1"]  # guestCpus 1, memoryMb 3840
    assert (n1.vcpus, n1.memory_gib, n1.gpus, n1.arch, n1.family) == (
        1, 3.75, 0, "x86_64", "general-purpose")
    assert types["n1-highcpu-2"].memory_gib == 1.8  # memoryMb 1843
    a2 = types["a2-highgpu-1g"]  # cluster-toolkit's recorded a2-highgpu-1g
    assert (a2.vcpus, a2.memory_gib, a2.gpus, a2.gpu_model, a2.family) == (
        12, 85.0, 1, "NVIDIA A100", "gpu")
    assert types["t2d-standard-8"].arch == "x86_64"  # "architecture": "X86_64"

    offers = {(o.vm_type, o.region): o for o in snap.offerings}
    assert len(offers) == len(snap.offerings) == 11 * 2 + 2  # n1/f1/g1 in 2 regions, a2, t2d
    assert offers[("n1-standard-1", "us-central1")].zones == ("us-central1-a", "us-central1-b")
    assert offers[("n1-standard-1", "europe-west1")].zones == ("europe-west1-a",
                                                               "europe-west1-b")
    assert offers[("t2d-standard-8", "europe-north2")].zones == ("europe-north2-b",)
    # 12 x 0.031611 + 85 x 0.004237 + 1 x 2.933908, the same as the shipped catalog's price
    # for a2-highgpu-1g in us-central1 (from Cyclenerd's pricing.yml, an independent source).
    a2_offer = offers[("a2-highgpu-1g", "us-central1")]
    assert a2_offer.zones == ("us-central1-a",)
    assert a2_offer.price_usd_hour == pytest.approx(3.673385, abs=1e-9)


def test_types_without_identifiable_skus_get_no_price_and_a_warning(credential, libcloud_page):
    snap = gcp.fetch(credential, REGIONS, NOW, transport=_replay(libcloud_page))
    unpriced = {(o.vm_type, o.region) for o in snap.offerings if o.price_usd_hour is None}
    assert ("n1-standard-1", "us-central1") in unpriced
    assert ("t2d-standard-8", "europe-north2") in unpriced
    assert all(o.price_usd_hour is not None for o in snap.offerings
               if (o.vm_type, o.region) not in unpriced)
    assert len(unpriced) == len(snap.offerings) - 1
    assert ("gcp us-central1: no price for n1-highcpu-2, n1-highcpu-4, n1-highcpu-8, "
            "n1-highmem-2, n1-highmem-4 and 4 more: no on-demand N1 core SKU") in snap.warnings
    assert ("gcp europe-north2: no price for t2d-standard-8: no on-demand T2D core SKU"
            in snap.warnings)


def test_paging_is_followed_on_both_apis(credential, libcloud_page):
    replay = _replay(libcloud_page)
    gcp.fetch(credential, REGIONS, NOW, transport=replay)
    urls = _urls()
    assert [r.url for r in replay.requests] == [
        TOKEN_URI, urls["types1"], urls["types2"], urls["skus1"], urls["skus2"]]


def test_the_region_filter_keeps_only_the_requested_regions(credential, libcloud_page):
    snap = gcp.fetch(credential, ("europe-north2",), NOW, transport=_replay(libcloud_page))
    assert [t.name for t in snap.types] == ["t2d-standard-8"]
    assert {o.region for o in snap.offerings} == {"europe-north2"}
    snap = gcp.fetch(credential, ("us-central2",), NOW, transport=_replay(libcloud_page))
    assert {o.region for o in snap.offerings} == {"us-central2"}
    assert "a2-highgpu-1g" not in {t.name for t in snap.types}


def test_no_region_is_refused(credential):
    with pytest.raises(RefreshError, match="name at least one region"):
        gcp.fetch(credential, (), NOW, transport=Replay({}))


# --- the token request ---------------------------------------------------------------------


def _b64(segment: str) -> bytes:
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))


def test_the_token_request_is_a_jwt_bearer_grant_signed_by_the_key(
        credential, libcloud_page, private_key):
    replay = _replay(libcloud_page)
    gcp.fetch(credential, REGIONS, NOW, transport=replay)
    token_req = replay.requests[0]
    assert (token_req.method, token_req.url) == ("POST", TOKEN_URI)
    form = dict(urllib.parse.parse_qsl(token_req.body.decode()))
    assert form["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer"
    header, claims, signature = form["assertion"].split(".")
    assert json.loads(_b64(header)) == {"alg": "RS256", "typ": "JWT", "kid": "kid-123"}
    assert json.loads(_b64(claims)) == {
        "iss": f"refresh@{PROJECT}.iam.gserviceaccount.com",
        "scope": "https://www.googleapis.com/auth/compute.readonly "
                 "https://www.googleapis.com/auth/cloud-billing.readonly",
        "aud": TOKEN_URI,
        "iat": int(NOW.timestamp()),
        "exp": int(NOW.timestamp()) + 3600,
    }
    public = private_key.public_key()
    signed = f"{header}.{claims}".encode()
    public.verify(_b64(signature), signed, padding.PKCS1v15(), hashes.SHA256())
    with pytest.raises(InvalidSignature):  # the check above can fail
        public.verify(_b64(signature), signed + b"x", padding.PKCS1v15(), hashes.SHA256())
    # ...and every API call carries the token it returned
    assert all(r.headers["Authorization"] == "Bearer ya29.recorded-test-token"
               for r in replay.requests[1:])


@pytest.mark.parametrize(("content", "message"), [
    (None, "not found"),
    ("{", "not JSON"),
    (json.dumps({"type": "authorized_user"}), "not a service-account key"),
    (json.dumps({"type": "service_account", "client_email": "x"}),
     "missing private_key, token_uri"),
])
def test_a_bad_key_file_is_a_refresh_error_naming_the_file(tmp_path, content, message):
    path = tmp_path / "key.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(RefreshError, match=f"gcp key file {path}: {message}"):
        gcp_auth.load_key(path)


# --- failures: each raises, and no snapshot comes back ------------------------------------


GOOGLE_ERROR_403 = {"error": {"code": 403, "message": "Required 'compute.machineTypes.list' "
                              "permission for 'projects/demo-project-1'",
                              "status": "PERMISSION_DENIED"}}


@pytest.mark.parametrize(("step", "answer", "expected"), [
    ("token", Response(400, json.dumps({"error": "invalid_grant",
                                        "error_description": "Invalid JWT Signature."}).encode()),
     "gcp oauth2 token for refresh@demo-project-1.iam.gserviceaccount.com: HTTP 400 "
     "Invalid JWT Signature."),
    ("token", Response(401, b'{"error": "unauthorized_client"}'), "HTTP 401 unauthorized_client"),
    ("types1", Response(403, json.dumps(GOOGLE_ERROR_403).encode()),
     "gcp compute machineTypes.aggregatedList (project demo-project-1, for us-central1, "
     "europe-west1, europe-north2) (page 1): HTTP 403 PERMISSION_DENIED: Required"),
    ("types2", Response(200, b'{"items": {"zones/us-central1-a": '),
     "gcp compute machineTypes.aggregatedList (project demo-project-1, for us-central1, "
     "europe-west1, europe-north2) (page 2): the answer is not JSON"),
    ("skus1", Response(429, b'{"error": {"code": 429, "message": "Quota exceeded", '
                            b'"status": "RESOURCE_EXHAUSTED"}}', {"Retry-After": "30"}),
     "gcp cloudbilling services/6F81-5844-456A/skus (for us-central1, europe-west1, "
     "europe-north2) (page 1): HTTP 429 RESOURCE_EXHAUSTED: Quota exceeded (rate limited; "
     "retry after 30s)"),
    ("skus2", Response(500, b'{"error": {"code": 500, "message": "Internal error encountered.",'
                            b' "status": "INTERNAL"}}'),
     "(page 2): HTTP 500 INTERNAL: Internal error encountered."),
    ("skus2", TransportError("no answer within 60s"), "(page 2): no answer within 60s"),
])
def test_every_failure_is_a_refresh_error_with_the_reason(
        credential, libcloud_page, step, answer, expected):
    with pytest.raises(RefreshError) as err:
        gcp.fetch(credential, REGIONS, NOW, transport=_replay(libcloud_page, **{step: answer}))
    assert expected in str(err.value)
    assert "ya29" not in str(err.value)


def test_a_credential_without_a_key_file_is_refused(credential):
    broken = credential.model_copy(update={"reference": {"project": PROJECT}})
    with pytest.raises(RefreshError, match="needs project and key_file"):
        gcp.fetch(broken, REGIONS, NOW, transport=Replay({}))


# --- the rules, on recorded entries ---------------------------------------------------------


def _recorded_t2d() -> dict[str, Any]:
    page = _recorded("gcp_machine_types_page2.json")
    return page["items"]["zones/europe-north2-b"]["machineTypes"][0]


def test_deprecated_and_other_families_are_left_out_shared_core_kept():
    t2d = _recorded_t2d()
    assert gcp._parse_machine_type(t2d, "europe-north2-b") is not None
    shared = {**t2d, "name": "e2-medium", "isSharedCpu": True, "guestCpus": 2}
    assert gcp._parse_machine_type(shared, "europe-north2-b").spec.vcpus == 2
    assert gcp._parse_machine_type({**t2d, "deprecated": {"state": "DEPRECATED"}},
                                   "europe-north2-b") is None
    assert gcp._parse_machine_type({**t2d, "name": "m3-megamem-64"}, "europe-north2-b") is None
    tpu = {**t2d, "name": "ct5lp-hightpu-1t",
           "accelerators": [{"guestAcceleratorType": "tpu-v5-lite-device",
                             "guestAcceleratorCount": 1}]}
    assert gcp._parse_machine_type(tpu, "europe-north2-b") is None


def test_arm_comes_from_the_architecture_field_or_the_family():
    t2d = _recorded_t2d()
    no_arch = {k: v for k, v in t2d.items() if k != "architecture"}
    assert gcp._parse_machine_type({**no_arch, "name": "t2a-standard-8"}, "z").spec.arch == \
        "arm64"
    assert gcp._parse_machine_type(no_arch, "z").spec.arch == "x86_64"
    assert gcp._parse_machine_type({**t2d, "architecture": "ARM64"}, "z").spec.arch == "arm64"


def test_a_price_in_another_currency_is_not_used():
    # opencost recorded the T2D Singapore SKUs in IDR: no USD price, so no price at all.
    skus = [s for raw in _recorded("gcp_billing_skus_page1.json")["skus"]
            if (s := gcp._sku(raw)) is not None]
    book = gcp._PriceBook(skus)
    assert book.part("t2d", "Core", "asia-southeast1") == (
        None, "the T2D core SKU is priced in IDR, not USD")
    assert book.part("a2", "Ram", "us-central1") == (pytest.approx(0.004237), "")
    assert book.gpu("nvidia-tesla-a100", "us-central1") == (pytest.approx(2.933908), "")
    assert book.gpu("nvidia-a100-80gb", "us-central1")[0] is None  # not the 40 GB SKU


def test_the_families_cover_every_family_of_the_shipped_gcp_source():
    import csv
    import gzip

    from tools.catalog_generator import long_csv

    with gzip.open(long_csv.SOURCES / "gcp-2026-07.csv.gz", "rt") as fh:
        families = {row["name"].split("-")[0] for row in csv.DictReader(fh)}
    assert families <= gcp.FAMILIES
    assert long_csv.gcp_family is gcp.gcp_family  # one copy of the rule
