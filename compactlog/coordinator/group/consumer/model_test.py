"""The consumer group model: member states, group state, subscription type (the cases of Kafka's
``ConsumerGroupTest.testSubscriptionType``), preferred assignor, partition epochs, replay with
Kafka's sanity checks, tombstones, and the metadata hash (KIP-1101)."""

from __future__ import annotations

import uuid

import pytest
import xxhash

from compactlog.coordinator.group.consumer.assignors import SubscriptionType
from compactlog.coordinator.group.consumer.model import (
    ConsumerGroup, ConsumerGroupMember, ConsumerGroupState, IllegalStateError, MemberState, MetadataImage,
    ResolvedRegularExpression, SubscriptionCount, TopicImage, assignment, compute_group_hash,
    compute_metadata_hash, compute_topic_hash, current_assignment_record, group_epoch_record,
    member_metadata_record, regex_record, replay, subscription_type, target_assignment_epoch_record,
    target_assignment_record, tombstones_for_group, tombstones_for_member, topic_hash_input)
from compactlog.record import consumer_offsets as R

HOM, HET = SubscriptionType.HOMOGENEOUS, SubscriptionType.HETEROGENEOUS
FOO, BAR = uuid.UUID(int=0x0102030405060708090A0B0C0D0E0F10), uuid.UUID(int=2)


def test_member_state_values():
    assert [int(s) for s in MemberState] == [0, 1, 2, 127]
    assert MemberState.from_value(2) is MemberState.UNRELEASED_PARTITIONS
    assert MemberState.from_value(5) is MemberState.UNKNOWN
    assert str(ConsumerGroupState.RECONCILING) == "Reconciling"
    m = ConsumerGroupMember("m")
    assert (m.member_epoch, m.previous_member_epoch, m.state, m.subscribed_topic_regex, m.rebalance_timeout_ms) == \
        (0, -1, MemberState.STABLE, "", -1)
    assert m.update_member_epoch(5).previous_member_epoch == 0
    assert m.update_member_epoch(0).previous_member_epoch == 0      # set even when unchanged


def test_subscription_type_cases_of_kafka():
    c = SubscriptionCount
    assert subscription_type({}, {}, 0) is HOM
    assert subscription_type({}, {"foo": c(5, 0)}, 5) is HOM
    assert subscription_type({}, {"foo": c(4, 0), "bar": c(1, 0)}, 5) is HET
    assert subscription_type({"foo*": 5}, {"foo": c(0, 1)}, 5) is HOM
    assert subscription_type({"foo*": 5}, {"foo": c(0, 1), "food": c(0, 1)}, 5) is HOM
    assert subscription_type({"foo*": 5}, {"foo": c(1, 1)}, 5) is HET
    assert subscription_type({"foo*": 5}, {"foo": c(0, 1), "bar": c(1, 0)}, 5) is HET
    assert subscription_type({"foo*": 4, "bar*": 1}, {"foo": c(0, 1), "bar": c(0, 1)}, 5) is HET


def test_group_state_and_subscription_type_follow_replay():
    groups = {}
    g1 = ConsumerGroupMember("m1", subscribed_topic_names=frozenset({"foo"}))
    replay(groups, member_metadata_record("g", g1))
    g = groups["g"]
    # a member known only by its metadata record is STABLE at epoch 0, the (new) group's epochs are 0
    assert g.state is ConsumerGroupState.STABLE
    replay(groups, group_epoch_record("g", 1, 0))
    assert g.state is ConsumerGroupState.ASSIGNING
    replay(groups, target_assignment_epoch_record("g", 1))
    assert g.state is ConsumerGroupState.RECONCILING       # m1 still at epoch 0
    replay(groups, current_assignment_record("g", g1.update_member_epoch(1)))
    assert g.state is ConsumerGroupState.STABLE and g.subscription_type is HOM
    m2 = ConsumerGroupMember("m2", subscribed_topic_regex="fo.*")
    replay(groups, member_metadata_record("g", m2))
    assert g.subscription_type is HET and g.subscribed_regexes() == {"fo.*": 1}
    replay(groups, regex_record("g", "fo.*", ResolvedRegularExpression(frozenset({"foo", "fox"}), 3, 99)))
    names = g.subscribed_topic_names()
    assert (names["foo"].by_name, names["foo"].by_regex, names["fox"].by_regex) == (1, 1, 1)
    assert g.subscribed_topics(g.members["m2"]) == {"foo", "fox"}


def test_empty_group_state():
    assert ConsumerGroup("g").state is ConsumerGroupState.EMPTY


