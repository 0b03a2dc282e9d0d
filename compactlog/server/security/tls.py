"""TLS for the SSL and SASL_SSL listeners from Python's ``ssl`` module: Kafka's
``DefaultSslEngineFactory`` (key and trust stores, client authentication, protocols, cipher
suites) and ``SslPrincipalMapper`` (``ssl.principal.mapping.rules``), security.md §2 and §6.

Key stores: ``PEM`` (one file holding the key and its chain, or the inline
``ssl.keystore.key`` / ``ssl.keystore.certificate.chain``) and ``PKCS12``; ``JKS`` is refused
with the keytool command that converts it. Python's ``ssl`` loads keys from files only: an inline
or PKCS12 key is written to a 0600 file in a private temporary directory, loaded, and removed.
"""

from __future__ import annotations

import datetime
import os
import re
import shutil
import ssl
import tempfile
from dataclasses import dataclass
from typing import Callable

from ...errors import ConfigError

# Java (IANA) cipher suite names -> OpenSSL's, for ssl.cipher.suites (TLS 1.2 and below)
JAVA_CIPHERS = {
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384": "DHE-RSA-AES256-GCM-SHA384",
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": "DHE-RSA-AES128-GCM-SHA256",
    "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "DHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384": "ECDHE-ECDSA-AES256-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384": "ECDHE-RSA-AES256-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
}
# TLS 1.3 suites: OpenSSL enables all three and Python cannot narrow them
TLS13_CIPHERS = frozenset({"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"})
PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
JKS_HINT = ("JKS key stores cannot be read by Python; convert it with keytool -importkeystore "
            "-srckeystore FILE.jks -destkeystore FILE.p12 -deststoretype PKCS12 and set type PKCS12 "
            "(or use PEM)")


@dataclass
class TlsSettings:
    """A listener's ``ssl.*`` settings, already resolved through its prefixes."""

    listener: str
    keystore_type: str = "PEM"
    keystore_location: str | None = None
    keystore_password: str | None = None
    key_password: str | None = None
    keystore_key: str | None = None
    keystore_chain: str | None = None
    truststore_type: str = "PEM"
    truststore_location: str | None = None
    truststore_password: str | None = None
    truststore_certificates: str | None = None
    client_auth: str = "none"
    enabled_protocols: str = "TLSv1.2,TLSv1.3"
    cipher_suites: str = ""

    def __repr__(self) -> str:      # never the passwords or the inline key
        return (f"TlsSettings(listener={self.listener!r}, keystore={self.keystore_type}:"
                f"{self.keystore_location or 'inline'}, client_auth={self.client_auth})")


# the TlsSettings fields a live listener may change (SslConfigs.RECONFIGURABLE_CONFIGS)
STORE_FIELDS = ("keystore_type", "keystore_location", "keystore_password", "key_password", "keystore_key",
                "keystore_chain", "truststore_type", "truststore_location", "truststore_password",
                "truststore_certificates")


@dataclass
class ServerTls:
    """What one TLS listener was built with: its context and the earliest ``notAfter`` of its
    stores (UNIX seconds, for the certificate expiry gauge; None when unknown); the settings, the
    store files' modification times and the key store's certificate identity (subject, SANs), for
    a reconfiguration to compare with (Kafka's ``SslFactory``)."""

    context: ssl.SSLContext
    keystore_not_after: float | None
    truststore_not_after: float | None
    settings: TlsSettings | None = None
    file_stamps: tuple = ()
    identity: tuple[str, frozenset] | None = None

    def files_changed(self) -> bool:
        """A store file was rewritten since the context was built (DefaultSslEngineFactory's
        ``shouldBeRebuilt``: a key store renewed in place)."""
        return self.settings is not None and _file_stamps(self.settings) != self.file_stamps


def server_context(s: TlsSettings) -> ServerTls:
    """The listener's ``SSLContext`` (``DefaultSslEngineFactory.createSslContext``)."""
    where = f"listener {s.listener}"
    stamps = _file_stamps(s)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _protocols(ctx, s, where)
    _ciphers(ctx, s, where)
    key_not_after, identity = _load_keystore(ctx, s, where)
    trust_not_after = None
    mode = CLIENT_AUTH.get(s.client_auth.strip().lower())
    if mode is None:
        raise ConfigError(f"{where}: invalid value {s.client_auth!r} for ssl.client.auth: use required, "
                          f"requested or none")
    if mode != ssl.CERT_NONE:
        trust_not_after = _load_truststore(ctx, s, where)
    ctx.verify_mode = mode
    return ServerTls(ctx, key_not_after, trust_not_after, s, stamps, identity)


