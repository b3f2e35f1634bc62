"""Throwaway X.509 certificates for local clusters: a CA, the broker's certificate, client certificates.

Everything is PEM, which both sides read directly: Kafka 4 brokers take a PEM
keystore (one file holding the unencrypted PKCS#8 private key and the
certificate chain, so no key password is needed) and a PEM truststore;
librdkafka takes the CA, certificate and key files as they are. Keys are
ECDSA P-256: quick to make, and every TLS stack involved accepts them.

These certificates only ever protect clusters on 127.0.0.1, so they live for
ten years: a local root never breaks because its certificates ran out.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from mirror_pipeline.model.errors import LocalClusterError

VALIDITY = datetime.timedelta(days=3650)
#: Started a little in the past, so a clock a few minutes behind still accepts them.
BACKDATE = datetime.timedelta(hours=1)


@dataclass(frozen=True)
class CertificateFiles:
    """Where one identity's PEM files are: its certificate and its private key."""

    certificate: Path
    key: Path


def write_private(path: Path, text: str) -> None:
    """Write `path` readable by its owner only (0600), replacing it atomically.

    Created 0600 from the start, so the content is never readable by others,
    not even for a moment.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(tmp, path)


def ensure_ca(directory: Path) -> CertificateFiles:
    """The CA of this directory, made on first use (`ca.pem` public, `ca-key.pem` 0600)."""
    files = CertificateFiles(directory / "ca.pem", directory / "ca-key.pem")
    if files.certificate.is_file() and files.key.is_file():
        return files
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "mirror-pipeline local CA")])
    cert = (
        _builder(name, name, key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(cert_sign=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    write_private(files.key, _key_pem(key))
    files.certificate.write_text(_cert_pem(cert))
    return files


def ensure_broker_keystore(directory: Path, ca: CertificateFiles, common_name: str) -> Path:
    """`broker.pem` (0600): the broker's key and its certificate chain, Kafka's PEM keystore.

    The certificate names 127.0.0.1 and localhost, which is what clients and
    the broker itself (inter-broker, controller) check the host against. It
    serves as the client certificate too, when the broker connects to itself
    over a mutual-TLS listener.
    """
    path = directory / "broker.pem"
    if not path.is_file():
        key, cert = _issue(ca, common_name, server=True)
        write_private(path, _key_pem(key) + _cert_pem(cert) + ca.certificate.read_text())
    return path


def ensure_client_certificate(directory: Path, ca: CertificateFiles, common_name: str) -> CertificateFiles:
    """`<name>.pem` and `<name>-key.pem` (0600): a client certificate with subject `CN=<name>`.

    With the default principal mapping, a broker requiring client
    certificates sees this client as `User:CN=<name>`.
    """
    files = CertificateFiles(directory / f"{common_name}.pem", directory / f"{common_name}-key.pem")
    if not (files.certificate.is_file() and files.key.is_file()):
        key, cert = _issue(ca, common_name, server=False)
        write_private(files.key, _key_pem(key))
        files.certificate.write_text(_cert_pem(cert))
    return files


def _issue(ca: CertificateFiles, common_name: str, server: bool) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    try:
        ca_key = serialization.load_pem_private_key(ca.key.read_bytes(), password=None)
        ca_cert = x509.load_pem_x509_certificate(ca.certificate.read_bytes())
    except (OSError, ValueError) as exc:
        # The exception's text may quote the key file's content: name only the file.
        raise LocalClusterError(
            f"cannot read the local CA ({ca.certificate}, {ca.key}): {type(exc).__name__}; "
            "delete the cluster directory to start afresh"
        ) from None
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise LocalClusterError(f"the local CA key {ca.key} is not an EC key; delete the cluster directory")
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    usages = [ExtendedKeyUsageOID.CLIENT_AUTH]
    builder = _builder(subject, ca_cert.subject, key.public_key())
    if server:
        usages.insert(0, ExtendedKeyUsageOID.SERVER_AUTH)
        san = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
        builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
    cert = (
        builder.add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return key, cert


def _builder(subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + VALIDITY)
    )


def _key_usage(cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=not cert_sign,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


def _key_pem(key: ec.EllipticCurvePrivateKey) -> str:
    """Unencrypted PKCS#8 (`BEGIN PRIVATE KEY`): the one form Kafka's PEM keystore reads without a key password."""
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def _cert_pem(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()
