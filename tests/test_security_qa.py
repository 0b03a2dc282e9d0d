"""Adversarial checks of the broker's authorization with hand-built frames, where the other
security modules do not look: what a refused request's answer carries besides its error code.

One broker for the module: ``StandardAuthorizer`` with no ACL (``allow.everyone.if.no.acl.found``
false by default), a PLAINTEXT listener whose clients are all User:ANONYMOUS, so every request is
refused, and a SASL_PLAINTEXT listener with PLAIN users from its JAAS setting.
"""

from __future__ import annotations

import datetime

import pytest

from security_support import SecureBroker
from txn_support import Raw

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


SECRET = "alice-qa-Secret-77"
ADMIN_SECRET = "admin-qa-Secret-78"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = SecureBroker(tmp_path_factory.mktemp("security-qa") / "data", {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN", "connection.failed.authentication.delay.ms": "50",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            f'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="{SECRET}" '
            f'user_admin="{ADMIN_SECRET}";',
        "authorizer.class.name": AUTHORIZER, "super.users": "User:admin"})
    b.start()
    b.port = b.ports["PLAINTEXT"]
    yield b
    b.stop()
    assert SECRET not in b.log_text() and ADMIN_SECRET not in b.log_text() and "Traceback" not in b.log_text()


def test_a_refused_describe_transactions_leaves_the_state_at_kafkas_defaults(broker):
    """KafkaApis.handleDescribeTransactionsRequest answers an id the principal may not DESCRIBE
    with a TransactionState holding only the id and TRANSACTIONAL_ID_AUTHORIZATION_FAILED: every
    other field at the schema's default (no default given: 0, the empty string, no topics), as
    TransactionCoordinator.handleDescribeTransactions leaves them beside its own errors. The
    broker sent -1 for the start time, the producer id and the epoch (a start time before the
    epoch, which kio's reader refuses)."""
    with Raw(broker.port) as raw:
        r = raw.call(65, 0, transactional_ids=["tx-a", "tx-b"])
    assert [(s.transactional_id, s.error_code, s.transaction_state, s.transaction_timeout,
             s.transaction_start_time, s.producer_id, s.producer_epoch, s.topics)
            for s in r.transaction_states] == [
        (tid, 53, "", datetime.timedelta(0), EPOCH, 0, 0, ()) for tid in ("tx-a", "tx-b")]


@pytest.mark.parametrize("token, message", [
    (b"alice\0" + SECRET.encode(), "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
    (b"\0alice\0" + SECRET.encode() + b"\0x\0y", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
    (b"\0al\xffice\0" + SECRET.encode(), "Authentication failed: Invalid username or password")],
    ids=["two-tokens", "five-tokens", "user-not-utf8"])
def test_a_malformed_plain_token_is_told_as_kafka_tells_it(broker, token, message):
    """PlainSaslServer throws SaslAuthenticationException for a token that is not three NUL-separated
    parts (extractTokens counts at most four), so SaslServerAuthenticator sends its text to the
    client; it reads the token as UTF-8 with replacement, so a byte that is not UTF-8 makes an
    unknown user. The broker sent the generic "invalid credentials" text for both."""
    with Raw(broker.ports["SASL_PLAINTEXT"]) as raw:
        assert raw.call(17, 1, mechanism="PLAIN").error_code == 0
        r = raw.call(36, 1, auth_bytes=token)
    assert (r.error_code, r.error_message, bytes(r.auth_bytes)) == (58, message, b"")


def sasl_plain(raw, user: str, secret: str) -> None:
    """SaslHandshake v1 and SaslAuthenticate v1 with PLAIN, by hand."""
    assert raw.call(17, 1, mechanism="PLAIN").error_code == 0
    assert raw.call(36, 1, auth_bytes=b"\0" + user.encode() + b"\0" + secret.encode()).error_code == 0


def test_describe_configs_answers_the_refused_resources_last(broker):
    """ConfigHelper.handleDescribeConfigsRequest splits the resources into authorized and refused
    and answers authorizedConfigs ++ unauthorizedConfigs: the refused ones (TOPIC_AUTHORIZATION_
    FAILED, "Topic authorization failed.", no configs) after the others, each part in the request's
    order. The broker answered in the request's order."""
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient, NewTopic,
                                       ResourcePatternType, ResourceType)
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.ports['SASL_PLAINTEXT']}",
                         "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                         "sasl.username": "admin", "sasl.password": ADMIN_SECRET})
    topics = ["cfg-hidden-1", "cfg-seen-1", "cfg-hidden-2", "cfg-seen-2"]
    for f in admin.create_topics([NewTopic(t, 1, 1) for t in topics]).values():
        f.result(20)
    for f in admin.create_acls([AclBinding(ResourceType.TOPIC, "cfg-seen-", ResourcePatternType.PREFIXED, "User:alice",
                                           "*", AclOperation.DESCRIBE_CONFIGS, AclPermissionType.ALLOW)],
                               request_timeout=20).values():
        assert f.result() is None
    with Raw(broker.ports["SASL_PLAINTEXT"]) as raw:
        sasl_plain(raw, "alice", SECRET)
        r = raw.call(32, 4, resources=[dict(resource_type=2, resource_name=t, configuration_keys=["cleanup.policy"])
                                       for t in topics], include_synonyms=False, include_documentation=False)
    assert [(x.resource_name, x.error_code, x.error_message, [c.name for c in x.configs]) for x in r.results] == [
        ("cfg-seen-1", 0, None, ["cleanup.policy"]), ("cfg-seen-2", 0, None, ["cleanup.policy"]),
        ("cfg-hidden-1", 29, "Topic authorization failed.", []), ("cfg-hidden-2", 29, "Topic authorization failed.", [])]
