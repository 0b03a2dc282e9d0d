"""The uniform and range assignors against the expected outputs of Kafka's assignor tests
(``OptimizedUniformAssignmentBuilderTest``, ``UniformHeterogeneousAssignmentBuilderTest``,
``RangeAssignorTest``, apache/kafka group-coordinator) and the data cases of spec §4.6; then
properties (validity, balance, stickiness) over random groups."""

from __future__ import annotations

import random
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compactlog.coordinator.group.consumer.assignors import (ASSIGNORS, GroupSpec, MemberSpec, PartitionAssignorError, RangeAssignor,
                        SubscriptionType, UniformAssignor)
from compactlog.coordinator.group.consumer.javaorder import (hash_set_capacity, java_order, java_partitions, jhash, kafka_uuid, uuid_text)

HOM, HET = SubscriptionType.HOMOGENEOUS, SubscriptionType.HETEROGENEOUS
T1 = kafka_uuid("T1-A4s3VTwiI5CTbEp6POw")
T2 = kafka_uuid("T2-B4s3VTwiI5YHbPp6YUe")
T3 = kafka_uuid("T3-CU8fVTLCz5YMkLoDQsa")
T4 = kafka_uuid("T4-Tw9fVTLCz5HbPp6YQsa")
uniform, range_ = UniformAssignor(), RangeAssignor()


def hm(*entries):
    """``mkAssignment(mkTopicAssignment(...), ...)``: a HashMap of HashSets, iterated as Java does."""
    d = dict(entries)
    return {t: java_partitions(d[t]) for t in java_order(d)}


def ordered(*entries):
    """``mkOrderedAssignment``: a LinkedHashMap (topics in the given order) of HashSets."""
    return {t: java_partitions(p) for t, p in entries}


def tp(topic, *parts):
    return topic, parts


def m(topics, assignment=None, instance=None):
    return MemberSpec(tuple(topics), assignment or {}, instance)


def exp(*entries):
    return {t: set(p) for t, p in entries}


def run(assignor, members, kind, partitions):
    return assignor.assign(GroupSpec(dict(members), kind), partitions)


# -- Java order ----------------------------------------------------------------------------------

def test_kafka_uuid_hash_codes_and_hash_set_order():
    # spec §4.6: the four topic ids of Kafka's assignor tests
    assert [jhash(t) for t in (T1, T2, T3, T4)] == [418407434, 885118816, 365927798, -1944536819]
    assert java_order([T1, T2, T3, T4]) == [T2, T4, T3, T1]
    assert uuid_text(T1) == "T1-A4s3VTwiI5CTbEp6POw"
    with pytest.raises(ValueError, match="not a Kafka Uuid"):
        kafka_uuid("abc")


def test_java_order_matches_a_jdk17_hash_map():
    # keys and iteration orders printed by JDK 17's jshell (HashMap<String,Integer> filled in this
    # order from the default capacity, and from capacity 2; a HashSet<Integer> copied from a list)
    keys = (
        "m64236,m49164,m29485,m78044,m89380,m66254,m87968,m96649,m98850,m39534,m31200,m13712,m787"
        "08,m88911,m74495,m89662,m12961,m50738,m71307,m38279,m57842,m43924,m58883,m77051,m98718,m"
        "62004,m5239,m37400,m66576,m49811,m123,m78073,m58679,m63891,m34535,m16492,m91818,m17506,m"
        "45646,m23234"
    ).split(",")
    jdk = (
        "m91818,m78044,m57842,m17506,m49164,m39534,m89380,m96649,m71307,m58679,m78708,m49811,m507"
        "38,m66576,m66254,m123,m74495,m64236,m78073,m87968,m31200,m13712,m88911,m29485,m58883,m52"
        "39,m38279,m37400,m12961,m34535,m98718,m89662,m63891,m16492,m98850,m43924,m62004,m23234,m"
        "77051,m45646"
    ).split(",")
    assert java_order(keys) == jdk
    assert java_order(keys[:5], 2) == ["m49164", "m64236", "m78044", "m89380", "m29485"]
    assert java_order([40, 3, 17, 33, 1, 64, 16], hash_set_capacity(7)) == [64, 16, 17, 33, 1, 3, 40]
    assert java_partitions([5, 0, 3]) == [0, 3, 5]


