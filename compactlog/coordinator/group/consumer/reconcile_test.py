"""Reconciliation (``CurrentAssignmentBuilder``) against every case of Kafka's
``CurrentAssignmentBuilderTest``, restated as data, then the reconciliation process of spec §3
(``GroupMetadataManagerTest.testReconciliationProcess``) driven through the group's replay."""

from __future__ import annotations

import uuid

import pytest

from compactlog.coordinator.group.consumer.model import (ConsumerGroup, ConsumerGroupMember, ConsumerGroupState,
                                                         MemberState, MetadataImage, ResolvedRegularExpression,
                                                         TopicImage, assignment, current_assignment_record,
                                                         replay, target_assignment_epoch_record,
                                                         target_assignment_record, group_epoch_record,
                                                         member_metadata_record)
from compactlog.coordinator.group.consumer.reconcile import CurrentAssignmentBuilder, FencedMemberEpochError

IDS = {n: uuid.UUID(int=i + 1) for i, n in enumerate(["topic1", "topic2", "foo", "bar"])}
IMAGE = MetadataImage([TopicImage(IDS[n], n, 10) for n in IDS])
STABLE, UNREVOKED, UNRELEASED, UNKNOWN = (MemberState.STABLE, MemberState.UNREVOKED_PARTITIONS,
                                          MemberState.UNRELEASED_PARTITIONS, MemberState.UNKNOWN)
T12 = ["topic1", "topic2"]


def a(spec: str) -> dict:
    """'topic1:123 topic2:456' -> an assignment (partitions are single digits)."""
    out = {}
    for part in spec.split():
        name, digits = part.split(":")
        out[IDS[name]] = [int(d) for d in digits]
    return assignment(out)


def owned(spec):
    return None if spec is None else [(t, sorted(ps)) for t, ps in a(spec).items()]


def epochs(spec):
    """An int for every partition, or {'topic1:234': 10, ...}, -1 elsewhere."""
    if isinstance(spec, int):
        return lambda t, p: spec
    table = {(t, p): e for key, e in spec.items() for t, ps in a(key).items() for p in ps}
    return lambda t, p: table.get((t, p), -1)


def member(state, epoch, prev, names=T12, regex="", assigned="", pending=""):
    return ConsumerGroupMember("member", member_epoch=epoch, previous_member_epoch=prev, state=state,
                               subscribed_topic_names=frozenset(names), subscribed_topic_regex=regex,
                               assigned_partitions=a(assigned), partitions_pending_revocation=a(pending))


BAR = {"bar*": ResolvedRegularExpression(frozenset({"bar"}), 12345, 0)}

