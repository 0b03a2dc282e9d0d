"""SASL/PLAIN as Kafka's PlainSaslServer: three tokens, users from JAAS or from the SCRAM store."""

from __future__ import annotations

import pytest

from compactlog.errors import ConfigError
from compactlog.server.security.errors import SaslFailure
from compactlog.server.security.plain import PlainServer, parse_plain_jaas
from compactlog.server.security.scram import SCRAM_SHA_512, new_credential


def test_jaas_users():
    users = parse_plain_jaas('org.apache.kafka.common.security.plain.PlainLoginModule required '
                             'username="admin" password="admin-secret" user_admin="admin-secret" '
                             'user_alice="al\\"ice";')
    assert users == {"admin": "admin-secret", "alice": 'al"ice'}
    with pytest.raises(ConfigError):
        parse_plain_jaas('org.example.Other required user_a="b";')


def test_logins():
    creds = {"bob": (SCRAM_SHA_512, new_credential(SCRAM_SHA_512, "bob-secret"))}
    ok = PlainServer({"alice": "pw"}, creds.get)
    assert ok.evaluate(b"\0alice\0pw") == b"" and ok.complete and ok.authorization_id == "alice"
    assert PlainServer({}, creds.get).evaluate(b"bob\0bob\0bob-secret") == b""     # authzid = user
    for token, to_client in [(b"\0alice\0nope", True), (b"\0carol\0pw", True), (b"\0bob\0nope", True),
                             (b"x\0alice\0pw", True), (b"\0\0pw", True), (b"\0alice\0", True),
                             (b"alice\0pw", True), (b"\0a\0b\0c", True), (b"\0\xff\0pw", True)]:
        with pytest.raises(SaslFailure) as e:
            PlainServer({"alice": "pw"}, creds.get).evaluate(token)
        assert e.value.to_client == to_client, token
        assert b"pw" not in e.value.message.encode() or token == b"\0alice\0pw"


def test_malformed_tokens_get_kafkas_texts():
    """PlainSaslServer.extractTokens: at most four tokens counted; a byte that is not UTF-8 is
    replaced, so the user is unknown rather than the token unreadable."""
    for token, text in [(b"alice\0pw", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
                        (b"", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"),
                        (b"\0a\0b\0c\0d\0e", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
                        (b"\0al\xffice\0pw", "Authentication failed: Invalid username or password")]:
        with pytest.raises(SaslFailure) as e:
            PlainServer({"alice": "pw", "al\ufffdice": "other"}, None).evaluate(token)
        assert (e.value.message, e.value.to_client) == (text, True), token