def check_compatible(old: ServerTls, new: ServerTls, *, allow_dn_changes: bool, allow_san_changes: bool) -> None:
    """SslFactory.CertificateEntries.ensureCompatible: a live listener's new key store names the same
    subject (unless ``ssl.allow.dn.changes``) and at least the same subject alternative names
    (unless ``ssl.allow.san.changes``) as the one it replaces. Skipped without ``cryptography``."""
    if old.identity is None or new.identity is None:
        return
    (old_dn, old_san), (new_dn, new_san) = old.identity, new.identity
    listener = new.settings.listener if new.settings is not None else "?"
    if not allow_dn_changes and old_dn.lower() != new_dn.lower():
        raise ConfigError(f"listener {listener}: Keystore DistinguishedName does not match: existing DN={old_dn}, "
                          f"new DN={new_dn} (ssl.allow.dn.changes=true allows it)")
    if not allow_san_changes and not new_san >= old_san:
        raise ConfigError(f"listener {listener}: Keystore SubjectAltNames do not match: existing SAN="
                          f"{sorted(old_san)}, new SAN={sorted(new_san)} (ssl.allow.san.changes=true allows it)")


def _file_stamps(s: TlsSettings) -> tuple:
    stamps = []
    for path in (s.keystore_location, s.truststore_location):
        try:
            st = os.stat(path) if path else None
        except OSError:
            st = None
        stamps.append(None if st is None else (st.st_mtime_ns, st.st_size, st.st_ino))
    return tuple(stamps)


def _protocols(ctx: ssl.SSLContext, s: TlsSettings, where: str) -> None:
    names = [p.strip() for p in s.enabled_protocols.split(",") if p.strip()]
    if not names:
        raise ConfigError(f"{where}: ssl.enabled.protocols is empty")
    versions = []
    for n in names:
        if n not in PROTOCOLS:
            raise ConfigError(f"{where}: ssl.enabled.protocols: {n} is not offered (TLSv1.2 and TLSv1.3 "
                              f"are; older versions are unsafe)")
        versions.append(PROTOCOLS[n])
    ctx.minimum_version = min(versions)
    ctx.maximum_version = max(versions)


def _ciphers(ctx: ssl.SSLContext, s: TlsSettings, where: str) -> None:
    names = [c.strip() for c in s.cipher_suites.split(",") if c.strip()]
    if not names:
        return
    openssl = []
    for n in names:
        if n in TLS13_CIPHERS:
            continue
        if n not in JAVA_CIPHERS:
            raise ConfigError(f"{where}: ssl.cipher.suites: {n} is not a suite compactlog can translate; "
                              f"known: {', '.join(sorted(JAVA_CIPHERS) + sorted(TLS13_CIPHERS))}")
        openssl.append(JAVA_CIPHERS[n])
    if openssl:
        ctx.set_ciphers(":".join(openssl))
    else:       # TLS 1.3 suites only: no TLS 1.2 suite is left, as with Java
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3


def _load_keystore(ctx: ssl.SSLContext, s: TlsSettings, where: str) -> tuple[float | None, tuple | None]:
    """The key store loaded into ``ctx``: the earliest notAfter of its chain and its certificate's
    (subject, SANs), each None when unknown."""
    kind = (s.keystore_type or "PEM").strip().upper()
    inline = s.keystore_key is not None or s.keystore_chain is not None
    if kind == "JKS":
        raise ConfigError(f"{where}: ssl.keystore.type JKS: {JKS_HINT}")
    if kind not in ("PEM", "PKCS12"):
        raise ConfigError(f"{where}: invalid ssl.keystore.type {s.keystore_type!r}: use PEM or PKCS12")
    if inline and s.keystore_location:
        raise ConfigError(f"{where}: both ssl.keystore.location and an inline key store "
                          f"(ssl.keystore.key, ssl.keystore.certificate.chain) are set; use one")
    if not inline and not s.keystore_location:
        raise ConfigError(f"{where}: a TLS listener needs a key store: set ssl.keystore.location "
                          f"(PEM or PKCS12), or ssl.keystore.key and ssl.keystore.certificate.chain")
    if kind == "PEM":
        if s.keystore_password:
            raise ConfigError(f"{where}: ssl.keystore.password is not allowed for a PEM key store "
                              f"(Kafka refuses it too); an encrypted key takes ssl.key.password")
        if inline:
            if not (s.keystore_key and s.keystore_chain):
                raise ConfigError(f"{where}: an inline PEM key store needs both ssl.keystore.key and "
                                  f"ssl.keystore.certificate.chain")
            pem = _pem_text(s.keystore_key) + "\n" + _pem_text(s.keystore_chain) + "\n"
            _with_private_file(pem.encode(), lambda path: _load_chain(ctx, path, s.key_password, where))
            chain = _pem_text(s.keystore_chain).encode()
            return _not_after_pem(chain), _identity_pem(chain)
        _load_chain(ctx, s.keystore_location, s.key_password, where)
        data = _read(s.keystore_location, where)
        return _not_after_pem(data), _identity_pem(data)
    if inline:
        raise ConfigError(f"{where}: ssl.keystore.key and ssl.keystore.certificate.chain go with "
                          f"ssl.keystore.type PEM")
    pem, not_after = _pkcs12_to_pem(_read(s.keystore_location, where), s.keystore_password, where,
                                    "ssl.keystore.location")
    _with_private_file(pem, lambda path: _load_chain(ctx, path, None, where))
    return not_after, _identity_pem(pem)


