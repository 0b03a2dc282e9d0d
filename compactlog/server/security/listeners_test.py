"""Each listener's security from Kafka's settings: the protocol map, the lookup order of
``listener.name.<l>.[<mechanism>.]<setting>``, the start-up checks of security.md §1.3, KIP-684's
rule for ``ssl.client.auth`` on SASL_SSL, PLAIN users from JAAS and principals from certificates."""

from __future__ import annotations

import logging
import ssl

import pytest

from compactlog.errors import ConfigError
from compactlog.server.security.credentials import CredentialCache
from compactlog.server.security.listeners import (ANONYMOUS, BrokerSecurity, ListenerSettings,
                                                  parse_protocol_map)
from compactlog.server.state import Listener, parse_listeners

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_carol="carol-secret";'


def security(tmp_path, listeners: str, **props) -> BrokerSecurity:
    props = {k.replace("__", "."): v for k, v in props.items()}
    protocols = parse_protocol_map(props.get("listener.security.protocol.map",
                                             "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                             "SASL_SSL:SASL_SSL"))
    return BrokerSecurity(props, parse_listeners(listeners, "listeners", protocols), CredentialCache(str(tmp_path)))


@pytest.mark.parametrize("value, words", [
    ("EXTERNAL:TLS", "'TLS' is not a security protocol"),
    ("EXTERNAL", "is not NAME:PROTOCOL"),
    ("A:SSL,a:PLAINTEXT", "mapped twice"),
])
def test_protocol_map_errors(value, words):
    with pytest.raises(ConfigError, match=words):
        parse_protocol_map(value)


def test_listener_names_need_a_protocol():
    assert [(x.name, x.protocol) for x in parse_listeners(
        "internal://127.0.0.1:0,EXTERNAL://:9093", "listeners", {"INTERNAL": "PLAINTEXT", "EXTERNAL": "SASL_SSL"})] \
        == [("INTERNAL", "PLAINTEXT"), ("EXTERNAL", "SASL_SSL")]
    with pytest.raises(ConfigError, match="no security protocol defined for listener CLIENT"):
        parse_listeners("CLIENT://127.0.0.1:0", "listeners", {"PLAINTEXT": "PLAINTEXT"})


def test_lookup_order_mechanism_listener_bare_default():
    props = {"connections.max.reauth.ms": "1", "listener.name.ext.connections.max.reauth.ms": "2",
             "listener.name.ext.scram-sha-256.connections.max.reauth.ms": "3"}
    ext = ListenerSettings(props, "EXT")
    assert ext.integer("connections.max.reauth.ms", "SCRAM-SHA-256") == 3
    assert ext.integer("connections.max.reauth.ms", "PLAIN") == 2
    assert ListenerSettings(props, "OTHER").integer("connections.max.reauth.ms", "PLAIN") == 1
    assert ListenerSettings({}, "OTHER").get("ssl.client.auth") == "none"
    with pytest.raises(ConfigError, match="not a number"):
        ListenerSettings({"connections.max.reauth.ms": "soon"}, "X").integer("connections.max.reauth.ms")


@pytest.mark.parametrize("props, words", [
    ({}, "No SASL mechanisms are enabled"),
    ({"sasl.enabled.mechanisms": "GSSAPI"}, "GSSAPI (Kerberos) is not offered"),
    ({"sasl.enabled.mechanisms": "OAUTHBEARER"}, "OAUTHBEARER (OAuth bearer tokens) is not offered"),
    ({"sasl.enabled.mechanisms": "plain"}, "names are case-sensitive"),
    ({"sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config":
      "org.apache.kafka.common.security.scram.ScramLoginModule required;"}, "PlainLoginModule"),
])
def test_sasl_start_up_checks(tmp_path, props, words):
    with pytest.raises(ConfigError) as e:
        security(tmp_path, "SASL_PLAINTEXT://127.0.0.1:0", **props)
    assert str(e.value).startswith("listener SASL_PLAINTEXT (SASL_PLAINTEXT): ") and words in str(e.value)


@pytest.mark.parametrize("name, value", [
    ("principal.builder.class", "com.example.MyPrincipalBuilder"),
    ("listener.name.sasl_ssl.scram-sha-256.sasl.server.callback.handler.class", "com.example.Handler"),
])
def test_java_classes_are_refused(tmp_path, name, value):
    with pytest.raises(ConfigError, match=f"{name}: a Java class .* cannot be loaded"):
        security(tmp_path, "PLAINTEXT://127.0.0.1:0", **{name: value})
    # Kafka's own default builder is what compactlog does anyway
    security(tmp_path, "PLAINTEXT://127.0.0.1:0", **{
        "principal.builder.class": "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder"})


def test_tls_listener_without_key_store_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="listener SSL: a TLS listener needs a key store"):
        security(tmp_path, "SSL://127.0.0.1:0")


def test_sasl_listener_settings(tmp_path, caplog):
    caplog.set_level(logging.WARNING, "kafka.network.SocketServer")
    s = security(tmp_path, "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0", **{
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "listener.name.sasl_plaintext.scram-sha-512.connections.max.reauth.ms": "60000",
        "sasl.jaas.config": JAAS})
    sasl = s.listener("SASL_PLAINTEXT")
    assert sasl.mechanisms == ("SCRAM-SHA-512", "PLAIN") and sasl.uses_sasl and not sasl.uses_tls
    assert sasl.reauth_ms == {"SCRAM-SHA-512": 60000, "PLAIN": 0}
    assert sasl.plain_users == {"carol": "carol-secret"}
    assert "carol-secret" not in repr(sasl) + repr(s.listener("PLAINTEXT"))
    assert s.listener("PLAINTEXT").mechanisms == () and not s.listener("PLAINTEXT").uses_sasl
    warnings = caplog.text
    assert "sasl.jaas.config without a listener prefix is ignored" in warnings
    assert "PLAIN sends passwords in clear" in warnings
    assert "carol-secret" not in warnings
    assert set(s.stats()) == {"PLAINTEXT", "SASL_PLAINTEXT"}
    assert s.stats()["SASL_PLAINTEXT"]["failed_authentication"] == 0


def test_client_auth_on_sasl_ssl_only_when_prefixed(tmp_path, pki, caplog):   # KIP-684
    caplog.set_level(logging.WARNING, "kafka.network.SocketServer")
    common = {"ssl.keystore.location": pki.server_pem, "ssl.truststore.location": pki.ca,
              "sasl.enabled.mechanisms": "SCRAM-SHA-256", "ssl.client.auth": "required"}
    s = security(tmp_path, "SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0", **common)
    assert s.listener("SSL").tls.context.verify_mode == ssl.CERT_REQUIRED
    assert s.listener("SASL_SSL").tls.context.verify_mode == ssl.CERT_NONE
    assert "ssl.client.auth=required is ignored on the SASL_SSL listener SASL_SSL" in caplog.text
    s = security(tmp_path, "SASL_SSL://127.0.0.1:0", **common, **{"listener.name.sasl_ssl.ssl.client.auth": "requested"})
    assert s.listener("SASL_SSL").tls.context.verify_mode == ssl.CERT_OPTIONAL


def test_principal_from_certificate(tmp_path, pki):
    s = security(tmp_path, "MTLS://127.0.0.1:0", **{
        "listener.security.protocol.map": "MTLS:SSL", "ssl.keystore.location": pki.server_pem,
        "ssl.truststore.location": pki.ca, "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.mtls.ssl.principal.mapping.rules": "RULE:^CN=([^,]*),OU=apps,.*$/$1/L"})
    mtls = s.listener("MTLS")
    assert s.principal_from_certificate(mtls, "CN=Alice,OU=apps,O=example") == "User:alice"
    assert s.principal_from_certificate(mtls, "CN=bob,OU=ops,O=example") is None    # no rule: refused
    assert s.principal_from_certificate(mtls, None) == ANONYMOUS


def test_failure_delay_and_receive_size(tmp_path):
    s = security(tmp_path, "PLAINTEXT://127.0.0.1:0", **{"connection.failed.authentication.delay.ms": "-5"})
    assert s.failed_authentication_delay_ms == 0 and s.max_receive_size == 524288
    with pytest.raises(ConfigError, match="sasl.server.max.receive.size"):
        security(tmp_path, "PLAINTEXT://127.0.0.1:0", **{"sasl.server.max.receive.size": "0"})


def test_listener_str_keeps_its_name():
    assert str(Listener("EXTERNAL", "::1", 9093, "SASL_SSL")) == "EXTERNAL://[::1]:9093"
