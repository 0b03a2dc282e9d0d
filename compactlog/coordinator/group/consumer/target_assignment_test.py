"""``TargetAssignmentBuilder``: the cases of Kafka's ``TargetAssignmentBuilderTest`` (an assignor
that returns a prepared assignment and records the spec it was given), then the real assignors
over a group built by replay."""

from __future__ import annotations

import uuid

from compactlog.coordinator.group.consumer.assignors import ASSIGNORS, SubscriptionType
from compactlog.coordinator.group.consumer.model import (ConsumerGroup, ConsumerGroupMember, MetadataImage,
                                                         ResolvedRegularExpression, TopicImage, assignment, replay)
from compactlog.coordinator.group.consumer.target_assignment import TargetAssignmentBuilder
from compactlog.record import consumer_offsets as R

FOO, BAR = uuid.UUID(int=1), uuid.UUID(int=2)
IMAGE = MetadataImage([TopicImage(FOO, "foo", 6), TopicImage(BAR, "bar", 6)])
FB = ("foo", "bar", "zar")


class Prepared:
    """Kafka's mocked assignor: returns what was prepared, keeps the spec it got."""

    def __init__(self, result):
        self.result = result
        self.spec = None

    def assign(self, spec, partitions):
        self.spec = spec
        return self.result


def tp(foo=(), bar=()):
    return assignment({FOO: foo, BAR: bar})


def m(mid, names=FB, regex="", instance=None, rack=None):
    return ConsumerGroupMember(mid, subscribed_topic_names=frozenset(names), subscribed_topic_regex=regex,
                               instance_id=instance, rack_id=rack)


def build(members, targets, prepared, updates=(), removes=(), static=None, resolved=None):
    assignor = Prepared(prepared)
    b = TargetAssignmentBuilder("my-group", 20, assignor)
    b.members = {x.member_id: x for x in members}
    b.target_assignment = targets
    b.static_members = static or {x.instance_id: x.member_id for x in members if x.instance_id}
    b.image = IMAGE
    b.resolved = resolved or {}
    for u in updates:
        b.add_or_update_member(u.member_id, u)
    for r in removes:
        b.remove_member(r)
    return b.build(), assignor.spec


def records(result):
    """{member: assignment} of the target records, and the epoch of the last (metadata) record."""
    *members, last = result.records
    assert isinstance(last.key, R.ConsumerGroupTargetAssignmentMetadataKey)
    return {r.key.member_id: assignment(r.value.topic_partitions) for r in members}, last.value.assignment_epoch


def test_empty():
    result, _ = build([], {}, {})
    assert records(result) == ({}, 20) and result.target == {}


def test_assignment_has_not_changed_and_swapped():
    members = [m("member-1"), m("member-2")]
    targets = {"member-1": tp((1, 2, 3), (1, 2, 3)), "member-2": tp((4, 5, 6), (4, 5, 6))}
    result, spec = build(members, targets, dict(targets))
    assert records(result) == ({}, 20)
    assert result.target == targets
    # the assignor saw both members, their subscriptions (unknown "zar" left out) and targets
    assert {k: (set(v.topics), assignment(v.assignment)) for k, v in spec.members.items()} == \
        {k: ({FOO, BAR}, targets[k]) for k in targets}
    assert spec.is_partition_assigned(FOO, 1) and not spec.is_partition_assigned(FOO, 0)
    swapped = {"member-1": targets["member-2"], "member-2": targets["member-1"]}
    result, _ = build(members, targets, swapped)
    assert records(result) == (swapped, 20)


def test_new_member_and_update_member():
    targets = {"member-1": tp((1, 2, 3), (1, 2, 3)), "member-2": tp((4, 5, 6), (4, 5, 6))}
    new = {"member-1": tp((1, 2), (1, 2)), "member-2": tp((3, 4), (3, 4)), "member-3": tp((5, 6), (5, 6))}
    result, spec = build([m("member-1"), m("member-2")], targets, new, updates=[m("member-3")])
    assert records(result) == (new, 20) and result.target == new
    assert assignment(spec.members["member-3"].assignment) == {}
    # an updated member's new subscription, instance and rack reach the assignor
    targets["member-3"] = tp((), (5, 6))
    result, spec = build([m("member-1"), m("member-2"), m("member-3", ("bar", "zar"))], targets, new,
                         updates=[m("member-3", FB, instance="instance-id-3", rack="rack-0")])
    assert records(result) == (new, 20)
    s3 = spec.members["member-3"]
    assert (set(s3.topics), s3.instance_id, s3.rack_id) == ({FOO, BAR}, "instance-id-3", "rack-0")