def _load_truststore(ctx: ssl.SSLContext, s: TlsSettings, where: str) -> float | None:
    kind = (s.truststore_type or "PEM").strip().upper()
    if kind == "JKS":
        raise ConfigError(f"{where}: ssl.truststore.type JKS: {JKS_HINT}")
    if s.truststore_certificates is not None and s.truststore_location:
        raise ConfigError(f"{where}: both ssl.truststore.location and ssl.truststore.certificates are set; use one")
    if s.truststore_certificates is not None:
        data = _pem_text(s.truststore_certificates).encode()
    elif s.truststore_location:
        data = _read(s.truststore_location, where)
        if kind == "PKCS12":
            data = _pkcs12_certificates(data, s.truststore_password, where)
        elif kind != "PEM":
            raise ConfigError(f"{where}: invalid ssl.truststore.type {s.truststore_type!r}: use PEM or PKCS12")
    else:
        raise ConfigError(f"{where}: ssl.client.auth={s.client_auth} needs a trust store for client "
                          f"certificates: set ssl.truststore.location or ssl.truststore.certificates")
    try:
        ctx.load_verify_locations(cadata=data.decode("ascii"))
    except (ssl.SSLError, ValueError, UnicodeDecodeError) as e:
        raise ConfigError(f"{where}: the trust store holds no readable PEM certificate ({e})") from None
    return _not_after_pem(data)


def _pem_text(value: str) -> str:
    # Kafka allows the inline PEM on one line (properties files); restore the line breaks
    text = value.strip()
    if "\n" not in text:
        text = re.sub(r"\s*(-----(?:BEGIN|END) [A-Z ]+-----)\s*", r"\n\1\n", text).strip()
    return text


def _read(path: str, where: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise ConfigError(f"{where}: cannot read {path}: {e.strerror or e}") from None


def _load_chain(ctx: ssl.SSLContext, path: str, password: str | None, where: str) -> None:
    try:
        ctx.load_cert_chain(path, password=password)
    except ssl.SSLError as e:
        raise ConfigError(f"{where}: the key store does not hold a private key and its certificate chain "
                          f"that match (or ssl.key.password is wrong): {e.reason or e}") from None
    except OSError as e:
        raise ConfigError(f"{where}: cannot read the key store {path}: {e.strerror or e}") from None


def _with_private_file(data: bytes, use: Callable[[str], None]) -> None:
    tmp = tempfile.mkdtemp(prefix="compactlog-tls-")
    try:
        path = os.path.join(tmp, "keystore.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        use(path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _pkcs12_to_pem(data: bytes, password: str | None, where: str, setting: str) -> tuple[bytes, float | None]:
    serialization, pkcs12 = _crypto(where)
    try:
        key, cert, extra = pkcs12.load_key_and_certificates(data, password.encode() if password else None)
    except ValueError as e:
        raise ConfigError(f"{where}: {setting} is not a PKCS12 store this password opens ({e})") from None
    if key is None or cert is None:
        raise ConfigError(f"{where}: {setting} holds no private key with its certificate")
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    certs = [cert] + list(extra or ())
    pem += b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs)
    return pem, min(_cert_not_after(c) for c in certs)


def _pkcs12_certificates(data: bytes, password: str | None, where: str) -> bytes:
    serialization, pkcs12 = _crypto(where)
    try:
        store = pkcs12.load_pkcs12(data, password.encode() if password else None)
    except ValueError as e:
        raise ConfigError(f"{where}: ssl.truststore.location is not a PKCS12 store this password opens ({e})") from None
    certs = ([store.cert.certificate] if store.cert else []) + [c.certificate for c in store.additional_certs]
    if not certs:
        raise ConfigError(f"{where}: the PKCS12 trust store holds no certificate")
    return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs)


