"""The TLS context of a listener (key and trust stores in PEM, inline PEM and PKCS12; JKS refused;
client authentication, protocols, cipher suites), the client certificate's subject as Java writes
it, and ``ssl.principal.mapping.rules`` (Kafka's ``SslPrincipalMapper``)."""

from __future__ import annotations

import glob
import os
import ssl
import sys
import tempfile

import pytest

from compactlog.errors import ConfigError
from compactlog.server.security.tls import PrincipalMapper, TlsSettings, server_context, subject_dn


def handshake(server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext) -> ssl.SSLObject:
    """A TLS handshake in memory; the server's SSLObject."""
    bios = [ssl.MemoryBIO() for _ in range(4)]
    server = server_ctx.wrap_bio(bios[0], bios[1], server_side=True)
    client = client_ctx.wrap_bio(bios[2], bios[3], server_hostname="localhost")
    done = set()
    for _ in range(20):
        for side, incoming, outgoing, peer_in in ((client, bios[2], bios[3], bios[0]),
                                                  (server, bios[0], bios[1], bios[2])):
            if side not in done:
                try:
                    side.do_handshake()
                    done.add(side)
                except ssl.SSLWantReadError:
                    pass
            data = outgoing.read()
            if data:
                peer_in.write(data)
        if len(done) == 2:
            return server
    raise AssertionError("the handshake did not finish")


def client_context(pki, cert: str | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=pki.ca)
    if cert:
        ctx.load_cert_chain(cert)
    return ctx


# -- key stores -----------------------------------------------------------------------------------

def test_pem_key_store_in_one_file(pki):
    tls = server_context(TlsSettings("SSL", keystore_location=pki.server_pem))
    assert tls.context.verify_mode == ssl.CERT_NONE
    assert tls.keystore_not_after is not None and tls.truststore_not_after is None
    assert handshake(tls.context, client_context(pki)).version() in ("TLSv1.2", "TLSv1.3")


def test_inline_pem_even_on_one_line_leaves_no_key_file(pki):
    before = set(glob.glob(os.path.join(tempfile.gettempdir(), "compactlog-tls-*")))
    one_line = " ".join(pki.server_key.splitlines())           # as a .properties value may carry it
    tls = server_context(TlsSettings("SSL", keystore_key=one_line, keystore_chain=pki.server_chain))
    handshake(tls.context, client_context(pki))
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), "compactlog-tls-*"))) == before


def test_pkcs12_key_store_and_trust_store(pki):
    tls = server_context(TlsSettings("MTLS", keystore_type="PKCS12", keystore_location=pki.server_p12,
                                     keystore_password=pki.p12_password, truststore_type="PKCS12",
                                     truststore_location=pki.ca_p12, truststore_password=pki.p12_password,
                                     client_auth="required"))
    assert tls.context.verify_mode == ssl.CERT_REQUIRED and tls.truststore_not_after is not None
    server = handshake(tls.context, client_context(pki, pki.alice_pem))
    assert subject_dn(server) == "CN=alice,OU=apps,O=example"


@pytest.mark.parametrize("settings, words", [
    (dict(keystore_type="JKS", keystore_location="x.jks"), ["keytool -importkeystore", "PKCS12"]),
    (dict(keystore_type="BCFKS", keystore_location="x"), ["use PEM or PKCS12"]),
    (dict(), ["needs a key store"]),
    (dict(keystore_location="{pem}", keystore_password="pw-secret"), ["not allowed for a PEM key store"]),
    (dict(keystore_location="{pem}", keystore_key="k", keystore_chain="c"), ["use one"]),
    (dict(keystore_key="k"), ["needs both"]),
    (dict(keystore_type="PKCS12", keystore_location="{p12}", keystore_password="wrong-secret"),
     ["is not a PKCS12 store this password opens"]),
    (dict(keystore_location="/nonexistent/server.pem"), ["cannot read"]),
    (dict(keystore_location="{ca}"), ["does not hold a private key"]),
    (dict(keystore_location="{pem}", client_auth="required"), ["needs a trust store"]),
    (dict(keystore_location="{pem}", client_auth="maybe"), ["use required, requested or none"]),
    (dict(keystore_location="{pem}", client_auth="required", truststore_type="JKS", truststore_location="t"),
     ["keytool"]),
    (dict(keystore_location="{pem}", enabled_protocols="TLSv1.1,TLSv1.2"), ["TLSv1.1 is not offered"]),
    (dict(keystore_location="{pem}", cipher_suites="TLS_RSA_WITH_RC4_128_MD5"), ["not a suite"]),
])
def test_refused_settings_say_what_is_wrong_and_no_secret(pki, settings, words):
    paths = {"{pem}": pki.server_pem, "{p12}": pki.server_p12, "{ca}": pki.ca}
    settings = {k: paths.get(v, v) for k, v in settings.items()}
    with pytest.raises(ConfigError) as e:
        server_context(TlsSettings("EXTERNAL", **settings))
    message = str(e.value)
    assert message.startswith("listener EXTERNAL: ")
    for w in words:
        assert w in message
    assert "secret" not in message