def test_partial_update_writes_only_changed_members():
    targets = {"member-1": tp((1, 2), (1, 2)), "member-2": tp((3, 4), (3, 4)), "member-3": tp((5, 6), (5, 6))}
    new = {"member-1": tp((1, 2), (1, 2)), "member-2": tp((3, 4, 5), (3, 4, 5)), "member-3": tp((6,), (6,))}
    result, _ = build([m("member-1"), m("member-2"), m("member-3", ("bar", "zar"))], targets, new)
    assert records(result) == ({"member-2": new["member-2"], "member-3": new["member-3"]}, 20)


def test_delete_member():
    targets = {"member-1": tp((1, 2), (1, 2)), "member-2": tp((3, 4), (3, 4)), "member-3": tp((5, 6), (5, 6))}
    new = {"member-1": tp((1, 2, 3), (1, 2, 3)), "member-2": tp((4, 5, 6), (4, 5, 6))}
    result, spec = build([m("member-1"), m("member-2"), m("member-3")], targets, new, removes=["member-3"])
    assert set(spec.members) == {"member-1", "member-2"}
    assert records(result) == (new, 20) and result.target == new


def test_replace_static_member_takes_over_its_target():
    members = [m("member-1", instance="instance-member-1"), m("member-2", instance="instance-member-2"),
               m("member-3", instance="instance-member-3")]
    targets = {"member-1": tp((1, 2), (1, 2)), "member-2": tp((3, 4), (3, 4)), "member-3": tp((5, 6), (5, 6))}
    new = {"member-1": targets["member-1"], "member-2": targets["member-2"], "member-3-a": targets["member-3"]}
    result, spec = build(members, targets, new, removes=["member-3"],
                         updates=[m("member-3-a", instance="instance-member-3")])
    assert assignment(spec.members["member-3-a"].assignment) == targets["member-3"]
    assert "member-3" not in spec.members
    assert records(result) == ({"member-3-a": targets["member-3"]}, 20)
    assert result.target == new


def test_regular_expressions_add_their_topics():
    members = [m("member-1", ("bar", "zar"), "foo*"), m("member-2"), m("member-3", (), "foo*")]
    targets = {k: {} for k in ("member-1", "member-2", "member-3")}
    new = {"member-1": tp((1, 2), (1, 2)), "member-2": tp((3, 4), (3, 4)), "member-3": tp((5, 6))}
    resolved = {"foo*": ResolvedRegularExpression(frozenset({"foo"}), 10, 12345)}
    result, spec = build(members, targets, new, resolved=resolved)
    assert records(result) == (new, 20)
    assert {k: set(v.topics) for k, v in spec.members.items()} == \
        {"member-1": {FOO, BAR}, "member-2": {FOO, BAR}, "member-3": {FOO}}
    # an unresolved regex matches nothing
    _, spec = build(members, targets, new)
    assert set(spec.members["member-3"].topics) == set()


def test_member_order_is_javas_hash_map_order():
    ids = [f"member-{i}" for i in range(20)]
    _, spec = build([m(i) for i in ids], {}, {})
    from compactlog.coordinator.group.consumer.javaorder import java_order
    assert list(spec.members) == java_order(ids) != ids


def test_real_assignors_over_a_replayed_group():
    groups = {}
    members = [m(f"m{i}") for i in range(3)]
    for x in members:
        replay(groups, R.consumer_group_record(R.ConsumerGroupMemberMetadataKey("g", x.member_id), x.metadata_value()))
    g = groups["g"]
    assert g.subscription_type is SubscriptionType.HOMOGENEOUS
    for name in ("uniform", "range"):
        result = TargetAssignmentBuilder.for_group(g, 1, ASSIGNORS[name], IMAGE).build()
        targets, epoch = records(result)
        assert epoch == 1 and set(targets) == {"m0", "m1", "m2"}
        owned = sorted((t, p) for a in targets.values() for t, ps in a.items() for p in ps)
        assert owned == sorted([(FOO, p) for p in range(6)] + [(BAR, p) for p in range(6)])
        assert sorted(sum(len(ps) for ps in a.values()) for a in targets.values()) == [4, 4, 4]
    # replaying the uniform target and building again changes nothing: only the epoch record
    result = TargetAssignmentBuilder.for_group(g, 1, ASSIGNORS["uniform"], IMAGE).build()
    for r in result.records:
        replay(groups, r)
    again = TargetAssignmentBuilder.for_group(g, 2, ASSIGNORS["uniform"], IMAGE).build()
    assert records(again) == ({}, 2)