def _crypto(where: str):
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.serialization import pkcs12
    except ImportError:
        raise ConfigError(f"{where}: PKCS12 stores need the 'cryptography' package (pip install "
                          f"cryptography), or use PEM") from None
    return serialization, pkcs12


def _cert_not_after(cert) -> float:
    when = getattr(cert, "not_valid_after_utc", None) or cert.not_valid_after.replace(tzinfo=datetime.timezone.utc)
    return when.timestamp()


def _identity_pem(data: bytes) -> tuple[str, frozenset] | None:
    """(subject, subject alternative names) of the first PEM certificate in ``data`` (the key's own
    certificate), None without cryptography."""
    try:
        from cryptography import x509
    except ImportError:
        return None
    try:
        cert = x509.load_pem_x509_certificates(data)[0]
    except (ValueError, IndexError):
        return None
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        sans = frozenset(str(getattr(n, "value", n)) for n in names)
    except x509.ExtensionNotFound:
        sans = frozenset()
    return cert.subject.rfc4514_string(), sans


def _not_after_pem(data: bytes) -> float | None:
    """The earliest ``notAfter`` of the PEM certificates in ``data`` (None without cryptography)."""
    try:
        from cryptography import x509
    except ImportError:
        return None
    try:
        certs = x509.load_pem_x509_certificates(data)
    except ValueError:
        return None
    return min((_cert_not_after(c) for c in certs), default=None)


# -- principals from client certificates (DefaultKafkaPrincipalBuilder, SslPrincipalMapper) -------

_RULE = re.compile(r"\s*(?:(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?))\s*(?:,|$)")


class PrincipalMapper:
    """``ssl.principal.mapping.rules``: ``DEFAULT`` keeps the DN; ``RULE:pattern/replacement/[LU]``
    rewrites a DN the pattern matches whole (Java's ``$1`` is a group reference); the first rule
    that applies wins, and a DN no rule applies to fails the authentication, as in Kafka."""

    def __init__(self, rules: str = "DEFAULT"):
        self.text = rules
        self.rules: list[tuple[re.Pattern, str, str] | None] = []
        pos = 0
        text = rules.strip()
        while pos < len(text):
            m = _RULE.match(text, pos)
            if m is None or m.end() == pos:
                raise ConfigError(f"invalid rule in ssl.principal.mapping.rules at {text[pos:]!r}: use "
                                  f"DEFAULT or RULE:pattern/replacement/[LU], comma-separated")
            if m.group(1):
                self.rules.append(None)
            else:
                try:
                    pattern = re.compile(m.group(2))
                except re.error as e:
                    raise ConfigError(f"invalid pattern {m.group(2)!r} in ssl.principal.mapping.rules: {e}") from None
                replacement = re.sub(r"\$(\d+)", r"\\g<\1>", m.group(3))
                self.rules.append((pattern, replacement, m.group(4)))
            pos = m.end()
        if not self.rules:
            self.rules.append(None)

    def name(self, dn: str) -> str | None:
        for rule in self.rules:
            if rule is None:
                return dn
            pattern, replacement, case = rule
            if pattern.fullmatch(dn):
                out = pattern.sub(replacement, dn)
                return out.lower() if case == "L" else out.upper() if case == "U" else out
        return None


def subject_dn(ssl_object) -> str | None:
    """The verified client certificate's subject as Java's ``X500Principal.getName()`` writes it
    (RFC 2253: the RDNs in reverse order), or None when the client sent none."""
    der = ssl_object.getpeercert(binary_form=True)
    if not der:
        return None
    try:
        from cryptography import x509
        return x509.load_der_x509_certificate(der).subject.rfc4514_string()
    except ImportError:
        pass
    subject = (ssl_object.getpeercert() or {}).get("subject", ())
    short = {"commonName": "CN", "organizationName": "O", "organizationalUnitName": "OU",
             "localityName": "L", "stateOrProvinceName": "ST", "countryName": "C",
             "streetAddress": "STREET", "domainComponent": "DC", "userId": "UID"}
    rdns = ["+".join(f"{short.get(k, k)}={_escape_dn(v)}" for k, v in rdn) for rdn in subject]
    return ",".join(reversed(rdns))


def _escape_dn(value: str) -> str:
    out = re.sub(r'([,+"\\<>;])', r"\\\1", value)
    if out.startswith((" ", "#")):
        out = "\\" + out
    if out.endswith(" "):
        out = out[:-1] + "\\ "
    return out
