"""A small PKI for the TLS unit tests, made once per session with the ``cryptography`` package:
a CA, the broker's certificate (subjectAltName 127.0.0.1 and localhost) and a client certificate
``CN=alice,OU=apps,O=example``, as files in a temporary directory."""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass

import pytest

P12_PASSWORD = "p12-unit-secret"


@dataclass
class Pki:
    dir: str
    ca: str                 # ca.pem
    server_pem: str         # key + chain in one PEM file
    server_key: str         # the key alone (PEM text)
    server_chain: str       # the chain alone (PEM text)
    server_p12: str         # PKCS12, password P12_PASSWORD
    ca_p12: str             # PKCS12 holding the CA certificate only, password P12_PASSWORD
    alice_pem: str          # client key + certificate
    p12_password: str = P12_PASSWORD


@pytest.fixture(scope="session")
def pki(tmp_path_factory) -> Pki:
    pytest.importorskip("cryptography")
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import BestAvailableEncryption, pkcs12
    from cryptography.x509.oid import NameOID

    d = str(tmp_path_factory.mktemp("unit-pki"))
    now = datetime.datetime.now(datetime.timezone.utc)

    def name(**parts):
        oids = {"CN": NameOID.COMMON_NAME, "OU": NameOID.ORGANIZATIONAL_UNIT_NAME, "O": NameOID.ORGANIZATION_NAME}
        # encoded most general first, as certificates usually are: Java prints them reversed
        return x509.Name([x509.NameAttribute(oids[k], v) for k, v in reversed(list(parts.items()))])

    def cert(subject, key, issuer, issuer_key, *, ca=False, san=None):
        b = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
             .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
             .not_valid_after(now + datetime.timedelta(days=10))
             .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if san:
            b = b.add_extension(x509.SubjectAlternativeName(san), critical=False)
        return b.sign(issuer_key, hashes.SHA256())

    def pem(obj) -> bytes:
        if hasattr(obj, "private_bytes"):
            return obj.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                     serialization.NoEncryption())
        return obj.public_bytes(serialization.Encoding.PEM)

    def write(file, data: bytes) -> str:
        path = os.path.join(d, file)
        with open(path, "wb") as f:
            f.write(data)
        return path

    ca_key, server_key, alice_key = (ec.generate_private_key(ec.SECP256R1()) for _ in range(3))
    ca_name = name(CN="unit CA")
    ca = cert(ca_name, ca_key, ca_name, ca_key, ca=True)
    server = cert(name(CN="localhost"), server_key, ca_name, ca_key,
                  san=[x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    alice = cert(name(CN="alice", OU="apps", O="example"), alice_key, ca_name, ca_key)
    encryption = BestAvailableEncryption(P12_PASSWORD.encode())
    return Pki(
        dir=d, ca=write("ca.pem", pem(ca)),
        server_pem=write("server.pem", pem(server_key) + pem(server) + pem(ca)),
        server_key=pem(server_key).decode(), server_chain=(pem(server) + pem(ca)).decode(),
        server_p12=write("server.p12", pkcs12.serialize_key_and_certificates(b"s", server_key, server, [ca],
                                                                            encryption)),
        ca_p12=write("ca.p12", pkcs12.serialize_key_and_certificates(None, None, None, [ca], encryption)),
        alice_pem=write("alice.pem", pem(alice_key) + pem(alice)))
