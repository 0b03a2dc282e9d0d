"""``--command-config``: Kafka's client properties as librdkafka settings."""

from __future__ import annotations

import pytest

from compactlog.cli.client_config import client_settings, read_command_config
from compactlog.errors import ConfigError

JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" '
        'password="pa\\"ss-secret";')


def test_sasl_ssl_with_a_pem_trust_store():
    assert client_settings({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                            "sasl.jaas.config": JAAS, "ssl.truststore.type": "PEM",
                            "ssl.truststore.location": "tls/ca.pem"}) == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice",
        "sasl.password": 'pa"ss-secret', "ssl.ca.location": "tls/ca.pem"}


def test_key_stores_by_type():
    pem = client_settings({"security.protocol": "SSL", "ssl.keystore.type": "PEM",
                           "ssl.keystore.location": "client.pem", "ssl.key.password": "k"})
    assert pem == {"security.protocol": "SSL", "ssl.key.location": "client.pem",
                   "ssl.certificate.location": "client.pem", "ssl.key.password": "k"}
    p12 = client_settings({"ssl.keystore.location": "client.p12", "ssl.keystore.password": "s"})
    assert p12 == {"ssl.keystore.location": "client.p12", "ssl.keystore.password": "s"}


def test_hostname_check_off_and_java_only_settings_dropped():
    assert client_settings({"ssl.endpoint.identification.algorithm": "", "ssl.protocol": "TLSv1.3",
                            "request.timeout.ms": "1000", "client.id": "me"}) == {
        "ssl.endpoint.identification.algorithm": "none", "client.id": "me"}


@pytest.mark.parametrize("props, words", [
    ({"ssl.truststore.location": "trust.jks", "ssl.truststore.password": "t-secret"}, "keytool -exportcert"),
    ({"ssl.keystore.type": "JKS", "ssl.keystore.location": "k", "ssl.keystore.password": "k-secret"},
     "keytool -importkeystore"),
])
def test_jks_is_refused_without_its_password(props, words):
    with pytest.raises(ConfigError) as e:
        client_settings(props, "client.properties")
    assert words in str(e.value) and "secret" not in str(e.value)


def test_read_command_config(tmp_path):
    assert read_command_config(None) == {}
    with pytest.raises(ConfigError, match="no such file"):
        read_command_config(str(tmp_path / "missing.properties"))
    f = tmp_path / "client.properties"
    f.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config={JAAS}\n")
    assert read_command_config(str(f))["sasl.username"] == "alice"


def test_kafka_python_settings():
    from compactlog.cli.client_config import kafka_python_settings
    conf = client_settings({"security.protocol": "sasl_ssl", "sasl.mechanism": "SCRAM-SHA-256", "sasl.jaas.config": JAAS,
                            "ssl.truststore.location": "ca.pem", "ssl.endpoint.identification.algorithm": ""})
    assert kafka_python_settings(conf) == {
        "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-256", "sasl_plain_username": "alice",
        "sasl_plain_password": 'pa"ss-secret', "ssl_cafile": "ca.pem", "ssl_check_hostname": False}
    with pytest.raises(ConfigError, match="PKCS12"):
        kafka_python_settings(client_settings({"ssl.keystore.location": "c.p12", "ssl.keystore.password": "p"}))