# -- OptimizedUniformAssignmentBuilderTest ------------------------------------------------------

def test_uniform_homogeneous_no_subscription_and_missing_topic():
    assert run(uniform, {"A": m([])}, HOM, {T1: 3}) == {}
    with pytest.raises(PartitionAssignorError, match="doesn't exist"):
        run(uniform, {"A": m([T2])}, HOM, {T1: 3})


def test_uniform_homogeneous_first_assignment_U1_U2():
    assert run(uniform, {"A": m([T1, T3]), "B": m([T1, T3])}, HOM, {T1: 3, T3: 2}) == \
        {"A": exp(tp(T3, 0, 1)), "B": exp(tp(T1, 0, 1, 2))}
    assert run(uniform, {"A": m([T3]), "B": m([T3]), "C": m([T3])}, HOM, {T3: 2}) == \
        {"A": {}, "B": exp(tp(T3, 0)), "C": exp(tp(T3, 1))}


def test_uniform_homogeneous_unbalanced_previous_U3():
    members = {"A": m([T1, T2], ordered(tp(T1, 0, 1), tp(T2, 0, 1))),
               "B": m([T1, T2], ordered(tp(T1, 2), tp(T2, 2)))}
    assert run(uniform, members, HOM, {T1: 3, T2: 3}) == \
        {"A": exp(tp(T1, 0, 1), tp(T2, 0)), "B": exp(tp(T1, 2), tp(T2, 1, 2))}


def test_uniform_homogeneous_partitions_added():
    members = {"A": m([T1, T2], ordered(tp(T1, 0, 2), tp(T2, 0))),
               "B": m([T1, T2], ordered(tp(T1, 1), tp(T2, 1, 2)))}
    assert run(uniform, members, HOM, {T1: 6, T2: 5}) == \
        {"A": exp(tp(T1, 0, 2), tp(T2, 0, 3, 4)), "B": exp(tp(T1, 1, 3, 4, 5), tp(T2, 1, 2))}


def test_uniform_homogeneous_member_added_U4():
    members = {"A": m([T1, T2], ordered(tp(T1, 0, 2), tp(T2, 0))),
               "B": m([T1, T2], ordered(tp(T1, 1), tp(T2, 1, 2))),
               "C": m([T1, T2])}
    assert run(uniform, members, HOM, {T1: 3, T2: 3}) == \
        {"A": exp(tp(T1, 0, 2)), "B": exp(tp(T1, 1), tp(T2, 1)), "C": exp(tp(T2, 0, 2))}


def test_uniform_homogeneous_member_removed():
    members = {"A": m([T1, T2], hm(tp(T1, 0), tp(T2, 0))), "B": m([T1, T2], hm(tp(T1, 1), tp(T2, 1)))}
    assert run(uniform, members, HOM, {T1: 3, T2: 3}) == \
        {"A": exp(tp(T1, 0), tp(T2, 0, 2)), "B": exp(tp(T1, 1, 2), tp(T2, 1))}


def test_uniform_homogeneous_subscription_removed_U6():
    members = {"A": m([T2], hm(tp(T1, 0), tp(T2, 0))), "B": m([T2], hm(tp(T1, 1), tp(T2, 1)))}
    assert run(uniform, members, HOM, {T1: 2, T2: 2}) == {"A": exp(tp(T2, 0)), "B": exp(tp(T2, 1))}