def test_preferred_server_assignor():
    g = ConsumerGroup("g")
    m1, m2, m3 = (ConsumerGroupMember(f"member{i}", server_assignor=a)
                  for i, a in ((1, "range"), (2, "range"), (3, "uniform")))
    assert g.preferred_server_assignor() is None
    assert g.preferred_server_assignor(None, m1) == "range"
    g.update_member(m1)
    assert g.preferred_server_assignor(m1, None) is None
    g.update_member(m2)
    g.update_member(m3)
    assert g.preferred_server_assignor() == "range"
    g.update_member(m1.with_(server_assignor=None))
    # one each: Kafka's HashMap copy iterates "uniform" first, Stream.max keeps the first
    assert g.preferred_server_assignor() == "uniform"
    assert g.preferred_server_assignor(m2, m2.with_(server_assignor=None)) == "uniform"


def test_partition_epochs_and_static_members():
    g = ConsumerGroup("g")
    m1 = ConsumerGroupMember("m1", member_epoch=10, instance_id="i1",
                             assigned_partitions=assignment({FOO: [0, 1]}),
                             partitions_pending_revocation=assignment({BAR: [0]}))
    g.update_member(m1)
    assert g.current_partition_epoch(FOO, 1) == 10 and g.current_partition_epoch(BAR, 0) == 10
    assert g.current_partition_epoch(FOO, 2) == -1
    assert g.static_members == {"i1": "m1"}
    # another member may not own a partition at the same time
    with pytest.raises(IllegalStateError, match="still owned at epoch 10"):
        g.update_member(ConsumerGroupMember("m2", member_epoch=11, assigned_partitions=assignment({FOO: [1]})))
    g.update_member(m1.with_(member_epoch=11, partitions_pending_revocation={}))
    assert g.partition_epochs == {FOO: {0: 11, 1: 11}}
    g.remove_member("m1")
    assert g.partition_epochs == {} and g.static_members == {}


def _join(groups, mid="m", partition=0):
    m = ConsumerGroupMember(mid, member_epoch=1, previous_member_epoch=0, subscribed_topic_names=frozenset({"foo"}),
                            assigned_partitions=assignment({FOO: [partition]}))
    # spec §7.2: the first member of a new group writes 5, 3, 7, 6, 8
    for r in (member_metadata_record("g", m), group_epoch_record("g", 1, 7),
              target_assignment_record("g", mid, m.assigned_partitions), target_assignment_epoch_record("g", 1),
              current_assignment_record("g", m)):
        replay(groups, r)
    return m


def test_replay_builds_and_deletes_a_group_with_kafkas_checks():
    groups = {}
    m = _join(groups)
    g = groups["g"]
    assert (g.group_epoch, g.metadata_hash, g.assignment_epoch) == (1, 7, 1)
    assert g.members["m"] == m and g.target("m") == {FOO: frozenset({0})} and g.inverted_target == {FOO: {0: "m"}}
    assert g.state is ConsumerGroupState.STABLE
    # a member tombstone before its assignment tombstone contradicts the write order
    with pytest.raises(IllegalStateError, match="ConsumerGroupCurrentMemberAssignmentValue tombstone"):
        replay(groups, R.consumer_group_record(R.ConsumerGroupMemberMetadataKey("g", "m"), None))
    with pytest.raises(IllegalStateError, match="still has 1 members"):
        replay(groups, R.consumer_group_record(R.ConsumerGroupMetadataKey("g"), None))
    records = tombstones_for_group(g)
    assert [(r.key.version, getattr(r.key, "member_id", None)) for r in records] == \
        [(8, "m"), (7, "m"), (6, None), (5, "m"), (4, None), (3, None)]
    for r in records:
        replay(groups, r)
    assert groups == {}
    # tombstones of absent things are ignored
    for r in records:
        replay(groups, r)
    assert groups == {}


def test_fenced_member_tombstones_and_leave_epoch():
    groups = {}
    _join(groups)
    _join(groups, "n", 1)
    for r in tombstones_for_member("g", "m"):
        replay(groups, r)
    g = groups["g"]
    assert list(g.members) == ["n"] and "m" not in g.target_assignment
    # the 8 tombstone alone leaves the member at epoch -1 with nothing owned
    replay(groups, R.consumer_group_record(R.ConsumerGroupCurrentMemberAssignmentKey("g", "n"), None))
    assert (g.members["n"].member_epoch, g.members["n"].assigned_partitions) == (-1, {})
    assert g.partition_epochs == {}
    with pytest.raises(IllegalStateError, match="TargetAssignmentMetadataValue"):
        replay(groups, R.consumer_group_record(R.ConsumerGroupMemberMetadataKey("g", "n"), None))