# (Kafka test, member, target epoch, target, partition epochs, owned, subscription changed,
#  resolved regexes, expected: a member, "same" or "fenced")
CASES = [
    ("StableToStable", member(STABLE, 10, 10, assigned="topic1:123 topic2:456"), 11, "topic1:123 topic2:456",
     10, None, False, {}, member(STABLE, 11, 10, assigned="topic1:123 topic2:456")),
    ("StableToStableWithNewPartitions", member(STABLE, 10, 10, assigned="topic1:123 topic2:456"), 11,
     "topic1:1234 topic2:4567", -1, None, False, {},
     member(STABLE, 11, 10, assigned="topic1:1234 topic2:4567")),
    ("StableToUnrevokedPartitions", member(STABLE, 10, 10, assigned="topic1:123 topic2:456"), 11,
     "topic1:234 topic2:567", -1, None, False, {},
     member(UNREVOKED, 10, 10, assigned="topic1:23 topic2:56", pending="topic1:1 topic2:4")),
    ("StableToUnreleasedPartitions", member(STABLE, 10, 10, assigned="topic1:123 topic2:456"), 11,
     "topic1:1234 topic2:4567", 10, None, False, {},
     member(UNRELEASED, 11, 10, assigned="topic1:123 topic2:456")),
    ("StableToUnreleasedPartitionsWithOwnedPartitionsNotHavingRevokedPartitions",
     member(STABLE, 10, 10, assigned="topic1:123 topic2:456"), 11, "topic1:123 topic2:457",
     {"topic2:0123456789": 10}, "", False, {}, member(UNRELEASED, 11, 10, assigned="topic1:123 topic2:45")),
    ("UnrevokedPartitionsToStable",
     member(UNREVOKED, 10, 10, assigned="topic1:23 topic2:56", pending="topic1:1 topic2:4"), 11,
     "topic1:23 topic2:56", -1, "topic1:23 topic2:56", False, {},
     member(STABLE, 11, 10, assigned="topic1:23 topic2:56")),
    ("RemainsInUnrevokedPartitions (owned unknown)",
     member(UNREVOKED, 10, 10, assigned="topic1:23 topic2:56", pending="topic1:1 topic2:4"), 12,
     "topic1:3 topic2:6", -1, None, False, {}, "same"),
    ("RemainsInUnrevokedPartitions (still owns topic1-1)",
     member(UNREVOKED, 10, 10, assigned="topic1:23 topic2:56", pending="topic1:1 topic2:4"), 12,
     "topic1:3 topic2:6", -1, "topic1:123 topic2:56", False, {}, "same"),
    ("RemainsInUnrevokedPartitions (still owns topic2-4)",
     member(UNREVOKED, 10, 10, assigned="topic1:23 topic2:56", pending="topic1:1 topic2:4"), 12,
     "topic1:3 topic2:6", -1, "topic1:23 topic2:456", False, {}, "same"),
    ("UnrevokedPartitionsToUnrevokedPartitions(10, 12, 11)",
     member(UNREVOKED, 10, 10, assigned="topic1:23 topic2:56", pending="topic1:1 topic2:4"), 12,
     "topic1:3 topic2:6", -1, "topic1:23 topic2:56", False, {},
     member(UNREVOKED, 11, 10, assigned="topic1:3 topic2:6", pending="topic1:2 topic2:5")),
    ("UnrevokedPartitionsToUnrevokedPartitions(10, 10, 10)",
     member(UNREVOKED, 10, 10, assigned="topic1:23 topic2:56", pending="topic1:1 topic2:4"), 10,
     "topic1:3 topic2:6", -1, "topic1:23 topic2:56", False, {},
     member(UNREVOKED, 10, 10, assigned="topic1:3 topic2:6", pending="topic1:2 topic2:5")),
    ("UnrevokedPartitionsToUnreleasedPartitions", member(UNREVOKED, 11, 10, assigned="topic1:23 topic2:56"), 11,
     "topic1:234 topic2:567", 10, "topic1:23 topic2:56", False, {},
     member(UNRELEASED, 11, 11, assigned="topic1:23 topic2:56")),
    ("UnrevokedPartitionsToStableWithReturnedPartitionsPendingRevocation",
     member(UNREVOKED, 10, 10, assigned="topic1:23 topic2:56", pending="topic1:4"), 12,
     "topic1:234 topic2:567", {"topic1:234 topic2:56": 10}, "topic1:23 topic2:56", False, {},
     member(STABLE, 12, 10, assigned="topic1:234 topic2:567")),
    ("UnreleasedPartitionsToStable", member(UNRELEASED, 11, 11, assigned="topic1:23 topic2:56"), 12,
     "topic1:23 topic2:56", 10, None, False, {}, member(STABLE, 12, 11, assigned="topic1:23 topic2:56")),
    ("UnreleasedPartitionsToStableWithNewPartitions", member(UNRELEASED, 11, 11, assigned="topic1:23 topic2:56"),
     11, "topic1:234 topic2:567", -1, None, False, {},
     member(STABLE, 11, 11, assigned="topic1:234 topic2:567")),
    ("UnreleasedPartitionsToUnreleasedPartitions", member(UNRELEASED, 11, 11, assigned="topic1:23 topic2:56"),
     11, "topic1:234 topic2:567", 10, None, False, {}, "same"),
    ("UnreleasedPartitionsToUnrevokedPartitions", member(UNRELEASED, 11, 11, assigned="topic1:23 topic2:56"),
     12, "topic1:3 topic2:6", 10, None, False, {},
     member(UNREVOKED, 11, 11, assigned="topic1:3 topic2:6", pending="topic1:2 topic2:5")),
    ("UnknownState (owned unknown)",
     member(UNKNOWN, 11, 11, assigned="topic1:3 topic2:6", pending="topic1:2 topic2:5"), 12,
     "topic1:3 topic2:6", 10, None, False, {}, "fenced"),
    ("UnknownState (rejoins owning nothing)",
     member(UNKNOWN, 11, 11, assigned="topic1:3 topic2:6", pending="topic1:2 topic2:5"), 12,
     "topic1:3 topic2:6", 11, "", False, {}, member(STABLE, 12, 11, assigned="topic1:3 topic2:6")),
    ("RemainsInUnrevokedPartitionsWithAssignmentTopicsNoLongerInSubscription",
     member(UNREVOKED, 10, 10, names=["topic2"], assigned="topic1:23 topic2:56", pending="topic1:1 topic2:4"),
     12, "topic1:134 topic2:67", -1, "topic1:123 topic2:456", True, {},
     member(UNREVOKED, 10, 10, names=["topic2"], assigned="topic2:56", pending="topic1:123 topic2:4")),
    ("SubscribedTopicNameAndUnresolvedRegularExpression",
     member(STABLE, 10, 10, names=["foo"], regex="bar*", assigned="foo:123 bar:456"), 10, "foo:123 bar:456",
     -1, "foo:123 bar:456", True, {},
     member(UNREVOKED, 10, 10, names=["foo"], regex="bar*", assigned="foo:123", pending="bar:456")),
    ("UnresolvedRegularExpression",
     member(STABLE, 10, 10, names=[], regex="bar*", assigned="foo:123 bar:456"), 10, "foo:123 bar:456",
     -1, "foo:123 bar:456", True, {},
     member(UNREVOKED, 10, 10, names=[], regex="bar*", assigned="", pending="foo:123 bar:456")),
    ("SubscribedTopicNameAndResolvedRegularExpression",
     member(STABLE, 10, 10, names=["foo"], regex="bar*", assigned="foo:123 bar:456"), 10, "foo:123 bar:456",
     -1, "foo:123 bar:456", True, BAR, "same"),
]
# the two parameterised tests of topics no longer subscribed: (member epoch, target epoch,
# expected epoch, subscription changed)
for me, te, ee, changed in [(10, 11, 11, False), (10, 11, 11, True), (10, 10, 10, True)]:
    CASES.append((f"StableToStableWithAssignmentTopicsNoLongerInSubscription({me}, {te}, {ee}, {changed})",
                  member(STABLE, me, me, names=["topic2"], assigned="topic1:123 topic2:456"), te,
                  "topic1:123 topic2:456", -1, "topic2:456", changed, {},
                  member(STABLE, ee, me, names=["topic2"], assigned="topic2:456")))