def test_uniform_homogeneous_balanced_group_is_left_alone_U5():
    # KAFKA-18688: A and C hold the two extra partitions; nobody moves
    members = {"A": m([T1], hm(tp(T1, 0, 3))), "B": m([T1, T2], hm(tp(T1, 1))),
               "C": m([T1, T2], hm(tp(T1, 2, 4)))}
    assert run(uniform, members, HOM, {T1: 5}) == \
        {"A": exp(tp(T1, 0, 3)), "B": exp(tp(T1, 1)), "C": exp(tp(T1, 2, 4))}


# -- UniformHeterogeneousAssignmentBuilderTest --------------------------------------------------

def test_uniform_heterogeneous_no_subscription_and_missing_topics():
    assert run(uniform, {"A": m([]), "B": m([])}, HET, {T1: 3}) == {}
    with pytest.raises(PartitionAssignorError):
        run(uniform, {"A": m([T3]), "B": m([T2])}, HET, {T1: 3})


def test_uniform_heterogeneous_first_assignments_H1():
    assert run(uniform, {"A": m([T1, T3]), "B": m([T3])}, HET, {T1: 3, T3: 6}) == \
        {"A": exp(tp(T1, 0, 1, 2), tp(T3, 4)), "B": exp(tp(T3, 0, 1, 2, 3, 5))}
    assert run(uniform, {"A": m([T3]), "B": m([T3]), "C": m([T1])}, HET, {T1: 2, T3: 1}) == \
        {"A": exp(tp(T3, 0)), "B": {}, "C": exp(tp(T1, 0, 1))}
    # KAFKA-16930: a member without subscription
    assert run(uniform, {"A": m([T1]), "B": m([])}, HET, {T1: 3}) == {"A": exp(tp(T1, 0, 1, 2)), "B": {}}


def test_uniform_heterogeneous_unbalanced_previous_H2():
    members = {"A": m([T1], hm(tp(T1, 0, 1, 2))),
               "B": m([T1, T2], hm(tp(T1, 3), tp(T2, 0))),
               "C": m([T1, T2, T3], hm(tp(T1, 4, 5), tp(T2, 1, 2, 3), tp(T3, 0, 1, 2, 3)))}
    assert run(uniform, members, HET, {T1: 6, T2: 4, T3: 4}) == \
        {"A": exp(tp(T1, 0, 1, 2, 5)), "B": exp(tp(T1, 3), tp(T2, 0, 1, 2, 3)),
         "C": exp(tp(T1, 4), tp(T3, 0, 1, 2, 3))}


def test_uniform_heterogeneous_partitions_added():
    members = {"A": m([T1, T3], hm(tp(T1, 0, 1, 2, 3), tp(T3, 0, 1))),
               "B": m([T1, T2, T3, T4], hm(tp(T2, 0, 1, 2), tp(T4, 0, 1, 2)))}
    assert run(uniform, members, HET, {T1: 6, T2: 5, T3: 3, T4: 3}) == \
        {"A": exp(tp(T1, 0, 1, 2, 3, 4, 5), tp(T3, 0, 1, 2)),
         "B": exp(tp(T2, 0, 1, 2, 3, 4), tp(T4, 0, 1, 2))}


def test_uniform_heterogeneous_member_and_partitions_added():
    members = {"A": m([T1], hm(tp(T1, 0, 2), tp(T2, 0))),
               "B": m([T1, T2], hm(tp(T1, 1), tp(T2, 1, 2))),
               "C": m([T1, T2])}
    assert run(uniform, members, HET, {T1: 6, T2: 7}) == \
        {"A": exp(tp(T1, 0, 2, 3, 4, 5)), "B": exp(tp(T1, 1), tp(T2, 1, 2, 6)),
         "C": exp(tp(T2, 0, 3, 4, 5))}


def test_uniform_heterogeneous_member_removed_H4():
    members = {"A": m([T1, T3], hm(tp(T1, 0, 1, 2), tp(T3, 0, 1))), "B": m([T2], hm(tp(T2, 3, 4, 5, 6)))}
    assert run(uniform, members, HET, {T1: 3, T2: 8, T3: 3}) == \
        {"A": exp(tp(T1, 0, 1, 2), tp(T3, 0, 1, 2)), "B": exp(tp(T2, 0, 1, 2, 3, 4, 5, 6, 7))}


