"""What of a request may reach a log line (security.md pitfall 4)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from compactlog.server.security.redaction import is_secret_setting, redacted_body
from compactlog.server.versions import request_schema


@pytest.mark.parametrize("name, secret", [
    ("ssl.keystore.password", True), ("ssl.key.password", True), ("ssl.truststore.password", True),
    ("ssl.keystore.key", True), ("listener.name.external.ssl.keystore.key", True),
    ("listener.name.sasl_ssl.plain.sasl.jaas.config", True), ("sasl.jaas.config", True),
    ("my.custom.secret", True),
    ("ssl.keystore.location", False), ("ssl.keystore.certificate.chain", False),
    ("sasl.enabled.mechanisms", False), ("cleanup.policy", False),
])
def test_secret_settings(name, secret):
    assert is_secret_setting(name) is secret


@pytest.mark.parametrize("api_key, version, body", [
    (17, 1, dict(mechanism="PLAIN")),
    (36, 2, dict(auth_bytes=b"\0alice\0alice-secret")),
])
def test_sasl_bodies_are_hidden(api_key, version, body):
    request = SimpleNamespace(api_key=api_key, body=request_schema(api_key, version)(**body))
    assert redacted_body(request) == "[hidden]"


def _entity_types(cls):
    """IncrementalAlterConfigs' resource and config entry classes."""
    resource = cls.__dataclass_fields__["resources"].type.__args__[0]
    return resource, resource.__dataclass_fields__["configs"].type.__args__[0]


def test_secret_config_values_are_masked_in_alter_configs():
    cls = request_schema(44, 1)
    resource, config = _entity_types(cls)
    body = cls(validate_only=False, resources=(resource(resource_type=4, resource_name="0", configs=(
        config(name="listener.name.sasl_ssl.plain.sasl.jaas.config", config_operation=0,
               value='PlainLoginModule required user_a="a-secret";'),
        config(name="log.retention.ms", config_operation=0, value="1000"))),))
    text = redacted_body(SimpleNamespace(api_key=44, body=body))
    assert "a-secret" not in text and "'[hidden]'" in text and "'1000'" in text
