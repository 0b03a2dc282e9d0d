"""Adversarial checks of the broker's authorization with hand-built frames, where the other
security modules do not look: what a refused request's answer carries besides its error code.

One broker for the module: ``StandardAuthorizer`` with no ACL (``allow.everyone.if.no.acl.found``
false), a PLAINTEXT listener whose clients are all User:ANONYMOUS, so every request is refused.
"""

from __future__ import annotations

import datetime

import pytest

from broker_support import Broker
from txn_support import Raw

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with Broker(tmp_path_factory.mktemp("security-qa") / "data",
                {"authorizer.class.name": AUTHORIZER, "super.users": "User:admin"}) as b:
        yield b


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