def test_uniform_heterogeneous_subscription_removed():
    members = {"A": m([T1], hm(tp(T1, 0, 2), tp(T2, 1, 3))), "B": m([T1, T2], hm(tp(T1, 1), tp(T2, 0, 2, 4)))}
    assert run(uniform, members, HET, {T1: 3, T2: 5}) == \
        {"A": exp(tp(T1, 0, 1, 2)), "B": exp(tp(T2, 0, 1, 2, 3, 4))}


def test_uniform_heterogeneous_partitions_run_out_H3():
    members = {"A": m([T1, T2, T3], hm(tp(T1, 0, 1), tp(T2, 0, 1), tp(T3, 0, 1))), "B": m([T1, T2, T3])}
    assert run(uniform, members, HET, {T1: 2, T2: 2, T3: 2}) == \
        {"A": exp(tp(T2, 0), tp(T3, 0, 1)), "B": exp(tp(T1, 0, 1), tp(T2, 1))}


# -- RangeAssignorTest ---------------------------------------------------------------------------

def test_range_first_assignments_R1_R2():
    assert run(range_, {"A": m([])}, HOM, {}) == {"A": {}}
    with pytest.raises(PartitionAssignorError):
        run(range_, {"A": m([T2])}, HOM, {T1: 3})
    assert run(range_, {"A": m([T1, T3]), "B": m([T1, T3])}, HOM, {T1: 3, T3: 2}) == \
        {"A": exp(tp(T1, 0, 1), tp(T3, 0)), "B": exp(tp(T1, 2), tp(T3, 1))}
    assert run(range_, {"A": m([T1, T2]), "B": m([T3]), "C": m([T2, T3])}, HET, {T1: 3, T2: 3, T3: 2}) == \
        {"A": exp(tp(T1, 0, 1, 2), tp(T2, 0, 1)), "B": exp(tp(T3, 0)), "C": exp(tp(T2, 2), tp(T3, 1))}
    assert run(range_, {k: m([T1, T3]) for k in "ABC"}, HOM, {T1: 3, T3: 2}) == \
        {"A": exp(tp(T1, 0), tp(T3, 0)), "B": exp(tp(T1, 1), tp(T3, 1)), "C": exp(tp(T1, 2))}


def test_range_static_members_R3():
    members = {"A": m([T1], instance="instanceA"), "B": m([T1], instance="instanceB")}
    first = run(range_, members, HOM, {T1: 3})
    del members["A"]
    members["memberA1"] = m([T1], instance="instanceA")
    again = run(range_, members, HOM, {T1: 3})
    assert again["memberA1"] == first["A"] and again["B"] == first["B"]
    members = {"A": m([T1], instance="instanceA"), "C": m([T1], instance="instanceC"), "B": m([T1])}
    first = run(range_, members, HOM, {T1: 5})
    assert first == {"A": exp(tp(T1, 0, 1)), "C": exp(tp(T1, 2, 3)), "B": exp(tp(T1, 4))}
    del members["A"]
    members["memberA1"] = m([T1], instance="instanceA")
    again = run(range_, members, HOM, {T1: 5})
    assert (again["memberA1"], again["B"], again["C"]) == (first["A"], first["B"], first["C"])