def test_partition_metadata_record_is_remembered_for_its_tombstone():
    groups = {}
    v = R.ConsumerGroupPartitionMetadataValue([R.TopicMetadata(FOO, "foo", 1)])
    replay(groups, R.consumer_group_record(R.ConsumerGroupPartitionMetadataKey("g"), v))
    assert groups["g"].has_subscription_metadata_record
    replay(groups, R.consumer_group_record(R.ConsumerGroupPartitionMetadataKey("g"), None))
    assert not groups["g"].has_subscription_metadata_record


def test_member_records_round_trip_through_replay():
    cm = R.ClassicMemberMetadata(45000, [R.ClassicProtocol("range", b"\x00")])
    m = ConsumerGroupMember("m", 3, 2, MemberState.UNREVOKED_PARTITIONS, "i", "r", 300000, "c", "/h",
                            frozenset({"b", "a"}), "x.*", "range", assignment({FOO: [2]}),
                            assignment({BAR: [1]}), cm)
    assert m.metadata_value().subscribed_topic_names == ["a", "b"]     # sorted, as Kafka writes them
    groups = {}
    for r in (member_metadata_record("g", m), current_assignment_record("g", m)):
        replay(groups, R.decode_record(r.key_bytes(), r.value_bytes(), consumer_groups=True))
    assert groups["g"].members["m"] == m and m.use_classic_protocol()


# -- the metadata hash ------------------------------------------------------------------------------

def test_xxh3_is_the_reference_xxh3_64():
    # XXH3_64bits("") of the xxHash reference, which hash4j's XXH3_64 reproduces
    assert xxhash.xxh3_64_intdigest(b"") == 0x2D06800538D394C2


def test_topic_hash_streams_what_utils_test_streams():
    # UtilsTest.testComputeTopicHash: magic 0, msb, lsb, "foo", 2 partitions, racks per partition
    image = MetadataImage([TopicImage(FOO, "foo", 2, (("rack1", "rack0"), ("rack2", "rack1")))])
    expected = (b"\x00" + (0x0102030405060708).to_bytes(8, "little") + (0x090A0B0C0D0E0F10).to_bytes(8, "little")
                + "foo".encode("utf-16-le") + (3).to_bytes(4, "little") + (2).to_bytes(4, "little")
                + (0).to_bytes(4, "little")
                + (5).to_bytes(4, "little") + "rack0".encode("utf-16-le") + (5).to_bytes(4, "little")
                + (5).to_bytes(4, "little") + "rack1".encode("utf-16-le") + (5).to_bytes(4, "little")
                + (1).to_bytes(4, "little")
                + (5).to_bytes(4, "little") + "rack1".encode("utf-16-le") + (5).to_bytes(4, "little")
                + (5).to_bytes(4, "little") + "rack2".encode("utf-16-le") + (5).to_bytes(4, "little"))
    assert topic_hash_input(image.topic("foo")) == expected
    h = compute_topic_hash("foo", image)
    assert h == xxhash.xxh3_64_intdigest(expected) - (1 << 64) * (xxhash.xxh3_64_intdigest(expected) >> 63)
    assert -(1 << 63) <= h < 1 << 63
    assert compute_topic_hash("unknown", image) == 0
    # every field counts: id, name, partitions, racks
    for other in (TopicImage(BAR, "foo", 2, image.topic("foo").racks), TopicImage(FOO, "bar", 2, image.topic("foo").racks),
                  TopicImage(FOO, "foo", 1, image.topic("foo").racks[:1]), TopicImage(FOO, "foo", 2)):
        assert compute_topic_hash(other.name, MetadataImage([other])) != h


def test_group_hash():
    assert compute_group_hash({}) == 0
    assert compute_group_hash({"bar": 123, "foo": 456}) == compute_group_hash({"foo": 456, "bar": 123})
    assert compute_group_hash({"bar": 123, "foo": 456}) != compute_group_hash({"bar": 456, "foo": 123})
    data = (123).to_bytes(8, "little") + (-5 & (2**64 - 1)).to_bytes(8, "little")
    raw = xxhash.xxh3_64_intdigest(data)
    assert compute_group_hash({"foo": -5, "bar": 123}) == (raw - (1 << 64) if raw >= 1 << 63 else raw)
    image = MetadataImage([TopicImage(FOO, "foo", 3), TopicImage(BAR, "bar", 1)])
    cache = {}
    h = compute_metadata_hash(["foo", "bar", "missing"], image, cache)
    assert h == compute_group_hash({"foo": compute_topic_hash("foo", image), "bar": compute_topic_hash("bar", image)})
    assert set(cache) == {"foo", "bar"} and compute_metadata_hash(["bar", "foo"], image, cache) == h
    assert compute_metadata_hash(["missing"], image) == 0
