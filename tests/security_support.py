"""Certificates made for each test run (the ``cryptography`` package), SCRAM users written to a
data dir, and a broker with TLS and SASL listeners (security.md §11-12).

``make_pki(dir)`` writes: ``ca.pem`` (and its key ``ca.key``); ``server.pem`` (key and chain, a PEM key store),
``server.crt``/``server.key``, ``server.p12`` (PKCS12, password ``p12-secret``) with a
subjectAltName for 127.0.0.1 and localhost; client certificates ``alice`` (``CN=alice,OU=apps,
O=example``), ``expired`` (same CA, expired yesterday) and ``stranger`` (another CA), each as
``<name>.crt`` / ``<name>.key`` / ``<name>.pem`` (key and certificate)."""

from __future__ import annotations

import datetime
import ipaddress
import os
import re

from broker_support import COMMAND, Broker

PASSWORDS = {"alice": "alice-secret", "bob": "bob-secret", "admin": "admin-secret"}
P12_PASSWORD = "p12-secret"
_PORTS = re.compile(r"Awaiting socket connections on ([0-9.]+):([0-9]+)\.")
_METRICS = re.compile(r"Metrics listener on (http://[0-9.]+:[0-9]+):")


def _name(**parts):
    from cryptography import x509
    from cryptography.x509.oid import NameOID
    oids = {"CN": NameOID.COMMON_NAME, "OU": NameOID.ORGANIZATIONAL_UNIT_NAME, "O": NameOID.ORGANIZATION_NAME}
    # written in the order given: Java (and RFC 4514) print them reversed
    return x509.Name([x509.NameAttribute(oids[k], v) for k, v in parts.items()])


def _key():
    from cryptography.hazmat.primitives.asymmetric import ec
    return ec.generate_private_key(ec.SECP256R1())


def _cert(subject, key, issuer, issuer_key, *, ca=False, san=None, days=(-1, 30)):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    now = datetime.datetime.now(datetime.timezone.utc)
    b = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
         .serial_number(x509.random_serial_number())
         .not_valid_before(now + datetime.timedelta(days=days[0]))
         .not_valid_after(now + datetime.timedelta(days=days[1]))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if san:
        b = b.add_extension(x509.SubjectAlternativeName(san), critical=False)
    if ca:
        b = b.add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                          data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                          crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
    return b.sign(issuer_key, hashes.SHA256())


def _pem(obj) -> bytes:
    from cryptography.hazmat.primitives import serialization
    if hasattr(obj, "private_bytes"):
        return obj.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption())
    return obj.public_bytes(serialization.Encoding.PEM)


def make_pki(directory) -> str:
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import BestAvailableEncryption, pkcs12
    d = str(directory)
    os.makedirs(d, exist_ok=True)
    ca_key, other_key = _key(), _key()
    ca_name, other_name = _name(CN="compactlog test CA"), _name(CN="some other CA")
    ca = _cert(ca_name, ca_key, ca_name, ca_key, ca=True)
    other = _cert(other_name, other_key, other_name, other_key, ca=True)

    def write(name, data):
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)

    write("ca.pem", _pem(ca))
    write("ca.key", _pem(ca_key))           # for a test that signs another server certificate
    skey = _key()
    server = _cert(_name(CN="localhost"), skey, ca_name, ca_key,
                   san=[x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    write("server.crt", _pem(server) + _pem(ca))
    write("server.key", _pem(skey))
    write("server.pem", _pem(skey) + _pem(server) + _pem(ca))
    write("server.p12", pkcs12.serialize_key_and_certificates(b"server", skey, server, [ca],
                                                              BestAvailableEncryption(P12_PASSWORD.encode())))
    for name, subject, issuer, issuer_key, days in [
            ("alice", _name(CN="alice", OU="apps", O="example"), ca_name, ca_key, (-1, 30)),
            ("expired", _name(CN="old"), ca_name, ca_key, (-30, -1)),
            ("stranger", _name(CN="stranger"), other_name, other_key, (-1, 30))]:
        k = _key()
        c = _cert(subject, k, issuer, issuer_key, days=days)
        write(f"{name}.crt", _pem(c))
        write(f"{name}.key", _pem(k))
        write(f"{name}.pem", _pem(k) + _pem(c))
    return d


def add_scram_users(data_dir, users=None, mechanisms=("SCRAM-SHA-256", "SCRAM-SHA-512")) -> None:
    """SCRAM credentials straight into a stopped broker's data dir (what `compactlog users` does)."""
    from compactlog.server.security.credentials import CredentialCache, Upsertion
    from compactlog.server.security.scram import MECHANISMS, salted_password
    os.makedirs(str(data_dir), exist_ok=True)
    cache = CredentialCache(str(data_dir))
    for mech_name in mechanisms:
        mech = MECHANISMS[mech_name]
        ups = [Upsertion(u, mech.type_code, 4096, b"salt-" + u.encode(),
                         salted_password(mech, p, b"salt-" + u.encode(), 4096))
               for u, p in (users or PASSWORDS).items()]
        assert all(r.error == "none" for r in cache.alter([], ups))


def security_overrides(pki: str, listeners: str, **extra) -> dict:
    """Broker settings for ``listeners`` (``NAME://127.0.0.1:0,...``) with the test PKI."""
    return {"listeners": listeners, "ssl.keystore.location": os.path.join(pki, "server.pem"),
            "ssl.truststore.location": os.path.join(pki, "ca.pem"),
            "connection.failed.authentication.delay.ms": "100", **extra}


class SecureBroker(Broker):
    """A broker with several listeners: ``ports[name]`` once started (the log names them in the
    order of ``listeners``)."""

    def __init__(self, data_dir, overrides: dict, **kw):
        super().__init__(data_dir, overrides, **kw)
        # the given listeners only (not the base's PLAINTEXT one), the metrics listener on a free
        # port as every test broker's (at 9644, the default, two modules' brokers collided)
        self.overrides = {"metrics.listener": "127.0.0.1:0", **overrides}
        self.names = [x.split("://")[0].upper() for x in overrides["listeners"].split(",")]
        self.ports: dict[str, int] = {}

    def start(self) -> "SecureBroker":
        super().start()
        found = _PORTS.findall(self.log_text())
        self.ports = {name: int(p) for name, (_, p) in zip(self.names, found[-len(self.names):])}
        return self

    def address(self, name: str) -> str:
        return f"127.0.0.1:{self.ports[name]}"

    def metric(self, name: str, **labels) -> float:
        """One sample of the broker's /metrics (started with ``metrics.listener=127.0.0.1:0``)."""
        import urllib.request
        from prometheus_client.parser import text_string_to_metric_families
        url = _METRICS.findall(self.log_text())[-1]
        with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
            text = r.read().decode()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                    return sample.value
        raise KeyError(f"no sample {name} {labels} in /metrics")


__all__ = ["COMMAND", "PASSWORDS", "P12_PASSWORD", "SecureBroker", "add_scram_users", "make_pki",
           "security_overrides"]