def test_range_reassignments_ignore_stored_targets():
    prev = {"A": hm(tp(T1, 0), tp(T2, 0)), "B": hm(tp(T1, 1), tp(T2, 1))}
    assert run(range_, {"A": m([T1, T2], prev["A"]), "B": m([T1, T2], prev["B"]), "C": m([T1, T2])},
               HOM, {T1: 2, T2: 2}) == \
        {"A": exp(tp(T1, 0), tp(T2, 0)), "B": exp(tp(T1, 1), tp(T2, 1)), "C": {}}
    prev = {"A": hm(tp(T1, 0, 1), tp(T2, 0, 1)), "B": hm(tp(T1, 2), tp(T2, 2))}
    assert run(range_, {"A": m([T1, T2], prev["A"]), "B": m([T1, T2], prev["B"])}, HOM, {T1: 4, T2: 4}) == \
        {"A": exp(tp(T1, 0, 1), tp(T2, 0, 1)), "B": exp(tp(T1, 2, 3), tp(T2, 2, 3))}
    assert run(range_, {"A": m([T1, T2], prev["A"]), "B": m([T1, T2], prev["B"]), "C": m([T1, T2])},
               HOM, {T1: 3, T2: 3}) == \
        {"A": exp(tp(T1, 0), tp(T2, 0)), "B": exp(tp(T1, 1), tp(T2, 1)), "C": exp(tp(T1, 2), tp(T2, 2))}
    assert run(range_, {"A": m([T1, T2], prev["A"]), "B": m([T1, T2], prev["B"]), "C": m([T1])},
               HET, {T1: 4, T2: 3}) == \
        {"A": exp(tp(T1, 0, 1), tp(T2, 0, 1)), "B": exp(tp(T1, 2), tp(T2, 2)), "C": exp(tp(T1, 3))}
    assert run(range_, {"B": m([T1, T2], prev["B"])}, HOM, {T1: 3, T2: 3}) == \
        {"B": exp(tp(T1, 0, 1, 2), tp(T2, 0, 1, 2))}
    members = {"A": m([T1], hm(tp(T1, 0, 1, 2), tp(T2, 0))), "B": m([T1, T2, T3], hm(tp(T2, 1))),
               "C": m([T2], hm(tp(T2, 2), tp(T3, 0, 1)))}
    assert run(range_, members, HET, {T1: 3, T2: 3, T3: 2}) == \
        {"A": exp(tp(T1, 0, 1)), "B": exp(tp(T1, 2), tp(T2, 0, 1), tp(T3, 0, 1)), "C": exp(tp(T2, 2))}


def test_range_sorts_member_ids_in_utf16_order():
    # U+1F600 is a surrogate pair (0xD83D...), below U+FFFD in Java's String.compareTo
    members = {"\ufffd": m([T1]), "\U0001F600": m([T1])}
    assert run(range_, members, HOM, {T1: 2}) == {"\U0001F600": exp(tp(T1, 0)), "\ufffd": exp(tp(T1, 1))}


# -- properties ----------------------------------------------------------------------------------

TOPICS = [uuid.UUID(int=random.Random(i).getrandbits(128)) for i in range(6)]


def _check(result, members, partitions, kind, *, balanced):
    owners = {}
    for mid, a in result.items():
        for t, ps in a.items():
            assert t in members[mid].topics, "a partition of a topic the member does not subscribe"
            for p in ps:
                assert 0 <= p < partitions[t]
                assert (t, p) not in owners, f"{t}-{p} assigned twice"
                owners[(t, p)] = mid
    subscribed = {t for s in members.values() for t in s.topics}
    assert set(owners) == {(t, p) for t in subscribed for p in range(partitions[t])}, \
        "a subscribed partition left unassigned"
    if balanced:
        sizes = [sum(len(ps) for ps in result.get(mid, {}).values()) for mid in members]
        assert max(sizes) - min(sizes) <= 1
    return owners


@st.composite
def groups(draw, homogeneous):
    n_topics = draw(st.integers(1, 4))
    topics = TOPICS[:n_topics]
    partitions = {t: draw(st.integers(1, 12)) for t in topics}
    n = draw(st.integers(1, 7))
    if homogeneous:
        subs = [tuple(topics)] * n
    else:
        subs = [tuple(t for t in topics if draw(st.booleans())) for _ in range(n)]
    return topics, partitions, [f"m{i}" for i in range(n)], subs