def test_protocols_and_cipher_suites(pki):
    tls = server_context(TlsSettings("SSL", keystore_location=pki.server_pem, enabled_protocols="TLSv1.3"))
    assert tls.context.minimum_version == ssl.TLSVersion.TLSv1_3
    assert handshake(tls.context, client_context(pki)).version() == "TLSv1.3"
    tls = server_context(TlsSettings("SSL", keystore_location=pki.server_pem, enabled_protocols="TLSv1.2",
                                     cipher_suites="TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"))
    server = handshake(tls.context, client_context(pki))
    assert server.version() == "TLSv1.2" and server.cipher()[0] == "ECDHE-ECDSA-AES128-GCM-SHA256"
    # TLS 1.3 suites only: no TLS 1.2 suite is left, so TLS 1.2 is off
    tls = server_context(TlsSettings("SSL", keystore_location=pki.server_pem, cipher_suites="TLS_AES_256_GCM_SHA384"))
    assert tls.context.minimum_version == ssl.TLSVersion.TLSv1_3


def test_settings_repr_hides_secrets():
    text = repr(TlsSettings("SSL", keystore_location="/k.p12", keystore_password="pw-secret",
                            key_password="key-secret", keystore_key="-----BEGIN PRIVATE KEY----- abc"))
    assert "secret" not in text and "PRIVATE" not in text


# -- principals ----------------------------------------------------------------------------------

def test_subject_without_cryptography_is_the_same(pki, monkeypatch):
    tls = server_context(TlsSettings("MTLS", keystore_location=pki.server_pem, truststore_location=pki.ca,
                                     client_auth="requested"))
    server = handshake(tls.context, client_context(pki, pki.alice_pem))
    with_crypto = subject_dn(server)
    monkeypatch.setitem(sys.modules, "cryptography", None)        # import cryptography fails
    assert subject_dn(server) == with_crypto == "CN=alice,OU=apps,O=example"
    # a client that sent no certificate: no subject (User:ANONYMOUS)
    assert subject_dn(handshake(tls.context, client_context(pki))) is None


DOCS_RULES = ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
              "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
              "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,DEFAULT")


@pytest.mark.parametrize("rules, dn, expected", [
    ("DEFAULT", "CN=alice,OU=apps,O=example", "CN=alice,OU=apps,O=example"),
    ("", "CN=alice,OU=apps", "CN=alice,OU=apps"),
    (DOCS_RULES, "CN=kafka-client,OU=ServiceUsers,O=Unknown", "kafka-client"),
    (DOCS_RULES, "CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Santa Clara,ST=CA,C=US", "duke@javasoft"),
    (DOCS_RULES, "OU=apps,CN=Bob.Smith,O=x", "bob.smith"),
    (DOCS_RULES, "OU=nobody", "OU=nobody"),                                 # DEFAULT last
    ("RULE:^CN=([^,]*),.*$/$1/U", "CN=alice,OU=apps", "ALICE"),
    ("RULE:^CN=([^,]*),OU=ops$/$1/", "CN=alice,OU=apps", None),           # no rule applies: refused
    ("RULE:^CN=(.*)$/svc-$1/, DEFAULT", "CN=a", "svc-a"),
])
def test_principal_mapping_rules(rules, dn, expected):
    assert PrincipalMapper(rules).name(dn) == expected


@pytest.mark.parametrize("rules", ["RULE:^CN=(.*$/$1/", "RULE:abc", "DEFAULTS", "RULE:a/b/X"])
def test_malformed_rules_are_refused(rules):
    with pytest.raises(ConfigError, match="ssl.principal.mapping.rules"):
        PrincipalMapper(rules)