for me, te, ee, changed in [(10, 11, 10, False), (10, 11, 10, True), (10, 10, 10, True)]:
    CASES.append((f"StableToUnrevokedPartitionsWithAssignmentTopicsNoLongerInSubscription({me}, {te}, {ee}, {changed})",
                  member(STABLE, me, me, names=["topic2"], assigned="topic1:123 topic2:456"), te,
                  "topic1:123 topic2:456", -1, "topic1:123 topic2:456", changed, {},
                  member(UNREVOKED, ee, me, names=["topic2"], assigned="topic2:456", pending="topic1:123")))


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_current_assignment_builder_test_cases(case):
    _, m, target_epoch, target, part_epochs, own, changed, resolved, expected = case
    builder = (CurrentAssignmentBuilder(m).with_metadata_image(IMAGE)
               .with_target_assignment(target_epoch, a(target))
               .with_current_partition_epoch(epochs(part_epochs))
               .with_owned_partitions(owned(own))
               .with_subscription_changed(changed)
               .with_resolved_regexes(resolved))
    if expected == "fenced":
        with pytest.raises(FencedMemberEpochError):
            builder.build()
        return
    got = builder.build()
    assert got == (m if expected == "same" else expected)


# -- spec §3: GroupMetadataManagerTest.testReconciliationProcess ---------------------------------