def _random_previous(rng, mids, subs, partitions):
    """A previous target that is a valid assignment (each partition once), some left free."""
    prev = {mid: {} for mid in mids}
    for t, n in partitions.items():
        for p in range(n):
            cands = [mid for mid, s in zip(mids, subs) if t in s]
            if cands and rng.random() < 0.7:
                prev[rng.choice(cands)].setdefault(t, []).append(p)
    return prev


FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(groups(True), st.integers(0, 2**32))
def test_uniform_homogeneous_is_valid_balanced_and_sticky(group, seed):
    topics, partitions, mids, subs = group
    rng = random.Random(seed)
    prev = _random_previous(rng, mids, subs, partitions)
    members = {mid: m(s, {t: sorted(ps) for t, ps in prev[mid].items()}) for mid, s in zip(mids, subs)}
    result = run(uniform, members, HOM, partitions)
    _check(result, members, partitions, HOM, balanced=True)
    # sticky: a member keeps min(its previous count, its quota) of its previous partitions
    total = sum(partitions.values())
    quota = -(-total // len(mids))
    for mid in mids:
        kept = sum(len(set(ps) & result[mid].get(t, set())) for t, ps in prev[mid].items())
        had = sum(len(ps) for ps in prev[mid].values())
        assert kept >= min(had, total // len(mids)), (mid, kept, had, quota)
    # a second run over its own output changes nothing
    again = run(uniform, {mid: m(s, {t: sorted(p) for t, p in result[mid].items()})
                          for mid, s in zip(mids, subs)}, HOM, partitions)
    assert again == result


@FAST
@given(groups(False), st.integers(0, 2**32))
def test_uniform_heterogeneous_is_valid_and_stable(group, seed):
    topics, partitions, mids, subs = group
    rng = random.Random(seed)
    prev = _random_previous(rng, mids, subs, partitions)
    members = {mid: m(s, {t: sorted(ps) for t, ps in prev[mid].items()}) for mid, s in zip(mids, subs)}
    result = run(uniform, members, HET, partitions)
    if not any(subs):
        assert result == {}
        return
    _check(result, members, partitions, HET, balanced=False)
    # no partition can move to a subscriber with 2+ fewer partitions (Kafka's balance check)
    sizes = {mid: sum(len(p) for p in result[mid].values()) for mid in mids}
    for mid in mids:
        for t in result[mid]:
            for other, s in zip(mids, subs):
                if t in s:
                    assert sizes[mid] - sizes[other] <= 1 or not result[mid][t], (mid, other, t)
    again = run(uniform, {mid: m(s, {t: sorted(p) for t, p in result[mid].items()})
                          for mid, s in zip(mids, subs)}, HET, partitions)
    assert again == result


@FAST
@given(groups(False))
def test_range_is_valid_and_contiguous(group):
    topics, partitions, mids, subs = group
    members = {mid: m(s) for mid, s in zip(mids, subs)}
    kind = HOM if len(set(subs)) == 1 else HET
    result = run(range_, members, kind, partitions)
    assert set(result) == set(mids)
    _check(result, members, partitions, kind, balanced=False)
    for a in result.values():
        for ps in a.values():
            assert sorted(ps) == list(range(min(ps), max(ps) + 1))


def test_registry_names():
    assert list(ASSIGNORS) == ["uniform", "range"]


def test_large_homogeneous_group_is_fast_and_balanced():
    # testValidityAndBalanceForLargeSampleSet: 100 topics of 3 partitions, 49 members
    rng = random.Random(5)
    topics = [uuid.UUID(int=rng.getrandbits(128)) for _ in range(100)]
    partitions = {t: 3 for t in topics}
    members = {f"member{i}": m(topics) for i in range(1, 50)}
    result = run(uniform, members, HOM, partitions)
    _check(result, members, partitions, HOM, balanced=True)
    result = run(uniform, members, HET, partitions)
    _check(result, members, partitions, HET, balanced=True)
