"""Certificates and keys for a local control plane: a CA, the API server's serving
certificate, an admin client certificate (group system:masters) and the service-account
signing key pair. ECDSA P-256 throughout: fast to make, accepted by every component."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

VALIDITY = timedelta(days=7)


@dataclass(frozen=True)
class Pki:
    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    admin_cert: Path
    admin_key: Path
    sa_private: Path
    sa_public: Path


def _key() -> Any:
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _write_key(key: Any, path: Path) -> None:
    from cryptography.hazmat.primitives import serialization

    path.write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    path.chmod(0o600)


def _name(common: str, org: str | None = None) -> Any:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common)]
    if org:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


def _certificate(subject: Any, key: Any, issuer: Any, issuer_key: Any, *,
                 ca: bool = False, server_names: tuple[str, ...] = (),
                 client: bool = False) -> Any:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import ExtendedKeyUsageOID

    now = datetime.now(UTC)
    builder = (x509.CertificateBuilder()
               .subject_name(subject).issuer_name(issuer).public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - timedelta(minutes=5)).not_valid_after(now + VALIDITY)
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
            key_encipherment=False, data_encipherment=False, key_agreement=False,
            encipher_only=False, decipher_only=False), critical=True)
    else:
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH] if client else [ExtendedKeyUsageOID.SERVER_AUTH]
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    if server_names:
        sans: list[x509.GeneralName] = []
        for name in server_names:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(name)))
            except ValueError:
                sans.append(x509.DNSName(name))
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _write_cert(cert: Any, path: Path) -> None:
    from cryptography.hazmat.primitives import serialization

    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def pki_files(directory: Path) -> Pki:
    """The PKI's file names in ``directory`` (what ``write_pki`` writes there)."""
    return Pki(*(directory / n for n in (
        "ca.crt", "ca.key", "apiserver.crt", "apiserver.key", "admin.crt", "admin.key",
        "sa.key", "sa.pub")))


def write_pki(directory: Path, service_ip: str) -> Pki:
    """Write a fresh PKI into ``directory`` (created, mode 0700)."""
    from cryptography.hazmat.primitives import serialization

    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    pki = pki_files(directory)
    ca_key = _key()
    ca_name = _name("anycloud-local-ca")
    _write_key(ca_key, pki.ca_key)
    _write_cert(_certificate(ca_name, ca_key, ca_name, ca_key, ca=True), pki.ca_cert)

    serving_key = _key()
    _write_key(serving_key, pki.serving_key)
    names = ("127.0.0.1", "localhost", service_ip, "kubernetes", "kubernetes.default",
             "kubernetes.default.svc", "kubernetes.default.svc.cluster.local")
    _write_cert(_certificate(_name("kube-apiserver"), serving_key, ca_name, ca_key,
                             server_names=names), pki.serving_cert)

    admin_key = _key()
    _write_key(admin_key, pki.admin_key)
    _write_cert(_certificate(_name("anycloud-admin", "system:masters"), admin_key, ca_name,
                             ca_key, client=True), pki.admin_cert)

    sa_key = _key()
    _write_key(sa_key, pki.sa_private)
    pki.sa_public.write_bytes(sa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return pki
