"""Adversarial checks of KIP-848 consumer groups on ``compactlog serve`` with unmodified clients,
where the other modules do not look: the group configs an operator sets with confluent-kafka's
admin client, checked as Kafka's ``GroupConfig.validate`` checks them.

One broker for the module (``CONSUMER_PROTOCOL_BROKER``: a 6 s minimum session, so that the
bounds of a session and of a heartbeat interval overlap).
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from groups_support import CONSUMER_PROTOCOL_BROKER, module_broker, names

broker = module_broker("kip848-qa", CONSUMER_PROTOCOL_BROKER)
TIMEOUT = 20


def _alter_group(admin, group, **settings):
    """IncrementalAlterConfigs SET on a GROUP resource (``consumer_session_timeout_ms=...``)."""
    res = ConfigResource("group", group, incremental_configs=[
        ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET) for k, v in settings.items()])
    return admin.incremental_alter_configs([res])[res].result(TIMEOUT)


def _group_configs(admin, group) -> dict:
    res = ConfigResource("group", group)
    return {k: v.value for k, v in admin.describe_configs([res])[res].result(TIMEOUT).items()}


def test_a_group_session_not_above_its_heartbeat_interval_is_refused(broker):
    """GroupConfig.validateValues: consumer.session.timeout.ms must be greater than
    consumer.heartbeat.interval.ms, the group's whole config after the change counted (a value it
    does not set is GroupConfig's default). Accepted, every member of the group would be told to
    heartbeat less often than its session lasts, and fenced at each session's end."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    group = names("cfg")[1]
    message = "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms"
    before = _group_configs(admin, group)
    with pytest.raises(KafkaException) as e:            # both in one request, each within its bounds
        _alter_group(admin, group, consumer_session_timeout_ms="10000", consumer_heartbeat_interval_ms="12000")
    assert (e.value.args[0].name(), e.value.args[0].str()) == ("INVALID_CONFIG", message)
    assert _group_configs(admin, group) == before                   # nothing of it kept
    _alter_group(admin, group, consumer_session_timeout_ms="8000")
    for hb in ("8000", "9000"):                                # against the session already set
        with pytest.raises(KafkaException) as e:
            _alter_group(admin, group, consumer_heartbeat_interval_ms=hb)
        assert (e.value.args[0].name(), e.value.args[0].str()) == ("INVALID_CONFIG", message)
    configs = _group_configs(admin, group)
    assert (configs["consumer.session.timeout.ms"], configs["consumer.heartbeat.interval.ms"]) == ("8000", before["consumer.heartbeat.interval.ms"])
    _alter_group(admin, group, consumer_heartbeat_interval_ms="7999")
    assert _group_configs(admin, group)["consumer.heartbeat.interval.ms"] == "7999"


def test_consumer_group_describe_of_empty_and_blank_ids(broker):
    """GroupCoordinatorService.consumerGroupDescribe: only an empty id is INVALID_GROUP_ID (isGroupIdNotEmpty
    is ``!groupId.isEmpty()``), answered with the id "" and the code alone; a blank id is looked up
    like any other and not found. The broker answered both INVALID_GROUP_ID with a message."""
    from txn_support import Raw
    with Raw(broker.port) as raw:
        r = raw.call(69, 1, group_ids=["", "  "], include_authorized_operations=False)
    assert [(g.group_id, g.error_code, g.error_message is None) for g in r.groups] == \
        [("", 24, True), ("  ", 69, False)]
