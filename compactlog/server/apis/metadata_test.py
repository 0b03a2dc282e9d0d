"""Metadata (``apis/metadata.py``) through the handler: auto-creation, topic ids kept, internal
topics, and the refusals of a one-node broker (replication factors, min.insync.replicas)."""

from __future__ import annotations

import os
import uuid

from kio.schema.errors import ErrorCode

from compactlog.server.apis.metadata import handle_metadata
from compactlog.server.conftest import request
from compactlog.server.messages import build, nested
from compactlog.server.protocol import encode_response
from compactlog.server.state import BrokerState, Listener
from compactlog.server.versions import request_schema
from compactlog.storage.config import BrokerConfig
from compactlog.storage.datadir import DataDir


def metadata(state, names, version=12, auto=True):
    cls = request_schema(3, version)
    t_cls = nested(cls, "MetadataRequestTopic")
    topics = None if names is None else tuple(build(t_cls, name=n, topic_id=None) for n in names)
    body = build(cls, topics=topics, allow_auto_topic_creation=auto,
                 include_topic_authorized_operations=False, include_cluster_authorized_operations=False)
    resp = handle_metadata(state, request(3, version, body))
    encode_response(request(3, version, body), resp)
    return resp


def test_metadata_auto_creates_and_keeps_topic_ids(state):
    resp = metadata(state, ["new", "bad name", "__consumer_offsets"])
    new, bad, internal = resp.topics
    assert (new.error_code, len(new.partitions), new.partitions[0].leader_id) == (ErrorCode.none, 1, 0)
    assert new.topic_id != uuid.UUID(int=0)
    assert bad.error_code == ErrorCode.invalid_topic_exception
    assert internal.error_code == ErrorCode.unknown_topic_or_partition
    assert metadata(state, ["new"]).topics[0].topic_id == new.topic_id
    assert metadata(state, ["other"], auto=False).topics[0].error_code == \
        ErrorCode.unknown_topic_or_partition
    assert [t.name for t in metadata(state, None).topics] == ["new"]
    assert metadata(state, [], version=1).topics == ()
    assert [t.name for t in metadata(state, [], version=0).topics] == ["new"]
    assert resp.brokers[0].port == 9092 and resp.cluster_id == state.cluster_id
    state.datadir.create_topic("__consumer_offsets", 2, {"cleanup.policy": "compact"})
    assert metadata(state, ["__consumer_offsets"]).topics[0].is_internal


def test_metadata_refuses_replication_factors_one_node_cannot_hold(tmp_path):
    dd = DataDir(str(tmp_path), broker=BrokerConfig({"default.replication.factor": "3"}),
                 writable=True, command="test")
    st = BrokerState(dd, 0, "c", Listener("PLAINTEXT", "h", 1))
    try:
        assert metadata(st, ["x"]).topics[0].error_code == ErrorCode.invalid_replication_factor
        assert not dd.has_topic("x")
    finally:
        dd.close()


def test_metadata_refuses_a_broker_min_insync_replicas_one_node_cannot_meet(tmp_path):
    dd = DataDir(str(tmp_path), broker=BrokerConfig({"min.insync.replicas": "2"}),
                 writable=True, command="test")
    st = BrokerState(dd, 0, "c", Listener("PLAINTEXT", "h", 1))
    try:
        assert metadata(st, ["x"]).topics[0].error_code == ErrorCode.invalid_config
        assert not dd.has_topic("x")
        assert not any(n.startswith("x-") for n in os.listdir(dd.path))
    finally:
        dd.close()


def test_metadata_does_not_auto_create_a_topic_colliding_with_another(state):
    """'x.y' and 'x_y' share their metric names: Kafka's topic creation refuses the second
    (INVALID_TOPIC_EXCEPTION, "collides with existing topic"), the auto-creation of a Metadata
    request as much as CreateTopics (AutoTopicCreationManager goes through the same creation)."""
    assert metadata(state, ["x.y"]).topics[0].error_code == ErrorCode.none
    for _ in range(2):                      # refused again: nothing was created the first time
        [t] = metadata(state, ["x_y"]).topics
        assert (t.error_code, t.partitions) == (ErrorCode.invalid_topic_exception, ())
        assert not state.has_topic("x_y")
    assert [t.name for t in metadata(state, None).topics] == ["x.y"]
    # names without '.' or '_' and names that do not collide are created as before
    assert [t.error_code for t in metadata(state, ["x-y", "x.z"]).topics] == [ErrorCode.none] * 2


def test_metadata_answers_a_topic_named_twice_once(state):
    """KafkaApis.handleTopicMetadataRequest reads the requested names into a set: one entry a
    topic, however many times the request names it."""
    state.create_topic("t", 1)
    resp = metadata(state, ["t", "nope", "t", "nope"], auto=False)
    assert [(t.name, t.error_code) for t in resp.topics] == \
        [("t", ErrorCode.none), ("nope", ErrorCode.unknown_topic_or_partition)]


def test_topics_asked_by_id_are_a_set_known_or_not(state):
    """KafkaApis reads the topic ids asked for into a set: a known id named twice is answered once
    (the names were already), and so is an unknown one (UNKNOWN_TOPIC_ID), which was answered once
    per mention."""
    known = metadata(state, ["t"]).topics[0].topic_id
    cls = request_schema(3, 12)
    t_cls = nested(cls, "MetadataRequestTopic")
    unknown = uuid.UUID(int=5)
    body = build(cls, topics=tuple(build(t_cls, name=None, topic_id=i) for i in (unknown, known, unknown, known)),
                 allow_auto_topic_creation=False, include_topic_authorized_operations=False,
                 include_cluster_authorized_operations=False)
    resp = handle_metadata(state, request(3, 12, body))
    encode_response(request(3, 12, body), resp)
    assert sorted((t.error_code, t.topic_id, t.name) for t in resp.topics) == sorted(
        [(ErrorCode.unknown_topic_id, unknown, None), (ErrorCode.none, known, "t")])