FOO, BAR_ID = uuid.UUID(int=101), uuid.UUID(int=102)
IMG2 = MetadataImage([TopicImage(FOO, "foo", 6), TopicImage(BAR_ID, "bar", 3)])


def tp(foo=(), bar=()):
    return assignment({FOO: foo, BAR_ID: bar})


def test_reconciliation_process_of_spec_section_3():
    groups: dict[str, ConsumerGroup] = {}

    def apply(records):
        for r in records:
            replay(groups, r)

    names = frozenset({"foo", "bar"})
    m1 = ConsumerGroupMember("m1", 10, 9, subscribed_topic_names=names, assigned_partitions=tp((0, 1, 2), (0, 1)))
    m2 = ConsumerGroupMember("m2", 10, 9, subscribed_topic_names=names, assigned_partitions=tp((3, 4, 5), (2,)))
    apply([member_metadata_record("g", m1), member_metadata_record("g", m2), group_epoch_record("g", 10, 0),
           target_assignment_record("g", "m1", m1.assigned_partitions),
           target_assignment_record("g", "m2", m2.assigned_partitions),
           target_assignment_epoch_record("g", 10),
           current_assignment_record("g", m1), current_assignment_record("g", m2)])
    g = groups["g"]
    assert g.state is ConsumerGroupState.STABLE
    # m3 joins: epoch 11 and its target (the uniform assignor's, spec §3)
    m3 = ConsumerGroupMember("m3", 0, -1, subscribed_topic_names=names)
    targets = {"m1": tp((0, 1), (0,)), "m2": tp((2, 3), (2,)), "m3": tp((4, 5), (1,))}
    apply([member_metadata_record("g", m3), group_epoch_record("g", 11, 0)]
          + [target_assignment_record("g", k, v) for k, v in targets.items()]
          + [target_assignment_epoch_record("g", 11)])
    assert g.state is ConsumerGroupState.RECONCILING

    def heartbeat(mid, own):
        m = g.members[mid]
        new = (CurrentAssignmentBuilder(m).with_metadata_image(IMG2)
               .with_target_assignment(g.assignment_epoch, g.target(mid))
               .with_current_partition_epoch(g.current_partition_epoch)
               .with_owned_partitions(None if own is None else list(own.items()))
               .build())
        if new != m:
            apply([current_assignment_record("g", new)])
        return g.members[mid]

    steps = [
        ("m3", {}, 11, {}, UNRELEASED),
        ("m1", None, 10, tp((0, 1), (0,)), UNREVOKED),
        ("m2", None, 10, tp((3,), (2,)), UNREVOKED),
        ("m3", None, 11, {}, UNRELEASED),
        ("m1", tp((0, 1), (0,)), 11, tp((0, 1), (0,)), STABLE),
        ("m2", None, 10, tp((3,), (2,)), UNREVOKED),
        ("m3", None, 11, tp((), (1,)), UNRELEASED),          # bar-1 freed by m1 in step 5
        ("m3", None, 11, tp((), (1,)), UNRELEASED),
        ("m2", tp((3,), (2,)), 11, tp((2, 3), (2,)), STABLE),  # foo-2 freed in step 5
        ("m3", tp((), (1,)), 11, tp((4, 5), (1,)), STABLE),
    ]
    for i, (mid, own, epoch, assigned, state) in enumerate(steps, 1):
        m = heartbeat(mid, own)
        assert (m.member_epoch, m.assigned_partitions, m.state) == (epoch, assigned, state), f"step {i}"
    assert g.members["m1"].partitions_pending_revocation == {}
    assert g.members["m3"].previous_member_epoch == 11
    assert g.state is ConsumerGroupState.STABLE
    # every partition owned once, at epoch 11
    assert g.partition_epochs == {FOO: {p: 11 for p in range(6)}, BAR_ID: {p: 11 for p in range(3)}}
